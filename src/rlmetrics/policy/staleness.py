"""Off-policy and asynchronous staleness: version lag, spans, ages, dropped samples and their cost.

In an asynchronous pipeline (verl's fully-async and v1 trainers, prime-rl, slime, AReaL,
PipelineRL) the generator runs ahead of the trainer: a sample written by policy version ``v`` is
trained on by version ``current_version``, ``lag = current_version - v`` updates later. With
partial rollouts one trajectory is written by several versions (per-token versions): its
**lag** is that of its oldest token (the worst case, slime's ``staleness``, verl's
``trajectory_staleness_worst``), its **newest lag** that of its newest token (verl's
``trajectory_staleness``) and its **span** ``newest - oldest + 1`` versions (verl's
``trajectory_spans``; ``1``: written by one version).

Lags fall in fixed buckets, the same at every step so that their shares chart as a
distribution (:data:`LAG_BUCKETS`): ``0``, ``1``, ``2``, ``3_4`` (lags 3-4), ``5_8`` (5-8) and
``9_plus`` (9 and more).

Beside the lag, the module reports what the lag costs: the mean importance weight, the share of
weights above the truncation threshold ``rollout_is_threshold`` (verl's
``rollout_is_ratio_fraction_high``: the weights truncated-importance-sampling caps) and the
largest weight, the k3 KL between the training and rollout engines, the reward and the response
length of the samples of each bucket, and the length and reward of the samples trained on
against those generated (dropping stale groups biases training toward fast, short rollouts).

Every metric is a function of sums, counts, maxima and minima (:func:`staleness_statistics`),
so micro-batches (:meth:`~rlmetrics._core.stats.Stats.merge`) and ranks
(:meth:`~rlmetrics._core.stats.Stats.all_reduce`) combine exactly.

Peers' names (``peer_names=``, :data:`PEER_KEYS`), added beside rlmetrics' keys with the same
values (rlmetrics' keys under the default prefix ``staleness/``):

* verl: ``training/off_policy/trajectory_spans/{mean,max,min}`` = ``spans/*``;
  ``training/off_policy/trajectory_staleness/*`` = ``lag_newest/*``;
  ``training/off_policy/trajectory_staleness_worst/*`` = ``lag/*``.
* prime-rl: ``off_policy/{mean,max}`` = ``lag/{mean,max}``; ``off_policy/dropped`` =
  ``dropped/count``.
* slime: ``rollout/staleness/{mean,max}`` = ``lag/{mean,max}`` (the lag of a sample's oldest
  token); ``rollout/staleness/multi_version_frac`` = ``multi_version_share``.
* NeMo-RL (async GRPO, ``nemo_rl/algorithms/async_utils/replay_buffer.py`` and
  ``nemo_rl/algorithms/grpo.py``): ``avg_trajectory_age`` (``train/avg_trajectory_age`` as its
  loggers write it) = ``lag/mean``: the trainer's weight version minus the mean generation
  version of the prompt groups trained on, a group's version being the one its generation
  started with (its oldest token's). Its groups hold ``num_generations_per_prompt`` samples
  each, so the mean over groups is the mean over samples. Pass NeMo-RL's ``weight_version`` as
  ``current_version``.

verl computes its lags against ``global_steps - 1``: pass ``current_version=global_steps - 1``
with its ``min_global_steps`` as ``versions`` and ``max_global_steps`` as ``newest_versions``.
Not written under verl's names: its replay buffer's ``training/off_policy/evicted_samples`` counts
evicted prompt *groups* (``dropped/count`` counts samples), and ``evicted_samples_staleness/*`` is
a prompt's dispatch age plus one (``global_steps - dispatch step + 1``), not the lag of its oldest
token; the health rules read verl's count as it is (:mod:`rlmetrics.health.signals`).
Not mapped: prime-rl's ``off_policy/in_flight/*`` and ``off_policy/in_queue/*`` count policy
steps, not seconds (rlmetrics' ages are seconds), and PipelineRL's ``stats/lag`` family, whose
definition could not be checked.
Not mapped either, AReaL's PPO actor (``areal/trainer/ppo/actor.py``): its
``ppo_actor/update/version_stats/sample_staleness_theta_{avg,max,min}`` are, on one micro-batch,
``token_lag/mean``, ``lag/max`` and ``lag_newest/min`` over the tokens its rejection sampling
keeps, but its stats tracker logs a step as the plain mean of its micro-batches' values (a
``SCALAR`` reduce): a mean of means and a mean of maxima, where rlmetrics' values are those of the
whole step, so the two would chart different numbers on one run. The health rules read its
``_avg`` as a lag all the same (:mod:`rlmetrics.health.signals`). Its
``sample_staleness_proximal_*`` measure against ``current_version - 1`` (the decoupled-PPO
proximal policy; ``-1`` for tokens of the current version), which no rlmetrics lag does; and
``ppo_actor/update/behave_imp_weight/{avg,max,min}`` is the whole batch's weight
``pi_proximal / pi_behave`` (clamped, or over the tokens kept, under its rejection sampling), not
a per-bucket statistic: the rollout-mismatch family
(:func:`~rlmetrics.policy.mismatch.compute_rollout_mismatch_metrics`) is its counterpart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlmetrics import keys as K
from rlmetrics._core.array import (
    as_float,
    check_finite_scalar,
    check_same_shape,
    cpu_block_rows,
    describe,
    is_array,
    is_torch_array,
    mask_and_invalid_count,
    prepare_arrays,
)
from rlmetrics._core.batch import as_batch
from rlmetrics._core.checks import check_int, check_real_dtype, warn_undefined
from rlmetrics._core.stats import (
    Stats,
    check_prefix,
    invalid_mask_field,
    metrics_from,
    with_prefix,
)
from rlmetrics.policy.mismatch import parse_is_threshold

__all__ = [
    "LAG_BUCKETS",
    "PEER_KEYS",
    "compute_staleness_metrics",
    "lag_bucket_labels",
    "staleness_statistics",
]

#: ``(label, lowest lag, highest lag or None)`` of the fixed lag buckets.
LAG_BUCKETS: tuple[tuple[str, int, int | None], ...] = tuple(
    zip(K.STALENESS_LAG_BUCKETS, (0, 1, 2, 3, 5, 9), (0, 1, 2, 4, 8, None))
)


def lag_bucket_labels(lags: Any) -> np.ndarray:
    """The :data:`LAG_BUCKETS` label of each sample's lag, for ``group_by=`` of another family.

    Every rollout/training mismatch metric per lag bucket, exact across ranks as any category:
    ``compute_rollout_mismatch_metrics(old, rollout, mask, group_by=lag_bucket_labels(lag),
    group_name="lag")`` (``by_lag/3_4/rollout_corr/k3_kl`` ...).

    Parameters
    ----------
    lags : array-like of int, shape (B,)
        Each sample's lag in policy versions (>= 0): the trainer's version less the sample's
        (its oldest token's, where a rollout spans versions).

    Returns
    -------
    numpy.ndarray of str, shape (B,)

    Examples
    --------
    >>> lag_bucket_labels([0, 1, 3, 4, 7, 12]).tolist()
    ['0', '1', '3_4', '3_4', '5_8', '9_plus']
    """
    arr = np.asarray(lags.cpu() if is_torch_array(lags) else lags)
    if arr.ndim != 1 or not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_):
        raise TypeError(f"lags must be a 1-d array of integers; got {arr.dtype} of shape {arr.shape}")
    if arr.size and int(arr.min()) < 0:
        raise ValueError(
            f"lags must be >= 0 (a sample newer than the trainer's version?); got {int(arr.min())}"
        )
    labels = np.array([label for label, _, _ in LAG_BUCKETS])
    lows = np.array([lo for _, lo, _ in LAG_BUCKETS])
    return labels[np.searchsorted(lows, arr.astype(np.int64), side="right") - 1]


#: ``peer -> ((peer key, rlmetrics key under the default prefix), ...)``: see the module docstring.
PEER_KEYS: dict[str, tuple[tuple[str, str], ...]] = {
    "verl": (
        (K.VERL_TRAJECTORY_SPANS_MEAN, K.STALENESS_SPANS_MEAN),
        (K.VERL_TRAJECTORY_SPANS_MAX, K.STALENESS_SPANS_MAX),
        (K.VERL_TRAJECTORY_SPANS_MIN, K.STALENESS_SPANS_MIN),
        (K.VERL_TRAJECTORY_STALENESS_MEAN, K.STALENESS_LAG_NEWEST_MEAN),
        (K.VERL_TRAJECTORY_STALENESS_MAX, K.STALENESS_LAG_NEWEST_MAX),
        (K.VERL_TRAJECTORY_STALENESS_MIN, K.STALENESS_LAG_NEWEST_MIN),
        (K.VERL_TRAJECTORY_STALENESS_WORST_MEAN, K.STALENESS_LAG_MEAN),
        (K.VERL_TRAJECTORY_STALENESS_WORST_MAX, K.STALENESS_LAG_MAX),
        (K.VERL_TRAJECTORY_STALENESS_WORST_MIN, K.STALENESS_LAG_MIN),
    ),
    "prime-rl": (
        (K.PRIME_RL_OFF_POLICY_MEAN, K.STALENESS_LAG_MEAN),
        (K.PRIME_RL_OFF_POLICY_MAX, K.STALENESS_LAG_MAX),
        (K.PRIME_RL_OFF_POLICY_DROPPED, K.STALENESS_DROPPED_COUNT),
    ),
    "slime": (
        (K.SLIME_STALENESS_MEAN, K.STALENESS_LAG_MEAN),
        (K.SLIME_STALENESS_MAX, K.STALENESS_LAG_MAX),
        (K.SLIME_STALENESS_MULTI_VERSION_FRAC, K.STALENESS_MULTI_VERSION_SHARE),
    ),
    # NVIDIA-NeMo/RL, nemo_rl/algorithms/async_utils/replay_buffer.py (ReplayBuffer.sample:
    # current_weight_version - mean of the sampled groups' generation weight versions), logged by
    # nemo_rl/algorithms/grpo.py (async_grpo_train: metrics["avg_trajectory_age"], prefix "train").
    "nemo-rl": ((K.NEMO_RL_AVG_TRAJECTORY_AGE, K.STALENESS_LAG_MEAN),),
}

_MASK = "response_mask"
SAFETY_BOUND = 20.0  # log ratios clamped to [-20, 20] before exponentiating, as in policy.mismatch
_TIME_PAIRS = (  # (metric name, earlier timestamps, later timestamps)
    ("in_flight", "start_times", "enqueue_times"),
    ("in_queue", "enqueue_times", "dequeue_times"),
    ("age", "enqueue_times", "train_time"),
)
_TIME_PAIRS_NAMES = ("start_times", "enqueue_times", "dequeue_times")
_PER_SAMPLE = (
    "newest_versions",
    "rewards",
    "response_lengths",
    "start_times",
    "enqueue_times",
    "dequeue_times",
)
_DROPPED = ("dropped_versions", "dropped_lengths", "dropped_rewards")
_ROW_MAXES = frozenset({"w_max"})  # per-row quantities reduced per bucket by a maximum, not a sum


def _versions_of(xp: Any, x: Any, name: str, valid: Any = None) -> Any:
    """``x`` as int64 versions, or a ``TypeError`` / ``ValueError`` naming ``name``.

    Integer arrays, and floating arrays holding whole numbers (at the entries ``valid`` selects).
    """
    if x.dtype == xp.bool or not (xp.isdtype(x.dtype, "integral") or xp.isdtype(x.dtype, "real floating")):
        raise TypeError(f"{name} must hold integer policy versions; got {describe(x)}")
    if xp.isdtype(x.dtype, "real floating"):
        x = as_float(x, xp)
        if valid is not None:
            x = xp.where(valid, x, xp.zeros_like(x))
        if x.shape[0] and not bool(xp.all(xp.isfinite(x) & (x == xp.floor(x)))):
            raise ValueError(
                f"{name} must hold whole numbers (policy versions); got fractional or NaN entries"
            )
    return xp.astype(x, xp.int64)


def _check_not_newer(xp: Any, newest: Any, current: int, name: str) -> None:
    """A version newer than the trainer's is a negative lag: a ``ValueError`` naming ``name``."""
    if newest.shape[0] and int(xp.max(newest)) > current:
        raise ValueError(
            f"{name} holds version {int(xp.max(newest))}, newer than current_version={current} "
            "(a negative lag: is current_version the version being trained?)"
        )


def _row_high_and_max(xp: Any, w: Any, upper: float) -> tuple[Any, Any]:
    """Per row of ``(B, R)`` weights, zero outside the mask: how many exceed ``upper``, and the
    largest (float64). The zeros need no mask: weights are >= 0 and ``upper`` > 0, so a padding
    zero is never above ``upper`` nor above a selected weight (a row selecting none reads 0, and
    counts for nothing: its bucket's weights are reported only when it has tokens)."""
    f64 = xp.float64
    high = xp.astype(xp.count_nonzero(w > upper, axis=-1), f64)
    if w.shape[-1] == 0:  # zero-width responses: max over an empty axis has no identity
        return high, xp.zeros_like(high)
    return high, xp.astype(xp.max(w, axis=-1), f64)


def _block_rows(
    xp: Any, a: dict[str, Any], rows: slice, m: Any, current: int, upper: float
) -> dict[str, Any]:
    """Per-row quantities of one row block of the ``(B, R)`` inputs (``m``: the block's mask;
    ``upper``: the importance-weight truncation threshold)."""
    f64 = xp.float64
    tok_i = xp.count_nonzero(m, axis=-1)
    out: dict[str, Any] = {"tok": xp.astype(tok_i, f64)}
    if a["versions"].ndim == 2:
        if m.shape[0] and (m.shape[1] == 0 or int(xp.min(tok_i)) == 0):
            row = rows.start + (0 if m.shape[1] == 0 else int(xp.argmin(tok_i)))
            raise ValueError(
                f"response_mask selects no token in row {row}: per-token versions need at least one "
                "response token per sample (drop empty rows, or pass one version per sample)"
            )
        v = _versions_of(xp, a["versions"][rows, ...], "versions", m)
        if m.shape[0]:
            out["oldest"] = xp.min(xp.where(m, v, xp.full_like(v, current + 1)), axis=-1)
            out["newest"] = xp.max(xp.where(m, v, xp.full_like(v, -(2**62))), axis=-1)
        else:
            out["oldest"] = out["newest"] = xp.astype(tok_i, xp.int64)
        out["tok_lag"] = current * out["tok"] - xp.astype(
            xp.sum(xp.where(m, v, xp.zeros_like(v)), axis=-1), f64
        )
    w = a["importance_weights"]
    if w is not None and w.ndim == 2:
        wb = as_float(w[rows, ...], xp)
        wb = xp.where(m, wb, xp.zeros_like(wb))  # padding may hold anything
        if wb.shape[0] and not bool(xp.all(xp.isfinite(wb) & (wb >= 0))):
            raise ValueError("importance_weights must be finite and >= 0")
        out["w"], out["w_units"] = xp.astype(xp.sum(wb, axis=-1), f64), out["tok"]
        out["w_high"], out["w_max"] = _row_high_and_max(xp, wb, upper)
    if a["old_log_probs"] is not None:
        o, r = as_float(a["old_log_probs"][rows, ...], xp), as_float(a["rollout_log_probs"][rows, ...], xp)
        work = xp.float64 if xp.float64 in (o.dtype, r.dtype) else xp.float32
        o, r = xp.astype(o, work, copy=False), xp.astype(r, work, copy=False)
        lr = xp.clip(xp.where(m, o - r, xp.zeros_like(o)), min=-SAFETY_BOUND, max=SAFETY_BOUND)
        k3 = xp.sum(xp.expm1(lr) - lr, axis=-1)  # 0 at the masked-out tokens, where lr = 0
        if bool(xp.any(xp.isnan(k3))):
            raise ValueError(
                "old_log_probs or rollout_log_probs hold NaN at tokens selected by response_mask"
            )
        out["k3"], out["k3_tok"] = xp.astype(k3, f64), out["tok"]
        if w is None:
            rho = xp.where(m, xp.exp(lr), xp.zeros_like(lr))
            out["w"], out["w_units"] = xp.astype(xp.sum(rho, axis=-1), f64), out["tok"]
            out["w_high"], out["w_max"] = _row_high_and_max(xp, rho, upper)
    return out


def _token_rows(
    xp: Any, a: dict[str, Any], mask: Any, current: int, upper: float, on_cpu: bool
) -> dict[str, Any]:
    """Per-row quantities of the ``(B, R)`` inputs, in cache-sized row blocks on the CPU."""
    if mask is None:
        return {}
    n_rows, width = mask.shape
    step = cpu_block_rows(n_rows, width, on_cpu)
    parts = [
        _block_rows(xp, a, slice(s, s + step), mask[s : s + step, ...], current, upper)
        for s in range(0, max(n_rows, 1), step)
    ]
    return {k: parts[0][k] if len(parts) == 1 else xp.concat([p[k] for p in parts]) for k in parts[0]}


def _sample_rows(
    xp: Any, a: dict[str, Any], rows: dict[str, Any], current: int, upper: float
) -> tuple[Any, Any]:
    """(oldest, newest) version per sample; per-sample weights, rewards and lengths into ``rows``."""
    if a["versions"].ndim == 2:
        oldest, newest = rows.pop("oldest"), rows.pop("newest")
    else:
        oldest = newest = _versions_of(xp, a["versions"], "versions")
        if a["newest_versions"] is not None:
            newest = _versions_of(xp, a["newest_versions"], "newest_versions")
            if oldest.shape[0] and bool(xp.any(newest < oldest)):
                raise ValueError("newest_versions must be >= versions (the oldest version) in every row")
        if "tok" in rows:
            rows["tok_lag"] = rows["tok"] * xp.astype(current - oldest, xp.float64)
    _check_not_newer(
        xp, newest, current, "newest_versions" if a["newest_versions"] is not None else "versions"
    )
    w = a["importance_weights"]
    if w is not None and w.ndim == 1:
        w = xp.astype(as_float(w, xp), xp.float64)
        if w.shape[0] and not bool(xp.all(xp.isfinite(w) & (w >= 0))):
            raise ValueError("importance_weights must be finite and >= 0")
        rows["w"], rows["w_units"] = w, xp.ones_like(w)
        rows["w_high"], rows["w_max"] = xp.astype(w > upper, xp.float64), w
    if a["rewards"] is not None:
        rows["r"] = _finite_per_sample(xp, a["rewards"], "rewards")
    if a["response_lengths"] is not None:
        rows["len"] = _finite_per_sample(xp, a["response_lengths"], "response_lengths")
    elif "tok" in rows:
        rows["len"] = rows["tok"]
    return oldest, newest


def _extremes(xp: Any, x: Any) -> tuple[Any, Any]:
    """(max, min) of a float64 vector; -inf / inf for an empty one."""
    if x.shape[0] == 0:
        return -math.inf, math.inf
    return xp.max(x), xp.min(x)


def _bucket_sums(xp: Any, lag: Any, rows: Mapping[str, Any], sums: dict[str, Any], maxes: dict) -> None:
    """Per-bucket counts and sums of the per-row quantities ``rows`` (name -> (B,) float64), and
    the per-bucket maxima of those in :data:`_ROW_MAXES` (``-inf`` for an empty bucket)."""
    zero = xp.zeros_like(xp.astype(lag, xp.float64))
    for label, lo, hi in LAG_BUCKETS:
        inside = lag >= lo if hi is None else (lag >= lo) & (lag <= hi)
        sums[f"n/{label}"] = xp.sum(xp.astype(inside, xp.float64))
        for name, x in rows.items():
            if name not in _ROW_MAXES:
                sums[f"{name}/{label}"] = xp.sum(xp.where(inside, x, zero))
            else:
                maxes[f"{name}/{label}"] = xp.max(xp.where(inside, x, -math.inf)) if x.shape[0] else -math.inf


def _finite_per_sample(xp: Any, x: Any, name: str) -> Any:
    x = xp.astype(as_float(x, xp), xp.float64)
    if x.shape[0] and not bool(xp.all(xp.isfinite(x))):
        raise ValueError(f"{name} must be finite")
    if name.endswith("lengths") and x.shape[0] and bool(xp.any(x < 0)):
        raise ValueError(f"{name} must be >= 0")
    return x


def _timestamps(xp: Any, x: Any, name: str) -> Any:
    """Timestamps as float64 seconds; a ``ValueError`` for narrow floats too coarse to hold them.

    float32 holds 24 bits: epoch seconds (~1.7e9) come rounded to 128 s, which would turn ages of
    seconds into multiples of minutes.
    """
    if xp.isdtype(x.dtype, "real floating") and x.dtype != xp.float64 and x.shape[0]:
        if float(xp.max(xp.abs(as_float(x, xp)))) >= 2.0**24:
            raise ValueError(
                f"{name} are {x.dtype} values of {float(xp.max(xp.abs(as_float(x, xp)))):.3g} s: too coarse "
                "for seconds (float32 resolution there is over 1 s); pass float64, or times from a "
                "nearer origin (time.monotonic(), or seconds since the run started)"
            )
    return _finite_per_sample(xp, x, name)


def _time_sums(xp: Any, a: dict[str, Any], train_time: float | None, sums: dict, maxes: dict) -> tuple:
    """Sums and maxima of the ages in flight, in queue and since enqueue; the pairs present."""
    times = {n: None if a[n] is None else _timestamps(xp, a[n], n) for n in _TIME_PAIRS_NAMES}
    present = []
    for metric, early, late in _TIME_PAIRS:
        t0 = times[early]
        t1 = train_time if late == "train_time" else times[late]
        if t0 is None or t1 is None:
            continue
        d = t1 - t0
        if d.shape[0] and float(xp.min(d)) < 0:
            raise ValueError(
                f"{late} must not precede {early}; a sample has {late} - {early} = {float(xp.min(d))}"
            )
        sums[f"age/{metric}"] = xp.sum(d)
        maxes[f"age/{metric}"] = _extremes(xp, d)[0]
        present.append(metric)
    return tuple(present)


def _dropped_sums(xp: Any, a: dict[str, Any], current: int, sums: dict, maxes: dict, mins: dict) -> tuple:
    """Count, lag, length and reward sums of the dropped / evicted samples; the inputs present."""
    present = tuple(n for n in _DROPPED if a[n] is not None)
    if not present:
        return present
    sizes = {n: a[n].shape for n in present}
    if any(len(s) != 1 for s in sizes.values()) or len({s[0] for s in sizes.values()}) > 1:
        raise ValueError(f"dropped_* arrays must be 1-D of one length; got shapes {sizes}")
    sums["d_n"] = float(sizes[present[0]][0])
    if a["dropped_versions"] is not None:
        dv = _versions_of(xp, a["dropped_versions"], "dropped_versions")
        _check_not_newer(xp, dv, current, "dropped_versions")
        lag = xp.astype(current - dv, xp.float64)
        sums["d_lag"] = xp.sum(lag)
        maxes["d_lag"], mins["d_lag"] = _extremes(xp, lag)
    for name, field in (("dropped_lengths", "d_len"), ("dropped_rewards", "d_r")):
        if a[name] is not None:
            sums[field] = xp.sum(_finite_per_sample(xp, a[name], name))
    return present


def _read_versions(batch_or_arrays: Any, response_mask: Any, versions_key: str) -> tuple[Any, Any]:
    """The versions array and the response mask, from arrays or from a batch."""
    if is_array(batch_or_arrays):
        return batch_or_arrays, response_mask
    view = as_batch(batch_or_arrays, arg="batch_or_arrays")
    if view.has(versions_key):
        versions = view.tensor(versions_key, why="the behaviour-policy version of each sample or token")
    elif view.non_tensor(versions_key) is not None:
        versions = view.non_tensor(versions_key)
    else:
        versions = view.tensor(versions_key, why="the behaviour-policy version of each sample or token")
    if response_mask is None and getattr(versions, "ndim", 1) == 2:
        response_mask = view.get(_MASK)
    return versions, response_mask


def _like_the_tensors(versions: Any, given: Mapping[str, Any]) -> Any:
    """Versions read from a batch's non-tensor arrays (numpy: verl keeps per-sample fields in its
    ``non_tensor_batch``) as a tensor on the device of the torch inputs, if any."""
    tensor = next((x for x in given.values() if is_torch_array(x)), None)
    if not isinstance(versions, np.ndarray) or tensor is None:
        return versions
    import torch  # loaded: the inputs hold torch tensors

    return torch.as_tensor(versions, device=tensor.device)


def _check_shapes(a: dict[str, Any]) -> None:
    """Shapes of every input against ``versions`` (``(B,)`` or ``(B, R)``) and the mask."""
    v, m = a["versions"], a[_MASK]
    if v.ndim not in (1, 2):
        raise ValueError(f"versions must have shape (B,) or (B, R); got {describe(v)}")
    n_rows = v.shape[0]
    if v.ndim == 2:
        if m is None:
            raise ValueError("per-token versions of shape (B, R) need response_mask of the same shape")
        check_same_shape(m, v, _MASK, "versions")
    elif m is not None and (m.ndim != 2 or m.shape[0] != n_rows):
        raise ValueError(f"response_mask must have shape (B, R) with B = {n_rows}; got {describe(m)}")
    if (a["old_log_probs"] is None) != (a["rollout_log_probs"] is None):
        raise ValueError("old_log_probs and rollout_log_probs must be given together")
    for name in ("old_log_probs", "rollout_log_probs", "importance_weights"):
        x = a[name]
        if x is None or (name == "importance_weights" and x.ndim == 1):
            continue
        if m is None:
            raise ValueError(f"{name} of shape (B, R) needs response_mask")
        check_same_shape(x, m, name, _MASK)
    w = a["importance_weights"]
    for name in (*_PER_SAMPLE, *(("importance_weights",) if w is not None and w.ndim == 1 else ())):
        x = a[name]
        if x is not None and tuple(x.shape) != (n_rows,):
            raise ValueError(f"{name} must have shape ({n_rows},), one value per sample; got {describe(x)}")
    if a["newest_versions"] is not None and v.ndim == 2:
        raise ValueError("newest_versions is for per-sample versions; per-token versions give it themselves")
    for name, x in a.items():
        if x is not None and name not in ("versions", "newest_versions", "dropped_versions", _MASK):
            check_real_dtype(x, name)


def staleness_statistics(
    batch_or_arrays: Any,
    *,
    current_version: int,
    response_mask: Any = None,
    newest_versions: Any = None,
    importance_weights: Any = None,
    old_log_probs: Any = None,
    rollout_log_probs: Any = None,
    rewards: Any = None,
    response_lengths: Any = None,
    start_times: Any = None,
    enqueue_times: Any = None,
    dequeue_times: Any = None,
    train_time: Any = None,
    dropped_versions: Any = None,
    dropped_lengths: Any = None,
    dropped_rewards: Any = None,
    rollout_is_threshold: Any = 2.0,
    versions_key: str = "policy_versions",
    prefix: str = K.STALENESS_PREFIX,
) -> Stats:
    """Mergeable sums, counts, maxima and minima behind :func:`compute_staleness_metrics`.

    Arguments as :func:`compute_staleness_metrics`. The layout depends only on which optional
    inputs are given (never on the data), so a rank with an empty shard passes arrays with no
    rows and still joins the collectives of :meth:`~rlmetrics._core.stats.Stats.all_reduce`.
    """
    current = check_int(current_version, "current_version", minimum=0)
    upper, _ = parse_is_threshold(rollout_is_threshold)  # an IcePop lower bound is accepted, unused
    versions, mask_in = _read_versions(batch_or_arrays, response_mask, versions_key)
    given = {
        "versions": versions,
        _MASK: mask_in,
        "newest_versions": newest_versions,
        "importance_weights": importance_weights,
        "old_log_probs": old_log_probs,
        "rollout_log_probs": rollout_log_probs,
        "rewards": rewards,
        "response_lengths": response_lengths,
        "start_times": start_times,
        "enqueue_times": enqueue_times,
        "dequeue_times": dequeue_times,
        "dropped_versions": dropped_versions,
        "dropped_lengths": dropped_lengths,
        "dropped_rewards": dropped_rewards,
    }
    if not is_array(batch_or_arrays):
        given["versions"] = _like_the_tensors(versions, given)
    if not is_array(versions):
        raise TypeError(f"versions must be a numpy array or a torch tensor; got {type(versions).__name__}")
    xp, arrays, device, on_cpu = prepare_arrays(list(given.values()), list(given))
    a = dict(zip(given, arrays))
    _check_shapes(a)
    t_train = None if train_time is None else check_finite_scalar(train_time, "train_time")
    mask, n_invalid = (None, None) if a[_MASK] is None else mask_and_invalid_count(a[_MASK], _MASK)
    rows = _token_rows(xp, a, mask, current, upper, on_cpu)
    oldest, newest = _sample_rows(xp, a, rows, current, upper)
    options = {"is_threshold": upper, "prefix": check_prefix(prefix)}
    return _pack(xp, device, a, current, t_train, oldest, newest, rows, mask, n_invalid, options)


def _pack(
    xp: Any, device: Any, a: dict, current: int, t_train: float | None, oldest: Any, newest: Any,
    rows: dict[str, Any], mask: Any, n_invalid: Any, options: dict[str, Any],
) -> Stats:  # fmt: skip
    """The sums, maxima and minima of one batch, packed into :class:`Stats`."""
    lag_i = current - oldest
    lag = xp.astype(lag_i, xp.float64)
    lag_new = xp.astype(current - newest, xp.float64)
    spans = xp.astype(newest - oldest + 1, xp.float64)
    sums: dict[str, Any] = {"n": float(lag.shape[0]), "lag": xp.sum(lag), "lag_newest": xp.sum(lag_new)}
    sums["spans"], sums["multi"] = xp.sum(spans), xp.sum(xp.astype(spans > 1, xp.float64))
    maxes: dict[str, Any] = {}
    mins: dict[str, Any] = {}
    for name, x in (("lag", lag), ("lag_newest", lag_new), ("spans", spans)):
        maxes[name], mins[name] = _extremes(xp, x)
    if "tok" in rows:
        tok, tok_lag = rows.pop("tok"), rows.pop("tok_lag")
        sums["n_tok"], sums["tok_lag"] = xp.sum(tok), xp.sum(tok_lag)
    _bucket_sums(xp, lag_i, rows, sums, maxes)
    ages = _time_sums(xp, a, t_train, sums, maxes)
    dropped = _dropped_sums(xp, a, current, sums, maxes, mins)
    if mask is not None:
        sums[invalid_mask_field(_MASK)] = 0.0 if n_invalid is None else n_invalid
    options |= {
        "per_token": a["versions"].ndim == 2,
        "rows": tuple(sorted(rows)),
        "ages": ages,
        "dropped": dropped,
    }
    return Stats.pack(
        "staleness", sums, maxes, mins, finaliser=_finalize, options=options, xp=xp, device=device
    )


def _check_peers(peer_names: Any) -> tuple[str, ...]:
    if isinstance(peer_names, str):
        peer_names = (peer_names,)
    if not isinstance(peer_names, Sequence) or not all(isinstance(p, str) for p in peer_names):
        raise TypeError(f"peer_names must be a sequence of names such as ('verl',); got {peer_names!r}")
    unknown = [p for p in peer_names if p not in PEER_KEYS]
    if unknown:
        raise ValueError(f"peer_names holds unknown peers {unknown}; known: {sorted(PEER_KEYS)}")
    return tuple(peer_names)


def _bucket_metrics(
    s: dict[str, float], hi: dict[str, float], options: Mapping[str, Any], out: dict[str, float]
) -> None:
    """Share of each lag bucket, and the cost of the lag in the buckets that hold samples."""
    n, rows = s["n"], options["rows"]
    for label, _, _ in LAG_BUCKETS:
        cnt = s[f"n/{label}"]
        out[K.staleness_bucket(label, K.STALENESS_BUCKET_SHARE)] = cnt / n if n > 0 else math.nan
        if cnt == 0:
            continue  # an empty bucket is normal: its cost is left out, without a warning
        if "w" in rows and (units := s[f"w_units/{label}"]) > 0:
            out[K.staleness_bucket(label, K.STALENESS_BUCKET_IS_WEIGHT_MEAN)] = s[f"w/{label}"] / units
            high = s[f"w_high/{label}"] / units
            out[K.staleness_bucket(label, K.STALENESS_BUCKET_IS_WEIGHT_FRACTION_HIGH)] = high
            out[K.staleness_bucket(label, K.STALENESS_BUCKET_IS_WEIGHT_MAX)] = hi[f"w_max/{label}"]
        if "k3" in rows and s[f"k3_tok/{label}"] > 0:
            out[K.staleness_bucket(label, K.STALENESS_BUCKET_K3_KL)] = s[f"k3/{label}"] / s[f"k3_tok/{label}"]
        if "r" in rows:
            out[K.staleness_bucket(label, K.STALENESS_BUCKET_REWARD_MEAN)] = s[f"r/{label}"] / cnt
        if "len" in rows:
            out[K.staleness_bucket(label, K.STALENESS_BUCKET_LENGTH_MEAN)] = s[f"len/{label}"] / cnt


def _trained_vs_dropped(s: dict[str, float], options: Mapping[str, Any], out: dict[str, float]) -> None:
    """Dropped count, share and lag; length and reward of trained, dropped and generated samples."""
    n, rows, dropped = s["n"], options["rows"], options["dropped"]
    nan = math.nan
    for field, trained_key in (
        ("len", K.STALENESS_TRAINED_LENGTH_MEAN),
        ("r", K.STALENESS_TRAINED_REWARD_MEAN),
    ):
        if field in rows:
            total = sum(s[f"{field}/{label}"] for label, _, _ in LAG_BUCKETS)
            out[trained_key] = total / n if n > 0 else nan
    if not dropped:
        return
    d = s["d_n"]
    out[K.STALENESS_DROPPED_COUNT] = d
    out[K.STALENESS_DROPPED_SHARE] = d / (n + d) if n + d > 0 else nan
    if d > 0 and "dropped_versions" in dropped:
        out[K.STALENESS_DROPPED_LAG_MEAN] = s["d_lag"] / d
        out[K.STALENESS_DROPPED_LAG_MAX], out[K.STALENESS_DROPPED_LAG_MIN] = s["d_lag_max"], s["d_lag_min"]
    pairs = (
        (
            "dropped_lengths",
            "d_len",
            "len",
            K.STALENESS_DROPPED_LENGTH_MEAN,
            K.STALENESS_GENERATED_LENGTH_MEAN,
        ),
        ("dropped_rewards", "d_r", "r", K.STALENESS_DROPPED_REWARD_MEAN, K.STALENESS_GENERATED_REWARD_MEAN),
    )
    for name, field, row, dropped_key, generated_key in pairs:
        if name not in dropped:
            continue
        if d > 0:
            out[dropped_key] = s[field] / d
        if row in rows and n + d > 0:
            trained = sum(s[f"{row}/{label}"] for label, _, _ in LAG_BUCKETS)
            out[generated_key] = (trained + s[field]) / (n + d)


def _finalize(
    s: dict[str, float],
    hi: dict[str, float],
    lo: dict[str, float],
    options: Mapping[str, Any],
    *,
    peer_names: Any = (),
) -> dict[str, float]:
    """The metric dictionary from the host statistics."""
    peers = _check_peers(peer_names)
    n = s["n"]
    out: dict[str, float] = {K.STALENESS_NUM_SAMPLES: n}
    if n == 0:
        warn_undefined(
            "no trained sample (in this batch, or on any rank with process_group=): the lag, span and "
            "age metrics are undefined (NaN)",
            stacklevel=None,
        )
    nan = math.nan
    for name, mean_key, max_key, min_key in (
        ("lag", K.STALENESS_LAG_MEAN, K.STALENESS_LAG_MAX, K.STALENESS_LAG_MIN),
        ("lag_newest", K.STALENESS_LAG_NEWEST_MEAN, K.STALENESS_LAG_NEWEST_MAX, K.STALENESS_LAG_NEWEST_MIN),
        ("spans", K.STALENESS_SPANS_MEAN, K.STALENESS_SPANS_MAX, K.STALENESS_SPANS_MIN),
    ):
        out[mean_key] = s[name] / n if n > 0 else nan
        out[max_key], out[min_key] = (hi[name], lo[name]) if n > 0 else (nan, nan)
    out[K.STALENESS_MULTI_VERSION_SHARE] = s["multi"] / n if n > 0 else nan
    if "n_tok" in s:
        out[K.STALENESS_TOKEN_LAG_MEAN] = s["tok_lag"] / s["n_tok"] if s["n_tok"] > 0 else nan
    for metric, mean_key, max_key in (
        ("in_flight", K.STALENESS_AGE_IN_FLIGHT_MEAN, K.STALENESS_AGE_IN_FLIGHT_MAX),
        ("in_queue", K.STALENESS_AGE_IN_QUEUE_MEAN, K.STALENESS_AGE_IN_QUEUE_MAX),
        ("age", K.STALENESS_AGE_MEAN, K.STALENESS_AGE_MAX),
    ):
        if metric in options["ages"]:
            out[mean_key] = s[f"age/{metric}"] / n if n > 0 else nan
            out[max_key] = hi[f"age/{metric}"] if n > 0 else nan
    _bucket_metrics(s, hi, options, out)
    _trained_vs_dropped(
        s | {"d_lag_max": hi.get("d_lag", nan), "d_lag_min": lo.get("d_lag", nan)}, options, out
    )
    peer_values = {peer: out[ours] for p in peers for peer, ours in PEER_KEYS[p] if ours in out}
    return with_prefix(out, K.STALENESS_PREFIX, options["prefix"]) | peer_values


@metrics_from(
    staleness_statistics, late=("peer_names",), check_late=lambda peer_names=(): _check_peers(peer_names)
)
def compute_staleness_metrics(  # type: ignore[empty-body]  # the body is @metrics_from's
    batch_or_arrays: Any,
    *,
    current_version: int,
    response_mask: Any = None,
    newest_versions: Any = None,
    importance_weights: Any = None,
    old_log_probs: Any = None,
    rollout_log_probs: Any = None,
    rewards: Any = None,
    response_lengths: Any = None,
    start_times: Any = None,
    enqueue_times: Any = None,
    dequeue_times: Any = None,
    train_time: Any = None,
    dropped_versions: Any = None,
    dropped_lengths: Any = None,
    dropped_rewards: Any = None,
    rollout_is_threshold: Any = 2.0,
    versions_key: str = "policy_versions",
    prefix: str = K.STALENESS_PREFIX,
    peer_names: Any = (),
    process_group: Any = None,
) -> dict[str, float]:
    """Version lag, spans, ages and dropped samples of an off-policy batch, and what the lag costs.

    Parameters
    ----------
    batch_or_arrays : array of shape ``(B,)`` or ``(B, R)``, or a batch
        The behaviour-policy version that wrote each sample (``(B,)``; with ``newest_versions``,
        its oldest), or each response token (``(B, R)``, partial rollouts; ``response_mask``
        needed). Integers, or floats holding whole numbers. A batch (verl ``DataProto``,
        ``TensorDict``, dict) gives them as ``versions_key`` (and ``response_mask`` for
        per-token versions).
    current_version : int, keyword-only
        The trainer's version (the policy being updated); every version must be <= it.
    response_mask : array of shape ``(B, R)``, optional, keyword-only
        Bool or 0/1; needed with per-token inputs. With per-token versions each row must select
        a token. Given alone, it also gives the response lengths.
    newest_versions : array of shape ``(B,)``, optional, keyword-only
        With per-sample versions: the version that wrote each sample's last token (verl's
        ``max_global_steps``); the spans are then ``newest - oldest + 1``.
    importance_weights : array of shape ``(B,)`` or ``(B, R)``, optional, keyword-only
        Per-sample or per-token importance weights (>= 0), before truncation: their mean, the
        share above ``rollout_is_threshold`` and the largest, per lag bucket.
    old_log_probs, rollout_log_probs : arrays of shape ``(B, R)``, optional, keyword-only
        Training- and inference-engine log-probabilities: the k3 KL per lag bucket, and the
        token ratio ``exp(old - rollout)`` as the weights when ``importance_weights`` is absent.
    rewards, response_lengths : arrays of shape ``(B,)``, optional, keyword-only
        Per-sample reward and length: their means per bucket and over the trained samples.
    start_times, enqueue_times, dequeue_times : arrays of shape ``(B,)``, optional, keyword-only
        Seconds (any one clock) when generation started, when the sample entered the queue and
        when the trainer took it: age in flight ``enqueue - start``, in queue ``dequeue - enqueue``.
        Epoch seconds need float64 (float32 rounds them to 128 s: refused).
    train_time : float, optional, keyword-only
        When the update runs: age ``train_time - enqueue``.
    dropped_versions, dropped_lengths, dropped_rewards : arrays of shape ``(D,)``, optional, keyword-only
        The samples generated but dropped or evicted (too stale): their count and share, their
        lag, and their length and reward against those trained on.
    rollout_is_threshold : float, str or (float, float), keyword-only
        The importance-weight truncation threshold, as in
        :func:`~rlmetrics.policy.mismatch.compute_rollout_mismatch_metrics` and verl's
        rollout-correction config (default ``2.0``): ``is_weight_fraction_high`` is the share of
        a bucket's weights (tokens; samples for per-sample weights) above its upper bound
        (verl's ``rollout_is_ratio_fraction_high``). An IcePop ``"lower_upper"`` spec is accepted
        and only its upper bound used.
    versions_key : str, keyword-only
        The batch key of the versions (default ``"policy_versions"``).
    prefix : str, keyword-only
        Prepended to rlmetrics' keys (default ``"staleness/"``); peers' keys keep their names.
    peer_names : sequence of {"verl", "prime-rl", "slime", "nemo-rl"}, keyword-only
        Also report the names these systems chart for the same values (module docstring).
    process_group : torch.distributed.ProcessGroup, optional, keyword-only
        When given, every rank gets the metrics of the union of the ranks' batches (one
        agreement collective, then two packed all-reduces; a rank with an empty shard takes
        part; a bad input on one rank makes every rank raise the same error, naming it).

    Returns
    -------
    dict[str, float]
        ``num_samples``; ``lag/{mean,max,min}``, ``lag_newest/{mean,max,min}``,
        ``spans/{mean,max,min}``, ``multi_version_share``, ``token_lag/mean`` (with a mask);
        ``lag_bucket/<b>/share`` for ``b`` in ``0, 1, 2, 3_4, 5_8, 9_plus`` and, in the buckets
        that hold samples, ``is_weight_mean``, ``is_weight_fraction_high``, ``is_weight_max``,
        ``k3_kl``, ``reward_mean``, ``length_mean`` as their inputs are given;
        ``trained/{length,reward}_mean``; ``age_in_flight_s``, ``age_in_queue_s``, ``age_s``
        ``/{mean,max}``; ``dropped/{count,share}``, ``dropped/lag/{mean,max,min}``,
        ``dropped/{length,reward}_mean``,
        ``generated/{length,reward}_mean`` (trained and dropped together). Without trained
        samples the lag, span, share and age metrics are NaN, with an ``UndefinedMetricWarning``.

    Examples
    --------
    >>> import numpy as np
    >>> m = compute_staleness_metrics(np.array([5, 4, 4, 1]), current_version=5, peer_names=("slime",))
    >>> m["staleness/lag/mean"], m["staleness/lag/max"], m["staleness/lag_bucket/3_4/share"]
    (1.5, 4.0, 0.25)
    >>> m["rollout/staleness/mean"]
    1.5
    """

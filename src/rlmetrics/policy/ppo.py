"""PPO update statistics: clip fractions (split by side), approximate KL and ratio range.

With ``r_t = exp(clamp(log_prob - old_log_prob, -20, 20))`` and advantages ``A_t``, verl's
vanilla policy loss logs

* ``actor/pg_clipfrac``: tokens where the clipped surrogate is the active one,
  ``-A clip(r, 1 - eps_low, 1 + eps_high) > -A r``;
* ``actor/ppo_kl``: the k1 estimate ``E[old_log_prob - log_prob]`` (can be negative);
* ``actor/pg_clipfrac_lower``: dual-clip fraction, ``A < 0`` and ``-A r > -A clip_ratio_c``.

This module reproduces those values and adds the two sides of the clip fraction (their sum is
``pg_clipfrac``): ``actor/pg_clipfrac_low`` (``A < 0`` and ``r < 1 - eps_low``, the update
pushing a token's probability down is cut off) and ``actor/pg_clipfrac_high`` (``A > 0`` and
``r > 1 + eps_high``), the k3 estimate ``actor/ppo_kl_k3 = E[r - 1 - log r] >= 0``, and
``actor/ppo_ratio_{mean,max,min}``. Token-mean (verl) and sequence-mean aggregation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rlmetrics import keys as K
from rlmetrics._core.array import (
    as_float,
    check_finite_scalar,
    check_same_shape,
    cpu_block_rows,
    describe,
    is_array,
    mask_and_invalid_count,
    prepare_arrays,
)
from rlmetrics._core.checks import check_real_dtype, warn_undefined
from rlmetrics._core.stats import (
    Stats,
    check_prefix,
    invalid_mask_field,
    metrics_from,
    stand_in_statistics,
    with_prefix,
)

__all__ = ["compute_ppo_update_metrics", "ppo_update_statistics"]

_MASK = "response_mask"
_NAMES = ("log_probs", "old_log_probs", "advantages", "response_mask")

AGGREGATIONS = {
    "token-mean": "token-mean",
    "seq-mean": "seq-mean-token-mean",
    "seq-mean-token-mean": "seq-mean-token-mean",
}
# Per-token indicators / values, averaged by the chosen aggregation: name -> metric key.
_MEANS = {
    "clip": K.PG_CLIPFRAC,
    "kl": K.PPO_KL,
    "dual": K.PG_CLIPFRAC_LOWER,
    "clip_low": K.PG_CLIPFRAC_LOW,
    "clip_high": K.PG_CLIPFRAC_HIGH,
    "k3": K.PPO_KL_K3,
    "ratio": K.PPO_RATIO_MEAN,
}


def _clip_bounds(
    clip_ratio: float, clip_ratio_low: float | None, clip_ratio_high: float | None, clip_ratio_c: float
) -> tuple[float, float, float]:
    low = check_finite_scalar(clip_ratio if clip_ratio_low is None else clip_ratio_low, "clip_ratio_low")
    high = check_finite_scalar(clip_ratio if clip_ratio_high is None else clip_ratio_high, "clip_ratio_high")
    c = check_finite_scalar(clip_ratio_c, "clip_ratio_c")
    if not 0 <= low < 1:
        raise ValueError(f"clip_ratio_low must be in [0, 1); got {low}")
    if high < 0:
        raise ValueError(f"clip_ratio_high must be >= 0; got {high}")
    if c <= 1:
        raise ValueError(f"clip_ratio_c must be > 1 (dual-clip lower bound); got {c}")
    return low, high, c


def ppo_update_statistics(
    log_probs: Any,
    old_log_probs: Any,
    advantages: Any,
    response_mask: Any,
    *,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_ratio_c: float = 3.0,
    aggregation: str = "token-mean",
    prefix: str = K.PPO_PREFIX,
) -> Stats:
    """Mergeable sums / maxima / minima behind :func:`compute_ppo_update_metrics`.

    Arguments as :func:`compute_ppo_update_metrics`. Holds token sums (``n_tok`` and one sum
    per metric) and sums of per-sequence means (``n_seq`` non-empty sequences), so either
    aggregation can be finalised after merging: ``stats.finalize(aggregation="seq-mean")``
    overrides the one given here. The result stays on the inputs' device until
    :meth:`~rlmetrics._core.stats.Stats.finalize`.

    Examples
    --------
    >>> import numpy as np
    >>> old, adv, mask = np.zeros((1, 2)), np.ones((1, 2)), np.ones((1, 2), dtype=bool)
    >>> a = ppo_update_statistics(np.log([[1.5, 1.0]]), old, adv, mask)
    >>> b = ppo_update_statistics(np.log([[0.5, 1.0]]), old, -adv, mask)
    >>> m = a.merge(b).finalize()
    >>> m["actor/pg_clipfrac"], m["actor/ppo_ratio_max"], m["actor/ppo_ratio_min"]
    (0.5, 1.5, 0.5)
    """
    low, high, c = _clip_bounds(clip_ratio, clip_ratio_low, clip_ratio_high, clip_ratio_c)
    options = {
        "clip_ratio_low": low,
        "clip_ratio_high": high,
        "clip_ratio_c": c,
        "aggregation": _aggregation(aggregation),
        "prefix": check_prefix(prefix),
    }
    xp, arrays, device, on_cpu = _checked_inputs(log_probs, old_log_probs, advantages, response_mask)
    lp, olp, adv, mask_raw = arrays
    n_rows, width = lp.shape
    if n_rows == 0:
        like = dict(zip(_NAMES, arrays))
        return stand_in_statistics(ppo_update_statistics, like, {"response_mask"}, **options)
    mask, n_invalid = mask_and_invalid_count(mask_raw, _MASK)
    work = xp.float64 if xp.float64 in (lp.dtype, olp.dtype, adv.dtype) else xp.float32
    step = cpu_block_rows(n_rows, width, on_cpu)
    tok, seq, counts, r_max, r_min = _token_sums(xp, (lp, olp, adv, mask), work, device, step, (low, high, c))
    sums = {
        "n_tok": counts[0],
        "n_seq": counts[1],
        invalid_mask_field(_MASK): 0.0 if n_invalid is None else n_invalid,
    }
    sums.update({f"tok_{k}": v for k, v in tok.items()})
    sums.update({f"seq_{k}": v for k, v in seq.items()})
    return Stats.pack(
        "ppo",
        sums,
        {"ratio": r_max},
        {"ratio": r_min},
        finaliser=_finalize,
        options=options,
        xp=xp,
        device=device,
    )


def _checked_inputs(*given: Any) -> tuple[Any, list[Any], Any, bool]:
    """``prepare_arrays`` of the four inputs, checked: arrays, real dtypes, one ``(B, R)`` shape."""
    for name, x in zip(_NAMES, given):
        if not is_array(x):
            raise TypeError(f"{name} must be a numpy array or a torch tensor; got {type(x).__name__}")
    xp, arrays, device, on_cpu = prepare_arrays(list(given), list(_NAMES))
    lp = arrays[0]
    for name, x in zip(_NAMES[:3], arrays):
        check_real_dtype(x, name)
    if lp.ndim != 2:
        raise ValueError(f"log_probs must have shape (B, R); got {describe(given[0])}")
    for name, x in zip(_NAMES[1:], arrays[1:]):
        check_same_shape(x, lp, name, "log_probs")
    return xp, list(arrays), device, on_cpu


def _block_values(xp: Any, lp: Any, olp: Any, a: Any, bounds: tuple[float, float, float]) -> dict[str, Any]:
    """Per-token indicators and values of one row block (verl's vanilla policy loss), by name."""
    low, high, c = bounds
    neg_kl = xp.clip(lp - olp, min=-20.0, max=20.0)
    ratio = xp.exp(neg_kl)
    loss1 = -a * ratio
    loss2 = -a * xp.clip(ratio, min=1 - low, max=1 + high)
    clipped = loss2 > loss1
    loss3 = -a * c
    return {
        "clip": clipped,
        "kl": -neg_kl,
        "dual": (xp.maximum(loss1, loss2) > loss3) & (a < 0),
        "clip_low": clipped & (a < 0),
        "clip_high": clipped & (a > 0),
        "k3": xp.expm1(neg_kl) - neg_kl,
        "ratio": ratio,
    }


def _token_sums(
    xp: Any, arrays: tuple[Any, ...], work: Any, device: Any, step: int, bounds: tuple[float, float, float]
) -> tuple[dict[str, Any], dict[str, Any], tuple[Any, Any], Any, Any]:
    """Token sums and sums of sequence means per value, (token, sequence) counts and the ratio's
    extremes, row block by row block; 0-d float64 arrays on ``device``."""
    lp, olp, adv, mask = arrays
    f64 = xp.float64
    n_rows, width = lp.shape
    tok = {k: xp.asarray(0.0, dtype=f64, device=device) for k in _MEANS}
    seq = {k: xp.asarray(0.0, dtype=f64, device=device) for k in _MEANS}
    n_tok = xp.asarray(0.0, dtype=f64, device=device)
    n_seq = xp.asarray(0.0, dtype=f64, device=device)
    r_max = xp.asarray(-math.inf, dtype=f64, device=device)
    r_min = xp.asarray(math.inf, dtype=f64, device=device)
    for start in range(0, n_rows, step):
        rows = slice(start, start + step)
        m = mask[rows, ...]
        a = xp.astype(as_float(adv[rows, ...], xp), work)
        zero = xp.zeros_like(a)
        lp_b = xp.astype(as_float(lp[rows, ...], xp), work)
        values = _block_values(xp, lp_b, xp.astype(as_float(olp[rows, ...], xp), work), a, bounds)
        cnt = xp.sum(xp.astype(m, f64), axis=-1)
        has = cnt > 0
        safe = xp.where(has, cnt, xp.ones_like(cnt))
        n_tok = n_tok + xp.sum(cnt)
        n_seq = n_seq + xp.sum(xp.astype(has, f64))
        for k, v in values.items():
            row = xp.astype(xp.sum(xp.where(m, xp.astype(v, work), zero), axis=-1), f64)
            tok[k] = tok[k] + xp.sum(row)
            seq[k] = seq[k] + xp.sum(xp.where(has, row / safe, xp.zeros_like(row)))
        if width:  # zero-width responses: no token, no extreme
            ratio = values["ratio"]
            r_max = xp.maximum(r_max, xp.astype(xp.max(xp.where(m, ratio, -math.inf)), f64))
            r_min = xp.minimum(r_min, xp.astype(xp.min(xp.where(m, ratio, math.inf)), f64))
    return tok, seq, (n_tok, n_seq), r_max, r_min


def _finalize(
    s: dict[str, float],
    hi: dict[str, float],
    lo: dict[str, float],
    options: Mapping[str, Any],
    *,
    aggregation: str | None = None,
) -> dict[str, float]:
    """The metric dictionary from the host statistics; ``aggregation`` overrides the option."""
    mode = options["aggregation"] if aggregation is None else _aggregation(aggregation)
    part, count = ("tok_", s["n_tok"]) if mode == "token-mean" else ("seq_", s["n_seq"])
    if s["n_tok"] == 0:
        warn_undefined("response_mask selects no token: the PPO update metrics are NaN", stacklevel=None)
        out = dict.fromkeys(_MEANS.values(), math.nan)
        out[K.PPO_RATIO_MAX] = out[K.PPO_RATIO_MIN] = math.nan
    else:
        out = {key: s[part + name] / count for name, key in _MEANS.items()}
        out[K.PPO_RATIO_MAX], out[K.PPO_RATIO_MIN] = hi["ratio"], lo["ratio"]
    return with_prefix(out, K.PPO_PREFIX, options["prefix"])


def _aggregation(aggregation: str) -> str:
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {sorted(AGGREGATIONS)}; got {aggregation!r}")
    return AGGREGATIONS[aggregation]


@metrics_from(ppo_update_statistics)
def compute_ppo_update_metrics(  # type: ignore[empty-body]  # the body is @metrics_from's
    log_probs: Any,
    old_log_probs: Any,
    advantages: Any,
    response_mask: Any,
    *,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_ratio_c: float = 3.0,
    aggregation: str = "token-mean",
    prefix: str = K.PPO_PREFIX,
    process_group: Any = None,
) -> dict[str, float]:
    """Clip fractions, approximate KL and ratio range of a PPO update.

    Parameters
    ----------
    log_probs, old_log_probs, advantages : arrays of shape ``(B, R)``
        Current and behaviour log-probabilities of the sampled tokens and their advantages
        (numpy or torch, CPU or CUDA; computed in at least float32).
    response_mask : array of shape ``(B, R)``
        Bool or 0/1.
    clip_ratio : float, keyword-only
        ``eps`` of the clipped objective; ``clip_ratio_low`` / ``clip_ratio_high`` override it
        per side (verl's ``actor.clip_ratio*``), the ratio being clipped to
        ``[1 - clip_ratio_low, 1 + clip_ratio_high]``.
    clip_ratio_c : float, keyword-only
        Dual-clip bound (> 1) for ``actor/pg_clipfrac_lower``.
    aggregation : {"token-mean", "seq-mean-token-mean", "seq-mean"}, keyword-only
        Average over all tokens (verl's metrics), or over each sequence then over the
        sequences that have tokens (``"seq-mean"`` is an alias).
    prefix : str, keyword-only
        Replaces the keys' ``"actor/"`` (e.g. ``"critic_actor/"`` for a second model).
    process_group : torch.distributed.ProcessGroup, optional, keyword-only
        When given, every rank gets the metrics of the union of all ranks' batches: one tiny
        agreement collective, then two packed all-reduces (a rank with an empty shard still
        takes part). A rank whose input is bad makes every rank raise the same error, naming
        that rank; ranks with different options raise the same ``ValueError``, naming them.

    Returns
    -------
    dict[str, float]
        ``actor/pg_clipfrac``, ``actor/ppo_kl``, ``actor/pg_clipfrac_lower`` (verl's names and,
        with token-mean, values), ``actor/pg_clipfrac_low``, ``actor/pg_clipfrac_high``,
        ``actor/ppo_kl_k3``, ``actor/ppo_ratio_{mean,max,min}``. NaN with an ``UndefinedMetricWarning``
        when the mask selects no token.

    Examples
    --------
    >>> import numpy as np
    >>> old = np.zeros((1, 4))
    >>> new = np.log(np.array([[1.5, 0.5, 1.0, 1.1]]))
    >>> adv = np.array([[1.0, -1.0, 1.0, -1.0]])
    >>> m = compute_ppo_update_metrics(new, old, adv, np.ones((1, 4), dtype=bool))
    >>> m["actor/pg_clipfrac"], m["actor/pg_clipfrac_high"], m["actor/pg_clipfrac_low"]
    (0.5, 0.25, 0.25)
    >>> m["actor/ppo_ratio_max"], m["actor/ppo_ratio_min"]
    (1.5, 0.5)
    """
    ...  # @metrics_from computes: the statistics, their all-reduce, finalize

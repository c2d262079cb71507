"""Gradient-variance proxies: verl's ``compute_variance_proxy_metrics``, as mergeable statistics.

With the W-score ``W(tau) = sum_t [1 - 2 pi_t(y_t) + sum_v pi_t(v)^2]`` of a trajectory and its
scalar advantage ``A`` (the mean of its token advantages), verl estimates

* proxy 1, signal strength ``||g||^2`` (the squared gradient norm, given by the caller);
* proxy 2, total power ``E[A^2 W]`` (on-policy) or ``E[rho^2 A^2 W]`` with rollout IS weights;
* proxy 3, pure noise ``(proxy2 - proxy1) / (N - 1)``, floored at 0;

and reports ``E[A^2]`` and ``E[W]``. Every term is a sum over trajectories, so the statistics of
data-parallel shards merge by addition (:func:`variance_proxy_statistics`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from rlmetrics import keys as K
from rlmetrics._core.array import (
    as_float,
    check_same_shape,
    describe,
    is_torch_array,
    mask_and_invalid_count,
    prepare_arrays,
)
from rlmetrics._core.batch import as_batch
from rlmetrics._core.checks import row_mean
from rlmetrics._core.stats import Stats, check_prefix, invalid_mask_field, stand_in_statistics, with_prefix

__all__ = ["compute_variance_proxy_metrics", "variance_proxy_statistics"]

_MASK = "batch['response_mask']"

_REQUIRED = ("sum_pi_squared", "old_log_probs", "advantages")

# Elements per row block on the CPU: a block's float32 temporaries (1 MiB each) stay in L2.
_CPU_BLOCK_ELEMENTS = 1 << 18


def variance_proxy_statistics(
    batch: Any, *, strict: bool = False, prefix: str = K.VARIANCE_PROXY_PREFIX
) -> Stats | None:
    """Per-batch sums behind :func:`compute_variance_proxy_metrics` (or ``None`` if inputs are missing).

    Parameters
    ----------
    batch : DataProto, TensorDict or dict of arrays
        See :func:`compute_variance_proxy_metrics`.
    strict : bool, keyword-only
        Raise a ``ValueError`` naming a missing tensor instead of returning ``None``.
    prefix : str, keyword-only
        See :func:`compute_variance_proxy_metrics`.

    Returns
    -------
    Stats or None
        Sums ``n`` (trajectories), ``a2`` (sum of ``A^2``), ``w`` (sum of ``W``, IS-scaled when
        ``rollout_is_weights`` is present) and ``power`` (sum of the proxy-2 terms), on the
        batch's device. ``stats.finalize(gradient_norm=g)`` gives the metrics; a batch without
        rows gives the statistics of nothing.

    Examples
    --------
    >>> import numpy as np
    >>> def batch(a):
    ...     ones = np.ones((1, 1))
    ...     return {"sum_pi_squared": 0.5 * ones, "old_log_probs": np.log(0.5) * ones,
    ...             "advantages": a * ones, "response_mask": ones}
    >>> s = variance_proxy_statistics(batch(1.0)).merge(variance_proxy_statistics(batch(3.0)))
    >>> s.finalize(gradient_norm=1.0)["variance_proxy/expected_a_squared"]
    5.0
    """
    view = as_batch(batch)
    missing = [k for k in _REQUIRED if not view.has(k)]
    if missing:
        if strict:
            view.tensor(missing[0], why="needed by the variance proxies; strict=True")
        return None
    names = ["sum_pi_squared", "old_log_probs", "advantages", "response_mask", "rollout_is_weights"]
    raw = [view.tensor(k, why="the variance proxies sum over response tokens") for k in names[:4]]
    xp, arrays, device, on_cpu = prepare_arrays(
        [*raw, view.get("rollout_is_weights")], [f"batch[{n!r}]" for n in names]
    )
    spi, old, adv, mask_raw, weights = arrays
    if adv.ndim != 2:
        raise ValueError(f"batch['advantages'] must have shape (B, R); got {describe(adv)}")
    for name, x in (("sum_pi_squared", spi), ("old_log_probs", old), ("response_mask", mask_raw)):
        check_same_shape(x, adv, f"batch[{name!r}]", "batch['advantages']")
    if weights is not None:
        check_same_shape(weights, adv, "batch['rollout_is_weights']", "batch['advantages']")
    n_rows, width = adv.shape
    if n_rows == 0:
        like = dict(zip(names, (spi, old, adv, mask_raw, weights)))
        return stand_in_statistics(
            _of_stand_ins, like, {"response_mask", "rollout_is_weights"}, prefix=prefix
        )
    mask, n_invalid = mask_and_invalid_count(mask_raw, _MASK)
    use_is = weights is not None
    f64 = xp.float64
    tokens = (spi, old, adv, weights)
    if on_cpu:
        # Row blocks keep the two token-sized temporaries in cache: a fresh (B, R) array costs
        # more in page faults than its arithmetic. The blocks' row sums are then joined.
        step = max(1, _CPU_BLOCK_ELEMENTS // max(width, 1))
        with np.errstate(invalid="ignore"):  # masked-out NaN/inf: their rows are summed again
            blocks = [
                _row_sums(xp, mask[s : s + step, ...], *_rows(tokens, slice(s, s + step)))
                for s in range(0, n_rows, step)
            ]
        sums = _finite_rows(xp, [xp.concat(parts) for parts in zip(*blocks)], mask, tokens)
    else:
        # Zeroed outside the mask first, so that no NaN there reaches a dot product (no sync).
        sums = list(_row_sums(xp, mask, *(None if t is None else xp.where(mask, t, 0) for t in tokens)))
    cnt, a_total, w_row, *is_sums = (xp.astype(s, f64) for s in sums)
    a_row = row_mean(xp, a_total, cnt)
    a2 = a_row * a_row
    if use_is:
        w_orig, rho_row = is_sums
        rho_bar = row_mean(xp, rho_row, cnt)
        term = rho_bar * rho_bar * a2 * xp.clip(w_orig, min=0.0)
    else:
        term = a2 * xp.clip(w_row, min=0.0)
    a2_sum, w_sum, power_sum = xp.sum(a2), xp.sum(w_row), xp.sum(term)
    invalid = 0.0 if n_invalid is None else n_invalid
    return Stats.pack(
        "variance_proxy",
        {
            "n": float(n_rows),
            "a2": a2_sum,
            "w": w_sum,
            "power": power_sum,
            invalid_mask_field(_MASK): invalid,
        },
        {},
        {},
        finaliser=_finalize,
        options={"rollout_is": use_is, "prefix": check_prefix(prefix)},
        xp=xp,
        device=device,
    )


def _rows(tokens: tuple[Any, ...], rows: slice) -> list[Any]:
    return [None if t is None else t[rows, ...] for t in tokens]


def _row_sums(xp: Any, mask: Any, spi: Any, old: Any, adv: Any, rho: Any) -> tuple[Any, ...]:
    """Per-row sums over the response tokens: ``(count, A, W[, W_orig, rho])``, each ``(B,)``.

    One vectorised pass. Every sum is a row-wise dot product of a token array with the 0/1
    mask (times ``rho^2``, or ``min(rho^2, 1e-10)`` for verl's ``W / clamp(rho^2, 1e-10)``), so
    no masked copy is made; masked-out entries must be finite (a NaN there gives a NaN sum).
    ``W`` per token is verl's ``1 - 2 exp(old_log_probs) + sum_pi_squared`` in that order of
    operations, in float32 or better; with ``rho`` the ``W`` sum is the IS-scaled one.
    """
    o, s = as_float(old, xp), as_float(spi, xp)
    r = None if rho is None else as_float(rho, xp)
    dt = xp.result_type(o, s) if r is None else xp.result_type(o, s, r)
    mf = xp.astype(mask, dt)
    cnt = xp.sum(mf, axis=-1)
    a = xp.vecdot(as_float(adv, xp), mf)
    w = xp.exp(xp.astype(o, dt, copy=False))
    w *= -2
    w += 1
    w += s
    if r is None:
        return cnt, a, xp.vecdot(w, mf)
    mf *= r
    rho_sum = xp.sum(mf, axis=-1)
    mf *= mf
    w_is = xp.vecdot(w, mf)
    # verl's w rho^2 / max(rho^2, c) is w min(rho^2, c) / c, with c = 1e-10 in the tokens' dtype
    w_orig = xp.vecdot(w, xp.minimum(mf, 1e-10)) / 1e-10
    return cnt, a, w_is, w_orig, rho_sum


def _finite_rows(xp: Any, sums: list[Any], mask: Any, tokens: tuple[Any, ...]) -> list[Any]:
    """``sums`` with the rows that are not finite summed again after zeroing outside the mask.

    A NaN or infinity at a masked-out position reaches a dot product with the mask as NaN;
    verl's masked sums ignore it. Rows that are not finite for a masked-in value stay so.
    """
    bad = ~xp.isfinite(sums[0])
    for s in sums[1:]:
        bad = bad | ~xp.isfinite(s)
    if not bool(xp.any(bad)):
        return sums
    m = mask[bad, ...]
    again = _row_sums(xp, m, *(None if t is None else xp.where(m, t[bad, ...], 0) for t in tokens))
    for s, fixed in zip(sums, again):
        s[bad] = fixed
    return sums


def _of_stand_ins(*, prefix: str, **arrays: Any) -> Stats:
    """:func:`variance_proxy_statistics` of the stand-in arrays of a batch without rows."""
    stats = variance_proxy_statistics(arrays, strict=True, prefix=prefix)
    assert stats is not None  # strict=True: present or raised
    return stats


def _finalize(
    sums: dict[str, float],
    maxes: dict[str, float],
    mins: dict[str, float],
    options: Mapping[str, Any],
    *,
    gradient_norm: Any = None,
) -> dict[str, float]:
    """verl's five metrics from the host statistics; ``gradient_norm`` enables proxies 1 and 3."""
    n = sums["n"]
    if n == 0:
        raise ValueError(
            "batch is empty: advantages has 0 rows (on every rank, with process_group=); "
            "the variance proxies need one trajectory"
        )
    proxy2 = sums["power"] / n
    proxy1 = _gradient_norm_squared(gradient_norm)
    proxy3 = 0.0
    if proxy1 is not None and n > 1:
        proxy3 = (proxy2 - proxy1) / (n - 1)
        proxy3 = proxy3 if math.isnan(proxy3) else max(0.0, proxy3)
    out = {
        K.VARIANCE_PROXY_SIGNAL: proxy1 if proxy1 is not None else 0.0,
        K.VARIANCE_PROXY_TOTAL_POWER: proxy2,
        K.VARIANCE_PROXY_NOISE: proxy3,
        K.VARIANCE_PROXY_EXPECTED_A_SQUARED: sums["a2"] / n,
        K.VARIANCE_PROXY_EXPECTED_W: sums["w"] / n,
    }
    return with_prefix(out, K.VARIANCE_PROXY_PREFIX, options["prefix"])


def _gradient_norm_squared(gradient_norm: Any) -> float | None:
    if gradient_norm is None:
        return None
    if hasattr(gradient_norm, "shape"):
        if tuple(gradient_norm.shape) not in ((), (1,)):
            raise ValueError(f"gradient_norm must be a scalar; got {describe(gradient_norm)}")
        gradient_norm = (
            gradient_norm.item() if is_torch_array(gradient_norm) else gradient_norm.reshape(())[()]
        )
    if isinstance(gradient_norm, bool):
        raise TypeError("gradient_norm must be a real number; got bool")
    try:
        value = float(gradient_norm)
    except (TypeError, ValueError):
        raise TypeError(
            "gradient_norm must be a real number or None; "
            f"got {type(gradient_norm).__name__} {gradient_norm!r}"
        ) from None
    return value * value


def compute_variance_proxy_metrics(
    batch: Any,
    gradient_norm: Any = None,
    *,
    strict: bool = False,
    prefix: str = K.VARIANCE_PROXY_PREFIX,
    process_group: Any = None,
) -> dict[str, float]:
    """Gradient-variance proxies of a batch; same keys and values as verl 0.9.1.

    Parameters
    ----------
    batch : DataProto, TensorDict or dict of arrays
        ``sum_pi_squared``, ``old_log_probs``, ``advantages`` and ``response_mask``, all
        ``(B, R)``; optional ``rollout_is_weights`` ``(B, R)``. numpy or torch (CPU or CUDA),
        any float dtype (computed in at least float32, trajectory sums in float64).
    gradient_norm : float or 0-d array, optional
        The batch gradient norm ``||g||``; enables proxy 1 and proxy 3. A NaN norm (a diverged
        step) gives NaN proxies rather than an error.
    strict : bool, keyword-only
        verl returns ``{}`` when ``sum_pi_squared``, ``old_log_probs`` or ``advantages`` is
        missing; ``strict=True`` raises a ``ValueError`` naming the missing tensor instead.
    prefix : str, keyword-only
        Replaces the keys' ``"variance_proxy/"``.
    process_group : torch.distributed.ProcessGroup, optional, keyword-only
        When given, every rank gets the metrics of the union of all ranks' batches (two packed
        all-reduces; a rank with an empty shard still takes part).

    Returns
    -------
    dict[str, float]
        ``variance_proxy/proxy1_signal_strength`` (0.0 without ``gradient_norm``),
        ``variance_proxy/proxy2_total_power``, ``variance_proxy/proxy3_pure_noise`` (0.0 without
        ``gradient_norm`` or when ``B == 1``, as in verl), ``variance_proxy/expected_a_squared``,
        ``variance_proxy/expected_w``. A trajectory without response tokens has ``A = 0`` and
        ``W = 0`` (verl's masked mean).

    Examples
    --------
    >>> import numpy as np
    >>> batch = {
    ...     "sum_pi_squared": np.array([[0.5, 0.5], [0.25, 0.0]], dtype=np.float32),
    ...     "old_log_probs": np.log(np.array([[0.5, 0.5], [0.5, 1.0]], dtype=np.float32)),
    ...     "advantages": np.array([[1.0, 1.0], [-2.0, 0.0]], dtype=np.float32),
    ...     "response_mask": np.array([[1, 1], [1, 0]]),
    ... }
    >>> m = compute_variance_proxy_metrics(batch, gradient_norm=0.5)
    >>> round(m["variance_proxy/proxy2_total_power"], 6), round(m["variance_proxy/expected_w"], 6)
    (1.0, 0.625)
    >>> compute_variance_proxy_metrics({"advantages": batch["advantages"]})
    {}
    >>> compute_variance_proxy_metrics({"advantages": batch["advantages"]}, strict=True)
    Traceback (most recent call last):
        ...
    ValueError: batch is missing the tensor 'sum_pi_squared' (needed by the variance proxies; strict=True)...
    """
    stats = variance_proxy_statistics(batch, strict=strict, prefix=prefix)
    if stats is None:
        # verl's {}: without these tensors there are no proxies (and no rank enters a collective)
        return {}
    if process_group is not None:
        stats = stats.all_reduce(process_group)
    return stats.finalize(gradient_norm=gradient_norm)

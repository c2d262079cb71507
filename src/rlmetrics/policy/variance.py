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
from typing import Any

from rlmetrics import keys as K
from rlmetrics._core.array import as_float, check_same_shape, describe, is_torch_array
from rlmetrics._core.batch import as_batch
from rlmetrics._core.stats import (
    MASK_INVALID,
    PolicyStats,
    cpu_block_rows,
    deferred_mask,
    pack_stats,
    prepare_arrays,
    sharded_statistics,
)

__all__ = [
    "compute_variance_proxy_metrics",
    "finalize_variance_proxy_metrics",
    "variance_proxy_statistics",
]

_REQUIRED = ("sum_pi_squared", "old_log_probs", "advantages")


def variance_proxy_statistics(batch: Any, *, strict: bool = False) -> PolicyStats | None:
    """Per-batch sums behind :func:`compute_variance_proxy_metrics` (or ``None`` if inputs are missing).

    Parameters
    ----------
    batch : DataProto, TensorDict or dict of arrays
        See :func:`compute_variance_proxy_metrics`.
    strict : bool, keyword-only
        Raise a ``ValueError`` naming a missing tensor instead of returning ``None``.

    Returns
    -------
    PolicyStats or None
        Sums ``n`` (trajectories), ``a2`` (sum of ``A^2``), ``w`` (sum of ``W``, IS-scaled when
        ``rollout_is_weights`` is present) and ``power`` (sum of the proxy-2 terms), on the
        batch's device.
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
        raise ValueError("batch is empty: advantages has 0 rows; the variance proxies need one trajectory")
    mask, mask_invalid = deferred_mask(mask_raw, "batch['response_mask']")
    step = cpu_block_rows(n_rows, width, on_cpu)
    use_is = weights is not None
    f64 = xp.float64
    zero = xp.asarray(0.0, dtype=f64, device=device)
    a2_sum, w_sum, power_sum = zero, zero, zero
    for start in range(0, n_rows, step):
        rows = slice(start, start + step)
        m = mask[rows, ...]
        o = as_float(old[rows, ...], xp)
        cnt = xp.sum(xp.astype(m, o.dtype), axis=-1)
        # W per token: 1 - 2 pi + sum pi^2 (verl's order of operations, float32 or better).
        w_tok = 1 - 2 * xp.exp(o) + as_float(spi[rows, ...], xp)
        if use_is:
            rho = as_float(weights[rows, ...], xp)
            rho2 = rho * rho
            w_tok = w_tok * rho2
            w_orig = xp.sum(xp.where(m, w_tok / xp.clip(rho2, min=1e-10), 0.0), axis=-1)
            rho_bar = _row_mean(xp, xp.sum(xp.where(m, rho, 0.0), axis=-1), cnt)
        w_row = xp.sum(xp.where(m, w_tok, 0.0), axis=-1)
        a_row = _row_mean(xp, xp.sum(xp.where(m, as_float(adv[rows, ...], xp), 0.0), axis=-1), cnt)
        a2 = xp.astype(a_row * a_row, f64)
        if use_is:
            term = xp.astype(rho_bar * rho_bar, f64) * a2 * xp.astype(xp.clip(w_orig, min=0.0), f64)
        else:
            term = a2 * xp.astype(xp.clip(w_row, min=0.0), f64)
        a2_sum = a2_sum + xp.sum(a2)
        w_sum = w_sum + xp.sum(xp.astype(w_row, f64))
        power_sum = power_sum + xp.sum(term)
    return pack_stats(
        "variance_proxy",
        {"n": float(n_rows), "a2": a2_sum, "w": w_sum, "power": power_sum, MASK_INVALID: mask_invalid},
        {},
        {},
        xp=xp,
        device=device,
        options={"rollout_is": use_is, "mask_name": "batch['response_mask']"},
    )


def _row_mean(xp: Any, total: Any, count: Any) -> Any:
    """``total / count`` per row, 0 for a row without tokens (verl's ``masked_mean`` there)."""
    safe = xp.where(count > 0, count, xp.ones_like(count))
    return xp.where(count > 0, total / safe, xp.zeros_like(total))


def finalize_variance_proxy_metrics(stats: PolicyStats, gradient_norm: Any = None) -> dict[str, float]:
    """Turn :class:`PolicyStats` of kind ``"variance_proxy"`` into verl's five metrics (one host copy)."""
    if stats.kind != "variance_proxy":
        raise ValueError(f"stats must be variance-proxy statistics; got kind {stats.kind!r}")
    sums, _, _ = stats.to_host()
    n = sums["n"]
    proxy2 = sums["power"] / n
    proxy1 = _gradient_norm_squared(gradient_norm)
    proxy3 = 0.0
    if proxy1 is not None and n > 1:
        proxy3 = (proxy2 - proxy1) / (n - 1)
        proxy3 = proxy3 if math.isnan(proxy3) else max(0.0, proxy3)
    return {
        K.VARIANCE_PROXY_SIGNAL: proxy1 if proxy1 is not None else 0.0,
        K.VARIANCE_PROXY_TOTAL_POWER: proxy2,
        K.VARIANCE_PROXY_NOISE: proxy3,
        K.VARIANCE_PROXY_EXPECTED_A_SQUARED: sums["a2"] / n,
        K.VARIANCE_PROXY_EXPECTED_W: sums["w"] / n,
    }


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
    batch: Any, gradient_norm: Any = None, *, strict: bool = False, process_group: Any = None
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
    if process_group is not None:
        view = as_batch(batch)
        keys = ("sum_pi_squared", "old_log_probs", "advantages", "response_mask", "rollout_is_weights")
        present = {k: view.tensor(k) for k in keys if view.has(k)}
        if not all(k in present for k in keys[:4]):
            stats = variance_proxy_statistics(
                batch, strict=strict
            )  # {} or verl's error, before any collective
            if stats is None:
                return {}
        stats = sharded_statistics(
            lambda **a: variance_proxy_statistics(a, strict=True), present, process_group
        )
    else:
        stats = variance_proxy_statistics(batch, strict=strict)
        if stats is None:
            return {}
    return finalize_variance_proxy_metrics(stats, gradient_norm)

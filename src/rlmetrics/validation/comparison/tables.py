"""Is checkpoint B better than A? Two evaluations compared prompt by prompt.

:func:`compare_tables` takes the per-prompt tables of two runs
(:func:`~rlmetrics.validation.exact.summary.prompt_estimates` of each), matches their prompts by
``(source, uid)``, and for every data source, variable and metric both have, reports the paired
difference of B minus A with its interval, p-value and minimum detectable difference
(:func:`~rlmetrics.validation.comparison.paired.paired_difference`); for 0/1 variables also the
pass@k curves for every k up to the samples of the matched prompts and where they cross
(:func:`~rlmetrics.validation.comparison.curves.compare_curves`). :func:`compare_summaries` does
what can be done from two summaries alone (an unpaired test). Both adjust the p-values and
intervals of everything they test as one family (``adjust=``, Holm by default;
:mod:`~rlmetrics.validation.comparison.family`) and, with ``margin=``, give each metric the two
one-sided tests and a verdict in words (:mod:`~rlmetrics.validation.comparison.equivalence`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from rlmetrics.validation.comparison.curves import compare_curves, pass_at_k_curves
from rlmetrics.validation.comparison.equivalence import check_margin
from rlmetrics.validation.comparison.family import adjust_comparisons, check_adjust
from rlmetrics.validation.comparison.paired import (
    DEFAULT_INTERVAL,
    DEFAULT_TEST,
    INTERVALS,
    TESTS,
    PairedDifference,
    match_prompts,
    paired_difference,
    unpaired_difference,
)
from rlmetrics.validation.comparison.results import TableComparison
from rlmetrics.validation.exact.intervals import column_intervals
from rlmetrics.validation.exact.summary import PromptTable

__all__ = ["TableComparison", "compare_summaries", "compare_tables"]


def compare_tables(
    a: Mapping[str, Mapping[str, PromptTable]],
    b: Mapping[str, Mapping[str, PromptTable]],
    *,
    confidence: float = 0.95,
    power: float = 0.8,
    curves: bool = True,
    n_boot: int = 2000,
    seed: int = 0,
    adjust: str = "holm",
    margin: float | None = None,
    test: str = DEFAULT_TEST,
    interval: str = DEFAULT_INTERVAL,
) -> list[TableComparison]:
    """Paired differences of B minus A on the prompts the two runs share.

    Parameters
    ----------
    a, b : mapping source -> variable -> PromptTable
        :func:`~rlmetrics.validation.exact.summary.prompt_estimates` of each run (the same ``ks``).
    confidence : float, keyword-only
        Level of the intervals (and of the curves' simultaneous band).
    power : float, keyword-only
        Power of the minimum detectable difference.
    curves : bool, keyword-only
        Compare the pass@k curves of 0/1 variables (a bootstrap over prompts).
    n_boot, seed : int, keyword-only
        Bootstrap replicates and seed of the curve comparison.
    adjust : {"holm", "bh", "none"}, keyword-only
        The adjustment of p-values and intervals over every metric compared
        (:func:`~rlmetrics.validation.comparison.family.adjust_comparisons`).
    margin : float > 0, optional, keyword-only
        Non-inferiority / equivalence margin: each metric's two one-sided tests and verdict.
    test : {"sign-flip", "t", "signed-rank"}, keyword-only
        The paired test behind each metric's p-value
        (:func:`~rlmetrics.validation.comparison.paired.paired_difference`): the sign-flip test
        (mid-p) by default, its random flips drawn from ``seed``; Student's t; or Wilcoxon's
        signed-rank test (mid-p). Each result's ``method`` names it.
    interval : {"newcombe", "t", "inverted"}, keyword-only
        Each metric's interval
        (:func:`~rlmetrics.validation.comparison.paired.paired_difference`): Newcombe's on each
        run's wilson-edge interval by default (the one that kept 95% coverage near the edges in
        the simulation of ``bench/RESULTS.md``, where the t fell to 0.33), Student's t where a
        metric's values are not rates in [0, 1]; ``"t"``; or the sign-flip test's inversion.
        The adjusted intervals and the margin's tests are built from the same method. Each
        result's ``ci_method`` names the one used. The p-values are the test's either way, so
        near the edges a p-value and an interval can disagree at the margin.

    Returns
    -------
    list of TableComparison
        One per (source, variable) present in both runs, in A's order, sharing one ``family``.
        Clusters of prompts (``prompt_estimates(clusters=...)``) are taken from A.

    Examples
    --------
    >>> from rlmetrics.validation.exact.summary import prompt_estimates
    >>> uids = [u for u in "abcdefgh" for _ in range(4)]
    >>> run_a = prompt_estimates(["m"] * 32, uids, {"acc": [1, 0, 0, 0] * 8})
    >>> run_b = prompt_estimates(["m"] * 32, uids, {"acc": [1, 1, 0, 0] * 6 + [1, 0, 0, 0] * 2})
    >>> cmp = compare_tables(run_a, run_b, curves=False)[0]
    >>> d = cmp.metrics["mean@4"]
    >>> cmp.n_matched, round(d.diff, 4), round(d.p_value, 4), [round(x, 3) for x in (d.ci_low, d.ci_high)]
    (8, 0.1875, 0.0156, [-0.029, 0.387])
    >>> d.method, d.ci_method
    ('paired sign-flip, mid-p (all 64 sign flips)', 'Newcombe (method 10) on wilson-edge intervals')
    >>> compare_tables(run_a, run_b, curves=False, interval="t")[0].metrics["mean@4"].ci_low > 0
    True
    >>> cmp.family.method, cmp.family.size, cmp.adjusted["mean@4"].p_value >= d.p_value
    ('holm', 5, True)
    """
    adjust, margin = _family_options(adjust, margin)
    if not isinstance(test, str) or test not in TESTS:
        raise ValueError(f"test must be one of {', '.join(TESTS)}; got {test!r}")
    if not isinstance(interval, str) or interval not in INTERVALS:
        raise ValueError(f"interval must be one of {', '.join(INTERVALS)}; got {interval!r}")
    out = []
    for src, per_var in a.items():
        for var, ta in per_var.items():
            tb = b.get(src, {}).get(var)
            if tb is None:
                continue
            opts = _Options(confidence, power, curves, n_boot, seed, test, interval)
            out.append(_compare_pair(src, var, ta, tb, opts))
    return adjust_comparisons(out, method=adjust, margin=margin)


def _family_options(adjust: object, margin: object) -> tuple[str, float | None]:
    """``adjust`` and ``margin`` checked before any work."""
    return check_adjust(adjust), None if margin is None else check_margin(margin)


class _Options(NamedTuple):
    """The options of :func:`compare_tables` that each table's comparison uses."""

    confidence: float
    power: float
    curves: bool
    n_boot: int
    seed: int
    test: str = DEFAULT_TEST
    interval: str = DEFAULT_INTERVAL


def _compare_pair(src: str, var: str, ta: PromptTable, tb: PromptTable, opts: _Options) -> TableComparison:
    confidence, power, curves, n_boot, seed = opts.confidence, opts.power, opts.curves, opts.n_boot, opts.seed
    matched = match_prompts(ta.keys, tb.keys)
    ia, ib = matched.a, matched.b
    clusters = None if ta.clusters is None else ta.clusters[ia]
    col_b = {name: j for j, name in enumerate(tb.names)}
    metrics: dict[str, PairedDifference] = {}
    for ja, name in enumerate(ta.names):
        jb = col_b.get(name)
        if jb is None:
            continue
        xa, xb = ta.values[ia, ja], tb.values[ib, jb]
        both = ~(np.isnan(xa) | np.isnan(xb))
        if both.sum() < 2:
            continue
        metrics[name] = paired_difference(
            xa[both],
            xb[both],
            confidence=confidence,
            power=power,
            clusters=None if clusters is None else clusters[both],
            test=opts.test,
            interval=opts.interval,
            seed=seed,
        )
    curve = band_a = band_b = None
    if curves and ta.binary and tb.binary and ia.size >= 2:
        n_a, n_b = ta.counts[ia], tb.counts[ib]
        k_max = int(min(n_a.min(), n_b.min()))
        if k_max >= 2:
            ks = np.arange(1, k_max + 1)
            c_a = np.rint(ta.values[ia, 0] * n_a).astype(np.int64)
            c_b = np.rint(tb.values[ib, 0] * n_b).astype(np.int64)
            curves_a, curves_b = pass_at_k_curves(n_a, c_a, ks=ks), pass_at_k_curves(n_b, c_b, ks=ks)
            curve = compare_curves(
                curves_a, curves_b, ks, confidence=confidence, n_boot=n_boot, seed=seed, clusters=clusters
            )
            band_a, band_b = (
                column_intervals(c, confidence=confidence, clusters=clusters, max_n_eff=n.sum())
                for c, n in ((curves_a, n_a), (curves_b, n_b))
            )
    return TableComparison(
        src, var, int(ia.size), matched.n_only_a, matched.n_only_b, metrics, curve, band_a, band_b
    )


def compare_summaries(
    a: Mapping[str, Mapping[str, Any]],
    b: Mapping[str, Mapping[str, Any]],
    *,
    confidence: float = 0.95,
    power: float = 0.8,
    adjust: str = "holm",
    margin: float | None = None,
) -> list[TableComparison]:
    """B minus A from two :func:`~rlmetrics.validation.exact.summary.summarize_validation` results alone.

    Without the prompts the pairing is lost: each metric gets Welch's unpaired test from the
    means, standard errors and prompt counts (wider than the paired one when the runs are
    correlated, as two checkpoints on the same prompts are) and its Student t interval
    (``ci_method`` ``"Student t"``: Newcombe's needs the prompts). ``adjust`` and ``margin`` as
    in :func:`compare_tables`.

    Examples
    --------
    >>> from rlmetrics.validation.exact.summary import summarize_validation
    >>> uids = [u for u in "abcdefgh" for _ in range(4)]
    >>> s_a = summarize_validation(["m"] * 32, uids, {"acc": [1, 0, 0, 0] * 8})
    >>> s_b = summarize_validation(["m"] * 32, uids, {"acc": [1, 1, 0, 0] * 6 + [1, 0, 0, 0] * 2})
    >>> d = compare_summaries(s_a, s_b)[0].metrics["mean@4"]
    >>> round(d.diff, 4), d.method
    (0.1875, 'unpaired (Welch)')
    """
    adjust, margin = _family_options(adjust, margin)
    out = []
    for src, per_var in a.items():
        for var, body_a in per_var.items():
            body_b = b.get(src, {}).get(var)
            if body_b is None:
                continue
            metrics = {}
            for name, ma in body_a["metrics"].items():
                mb = body_b["metrics"].get(name)
                if mb is None or min(ma["n_prompts"], mb["n_prompts"]) < 2:
                    continue
                if not (np.isfinite(ma["se"]) and np.isfinite(mb["se"])):
                    continue
                metrics[name] = unpaired_difference(
                    ma["value"],
                    ma["se"],
                    ma["n_prompts"],
                    mb["value"],
                    mb["se"],
                    mb["n_prompts"],
                    confidence=confidence,
                    power=power,
                )
            out.append(TableComparison(src, var, None, None, None, metrics, None))
    return adjust_comparisons(out, method=adjust, margin=margin)

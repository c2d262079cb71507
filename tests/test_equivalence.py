"""Two one-sided tests and the verdicts of margin_test: against scipy, by construction, by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from rlmetrics.validation.comparison.equivalence import margin_test, margin_verdict
from rlmetrics.validation.comparison.paired import paired_difference, unpaired_difference


@pytest.mark.parametrize("seed", range(4), ids=[f"seed{s}" for s in range(4)])
@pytest.mark.parametrize("margin", [0.02, 0.1], ids=["m0.02", "m0.1"])
def test_one_sided_p_values_match_scipy(seed, margin):
    """On paired data the tests are one-sample t tests of d = b - a against -margin and +margin."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(size=40)
    b = np.clip(a + rng.normal(0.01, 0.1, size=40), 0, 1)
    t = margin_test(paired_difference(a, b), margin)
    d = b - a
    want_low = scipy_stats.ttest_1samp(d, -margin, alternative="greater").pvalue
    want_high = scipy_stats.ttest_1samp(d, margin, alternative="less").pvalue
    assert t.p_noninferior == pytest.approx(want_low, rel=1e-9)
    assert t.p_nonsuperior == pytest.approx(want_high, rel=1e-9)
    assert t.p_equivalent == max(t.p_noninferior, t.p_nonsuperior)


@pytest.mark.parametrize(
    ("shift", "margin", "verdict"),
    [
        (0.2, 0.05, "better"),
        (-0.2, 0.05, "worse"),
        (0.01, 0.01, "no worse than 0.01"),
        (0.0, 0.2, "equivalent within 0.2"),
        (0.0, 0.01, "inconclusive"),
    ],
    ids=["better", "worse", "no-worse", "equivalent", "inconclusive"],
)
def test_verdicts_follow_the_interval(shift, margin, verdict):
    rng = np.random.default_rng(1)
    a = rng.uniform(size=60)
    b = a + shift + rng.normal(0, 0.05, size=60)
    r = paired_difference(a, b)
    t = margin_test(r, margin)
    assert t.verdict == verdict, (r.ci_low, r.ci_high)


def test_unpaired_and_degenerate_results():
    welch = unpaired_difference(0.50, 0.01, 500, 0.505, 0.01, 500)
    t = margin_test(welch, 0.05)
    assert t.verdict == "equivalent within 0.05" and t.p_equivalent < 0.01
    exact = margin_test(paired_difference([0.5, 1.0], [0.75, 1.25], test="t"), 0.1)  # every d = 0.25: se 0
    assert (exact.p_noninferior, exact.p_nonsuperior, exact.verdict) == (0.0, 1.0, "better")
    with pytest.warns(RuntimeWarning):
        undefined = margin_test(paired_difference([0.5], [0.75]), 0.1)
    assert undefined.verdict == "undefined" and math.isnan(undefined.p_equivalent)


@pytest.mark.parametrize(
    ("low", "high", "verdict"),
    [
        (0.001, 0.5, "better"),
        (0.001, 0.005, "better"),
        (-0.5, -0.001, "worse"),
        (-0.009, 0.009, "equivalent within 0.01"),
        (-0.009, 0.01, "no worse than 0.01"),
        (-0.01, 0.009, "inconclusive"),
        (-0.5, 0.5, "inconclusive"),
        (float("nan"), 0.1, "undefined"),
    ],
    ids=[
        "better",
        "better-inside",
        "worse",
        "equivalent",
        "upper-at-margin",
        "lower-at-margin",
        "wide",
        "nan",
    ],
)
def test_margin_verdict_by_its_definition(low, high, verdict):
    """Strict inequalities: an interval that touches a margin is not inside it."""
    assert margin_verdict(low, high, 0.01) == verdict


def test_equivalence_holds_its_level_at_the_margin():
    """B better than A by exactly the margin: 'equivalent' is declared at most 2.5% of the time
    (TOST: the upper bound below +margin is a one-sided 2.5% test)."""
    rng = np.random.default_rng(5)
    reps, hits = 2000, 0
    for _ in range(reps):
        a = rng.uniform(size=50)
        b = a + 0.05 + rng.normal(0, 0.1, size=50)
        hits += margin_test(paired_difference(a, b), 0.05).verdict.startswith("equivalent")
    assert hits / reps <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / reps)


def test_non_inferiority_holds_its_level_at_the_margin():
    """B worse than A by exactly the margin: 'no worse than' is declared at most 2.5% of the time
    (each bound of the 95% interval is a one-sided 2.5% test)."""
    rng = np.random.default_rng(4)
    reps, hits = 2000, 0
    for _ in range(reps):
        a = rng.uniform(size=50)
        b = a - 0.05 + rng.normal(0, 0.1, size=50)
        verdict = margin_test(paired_difference(a, b), 0.05).verdict
        hits += verdict.startswith(("no worse", "equivalent", "better"))
    assert hits / reps <= 0.025 + 3 * math.sqrt(0.025 * 0.975 / reps)


@pytest.mark.parametrize(
    ("result", "margin", "exc", "match"),
    [
        ((0.1, 0.2), 0.1, TypeError, "result must be a PairedDifference; got tuple"),
        (None, 0.0, ValueError, r"margin must be > 0 \(the difference that does not matter\); got 0.0"),
        (None, -1.0, ValueError, "margin must be >= 0; got -1.0"),
        (None, "0.1", TypeError, "margin must be a number; got str"),
    ],
    ids=["result", "zero", "negative", "type"],
)
def test_errors(result, margin, exc, match):
    if result is None:
        result = paired_difference([0.1, 0.2, 0.3], [0.2, 0.2, 0.4])
    with pytest.raises(exc, match=match):
        margin_test(result, margin)

"""Two one-sided tests and the verdicts of margin_test: against scipy, by construction, by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from rlmetrics.validation.comparison.equivalence import margin_test, margin_verdict, one_sided_bound
from rlmetrics.validation.comparison.paired import paired_difference, unpaired_difference

#: the one-sided level of each bound of a 95% interval
ALPHA = 0.025


@pytest.mark.parametrize("seed", range(4), ids=[f"seed{s}" for s in range(4)])
@pytest.mark.parametrize("margin", [0.02, 0.1], ids=["m0.02", "m0.1"])
def test_one_sided_p_values_match_scipy(seed, margin):
    """With the t interval the tests are one-sample t tests of d = b - a against -margin and +margin."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(size=40)
    b = np.clip(a + rng.normal(0.01, 0.1, size=40), 0, 1)
    t = margin_test(paired_difference(a, b, interval="t"), margin)
    d = b - a
    want_low = scipy_stats.ttest_1samp(d, -margin, alternative="greater").pvalue
    want_high = scipy_stats.ttest_1samp(d, margin, alternative="less").pvalue
    assert t.p_noninferior == pytest.approx(want_low, rel=1e-9)
    assert t.p_nonsuperior == pytest.approx(want_high, rel=1e-9)
    assert t.p_equivalent == max(t.p_noninferior, t.p_nonsuperior)


@pytest.mark.parametrize("seed", range(3), ids=[f"seed{s}" for s in range(3)])
@pytest.mark.parametrize("interval", ["newcombe", "inverted"], ids=["newcombe", "inverted"])
def test_one_sided_p_values_invert_the_interval(seed, interval):
    """Newcombe's (the default for rates) and the inverted test's one-sided p-values: the level at
    which a freshly computed interval's bound meets the margin, i.e. paired_difference at
    confidence 1 - 2p has its lower bound at -margin (to the bisection's precision)."""
    rng = np.random.default_rng(seed)
    rates = rng.uniform(0.1, 0.9, size=30)
    a, b = rng.binomial(8, rates) / 8, rng.binomial(8, rates) / 8
    r = paired_difference(a, b, interval=interval)
    margin = 0.5 * (r.ci_high - r.ci_low)  # p-values well inside (0, 1/2)
    t = margin_test(r, margin)
    assert 0.0 < t.p_noninferior < 0.5 and 0.0 < t.p_nonsuperior < 0.5
    eps = 1e-6
    for p, side in ((t.p_noninferior, "lower"), (t.p_nonsuperior, "upper")):
        below = paired_difference(a, b, interval=interval, confidence=1 - 2 * (p - eps))
        above = paired_difference(a, b, interval=interval, confidence=1 - 2 * (p + eps))
        if side == "lower":  # excluded just above p, not just below
            assert below.ci_low <= -margin < above.ci_low
        else:
            assert below.ci_high >= margin > above.ci_high
        assert one_sided_bound(r, p + eps, side) == pytest.approx(
            above.ci_low if side == "lower" else above.ci_high, rel=1e-12
        )
    if interval == "newcombe":  # a continuous interval: the bound is at the margin
        at = paired_difference(a, b, confidence=1 - 2 * t.p_noninferior)
        assert at.ci_low == pytest.approx(-margin, abs=1e-9)


def test_one_sided_p_values_of_a_t_result_are_the_bisections():
    """The closed-form t p-values equal the inversion by bisection that other methods use."""
    from rlmetrics.validation.comparison.equivalence import _inverted_p

    rng = np.random.default_rng(3)
    a = rng.uniform(size=25)
    b = np.clip(a + rng.normal(0.02, 0.1, size=25), 0, 1)
    r = paired_difference(a, b, interval="t")
    for margin in (0.01, 0.05, 0.2):
        t = margin_test(r, margin)
        assert _inverted_p(r, margin, "lower") == pytest.approx(t.p_noninferior, abs=1e-10)
        assert _inverted_p(r, margin, "upper") == pytest.approx(t.p_nonsuperior, abs=1e-10)


_rates = st.integers(0, 8).map(lambda c: c / 8)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(_rates, _rates), min_size=3, max_size=40),
    st.sampled_from([0.01, 0.05, 0.1, 0.3]),
    st.sampled_from(["newcombe", "t", "inverted"]),
)
def test_tost_verdict_is_interval_inclusion(pairs, margin, interval):
    """Property over random tables of rates: non-inferior iff the lower bound of the 95%
    (1 - 2 alpha) interval shown is above -margin iff p_noninferior < alpha; equivalent iff that
    interval is inside (-margin, margin) iff the TOST p-value < alpha; whatever the method."""
    a, b = (np.array(x) for x in zip(*pairs, strict=True))
    r = paired_difference(a, b, interval=interval)
    t = margin_test(r, margin)
    assert t.verdict == margin_verdict(r.ci_low, r.ci_high, margin)
    assert (t.p_noninferior < ALPHA) == (r.ci_low > -margin)
    assert (t.p_nonsuperior < ALPHA) == (r.ci_high < margin)
    assert (t.p_equivalent < ALPHA) == (-margin < r.ci_low and r.ci_high < margin)
    if t.verdict.startswith(("equivalent", "no worse")):
        assert t.p_noninferior < ALPHA


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
    # every prompt solved by both runs (an edge): the t's point 0 calls them equivalent within
    # one point; Newcombe's interval keeps each run's width (issue 26) and does not
    ones = np.ones(30)
    point = margin_test(paired_difference(ones, ones, interval="t"), 0.01)
    assert (point.p_equivalent, point.verdict) == (0.0, "equivalent within 0.01")
    edge = margin_test(paired_difference(ones, ones), 0.01)
    assert edge.verdict == "inconclusive" and edge.p_noninferior > ALPHA and edge.p_nonsuperior > ALPHA
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


def test_newcombe_non_inferiority_holds_its_level_at_the_margin():
    """The default interval on rates (8 samples a prompt): B's solve rates below A's by exactly
    the margin, 'no worse than' (or better) is declared at most 2.5% (+ 3 binomial SE)."""
    rng = np.random.default_rng(6)
    reps, hits = 600, 0
    for _ in range(reps):
        rates = rng.uniform(0.1, 0.9, size=50)
        a, b = rng.binomial(8, rates) / 8, rng.binomial(8, rates - 0.05) / 8
        r = paired_difference(a, b)
        hits += margin_test(r, 0.05).verdict.startswith(("no worse", "equivalent", "better"))
    assert r.ci_method.startswith("Newcombe")
    assert hits / reps <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / reps)


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

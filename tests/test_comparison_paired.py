"""Matching prompts and paired / unpaired differences: scipy's t tests, sandwich and brute-force
references, and simulations.

The simulations draw prompts of heterogeneous difficulty (``p_i ~ Beta``), ``n`` generations per
prompt and run, and check the error rates the statistics promise: false positives of the paired
t test under no difference, the power at the reported minimum detectable effect, the coverage of
intervals.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics.validation.comparison.paired import match_prompts, paired_difference, unpaired_difference
from validation_refs import clustered_runs

# --------------------------------------------------------------------------------------------
# helpers


def runs_on_prompts(rng, reps: int, p: int, mean: float, n: int, *, shift: float = 0.0, kappa: float = 2.0):
    """(reps, p) per-prompt accuracies c/n of two runs on the same prompts.

    Prompt difficulty ``p_i ~ Beta(mean * kappa, (1 - mean) * kappa)``; run B's success rate is
    ``p_i + shift * (1 - p_i)``, so the true difference of the means is ``shift * (1 - mean)``.
    """
    pa = rng.beta(mean * kappa, (1 - mean) * kappa, size=(reps, p))
    pb = pa + shift * (1 - pa)
    return rng.binomial(n, pa) / n, rng.binomial(n, pb) / n, shift * (1 - mean)


# --------------------------------------------------------------------------------------------
# match_prompts


@pytest.mark.parametrize(
    ("keys_a", "keys_b", "a", "b", "only_a", "only_b"),
    [
        ([("s", 1), ("s", 2), ("t", 1)], [("t", 1), ("s", 1)], [0, 2], [1, 0], 1, 0),
        (["x", "y"], ["y", "x", "z"], [0, 1], [1, 0], 0, 1),
        ([1, 2, 3], [4, 5], [], [], 3, 2),
        ([], [], [], [], 0, 0),
        (np.array([["s", "1"], ["s", "2"]]), [("s", "2")], [1], [0], 1, 0),
    ],
    ids=["tuples", "strings-extra-in-b", "disjoint", "empty", "2d-array-rows"],
)
def test_match_prompts_hand_cases(keys_a, keys_b, a, b, only_a, only_b):
    m = match_prompts(keys_a, keys_b)
    assert m.a.tolist() == a and m.b.tolist() == b
    assert (m.n_only_a, m.n_only_b) == (only_a, only_b)
    assert m.a.dtype == np.int64 and m.b.dtype == np.int64


@pytest.mark.parametrize(
    ("keys_a", "keys_b", "exc", "match"),
    [
        (
            [("s", 1), ("s", 1)],
            [("s", 1)],
            ValueError,
            r"keys_a has a duplicate key \('s', 1\) \(positions 0 and 1\)",
        ),
        (["a"], ["b", "c", "b"], ValueError, r"keys_b has a duplicate key 'b' \(positions 0 and 2\)"),
        ([["s", 1]], [], TypeError, "keys_a must hold hashable keys"),
        ("abc", ["a"], TypeError, "keys_a must be a sequence of prompt keys; got str"),
        ([1], 5, TypeError, "keys_b must be a sequence of prompt keys; got int"),
    ],
    ids=["dup-a", "dup-b", "unhashable", "string-not-keys", "int-not-keys"],
)
def test_match_prompts_errors(keys_a, keys_b, exc, match):
    with pytest.raises(exc, match=match):
        match_prompts(keys_a, keys_b)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 30), unique=True, max_size=25),
    st.lists(st.integers(0, 30), unique=True, max_size=25),
)
def test_match_prompts_brute_force(keys_a, keys_b):
    m = match_prompts(keys_a, keys_b)
    want = [(i, j) for i, ka in enumerate(keys_a) for j, kb in enumerate(keys_b) if ka == kb]
    assert list(zip(m.a.tolist(), m.b.tolist())) == want
    assert m.n_only_a == len(keys_a) - len(want) and m.n_only_b == len(keys_b) - len(want)


# --------------------------------------------------------------------------------------------
# paired_difference: references


@pytest.mark.parametrize(
    ("p", "seed", "confidence"),
    [(5, 0, 0.95), (30, 1, 0.95), (200, 2, 0.9), (1000, 3, 0.99)],
    ids=["P5", "P30", "P200-90", "P1000-99"],
)
def test_paired_difference_equals_ttest_rel(p, seed, confidence):
    from scipy import stats

    rng = np.random.default_rng(seed)
    a = rng.random(p)
    b = np.clip(a + rng.normal(0.05, 0.2, p), 0, 1)
    r = paired_difference(a, b, confidence=confidence, test="t", interval="t")
    ref = stats.ttest_rel(b, a)
    ci = ref.confidence_interval(confidence)
    assert math.isclose(r.statistic, float(ref.statistic), rel_tol=1e-10)
    assert math.isclose(r.p_value, float(ref.pvalue), rel_tol=1e-8, abs_tol=1e-300)
    assert math.isclose(r.ci_low, float(ci.low), rel_tol=1e-10) and math.isclose(
        r.ci_high, float(ci.high), rel_tol=1e-10
    )
    assert r.df == p - 1 and r.n == p and r.n_clusters is None and r.method == "paired t"
    assert math.isclose(r.diff, r.mean_b - r.mean_a, abs_tol=1e-12)
    assert math.isclose(r.correlation, float(np.corrcoef(a, b)[0, 1]), rel_tol=1e-10)
    # the MDE with Student-t quantiles (Miller eqs. 9-10)
    mde = (stats.t.ppf(0.5 + confidence / 2, p - 1) + stats.t.ppf(0.8, p - 1)) * r.se
    assert math.isclose(r.mde, mde, rel_tol=1e-10)


def sandwich_cr1_se(d: np.ndarray, clusters: np.ndarray) -> float:
    """Cluster-robust (CR1, Stata's) standard error of the intercept of d ~ 1, as a sandwich."""
    x = np.ones((d.size, 1))
    beta = np.linalg.lstsq(x, d, rcond=None)[0]
    e = d - x @ beta
    bread = np.linalg.inv(x.T @ x)
    meat = np.zeros((1, 1))
    labels = sorted(set(clusters.tolist()))
    for c in labels:
        sel = clusters == c
        score = x[sel].T @ e[sel]
        meat += np.outer(score, score)
    g, n, k = len(labels), d.size, x.shape[1]
    v = g / (g - 1) * (n - 1) / (n - k) * bread @ meat @ bread
    return float(np.sqrt(v[0, 0]))


@pytest.mark.parametrize(("g", "m", "seed"), [(2, 3, 0), (10, 4, 1), (40, 7, 2)], ids=["G2", "G10", "G40"])
def test_clustered_se_equals_sandwich(g, m, seed):
    from scipy import stats

    rng = np.random.default_rng(seed)
    clusters = rng.permutation(np.arange(g).repeat(m))
    shared = rng.normal(0, 0.3, g)[clusters]
    a = rng.random(g * m)
    b = a + shared + rng.normal(0.05, 0.1, g * m)
    r = paired_difference(a, b, clusters=[f"c{c}" for c in clusters], test="t", interval="t")
    se = sandwich_cr1_se(b - a, clusters)
    assert math.isclose(r.se, se, rel_tol=1e-10)
    assert r.n_clusters == g and r.df == g - 1 and r.method == f"paired t, clustered ({g} clusters)"
    t = r.diff / se
    assert math.isclose(r.p_value, 2 * stats.t.sf(abs(t), g - 1), rel_tol=1e-8)
    half = stats.t.ppf(0.975, g - 1) * se
    assert math.isclose(r.ci_high - r.ci_low, 2 * half, rel_tol=1e-10)


def test_singleton_clusters_are_the_unclustered_se():
    rng = np.random.default_rng(4)
    a, b = rng.random(50), rng.random(50)
    plain = paired_difference(a, b)
    single = paired_difference(a, b, clusters=np.arange(50))
    assert math.isclose(single.se, plain.se, rel_tol=1e-12)
    assert math.isclose(single.p_value, plain.p_value, rel_tol=1e-10)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=3, max_size=40))
def test_paired_difference_swap_negates(pairs):
    a, b = np.array(pairs).T
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ab, ba = paired_difference(a, b), paired_difference(b, a)
    assert ba.diff == pytest.approx(-ab.diff, abs=1e-12)
    assert ba.se == pytest.approx(ab.se, rel=1e-9, abs=1e-15)
    assert ba.p_value == pytest.approx(ab.p_value, rel=1e-9, abs=1e-12)
    assert ba.ci_low == pytest.approx(-ab.ci_high, abs=1e-9)


def test_constant_differences_are_exact():
    """Every prompt's difference the same: the t's standard error is 0 and its interval the point
    ``diff``. Where both runs sit at an edge (every prompt solved by both) the default Newcombe
    interval keeps each run's own width (issue 26: the t's point 0 is what under-covers there)."""
    r = paired_difference([0.1, 0.5, 0.9], [0.35, 0.75, 1.15], test="t")
    assert r.ci_method == "Student t (values outside [0, 1]: Newcombe needs rates)"
    assert r.se == 0.0 and r.ci_low == r.ci_high == r.diff == pytest.approx(0.25)
    assert r.p_value == 0.0 and r.mde == 0.0
    same = paired_difference([0.2, 0.4], [0.2, 0.4], test="t", interval="t")
    assert same.diff == 0.0 and same.p_value == 1.0 and (same.ci_low, same.ci_high) == (0.0, 0.0)
    assert same.correlation == pytest.approx(1.0)
    ones = np.ones(30)
    point, wide = paired_difference(ones, ones, interval="t"), paired_difference(ones, ones)
    assert (point.ci_low, point.ci_high) == (0.0, 0.0)
    assert wide.se == 0.0 and wide.ci_low < -0.1 and wide.ci_high > 0.1 and wide.p_value == 1.0


def test_correlation_undefined_for_a_constant_run():
    r = paired_difference([0.5, 0.5, 0.5], [0.0, 0.5, 1.0])
    assert math.isnan(r.correlation) and r.se > 0


@pytest.mark.parametrize(
    ("a", "b", "clusters", "match"),
    [
        ([0.5], [1.0], None, "at least two prompts for a standard error; got 1"),
        ([], [], None, "at least two prompts; got 0"),
        (
            [0.1, 0.2, 0.3],
            [0.2, 0.2, 0.5],
            ["x", "x", "x"],
            "at least two clusters for a standard error; got 1",
        ),
    ],
    ids=["one-prompt", "no-prompt", "one-cluster"],
)
def test_paired_difference_undefined_warns(a, b, clusters, match):
    with pytest.warns(RuntimeWarning, match=match):
        r = paired_difference(a, b, clusters=clusters)
    assert math.isnan(r.se) and math.isnan(r.ci_low) and math.isnan(r.p_value) and math.isnan(r.mde)
    assert r.n == len(a)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"a": [0.1, 0.2], "b": [0.1]}, ValueError, "a and b must have the same length .* got 2 and 1"),
        ({"a": [[0.1, 0.2]], "b": [[0.1, 0.2]]}, ValueError, r"a must be 1-D .* got shape \(1, 2\)"),
        ({"a": [0.1, np.nan], "b": [0.1, 0.2]}, ValueError, "a must be finite; found nan"),
        ({"a": [0.1, 0.2], "b": [0.1, np.inf]}, ValueError, "b must be finite; found inf"),
        ({"a": ["x", "y"], "b": [0.1, 0.2]}, TypeError, "a must hold numbers; got dtype <U1"),
        (
            {"a": [0.1, 0.2], "b": [0.1, 0.2], "clusters": [1]},
            ValueError,
            r"one label per prompt \(2\); got 1",
        ),
        ({"a": [0.1, 0.2], "b": [0.1, 0.2], "clusters": [[1], [2]]}, TypeError, "hashable labels"),
        ({"a": [0.1, 0.2], "b": [0.1, 0.2], "clusters": np.array([1.0, np.nan])}, ValueError, "NaN labels"),
        ({"a": [0.1, 0.2], "b": [0.1, 0.2], "clusters": 3}, TypeError, "clusters must be a sequence"),
        (
            {"a": [0.1, 0.2], "b": [0.1, 0.2], "confidence": 1.0},
            ValueError,
            r"confidence must be in \(0, 1\); got 1.0",
        ),
        ({"a": [0.1, 0.2], "b": [0.1, 0.2], "confidence": "95%"}, TypeError, "confidence must be a number"),
        ({"a": [0.1, 0.2], "b": [0.1, 0.2], "power": 0.0}, ValueError, r"power must be in \(0, 1\)"),
        (
            {"a": [0.1, 0.2], "b": [0.1, 0.2], "test": "z"},
            ValueError,
            "test must be one of t, sign-flip, signed-rank; got 'z'",
        ),
        (
            {"a": [0.1, 0.2], "b": [0.1, 0.2], "n_flips": 0},
            ValueError,
            "n_flips must be an integer >= 1; got 0",
        ),
        ({"a": [0.1, 0.2], "b": [0.1, 0.2], "seed": -1}, ValueError, "seed must be an integer >= 0; got -1"),
    ],
    ids=[
        "length",
        "2d",
        "nan",
        "inf",
        "strings",
        "clusters-length",
        "clusters-unhashable",
        "clusters-nan",
        "clusters-scalar",
        "confidence-1",
        "confidence-str",
        "power-0",
        "test-unknown",
        "n_flips-0",
        "seed-negative",
    ],
)
def test_paired_difference_errors(kwargs, exc, match):
    kwargs = dict(kwargs)
    a, b = kwargs.pop("a"), kwargs.pop("b")
    with pytest.raises(exc, match=match):
        paired_difference(a, b, **kwargs)


def test_summary_line():
    r = paired_difference([0.2, 0.4, 0.6, 0.8], [0.3, 0.6, 0.6, 0.9], confidence=0.9, test="t")
    line = r.summary()
    assert line.startswith("B - A = 0.1 (90% CI [") and "n = 4, paired t" in line and "MDE = " in line


# --------------------------------------------------------------------------------------------
# paired_difference(test="sign-flip")


def brute_force_sign_flip(d, mid_p: bool = True) -> float:
    """The two-sided sign-flip p-value of sum(d) by a loop over all 2^n sign vectors (zeros included)."""
    observed = abs(sum(d))
    greater = ties = 0
    flips = list(itertools.product((-1.0, 1.0), repeat=len(d)))
    for signs in flips:
        s = abs(sum(x * y for x, y in zip(signs, d, strict=True)))
        if math.isclose(s, observed, rel_tol=1e-12, abs_tol=1e-12):
            ties += 1
        elif s > observed:
            greater += 1
    return (greater + (0.5 if mid_p else 1.0) * ties) / len(flips)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([0.25, 0.5, 0.75, 1.0, 0.0], [0.5, 0.75, 0.75, 1.0, 0.25]),
        ([0.0] * 6, [0.125, 0.125, 0.25, 0.0, 0.125, 0.375]),
        ([0.5, 0.5, 0.25, 1.0, 0.0, 0.75, 0.5], [0.25, 0.75, 0.5, 0.875, 0.125, 0.75, 0.5]),
        (
            [0.1, 0.7, 0.3, 0.9, 0.2, 0.4, 0.6, 0.55, 0.35, 0.05],
            [0.3, 0.2, 0.8, 0.6, 0.2, 0.9, 0.1, 0.5, 0.3, 0.7],
        ),
        ([1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]),
    ],
    ids=["three-equal", "zeros-and-ties", "mixed-signs", "continuous-10", "all-zero"],
)
@pytest.mark.parametrize("mid_p", [True, False], ids=["mid-p", "standard"])
def test_sign_flip_exact_equals_brute_force(a, b, mid_p):
    from rlmetrics.validation.comparison.paired import sign_flip_p

    d = [y - x for x, y in zip(a, b, strict=True)]
    want = brute_force_sign_flip(d, mid_p) if any(d) else 1.0
    p, m, exact = sign_flip_p(np.array(d), 1e-15, mid_p=mid_p)
    assert exact and m == sum(x != 0 for x in d)
    assert math.isclose(p, want, rel_tol=1e-12)
    if mid_p:
        r = paired_difference(a, b)  # the default
        t = paired_difference(a, b, test="t")
        assert math.isclose(r.p_value, want, rel_tol=1e-12)
        # the interval (Newcombe's by default), se, df and MDE do not depend on the test;
        # interval="inverted" inverts the test
        assert (r.ci_low, r.ci_high, r.se, r.df, r.mde, r.ci_method) == (
            t.ci_low,
            t.ci_high,
            t.se,
            t.df,
            t.mde,
            "Newcombe (method 10) on wilson-edge intervals",
        )
        inv = paired_difference(a, b, interval="inverted")
        assert inv.ci_method == f"inverted sign-flip, mid-p (all {2 ** len(d)} sign flips)"
        assert inv.p_value == r.p_value and inv.ci_low <= r.diff <= inv.ci_high
        if any(d):
            assert r.method == f"paired sign-flip, mid-p (all {2**m} sign flips)"


def brute_force_flip_p_at(d, theta, w=None) -> float:
    """The mid-p of the sign-flip test of d - theta w by a loop over all 2^n sign vectors."""
    w = [1.0] * len(d) if w is None else w
    x = [di - theta * wi for di, wi in zip(d, w, strict=True)]
    observed, tol = abs(sum(x)), 1e-12
    hits = 0.0
    for signs in itertools.product((1, -1), repeat=len(x)):
        s = abs(sum(si * xi for si, xi in zip(signs, x, strict=True)))
        hits += 1.0 if s > observed + tol else 0.5 if abs(s - observed) <= tol else 0.0
    return hits / 2 ** len(x)


@pytest.mark.parametrize(
    ("d", "w"),
    [
        ([0.25, 0.5, 0.0, 0.0, 0.25], None),
        ([0.3, -0.1, 0.5, 0.2, 0.7, 0.1], None),
        ([0.125, 0.0, 0.25, 0.0, 0.375, -0.125, 0.125, 0.0], None),
        ([1.0, 0.5, 0.25, 0.0, 0.75, 0.5, 0.0], [2, 1, 1, 3, 1, 2, 1]),
    ],
    ids=["five-with-zeros", "six-mixed", "eight-ties", "clustered-seven"],
)
@pytest.mark.parametrize("confidence", [0.9, 0.95], ids=["90", "95"])
def test_sign_flip_interval_is_the_brute_force_inversion(d, w, confidence):
    """Just inside each end the brute-force mid-p is >= 1 - confidence, just outside it is below."""
    from rlmetrics.validation.comparison.paired import sign_flip_interval

    lo, hi, exact = sign_flip_interval(np.array(d), None if w is None else np.array(w, float), confidence)
    alpha, eps = 1.0 - confidence, 1e-7
    assert exact and lo < hi
    assert brute_force_flip_p_at(d, lo + eps, w) >= alpha and brute_force_flip_p_at(d, hi - eps, w) >= alpha
    assert brute_force_flip_p_at(d, lo - eps, w) < alpha and brute_force_flip_p_at(d, hi + eps, w) < alpha


def test_sign_flip_interval_too_few_prompts_is_unbounded():
    """Four prompts: the least two-sided mid-p is 1/16 > 5%, so no shift is rejected."""
    r = paired_difference([0.0, 0.25, 0.5, 0.5], [0.5, 0.75, 1.0, 0.75], interval="inverted")
    assert (r.ci_low, r.ci_high) == (-math.inf, math.inf) and r.p_value == 0.0625
    assert r.method == "paired sign-flip, mid-p (all 16 sign flips)"


@pytest.mark.parametrize("p", [40, 400], ids=["P40", "P400"])
def test_sign_flip_interval_with_random_flips_is_near_the_t_one(p):
    """Many symmetric differences: the inverted randomization interval is close to the t interval
    (the t is the test's large-sample limit); within 3% of the t's half-width on each side."""
    rng = np.random.default_rng(p)
    a = rng.random(p)
    b = a + rng.normal(0.05, 0.2, p)
    r, t = paired_difference(a, b, interval="inverted"), paired_difference(a, b, test="t")
    half = (t.ci_high - t.ci_low) / 2
    assert r.ci_method == "inverted sign-flip, mid-p (5000 random sign flips)"
    assert abs(r.ci_low - t.ci_low) < 0.03 * half and abs(r.ci_high - t.ci_high) < 0.03 * half
    assert paired_difference(a, b, interval="inverted", seed=1).ci_low != r.ci_low  # flips follow the seed


@pytest.mark.parametrize("seed", [0, 1, 2], ids=["s0", "s1", "s2"])
def test_sign_flip_standard_p_equals_scipy_permutation_test(seed):
    """scipy's paired permutation test (``permutation_type="samples"`` swaps a_i and b_i, i.e.
    flips the sign of d_i) enumerates every flip: its two-sided p is the standard p."""
    from scipy import stats

    from rlmetrics.validation.comparison.paired import sign_flip_p

    rng = np.random.default_rng(seed)
    a = rng.integers(0, 5, 11) / 4
    b = np.clip(a + rng.integers(-1, 3, 11) / 4, 0, 1)
    ref = stats.permutation_test(
        (b, a), lambda x, y, axis: np.mean(x - y, axis=axis), permutation_type="samples", n_resamples=np.inf
    )
    p, _, exact = sign_flip_p(b - a, 1e-12, mid_p=False)
    assert exact and math.isclose(p, float(ref.pvalue), rel_tol=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2], ids=["s0", "s1", "s2"])
def test_signed_rank_equals_scipy_wilcoxon(seed):
    """Without zeros or ties scipy's exact Wilcoxon p is the standard p of the sign flips of the
    signed ranks; paired_difference(test="signed-rank") gives their mid-p (the brute force)."""
    from scipy import stats

    from rlmetrics.validation.comparison.paired import sign_flip_p, signed_ranks

    rng = np.random.default_rng(seed)
    a = rng.random(12)
    b = a + rng.normal(0.2, 0.4, 12)
    ranks = signed_ranks(b - a)
    ref = stats.wilcoxon(b - a, method="exact")
    assert math.isclose(sign_flip_p(ranks, mid_p=False)[0], float(ref.pvalue), rel_tol=1e-9)
    r = paired_difference(a, b, test="signed-rank")
    assert r.method == "paired signed-rank (Wilcoxon), mid-p (all 4096 sign flips)"
    assert math.isclose(r.p_value, brute_force_sign_flip(ranks.tolist()), rel_tol=1e-12)
    # b leaves [0, 1]: Newcombe needs rates, so the t interval, named so
    assert r.ci_method == "Student t (values outside [0, 1]: Newcombe needs rates)"
    t = paired_difference(a, b, test="signed-rank", interval="t")
    assert (r.ci_low, r.ci_high) == (t.ci_low, t.ci_high) and t.ci_method == "Student t"


def test_sign_flip_hand_value():
    """Three equal differences of 0.25: |S*| = 0.75 for 2 of 8 flips, so the mid-p is 1/8."""
    r = paired_difference([0.25, 0.5, 0.75, 1.0, 0.0], [0.5, 0.75, 0.75, 1.0, 0.25], test="sign-flip")
    assert r.p_value == 0.125 and r.summary().endswith(
        "paired sign-flip, mid-p (all 8 sign flips), corr = 0.97, MDE = 0.23)"
    )


def test_sign_flip_random_flips_agree_with_enumeration(monkeypatch):
    """Past 16 nonzero differences: seeded random flips, within Monte Carlo error of all 2^18."""
    from rlmetrics.validation.comparison import paired as P

    rng = np.random.default_rng(5)
    a = rng.random(18)
    b = a + rng.normal(0.3, 0.4, 18)
    state = np.random.get_state()[1].copy()  # noqa: NPY002 (the global RNG)
    r1 = paired_difference(a, b, test="sign-flip", n_flips=20000, seed=3)
    assert r1.method == "paired sign-flip, mid-p (20000 random sign flips)"
    assert np.array_equal(np.random.get_state()[1], state)  # noqa: NPY002
    assert paired_difference(a, b, test="sign-flip", n_flips=20000, seed=3).p_value == r1.p_value
    assert paired_difference(a, b, test="sign-flip", n_flips=20000, seed=4).p_value != r1.p_value
    monkeypatch.setattr(P, "EXACT_FLIPS", 18)
    exact = paired_difference(a, b, test="sign-flip")
    assert exact.method == "paired sign-flip, mid-p (all 262144 sign flips)"
    assert 0.005 < exact.p_value < 0.5
    assert abs(r1.p_value - exact.p_value) < 4 * math.sqrt(exact.p_value * (1 - exact.p_value) / 20000)


def test_sign_flip_clustered_flips_cluster_totals():
    rng = np.random.default_rng(8)
    codes = np.repeat(np.arange(6), [1, 3, 2, 4, 2, 3])
    a = rng.random(codes.size)
    b = np.clip(a + rng.normal(0.1, 0.3, codes.size), 0, 1)
    r = paired_difference(a, b, clusters=codes, test="sign-flip")
    totals = np.bincount(codes, weights=b - a)
    assert r.method == "paired sign-flip, mid-p (all 64 sign flips), clustered (6 clusters)"
    assert math.isclose(r.p_value, brute_force_sign_flip(totals.tolist()), rel_tol=1e-12)


@pytest.mark.parametrize(
    ("kind", "p"),
    [("zeros", 30), ("rates", 40), ("anti", 25)],
    ids=["all-zero-30", "rates-40", "anticorrelated-25"],
)
def test_newcombe_interval_from_the_one_run_intervals(kind, p):
    """interval="newcombe": Newcombe's method 10 computed here from each run's own mean_interval
    (wilson-edge) and numpy's correlation; with every prompt unsolved by both runs it is
    [-u, u], u the one-run upper bound, where the t interval is the point 0."""
    from rlmetrics.validation.exact.intervals import mean_interval

    rng = np.random.default_rng(p)
    if kind == "zeros":
        a = b = np.zeros(p)
    else:
        a = rng.integers(0, 9, p) / 8
        b = np.clip(a + rng.integers(-2, 3, p) / 8, 0, 1) if kind == "rates" else 1 - a
    r = paired_difference(a, b, interval="newcombe")
    ia, ib = mean_interval(a), mean_interval(b)
    corr = 0.0 if np.ptp(a) == 0 or np.ptp(b) == 0 else float(np.corrcoef(a, b)[0, 1])
    d = ib.value - ia.value
    low = d - math.sqrt(
        (ib.value - ib.ci_low) ** 2
        - 2 * corr * (ib.value - ib.ci_low) * (ia.ci_high - ia.value)
        + (ia.ci_high - ia.value) ** 2
    )
    high = d + math.sqrt(
        (ib.ci_high - ib.value) ** 2
        - 2 * corr * (ib.ci_high - ib.value) * (ia.value - ia.ci_low)
        + (ia.value - ia.ci_low) ** 2
    )
    assert (r.ci_low, r.ci_high) == pytest.approx((low, high), rel=1e-12, abs=1e-15)
    assert r.ci_method == "Newcombe (method 10) on wilson-edge intervals"
    if kind == "zeros":
        assert r.ci_low == pytest.approx(-ia.ci_high) and r.ci_high == pytest.approx(ia.ci_high)
        assert ia.ci_high > 0.1
        assert paired_difference(a, b, test="t", interval="t").ci_high == 0.0


def test_interval_option_is_checked():
    with pytest.raises(ValueError, match=r"interval must be one of t, inverted, newcombe; got 'bootstrap'"):
        paired_difference([0.0, 0.5], [0.5, 0.5], interval="bootstrap")


def test_sign_flip_undefined_stays_nan():
    with pytest.warns(RuntimeWarning, match="at least two prompts"):
        r = paired_difference([0.5], [0.75], test="sign-flip")
    assert math.isnan(r.p_value) and math.isnan(r.ci_low) and r.method == "paired sign-flip, mid-p"


@pytest.mark.parametrize("mean", [0.02, 0.2, 0.5, 0.98], ids=["p0.02", "p0.2", "p0.5", "p0.98"])
def test_sign_flip_holds_its_level(mean):
    """Under no difference the sign-flip test (mid-p) rejects at most about 5%, at 30 prompts."""
    rng = np.random.default_rng([30, int(mean * 100)])
    reps = 600
    a, b, _ = runs_on_prompts(rng, reps, 30, mean, 8, kappa=1.0)
    fpr = np.mean([paired_difference(a[r], b[r], test="sign-flip").p_value < 0.05 for r in range(reps)])
    assert fpr <= 0.07
    if mean == 0.5:
        assert fpr >= 0.03


# --------------------------------------------------------------------------------------------
# paired_difference: simulations


@pytest.mark.parametrize("n", [4, 8], ids=["n4", "n8"])
@pytest.mark.parametrize("mean", [0.02, 0.5, 0.98], ids=["p0.02", "p0.5", "p0.98"])
@pytest.mark.parametrize("p", [30, 100], ids=["P30", "P100"])
def test_false_positive_rate(p, mean, n):
    """Under no difference the paired t test rejects at about its nominal 5%.

    At a mean success rate of 0.02 or 0.98 most differences are exactly 0 and the few others
    are multiples of 1/n: the t test is then conservative (about 0.004-0.01 at P = 30 and
    0.03-0.04 at P = 100, by this simulation), so only the upper bound is asserted there.
    """
    rng = np.random.default_rng([p, int(mean * 100), n])
    reps = 1500
    a, b, _ = runs_on_prompts(rng, reps, p, mean, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        fpr = np.mean([paired_difference(a[r], b[r]).p_value < 0.05 for r in range(reps)])
    assert fpr <= 0.07
    if mean == 0.5:
        assert fpr >= 0.03


@pytest.mark.parametrize("p", [30, 100], ids=["P30", "P100"])
def test_power_at_the_mde(p):
    """A planted difference equal to the reported MDE is detected about 80% of the time."""
    rng = np.random.default_rng(p)
    mean, n, shift = 0.5, 8, 0.2
    for _ in range(2):  # the MDE depends a little on the difference: find the fixed point
        a, b, _ = runs_on_prompts(rng, 300, p, mean, n, shift=shift)
        mde = np.mean([paired_difference(a[r], b[r]).mde for r in range(300)])
        shift = mde / (1 - mean)
    reps = 1500
    a, b, true = runs_on_prompts(rng, reps, p, mean, n, shift=shift)
    res = [paired_difference(a[r], b[r]) for r in range(reps)]
    power = np.mean([r.p_value < 0.05 and r.diff > 0 for r in res])
    assert np.mean([r.mde for r in res]) == pytest.approx(true, rel=0.05)
    assert 0.72 <= power <= 0.88
    # twice the MDE is found almost always
    a, b, _ = runs_on_prompts(rng, 400, p, mean, n, shift=2 * shift)
    assert np.mean([paired_difference(a[r], b[r]).p_value < 0.05 for r in range(400)]) >= 0.97


@pytest.mark.parametrize(
    ("p", "mean", "low", "high"),
    [
        (30, 0.5, 0.93, 0.975),
        (100, 0.5, 0.93, 0.975),
        (30, 0.02, 0.92, 1.0),
        (100, 0.02, 0.92, 1.0),
        (100, 0.98, 0.92, 1.0),
        (30, 0.98, 0.84, 1.0),
    ],
    ids=["P30-p0.5", "P100-p0.5", "P30-p0.02", "P100-p0.02", "P100-p0.98", "P30-p0.98-skewed"],
)
@pytest.mark.parametrize("interval", ["t", "newcombe"], ids=["t", "newcombe"])
def test_interval_coverage(p, mean, low, high, interval):
    """The 95% interval covers the true difference about 95% of the time.

    Near a ceiling (B's rates pushed from 0.98 toward 1) the differences are skewed and, on
    30 prompts, the t interval under-covers (about 0.87-0.89 by this simulation; ``low``); on
    100 it is back to nominal. The default (Newcombe's) keeps 0.93 in every cell and
    over-covers near the edges (0.97-1.0 there: ``high``); the t stays at most 0.975.
    """
    rng = np.random.default_rng([p, int(mean * 100)])
    reps = 1500
    a, b, true = runs_on_prompts(rng, reps, p, mean, 8, shift=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = [paired_difference(a[r], b[r], interval=interval) for r in range(reps)]
    coverage = np.mean([r.ci_low <= true <= r.ci_high for r in res])
    if interval == "t":
        assert low <= coverage <= 0.975
    else:
        assert 0.93 <= coverage <= high


def test_clustered_test_holds_its_level_where_the_plain_one_does_not():
    rng = np.random.default_rng(11)
    reps, g, m, n = 1000, 20, 5, 8
    rej_c = rej_u = 0
    for _ in range(reps):
        ca, cb, cl = clustered_runs(rng, g, m, n)
        rej_c += paired_difference(ca / n, cb / n, clusters=cl).p_value < 0.05
        rej_u += paired_difference(ca / n, cb / n).p_value < 0.05
    assert 0.03 <= rej_c / reps <= 0.07
    assert rej_u / reps > 0.12  # ignoring the clusters: far too many false positives


# --------------------------------------------------------------------------------------------
# unpaired_difference


@pytest.mark.parametrize(
    ("n_a", "n_b", "seed"), [(5, 7, 0), (40, 25, 1), (500, 800, 2)], ids=["small", "mid", "large"]
)
def test_unpaired_difference_equals_welch(n_a, n_b, seed):
    from scipy import stats

    rng = np.random.default_rng(seed)
    x = rng.random(n_a)
    y = rng.random(n_b) ** 0.8
    se_x, se_y = x.std(ddof=1) / math.sqrt(n_a), y.std(ddof=1) / math.sqrt(n_b)
    r = unpaired_difference(x.mean(), se_x, n_a, y.mean(), se_y, n_b)
    ref = stats.ttest_ind(y, x, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert math.isclose(r.statistic, float(ref.statistic), rel_tol=1e-10)
    assert math.isclose(r.p_value, float(ref.pvalue), rel_tol=1e-8)
    assert math.isclose(r.df, float(ref.df), rel_tol=1e-10)
    assert math.isclose(r.ci_low, float(ci.low), rel_tol=1e-9) and math.isclose(
        r.ci_high, float(ci.high), rel_tol=1e-9
    )
    assert r.method == "unpaired (Welch)" and r.n == n_a + n_b and math.isnan(r.correlation)


def test_unpaired_degenerate():
    r = unpaired_difference(0.5, 0.0, 10, 0.5, 0.0, 10)
    assert r.se == 0.0 and r.p_value == 1.0 and r.ci_low == r.ci_high == 0.0
    with pytest.warns(RuntimeWarning, match="at least two prompts per run; got n_a=1, n_b=10"):
        r = unpaired_difference(0.5, 0.1, 1, 0.6, 0.1, 10)
    assert math.isnan(r.se) and r.diff == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("args", "exc", "match"),
    [
        ((0.5, -0.1, 10, 0.6, 0.1, 10), ValueError, "se_a must be >= 0; got -0.1"),
        ((0.5, 0.1, 10, math.nan, 0.1, 10), ValueError, "mean_b must be finite; got nan"),
        ((0.5, 0.1, 0, 0.6, 0.1, 10), ValueError, "n_a must be an integer >= 1; got 0"),
        ((0.5, 0.1, 10.0, 0.6, 0.1, 10), TypeError, "n_a must be an integer >= 1; got float"),
        ((0.5, "x", 10, 0.6, 0.1, 10), TypeError, "se_a must be a number; got str"),
    ],
    ids=["negative-se", "nan-mean", "zero-n", "float-n", "string-se"],
)
def test_unpaired_errors(args, exc, match):
    with pytest.raises(exc, match=match):
        unpaired_difference(*args)

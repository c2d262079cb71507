"""Intervals over prompts: against scipy, by hand, and their coverage by simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from rlmetrics.validation.exact.intervals import DEFAULT_CI, EDGE_PRIOR
from rlmetrics.validation.intervals import column_intervals, mean_interval, wilson_interval


@pytest.mark.parametrize(
    ("k", "n"),
    [(0, 30), (1, 30), (15, 30), (29, 30), (30, 30), (3, 1000), (0, 1)],
    ids=["0of30", "1of30", "half", "29of30", "30of30", "3of1000", "0of1"],
)
@pytest.mark.parametrize("confidence", [0.9, 0.95], ids=["90", "95"])
def test_wilson_matches_scipy(k, n, confidence):
    want = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    low, high = wilson_interval(k / n, n, confidence=confidence)
    assert math.isclose(low, want.low, abs_tol=1e-12) and math.isclose(high, want.high, abs_tol=1e-12)


def test_column_intervals_equal_plain_numpy_per_column():
    """Value and SE are np.mean and np.std(ddof=1)/sqrt(P) of each column's present prompts; the t
    interval is scipy's; a column with one prompt has a NaN SE and interval, none a NaN value."""
    rng = np.random.default_rng(3)
    table = rng.standard_normal((7, 4)) * 10.0 ** rng.integers(-3, 4, size=4)
    table[[0, 2, 5], 1] = np.nan
    table[1:, 2] = np.nan
    table[:, 3] = np.nan
    t = column_intervals(table, method="t", confidence=0.9)
    for j in range(2):
        col = table[:, j][~np.isnan(table[:, j])]
        se = col.std(ddof=1) / math.sqrt(col.size)
        assert t.value[j] == pytest.approx(col.mean(), rel=1e-14)
        assert t.se[j] == pytest.approx(se, rel=1e-12)
        low, high = scipy_stats.t.interval(0.9, col.size - 1, loc=col.mean(), scale=se)
        assert (t.ci_low[j], t.ci_high[j]) == pytest.approx((low, high), rel=1e-10)
        assert t.n_prompts[j] == col.size and t.method[j] == "t"
    assert t.value[2] == table[0, 2] and math.isnan(t.se[2]) and math.isnan(t.ci_low[2])
    assert t.n_prompts[3] == 0 and math.isnan(t.value[3])


@pytest.mark.parametrize("method", ["wilson-edge", "wilson"], ids=["edge", "plain"])
def test_wilson_falls_back_to_t_outside_unit_range(method):
    t = column_intervals([[0.2, 3.0], [0.4, -1.0], [0.9, 2.0]], method=method)
    assert t.method == [method, "t"]
    r = mean_interval([0.2, 0.4, 0.9], method=method)
    assert r.method == method and 0.0 <= r.ci_low < r.value < r.ci_high <= 1.0


def test_default_is_wilson_edge():
    assert DEFAULT_CI == "wilson-edge" and mean_interval([0.2, 0.4, 0.9]).method == "wilson-edge"


def test_edges_use_one_trial_per_prompt():
    """All prompts at 0: the spread is unknown, so the interval is Wilson's for P trials (not the
    zero-width normal one, and not P x samples, which would claim homogeneous prompts)."""
    r = mean_interval([0.0] * 30, max_n_eff=30 * 16)
    assert (r.ci_low, r.ci_high) == pytest.approx(wilson_interval(0.0, 30))
    one = mean_interval([1.0] * 30)
    assert one.ci_high == 1.0 and one.ci_low == pytest.approx(wilson_interval(1.0, 30)[0])


@pytest.mark.parametrize(
    ("values", "bound"),
    [([1.0] * 9 + [0.0], "high"), ([0.0] * 98 + [1.0] * 2, "low"), ([1.0] * 97 + [0.0] * 3, "high")],
    ids=["1-failure-of-10", "2-successes-of-100", "3-failures-of-100"],
)
def test_edge_bound_at_small_counts_is_the_exact_poisson_one(values, bound):
    """0/1 prompts with 1-3 successes (or failures): the bound toward that edge is
    ``chi2.ppf(alpha / 2, 2 x) / (2 P)``, below Wilson's; the other bound is Wilson's."""
    n = len(values)
    x = sum(values) if bound == "low" else n - sum(values)
    poisson = scipy_stats.chi2.ppf(0.025, 2 * x) / (2 * n)
    edge, plain = mean_interval(values), mean_interval(values, method="wilson")
    if bound == "low":
        assert edge.ci_low == pytest.approx(poisson, rel=1e-9) and edge.ci_low < plain.ci_low
        assert edge.ci_high == pytest.approx(plain.ci_high, rel=1e-12)
    else:
        assert edge.ci_high == pytest.approx(1.0 - poisson, rel=1e-9) and edge.ci_high > plain.ci_high
        assert edge.ci_low == pytest.approx(plain.ci_low, rel=1e-12)


def test_edge_effective_n_by_hand():
    """``r = P SE^2 / (p (1 - p))`` shrunk with EDGE_PRIOR prompts toward 1 over the prompts off
    the nearer edge, then Wilson on ``P / r'`` (effective count above 3: no Poisson bound)."""
    values = np.array([0.0] * 20 + [0.25, 0.5, 0.25, 0.75, 0.5, 0.25, 0.5, 0.25, 1.0, 0.5])
    p, n = values.mean(), values.size
    r = n * values.var(ddof=1) / n / (p * (1 - p))
    off = int((values > 0).sum())
    n_eff = n / ((off * r + EDGE_PRIOR) / (off + EDGE_PRIOR))
    got = mean_interval(values, max_n_eff=n * 8)
    assert (got.ci_low, got.ci_high) == pytest.approx(wilson_interval(p, n_eff), rel=1e-12)


def test_one_prompt_off_the_edge_barely_narrows_the_interval():
    """300 prompts at 0 but one with pass^4 = 1/70: the plain interval (Wilson on the estimated
    effective n, capped by the samples) is 7 times narrower than with none off the edge; the
    default's is 1.5 times narrower (``n_eff = 300 (1 + 2) / (1 r + 2)`` with ``r = 1/70``)."""
    zeros = np.zeros(300)
    lone = np.r_[np.zeros(299), 1.0 / 70.0]
    ratio = {}
    for method in ("wilson", "wilson-edge"):
        high_0 = mean_interval(zeros, method=method, max_n_eff=2400).ci_high
        ratio[method] = mean_interval(lone, method=method, max_n_eff=2400).ci_high / high_0
    assert ratio["wilson"] < 0.2 < 0.6 < ratio["wilson-edge"] < 1.0, ratio


def test_edge_equals_plain_wilson_when_most_prompts_are_off_the_edge():
    rng = np.random.default_rng(5)
    values = rng.uniform(0.05, 0.95, size=2000)
    edge, plain = mean_interval(values), mean_interval(values, method="wilson")
    assert edge.ci_high - edge.ci_low == pytest.approx(plain.ci_high - plain.ci_low, rel=2e-3)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=40),
    method=st.sampled_from(["wilson-edge", "wilson", "bootstrap"]),
)
def test_property_bounded_intervals_stay_in_unit_range(values, method):
    r = mean_interval(values, method=method, n_boot=200)
    assert 0.0 <= r.ci_low <= r.value + 1e-12 and r.value - 1e-12 <= r.ci_high <= 1.0


# ----------------------------------------------------------------------------- coverage
def _simulate(n_prompts, rate, n_samples, reps, rng, concentration=10.0):
    """``reps`` evals of ``n_prompts`` prompts with Beta(rate * c, (1 - rate) * c) success rates,
    each answered ``n_samples`` times: the (reps, P) per-prompt accuracies. The true mean is
    ``rate``."""
    p = rng.beta(rate * concentration, (1 - rate) * concentration, size=(reps, n_prompts))
    return rng.binomial(n_samples, p) / n_samples


def _coverage(x, rate, method, n_samples, **kwargs):
    hits = 0
    for row in x:
        r = mean_interval(row, method=method, max_n_eff=row.size * n_samples, **kwargs)
        hits += r.ci_low <= rate <= r.ci_high
    return hits / x.shape[0]


@pytest.mark.parametrize("n_prompts", [30, 100, 1000], ids=["P30", "P100", "P1000"])
@pytest.mark.parametrize("rate", [0.02, 0.5, 0.98], ids=["rate0.02", "rate0.5", "rate0.98"])
def test_wilson_coverage_is_nominal(n_prompts, rate):
    """Wilson on the effective number of prompts covers the true mean accuracy 95% of the time
    within a point or two (2000 simulated evals: a standard error of 0.5 point), at 30 prompts
    too and at rates near 0 and 1, where the normal interval covers ~0.80 at 30 prompts."""
    rng = np.random.default_rng(hash((n_prompts, rate)) % 2**32)
    x = _simulate(n_prompts, rate, 4, 2000, rng)
    cov = _coverage(x, rate, "wilson", 4)
    assert 0.93 <= cov <= 0.975, cov


def test_normal_interval_under_covers_where_wilson_does_not():
    """The reason for the default: 30 prompts at a rate of 0.02, the t interval (a normal one
    with t quantiles) covers well below 95%."""
    rng = np.random.default_rng(11)
    x = _simulate(30, 0.02, 4, 1000, rng)
    assert _coverage(x, 0.02, "t", 4) < 0.91 < 0.93 < _coverage(x, 0.02, "wilson", 4)


@pytest.mark.parametrize("n_prompts", [30, 100], ids=["P30", "P100"])
def test_binary_prompts_coverage(n_prompts):
    """One sample per prompt (a plain proportion): Wilson's own coverage, conservative at the
    edges by the binomial's discreteness (0.98 at 30 prompts and 0.02), never below 0.93."""
    rng = np.random.default_rng(n_prompts)
    for rate in (0.02, 0.5):
        x = _simulate(n_prompts, rate, 1, 1500, rng)
        assert 0.93 <= _coverage(x, rate, "wilson", 1) <= 0.99


def test_clustered_coverage():
    """Prompts in 40 clusters of 5 that share most of their difficulty: the clustered interval
    covers ~95%; the naive one (clusters ignored) under-covers."""
    rng = np.random.default_rng(7)
    reps, g, size = 800, 40, 5
    base = rng.beta(2.0, 2.0, size=(reps, g, 1))
    p = np.clip(base + rng.normal(0, 0.05, size=(reps, g, size)), 0, 1)
    x = (rng.binomial(4, p) / 4).reshape(reps, g * size)
    clusters = np.repeat(np.arange(g), size)
    hits_c = hits_n = 0
    for row in x:
        c = mean_interval(row, clusters=clusters, max_n_eff=row.size * 4)
        n = mean_interval(row, max_n_eff=row.size * 4)
        hits_c += c.ci_low <= 0.5 <= c.ci_high
        hits_n += n.ci_low <= 0.5 <= n.ci_high
    assert 0.93 <= hits_c / reps <= 0.975
    assert hits_n / reps < 0.85


def test_bootstrap_coverage_at_the_middle():
    rng = np.random.default_rng(13)
    x = _simulate(100, 0.5, 4, 300, rng)
    cov = _coverage(x, 0.5, "bootstrap", 4, n_boot=400)
    assert 0.91 <= cov <= 0.98


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: column_intervals([1.0, 2.0]), ValueError, r"values must be a \(prompts, metrics\) table"),
        (lambda: column_intervals([[1.0], [np.inf]]), ValueError, "values must be finite"),
        (lambda: column_intervals([[1.0]], method="z"), ValueError, "method must be one of"),
        (lambda: column_intervals([[1.0]], confidence=1.0), ValueError, r"confidence must be in \(0, 1\)"),
        (lambda: column_intervals([[1.0]], confidence="0.9"), TypeError, "confidence must be a number"),
        (
            lambda: column_intervals([[1.0], [0.0]], clusters=[0]),
            ValueError,
            "clusters must be 2 integer codes",
        ),
        (lambda: mean_interval([1.0, 0.0], clusters=["a"]), ValueError, r"one label per prompt \(2\); got 1"),
        (lambda: wilson_interval(1.5, 10), ValueError, r"p must be proportions in \[0, 1\]"),
        (lambda: wilson_interval(0.5, 0), ValueError, "n must be > 0"),
    ],
    ids=["1d", "inf", "method", "confidence", "confidence-str", "clusters", "labels", "p-range", "n-zero"],
)
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()

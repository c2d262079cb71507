"""Evaluation planning: the pilot's spread against a Beta population, the prompts needed against
statsmodels.stats.power and against a seeded simulation of the paired and unpaired tests."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rlmetrics.validation.comparison.paired import paired_difference, unpaired_difference
from rlmetrics.validation.comparison.plan import (
    DEFAULT_PLAN_SAMPLES,
    PilotSpread,
    pilot_spread,
    plan_evaluation,
)
from rlmetrics.validation.exact.summary import prompt_estimates


@pytest.mark.parametrize(("a", "b"), [(0.5, 0.5), (2.0, 5.0), (0.3, 0.1)], ids=["U", "mid", "edge"])
def test_pilot_spread_is_unbiased_for_a_beta_population(a, b):
    """Over many pilots, var_between and var_within average to the Beta's variance and E[p(1-p)]."""
    rng = np.random.default_rng(int(10 * a + b))
    reps, p, n = 300, 200, 4
    got = np.empty((reps, 2))
    for r in range(reps):
        rates = rng.beta(a, b, p)
        s = pilot_spread(rng.binomial(n, rates) / n, counts=n)
        # before truncation at 0 it is unbiased; here the truth is far from 0
        got[r] = [s.var_between, s.var_within]
    true_between = a * b / ((a + b) ** 2 * (a + b + 1))
    true_within = a * b / ((a + b) * (a + b + 1))
    err = got.std(axis=0) / math.sqrt(reps)
    assert abs(got[:, 0].mean() - true_between) < 4 * err[0]
    assert abs(got[:, 1].mean() - true_within) < 4 * err[1]


def test_pilot_spread_of_a_table_is_that_of_its_rates():
    rng = np.random.default_rng(0)
    counts = rng.integers(2, 9, 40)
    uids = [f"q{i}" for i, c in enumerate(counts) for _ in range(c)]
    acc = rng.integers(0, 2, len(uids))
    table = prompt_estimates(["m"] * len(uids), uids, {"acc": acc}, ks=[1, 2])["m"]["acc"]
    rates = np.array([acc[np.array(uids) == f"q{i}"].mean() for i in range(40)])
    assert pilot_spread(table) == pytest.approx(pilot_spread(rates, counts=counts))
    # non-0/1 values with their per-prompt sample variances
    score = rng.normal(0, 1, len(uids))
    means = np.array([score[np.array(uids) == f"q{i}"].mean() for i in range(40)])
    wv = np.array([score[np.array(uids) == f"q{i}"].var(ddof=1) for i in range(40)])
    s = pilot_spread(means, counts=counts, within_var=wv)
    assert s.var_within == pytest.approx(wv.mean())
    assert s.var_between == pytest.approx(max(0.0, np.var(means, ddof=1) - np.mean(wv / counts)))


@pytest.mark.parametrize(
    ("paired", "corr", "power", "alpha"),
    [(True, 0.5, 0.8, 0.05), (True, 0.9, 0.9, 0.01), (False, 0.0, 0.8, 0.05), (False, 0.0, 0.5, 0.1)],
    ids=["paired", "paired-strict", "unpaired", "unpaired-loose"],
)
def test_prompts_needed_match_statsmodels_normal_power(paired, corr, power, alpha):
    smp = pytest.importorskip("statsmodels.stats.power")
    spread = PilotSpread(mean=0.4, var_between=0.08, var_within=0.2, n_prompts=300, n_samples=8)
    plan = plan_evaluation(spread, mde=0.03, power=power, alpha=alpha, paired=paired, correlation=corr)
    assert [r.n_samples for r in plan.rows] == list(DEFAULT_PLAN_SAMPLES)
    for row in plan.rows:
        if paired:
            var = 2 * (1 - corr) * 0.08 + 2 * 0.2 / row.n_samples
            ref = smp.NormalIndPower().solve_power(0.03 / math.sqrt(var), alpha=alpha, power=power, ratio=0)
        else:
            var_run = 0.08 + 0.2 / row.n_samples
            ref = smp.NormalIndPower().solve_power(
                0.03 / math.sqrt(var_run), alpha=alpha, power=power, ratio=1
            )
        assert row.n_prompts == max(2, math.ceil(ref - 1e-9)), row
        assert row.power >= power and row.total_samples == row.n_prompts * row.n_samples


def test_prompts_needed_by_the_closed_form():
    """Without statsmodels: P = ceil((z_{1-a/2} + z_power)^2 V / mde^2), give or take the far tail."""
    spread = PilotSpread(mean=0.5, var_between=0.05, var_within=0.2, n_prompts=100, n_samples=4)
    plan = plan_evaluation(spread, mde=0.02, correlation=0.7, max_prompts=5000)
    zz = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) ** 2
    for row in plan.rows:
        v = 2 * 0.3 * 0.05 + 2 * 0.2 / row.n_samples
        assert row.n_prompts == math.ceil(zz * v / 0.02**2)
        assert row.se == pytest.approx(math.sqrt(v / row.n_prompts))
        assert row.feasible == (row.n_prompts <= 5000)
    assert plan.min_prompts == math.ceil(zz * 2 * 0.3 * 0.05 / 0.02**2)
    assert [r.n_prompts for r in plan.rows] == sorted((r.n_prompts for r in plan.rows), reverse=True)
    assert plan.as_dict()["rows"][0]["n_samples"] == 1 and "paired" in plan.method


def _rates(rng, p, rho_part, mde):
    """Paired true rates with a known correlation: common part c, own parts u, v."""
    c = rng.uniform(0.25, 0.75, p)
    u, v = rng.normal(0, rho_part, p), rng.normal(0, rho_part, p)
    return np.clip(c + u, 0, 1), np.clip(c + mde + v, 0, 1)


def test_paired_plan_reaches_its_power_in_simulation():
    rng = np.random.default_rng(3)
    sd_own, mde, n = 0.05, 0.05, 4
    var_c = 0.5**2 / 12
    # the population's spread, from a very large pilot of its rates
    pa, _ = _rates(rng, 200_000, sd_own, 0.0)
    spread = PilotSpread(float(pa.mean()), var_c + sd_own**2, float(np.mean(pa * (1 - pa))), 0, math.inf)
    corr = var_c / (var_c + sd_own**2)
    row = next(r for r in plan_evaluation(spread, mde=mde, correlation=corr).rows if r.n_samples == n)
    assert 150 < row.n_prompts < 800
    reps, hits = 300, 0
    for _ in range(reps):
        ra, rb = _rates(rng, row.n_prompts, sd_own, mde)
        a, b = rng.binomial(n, ra) / n, rng.binomial(n, rb) / n
        hits += paired_difference(a, b).p_value < 0.05
    assert abs(hits / reps - 0.8) < 0.07
    # a quarter of the prompts: far below the power
    hits = 0
    for _ in range(100):
        ra, rb = _rates(rng, row.n_prompts // 4, sd_own, mde)
        hits += paired_difference(rng.binomial(n, ra) / n, rng.binomial(n, rb) / n).p_value < 0.05
    assert hits / 100 < 0.5


def test_unpaired_plan_reaches_its_power_in_simulation():
    rng = np.random.default_rng(8)
    a_, b_, n, mde = 2.0, 3.0, 8, 0.05
    between = a_ * b_ / ((a_ + b_) ** 2 * (a_ + b_ + 1))
    within = a_ * b_ / ((a_ + b_) * (a_ + b_ + 1))
    spread = PilotSpread(a_ / (a_ + b_), between, within, 0, math.inf)
    row = next(r for r in plan_evaluation(spread, mde=mde, paired=False).rows if r.n_samples == n)
    reps, hits = 300, 0
    for _ in range(reps):
        xa = rng.binomial(n, rng.beta(a_, b_, row.n_prompts)) / n
        xb = rng.binomial(n, np.clip(rng.beta(a_, b_, row.n_prompts) + mde, 0, 1)) / n
        se = lambda x: x.std(ddof=1) / math.sqrt(x.size)  # noqa: E731
        d = unpaired_difference(xa.mean(), se(xa), xa.size, xb.mean(), se(xb), xb.size)
        hits += d.p_value < 0.05
    assert abs(hits / reps - 0.8) < 0.07


def test_no_spread_needs_two_prompts():
    plan = plan_evaluation(PilotSpread(1.0, 0.0, 0.0, 10, 4), mde=0.01)
    assert {r.n_prompts for r in plan.rows} == {2} and plan.min_prompts == 2
    assert plan_evaluation(PilotSpread(0.5, 0.0, 0.2, 10, 4), mde=0.01, correlation=1.0).min_prompts == 2


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: plan_evaluation([0.5, 0.2], counts=4, mde=0), ValueError, r"mde must be > 0"),
        (lambda: plan_evaluation([0.5, 0.2], counts=4, mde=math.inf), ValueError, r"mde must be finite"),
        (
            lambda: plan_evaluation([0.5, 0.2], counts=4, mde=0.1, power=1.2),
            ValueError,
            r"power must be in \(0, 1\)",
        ),
        (
            lambda: plan_evaluation([0.5, 0.2], counts=4, mde=0.1, alpha=0),
            ValueError,
            r"alpha must be in \(0, 1\)",
        ),
        (
            lambda: plan_evaluation([0.5, 0.2], counts=4, mde=0.1, correlation=2),
            ValueError,
            r"correlation must be in \[-1, 1\]",
        ),
        (
            lambda: plan_evaluation([0.5, 0.2], counts=4, mde=0.1, n_samples=[0]),
            ValueError,
            r"n_samples\[0\] must be an integer >= 1; got 0",
        ),
        (
            lambda: plan_evaluation([0.5, 0.2], counts=4, mde=0.1, n_samples=[]),
            ValueError,
            r"n_samples must hold at least one",
        ),
        (
            lambda: plan_evaluation([0.5, 0.2], counts=4, mde=0.1, max_prompts=0),
            ValueError,
            r"max_prompts must be an integer >= 1; got 0",
        ),
        (
            lambda: plan_evaluation(PilotSpread(0.5, 0.1, 0.2, 9, 4), counts=4, mde=0.1),
            TypeError,
            r"are for a pilot of rates",
        ),
        (lambda: pilot_spread([0.5, 0.2]), TypeError, r"counts= \(samples per prompt\) is needed"),
        (
            lambda: pilot_spread([0.5, 0.2], counts=1),
            ValueError,
            r"counts must be >= 2 samples per prompt .*; got 1",
        ),
        (
            lambda: pilot_spread([0.5, 0.2], counts=[4, 4, 4]),
            ValueError,
            r"counts must have one count per prompt \(2\); got 3",
        ),
        (lambda: pilot_spread([0.5, 0.2], counts=[4.0, 4.0]), TypeError, r"counts must be an integer"),
        (lambda: pilot_spread([0.5], counts=4), ValueError, r"pilot must have at least two prompts; got 1"),
        (
            lambda: pilot_spread([0.5, 1.5], counts=4),
            ValueError,
            r"pilot rates must be in \[0, 1\] .*got 1.5",
        ),
        (
            lambda: pilot_spread([0.5, 1.5], counts=4, within_var=[1.0]),
            ValueError,
            r"within_var must have one value per prompt \(2\); got 1",
        ),
        (
            lambda: pilot_spread([0.5, 1.5], counts=4, within_var=[1.0, -1.0]),
            ValueError,
            r"within_var must be >= 0",
        ),
    ],
    ids=[
        "mde-0",
        "mde-inf",
        "power",
        "alpha",
        "corr",
        "samples-0",
        "samples-empty",
        "max-prompts",
        "spread-counts",
        "no-counts",
        "counts-1",
        "counts-len",
        "counts-float",
        "one-prompt",
        "rate-range",
        "within-len",
        "within-neg",
    ],
)
def test_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_table_pilot_errors():
    uids = [u for u in "abc" for _ in range(3)]
    scores = prompt_estimates(["m"] * 9, uids, {"score": [0.5, 1.5, 2.0] * 3})["m"]["score"]
    with pytest.raises(ValueError, match=r"not 0/1: pass within_var="):
        pilot_spread(scores)
    with pytest.raises(TypeError, match=r"counts= is for rates"):
        pilot_spread(scores, counts=3)

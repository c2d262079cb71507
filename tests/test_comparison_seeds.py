"""Several training seeds: variance components against statsmodels' ANOVA and REML and a
simulation, the seeds-as-unit interval's coverage, Welch on seed means against scipy."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import special, stats

from rlmetrics.errors import UndefinedMetricWarning
from rlmetrics.validation.comparison.seeds import SEED_METHOD, combine_seeds, compare_seed_groups
from rlmetrics.validation.exact.summary import prompt_estimates


def _crossed(rng, s, p, *, mu=0.5, sd_seed=0.05, sd_prompt=0.2, sd_res=0.03, prompts=None):
    """y_si = mu + a_s + b_i + e_si; ``prompts`` fixes the b_i."""
    b = rng.normal(0.0, sd_prompt, p) if prompts is None else prompts
    return mu + rng.normal(0.0, sd_seed, (s, 1)) + b[None, :] + rng.normal(0.0, sd_res, (s, p))


# --------------------------------------------------------------------------------------------
# the mean squares and components against statsmodels


@pytest.mark.parametrize("shape", [(2, 5), (3, 40), (6, 25)], ids=["2x5", "3x40", "6x25"])
def test_mean_squares_match_statsmodels_two_way_anova(shape):
    sm = pytest.importorskip("statsmodels.formula.api")
    from statsmodels.stats.anova import anova_lm

    pd = pytest.importorskip("pandas")
    s, p = shape
    y = _crossed(np.random.default_rng(s * 100 + p), s, p)
    frame = pd.DataFrame(
        {"y": y.ravel(), "seed": np.repeat(np.arange(s), p), "prompt": np.tile(np.arange(p), s)}
    )
    table = anova_lm(sm.ols("y ~ C(seed) + C(prompt)", data=frame).fit())
    r = combine_seeds(y)
    assert r.ms_seed == pytest.approx(table.loc["C(seed)", "mean_sq"], rel=1e-10)
    assert r.ms_prompt == pytest.approx(table.loc["C(prompt)", "mean_sq"], rel=1e-10)
    assert r.ms_residual == pytest.approx(table.loc["Residual", "mean_sq"], rel=1e-10)
    assert (r.n_seeds, r.n_prompts, r.df, r.method) == (s, p, s - 1, SEED_METHOD)


def test_components_match_statsmodels_reml_crossed_model():
    smf = pytest.importorskip("statsmodels.formula.api")
    pd = pytest.importorskip("pandas")
    s, p = 6, 30
    y = _crossed(np.random.default_rng(7), s, p, sd_seed=0.1, sd_prompt=0.2, sd_res=0.05)
    frame = pd.DataFrame(
        {"y": y.ravel(), "seed": np.repeat(np.arange(s), p), "prompt": np.tile(np.arange(p), s), "g": 1}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = smf.mixedlm(
            "y ~ 1",
            frame,
            groups="g",
            re_formula="0",
            vc_formula={"seed": "0 + C(seed)", "prompt": "0 + C(prompt)"},
        ).fit(reml=True, method="lbfgs")
    vc = dict(zip(fit.model.exog_vc.names, fit.vcomp))
    r = combine_seeds(y)
    # balanced data: REML is the ANOVA estimate when every component is positive
    assert r.var_seed == pytest.approx(vc["seed"], rel=2e-3)
    assert r.var_prompt == pytest.approx(vc["prompt"], rel=2e-3)
    assert r.var_residual == pytest.approx(fit.scale, rel=2e-3)
    assert r.mean == pytest.approx(fit.fe_params.iloc[0], rel=1e-6)


@pytest.mark.parametrize(
    "sds", [(0.05, 0.2, 0.03), (0.0, 0.1, 0.1), (0.1, 0.0, 0.05)], ids=["seed-small", "no-seed", "no-prompt"]
)
def test_components_unbiased_by_simulation(sds):
    """The moment estimates (before truncation) average to the true components."""
    sd_seed, sd_prompt, sd_res = sds
    rng = np.random.default_rng(11)
    s, p, reps = 5, 20, 600
    got = np.zeros((reps, 3))
    for r in range(reps):
        fit = combine_seeds(_crossed(rng, s, p, sd_seed=sd_seed, sd_prompt=sd_prompt, sd_res=sd_res))
        got[r] = [
            (fit.ms_seed - fit.ms_residual) / p,
            (fit.ms_prompt - fit.ms_residual) / s,
            fit.var_residual,
        ]
        assert fit.var_seed >= 0 and fit.var_prompt >= 0
    truth = np.array(sds) ** 2
    err = got.std(axis=0) / math.sqrt(reps)
    assert np.all(np.abs(got.mean(axis=0) - truth) < 4 * err + 1e-12), (got.mean(axis=0), truth)


def test_within_seed_variance_is_the_mean_variance_over_prompts():
    y = _crossed(np.random.default_rng(3), 4, 12)
    r = combine_seeds({f"s{i}": row for i, row in enumerate(y)})
    assert r.var_within_seed == pytest.approx(np.mean([np.var(row, ddof=1) for row in y]))
    assert r.se_prompts == pytest.approx(math.sqrt(r.var_within_seed / 12))
    assert r.seeds == ("s0", "s1", "s2", "s3")
    np.testing.assert_allclose(r.seed_means, y.mean(axis=1))
    half = stats.t.ppf(0.975, 3) * np.std(y.mean(axis=1), ddof=1) / 2
    assert (r.ci_low, r.ci_high) == pytest.approx((y.mean() - half, y.mean() + half))
    assert r.seed_share == pytest.approx(r.var_seed / (r.var_seed + r.var_residual / 12))


# --------------------------------------------------------------------------------------------
# coverage of the seeds-as-unit interval


@pytest.mark.parametrize("n_seeds", [3, 5], ids=["3-seeds", "5-seeds"])
def test_interval_covers_the_mean_over_seeds_gaussian(n_seeds):
    rng = np.random.default_rng(n_seeds)
    p, reps = 50, 400
    prompts = rng.normal(0.0, 0.2, p)  # the benchmark, fixed
    target = 0.5 + prompts.mean()
    hits = naive = 0
    for _ in range(reps):
        r = combine_seeds(_crossed(rng, n_seeds, p, sd_seed=0.08, sd_res=0.05, prompts=prompts))
        hits += r.ci_low <= target <= r.ci_high
        m0 = r.seed_means[0]  # one seed's evaluation with its interval over prompts
        naive += abs(m0 - target) <= 1.96 * r.se_prompts
    assert 0.92 <= hits / reps <= 0.98
    assert naive / reps < 0.7  # prompts as the unit: the seed spread is missed


def test_interval_covers_under_binomial_sampling_and_logit_seed_effects():
    """Pass rates from logit(p_si) = difficulty_i + seed_s, 8 samples a prompt, mean@8."""
    rng = np.random.default_rng(5)
    p, n, s, reps, sd_seed = 60, 8, 4, 300, 0.4
    difficulty = rng.normal(0.0, 1.5, p)
    nodes, weights = np.polynomial.hermite_e.hermegauss(40)
    weights = weights / weights.sum()
    # E over seeds of each prompt's rate, by Gauss-Hermite quadrature
    target = float(np.mean(special.expit(difficulty[:, None] + sd_seed * nodes[None, :]) @ weights))
    hits = 0
    for _ in range(reps):
        rates = special.expit(difficulty[None, :] + rng.normal(0.0, sd_seed, (s, 1)))
        y = rng.binomial(n, rates) / n
        r = combine_seeds(y)
        hits += r.ci_low <= target <= r.ci_high
    assert 0.91 <= hits / reps <= 0.985


# --------------------------------------------------------------------------------------------
# two configurations


@pytest.mark.parametrize("sizes", [(2, 2), (3, 5), (6, 4)], ids=["2v2", "3v5", "6v4"])
def test_comparison_is_welch_on_seed_means_like_scipy(sizes):
    rng = np.random.default_rng(sum(sizes))
    prompts = rng.normal(0.0, 0.2, 30)
    ya = _crossed(rng, sizes[0], 30, prompts=prompts)
    yb = _crossed(rng, sizes[1], 30, mu=0.55, sd_seed=0.08, prompts=prompts)
    r = compare_seed_groups(list(ya), list(yb), confidence=0.9)
    ref = stats.ttest_ind(yb.mean(axis=1), ya.mean(axis=1), equal_var=False)
    assert r.diff == pytest.approx(yb.mean() - ya.mean())
    assert r.p_value == pytest.approx(ref.pvalue, rel=1e-9)
    assert r.statistic == pytest.approx(ref.statistic, rel=1e-9)
    assert r.df == pytest.approx(ref.df, rel=1e-9)
    lo, hi = ref.confidence_interval(0.9)
    assert (r.ci_low, r.ci_high) == pytest.approx((lo, hi), rel=1e-9)
    assert r.a.n_seeds == sizes[0] and r.b.n_seeds == sizes[1] and r.method == "Welch t over seed means"
    assert r.mde == pytest.approx((stats.t.ppf(0.95, r.df) + stats.t.ppf(0.8, r.df)) * r.se)
    assert set(r.as_dict()) >= {"a", "b", "diff", "p_value"} and r.as_dict()["a"]["seeds"][0] == "seed0"


def test_seeds_as_unit_holds_its_level_where_a_prompt_test_does_not():
    """No true difference, seed spread: Welch on seed means rejects ~5%; a paired t over prompts of
    one seed per configuration rejects far more often."""
    from rlmetrics.validation.comparison.paired import paired_difference

    rng = np.random.default_rng(21)
    p, reps = 100, 300
    prompts = rng.normal(0.0, 0.2, p)
    seeds_rej = prompt_rej = 0
    for _ in range(reps):
        ya = _crossed(rng, 4, p, sd_seed=0.03, sd_res=0.03, prompts=prompts)
        yb = _crossed(rng, 4, p, sd_seed=0.03, sd_res=0.03, prompts=prompts)
        seeds_rej += compare_seed_groups(ya, yb).p_value < 0.05
        prompt_rej += paired_difference(ya[0], yb[0]).p_value < 0.05
    assert 0.02 <= seeds_rej / reps <= 0.09
    assert prompt_rej / reps > 0.5


# --------------------------------------------------------------------------------------------
# PromptTables


def _seed_tables(rng, rates, n, *, order=None, drop=None):
    """prompt_estimates of one seed's samples (0/1 acc) on prompts q0..q{P-1}."""
    idx = list(range(len(rates))) if order is None else list(order)
    if drop is not None:
        idx = [i for i in idx if i != drop]
    uids = [f"q{i}" for i in idx for _ in range(n)]
    acc = [int(rng.random() < rates[i]) for i in idx for _ in range(n)]
    return prompt_estimates(["m"] * len(uids), uids, {"acc": acc}, ks=[1, 2, n])["m"]["acc"]


def test_prompt_tables_are_matched_by_key():
    rng = np.random.default_rng(2)
    rates = rng.uniform(0.1, 0.9, 25)
    tables = {f"s{j}": _seed_tables(rng, rates, 4, order=rng.permutation(25)) for j in range(3)}
    r = combine_seeds(tables, metric="pass@2")
    rows = []
    for t in tables.values():
        pos = {k: i for i, k in enumerate(t.keys)}
        rows.append(t.values[[pos[("m", f"q{i}")] for i in range(25)], t.names.index("pass@2")])
    ref = combine_seeds(np.array(rows))
    assert (r.mean, r.var_seed, r.var_prompt, r.ms_residual) == pytest.approx(
        (ref.mean, ref.var_seed, ref.var_prompt, ref.ms_residual)
    )
    c = compare_seed_groups(tables, {f"t{j}": _seed_tables(rng, rates, 4) for j in range(2)}, metric="mean@4")
    assert c.b.seeds == ("t0", "t1") and c.a.n_prompts == 25


def test_prompt_tables_common_prompts_and_undefined_metric():
    rng = np.random.default_rng(4)
    rates = rng.uniform(0.1, 0.9, 10)
    full = [_seed_tables(rng, rates, 4), _seed_tables(rng, rates, 4)]
    short = _seed_tables(rng, rates, 4, drop=3)
    with pytest.raises(
        ValueError, match=r"tables_by_seed\['seed2'\] has 9 prompts and tables_by_seed\['seed0'\] has 10"
    ):
        combine_seeds([*full, short], metric="pass@1")
    assert combine_seeds([*full, short], metric="pass@1", common_prompts=True).n_prompts == 9
    # a prompt with 2 samples in one seed: pass@4 undefined there, left out with a warning
    uids = [f"q{i}" for i in range(10) for _ in range(4 if i else 2)]
    acc = [int(rng.random() < 0.5) for _ in uids]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        odd = prompt_estimates(["m"] * len(uids), uids, {"acc": acc}, ks=[1, 2, 4])["m"]["acc"]
    with pytest.warns(UndefinedMetricWarning, match=r"pass@4 is undefined \(NaN\) for 1 of 10 prompts"):
        assert combine_seeds([*full, odd], metric="pass@4").n_prompts == 9


# --------------------------------------------------------------------------------------------
# edges and errors


def test_identical_seeds_have_no_seed_spread():
    y = np.tile([0.0, 0.5, 1.0, 0.25], (3, 1))
    r = combine_seeds(y)
    assert (r.se, r.var_seed, r.var_residual, r.ci_low, r.ci_high) == (0.0, 0.0, 0.0, r.mean, r.mean)
    assert math.isnan(r.seed_share)
    c = compare_seed_groups(y, y + 0.1)
    assert (c.se, c.p_value) == (0.0, 0.0) and c.diff == pytest.approx(0.1)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: combine_seeds([[0.1, 0.2]]),
            ValueError,
            r"tables_by_seed must hold at least two seeds .*; got 1",
        ),
        (lambda: combine_seeds({}), ValueError, r"at least two seeds .*got 0"),
        (
            lambda: combine_seeds([[0.1, 0.2], [0.1]]),
            ValueError,
            r"tables_by_seed\['seed1'\] has 1 prompts and ",
        ),
        (lambda: combine_seeds([[0.1], [0.2]]), ValueError, r"at least two prompts .*got 1"),
        (
            lambda: combine_seeds([[0.1, np.nan], [0.2, 0.3]]),
            ValueError,
            r"tables_by_seed\['seed0'\] must be finite",
        ),
        (lambda: combine_seeds("ab"), TypeError, r"tables_by_seed must be a mapping"),
        (
            lambda: combine_seeds(np.zeros(3)),
            ValueError,
            r"must be 2-D \(seeds x prompts\); got shape \(3,\)",
        ),
        (
            lambda: combine_seeds([[0.1, 0.2], [0.2, 0.3]], metric="pass@1"),
            TypeError,
            r"metric= is for PromptTables",
        ),
        (
            lambda: combine_seeds([[0.1, 0.2], [0.2, 0.3]], confidence=95),
            ValueError,
            r"confidence must be in \(0, 1\)",
        ),
        (
            lambda: compare_seed_groups([[0.1, 0.2], [0.2, 0.3]], [[0.1, 0.2]]),
            ValueError,
            r"group_b must hold at least two seeds .*; got 1",
        ),
        (
            lambda: compare_seed_groups([[0.1, 0.2]] * 2, [[0.1, 0.2, 0.3]] * 2),
            ValueError,
            r"group_b\['seed0'\] has 3 prompts and group_a\['seed0'\] has 2",
        ),
        (
            lambda: compare_seed_groups([[0.1, 0.2]] * 2, [[0.1, 0.2]] * 2, power=1.0),
            ValueError,
            r"power must be in \(0, 1\)",
        ),
    ],
    ids=[
        "one-seed",
        "no-seed",
        "lengths",
        "one-prompt",
        "nan",
        "str",
        "1-d-array",
        "metric-arrays",
        "confidence",
        "group-b-one",
        "groups-prompts",
        "power",
    ],
)
def test_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_table_errors_name_the_seed_and_metric():
    rng = np.random.default_rng(0)
    t = _seed_tables(rng, [0.5] * 4, 2)
    with pytest.raises(TypeError, match=r"tables_by_seed\['seed0'\] is a PromptTable: pass metric="):
        combine_seeds([t, t])
    with pytest.raises(ValueError, match=r"metric 'pass@9' is not in tables_by_seed\['seed0'\]"):
        combine_seeds([t, t], metric="pass@9")
    with pytest.raises(TypeError, match=r"tables_by_seed\['seed1'\] is a list among PromptTables"):
        combine_seeds([t, [0.1, 0.2, 0.3, 0.4]], metric="pass@1")

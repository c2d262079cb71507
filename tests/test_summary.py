"""summarize_validation against per-prompt estimators and plain loops."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from rlmetrics.validation.estimators import best_at_k, maj_at_k, pass_at_k, worst_at_k
from rlmetrics.validation.exact.summary import (
    SummaryOptions,
    prompt_estimates,
    summarize_table,
)
from rlmetrics.validation.summary import default_ks, summarize_validation


def make_rollouts(seed: int, sizes=(4, 8, 5)):
    rng = np.random.default_rng(seed)
    ds, uids, acc, score, pred, prompts = [], [], [], [], [], []
    for p in range(30):
        n = int(rng.choice(sizes))
        pr = [str(v) for v in rng.integers(0, 3, n)]
        a = [int(x == "0") for x in pr]
        sc = [float(x) + float(rng.normal(0, 0.2)) for x in a]
        src = "even" if p % 2 == 0 else "odd"
        ds += [src] * n
        uids += [f"q{p}"] * n
        acc += a
        score += sc
        pred += pr
        prompts.append((src, pr, a, sc))
    return ds, uids, {"acc": acc, "score": score, "pred": pred}, prompts


def across(values, confidence=0.95):
    """Mean over prompts, its standard error and Student t interval (scipy)."""
    values = np.asarray(values, dtype=float)
    mean = values.mean()
    se = values.std(ddof=1) / math.sqrt(len(values))
    if se == 0:  # scipy gives NaN for a zero scale
        return mean, se, mean, mean
    low, high = scipy_stats.t.interval(confidence, len(values) - 1, loc=mean, scale=se)
    return mean, se, low, high


@pytest.mark.parametrize("replace", [False, True], ids=["unbiased", "with-replacement"])
def test_matches_per_prompt_estimators(replace):
    ds, uids, infos, prompts = make_rollouts(0)
    if replace:  # with replacement every k is defined: no warning
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = summarize_validation(ds, uids, infos, replace=replace, ci="t")
    else:  # k = 8 leaves out the prompts with 4 or 5 samples, and says so
        with pytest.warns(RuntimeWarning, match=r"even/acc: k=8 > the samples of \d+ prompt"):
            out = summarize_validation(ds, uids, infos, replace=replace, ci="t")
    for src in ("even", "odd"):
        rows = [p for p in prompts if p[0] == src]
        acc = out[src]["acc"]
        assert acc["binary"] and not out[src]["score"]["binary"]
        assert acc["n_prompts"] == len(rows)
        assert acc["samples_per_prompt"] == {
            str(n): sum(len(r[2]) == n for r in rows) for n in sorted({len(r[2]) for r in rows})
        }
        m = acc["metrics"]
        for k in default_ks(8):
            used = [r for r in rows if replace or len(r[2]) >= k]
            for name, fn in (
                ("best", lambda r, k=k: best_at_k(r[2], k, replace=replace).mean),
                ("worst", lambda r, k=k: worst_at_k(r[2], k, replace=replace).mean),
                ("maj", lambda r, k=k: maj_at_k(r[1], r[2], k, replace=replace).mean),
            ):
                key = f"{'pass' if name == 'best' else name}@{k}"
                want = across([fn(r) for r in used])
                got = m[key]
                assert got["n_prompts"] == len(used)
                assert np.allclose([got["value"], got["se"], got["ci_low"], got["ci_high"]], want, atol=1e-12)
            if not replace:
                want = np.mean([pass_at_k(len(r[2]), sum(r[2]), k) for r in used])
                assert math.isclose(m[f"pass@{k}"]["value"], want, rel_tol=1e-12)
        means = [np.mean(r[2]) for r in rows]
        assert np.allclose(m["mean@4-8"]["value"], np.mean(means))
        assert np.isclose(m["all_solved"]["value"], np.mean([x == 1 for x in means]))
        assert np.isclose(m["none_solved"]["value"], np.mean([x == 0 for x in means]))
        s = out[src]["score"]["metrics"]
        assert "pass@2" not in s and "all_solved" not in s
        assert np.isclose(
            s["best@2"]["value"], np.mean([best_at_k(r[3], 2, replace=replace).mean for r in rows])
        )


def test_uniform_n_names_and_custom_ks():
    ds, uids, infos, _ = make_rollouts(1, sizes=(6,))
    out = summarize_validation(ds, uids, infos, ks=[3, 6], confidence=0.9, ci="t")
    m = out["even"]["acc"]["metrics"]
    assert list(m) == [
        "mean@6",
        "pass@3",
        "best@3",
        "worst@3",
        "pass^3",
        "maj@3",
        "pass@6",
        "best@6",
        "worst@6",
        "pass^6",
        "maj@6",
        "all_solved",
        "none_solved",
        "cover@0.5",
        "cover@1",
    ]
    assert m["pass@3"] == m["best@3"] and m["pass^6"] == m["worst@6"]
    mean, se, p = m["pass@3"]["value"], m["pass@3"]["se"], m["pass@3"]["n_prompts"]
    t90 = scipy_stats.t.ppf(0.95, p - 1)
    assert math.isclose(m["pass@3"]["ci_high"] - mean, t90 * se, rel_tol=1e-12)
    assert m["maj@3"]["exact"] is True
    assert out["even"]["acc"]["ci"] == {"method": "t", "confidence": 0.9, "n_clusters": None}


def test_missing_values_and_preds_drop_maj_for_that_prompt():
    ds = ["s"] * 6
    uids = ["a", "a", "a", "b", "b", "b"]
    infos = {"acc": [1, None, 0, 1, 1, 0], "pred": ["x", "x", "y", "x", "x", "y"]}
    with (
        pytest.warns(RuntimeWarning, match="s/acc/maj@1"),
        pytest.warns(RuntimeWarning, match=r"s/acc: k=3 > the samples of 1 prompt\(s\) \('a'; fewest 2\)"),
    ):
        m = summarize_validation(ds, uids, infos)["s"]["acc"]["metrics"]
    assert m["maj@2"]["n_prompts"] == 1  # prompt a lost a value, so its votes do not line up
    assert m["pass@2"]["n_prompts"] == 2
    assert m["pass@3"]["n_prompts"] == 1  # prompt a has 2 values left


def test_single_prompt_gives_nan_error_bars_with_warning():
    with pytest.warns(RuntimeWarning, match=r"at least 2 prompts; NaN for s/acc/mean@3, s/acc/pass@1"):
        out = summarize_validation(["s"] * 3, ["a"] * 3, {"acc": [1, 0, 1]})
    m = out["s"]["acc"]["metrics"]["mean@3"]
    assert math.isclose(m["value"], 2 / 3) and math.isnan(m["se"]) and math.isnan(m["ci_low"])


def test_text_variables_skipped():
    out = summarize_validation(["s"] * 4, ["a", "a", "b", "b"], {"acc": [1, 0, 1, 1], "note": ["t"] * 4})
    assert list(out["s"]) == ["acc"]


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"data_sources": [], "sample_uids": [], "infos_dict": {}}, ValueError, "at least one sample"),
        (
            {"data_sources": ["s"], "sample_uids": ["a", "b"], "infos_dict": {}},
            ValueError,
            "sample_uids must",
        ),
        (
            {"data_sources": ["s"], "sample_uids": ["a"], "infos_dict": {"x": [1], "pred": []}},
            ValueError,
            r"infos_dict\['pred'\] must have one value",
        ),
        (
            {"data_sources": ["s"] * 2, "sample_uids": ["a"] * 2, "infos_dict": {"x": [1, "b"]}},
            TypeError,
            "mixes numbers and strings",
        ),
        (
            {"data_sources": ["s"], "sample_uids": ["a"], "infos_dict": {"x": [1]}, "ks": [2, 0]},
            ValueError,
            r"ks\[1\] must be an integer >= 1; got 0",
        ),
        (
            {"data_sources": ["s"], "sample_uids": ["a"], "infos_dict": {"x": [1]}, "ks": []},
            ValueError,
            "ks must be a non-empty list",
        ),
        (
            {"data_sources": ["s"], "sample_uids": ["a"], "infos_dict": {"x": [1]}, "seed": 0.5},
            TypeError,
            "seed must be an integer >= 0; got float",
        ),
        (
            {"data_sources": ["s"], "sample_uids": ["a"], "infos_dict": {"x": [1]}, "seed": -1},
            ValueError,
            "seed must be an integer >= 0; got -1",
        ),
        (
            {"data_sources": ["s"], "sample_uids": ["a"], "infos_dict": {"x": [1]}, "confidence": 1.5},
            ValueError,
            "confidence must be in",
        ),
        ({"data_sources": ["s"], "sample_uids": ["a"], "infos_dict": [1]}, TypeError, "infos_dict must be"),
    ],
    ids=[
        "empty",
        "uid-length",
        "pred-length",
        "mixed-types",
        "bad-ks",
        "empty-ks",
        "float-seed",
        "negative-seed",
        "bad-confidence",
        "infos-not-mapping",
    ],
)
def test_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        summarize_validation(**kwargs)


@settings(max_examples=20, deadline=None)
@given(sizes=st.lists(st.integers(2, 8), min_size=2, max_size=6), seed=st.integers(0, 10_000))
@example(sizes=[2, 3], seed=108)  # mixed N: worst@3 covers only the 3-sample prompt
def test_property_ordering_and_bounds(sizes, seed):
    rng = np.random.default_rng(seed)
    uids = np.repeat(np.arange(len(sizes)), sizes)
    acc = (rng.random(uids.shape[0]) < 0.5).astype(int)
    pred = [str(v) for v in rng.integers(0, 3, uids.shape[0])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a k above all but one prompt's N
        m = summarize_validation(["s"] * uids.shape[0], uids, {"acc": acc, "pred": pred})["s"]["acc"][
            "metrics"
        ]
    mean = next(v for name, v in m.items() if name.startswith("mean@"))["value"]
    assert math.isclose(m["pass@1"]["value"], mean, rel_tol=1e-12, abs_tol=1e-15)
    ks = sorted(int(name.split("@")[1]) for name in m if name.startswith("pass@"))
    prompt_means = np.array([acc[uids == u].mean() for u in range(len(sizes))])
    for k in ks:
        # worst@k is averaged over the prompts with at least k samples: compare on those.
        eligible = np.array(sizes) >= k
        assert m[f"worst@{k}"]["value"] <= prompt_means[eligible].mean() + 1e-12
        assert m[f"worst@{k}"]["value"] <= m[f"pass@{k}"]["value"] + 1e-12
        assert 0.0 <= m[f"maj@{k}"]["value"] <= 1.0
        if m[f"pass@{k}"]["n_prompts"] >= 2:
            assert m[f"pass@{k}"]["ci_low"] <= m[f"pass@{k}"]["value"] <= m[f"pass@{k}"]["ci_high"]
        else:
            assert math.isnan(m[f"pass@{k}"]["se"])


def _brute_rollouts(seed, n_prompts=12, n=6):
    rng = np.random.default_rng(seed)
    rates = rng.beta(0.7, 0.7, n_prompts)
    acc = (rng.random((n_prompts, n)) < rates[:, None]).astype(int)
    uids = np.repeat(np.arange(n_prompts), n)
    return acc, uids


@pytest.mark.parametrize("seed", [0, 1, 2], ids=["seed0", "seed1", "seed2"])
def test_pass_hat_and_cover_against_enumeration(seed):
    """pass^k: the share of all k-subsets of a prompt's samples that are all right, averaged over
    prompts; cover@tau: the share of prompts with rate >= tau (a plain loop)."""
    acc, uids = _brute_rollouts(seed)
    m = summarize_validation(
        ["s"] * acc.size, uids, {"acc": acc.ravel()}, ks=[1, 2, 3, 6], taus=[0.5, 2 / 3, 1.0]
    )["s"]["acc"]["metrics"]
    for k in (1, 2, 3, 6):
        per_prompt = [
            np.mean([all(row[list(sub)]) for sub in itertools.combinations(range(row.size), k)])
            for row in acc
        ]
        assert math.isclose(m[f"pass^{k}"]["value"], float(np.mean(per_prompt)), rel_tol=1e-12, abs_tol=1e-15)
    rates = acc.mean(axis=1)
    for tau, name in ((0.5, "cover@0.5"), (2 / 3, "cover@0.666667"), (1.0, "cover@1")):
        assert m[name]["value"] == float(np.mean([r >= tau - 1e-12 for r in rates]))
        assert m[name]["method"] == "wilson-edge"
    assert m["cover@1"]["value"] == m["all_solved"]["value"]


@pytest.mark.parametrize(
    ("acc", "what"),
    [
        ([0] * 40, "all-zero"),
        ([1] * 40, "all-one"),
        ([1] + [0] * 39, "one-success"),
        ([1] * 39 + [0], "one-failure"),
    ],
    ids=["all-zero", "all-one", "one-success", "one-failure"],
)
def test_default_intervals_stay_in_unit_range_and_are_not_zero_width(acc, what):
    """Every interval of a 0/1 variable lies in [0, 1], and none is a point at 0 or 1 (the
    normal interval gave 'pass@8 <= 1.004' and '+/- 0.0000' there)."""
    uids = np.repeat(np.arange(10), 4)
    m = summarize_validation(["s"] * 40, uids, {"acc": acc})["s"]["acc"]["metrics"]
    for name, entry in m.items():
        assert 0.0 <= entry["ci_low"] <= entry["value"] <= entry["ci_high"] <= 1.0, (what, name, entry)
        assert entry["ci_high"] - entry["ci_low"] > 0.01, (what, name, entry)
        assert entry["method"] == "wilson-edge"


def test_clusters_widen_the_interval_and_are_counted():
    """Prompts in clusters of 5 that share a difficulty: the clustered SE (Miller 2024, eq. 4)
    is the SE of the cluster totals, larger than the naive one; a prompt whose samples carry
    two cluster labels is an error."""
    rng = np.random.default_rng(5)
    rates = np.repeat(rng.beta(0.5, 0.5, 8), 5)  # 8 clusters x 5 prompts
    acc = (rng.random((40, 4)) < rates[:, None]).astype(int)
    uids = np.repeat(np.arange(40), 4)
    clusters = np.repeat(np.arange(8), 20)
    plain = summarize_validation(["s"] * 160, uids, {"acc": acc.ravel()})["s"]["acc"]
    clustered = summarize_validation(["s"] * 160, uids, {"acc": acc.ravel()}, clusters=clusters)["s"]["acc"]
    mp, mc = plain["metrics"]["mean@4"], clustered["metrics"]["mean@4"]
    assert mp["value"] == mc["value"] and mc["n_clusters"] == 8 and clustered["ci"]["n_clusters"] == 8
    x = acc.mean(axis=1)
    dev = (x - x.mean()).reshape(8, 5).sum(axis=1)
    want = math.sqrt((dev**2).sum() / 40**2 * 8 / 7)
    assert math.isclose(mc["se"], want, rel_tol=1e-12) and mc["se"] > mp["se"]
    assert mc["ci_high"] - mc["ci_low"] > mp["ci_high"] - mp["ci_low"]
    bad = clusters.copy()
    bad[1] = 3
    with pytest.raises(
        ValueError, match=r"clusters must be the same for every sample of a prompt; prompt \('s', 0\)"
    ):
        summarize_validation(["s"] * 160, uids, {"acc": acc.ravel()}, clusters=bad)


def test_bootstrap_interval_is_seeded_and_leaves_the_global_rng_alone():
    acc, uids = _brute_rollouts(3, n_prompts=30)
    state = np.random.get_state()[1].copy()  # noqa: NPY002 (the global state is what is checked)
    one = summarize_validation(["s"] * acc.size, uids, {"acc": acc.ravel()}, ci="bootstrap", seed=1)
    two = summarize_validation(["s"] * acc.size, uids, {"acc": acc.ravel()}, ci="bootstrap", seed=1)
    assert np.array_equal(np.random.get_state()[1], state)  # noqa: NPY002
    m1, m2 = one["s"]["acc"]["metrics"], two["s"]["acc"]["metrics"]
    assert m1 == m2 and m1["mean@6"]["method"] == "bootstrap"
    assert 0.0 <= m1["mean@6"]["ci_low"] < m1["mean@6"]["value"] < m1["mean@6"]["ci_high"] <= 1.0


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"ci": "normal"}, ValueError, "ci must be one of wilson, t, bootstrap, wilson-edge; got 'normal'"),
        ({"taus": [1.5]}, ValueError, r"taus\[0\] must be in \[0, 1\]; got 1.5"),
        ({"taus": ["0.5"]}, TypeError, r"taus\[0\] must be a number in \[0, 1\]; got str"),
        ({"clusters": [0]}, ValueError, r"clusters must have one label per sample \(4\); got 1"),
        ({"n_boot": 3, "ci": "bootstrap"}, ValueError, "n_boot must be an integer >= 10; got 3"),
    ],
    ids=["unknown-ci", "tau-range", "tau-type", "clusters-length", "n-boot"],
)
def test_interval_option_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        summarize_validation(["s"] * 4, ["a", "a", "b", "b"], {"acc": [1, 0, 1, 1]}, **kwargs)


def test_ks_above_int64_are_named():
    with pytest.raises(ValueError, match=r"ks must be integers below 2\*\*63; got 1180591620717411303424"):
        summarize_validation(["s"] * 4, ["a", "a", "b", "b"], {"acc": [1, 0, 1, 1]}, ks=[2**70], replace=True)


# ----------------------------------------------------------------------------- SummaryOptions
@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"ks": [2, 0]}, ValueError, r"ks\[1\] must be an integer >= 1; got 0"),
        ({"ks": []}, ValueError, r"ks must be a non-empty list of integers >= 1; got \[\]"),
        ({"ks": "12"}, TypeError, "ks must be a list of integers >= 1; got str"),
        ({"ks": [2**70]}, ValueError, r"ks must be integers below 2\*\*63; got 1180591620717411303424"),
        ({"pred_key": 3}, TypeError, "pred_key must be the name of the prediction variable .*got int 3"),
        ({"confidence": 1.5}, ValueError, r"confidence must be in \(0, 1\); got 1.5"),
        ({"confidence": "high"}, TypeError, r"confidence must be a number in \(0, 1\); got str"),
        ({"ci": "normal"}, ValueError, "ci must be one of wilson, t, bootstrap, wilson-edge; got 'normal'"),
        ({"ci": None}, ValueError, "ci must be one of wilson, t, bootstrap, wilson-edge; got None"),
        ({"taus": [1.5]}, ValueError, r"taus\[0\] must be in \[0, 1\]; got 1.5"),
        ({"taus": 0.5}, TypeError, r"taus must be a list of numbers in \[0, 1\]; got float"),
        ({"n_boot": 3}, ValueError, "n_boot must be an integer >= 10; got 3"),
        ({"seed": -1}, ValueError, "seed must be an integer >= 0; got -1"),
        ({"seed": 0.5}, TypeError, "seed must be an integer >= 0; got float"),
    ],
    ids=[
        "k-zero",
        "ks-empty",
        "ks-str",
        "ks-int64",
        "pred-key",
        "confidence-range",
        "confidence-type",
        "ci-unknown",
        "ci-none",
        "tau-range",
        "taus-scalar",
        "n-boot",
        "seed-negative",
        "seed-float",
    ],
)
def test_summary_options_are_checked_when_made(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        SummaryOptions(**kwargs)


def test_summary_options_normalise_and_hash():
    opts = SummaryOptions(ks=np.array([1, 4]), taus=[0.5, 0.5, 1], replace=1, seed=np.int64(3))
    assert opts.ks == (1, 4) and opts.taus == (0.5, 1.0) and opts.replace is True and opts.seed == 3
    assert hash(opts) == hash(SummaryOptions(ks=[1, 4], taus=(0.5, 1.0), replace=True, seed=3))
    with pytest.raises(AttributeError):
        opts.ci = "t"  # type: ignore[misc]


ROLLOUTS = (["s"] * 9, ["a"] * 3 + ["b"] * 3 + ["c"] * 3, {"acc": [1, 0, 0, 1, 1, 1, 0, 0, 1]})


def test_options_give_what_the_keywords_give():
    kwargs = {"ks": [1, 3], "ci": "bootstrap", "confidence": 0.9, "n_boot": 50, "seed": 4, "taus": [0.25]}
    assert summarize_validation(*ROLLOUTS, options=SummaryOptions(**kwargs)) == summarize_validation(
        *ROLLOUTS, **kwargs
    )
    by_opts = prompt_estimates(*ROLLOUTS, options=SummaryOptions(ks=[2], replace=True))["s"]["acc"]
    by_kw = prompt_estimates(*ROLLOUTS, ks=[2], replace=True)["s"]["acc"]
    assert by_opts.names == by_kw.names and np.array_equal(by_opts.values, by_kw.values)
    assert summarize_table(by_kw, options=SummaryOptions(ci="t")) == summarize_table(by_kw, ci="t")


@pytest.mark.parametrize(
    ("call", "kwargs", "match"),
    [
        (summarize_validation, {"ci": "t"}, "summarize_validation takes options= or the keywords .* and ci"),
        (prompt_estimates, {"ks": [2], "seed": 1}, "prompt_estimates takes options= .* and ks, seed"),
        (summarize_validation, {"taus": [0.25]}, "and taus"),
    ],
    ids=["summary-ci", "estimates-ks-seed", "summary-taus"],
)
def test_options_and_the_keywords_they_hold_are_not_both_taken(call, kwargs, match):
    with pytest.raises(TypeError, match=match):
        call(*ROLLOUTS, options=SummaryOptions(), **kwargs)


def test_keywords_left_at_their_defaults_go_with_options():
    opts = SummaryOptions(ks=[1, 3])
    # the defaults spelled out (a list for the tuple of taus) are not a conflict
    got = summarize_validation(*ROLLOUTS, options=opts, taus=[0.5, 1.0], seed=0, pred_key="pred")
    assert got == summarize_validation(*ROLLOUTS, ks=[1, 3])


def test_options_must_be_summary_options():
    with pytest.raises(TypeError, match="options must be a SummaryOptions; got dict"):
        summarize_validation(*ROLLOUTS, options={"ci": "t"})  # type: ignore[arg-type]


def test_summary_options_are_exported():
    import rlmetrics.validation as validation

    assert validation.SummaryOptions is SummaryOptions

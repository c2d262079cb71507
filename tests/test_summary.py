"""summarize_validation against per-prompt estimators and plain loops."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rlmetrics.validation.estimators import best_at_k, maj_at_k, pass_at_k, worst_at_k
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


def across(values, z=1.959963984540054):
    values = np.asarray(values, dtype=float)
    mean = values.mean()
    se = values.std(ddof=1) / math.sqrt(len(values))
    return mean, se, mean - z * se, mean + z * se


@pytest.mark.parametrize("replace", [False, True], ids=["unbiased", "with-replacement"])
def test_matches_per_prompt_estimators(replace):
    ds, uids, infos, prompts = make_rollouts(0)
    out = summarize_validation(ds, uids, infos, replace=replace)
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
    out = summarize_validation(ds, uids, infos, ks=[3, 6], confidence=0.9)
    m = out["even"]["acc"]["metrics"]
    assert list(m) == [
        "mean@6",
        "pass@3",
        "best@3",
        "worst@3",
        "maj@3",
        "pass@6",
        "best@6",
        "worst@6",
        "maj@6",
        "all_solved",
        "none_solved",
    ]
    assert m["pass@3"] == m["best@3"]
    mean, se = m["pass@3"]["value"], m["pass@3"]["se"]
    assert math.isclose(m["pass@3"]["ci_high"] - mean, 1.6448536269514722 * se, rel_tol=1e-12)
    assert m["maj@3"]["exact"] is True


def test_missing_values_and_preds_drop_maj_for_that_prompt():
    ds = ["s"] * 6
    uids = ["a", "a", "a", "b", "b", "b"]
    infos = {"acc": [1, None, 0, 1, 1, 0], "pred": ["x", "x", "y", "x", "x", "y"]}
    with pytest.warns(RuntimeWarning, match="s/acc/maj@1"):
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
            "seed must be an integer; got float",
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


def test_stats_batch_equals_one_numpy_call_per_vector():
    """The stacked pass gives np.mean and np.std(ddof=1) / sqrt(p) bit for bit, NaN errors for a
    single prompt (named in ``lonely``) and NaN everything for none."""
    from rlmetrics.validation.summary import _stats

    rng = np.random.default_rng(3)
    named = [
        (f"v{i}", rng.standard_normal(int(p)) * 10.0 ** int(rng.integers(-3, 4)))
        for i, p in enumerate([5, 5, 1, 0, 7, 5, 2])
    ]
    lonely: list[str] = []
    out = _stats(named, 1.5, "src/acc", lonely)
    assert list(out) == [name for name, _ in named]
    assert lonely == ["src/acc/v2"]
    for name, arr in named:
        got = out[name]
        assert got["n_prompts"] == arr.shape[0]
        if arr.shape[0] == 0:
            assert all(math.isnan(got[key]) for key in ("value", "se", "ci_low", "ci_high"))
            continue
        assert got["value"] == float(np.mean(arr))
        if arr.shape[0] == 1:
            assert math.isnan(got["se"])
            continue
        se = float(np.std(arr, ddof=1) / math.sqrt(arr.shape[0]))
        assert got["se"] == se
        assert got["ci_low"] == got["value"] - 1.5 * se and got["ci_high"] == got["value"] + 1.5 * se

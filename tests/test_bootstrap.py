"""rlmetrics.validation.bootstrap: parity with verl 0.9.1's validation metrics
(process_validation_metrics, bootstrap_metric, calc_maj_val, bootstrap_indices,
flatten_validation_metrics), its input errors and properties of its results."""

from __future__ import annotations

import functools
import math
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rlmetrics.validation.bootstrap import (
    MAX_SAMPLES_PER_PROMPT,
    bootstrap_indices,
    bootstrap_metric,
    calc_maj_val,
    flatten_validation_metrics,
    process_validation_metrics,
)
from rlmetrics.validation.verl import bootstrap as V

mu = pytest.importorskip("verl.trainer.ppo.metric_utils")


def assert_same(ref, out, tol=1e-12):
    """Same sources, variables, metric names (same order) and values to ``tol``."""
    assert list(ref) == list(out)
    for src in ref:
        assert list(ref[src]) == list(out[src]), src
        for var in ref[src]:
            assert list(ref[src][var]) == list(out[src][var]), (src, var)
            for name, want in ref[src][var].items():
                got = out[src][var][name]
                assert isinstance(got, float)
                assert math.isclose(got, float(want), rel_tol=tol, abs_tol=tol), (src, var, name, want, got)


def random_layout(rng: np.random.Generator, *, max_prompts: int = 5, sizes=(1, 2, 3, 4, 5, 6, 8)):
    """Prompts with different N, several sources, shuffled samples, bool/int/float/str/None values."""
    n_prompts = int(rng.integers(1, max_prompts + 1))
    sources = [f"src{i}" for i in range(int(rng.integers(1, 4)))]
    ds, uids = [], []
    for p in range(n_prompts):
        n = int(rng.choice(sizes))
        ds += [sources[int(rng.integers(len(sources)))]] * n
        uids += [f"uid{p}"] * n
    perm = rng.permutation(len(ds))
    ds = [ds[i] for i in perm]
    uids = [uids[i] for i in perm]
    n = len(ds)
    n_answers = int(rng.integers(1, 5))
    pred = [str(v) for v in rng.integers(0, n_answers, n)]
    acc = [p == "0" for p in pred]
    infos: dict[str, list] = {
        "acc": acc,
        "score": [float(a) + float(rng.normal(0, 0.3)) for a in acc],
        "reward": [int(v) for v in rng.integers(-1, 3, n)],
        "pred": pred,
    }
    kind = int(rng.integers(4))
    if kind == 1:  # missing values: verl drops them (and loses maj@k where lengths differ)
        infos["score"] = [None if rng.random() < 0.25 else v for v in infos["score"]]
    elif kind == 2:  # a text variable and numpy scalars
        infos["note"] = ["text"] * n
        infos["reward"] = list(np.asarray(infos["reward"], dtype=np.int64))
    elif kind == 3:  # float32 values: verl averages them in float32
        infos["f32"] = list(rng.random(n).astype(np.float32))
    if rng.random() < 0.2:
        infos["pred"] = [None if rng.random() < 0.2 else p for p in pred]
    return ds, uids, infos


@pytest.fixture
def short_bootstrap(monkeypatch):
    """verl with 40 bootstrap draws (the first 40 rows of its 1000) and rlmetrics likewise: fast parity."""
    original = mu.bootstrap_metric

    def verl_short(data, subset_size, reduce_fns, n_bootstrap=1000, seed=42):
        return original(data, subset_size, reduce_fns, n_bootstrap=40, seed=seed)

    monkeypatch.setattr(mu, "bootstrap_metric", verl_short)
    monkeypatch.setattr(V, "_N_BOOTSTRAP", 40)


@pytest.mark.parametrize("block", range(6), ids=[f"layouts-{50 * b}-{50 * b + 49}" for b in range(6)])
def test_parity_300_random_layouts(short_bootstrap, block):
    rng = np.random.default_rng(1000 + block)
    for _ in range(50):
        ds, uids, infos = random_layout(rng)
        seed = int(rng.integers(0, 100))
        assert_same(
            mu.process_validation_metrics(ds, uids, infos, seed=seed),
            process_validation_metrics(ds, uids, infos, seed=seed),
        )


@pytest.mark.parametrize("case", range(4), ids=[f"full-1000-draws-{i}" for i in range(4)])
def test_parity_full_bootstrap(case):
    rng = np.random.default_rng(case)
    ds, uids, infos = random_layout(rng, max_prompts=3, sizes=(2, 5, 16) if case < 3 else (1, 33))
    assert_same(mu.process_validation_metrics(ds, uids, infos), process_validation_metrics(ds, uids, infos))


def test_parity_many_prompts_same_n_and_large_n(short_bootstrap):
    """The subset-table path (N=12, many prompts) and the rank-gather/position paths (N=50, k=50)."""
    rng = np.random.default_rng(7)
    for n, p in ((12, 40), (50, 3)):
        ds = ["a"] * (n * p)
        uids = np.repeat(np.arange(p), n)
        pred = rng.integers(0, 3, n * p)
        infos = {"acc": (pred == 0).tolist(), "score": rng.normal(size=n * p), "pred": [str(v) for v in pred]}
        assert_same(
            mu.process_validation_metrics(ds, uids.tolist(), infos),
            process_validation_metrics(ds, uids, infos),
        )


@pytest.mark.parametrize(
    "expected",
    [
        {("s", "a"): 4, ("s", "b"): 2},
        {("s", "a"): 6, ("s", "zz"): 3, ("t", "c"): 5},
        {("s", "a"): 1},
    ],
    ids=["pad-one", "new-uid-and-reward-only-source", "no-padding"],
)
def test_parity_expected_acc_counts(short_bootstrap, expected):
    ds = ["s"] * 5 + ["t"] * 2
    uids = ["a", "a", "a", "b", "b", "c", "c"]
    infos = {
        "acc": [1.0, None, 0.0, 1.0, 1.0, None, None],
        "reward": [1.0, 0.5, 0.0, 1.0, 1.0, 0.2, 0.3],
        "pred": ["x", "y", "x", "x", "x", "q", "r"],
    }
    assert_same(
        mu.process_validation_metrics(ds, uids, infos, expected_acc_counts=expected),
        process_validation_metrics(ds, uids, infos, expected_acc_counts=expected),
    )


def test_numpy_inputs_and_global_rng_untouched():
    rng = np.random.default_rng(3)
    ds = np.array(["a"] * 24 + ["b"] * 8, dtype=object)
    uids = np.repeat(np.arange(8), 4)
    infos = {
        "acc": rng.random(32) < 0.5,
        "score": rng.normal(size=32).astype(np.float32),
        "pred": np.array([str(v) for v in rng.integers(0, 2, 32)]),
    }
    np.random.seed(123)  # noqa: NPY002 - the global state is what must stay untouched
    state = np.random.get_state()  # noqa: NPY002
    out = process_validation_metrics(ds, uids, infos)
    after = np.random.get_state()  # noqa: NPY002
    assert state[0] == after[0] and np.array_equal(state[1], after[1]) and state[2:] == after[2:]
    ref = mu.process_validation_metrics(list(ds), uids.tolist(), {k: list(v) for k, v in infos.items()})
    assert_same(ref, out)


@pytest.mark.parametrize(
    ("data", "size", "fns"),
    [
        ([1, 2, 3, 4, 5], 3, [np.max, np.min, np.mean]),
        ([0.5, -1.0, 2.0], 4, [max, min]),
        ([True, False, False, True], 2, [np.amax, np.amin]),
        ([3.0], 2, [np.max]),
        ([1.0, 2.0, 4.0], 3, [lambda s: float(np.median(s))]),
    ],
    ids=["np-reducers", "builtin-reducers", "bools", "single-item", "custom-callable"],
)
def test_bootstrap_metric_matches_verl(data, size, fns):
    for seed in (0, 42, 7):
        ref = mu.bootstrap_metric(data, size, fns, seed=seed)
        out = bootstrap_metric(data, size, fns, seed=seed)
        assert np.allclose(ref, out, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2, 3], ids=lambda s: f"seed{s}")
def test_bootstrap_majority_matches_verl(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 12))
    data = [{"pred": str(p), "val": float(v)} for p, v in zip(rng.integers(0, 3, n), rng.normal(size=n))]
    for fn_mod in (mu.calc_maj_val, calc_maj_val):
        fn = functools.partial(fn_mod, vote_key="pred", val_key="val")
        for k in (1, 2, n):
            ref = mu.bootstrap_metric(data, k, [fn], seed=seed)
            out = bootstrap_metric(data, k, [fn], seed=seed)
            assert np.allclose(ref, out, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(5), ids=lambda s: f"seed{s}")
def test_calc_maj_val_matches_verl(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 10))
    data = [{"p": int(a), "v": float(b)} for a, b in zip(rng.integers(0, 3, n), rng.random(n))]
    assert calc_maj_val(data, "p", "v") == mu.calc_maj_val(data, "p", "v")


def test_bootstrap_indices_equal_global_draws():
    np.random.seed(5)  # noqa: NPY002 - verl's own draws, the reference
    want = np.random.choice(9, size=(1000, 4), replace=True)  # noqa: NPY002
    assert np.array_equal(bootstrap_indices(9, 4, seed=5), want)


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (
            lambda: process_validation_metrics(["a"], ["u", "v"], {"x": [1]}),
            ValueError,
            "sample_uids must have one",
        ),
        (
            lambda: process_validation_metrics(["a"], ["u"], {"x": [1, 2]}),
            ValueError,
            r"infos_dict\['x'\] must have",
        ),
        (
            lambda: process_validation_metrics(["a", "a"], ["u", "u"], {"x": [1, "b"]}),
            TypeError,
            "mixes numbers",
        ),
        (lambda: process_validation_metrics(["a"], ["u"], {"x": [[1]]}), TypeError, "must hold numbers"),
        (lambda: process_validation_metrics(["a"], ["u"], [1]), TypeError, "infos_dict must be a mapping"),
        (lambda: process_validation_metrics(["a"], ["u"], {"x": [1]}, seed=1.5), TypeError, "seed must be"),
        (lambda: process_validation_metrics("ab", ["u"], {"x": [1]}), TypeError, "data_sources must be"),
        (
            lambda: process_validation_metrics(["a"], ["u"], {"x": [1], "pred": [["l"]]}),
            TypeError,
            r"infos_dict\[.pred.\] must hold numbers",
        ),
        (lambda: bootstrap_metric([], 2, [np.max]), ValueError, "at least one item"),
        (lambda: bootstrap_metric([1], -1, [np.max]), ValueError, "subset_size must be"),
        (lambda: calc_maj_val([], "p", "v"), ValueError, "at least one item"),
        (lambda: calc_maj_val([{"p": 1}], "p", "v"), ValueError, "must hold the keys 'p' and 'v'"),
        (lambda: flatten_validation_metrics({"s": {"acc": {"mean": 1.0}}}), ValueError, "verl metric names"),
    ],
    ids=[
        "uid-length",
        "info-length",
        "mixed-str",
        "nested-value",
        "infos-not-mapping",
        "float-seed",
        "string-sources",
        "unhashable-pred",
        "empty-bootstrap",
        "negative-subset",
        "empty-vote",
        "missing-key",
        "bad-metric-name",
    ],
)
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_text_first_value_skips_prompt_like_verl():
    ds, uids = ["a"] * 4, ["u", "u", "v", "v"]
    infos = {"x": ["t", 1.0, 2.0, 3.0]}
    assert_same(mu.process_validation_metrics(ds, uids, infos), process_validation_metrics(ds, uids, infos))


def reference_flatten(metrics):
    """verl's trainer rule written out: core = core var, mean/maj/best prefix, @N_max."""
    out = {}
    for src, v2m in metrics.items():
        core_var = "acc" if "acc" in v2m else "reward"
        for var, m2v in v2m.items():
            ns = [int(name.split("@")[-1].split("/")[0]) for name in m2v]
            for name, value in m2v.items():
                core = (
                    var == core_var
                    and name.split("@")[0] in ("mean", "maj", "best")
                    and f"@{max(ns)}" in name
                )
                out[f"{'val-core' if core else 'val-aux'}/{src}/{var}/{name}"] = value
    return out


def test_flatten_rule():
    rng = np.random.default_rng(11)
    ds, uids, infos = random_layout(rng, max_prompts=4)
    infos.pop("acc")
    res = process_validation_metrics(ds, uids, infos)
    flat = flatten_validation_metrics(res)
    assert flat == reference_flatten(res)
    assert any(key.startswith("val-core/") and "/reward/" in key for key in flat)
    assert not any(key.startswith("val-core/") and "/score/" in key for key in flat)


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=4),
    seed=st.integers(0, 2**31 - 1),
)
def test_property_best_mean_worst_ordering(sizes, seed):
    rng = np.random.default_rng(seed)
    uids = np.repeat(np.arange(len(sizes)), sizes)
    vals = rng.normal(size=uids.shape[0])
    pred = [str(v) for v in rng.integers(0, 3, uids.shape[0])]
    out = process_validation_metrics(["s"] * uids.shape[0], uids, {"v": vals, "pred": pred})["s"]["v"]
    for name, value in out.items():
        if name.startswith("best@") and name.endswith("/mean"):
            worst = out[name.replace("best", "worst")]
            assert worst <= value + 1e-12
        if name.endswith("/std") or name.startswith("std@"):
            assert value >= 0.0
    for name in out:
        if name.startswith("maj@") and name.endswith("/mean"):
            k = name.split("@")[1].split("/")[0]
            assert out[f"worst@{k}/mean"] - 1e-12 <= out[name] <= out[f"best@{k}/mean"] + 1e-12


@pytest.mark.parametrize("seed", range(3), ids=lambda s: f"seed{s}")
def test_parity_expected_acc_counts_float32(short_bootstrap, seed):
    """float32 acc: padded prompts average in float64 (mixed list), the others stay float32, as in verl."""
    rng = np.random.default_rng(seed)
    for _ in range(10):
        ds = ["s"] * 7 + ["t"] * 2
        uids = ["a", "a", "a", "b", "b", "b", "b", "c", "c"]
        acc = list(rng.random(9).astype(np.float32))
        acc[int(rng.integers(9))] = None
        infos = {
            "acc": acc,
            "pred": [str(v) for v in rng.integers(0, 2, 9)],
            "reward": list(rng.random(9).astype(np.float32)),
        }
        expected = {("s", "a"): int(rng.integers(2, 6)), ("s", "b"): int(rng.integers(2, 6)), ("s", "new"): 2}
        assert_same(
            mu.process_validation_metrics(ds, uids, infos, expected_acc_counts=expected),
            process_validation_metrics(ds, uids, infos, expected_acc_counts=expected),
        )


def test_parity_uid_shared_by_two_sources(short_bootstrap):
    """A uid under two data sources is two prompts (the pair factorisation path)."""
    ds = ["a", "b", "a", "b", "a", "c"]
    uids = ["u", "u", "u", "u", "v", "u"]
    infos = {"acc": [1.0, 0.0, 0.0, 1.0, 1.0, 0.5], "pred": ["x", "y", "y", "y", "x", "z"]}
    assert_same(mu.process_validation_metrics(ds, uids, infos), process_validation_metrics(ds, uids, infos))


def test_parity_padding_none_predictions_and_sources(short_bootstrap):
    """maj@k with padded prompts, None predictions, several sources and numbers of samples."""
    rng = np.random.default_rng(5)
    ds, uids, infos = [], [], {"acc": [], "pred": [], "score": []}
    for p, n in enumerate([16] * 30 + [8] * 6 + [3] * 5):
        pred = [str(v) for v in rng.integers(0, 3, n)]
        if p % 10 == 7:
            pred[2] = None
        ds += [f"s{p % 2}"] * n
        uids += [f"u{p}"] * n
        infos["acc"] += (rng.random(n) < 0.5).tolist()
        infos["pred"] += pred
        infos["score"] += rng.normal(size=n).tolist()
    expected = {("s0", "u0"): 20, ("s1", "u1"): 16, ("s0", "never-seen"): 4}
    assert_same(
        mu.process_validation_metrics(ds, uids, infos, expected_acc_counts=expected),
        process_validation_metrics(ds, uids, infos, expected_acc_counts=expected),
    )


@pytest.mark.parametrize(
    "column",
    [[True, [1, 2]], [False, {"a": 1}], [1.5, [1.0]], [True, np.array([1, 2])]],
    ids=["bool-then-list", "bool-then-dict", "float-then-list", "bool-then-array"],
)
def test_non_scalar_values_are_named(column):
    """A list/dict among the values: a TypeError naming the variable and the culprit."""
    with pytest.raises(
        TypeError, match=r"infos_dict\['acc'\] must hold numbers, bools, strings or None; found"
    ):
        process_validation_metrics(["s", "s"], ["u", "u"], {"acc": column})


# ----------------------------------------------------------------------------- bounds and checks
@pytest.mark.parametrize("count", [10**9, 2**63, MAX_SAMPLES_PER_PROMPT + 1], ids=["1e9", "2**63", "limit+1"])
def test_huge_expected_count_is_refused_at_once(count):
    """A count of 1e9 ran forever (1e9 padded zeros, 1000 draws each); now a named error, at once."""
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"expected_acc_counts\[\('m', 'u'\)\] must be at most 16384"):
        process_validation_metrics(
            ["m"] * 4, ["u"] * 4, {"acc": [1, 0, 1, 1]}, expected_acc_counts={("m", "u"): count}
        )
    assert time.perf_counter() - t0 < 10.0  # a hang guard (it ran forever), far from any load's noise


def test_expected_count_at_the_limit_is_computed(monkeypatch):
    monkeypatch.setattr(V, "MAX_SAMPLES_PER_PROMPT", 64)
    out = process_validation_metrics(
        ["m"] * 4, ["u"] * 4, {"acc": [1, 0, 1, 1]}, expected_acc_counts={("m", "u"): 64}
    )
    assert out["m"]["acc"]["mean@64"] == 3 / 64
    with pytest.raises(ValueError, match="must be at most 64"):
        process_validation_metrics(["m"], ["u"], {"acc": [1]}, expected_acc_counts={("m", "u"): 65})


def test_prompt_with_too_many_samples_is_refused(monkeypatch):
    monkeypatch.setattr(V, "MAX_SAMPLES_PER_PROMPT", 8)
    with pytest.raises(ValueError, match=r"the prompt \('m', 'u'\) has 9 samples; .* at most 8 per prompt"):
        process_validation_metrics(["m"] * 9, ["u"] * 9, {"acc": [1.0] * 9})


def test_a_prompt_of_the_largest_size_runs_in_seconds():
    """16384 samples of one prompt with predictions (maj@k up to k = 16384): seconds, not hours."""
    rng = np.random.default_rng(0)
    n = MAX_SAMPLES_PER_PROMPT // 4
    t0 = time.perf_counter()
    out = process_validation_metrics(
        ["m"] * n,
        ["u"] * n,
        {"acc": (rng.random(n) < 0.3).tolist(), "pred": [str(v) for v in rng.integers(0, 5, n)]},
    )
    assert time.perf_counter() - t0 < 120.0  # a hang guard (hours before), not a speed figure
    assert f"maj@{n}/mean" in out["m"]["acc"]


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        (
            {"expected_acc_counts": {("m", "u"): 1.5}},
            TypeError,
            r"expected_acc_counts\[\('m', 'u'\)\] must be an integer",
        ),
        (
            {"expected_acc_counts": {("m", "u"): "8"}},
            TypeError,
            r"expected_acc_counts\[\('m', 'u'\)\] must be an integer",
        ),
        ({"expected_acc_counts": {("m", "u"): True}}, TypeError, "must be an integer"),
        ({"expected_acc_counts": {("m", "u"): -1}}, ValueError, r"must be an integer >= 0; got -1"),
        (
            {"expected_acc_counts": {"m": 4}},
            TypeError,
            r"\(data_source, uid\) pairs to counts; got the key 'm'",
        ),
        ({"expected_acc_counts": [("m", "u", 4)]}, TypeError, "expected_acc_counts must be a mapping"),
        ({"seed": -1}, ValueError, r"seed must be an integer in \[0, 2\*\*32 - 1\]"),
        ({"seed": 2**32}, ValueError, r"seed must be an integer in \[0, 2\*\*32 - 1\]"),
        ({"seed": "42"}, TypeError, "seed must be an integer"),
    ],
    ids=[
        "float-count",
        "str-count",
        "bool-count",
        "negative-count",
        "key-not-pair",
        "counts-list",
        "seed-negative",
        "seed-2**32",
        "seed-str",
    ],
)
def test_option_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        process_validation_metrics(["m"] * 2, ["u"] * 2, {"acc": [1, 0]}, **kwargs)


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (
            lambda: bootstrap_metric([1, 2], 2, [np.mean], n_bootstrap=10**9),
            ValueError,
            r"n_bootstrap \* subset_size must be at most",
        ),
        (lambda: bootstrap_metric([1, 2], 10**9, [np.mean]), ValueError, "subset_size=1000000000"),
        (
            lambda: bootstrap_indices(3, 2, seed=2**40),
            ValueError,
            r"seed must be an integer in \[0, 2\*\*32 - 1\]",
        ),
        (
            lambda: bootstrap_metric([1, 2], 1, np.mean),
            TypeError,
            "reduce_fns must be a sequence of callables",
        ),
        (lambda: bootstrap_metric([1, 2], 1, [3]), TypeError, r"reduce_fns\[0\] must be callable"),
        (lambda: bootstrap_metric("12", 1, [np.mean]), TypeError, "data must be a sequence"),
    ],
    ids=["draws-n-bootstrap", "draws-subset", "seed-2**40", "fns-not-list", "fn-not-callable", "data-str"],
)
def test_bootstrap_metric_bounds(call, exc, match):
    t0 = time.perf_counter()
    with pytest.raises(exc, match=match):
        call()
    assert time.perf_counter() - t0 < 10.0  # refused before any draw: a hang guard, not a speed figure


# ----------------------------------------------------------------------------- properties
NAMED = ("data_sources", "sample_uids", "infos_dict", "seed", "expected_acc_counts")
_values = st.one_of(
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.none(),
    st.sampled_from(["x", "1"]),
    st.just([1]),
)


@st.composite
def validation_inputs(draw):
    """Small inputs of every kind: mixed-type sources and uids, values with NaN/inf/None/text/
    nested items, numpy columns of several dtypes, predictions, paddings, odd seeds."""
    n = draw(st.integers(1, 10), label="n")
    src_pool = draw(
        st.sampled_from([["a"], ["a", "b"], ["a", 1], [1, 2], [1, "1"], [1, True]]), label="source pool"
    )
    uid_pool = draw(
        st.sampled_from([["u", "v"], [0, 1, 2], ["u", 0, 2.5], [1, "1"], [0, False]]), label="uids"
    )
    sources = draw(st.lists(st.sampled_from(src_pool), min_size=n, max_size=n), label="sources")
    uids = draw(st.lists(st.sampled_from(uid_pool), min_size=n, max_size=n), label="uids")
    infos: dict = {}
    kind = draw(st.sampled_from(["list", "numbers", "numpy"]), label="kind")
    if kind == "list":
        infos["acc"] = draw(st.lists(_values, min_size=n, max_size=n), label="acc")
    elif kind == "numbers":
        infos["acc"] = draw(
            st.lists(st.sampled_from([0, 1, 0.5, True, False]), min_size=n, max_size=n), label="acc"
        )
    else:
        dtype = draw(st.sampled_from([np.float64, np.float32, np.int64, np.bool_]), label="dtype")
        infos["acc"] = np.asarray(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)), dtype=dtype)
    if draw(st.booleans(), label="has_pred"):
        infos["pred"] = draw(
            st.lists(st.sampled_from(["4", "5", None, 7]), min_size=n, max_size=n), label="pred"
        )
    seed = draw(st.sampled_from([0, 42, 7, 2**32 - 1, -1, 2**32, 1.5]), label="seed")
    expected = None
    if draw(st.booleans(), label="has_expected"):
        expected = {
            (draw(st.sampled_from(["a", "b", 1])), draw(st.sampled_from(["u", "v", "w"]))): draw(
                st.sampled_from([0, 3, 12, -1, 2.0, 10**9])
            )
            for _ in range(draw(st.integers(1, 3)))
        }
    return sources, uids, infos, seed, expected


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=validation_inputs())
def test_property_verl_parity_or_a_named_error(short_bootstrap, args):
    """Whatever comes in: verl's numbers exactly, or a TypeError/ValueError naming the argument;
    never a crash, a hang, or a silently different result."""
    sources, uids, infos, seed, expected = args
    try:
        out = process_validation_metrics(sources, uids, infos, seed=seed, expected_acc_counts=expected)
    except (TypeError, ValueError) as err:
        event(f"error: {str(err)[:28]}")
        assert any(name in str(err) for name in NAMED), err
        return
    event("result")
    ref_infos = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in infos.items()}
    if any(isinstance(v, np.ndarray) and v.dtype == np.float32 for v in infos.values()):
        ref_infos = {k: (list(v) if isinstance(v, np.ndarray) else v) for k, v in infos.items()}
    with np.errstate(all="ignore"):
        ref = mu.process_validation_metrics(sources, uids, ref_infos, seed=seed, expected_acc_counts=expected)
    assert_same_nan(ref, out)


def assert_same_nan(ref, out, tol=1e-12):
    """:func:`assert_same`, NaN equal to NaN (NaN or inf among the values propagate as in verl)."""
    assert list(ref) == list(out)
    for src in ref:
        assert list(ref[src]) == list(out[src]), src
        for var in ref[src]:
            assert list(ref[src][var]) == list(out[src][var]), (src, var)
            for name, want in ref[src][var].items():
                got, want = out[src][var][name], float(want)
                assert isinstance(got, float)
                assert (math.isnan(got) and math.isnan(want)) or math.isclose(
                    got, want, rel_tol=tol, abs_tol=tol
                ), (src, var, name, want, got)

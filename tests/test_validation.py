"""rlmetrics.validation.bootstrap and its building blocks: parity with verl 0.9.1's validation
metrics, and the draws, rank counts and vote counts against brute force over the bootstrap draws."""

from __future__ import annotations

import functools
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics.validation import bootstrap as V
from rlmetrics.validation import draws, extremes, majority
from rlmetrics.validation.bootstrap import (
    bootstrap_indices,
    bootstrap_metric,
    calc_maj_val,
    flatten_validation_metrics,
    process_validation_metrics,
)
from rlmetrics.validation.inputs import local_codes, unique_rows

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


@pytest.mark.parametrize(
    ("q", "n"), [(5000, 16), (3, 16), (700, 7), (40, 24)], ids=["zeta-blocks", "ranks", "n7", "n24"]
)
def test_best_worst_stats_equal_unblocked(q, n):
    """The cache-blocked best/worst statistics are bit for bit the unblocked ones, on both count
    paths (subset-sum table and drawn ranks)."""
    rng = np.random.default_rng(q + n)
    vals = rng.normal(size=(q, n))
    vals[: q // 2] = np.round(vals[: q // 2])  # ties
    order = np.argsort(vals, axis=1, kind="stable")
    ks = V._gen_ns(n)
    got = extremes.best_worst_stats(vals, ks, 1000, 42)
    for k in ks:
        sorted_vals, best, worst = extremes.rank_counts(vals, k, 1000, 42, order=order)
        want = extremes.weighted_mean_std(sorted_vals, best, 1000) + extremes.weighted_mean_std(
            sorted_vals, worst, 1000
        )
        for g, w in zip(got[k], want, strict=True):
            np.testing.assert_array_equal(g, w)
    maj = rng.integers(0, 1000, (q, n))
    blocked = np.stack(extremes.weighted_mean_std_blocks(vals, maj, 1000))
    np.testing.assert_array_equal(blocked, np.stack(extremes.weighted_mean_std(vals, maj, 1000)))


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


@pytest.mark.parametrize(
    ("n", "ks"), [(1, (1, 3)), (5, (7, 2, 3)), (16, (2, 4, 8, 16)), (300, (3, 1))], ids=str
)
def test_indices_are_verl_draws_in_any_order_and_after_clearing(n, ks):
    """Every k's index matrix is np.random.choice's after np.random.seed, whichever k comes first
    (they share one stream), the global RNG is left alone, and clearing the caches changes nothing."""
    before = np.random.get_state()[1].copy()  # noqa: NPY002 - the global state must stay untouched
    draws.clear_caches()
    got = {k: draws.indices(n, k, 50, 7).copy() for k in ks}
    draws.clear_caches()
    draws.prefetch(n, list(ks[::-1][:1]), 50, 7)
    again = {k: draws.indices(n, k, 50, 7) for k in ks}
    np.testing.assert_array_equal(np.random.get_state()[1], before)  # noqa: NPY002
    for k in ks:
        state = np.random.get_state()  # noqa: NPY002
        try:
            np.random.seed(7)  # noqa: NPY002 - verl's own draws, the reference
            want = np.random.choice(n, size=(50, k), replace=True)  # noqa: NPY002
        finally:
            np.random.set_state(state)  # noqa: NPY002
        np.testing.assert_array_equal(got[k], want)
        np.testing.assert_array_equal(again[k], want)
        assert not again[k].flags.writeable


# ----------------------------------------------------------------------------- brute-force references
N_BOOT, SEED = 1000, 42


def brute_subset_table(n: int, k: int) -> np.ndarray:
    """Z[A] = number of bootstrap rows whose drawn positions all lie in bit set A."""
    idx = draws.indices(n, k, N_BOOT, SEED)
    row_sets = np.array([sum(1 << j for j in set(row)) for row in idx.tolist()], dtype=np.int64)
    sets = np.arange(1 << n, dtype=np.int64)
    return ((row_sets[:, None] & ~sets[None, :]) == 0).sum(axis=0)


def close(got: np.ndarray, want: np.ndarray, values: np.ndarray, **kw) -> None:
    """rtol 1e-12, and an absolute slack of 1e-12 times the values' scale (a zero std comes out
    exactly 0 from the counts, a few ulps of the values from 1000 draws' mean)."""
    scale = max(1.0, float(np.nanmax(np.abs(values), initial=0.0, where=np.isfinite(values))))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * scale, **kw)


def brute_best_worst(values: np.ndarray, k: int) -> np.ndarray:
    """(4, Q): mean and population std over the draws of the max, then of the min, per row."""
    drawn = values[:, draws.indices(values.shape[1], k, N_BOOT, SEED)]  # (Q, draws, k)
    best, worst = drawn.max(axis=2), drawn.min(axis=2)
    return np.stack([best.mean(axis=1), best.std(axis=1), worst.mean(axis=1), worst.std(axis=1)])


def brute_majority(pattern: list[int], idx: np.ndarray) -> np.ndarray:
    """verl's vote per draw: the most common prediction, ties to the one drawn first; the count
    goes to the first drawn position holding the winner."""
    counts = np.zeros(len(pattern), dtype=np.int64)
    for draw in idx.tolist():
        preds = [pattern[j] for j in draw]
        tally = Counter(preds)  # insertion order = order of first appearance in the draw
        winner = max(tally, key=tally.__getitem__)
        counts[draw[preds.index(winner)]] += 1
    return counts


def first_positions(codes: np.ndarray) -> np.ndarray:
    return np.array([[row.index(c) for c in row] for row in codes.tolist()], dtype=np.int64).reshape(
        codes.shape
    )


def random_patterns(rng: np.random.Generator, n: int, count: int) -> np.ndarray:
    """Distinct first-occurrence patterns: one prediction, all distinct, and random alphabets."""
    preds = [np.zeros(n, dtype=np.int64), np.arange(n)]
    for _ in range(count):
        preds.append(rng.integers(0, int(rng.integers(1, n + 1)), n))
    patterns, _ = unique_rows(first_positions(np.array(preds)))
    return patterns


def best_worst_values(rng: np.random.Generator, n: int) -> np.ndarray:
    """Continuous rows, rows with ties, a constant row and a 0/1 row."""
    rows = [
        rng.standard_normal(n),
        rng.standard_normal(n) * 1e3 - 5.0,
        rng.integers(0, 3, n).astype(np.float64),
        rng.integers(-1, 2, n).astype(np.float64) * 0.5,
        np.full(n, 2.5),
        (np.arange(n) % 2).astype(np.float64),
        -np.arange(n, dtype=np.float64),
    ]
    return np.array(rows)


@pytest.mark.parametrize("n", [1, 3, 5, 8, 10], ids=lambda n: f"n{n}")
@pytest.mark.parametrize("k", [1, 2, 5, 12], ids=lambda k: f"k{k}")
def test_subset_table_matches_enumeration(n, k):
    table = draws.subset_table(n, k, N_BOOT, SEED)
    np.testing.assert_array_equal(table, brute_subset_table(n, k))
    assert table[-1] == N_BOOT and table[0] == 0
    assert not table.flags.writeable


def test_subset_table_wide_counts():
    table = draws.subset_table(3, 2, 40_000, SEED)
    assert table.dtype == np.int32
    assert table[-1] == 40_000  # every draw lies inside the full set


BW_CASES = [(1, (1, 2, 3)), (3, (1, 2, 3, 4)), (5, (1, 2, 3, 5, 8)), (8, (2, 4, 8, 16)), (24, (2, 24))]


@pytest.mark.parametrize(("n", "ks"), BW_CASES, ids=[f"n{n}" for n, _ in BW_CASES])
def test_best_worst_stats_match_brute_force(n, ks):
    """Both count paths (subset-sum table up to n = 20, drawn ranks beyond) against the draws."""
    rng = np.random.default_rng(n)
    values = best_worst_values(rng, n)
    got = extremes.best_worst_stats(values, ks, N_BOOT, SEED)
    for k in ks:
        close(np.array(got[k]), brute_best_worst(values, k), values, err_msg=f"k={k}")
        # the constant row: every draw gives its value, with no spread
        np.testing.assert_allclose([got[k].best_mean[4], got[k].worst_mean[4]], 2.5, rtol=1e-15)
        np.testing.assert_allclose([got[k].best_std[4], got[k].worst_std[4]], 0.0, atol=1e-12)


def test_best_worst_stats_float32_and_noncontiguous_values():
    rng = np.random.default_rng(9)
    wide = rng.standard_normal((6, 10)).astype(np.float32)
    values = wide[:, ::2]  # (6, 5), strided, float32
    got = extremes.best_worst_stats(values, [3], N_BOOT, SEED)
    close(np.array(got[3]), brute_best_worst(values.astype(np.float64), 3), values)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_best_worst_nan_and_inf_rows():
    """A NaN anywhere in a row makes all four of its statistics NaN (0 * NaN in the weighted
    sums); finite rows match the draws."""
    rng = np.random.default_rng(4)
    n, ks = 6, [1, 2, 4]
    values = rng.standard_normal((7, n))
    values[1, 2] = np.nan
    values[2, [0, 5]] = np.nan
    values[3] = np.nan
    values[4, 1] = np.inf
    values[5, [0, 3]] = [-np.inf, np.inf]
    stats = extremes.best_worst_stats(values, ks, N_BOOT, SEED)
    finite_rows = [0, 6]
    for k in ks:
        got = np.array(stats[k])
        assert np.isnan(got[:, 1:4]).all()
        close(got[:, finite_rows], brute_best_worst(values[finite_rows], k), values[finite_rows])


@pytest.mark.parametrize("count_dtype", [np.int16, np.int64], ids=["int16", "int64"])
def test_weighted_mean_std_matches_np_average(count_dtype):
    rng = np.random.default_rng(13)
    q, n = 30, 7
    vals = rng.standard_normal((q, n)) * 4.0 + 10.0
    counts = np.array([rng.multinomial(N_BOOT, rng.dirichlet(np.ones(n))) for _ in range(q)])
    counts[0] = 0
    counts[0, 3] = N_BOOT  # all weight on one column: zero std
    counts = counts.astype(count_dtype)
    mean, std = extremes.weighted_mean_std(vals, counts, N_BOOT)
    for i in range(q):
        m = np.average(vals[i], weights=counts[i].astype(np.float64))
        assert mean[i] == pytest.approx(m, rel=1e-12)
        assert std[i] == pytest.approx(
            np.sqrt(np.average((vals[i] - m) ** 2, weights=counts[i].astype(np.float64))),
            rel=1e-12,
            abs=1e-12,
        )
    assert mean[0] == vals[0, 3] and std[0] == 0.0


@pytest.mark.parametrize("dtype", [np.int32, np.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("n", [0, 1, 5, 17], ids=lambda n: f"n{n}")
def test_local_codes(dtype, n):
    rng = np.random.default_rng(n)
    codes = rng.integers(-3, 4, (40, n)).astype(dtype)
    if n:
        codes[0] = 7  # one code
        codes[1] = np.arange(n)  # all distinct
    got = local_codes(codes)
    assert got.shape == (40, n) and got.dtype == np.int64
    np.testing.assert_array_equal(got, first_positions(codes))


@pytest.mark.parametrize("n", [1, 2, 5, 16, 17, 40], ids=lambda n: f"n{n}")
def test_unique_rows_packed_and_bytes(n):
    """Packed keys (n <= 16) and byte-string keys give np.unique's distinct rows and inverse."""
    rng = np.random.default_rng(n)
    local = first_positions(rng.integers(0, 3, (60, n)))
    local[30:] = local[:30]  # repeated rows
    patterns, inverse = unique_rows(local)
    np.testing.assert_array_equal(patterns[inverse], local)
    assert patterns.shape[0] == np.unique(local, axis=0).shape[0]


@pytest.mark.parametrize(("n", "k"), [(3, 4), (16, 3), (4, 2), (300, 3)], ids=str)
def test_fold_draws_stand_for_every_draw(n, k):
    """Folded rows with their weights are exactly the multiset of verl's index rows."""
    idx, weights = draws.fold_draws(n, k, N_BOOT, SEED)
    full = draws.indices(n, k, N_BOOT, SEED)
    want = Counter(map(tuple, full.tolist()))
    got = (
        Counter(map(tuple, idx.tolist()))
        if weights is None
        else Counter(dict(zip(map(tuple, idx.tolist()), weights.tolist())))
    )
    assert got == want


def score_table(idx: np.ndarray, n: int, k: int) -> np.ndarray:
    """(n, R): position j's score in draw r, multiplicity * 2**k + 2**(k - 1 - first slot) when
    drawn; a plain loop."""
    scores = np.zeros((n, idx.shape[0]), dtype=object)
    for r, draw in enumerate(idx.tolist()):
        for j in set(draw):
            scores[j, r] = draw.count(j) * 2**k + 2 ** (k - 1 - draw.index(j))
    return scores


@pytest.mark.parametrize(("n", "k"), [(3, 3), (6, 12), (5, 27), (16, 16)], ids=str)
def test_vote_scores_match_plain_loop(n, k):
    x_t, slot_pos, weights = majority._scores_table(n, k, N_BOOT, SEED)
    idx, w = draws.fold_draws(n, k, N_BOOT, SEED)
    np.testing.assert_array_equal(x_t.astype(np.int64).astype(object), score_table(idx, n, k))
    np.testing.assert_array_equal(slot_pos.reshape(k, -1).T, idx)
    assert (weights is None) == (w is None)
    assert x_t.dtype == (np.float32 if k <= 19 else np.float64)


MAJ_CASES = [
    (4, (3,)),
    (5, (4, 2, 1)),
    (6, (7,)),
    (3, (12, 5)),
    (5, (20,)),
    (4, (47, 3)),
    (16, (4, 8, 16)),
    (4, (50,)),
]


@pytest.mark.parametrize(
    ("n", "ks"), MAJ_CASES, ids=[f"n{n}-k{'-'.join(map(str, ks))}" for n, ks in MAJ_CASES]
)
def test_majority_counts_match_brute_force(n, ks):
    """Bit scores (k <= 47), per-position scores (k > 47) and the first-slot shortcut (k <= 2)."""
    rng = np.random.default_rng(100 * n + ks[0])
    patterns = random_patterns(rng, n, 12)
    for k in ks:
        got = majority.pattern_counts(patterns, k, N_BOOT, SEED)
        assert got.shape == patterns.shape and got.dtype == np.int16
        np.testing.assert_array_equal(got.sum(axis=1), N_BOOT)
        idx = draws.indices(n, k, N_BOOT, SEED)
        for p, pattern in enumerate(patterns.tolist()):
            np.testing.assert_array_equal(got[p], brute_majority(pattern, idx), err_msg=f"k={k} {pattern}")


def test_majority_counts_of_rows_share_patterns():
    rng = np.random.default_rng(8)
    local = first_positions(rng.integers(0, 3, (50, 6)))
    counts, inverse = majority.majority_counts_distinct(local, 4, N_BOOT, SEED)
    np.testing.assert_array_equal(counts[inverse], majority.majority_counts(local, 4, N_BOOT, SEED))
    idx = draws.indices(6, 4, N_BOOT, SEED)
    for row in (0, 17, 49):
        np.testing.assert_array_equal(counts[inverse[row]], brute_majority(local[row].tolist(), idx))


def test_majority_counts_wide_counts():
    """Counts above int16 (more than 32767 bootstrap draws) come out as int64."""
    n, n_boot = 4, 40_000
    rng = np.random.default_rng(3)
    patterns = random_patterns(rng, n, 5)
    got = majority.pattern_counts(patterns, 3, n_boot, SEED)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got.sum(axis=1), n_boot)
    np.testing.assert_array_equal(
        got[1], brute_majority(patterns[1].tolist(), draws.indices(n, 3, n_boot, SEED))
    )

"""Metrics by category: the key scheme (keys.category_key and its inverse), the labels and segment
reductions of rlmetrics._core.categories, the folding of rlmetrics.training.categories, and
grouped data metrics over 3 gloo ranks that see different categories."""

from __future__ import annotations

import os
import pickle
import sys
import time
import warnings
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics import keys as K
from rlmetrics._core import categories as _categories
from rlmetrics._core.categories import (
    category_codes,
    field_name,
    is_category_field,
    limit_categories,
    parse_field,
    segment_max,
    segment_min,
    segment_sum,
)
from rlmetrics.errors import RLMetricsWarning
from rlmetrics.training.categories import finalize_by_category

# --- the key scheme ----------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(category=st.text(max_size=20) | st.sampled_from(["a/b", " ", "%", "%20", "<other>", "", "é ü/ß"]))
def test_property_escaping_round_trips_and_leaves_no_separator(category):
    token = K.escape_category(category)
    assert K.unescape_category(token) == category
    assert "/" not in token and " " not in token and ":" not in token and token
    key = K.category_key(K.SCORE_MEAN, "data_source", category)
    assert K.split_category_key(key) == (K.SCORE_MEAN, "data_source", category)


@settings(max_examples=200, deadline=None)
@given(a=st.text(max_size=8), b=st.text(max_size=8))
def test_property_different_categories_give_different_keys(a, b):
    if a != b:
        assert K.category_key("x/y", "g", a) != K.category_key("x/y", "g", b)


@pytest.mark.parametrize(
    ("category", "token"),
    [
        pytest.param("gsm8k", "gsm8k", id="plain"),
        pytest.param("openai/gsm8k", "openai%2Fgsm8k", id="slash"),
        pytest.param("code contests", "code%20contests", id="space"),
        pytest.param("100%", "100%25", id="percent"),
        pytest.param("数学", "数学", id="unicode-letters"),
        pytest.param("", "%empty", id="empty"),
        pytest.param(K.OTHER_CATEGORY, "%other", id="other"),
    ],
)
def test_category_tokens_are_readable(category, token):
    assert K.escape_category(category) == token
    assert (
        K.category_key(K.SCORE_MEAN, "data_source", category) == f"by_data_source/{token}/critic/score/mean"
    )


@settings(max_examples=300, deadline=None)
@given(
    a=st.text(max_size=12) | st.sampled_from(["a/b", "a_2Fb", "a:b", "a_3Ab", "", "<other>", "x y"]),
    b=st.text(max_size=12) | st.sampled_from(["a_2Fb", "a_3Ab", "%other", "_empty"]),
)
def test_property_mlflow_names_of_category_keys_are_distinct_and_read_back(a, b):
    """MLflow refuses "%": the category token writes it as ":" (a space on Windows), never in a
    token raw, so two categories keep two names and the key is read back from its name."""
    from rlmetrics.tracking.mlflow import mlflow_key

    key_a, key_b = (K.category_key("critic/score/mean@4", "data_source", c) for c in (a, b))
    for key in (key_a, key_b):
        name = mlflow_key(key)
        assert "%" not in name
        if len(name) < 240 and "/../" not in key and "/./" not in key:  # no hash, no path segment
            assert K.key_from_mlflow_name(name).replace("_at_", "@") == key
        for mark in K.MLFLOW_PERCENT:  # either spelling reads back
            if "%" in key:
                written = key.replace("%", mark)
                assert K.key_from_mlflow_name(written) == key
    if a != b:
        assert mlflow_key(key_a) != mlflow_key(key_b)


@pytest.mark.parametrize(
    "name",
    ["critic/score/mean", "by_g/a b c/x", "by_g/a:zz/x", "by_bad group/a:20/x", "by_g/a:20", "by_g"],
    ids=["plain", "not-an-escape", "bad-hex", "bad-group", "no-key", "no-slash"],
)
def test_mlflow_names_that_are_no_escaped_category_stay_as_they_are(name):
    assert K.key_from_mlflow_name(name) == name


def test_no_plain_key_reads_as_a_category_key():
    plain = [v for n, v in vars(K).items() if n.isupper() and isinstance(v, str) and "/" in v]
    assert plain and all(K.split_category_key(v) is None for v in plain)
    assert not any(v.startswith(K.CATEGORY_PREFIX) for v in plain)


@pytest.mark.parametrize(
    "key",
    ["by_data_source", "by_g/tok", "by_g/tok/", "by_a b/x/k", "by_g/%2/k", "by_g/%zz/k", "by_/x/k"],
    ids=["no-slash", "no-key", "empty-key", "bad-group", "short-escape", "bad-escape", "empty-group"],
)
def test_malformed_category_keys_are_not_split(key):
    assert K.split_category_key(key) is None


def test_unescape_names_the_malformed_token():
    with pytest.raises(ValueError, match=r"malformed category token '%2x': '%' must be followed by two hex"):
        K.unescape_category("%2x")


@pytest.mark.parametrize(
    ("group", "error", "match"),
    [
        pytest.param("", ValueError, "group name must be a non-empty name", id="empty"),
        pytest.param("a/b", ValueError, r"got 'a/b'", id="slash"),
        pytest.param("é", ValueError, r"ASCII letters", id="unicode"),
        pytest.param(3, TypeError, "group name must be a string; got int 3", id="type"),
    ],
)
def test_group_names_are_checked(group, error, match):
    with pytest.raises(error, match=match):
        K.category_key("k/x", group, "c")


# --- labels, limits and segment reductions --------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "names", "codes"),
    [
        pytest.param(np.array(["b", "a", "b"], dtype=object), ("a", "b"), [1, 0, 1], id="object-strings"),
        pytest.param(np.array(["b", "a", "b"]), ("a", "b"), [1, 0, 1], id="unicode-array"),
        pytest.param(["x", b"y", "x"], ("x", "y"), [0, 1, 0], id="bytes"),
        pytest.param(np.array([3, 1, 3]), ("1", "3"), [1, 0, 1], id="ints"),
        pytest.param(np.array([3.0, 1.5, 3.0]), ("1.5", "3"), [1, 0, 1], id="floats"),
        pytest.param(np.array([True, False, True]), ("False", "True"), [1, 0, 1], id="bools"),
    ],
)
def test_category_codes_are_sorted_names(labels, names, codes):
    got_names, got_codes = category_codes(labels, 3, where="group_by")
    assert got_names == names and got_codes.tolist() == codes


def test_category_codes_of_torch_labels():
    torch = pytest.importorskip("torch")
    names, codes = category_codes(torch.tensor([2, 0, 2]), 3, where="group_by")
    assert names == ("0", "2") and codes.tolist() == [1, 0, 1]


@pytest.mark.parametrize(
    ("labels", "error", "match"),
    [
        pytest.param(
            "abc", TypeError, "group_by must be a sequence of labels, one per sample; got str", id="str"
        ),
        pytest.param(5, TypeError, "got int", id="scalar"),
        pytest.param(
            np.zeros((3, 1)), ValueError, r"must be 1-d, one label per sample; got shape \(3, 1\)", id="2-d"
        ),
        pytest.param(["a"], ValueError, r"one label per sample \(3\); got 1", id="length"),
        pytest.param(np.array([1.0, np.nan, 2.0]), ValueError, "holds NaN labels", id="nan"),
    ],
)
def test_category_codes_errors(labels, error, match):
    with pytest.raises(error, match=match):
        category_codes(labels, 3, where="group_by")


def test_limit_keeps_the_most_frequent_and_folds_the_rest_sorted():
    names, codes = ("a", "b", "c", "d"), np.array([0, 1, 1, 2, 2, 2, 3])
    got, remapped, folded = limit_categories(names, codes, 3, "<other>")
    assert folded and got == ("<other>", "b", "c")
    assert [got[c] for c in remapped] == ["<other>", "b", "b", "c", "c", "c", "<other>"]
    assert limit_categories(names, codes, 4, "<other>")[2] is False


def test_field_names_round_trip_and_are_marked():
    name = field_name("data_source", "a\x1fb/c", "n_samples")
    assert is_category_field(name) and not is_category_field("n_samples")
    assert parse_field(name) == ("data_source", "a\x1fb/c", "n_samples")


@pytest.mark.parametrize("onehot", [True, False], ids=["onehot", "scatter"])
@pytest.mark.parametrize("namespace", ["numpy", "torch"])
def test_segment_reductions_equal_a_loop_over_categories(namespace, onehot, monkeypatch):
    if not onehot:  # numpy sums many categories by one scatter per column, not by a one-hot product
        monkeypatch.setattr(_categories, "_ONEHOT_SIZE", 0)
    rng = np.random.default_rng(0)
    values = rng.normal(size=(50, 4))
    values[3, 1] = np.inf  # a non-finite column is summed by scatter, not by product
    codes = rng.integers(0, 5, size=50)
    codes[codes == 4] = 0  # category 4 is empty
    if namespace == "torch":
        torch = pytest.importorskip("torch")
        v, c = torch.from_numpy(values), torch.from_numpy(codes)
        got = [np.asarray(f(v, c, 5)) for f in (segment_sum, segment_max, segment_min)]
    else:
        got = [f(values, codes, 5) for f in (segment_sum, segment_max, segment_min)]
    for k in range(5):
        rows = values[codes == k]
        want = [rows.sum(0), rows.max(0), rows.min(0)] if len(rows) else [0.0, -np.inf, np.inf]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g[k], np.broadcast_to(w, (4,)), rtol=1e-12)


def test_large_layouts_are_built_afresh_not_cached():
    small = _categories.field_names("g", ("a", "b"), ("n",))
    assert small is _categories.field_names("g", ("a", "b"), ("n",))
    many = tuple(f"c{i}" for i in range(_categories.CACHED_CATEGORIES + 1))
    big = _categories.field_names("g", many, ("n", "s"))
    assert big == _categories.field_names("g", many, ("n", "s"))
    assert big is not _categories.field_names("g", many, ("n", "s"))
    assert len(big) == 2 * len(many) and parse_field(big[-1]) == ("g", many[-1], "s")


def test_folding_at_finalize_adds_sums_and_combines_extremes_with_one_warning():
    by = {
        ("g", c): ({"n": float(n), "s": float(n * 10)}, {"x": float(n)}, {"x": -float(n)})
        for c, n in (("a", 5), ("b", 4), ("c", 2), ("d", 1))
    }

    def fin(s, hi, lo, options):
        return {"m/n": s["n"], "m/s": s["s"], "m/hi": hi["x"], "m/lo": lo["x"]}

    with pytest.warns(RLMetricsWarning, match="more than max_categories=3") as caught:
        got = finalize_by_category(by, fin, {}, count="n", max_categories=3)
    assert len(caught) == 1
    other = {k.split("/", 2)[2]: v for k, v in got.items() if "/%other/" in k}
    assert other == {"m/n": 3.0, "m/s": 30.0, "m/hi": 2.0, "m/lo": -2.0}
    assert {K.split_category_key(k)[2] for k in got} == {"a", "b", K.OTHER_CATEGORY}


# --- 3 gloo ranks with different categories ---------------------------------------------------------

#: Each rank's labels: rank 0 and 2 overlap on "math", rank 1 has an empty shard. With
#: ``max_categories=2`` ranks 0 and 2 are each over the limit, and the union keeps "math" (3
#: samples), whereas rank 2 alone would keep "logic" (2 samples, ties by name before "é x").
RANK_LABELS = {0: ["math", "code", "math", "a/b"], 1: [], 2: ["math", "é x", "é x", "logic", "logic"]}


def rank_batch(rank: int) -> dict:
    here = str(Path(__file__).parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    from test_distributed import make_batch

    labels = RANK_LABELS[rank]
    batch = make_batch(max(len(labels), 1), 40 + rank)
    batch = {k: v[: len(labels)] for k, v in batch.items()}
    batch["data_source"] = np.asarray(labels, dtype=object)
    return batch


def rank_rewards(rank: int) -> dict:
    """Reward components of rank ``rank``'s samples (NaN: not given)."""
    rng = np.random.default_rng(60 + rank)
    n = len(RANK_LABELS[rank])
    fmt = rng.normal(size=n)
    fmt[::3] = np.nan
    return {"acc": rng.integers(0, 2, size=n).astype(float), "format/strict": fmt}


def rank_policy(rank: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rollout and training log-probabilities ``(old, rollout, mask)`` of rank ``rank``'s samples."""
    rng = np.random.default_rng(80 + rank)
    n = len(RANK_LABELS[rank])
    old = -rng.random((n, 6)) * 3
    mask = (np.arange(6)[None, :] < rng.integers(1, 7, size=(n, 1))).astype(np.int64)
    return old, old + rng.normal(size=(n, 6)) * 0.4, mask


def rank_variance(rank: int) -> dict:
    """The variance proxies' tensors of rank ``rank``'s samples, with their ``data_source``."""
    rng = np.random.default_rng(90 + rank)
    n = len(RANK_LABELS[rank])
    return {
        "sum_pi_squared": rng.random((n, 6)) * 0.9 + 0.05,
        "old_log_probs": -rng.random((n, 6)) * 4,
        "advantages": rng.normal(size=(n, 6)),
        "response_mask": (np.arange(6)[None, :] < rng.integers(1, 7, size=(n, 1))).astype(np.int64),
        "rollout_is_weights": rng.random((n, 6)) * 2.5,
        "data_source": np.asarray(RANK_LABELS[rank], dtype=object),
    }


def rank_outcome(rank: int) -> np.ndarray:
    """Each of rank ``rank``'s samples' ``acc``: rank 0 has only correct ones."""
    n = len(RANK_LABELS[rank])
    return np.ones(n) if rank == 0 else (np.arange(n) % 2).astype(np.float64)


def whole_policy() -> tuple[np.ndarray, ...]:
    parts = [rank_policy(r) for r in range(3)]
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


def whole_batch() -> dict:
    parts = [rank_batch(r) for r in range(3)]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _worker(rank: int, world: int, store: str, out_dir: str) -> None:
    import torch.distributed as dist

    from rlmetrics import (
        compute_data_metrics,
        compute_entropy_metrics,
        compute_reward_component_metrics,
        compute_rollout_mismatch_metrics,
        compute_variance_proxy_metrics,
        data_statistics,
    )

    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=world, timeout=timedelta(seconds=20)
    )
    try:
        warnings.simplefilter("ignore", RuntimeWarning)
        batch = rank_batch(rank)
        res = {
            "metrics": compute_data_metrics(batch, group_by="data_source", process_group=dist.group.WORLD),
            "stats": data_statistics(
                batch, group_by="data_source", split_by_outcome=False, score_threshold=0.0
            )
            .all_reduce(dist.group.WORLD)
            .finalize(),
        }
        res["rewards"] = compute_reward_component_metrics(
            rank_rewards(rank), weights={"acc": 2.0}, process_group=dist.group.WORLD
        )
        labels = np.asarray(RANK_LABELS[rank], dtype=object)
        for name, limit in (("mismatch", 64), ("mismatch_limited", 2)):
            res[name] = compute_rollout_mismatch_metrics(
                *rank_policy(rank),
                group_by=labels,
                group_name="data_source",
                max_categories=limit,
                process_group=dist.group.WORLD,
            )
        old, _, mask = rank_policy(rank)
        res["entropy"] = compute_entropy_metrics(
            -old,
            mask,
            loss_agg_mode="seq-mean-token-mean",
            group_by=labels,
            group_name="data_source",
            outcome=rank_outcome(rank),
            process_group=dist.group.WORLD,
        )
        for name, limit in (("variance", 64), ("variance_limited", 2)):
            res[name] = compute_variance_proxy_metrics(
                rank_variance(rank),
                0.5,
                group_by="data_source",
                max_categories=limit,
                process_group=dist.group.WORLD,
            )
        with warnings.catch_warnings(record=True) as caught:  # every rank over the limit of 2
            warnings.simplefilter("always", RLMetricsWarning)
            res["limited"] = compute_data_metrics(
                batch, group_by="data_source", max_categories=2, process_group=dist.group.WORLD
            )
        res["limited_warnings"] = [str(w.message) for w in caught if issubclass(w.category, RLMetricsWarning)]
        try:  # rank 2 with another limit: every rank raises the same error
            compute_data_metrics(
                batch,
                group_by="data_source",
                max_categories=3 if rank == 2 else 64,
                process_group=dist.group.WORLD,
            )
            res["error"] = None
        except ValueError as err:
            res["error"] = str(err)
        with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as fh:
            pickle.dump(res, fh)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # leave before gloo's teardown (see tests/test_distributed.py)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    torch = pytest.importorskip("torch")
    import torch.multiprocessing as tmp

    here = str(Path(__file__).parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    from test_categories import _worker as worker  # the same function, under an importable name

    out = tmp_path_factory.mktemp("categories_gloo")
    ctx = tmp.spawn(worker, args=(3, str(out / "store"), str(out)), nprocs=3, join=False)
    deadline = time.monotonic() + 120
    while not ctx.join(timeout=1.0):
        if time.monotonic() > deadline:
            for proc in ctx.processes:
                proc.kill()
            pytest.fail("the 3 gloo ranks did not finish within 120 s (hang)")
    assert torch is not None
    results = []
    for r in range(3):
        with open(out / f"rank{r}.pkl", "rb") as fh:
            results.append(pickle.load(fh))
    return results


def _close(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-9, abs=1e-9, nan_ok=True), key


def test_gloo_ranks_with_different_categories_equal_the_whole(ranks):
    from rlmetrics import compute_data_metrics

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        whole = whole_batch()
        want = compute_data_metrics(whole, group_by="data_source")
        want_split = compute_data_metrics(whole, group_by="data_source", score_threshold=0.0)
    cats = {K.split_category_key(k)[2] for k in want if K.split_category_key(k)}
    assert cats == {"math", "code", "a/b", "é x", "logic"}
    for res in ranks:
        _close(res["metrics"], want)
        _close(res["stats"], want_split)


def test_gloo_ranks_over_the_category_limit_fold_the_union_like_the_whole(ranks):
    from rlmetrics import compute_data_metrics

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.warns(RLMetricsWarning, match="more than max_categories=2"):
            want = compute_data_metrics(whole_batch(), group_by="data_source", max_categories=2)
    assert {K.split_category_key(k)[2] for k in want if K.split_category_key(k)} == {"math", K.OTHER_CATEGORY}
    for res in ranks:
        _close(res["limited"], want)
        assert len(res["limited_warnings"]) == 1 and "max_categories=2" in res["limited_warnings"][0]


def test_gloo_ranks_with_different_grouping_options_raise_alike(ranks):
    errors = [res["error"] for res in ranks]
    assert errors[0] is not None and len(set(errors)) == 1
    assert "max_categories" in errors[0]


def test_gloo_reward_components_equal_the_whole(ranks):
    from rlmetrics import compute_reward_component_metrics

    parts = [rank_rewards(r) for r in range(3)]
    whole = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    want = compute_reward_component_metrics(whole, weights={"acc": 2.0})
    for res in ranks:
        _close(res["rewards"], want)


def test_gloo_mismatch_by_category_equals_the_whole(ranks):
    from rlmetrics import compute_rollout_mismatch_metrics

    labels = np.concatenate([np.asarray(RANK_LABELS[r], dtype=object) for r in range(3)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = compute_rollout_mismatch_metrics(*whole_policy(), group_by=labels, group_name="data_source")
        limited = compute_rollout_mismatch_metrics(
            *whole_policy(), group_by=labels, group_name="data_source", max_categories=2
        )
    assert {K.split_category_key(k)[2] for k in want if K.split_category_key(k)} == set(labels)
    assert {K.split_category_key(k)[2] for k in limited if K.split_category_key(k)} == {
        "math",
        K.OTHER_CATEGORY,
    }
    for res in ranks:
        _close(res["mismatch"], want)
        _close(res["mismatch_limited"], limited)


def test_gloo_variance_proxies_by_category_equal_the_whole(ranks):
    from rlmetrics import compute_variance_proxy_metrics

    parts = [rank_variance(r) for r in range(3)]
    whole = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    want = compute_variance_proxy_metrics(whole, 0.5, group_by="data_source")
    with pytest.warns(RLMetricsWarning, match="more than max_categories=2"):
        limited = compute_variance_proxy_metrics(whole, 0.5, group_by="data_source", max_categories=2)
    assert {K.split_category_key(k)[2] for k in want if K.split_category_key(k)} == set(whole["data_source"])
    assert {K.split_category_key(k)[2] for k in limited if K.split_category_key(k)} == {
        "math",
        K.OTHER_CATEGORY,
    }
    for res in ranks:
        _close(res["variance"], want)
        _close(res["variance_limited"], limited)


def test_gloo_entropy_by_category_and_outcome_equals_the_whole(ranks):
    from rlmetrics import compute_entropy_metrics

    old, _, mask = whole_policy()
    labels = np.concatenate([np.asarray(RANK_LABELS[r], dtype=object) for r in range(3)])
    outcome = np.concatenate([rank_outcome(r) for r in range(3)])
    want = compute_entropy_metrics(
        -old,
        mask,
        loss_agg_mode="seq-mean-token-mean",
        group_by=labels,
        group_name="data_source",
        outcome=outcome,
    )
    groups = {K.split_category_key(k)[1:] for k in want if K.split_category_key(k)}
    assert groups == {("data_source", c) for c in labels} | {
        (K.OUTCOME_GROUP, K.OUTCOME_CORRECT),
        (K.OUTCOME_GROUP, K.OUTCOME_INCORRECT),
    }
    for res in ranks:
        _close(res["entropy"], want)

"""Exact aggregation across gloo ranks: rlmetrics._core.comm, Stats.all_reduce, the families'
``process_group=``, and the collectors of rlmetrics.aggregation.

Each world size (2 and 4) is spawned once (module-scoped fixture); every rank runs all the
checks on its uneven shard (world 4 has an empty shard) and pickles its results, which the
tests compare with the single-process computation on the concatenated batch.
"""

from __future__ import annotations

import math
import os
import pickle
import sys
import warnings
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as tmp  # noqa: E402

from rlmetrics import (  # noqa: E402
    Metric,
    MetricCollector,
    Stats,
    all_reduce_metric,
    all_reduce_metrics,
    compute_data_metrics,
    compute_group_metrics,
    compute_ppo_update_metrics,
    compute_rollout_mismatch_metrics,
    compute_variance_proxy_metrics,
    data_statistics,
    ppo_update_statistics,
)
from rlmetrics._core.comm import all_gather_objects, all_reduce_stats  # noqa: E402

SHARDS = {2: [5, 12], 4: [3, 0, 9, 1]}  # uneven, one empty shard with 4 ranks
R, P = 6, 4


def make_batch(n: int, seed: int, *, turns: bool = True) -> dict:
    """A random verl-like batch of ``n`` rows (dict of numpy arrays)."""
    rng = np.random.default_rng(seed)
    resp_len = rng.integers(0, R + 1, size=n)
    resp_len[:1] = R  # at least one clipped response
    prompt_len = rng.integers(1, P + 1, size=n)
    cols = np.arange(R)
    response_mask = (cols[None, :] < resp_len[:, None]).astype(np.int64)
    prompt_mask = (np.arange(P)[None, ::-1] < prompt_len[:, None]).astype(np.int64)
    scores = np.zeros((n, R), dtype=np.float32)
    scores[np.arange(n), np.maximum(resp_len - 1, 0)] = rng.normal(size=n).astype(np.float32)
    batch = {
        "token_level_scores": scores,
        "token_level_rewards": scores - 0.1 * response_mask.astype(np.float32),
        "advantages": rng.normal(size=(n, R)).astype(np.float32),
        "returns": rng.normal(1.0, 2.0, size=(n, R)).astype(np.float32),
        "values": rng.normal(0.8, 2.0, size=(n, R)).astype(np.float32),
        "response_mask": response_mask,
        "attention_mask": np.concatenate([prompt_mask, response_mask], axis=1),
        "prompts": np.zeros((n, P), dtype=np.int64),
        "responses": np.zeros((n, R), dtype=np.int64),
    }
    if turns:
        batch["__num_turns__"] = rng.integers(1, 5, size=n)
    return batch


def policy_arrays(n: int, seed: int) -> dict:
    """Log-probs, advantages, Σπ² and IS weights for the policy-side metrics (numpy, float64)."""
    rng = np.random.default_rng(seed + 100)
    mask = (np.arange(R)[None, :] < rng.integers(1, R + 1, size=n)[:, None]).astype(np.int64)
    old = -rng.exponential(1.0, size=(n, R))
    return {
        "response_mask": mask,
        "old_log_probs": old,
        "log_probs": old + rng.normal(0.0, 0.1, size=(n, R)),
        "rollout_log_probs": old + rng.normal(0.0, 0.05, size=(n, R)),
        "advantages": rng.normal(size=(n, R)),
        "sum_pi_squared": rng.uniform(0.1, 1.0, size=(n, R)),
        "rollout_is_weights": rng.uniform(0.5, 1.5, size=(n, R)),
    }


def policy_metrics(a: dict, process_group=None) -> dict:
    """The three policy-side families, each with process_group= (or on one batch without)."""
    out = compute_variance_proxy_metrics(a, gradient_norm=0.5, process_group=process_group)
    out |= compute_ppo_update_metrics(
        a["log_probs"], a["old_log_probs"], a["advantages"], a["response_mask"], process_group=process_group
    )
    out |= compute_rollout_mismatch_metrics(
        a["old_log_probs"], a["rollout_log_probs"], a["response_mask"], process_group=process_group
    )
    return out


def grpo_arrays(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Group ids spread over the ranks' shards (uid = i % 7) and 0/1 rewards."""
    rng = np.random.default_rng(n)
    uids = np.array([f"q{i % 7}" for i in range(n)])
    return uids, (rng.random(n) < 0.5).astype(np.float64)


def shard(batch: dict, sizes: list[int], rank: int) -> dict:
    start = sum(sizes[:rank])
    return {k: v[start : start + sizes[rank]] for k, v in batch.items()}


def rank_values(rank: int, n: int) -> list[float]:
    """Per-rank micro-batch values (uneven counts)."""
    return [float(rank * 10 + i) + 0.25 for i in range(n)]


def _worker(rank: int, world: int, store_path: str, out_dir: str) -> None:
    dist.init_process_group(
        "gloo", init_method=f"file://{store_path}", rank=rank, world_size=world, timeout=timedelta(seconds=60)
    )
    try:
        sizes = SHARDS[world]
        full = make_batch(sum(sizes), seed=world)
        local = shard(full, sizes, rank)
        res: dict = {}
        # compute_data_metrics(process_group=) on every shard, the empty one included.
        res["data_np"] = compute_data_metrics(local, process_group=dist.group.WORLD)
        tlocal = {k: torch.from_numpy(v) for k, v in local.items() if k != "__num_turns__"}
        res["data_torch"] = compute_data_metrics(tlocal, process_group=dist.group.WORLD)
        # The policy-side metrics with process_group=, empty shard included.
        pol = shard(policy_arrays(sum(sizes), seed=world), sizes, rank)
        res["policy"] = policy_metrics(pol, process_group=dist.group.WORLD)
        # A rank whose mask selects nothing joins the collectives (the check is on the union).
        zero_mask = np.zeros_like(pol["response_mask"]) if rank == 0 else pol["response_mask"]
        res["mismatch_rank0_masked"] = compute_rollout_mismatch_metrics(
            pol["old_log_probs"], pol["rollout_log_probs"], zero_mask, process_group=dist.group.WORLD
        )
        # The accumulation surface: micro-batch statistics merged, then all-reduced once.
        half = sizes[rank] // 2
        micro = [shard(local, [half, sizes[rank] - half], r) for r in (0, 1)]
        stats = Stats.merge(*[data_statistics(m) for m in micro])
        res["data_stats"] = stats.all_reduce(dist.group.WORLD).finalize()
        tstats = data_statistics({k: torch.from_numpy(v) for k, v in local.items()})
        reduced = tstats.all_reduce(dist.group.WORLD)
        res["data_stats_types"] = (type(tstats.sums).__name__, type(reduced.sums).__name__)
        res["data_stats_torch"] = reduced.finalize()
        ppo = [
            ppo_update_statistics(m["log_probs"], m["old_log_probs"], m["advantages"], m["response_mask"])
            for m in (shard(pol, [half, sizes[rank] - half], r) for r in (0, 1))
        ]
        res["ppo_stats"] = Stats.merge(*ppo).all_reduce(dist.group.WORLD).finalize(aggregation="seq-mean")
        res["gathered"] = all_gather_objects({"rank": rank}, dist.group.WORLD)
        # GRPO group metrics: groups split across ranks (uid i % 7), the empty shard included;
        # then a bad reward on the last rank: every rank raises the same error.
        g_uids, g_rewards = grpo_arrays(sum(sizes))
        start = sum(sizes[:rank])
        mine = slice(start, start + sizes[rank])
        res["grpo"] = compute_group_metrics(g_uids[mine], g_rewards[mine], process_group=dist.group.WORLD)
        bad = g_rewards[mine].copy()
        if rank == world - 1 and bad.size:
            bad[0] = np.nan
        try:
            compute_group_metrics(g_uids[mine], bad, process_group=dist.group.WORLD)
            res["grpo_error"] = None
        except ValueError as err:
            res["grpo_error"] = str(err)
        # Generic packed statistics.
        res["stats"] = all_reduce_stats(
            np.array([rank + 1.0, 2.0]), np.array([float(rank)]), np.array([-float(rank), 5.0])
        )
        # Collector: uneven numbers of values, a key only some ranks see, a tensor value.
        c = MetricCollector()
        vals = rank_values(rank, sizes[rank])
        c.update({"actor/pg_loss": vals, "grad/max": torch.tensor(vals) if vals else torch.zeros(0)})
        if rank % 2 == 1:
            c.update({"only_odd/min": [float(-rank)]})
        g = c.all_reduce(dist.group.WORLD)
        res["collector"] = g.compute()
        res["collector_summary"] = g.summary("actor/pg_loss")
        res["collector_local_unchanged"] = c.compute()
        # reduce_metrics across ranks, and Metric.all_reduce.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            res["reduce"] = all_reduce_metrics(
                {"loss": vals, "tokens": Metric("sum", vals), "lr/max": [1e-6 * (rank + 1)]}, dist.group.WORLD
            )
        res["metric_mean"] = Metric("mean", vals).all_reduce(dist.group.WORLD)
        res["metric_max"] = all_reduce_metric(Metric("max", vals), dist.group.WORLD)
        # Ranks disagreeing on a key's aggregation: the same ValueError on every rank.
        try:
            all_reduce_metrics({"x": Metric("sum" if rank == 0 else "max", [1.0])}, dist.group.WORLD)
            res["clash"] = None
        except ValueError as err:
            res["clash"] = str(err)
        with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as fh:
            pickle.dump(res, fh)
    finally:
        dist.destroy_process_group()


def _spawn(world: int, tmp_path: Path) -> list[dict]:
    # The spawned children import this module by name: make the tests directory importable.
    here = str(Path(__file__).parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    from test_distributed import _worker as worker  # the same function, under an importable name

    tmp.spawn(worker, args=(world, str(tmp_path / "store"), str(tmp_path)), nprocs=world, join=True)
    out = []
    for r in range(world):
        with open(tmp_path / f"rank{r}.pkl", "rb") as fh:
            out.append(pickle.load(fh))
    return out


@pytest.fixture(scope="module", params=[2, 4], ids=["world2", "world4-empty-shard"])
def spawned(request, tmp_path_factory):
    world = request.param
    return world, _spawn(world, tmp_path_factory.mktemp(f"world{world}"))


def assert_metrics_close(got: dict, want: dict) -> None:
    """Same keys; values equal to float tolerance.

    The inputs are float32 and rows are reduced in float32 (then float64 across rows); the
    second moments behind ``vf_explained_var`` are centred on a per-shard float32 shift, so
    they agree to float32 precision only.
    """
    assert sorted(got) == sorted(want)
    for key in want:
        rel = 1e-5 if key == "critic/vf_explained_var" else 1e-6
        assert got[key] == pytest.approx(want[key], rel=rel, abs=1e-7, nan_ok=True), key


def test_data_metrics_equal_concatenated_batch(spawned):
    world, results = spawned
    full = make_batch(sum(SHARDS[world]), seed=world)
    want = compute_data_metrics(full)
    want_torch = compute_data_metrics(
        {k: torch.from_numpy(v) for k, v in full.items() if k != "__num_turns__"}
    )
    for res in results:
        assert_metrics_close(res["data_stats"], want)
        assert_metrics_close(res["data_stats_torch"], want)
        local_type, reduced_type = res["data_stats_types"]  # the all-reduce keeps the array type
        assert local_type == reduced_type
        assert_metrics_close(res["data_np"], want)
        assert_metrics_close(res["data_torch"], want_torch)
    # Averaging per-rank metrics (the bug this fixes) would differ for uneven shards.
    per_rank = [compute_data_metrics(shard(full, SHARDS[world], r)) for r in range(world) if SHARDS[world][r]]
    naive = np.mean([m["critic/advantages/mean"] for m in per_rank])
    assert naive != pytest.approx(want["critic/advantages/mean"], rel=1e-6)


def test_policy_metrics_with_process_group_equal_concatenated_batch(spawned):
    world, results = spawned
    want = policy_metrics(policy_arrays(sum(SHARDS[world]), seed=world))
    for res in results:
        got = res["policy"]
        assert sorted(got) == sorted(want)
        for key, value in want.items():
            assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12, nan_ok=True), key


def test_merged_micro_batches_all_reduced_equal_concatenated_batch(spawned):
    """Stats.merge over a rank's micro-batches, then one all_reduce: the whole batch's metrics."""
    world, results = spawned
    a = policy_arrays(sum(SHARDS[world]), seed=world)
    want = compute_ppo_update_metrics(
        a["log_probs"], a["old_log_probs"], a["advantages"], a["response_mask"], aggregation="seq-mean"
    )
    for res in results:
        assert res["ppo_stats"] == pytest.approx(want, rel=1e-9, abs=1e-12)
        assert res["gathered"] == [{"rank": r} for r in range(world)]


def test_group_metrics_with_process_group_equal_concatenated_batch(spawned):
    """Groups split across ranks are merged (not averaged per rank); a bad shard fails everywhere."""
    world, results = spawned
    uids, rewards = grpo_arrays(sum(SHARDS[world]))
    want = compute_group_metrics(uids, rewards)
    last_nonempty = world - 1 if SHARDS[world][-1] else None
    for res in results:
        assert res["grpo"] == pytest.approx(want, rel=1e-12, nan_ok=True)
        if last_nonempty is not None:
            assert res["grpo_error"] is not None
            assert res["grpo_error"].startswith(f"rank {last_nonempty}: rewards must be finite")
        else:
            assert res["grpo_error"] is None


def test_mismatch_with_a_rank_selecting_no_token(spawned):
    """Rank 0's mask is all zero: no error, no hang; the union's metrics."""
    world, results = spawned
    a = policy_arrays(sum(SHARDS[world]), seed=world)
    a["response_mask"][: SHARDS[world][0]] = 0
    want = compute_rollout_mismatch_metrics(a["old_log_probs"], a["rollout_log_probs"], a["response_mask"])
    for res in results:
        got = res["mismatch_rank0_masked"]
        assert sorted(got) == sorted(want)
        for key, value in want.items():
            assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12, nan_ok=True), key


def test_all_reduce_stats_packed(spawned):
    world, results = spawned
    want_sums = np.array([world * (world + 1) / 2, 2.0 * world])
    for res in results:
        sums, maxes, mins = res["stats"]
        assert isinstance(sums, np.ndarray)
        np.testing.assert_array_equal(sums, want_sums)
        np.testing.assert_array_equal(maxes, [world - 1.0])
        np.testing.assert_array_equal(mins, [-(world - 1.0), 5.0])


def test_collector_all_reduce_exact(spawned):
    world, results = spawned
    sizes = SHARDS[world]
    every = np.concatenate([rank_values(r, n) for r, n in enumerate(sizes)])
    odd = [float(-r) for r in range(world) if r % 2 == 1]
    for rank, res in enumerate(results):
        assert res["collector"] == pytest.approx(
            {"actor/pg_loss": every.mean(), "grad/max": every.max(), "only_odd/min": min(odd)}, rel=1e-12
        )
        summary = res["collector_summary"]
        assert summary["count"] == every.size
        assert summary["std"] == pytest.approx(np.std(every, ddof=1), rel=1e-9)
        assert summary["min"] == every.min()
        local = rank_values(rank, sizes[rank])
        if local:  # the rank's own collector is untouched
            assert res["collector_local_unchanged"]["actor/pg_loss"] == pytest.approx(np.mean(local))


def test_all_reduce_metrics_and_metric(spawned):
    world, results = spawned
    sizes = SHARDS[world]
    every = np.concatenate([rank_values(r, n) for r, n in enumerate(sizes)])
    for res in results:
        assert res["reduce"]["loss"] == pytest.approx(every.mean(), rel=1e-12)
        assert res["reduce"]["tokens"] == pytest.approx(every.sum(), rel=1e-12)
        assert res["reduce"]["lr/max"] == pytest.approx(1e-6 * world)
        assert res["metric_mean"] == pytest.approx(every.mean(), rel=1e-12)
        assert res["metric_max"] == every.max()
        assert res["clash"] is not None and "disagree" in res["clash"] and "'x'" in res["clash"]


# --- single-process checks (world of one, in-process HashStore) --------------------------------


@pytest.fixture
def world1():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()


def test_not_initialised_error():
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="not initialised"):
        all_reduce_stats(np.zeros(2))


@pytest.mark.parametrize(
    ("sums", "maxes", "exc", "match"),
    [
        (np.zeros((2, 2)), None, ValueError, r"sums must be a 1-d vector.*\(2, 2\)"),
        (np.array(["a"]), None, TypeError, "sums must hold numbers"),
        (None, None, TypeError, "sums must be a 1-d array"),
        (np.zeros(2), np.zeros((1, 1)), ValueError, "maxes must be a 1-d"),
    ],
    ids=["2d-sums", "str-sums", "none-sums", "2d-maxes"],
)
def test_all_reduce_stats_bad_input(world1, sums, maxes, exc, match):
    with pytest.raises(exc, match=match):
        all_reduce_stats(sums, maxes)


def test_world1_identity_keeps_types(world1):
    tensors = {
        "token_level_scores": torch.ones(2, 3),
        "token_level_rewards": torch.ones(2, 3),
        "advantages": torch.ones(2, 3),
        "returns": torch.ones(2, 3),
        "values": torch.ones(2, 3),
        "response_mask": torch.ones(2, 3, dtype=torch.long),
        "attention_mask": torch.ones(2, 5, dtype=torch.long),
        "prompts": torch.zeros(2, 2, dtype=torch.long),
        "responses": torch.zeros(2, 3, dtype=torch.long),
    }
    empty = data_statistics({k: v[:0] for k, v in tensors.items()})
    reduced = empty.all_reduce(world1)
    assert isinstance(reduced.sums, np.ndarray) and bool(np.isinf(reduced.mins).all())
    stats = data_statistics(tensors)
    assert stats.all_reduce(world1).finalize() == stats.finalize()
    t = torch.tensor([1.0, 2.0], dtype=torch.float32)
    sums, maxes, mins = all_reduce_stats(t, None, t)
    assert isinstance(sums, torch.Tensor) and sums.dtype == torch.float64 and maxes is None
    assert torch.equal(mins, t.double())
    assert all_gather_objects(("a", 1), world1) == [("a", 1)]


def test_stats_all_reduce_needs_an_initialised_process_group():
    stats = ppo_update_statistics(np.zeros((1, 2)), np.zeros((1, 2)), np.ones((1, 2)), np.ones((1, 2)))
    with pytest.raises(RuntimeError, match=r"torch\.distributed is not initialised.*init_process_group"):
        stats.all_reduce()
    with pytest.raises(RuntimeError, match="not initialised"):
        compute_ppo_update_metrics(*[np.ones((1, 2))] * 4, process_group=object())


def test_metric_all_reduce_world1_matches_aggregate(world1):
    for agg in ("mean", "sum", "min", "max"):
        m = Metric(agg, [1.0, 4.0, 2.5])
        assert m.all_reduce(world1) == m.aggregate()
    with pytest.warns(RuntimeWarning, match="no values"):
        assert math.isnan(Metric("mean").all_reduce(world1))

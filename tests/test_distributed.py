"""Exact aggregation across gloo ranks: rlmetrics._core.comm, Stats.all_reduce, the families'
``process_group=``, and the collectors of rlmetrics.aggregation; and the agreement step.

Each world size (2 and 3) is spawned once (module-scoped fixture); every rank runs all the
checks on its uneven shard (world 3 has an empty shard) and pickles its results, which the
tests compare with the single-process computation on the concatenated batch.

World 3 then runs the fault cases (:data:`FAULTS`): in each, one rank's input is bad (or
differs from the others'), and every rank must raise the same error at once -- well within the
group's 20-second timeout, which bounds a hang -- or return the same result. A watchdog in the
parent kills the ranks if the whole run overruns.
"""

from __future__ import annotations

import faulthandler
import math
import os
import pickle
import re
import sys
import time
import warnings
from collections.abc import Callable
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
from rlmetrics._core.comm import agree, all_gather_objects, all_reduce_stats  # noqa: E402

SHARDS = {2: [5, 12], 3: [5, 0, 12]}  # uneven, one empty shard (rank 1) with 3 ranks
#: The process-group timeout: a collective that some rank never joins fails after this long.
GROUP_TIMEOUT_S = 20
#: Every fault case must end (raise or return) on every rank well within the group timeout.
FAULT_CASE_MAX_S = 5.0
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
    """One rank: every check, its results pickled to ``out_dir``; then a clean exit."""
    faulthandler.enable()  # a crash in a rank prints every thread's stack to the test's stderr
    dist.init_process_group(
        "gloo",
        init_method=f"file://{store_path}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=GROUP_TIMEOUT_S),
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
        if world == 3:
            res["faults"] = {name: _run_fault(case.run, rank) for name, case in FAULTS.items()}
            # The group is still in step after every case: a last reduction is exact.
            res["after_faults"] = all_reduce_stats(np.array([1.0]))[0].tolist()
        with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as fh:
            pickle.dump(res, fh)
        dist.barrier()  # no rank closes its connections while another is still using them
    finally:
        dist.destroy_process_group()
    # The results are on disk: leave without the interpreter's finalisation, in which gloo's
    # threads and sockets can still be tearing down and abort the process (SIGABRT, "terminate
    # called without an active exception": about 1 run in 100 on a loaded 2-core machine).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _spawn(world: int, tmp_path: Path, deadline_s: float = 150.0) -> list[dict]:
    # The spawned children import this module by name: make the tests directory importable.
    here = str(Path(__file__).parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    from test_distributed import _worker as worker  # the same function, under an importable name

    ctx = tmp.spawn(worker, args=(world, str(tmp_path / "store"), str(tmp_path)), nprocs=world, join=False)
    deadline = time.monotonic() + deadline_s
    while not ctx.join(timeout=1.0):
        if time.monotonic() > deadline:  # a hang that the group timeout did not end
            for proc in ctx.processes:
                proc.kill()
            pytest.fail(f"the {world} ranks did not finish within {deadline_s:.0f} s (hang)")
    out = []
    for r in range(world):
        with open(tmp_path / f"rank{r}.pkl", "rb") as fh:
            out.append(pickle.load(fh))
    return out


_RESULTS: dict[int, list[dict]] = {}


def _results(world: int, tmp_path_factory) -> list[dict]:
    """Every rank's results for ``world``, spawned once per test session (the fault cases too)."""
    if world not in _RESULTS:
        _RESULTS[world] = _spawn(world, tmp_path_factory.mktemp(f"world{world}"))
    return _RESULTS[world]


@pytest.fixture(scope="module", params=[2, 3], ids=["world2", "world3-empty-shard"])
def spawned(request, tmp_path_factory):
    world = request.param
    return world, _results(world, tmp_path_factory)


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


# --- the agreement step: one bad rank, every rank raises the same error at once -----------------


class Fault:
    """A fault case: ``run(rank)`` on every rank of world 3, and what every rank must see.

    ``error`` is ``(exception type name, regex the message must match)``, or ``None`` when every
    rank must return the same value (``want``, if given, computes it from the whole batch).
    """

    def __init__(
        self,
        run: Callable[[int], object],
        error: tuple[str, str] | None,
        want: Callable[[], dict] | None = None,
    ) -> None:
        self.run, self.error, self.want = run, error, want


WORLD = 3
BAD = 2  # the bad rank of most cases (rank 1 holds the empty shard)


def _data_shard(rank: int, *, turns: bool = True) -> dict:
    return shard(make_batch(sum(SHARDS[WORLD]), seed=WORLD, turns=turns), SHARDS[WORLD], rank)


def _policy_shard(rank: int) -> dict:
    return shard(policy_arrays(sum(SHARDS[WORLD]), seed=WORLD), SHARDS[WORLD], rank)


def _data(rank: int, batch: dict | None = None, **options) -> dict:
    b = _data_shard(rank) if batch is None else batch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return compute_data_metrics(b, process_group=dist.group.WORLD, **options)


def _as_torch(batch: dict) -> dict:
    return {k: torch.from_numpy(v) for k, v in batch.items() if k != "__num_turns__"}


def _on_device_path(run: Callable[[], object]) -> object:
    """``run()`` with CPU tensors taking the path of CUDA tensors (masks checked after the reduction)."""
    from rlmetrics._core import array as _array

    _array._CPU_TENSORS_AS_NUMPY = False
    try:
        return run()
    finally:
        _array._CPU_TENSORS_AS_NUMPY = True


def _without(batch: dict, key: str) -> dict:
    return {k: v for k, v in batch.items() if k != key}


def _bad_mask(batch: dict, key: str = "response_mask") -> dict:
    out = dict(batch)
    out[key] = batch[key].copy()
    out[key][0, 0] = 2
    return out


def _ppo(rank: int, pol: dict, **options) -> dict:
    return compute_ppo_update_metrics(
        pol["log_probs"],
        pol["old_log_probs"],
        pol["advantages"],
        pol["response_mask"],
        process_group=dist.group.WORLD,
        **options,
    )


def _mismatch(rank: int, pol: dict, **options) -> dict:
    return compute_rollout_mismatch_metrics(
        pol["old_log_probs"],
        pol["rollout_log_probs"],
        pol["response_mask"],
        process_group=dist.group.WORLD,
        **options,
    )


def _metrics(rank: int, metrics: object) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return all_reduce_metrics(metrics, dist.group.WORLD)  # type: ignore[arg-type]


def _rank_values(rank: int) -> list[float]:
    return rank_values(rank, SHARDS[WORLD][rank])


def _whole_data(turns: bool) -> dict:
    return compute_data_metrics(make_batch(sum(SHARDS[WORLD]), seed=WORLD, turns=turns))


def _grpo(rank: int) -> tuple[np.ndarray, np.ndarray]:
    """This rank's slice of the GRPO (uid, reward) arrays (rank 1's slice is empty)."""
    uids, rewards = grpo_arrays(sum(SHARDS[WORLD]))
    start = sum(SHARDS[WORLD][:rank])
    return uids[start : start + SHARDS[WORLD][rank]], rewards[start : start + SHARDS[WORLD][rank]]


FAULTS: dict[str, Fault] = {
    "groups-bad-option-on-one-rank": Fault(
        lambda r: compute_group_metrics(
            *_grpo(r), solved_threshold=math.nan if r == BAD else 1.0, process_group=dist.group.WORLD
        ),
        ("ValueError", r"^rank 2: solved_threshold must be finite; got nan$"),
    ),
    "groups-definition-differs": Fault(
        lambda r: compute_group_metrics(
            *_grpo(r), definition="trl" if r == 1 else "verl", process_group=dist.group.WORLD
        ),
        ("ValueError", r"definition: ranks 0, 2: 'verl'; rank 1: 'trl'"),
    ),
    "data-values-missing-with-use_critic": Fault(
        lambda r: _data(r, _without(_data_shard(r), "values") if r == BAD else None),
        ("ValueError", r"^rank 2: batch is missing the tensor 'values' \(use_critic=True\)"),
    ),
    "data-use_critic-differs": Fault(
        lambda r: _data(r, use_critic=r != 1),
        (
            "ValueError",
            r"disagree on the options of compute_data_metrics: use_critic: ranks 0, 2: True; rank 1: False$",
        ),
    ),
    "data-invalid-numpy-mask": Fault(
        lambda r: _data(r, _bad_mask(_data_shard(r)) if r == BAD else None),
        ("ValueError", r"^rank 2: batch\['response_mask'\] must hold only 0 and 1; found 2"),
    ),
    "data-invalid-attention-mask": Fault(
        lambda r: _data(r, _bad_mask(_data_shard(r), "attention_mask") if r == 0 else None),
        ("ValueError", r"^rank 0: batch\['attention_mask'\] must hold only 0 and 1"),
    ),
    "data-invalid-torch-mask-checked-after-the-reduction": Fault(
        lambda r: _on_device_path(
            lambda: _data(r, _as_torch(_bad_mask(_data_shard(r)) if r == BAD else _data_shard(r)))
        ),
        (
            "ValueError",
            r"^batch\['response_mask'\] must hold only 0 and 1; found 1 other entries .*another rank",
        ),
    ),
    "data-num_turns-on-one-rank-only": Fault(
        lambda r: _data(r, _data_shard(r, turns=r == 0)),
        (
            "ValueError",
            r"optional non-tensor keys: rank 0: \('__num_turns__',\); rank 1: '<any>'; rank 2: \(\)",
        ),
    ),
    "data-num_turns-missing-on-the-empty-shard-only": Fault(
        lambda r: _data(r, _data_shard(r, turns=r != 1)),
        None,
        lambda: _whole_data(turns=True),
    ),
    "data-num_turns-wrong-length": Fault(
        lambda r: _data(r, {**_data_shard(r), "__num_turns__": np.arange(3)} if r == BAD else None),
        ("ValueError", r"^rank 2: .*'__num_turns__'\] must hold one entry per sample \(12\); got 3"),
    ),
    "data-max_response_length-differs": Fault(
        lambda r: _data(r, max_response_length=4 if r == BAD else 6),
        ("ValueError", r"max_response_length: ranks 0, 1: 6; rank 2: 4"),
    ),
    "data-max_response_length-invalid": Fault(
        lambda r: _data(r, max_response_length=0 if r == BAD else 6),
        ("ValueError", r"^rank 2: max_response_length must be an integer >= 1; got 0"),
    ),
    "data-two-bad-ranks": Fault(
        lambda r: _data(r, _without(_data_shard(r), "returns") if r != 1 else None),
        ("ValueError", r"^rank 0: batch is missing the tensor 'returns'.*; rank 2: batch is missing"),
    ),
    "data-not-a-batch": Fault(
        lambda r: _data(r, [1, 2, 3] if r == 1 else None),  # type: ignore[arg-type]
        ("TypeError", r"^rank 1: batch must be a verl DataProto"),
    ),
    "stats-all_reduce-options-differ": Fault(
        lambda r: data_statistics(_data_shard(r), use_critic=r != BAD).all_reduce(dist.group.WORLD),
        ("ValueError", r"disagree on the 'data' statistics: use_critic: ranks 0, 1: True; rank 2: False"),
    ),
    "variance-sum_pi_squared-missing": Fault(
        lambda r: compute_variance_proxy_metrics(
            _without(_policy_shard(r), "sum_pi_squared") if r == BAD else _policy_shard(r),
            process_group=dist.group.WORLD,
        ),
        (
            "ValueError",
            r"^rank 2: batch is missing 'sum_pi_squared', needed by the variance proxies; the other ranks",
        ),
    ),
    "variance-missing-on-every-rank": Fault(
        lambda r: compute_variance_proxy_metrics(
            _without(_policy_shard(r), "sum_pi_squared"), process_group=dist.group.WORLD
        ),
        None,
        lambda: {},
    ),
    "variance-bad-gradient-norm": Fault(
        lambda r: compute_variance_proxy_metrics(
            _policy_shard(r), "big" if r == 0 else 0.5, process_group=dist.group.WORLD
        ),
        ("TypeError", r"^rank 0: gradient_norm must be a real number or None"),
    ),
    "ppo-invalid-mask": Fault(
        lambda r: _ppo(r, _bad_mask(_policy_shard(r)) if r == BAD else _policy_shard(r)),
        ("ValueError", r"^rank 2: response_mask must hold only 0 and 1"),
    ),
    "ppo-clip-ratio-differs": Fault(
        lambda r: _ppo(r, _policy_shard(r), clip_ratio=0.3 if r == BAD else 0.2),
        ("ValueError", r"clip_ratio_low: ranks 0, 1: 0.2; rank 2: 0.3 \| clip_ratio_high"),
    ),
    "ppo-complex-log-probs": Fault(
        lambda r: _ppo(
            r,
            {**_policy_shard(r), "log_probs": _policy_shard(r)["log_probs"].astype(complex)}
            if r == 0
            else _policy_shard(r),
        ),
        ("TypeError", r"^rank 0: log_probs must hold real numbers"),
    ),
    "mismatch-shape": Fault(
        lambda r: _mismatch(
            r,
            {**_policy_shard(r), "rollout_log_probs": _policy_shard(r)["rollout_log_probs"][:, :2]}
            if r == BAD
            else _policy_shard(r),
        ),
        ("ValueError", r"^rank 2: rollout_log_probs and old_log_probs must have the same shape"),
    ),
    "mismatch-rollout_is-differs": Fault(
        lambda r: _mismatch(r, _policy_shard(r), rollout_is="sequence" if r == 1 else "token"),
        ("ValueError", r"rollout_is: ranks 0, 2: 'token'; rank 1: 'sequence'"),
    ),
    "all_reduce_metrics-nan": Fault(
        lambda r: _metrics(r, {"loss": [*_rank_values(r), math.nan] if r == BAD else _rank_values(r)}),
        ("ValueError", r"^rank 2: metrics\['loss'\] holds 1 NaN or infinite value"),
    ),
    "all_reduce_metrics-not-a-mapping": Fault(
        lambda r: _metrics(r, [1.0] if r == 1 else {"loss": _rank_values(r)}),
        ("TypeError", r"^rank 1: metrics must be a mapping"),
    ),
    "all_reduce_metrics-key-on-one-rank-only": Fault(
        lambda r: _metrics(r, {"loss": _rank_values(r), **({"extra/max": [7.0]} if r == BAD else {})}),
        None,
        lambda: {
            "extra/max": 7.0,
            "loss": float(np.mean(np.concatenate([_rank_values(r) for r in range(WORLD)]))),
        },
    ),
    "metric-aggregation-differs": Fault(
        lambda r: Metric("max" if r == 1 else "mean", _rank_values(r)).all_reduce(dist.group.WORLD),
        ("ValueError", r"aggregation: ranks 0, 2: 'mean'; rank 1: 'max'"),
    ),
    "metric-not-a-metric": Fault(
        lambda r: all_reduce_metric([1.0] if r == BAD else Metric("mean", [1.0]), dist.group.WORLD),  # type: ignore[arg-type]
        ("TypeError", r"^rank 2: metric must be a Metric"),
    ),
    "collector-keys-differ": Fault(
        lambda r: MetricCollector().all_reduce(dist.group.WORLD, keys=["a", "b"] if r == BAD else ["a"]),
        ("ValueError", r"keys= must be the same on every rank; rank 2 has \['b'\] more than rank 0$"),
    ),
    "all_reduce_stats-lengths-differ": Fault(
        lambda r: all_reduce_stats(np.zeros(3 if r == BAD else 2), np.zeros(1)),
        ("ValueError", r"disagree on the lengths of the statistics: sums: ranks 0, 1: 2; rank 2: 3$"),
    ),
    "all_reduce_stats-not-numbers": Fault(
        lambda r: all_reduce_stats(np.array(["a", "b"]) if r == 1 else np.zeros(2)),
        ("TypeError", r"^rank 1: sums must hold numbers; got an array of dtype <U1$"),
    ),
    "agree-other-exception": Fault(
        lambda r: agree({"x": 1}, KeyError("k") if r == BAD else None, process_group=dist.group.WORLD),
        ("RuntimeError", r"^rank 2: KeyError: 'k'$"),
    ),
}


def _run_fault(run: Callable[[int], object], rank: int) -> tuple[str, object, float]:
    """(outcome, value or message, seconds): ``"ok"`` and the result, or the exception's type and text."""
    start = time.perf_counter()
    try:
        out: tuple[str, object] = ("ok", run(rank))
    except Exception as err:
        out = (type(err).__name__, str(err))
    return (*out, time.perf_counter() - start)


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    """The fault cases' outcomes per rank (from the world-3 spawn, which runs them)."""
    return _results(WORLD, tmp_path_factory)


@pytest.mark.parametrize("name", list(FAULTS), ids=list(FAULTS))
def test_one_bad_rank_makes_every_rank_raise_the_same_error_at_once(faults, name):
    case = FAULTS[name]
    outcomes = [res["faults"][name] for res in faults]
    for rank, (_, _, seconds) in enumerate(outcomes):
        assert seconds < FAULT_CASE_MAX_S, f"rank {rank} took {seconds:.1f} s (waited for a collective)"
    kinds = {kind for kind, _, _ in outcomes}
    if case.error is None:
        assert kinds == {"ok"}, outcomes
        values = [value for _, value, _ in outcomes]
        assert all(v == values[0] for v in values[1:]), values
        if case.want is not None:
            want = case.want()
            assert sorted(values[0]) == sorted(want)
            assert values[0] == pytest.approx(want, rel=1e-6, nan_ok=True)
        return
    kind, pattern = case.error
    messages = {message for _, message, _ in outcomes}
    assert kinds == {kind}, outcomes
    assert len(messages) == 1, messages  # the same message on every rank
    assert re.search(pattern, messages.pop()), outcomes[0][1]


def test_the_group_stays_in_step_after_the_fault_cases(faults):
    assert [res["after_faults"] for res in faults] == [[float(WORLD)]] * WORLD

"""Cost of the agreement step that every distributed entry point makes before its reduction.

Run by hand: ``python bench/bench_agree.py [--repeats 200] [--world 2]``.

Over a gloo world of CPU processes (default 2), the median wall time per call of

1. ``agree()`` alone: one ``all_gather`` of two int64 per rank (error flag, signature digest);
2. ``compute_data_metrics(batch, process_group=)`` (a 64 x 512 batch) with the agreement, against
   the same statistics all-reduced without it (``data_statistics`` + the two packed
   all-reduces, what the call did before);
3. ``Stats.all_reduce`` with and without the agreement (statistics already made);
4. ``all_reduce_metrics`` of K keys (every rank the same keys) against what it did before: an
   ``all_gather_object`` of the key lists, then the two packed all-reduces;
5. the slow path, when the ranks' signatures differ: ``agree(..., on_mismatch="gather")``
   (the tiny all-gather plus an object all-gather of the signatures).

Every rank times the same calls in lockstep (a barrier before each series); rank 0 reports.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta

import numpy as np


def _medians_ms(fns: list[Callable[[], object]], repeats: int) -> list[float]:
    """Median ms per call of each of ``fns``, run interleaved (a, b, a, b ...): a change of load
    on a shared machine then affects every series alike."""
    import torch.distributed as dist

    for fn in fns:  # warm-up
        for _ in range(5):
            fn()
    dist.barrier()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, spent in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - t0)
    return [float(np.median(t)) * 1e3 for t in times]


def _worker(rank: int, world: int, store: str, keys: int, repeats: int, out: str) -> None:
    import torch.distributed as dist

    from rlmetrics import MetricCollector, all_reduce_metrics, compute_data_metrics, data_statistics
    from rlmetrics._core.comm import agree, all_gather_objects

    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=world, timeout=timedelta(seconds=120)
    )
    rng = np.random.default_rng(rank)
    b, p, r = 64, 128, 512
    resp = (np.arange(r)[None, :] < rng.integers(1, r + 1, size=b)[:, None]).astype(np.int64)
    batch = {
        "token_level_scores": rng.normal(size=(b, r)).astype(np.float32),
        "token_level_rewards": rng.normal(size=(b, r)).astype(np.float32),
        "advantages": rng.normal(size=(b, r)).astype(np.float32),
        "returns": rng.normal(size=(b, r)).astype(np.float32),
        "values": rng.normal(size=(b, r)).astype(np.float32),
        "response_mask": resp,
        "attention_mask": np.concatenate([np.ones((b, p), np.int64), resp], axis=1),
        "prompts": np.zeros((b, p), np.int64),
        "responses": np.zeros((b, r), np.int64),
    }
    stats = data_statistics(batch)
    metrics = {f"actor/metric_{i}": rng.normal(size=4) for i in range(keys)}
    signature = {"kind": "data", "layout": (stats.sum_names, stats.max_names, stats.min_names)}

    def old_all_reduce_metrics() -> None:
        c = MetricCollector()
        c.update(metrics)
        all_gather_objects(sorted((k, c.aggregation(k).value) for k in c.keys()))
        c._reduced(c.keys(), None)

    group = dist.group.WORLD
    series = [
        ("agree() alone (1 all_gather of 2 int64)", lambda: agree(signature)),
        (
            "compute_data_metrics(process_group=), with agreement",
            lambda: compute_data_metrics(batch, process_group=group),
        ),
        (
            "  the same without it (data_statistics + 2 all-reduces)",
            lambda: data_statistics(batch)._reduced(group).finalize(),
        ),
        ("Stats.all_reduce, with agreement", lambda: stats.all_reduce(group)),
        ("  without it (2 all-reduces)", lambda: stats._reduced(group)),
        (f"all_reduce_metrics, {keys} keys, agreement", lambda: all_reduce_metrics(metrics, group)),
        ("  before: all_gather_object of keys + 2 all-reduces", old_all_reduce_metrics),
        (
            "signatures differ: agree(on_mismatch='gather')",
            lambda: agree({"rank": rank}, on_mismatch="gather"),
        ),
    ]
    medians = _medians_ms([fn for _, fn in series], repeats)
    rows = [(name, ms) for (name, _), ms in zip(series, medians)]
    if rank == 0:
        with open(out, "w") as fh:
            for name, ms in rows:
                fh.write(f"{name}\t{ms:.4f}\n")
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--keys", type=int, default=80)
    args = parser.parse_args()
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "rows.tsv")
        mp.spawn(
            _worker,
            args=(args.world, os.path.join(d, "store"), args.keys, args.repeats, out),
            nprocs=args.world,
            join=True,
        )
        rows = [line.split("\t") for line in open(out).read().splitlines()]
    print(f"Agreement step, gloo, world {args.world} (median of {args.repeats} calls)")
    print(f"{'call':<58} {'ms/call':>9}")
    for name, ms in rows:
        print(f"{name:<58} {float(ms):>9.3f}")


if __name__ == "__main__":
    main()

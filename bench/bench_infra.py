"""Benchmark of the infrastructure: packed all-reduce of many metrics, the jsonl tracker's per-step
cost, and the time of ``import rlmetrics``.

Run by hand: ``python bench/bench_infra.py [--keys 80] [--repeats 50] [--base /path/to/old/src]``
(``--only-monitor [--monitor-keys 100] [--steps 2000]`` for the health-monitor section alone,
``--only-tracker`` for the ``Tracker.log`` one).

1. Exact cross-rank reduction of K metric keys over a gloo world of 2 CPU processes:
   ours (``MetricCollector.all_reduce``: two packed all-reduces, with and without the key
   exchange) against one ``all_reduce`` per statistic (what per-metric code does: a SUM for
   the sum and count, a MAX, a MIN -> 4 calls per key).
2. ``Tracker(backends="jsonl").log`` against verl 0.9.1's ``Tracking(default_backend="file")``
   for a step of K float metrics (both write one JSON line per step, one unbuffered ``write``, no
   flush, no fsync: the same durability), in interleaved rounds, and a floor: our common step's
   checks inlined in one function (:class:`_FloorLogger`).
3. The live health monitor: ``Tracker(backends="jsonl").log`` of K metrics (the keys the health
   rules read, with healthy noise, and filler keys) over N steps in a tight loop, without a
   monitor, with ``HealthMonitor(every=10)`` (its time budget spaces the diagnoses) and with
   ``budget=None`` (a diagnosis every 10 steps whatever it costs); the diagnoses run, the
   milliseconds each, and the cost of keeping the steps.
4. ``import rlmetrics`` in a fresh interpreter: the package's cumulative time from
   ``python -X importtime`` (median of N runs), the heavy optional modules it loaded, and the
   same for another checkout given by ``--base`` (its ``src`` folder) for comparison.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from operator import countOf
from pathlib import Path
from typing import Any

import numpy as np


def _reduce_worker(rank: int, world: int, store: str, keys: int, repeats: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    from rlmetrics import MetricCollector

    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=world, timeout=timedelta(seconds=120)
    )
    rng = np.random.default_rng(rank)
    metrics = {f"actor/metric_{i}": rng.normal(size=4 + rank) for i in range(keys)}
    c = MetricCollector()
    c.update(metrics)
    names = c.keys()

    def ours_gather() -> None:
        c.all_reduce()

    def ours_keys() -> None:
        c.all_reduce(keys=names)

    def per_metric() -> None:
        for k in names:
            v = metrics[k]
            s = torch.tensor([v.size, v.sum()], dtype=torch.float64)
            hi = torch.tensor(v.max(), dtype=torch.float64)
            lo = torch.tensor(v.min(), dtype=torch.float64)
            sq = torch.tensor((v * v).sum(), dtype=torch.float64)
            dist.all_reduce(s)
            dist.all_reduce(sq)
            dist.all_reduce(hi, op=dist.ReduceOp.MAX)
            dist.all_reduce(lo, op=dist.ReduceOp.MIN)

    rows = []
    for name, fn, calls in (
        ("ours: agreement + 2 packed all-reduces", ours_gather, "1 gather + 2"),
        ("ours: 2 packed all-reduces, keys=", ours_keys, "2"),
        ("per-metric all_reduce (peer pattern)", per_metric, str(4 * keys)),
    ):
        fn()  # warm-up
        dist.barrier()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        rows.append((name, calls, float(np.median(times)) * 1e3))
    if rank == 0:
        with open(out, "w") as fh:
            for name, calls, ms in rows:
                fh.write(f"{name}\t{calls}\t{ms:.3f}\n")
    dist.destroy_process_group()


def bench_reduce(keys: int, repeats: int) -> None:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "rows.tsv")
        mp.spawn(_reduce_worker, args=(2, os.path.join(d, "store"), keys, repeats, out), nprocs=2, join=True)
        rows = [line.split("\t") for line in open(out).read().splitlines()]
    print(f"\nExact reduction of {keys} metric keys, gloo, world 2 (median of {repeats})")
    print(f"{'method':<44} {'collectives':>12} {'ms/call':>9}")
    for name, calls, ms in rows:
        print(f"{name:<44} {calls:>12} {float(ms):>9.3f}")


class _FloorLogger:
    """Every per-step check of ``Tracker.log``'s common step inlined in one function, nothing else:
    the keys equal to the last checked ones (one list compare), every value an exact ``float``,
    every value finite (a finite sum), and the line with ``step`` and ``timestamp`` in one
    unbuffered ``write``. The floor a tracker that keeps these checks can reach in Python."""

    def __init__(self, path: str) -> None:
        import orjson

        self._fh = open(path, "ab", buffering=0)  # closed in finish()
        self._dumps, self._newline = orjson.dumps, orjson.OPT_APPEND_NEWLINE
        self._keys: list[str] | None = None

    def log(self, metrics: dict[str, float], step: int) -> None:
        keys, values = list(metrics), metrics.values()
        if keys != self._keys:
            self._keys = keys  # (the key checks themselves: once per key set)
        if countOf(map(type, values), float) != len(keys) or not math.isfinite(sum(values)):
            raise ValueError("the floor logger takes finite floats only")
        start = self._dumps({"step": step, "timestamp": time.time()})
        self._fh.write(start[:-1] + b"," + self._dumps(metrics, option=self._newline)[1:])

    def finish(self) -> None:
        self._fh.close()


class _LeanestFloorLogger(_FloorLogger):
    """The cheapest arrangement of the same checks found: the exact-float and finiteness checks
    fused in one pass (``float.conjugate`` refuses every value that is not a float or a float
    subclass; ``orjson`` refuses float subclasses; a finite sum of the values proves them
    finite), and ``os.write`` on the descriptor. Not a design (the two halves of the type check
    would sit in two layers of the tracker): the lowest figure a logger keeping the checks reached."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._fd = self._fh.fileno()

    def log(self, metrics: dict[str, float], step: int) -> None:
        keys = list(metrics)
        if keys != self._keys:
            self._keys = keys
        if not math.isfinite(sum(map(float.conjugate, metrics.values()))):
            raise ValueError("the floor logger takes finite floats only")
        start = self._dumps({"step": step, "timestamp": time.time()})
        os.write(self._fd, start[:-1] + b"," + self._dumps(metrics, option=self._newline)[1:])


def bench_tracker(keys: int, steps: int, rounds: int = 40) -> None:
    """The loggers open side by side; ``rounds`` interleaved rounds of ``steps / rounds`` steps
    each (the fastest of 3 tries), timed in this process's CPU time (user and system: the write
    included; another process's load shows less than in wall time). Reported: the fastest round
    of each, and the median and quartiles of the per-round ratio to verl."""
    from rlmetrics import Tracker

    rng = np.random.default_rng(0)
    metrics = {f"actor/metric_{i}": float(x) for i, x in enumerate(rng.normal(size=keys))}
    per_round = max(1, steps // rounds)
    with tempfile.TemporaryDirectory() as d:
        loggers: dict[str, Any] = {}
        with Tracker("bench", "ours", log_dir=d) as tr:
            loggers["rlmetrics Tracker(jsonl)"] = tr
            try:
                from verl.utils.tracking import Tracking

                os.environ["VERL_FILE_LOGGER_ROOT"] = d
                loggers["verl Tracking(file)"] = Tracking("bench", "verl", default_backend="file")
            except ImportError as err:
                print(f"verl Tracking(file): unavailable ({err})")
            loggers["floor: our checks inlined"] = _FloorLogger(os.path.join(d, "floor.jsonl"))
            loggers["floor, leanest: checks fused, os.write"] = _LeanestFloorLogger(
                os.path.join(d, "lean.jsonl")
            )
            times: dict[str, list[float]] = {name: [] for name in loggers}
            step = 0
            for _ in range(rounds):
                for name, logger in loggers.items():
                    best = math.inf
                    for _try in range(3):
                        t0 = time.process_time()
                        for i in range(step, step + per_round):
                            logger.log(metrics, step=i)
                        best = min(best, time.process_time() - t0)
                    times[name].append(best / per_round)
                step += per_round
            for name, logger in loggers.items():
                if name != "rlmetrics Tracker(jsonl)":
                    logger.finish()
    title = f"{rounds} rounds of {per_round} steps, interleaved, CPU time"
    print(f"\nTracker.log of {keys} float metrics: {title}")
    print(f"{'method':<44} {'fastest us':>10} {'ratio to verl: median (quartiles)':>34}")
    base = times.get("verl Tracking(file)")
    for name, secs in times.items():
        if base is None:
            print(f"{name:<44} {min(secs) * 1e6:>10.1f}")
            continue
        ratios = [a / b for a, b in zip(secs, base, strict=True)]
        low, mid, high = statistics.quantiles(ratios, n=4)
        print(f"{name:<44} {min(secs) * 1e6:>10.1f} {mid:>18.2f} ({low:.2f}-{high:.2f})")


def _healthy_steps(keys: int, steps: int) -> list[dict[str, float]]:
    """Steps of a healthy run: the keys the health rules read (noisy, no trend) and filler keys."""
    from rlmetrics import keys as K

    rng = np.random.default_rng(1)
    levels = {
        K.SCORE_MEAN: 0.5,
        K.ACTOR_PG_LOSS: 0.0,
        K.ADV_MEAN: 0.0,
        K.ACTOR_GRAD_NORM: 1.0,
        K.ACTOR_ENTROPY: 0.6,
        K.ACTOR_KL_LOSS: 0.01,
        K.PPO_KL: 0.001,
        K.PG_CLIPFRAC: 0.02,
        K.GRPO_FRAC_REWARD_ZERO_STD: 0.2,
        K.RESPONSE_LENGTH_MEAN: 300.0,
        K.RESPONSE_LENGTH_CLIP_RATIO: 0.01,
        K.PERF_THROUGHPUT: 2000.0,
        K.VF_EXPLAINED_VAR: 0.5,
        K.ROLLOUT_CORR_IS_MEAN: 1.0,
        K.ROLLOUT_CORR_IS_STD: 0.1,
        K.ROLLOUT_CORR_IS_EFF_SAMPLE_SIZE: 0.9,
        K.ROLLOUT_CORR_KL: 0.001,
        K.ROLLOUT_CORR_CHI2_TOKEN: 0.01,
    }
    names = list(levels) + [f"actor/filler_{i}" for i in range(max(0, keys - len(levels)))]
    base = np.array([levels.get(n, 1.0) for n in names])
    noise = rng.normal(0.0, 0.05, size=(steps, len(names))) * np.maximum(np.abs(base), 0.01)
    return [dict(zip(names, (base + row).tolist())) for row in noise]


def bench_monitor(keys: int, steps: int, repeats: int = 3) -> None:
    from rlmetrics import Tracker
    from rlmetrics.health import monitor as monitor_module
    from rlmetrics.health.monitor import HealthMonitor

    rows = _healthy_steps(keys, steps)
    budgets = {"plain": None, "monitor": 0.02, "monitor, budget=None": None}
    best = dict.fromkeys(budgets, math.inf)
    diag = dict.fromkeys(budgets, (math.inf, 0.0, 0))
    diagnose = monitor_module._diagnose
    for _ in range(repeats):  # interleaved, the fastest of each
        for label, budget in budgets.items():
            spent = [0.0, 0]

            def timed(history: Any, *, spent: list[float] = spent, **options: Any) -> Any:
                t = time.perf_counter()
                try:
                    return diagnose(history, **options)
                finally:
                    spent[0] += time.perf_counter() - t
                    spent[1] += 1

            monitor_module._diagnose = timed
            mon = None if label == "plain" else HealthMonitor(every=10, budget=budget)
            with tempfile.TemporaryDirectory() as d, Tracker("bench", "run", log_dir=d, monitor=mon) as tr:
                t0 = time.perf_counter()
                for step, metrics in enumerate(rows):
                    tr.log(metrics, step=step)
                elapsed = (time.perf_counter() - t0) / steps
            monitor_module._diagnose = diagnose
            if elapsed < best[label]:
                best[label], diag[label] = elapsed, (elapsed, spent[0] / steps, int(spent[1]))
            if mon is not None and mon.reported:
                print(f"  (the healthy run reported {[f.kind for f in mon.reported]})")
    plain = best["plain"]
    print(f"\nTracker.log with a health monitor: {keys} float metrics a step, {steps} steps, every=10")
    print(f"{'method':<44} {'us/step':>9} {'extra':>7} {'diagnoses':>10} {'ms each':>8}")
    for label in budgets:
        elapsed, in_diag, n_diag = diag[label]
        extra = f"{100 * (elapsed - plain) / plain:.0f}%" if label != "plain" else ""
        each = f"{in_diag * steps / n_diag * 1e3:.2f}" if n_diag else ""
        name = (
            "Tracker(jsonl)"
            if label == "plain"
            else f"Tracker(jsonl, HealthMonitor({label[9:] or 'budget=0.02'}))"
        )
        print(f"{name:<44} {elapsed * 1e6:>9.1f} {extra:>7} {n_diag or '':>10} {each:>8}")
        if label != "plain":
            keep = (elapsed - plain - in_diag) * 1e6
            print(f"{'  of which keeping the steps':<44} {keep:>9.1f}")


HEAVY = ("typer", "rich", "torch", "matplotlib", "pyarrow", "numba", "tensorboard", "wandb", "mlflow")


def _import_once(src: Path) -> tuple[float, list[str]]:
    """Cumulative microseconds of ``import rlmetrics`` and the heavy modules it loaded."""
    code = f"import rlmetrics, sys; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, env=env
    )
    if out.returncode:
        raise SystemExit(f"import rlmetrics failed with PYTHONPATH={src}:\n{out.stderr[-2000:]}")
    line = next(ln for ln in out.stderr.splitlines() if ln.rstrip().endswith("| rlmetrics"))
    return float(line.split("|")[1]), [m for m in out.stdout.strip().split(",") if m]


def bench_import(runs: int, base: Path | None) -> None:
    here = Path(__file__).resolve().parents[1] / "src"
    print(f"\nimport rlmetrics, fresh interpreter, python -X importtime (median of {runs})")
    print(f"{'checkout':<44} {'ms':>7}  heavy modules loaded")
    for label, src in (("this tree", here), ("--base", base)):
        if src is None:
            continue
        results = [_import_once(src) for _ in range(runs)]
        ms = statistics.median(us for us, _ in results) / 1e3
        print(f"{label + ' (' + str(src) + ')':<44} {ms:>7.1f}  {', '.join(results[-1][1]) or 'none'}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=80)
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--import-runs", type=int, default=15)
    ap.add_argument("--base", type=Path, default=None, help="src folder of another checkout to compare")
    ap.add_argument("--only-import", action="store_true", help="run only the import-time benchmark")
    ap.add_argument("--only-monitor", action="store_true", help="run only the health-monitor benchmark")
    ap.add_argument("--only-tracker", action="store_true", help="run only the Tracker.log benchmark")
    ap.add_argument("--monitor-keys", type=int, default=100, help="metrics per step of the monitor benchmark")
    args = ap.parse_args()
    if args.only_monitor:
        bench_monitor(args.monitor_keys, args.steps)
        return
    if args.only_tracker:
        bench_tracker(args.keys, args.steps)
        return
    if not args.only_import:
        bench_reduce(args.keys, args.repeats)
        bench_tracker(args.keys, args.steps)
        bench_monitor(args.monitor_keys, args.steps)
    bench_import(args.import_runs, args.base)


if __name__ == "__main__":
    main()

"""Benchmark: one refresh of ``rlmetrics watch`` on a sweep (100 runs of 10,000 steps by default).

Run by hand (not a test)::

    python bench/bench_watch.py                        # 100 runs x 10,000 steps x 40 keys
    python bench/bench_watch.py --runs 20 --steps 2000
    python bench/bench_watch.py --src ../main/src      # another checkout's code, the same procedure

Writes ``--runs`` rlmetrics ``metrics.jsonl`` files (verl's key names: score, entropy, KL, lengths,
gradient norm ..., random walks, padded with more keys up to ``--keys``), then times, with
:class:`rlmetrics.health.watch.Watcher` (what ``rlmetrics watch`` runs) and its table:

1. the first read of every run (a whole read and a diagnosis each);
2. a refresh when nothing changed (a ``stat`` per run), median of 5;
3. a refresh after one new step was appended to every run, without a budget (``--refreshes``
   of them, their median and fastest: the figure of issue 28, printed last as ``REFRESH``): the
   tail reads and the diagnoses, per run (each run's
   :class:`~rlmetrics.health.smoothing.SeriesCache` computes the window statistics over the new
   step only, its arrays grow in place); and one diagnosis, whole and grown by a step;
4. the same with the default budget of 1 s: its time and how many runs it refreshed (the rest
   are refreshed by the next polls, 50 ms apart);
5. drawing the table of every run (rich, to a string).
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()
# the code measured: this checkout's, or another's (``--src``, read before the imports below)
_SRC = sys.argv[sys.argv.index("--src") + 1] if "--src" in sys.argv[:-1] else str(HERE.parents[1] / "src")
sys.path.insert(0, _SRC)

from rlmetrics import keys as K  # noqa: E402
from rlmetrics.health.watch import Watcher  # noqa: E402

_BASE_KEYS = [
    K.SCORE_MEAN,
    K.ACTOR_ENTROPY,
    K.ACTOR_KL_LOSS,
    K.ACTOR_PG_LOSS,
    K.ACTOR_GRAD_NORM,
    K.PG_CLIPFRAC,
    K.PPO_KL,
    K.RESPONSE_LENGTH_MEAN,
    K.RESPONSE_LENGTH_CLIP_RATIO,
    K.PERF_THROUGHPUT,
    K.ADV_MEAN,
    K.ACTOR_LR,
]


def _columns(steps: int, n_keys: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    names = _BASE_KEYS + [f"timing_s/extra_{i}" for i in range(max(0, n_keys - len(_BASE_KEYS)))]
    out = {}
    for name in names[:n_keys]:
        walk = np.cumsum(rng.normal(0, 0.01, steps))
        out[name] = np.abs(1.0 + walk) + 0.01
    return out


def _write_run(path: Path, steps: int, n_keys: int, seed: int) -> None:
    cols = _columns(steps, n_keys, np.random.default_rng(seed))
    names = list(cols)
    table = np.column_stack([cols[n] for n in names]).tolist()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for step, values in enumerate(table):
            fh.write(json.dumps({"step": step, "timestamp": 1.7e9 + step, **dict(zip(names, values))}) + "\n")


def _append_step(path: Path, step: int, n_keys: int) -> None:
    names = list(_columns(1, n_keys, np.random.default_rng(0)))
    with open(path, "a") as fh:
        fh.write(json.dumps({"step": step, **{n: 0.5 for n in names}}) + "\n")


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=40)
    parser.add_argument("--refreshes", type=int, default=5, help="refreshes of one new step timed")
    parser.add_argument("--src", default=_SRC, help="the rlmetrics sources measured")
    args = parser.parse_args()
    from rich.console import Console

    from rlmetrics.cli.watch import _table
    from rlmetrics.health.webhook import Outbox

    root = Path(tempfile.mkdtemp(prefix="bench_watch_"))
    try:
        t_write, _ = _timed(
            lambda: [
                _write_run(root / f"seed{i}" / "metrics.jsonl", args.steps, args.keys, i)
                for i in range(args.runs)
            ]
        )
        paths = [root / f"seed{i}" for i in range(args.runs)]
        size = sum((p / "metrics.jsonl").stat().st_size for p in paths)
        print(
            f"{args.runs} runs x {args.steps} steps x {args.keys} keys: {size / 2**20:.0f} MiB "
            f"(written in {t_write:.1f} s)"
        )
        watcher = Watcher(paths)
        t_first, _ = _timed(lambda: watcher.poll(budget=None))
        print(f"1. first read of every run: {t_first:.2f} s ({1000 * t_first / args.runs:.1f} ms per run)")
        idle = [_timed(lambda: watcher.poll(budget=None))[0] for _ in range(5)]
        print(f"2. refresh, nothing changed: {1000 * statistics.median(idle):.2f} ms")
        t_refresh = []
        for k in range(args.refreshes):
            for p in paths:
                _append_step(p / "metrics.jsonl", args.steps + k, args.keys)
            t_refresh.append(_timed(lambda: watcher.poll(budget=None))[0])
        t_all = statistics.median(t_refresh)
        print(
            f"3. refresh, one new step in every run, no budget: {t_all:.2f} s median of "
            f"{args.refreshes} ({1000 * t_all / args.runs:.1f} ms per run: tail read + diagnosis), "
            f"fastest {min(t_refresh):.2f} s"
        )
        from rlmetrics.health import diagnose
        from rlmetrics.health.smoothing import SeriesCache

        history = watcher.runs[0].history
        t_diag = min(_timed(lambda: diagnose(history))[0] for _ in range(3))
        before = {k: (s[:-1], v[:-1]) for k, (s, v) in history.items()}
        t_grown = []
        for _ in range(3):
            cache = SeriesCache()
            diagnose(before, cache=cache)  # the diagnosis of the run before its last step
            t_grown.append(_timed(lambda c=cache: diagnose(history, cache=c))[0])
        print(
            f"   of which one diagnosis of {args.steps + 1} steps: {1000 * t_diag:.1f} ms whole, "
            f"{1000 * min(t_grown):.1f} ms grown by a step (the run's SeriesCache)"
        )
        for p in paths:
            _append_step(p / "metrics.jsonl", args.steps + args.refreshes, args.keys)
        t_budget, _ = _timed(lambda: watcher.poll(budget=1.0))
        done = args.runs - watcher.pending
        print(f"4. refresh with --budget 1: {t_budget:.2f} s, {done} of {args.runs} runs refreshed")
        console = Console(file=io.StringIO(), width=120, highlight=False)  # as the command's
        t_table, _ = _timed(lambda: console.print(_table(watcher, Outbox(), False)))
        print(f"5. drawing the table of {args.runs} runs: {1000 * t_table:.0f} ms")
        print(
            f"REFRESH (one new step in each of {args.runs} runs of {args.steps} steps, {args.keys} keys; "
            f"code: {args.src}): {t_all:.2f} s median, {min(t_refresh):.2f} s fastest "
            f"(issue 28's goal: under 1 s for 100 runs)"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

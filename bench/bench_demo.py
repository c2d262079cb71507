"""Benchmark of the demo, run by hand; prints tables, asserts nothing.

1. The metrics one demo step logs, computed from the step's real batch (verl layout, torch CPU):
   rlmetrics vs verl 0.9.1's ``metric_utils`` for the four families verl has (data, timing,
   throughput, variance proxy), then the families only rlmetrics has (GRPO groups, PPO update,
   rollout mismatch). Sizes: the demo's batch (B = n_prompts x group_size, R = 6) and the same
   batch tiled to a larger B.
2. Wall time of a demo step by stage, and of ``rlmetrics report`` on the run.

Usage::

    python bench/bench_demo.py                 # B = 256 and B = 4096, 30 repeats
    python bench/bench_demo.py --repeats 100 --tile 64
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def _median_ms(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def _bench_batch(b: dict, timing: dict, repeats: int, grad_norm: float = 1.0) -> None:
    import torch
    from verl import DataProto
    from verl.trainer.ppo import metric_utils as vm

    import rlmetrics as rm

    tensors = {key: v for key, v in b.items() if torch.is_tensor(v)}
    dp = DataProto.from_dict(tensors=tensors, non_tensors={"uid": b["uid"]}, meta_info=b["meta_info"])
    size = f"{tensors['responses'].shape[0]} x {tensors['responses'].shape[1]}"
    pairs = [
        (
            "data",
            lambda: vm.compute_data_metrics(dp, use_critic=False),
            lambda: rm.compute_data_metrics(b, use_critic=False),
        ),
        (
            "timing",
            lambda: vm.compute_timing_metrics(dp, timing),
            lambda: rm.compute_timing_metrics(b, timing),
        ),
        (
            "throughput",
            lambda: vm.compute_throughout_metrics(dp, timing, 1),
            lambda: rm.compute_throughput_metrics(b, timing, 1),
        ),
        (
            "variance proxy",
            lambda: vm.compute_variance_proxy_metrics(dp, gradient_norm=grad_norm),
            lambda: rm.compute_variance_proxy_metrics(b, gradient_norm=grad_norm),
        ),
    ]
    tot_v = tot_o = 0.0
    for name, verl_fn, ours_fn in pairs:
        tv, to = _median_ms(verl_fn, repeats), _median_ms(ours_fn, repeats)
        tot_v, tot_o = tot_v + tv, tot_o + to
        print(f"| {name} | {size} | {tv:.2f} | {to:.2f} | {tv / to:.1f}x |")
    print(f"| **the four together** | {size} | {tot_v:.2f} | {tot_o:.2f} | {tot_v / tot_o:.1f}x |")
    mask = b["response_mask"]
    extra = [
        ("GRPO groups (rlmetrics only)", lambda: rm.compute_group_metrics(b)),
        (
            "PPO update (rlmetrics only)",
            lambda: rm.compute_ppo_update_metrics(
                b["old_log_probs"], b["rollout_log_probs"], b["advantages"], mask
            ),
        ),
        (
            "rollout mismatch (rlmetrics only)",
            lambda: rm.compute_rollout_mismatch_metrics(b["old_log_probs"], b["rollout_log_probs"], mask),
        ),
    ]
    for name, fn in extra:
        print(f"| {name} | {size} | | {_median_ms(fn, repeats):.2f} | |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--tile", type=int, default=16, help="tiling factor of the large batch")
    args = ap.parse_args()

    import numpy as np
    import torch

    from rlmetrics.demo.run import DemoConfig, _Run, run_demo
    from rlmetrics.report import write_report

    torch.set_num_threads(1)
    run = _Run(DemoConfig(seed=0))
    for step in range(1, 4):
        run.step(step)
    batch, timing = run.last_batch, dict(run.last_timing)

    def tiled(k: int) -> dict:
        out = {key: v.repeat(k, *([1] * (v.dim() - 1))) for key, v in batch.items() if torch.is_tensor(v)}
        out["uid"] = np.concatenate([np.char.add(batch["uid"], f"-{i}") for i in range(k)])
        out["meta_info"] = {"global_token_num": batch["meta_info"]["global_token_num"] * k}
        return out

    print("| metric family (torch CPU, 1 thread) | B x R | verl 0.9.1 (ms) | rlmetrics (ms) | speed-up |")
    print("|---|---|---:|---:|---:|")
    for k in (1, args.tile):
        _bench_batch(tiled(k), timing, args.repeats)

    print()
    print("| demo step stage (default config, 1 thread) | ms |")
    print("|---|---:|")
    for stage, sec in timing.items():
        print(f"| {stage} | {1e3 * sec:.1f} |")

    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        res = run_demo(DemoConfig(steps=30, val_every=10), out_dir=d)
        t_demo = time.perf_counter() - t0
        t0 = time.perf_counter()
        rep = write_report([res.jsonl_path], Path(d) / "report")
        t_report = time.perf_counter() - t0
    n_keys = sum(len(v) for v in [rep.runs[0].series])
    print()
    print("| end to end | s |")
    print("|---|---:|")
    print(f"| `run_demo` 30 steps (default sizes, 4 validations) | {t_demo:.1f} |")
    print(f"| `write_report` on it ({n_keys} metrics, {len(rep.png_paths)} figures) | {t_report:.1f} |")


if __name__ == "__main__":
    main()

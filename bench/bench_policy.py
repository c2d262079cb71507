"""Benchmark of the policy-side metrics, run by hand; prints tables, asserts nothing.

1. ``compute_variance_proxy_metrics``: rlmetrics vs verl 0.9.1 at B=1024, R=4096 (torch CPU
   float32, on-policy and with rollout IS weights; rlmetrics also with numpy inputs).
2. ``sum_pi_squared_from_logits``: extra peak memory (RSS high-water mark above the RSS once
   the logits exist, each method in a fresh subprocess), time and accuracy vs verl's formula
   ``exp(logsumexp(2z) - 2 logsumexp(z))`` applied to bf16 logits and to their float32 copy.
3. ``compute_ppo_update_metrics`` and ``compute_rollout_mismatch_metrics``: rlmetrics vs verl
   0.9.1 (``compute_policy_loss_vanilla``'s metrics, ``compute_rollout_correction_and_rejection_mask``
   with token TIS) at B=1024, R=4096, torch CPU float32.

Usage::

    python bench/bench_policy.py                      # variance proxy + memory at (1024, 152064)
    python bench/bench_policy.py --rows 8192          # 8192 rows: the naive float32 path needs ~15 GB
                                                      # then needs ~15 GB; check free memory first
    python bench/bench_policy.py --skip-memory --repeats 7
    python bench/bench_policy.py --skip-variance --rows 8192 --methods rlmetrics,verl-formula-bf16
    python bench/bench_policy.py --skip-variance --rows 8192 --cuda   # on a GPU: allocator peaks
    python bench/bench_policy.py --skip-variance --skip-memory         # PPO update + mismatch only
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time


def _median_time(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _interleaved_medians(fns: list, repeats: int) -> list[float]:
    """Median seconds of each function, the repeats taken in turn (after one warm-up each)."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, t in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            t.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def bench_variance_proxy(b: int, r: int, repeats: int) -> None:
    import torch
    from verl import DataProto
    from verl.trainer.ppo.metric_utils import compute_variance_proxy_metrics as verl_fn

    from rlmetrics import compute_variance_proxy_metrics as ours_fn

    g = torch.Generator().manual_seed(0)
    lens = torch.randint(1, r + 1, (b,), generator=g)
    base = {
        "sum_pi_squared": torch.rand(b, r, generator=g),
        "old_log_probs": -torch.rand(b, r, generator=g) * 3,
        "advantages": torch.randn(b, r, generator=g),
        "response_mask": (torch.arange(r)[None, :] < lens[:, None]).long(),
    }
    import numpy as np

    from rlmetrics._core.kernels import FUSED_MIN_ELEMENTS, variance_rows_kernel

    fused = variance_rows_kernel() is not None and b * r >= FUSED_MIN_ELEMENTS
    print(f"\n## variance proxy, B={b}, R={r}, float32, torch threads={torch.get_num_threads()}")
    print("read-once floor: one np.sum over each input tensor (the least any method must read)")
    print(f"rlmetrics path: {'fused numba kernel' if fused else 'numpy row blocks'} (int64 response_mask)")
    print(
        f"{'case':<26}{'verl 0.9.1 (ms)':>16}{'rlmetrics (ms)':>16}{'speed-up':>10}"
        f"{'floor (ms)':>12}{'x floor':>9}{'max rel diff':>14}"
    )
    for name, extra in (
        ("on-policy", {}),
        ("rollout IS weights", {"rollout_is_weights": torch.rand(b, r) * 2}),
    ):
        batch = dict(base, **extra)
        dp = DataProto.from_dict(tensors=batch)
        np_batch = {k: v.numpy() for k, v in batch.items()}
        # Repeats interleaved, so that a change of machine load hits every column alike.
        t_floor, t_verl, t_torch, t_numpy = _interleaved_medians(
            [
                lambda nb=np_batch: [np.sum(x) for x in nb.values()],
                lambda dp=dp: verl_fn(dp, 1.0),
                lambda dp=dp: ours_fn(dp, 1.0),
                lambda nb=np_batch: ours_fn(nb, 1.0),
            ],
            repeats,
        )
        a = verl_fn(dp, 1.0)
        for inputs, label, t_ours in ((dp, "torch", t_torch), (np_batch, "numpy in", t_numpy)):
            o = ours_fn(inputs, 1.0)
            diff = max(abs(a[k] - o[k]) / max(abs(a[k]), 1e-30) for k in a)
            print(
                f"{name + f' ({label})':<26}{t_verl * 1e3:>16.1f}{t_ours * 1e3:>16.1f}"
                f"{t_verl / t_ours:>9.1f}x{t_floor * 1e3:>12.1f}{t_ours / t_floor:>8.1f}x{diff:>14.1e}"
            )


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _memory_child(method: str, rows: int, vocab: int) -> None:
    """Runs in a subprocess: build bf16 logits chunk-wise, then measure one method."""
    import torch

    from rlmetrics import entropy_and_sum_pi_squared_from_logits, sum_pi_squared_from_logits

    g = torch.Generator().manual_seed(0)
    logits = torch.empty(rows, vocab, dtype=torch.bfloat16)
    for s in range(0, rows, 64):  # bounded float32 temporaries while filling
        logits[s : s + 64] = (torch.randn(min(64, rows - s), vocab, generator=g) * 3).to(torch.bfloat16)
    base = _rss_bytes()
    t0 = time.perf_counter()
    if method == "rlmetrics":
        out = sum_pi_squared_from_logits(logits)
    elif method == "rlmetrics-entropy+spi":
        out = entropy_and_sum_pi_squared_from_logits(logits)[1]
    elif method == "verl-formula-bf16":
        out = torch.exp(torch.logsumexp(2.0 * logits, dim=-1) - 2.0 * torch.logsumexp(logits, dim=-1))
    elif method == "verl-formula-fp32":
        z = logits.float()
        out = torch.exp(torch.logsumexp(2.0 * z, dim=-1) - 2.0 * torch.logsumexp(z, dim=-1))
        del z
    else:
        raise ValueError(method)
    elapsed = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    ref_rows = min(rows, 64)
    p = torch.softmax(logits[:ref_rows].double(), dim=-1)
    ref = (p * p).sum(-1)
    err = ((out[:ref_rows].double() - ref).abs() / ref).max().item()
    print(json.dumps({"extra_peak": peak - base, "seconds": elapsed, "max_rel_err": err}))


METHODS = ("rlmetrics", "rlmetrics-entropy+spi", "verl-formula-bf16", "verl-formula-fp32")


def bench_memory(rows: int, vocab: int, methods: tuple[str, ...] = METHODS) -> None:
    size_gb = rows * vocab * 2 / 1e9
    print(f"\n## sum of pi squared from ({rows}, {vocab}) bf16 logits ({size_gb:.2f} GB), CPU")
    print(f"{'method':<26}{'extra peak RSS (MB)':>20}{'time (s)':>10}{'max rel err vs fp64':>22}")
    for method in methods:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", method, "--rows", str(rows), "--vocab", str(vocab)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            print(f"{method:<26}{'failed: ' + proc.stderr.strip().splitlines()[-1][:60]:>52}")
            continue
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        print(
            f"{method:<26}{res['extra_peak'] / 1e6:>20.0f}{res['seconds']:>10.2f}{res['max_rel_err']:>22.1e}"
        )


def bench_memory_cuda(rows: int, vocab: int, repeats: int) -> None:
    """The same comparison on a CUDA device: peak allocated memory above the logits, time, error."""
    import torch

    from rlmetrics import sum_pi_squared_from_logits

    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    logits = (torch.randn(rows, vocab, generator=g, device=dev) * 3).to(torch.bfloat16)
    ref = torch.empty(rows, dtype=torch.float64, device=dev)
    for s in range(0, rows, 512):  # float64 reference, chunk by chunk
        p = torch.softmax(logits[s : s + 512].double(), dim=-1)
        ref[s : s + 512] = (p * p).sum(-1)
        del p

    def naive_fp32() -> torch.Tensor:
        p = torch.softmax(logits.float(), dim=-1)
        return (p * p).sum(-1)

    def verl_formula_bf16() -> torch.Tensor:
        return torch.exp(torch.logsumexp(2.0 * logits, dim=-1) - 2.0 * torch.logsumexp(logits, dim=-1))

    def verl_formula_fp32() -> torch.Tensor:
        z = logits.float()
        return torch.exp(torch.logsumexp(2.0 * z, dim=-1) - 2.0 * torch.logsumexp(z, dim=-1))

    methods = {
        "rlmetrics": lambda: sum_pi_squared_from_logits(logits),
        "naive softmax fp32": naive_fp32,
        "verl-formula-bf16": verl_formula_bf16,
        "verl-formula-fp32": verl_formula_fp32,
    }
    size_gb = rows * vocab * 2 / 1e9
    gpu = torch.cuda.get_device_name()
    print(f"\n## sum of pi squared from ({rows}, {vocab}) bf16 logits ({size_gb:.2f} GB), {gpu}")
    print(f"{'method':<22}{'extra peak (MB)':>16}{'median ms':>11}{'max rel err vs fp64':>22}")
    for name, fn in methods.items():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        out = fn()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        err = ((out.double() - ref).abs() / ref).max().item()
        del out
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        print(f"{name:<22}{peak / 1e6:>16.0f}{statistics.median(times) * 1e3:>11.2f}{err:>22.1e}")


def bench_update_and_mismatch(b: int, r: int, repeats: int) -> None:
    import torch
    from verl.trainer.ppo import core_algos, rollout_corr_helper

    from rlmetrics import compute_ppo_update_metrics, compute_rollout_mismatch_metrics

    class _ActorConfig:
        """What verl's compute_policy_loss_vanilla reads from its actor config."""

        def __init__(self) -> None:
            self.clip_ratio = self.clip_ratio_low = self.clip_ratio_high = 0.2
            self.clip_ratio_c = 3.0
            self.global_batch_info: dict = {}

        def get(self, key: str, default: object = None) -> object:
            return getattr(self, key, default)

    g = torch.Generator().manual_seed(1)
    lens = torch.randint(1, r + 1, (b,), generator=g)
    mask = (torch.arange(r)[None, :] < lens[:, None]).long()
    old = -torch.rand(b, r, generator=g) * 3
    new = old + 0.3 * torch.randn(b, r, generator=g)
    roll = old + 0.05 * torch.randn(b, r, generator=g)
    adv = torch.randn(b, r, generator=g)

    def verl_ppo() -> dict:
        return core_algos.compute_policy_loss_vanilla(old, new, adv, mask, config=_ActorConfig())[1]

    def verl_mismatch() -> dict:
        return rollout_corr_helper.compute_rollout_correction_and_rejection_mask(
            old, roll, mask, rollout_is="token", rollout_is_threshold=2.0
        )[2]

    cases = [
        ("PPO update", verl_ppo, lambda: compute_ppo_update_metrics(new, old, adv, mask)),
        ("rollout mismatch (TIS)", verl_mismatch, lambda: compute_rollout_mismatch_metrics(old, roll, mask)),
    ]
    threads = torch.get_num_threads()
    print(f"\n## PPO update and rollout mismatch, B={b}, R={r}, float32, torch threads={threads}")
    print(f"{'case':<26}{'verl 0.9.1 (ms)':>16}{'rlmetrics (ms)':>16}{'speed-up':>10}{'max rel diff':>14}")
    for name, verl_fn, ours_fn in cases:
        t_verl, t_ours = _interleaved_medians([verl_fn, ours_fn], repeats)
        a, o = verl_fn(), ours_fn()
        diff = max(abs(float(a[k]) - o[k]) / max(abs(float(a[k])), 1e-30) for k in a)
        print(f"{name:<26}{t_verl * 1e3:>16.1f}{t_ours * 1e3:>16.1f}{t_verl / t_ours:>9.1f}x{diff:>14.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--response", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rows", type=int, default=1024, help="logits rows (tokens) for the memory bench")
    parser.add_argument("--vocab", type=int, default=152064)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated memory-bench methods")
    parser.add_argument("--skip-variance", action="store_true")
    parser.add_argument("--skip-update", action="store_true", help="skip the PPO update / mismatch bench")
    parser.add_argument("--cuda", action="store_true", help="run the memory bench on the CUDA device")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _memory_child(args.child, args.rows, args.vocab)
        return
    if not args.skip_variance:
        bench_variance_proxy(args.batch, args.response, args.repeats)
    if not args.skip_update:
        bench_update_and_mismatch(args.batch, args.response, args.repeats)
    if not args.skip_memory:
        if args.cuda:
            bench_memory_cuda(args.rows, args.vocab, args.repeats)
        else:
            bench_memory(args.rows, args.vocab, tuple(args.methods.split(",")))


if __name__ == "__main__":
    main()

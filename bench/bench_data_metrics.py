"""compute_data_metrics: rlmetrics vs verl 0.9.1, and vs the floor of reading every input once.

Run by hand (needs the parity extra: ``pip install --no-deps verl==0.9.1`` and its import deps):

    python bench/bench_data_metrics.py                # CPU, both sizes
    python bench/bench_data_metrics.py --device cuda  # also on the GPU, with host-sync counts

Sizes (float32, int64 masks, use_critic=True): B=256,P=512,R=1024 and B=1024,P=1024,R=4096.
The floor is the fastest single read of each input tensor the metrics need (scores, rewards,
advantages, returns, values, response_mask, attention_mask), summed: no implementation that
reads its inputs can beat it. Each figure is the median of ``--repeat`` timed calls after a
warm-up call (which also compiles the numba kernels on first use).
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

SIZES = [(256, 512, 1024), (1024, 1024, 4096)]
READ_KEYS = (
    "token_level_scores",
    "token_level_rewards",
    "advantages",
    "returns",
    "values",
    "response_mask",
    "attention_mask",
)


def make_batch(b: int, p: int, r: int, device: str, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    resp_len = torch.randint(0, r + 1, (b,), generator=g)
    prompt_len = torch.randint(1, p + 1, (b,), generator=g)
    resp_mask = (torch.arange(r)[None, :] < resp_len[:, None]).long()
    prompt_mask = (torch.arange(p)[None, :] >= (p - prompt_len)[:, None]).long()
    batch = {
        "token_level_scores": torch.randn(b, r, generator=g),
        "token_level_rewards": torch.randn(b, r, generator=g),
        "advantages": torch.randn(b, r, generator=g),
        "returns": torch.randn(b, r, generator=g),
        "values": torch.randn(b, r, generator=g),
        "response_mask": resp_mask,
        "attention_mask": torch.cat([prompt_mask, resp_mask], dim=1),
        "prompts": torch.zeros(b, p, dtype=torch.long),
        "responses": torch.zeros(b, r, dtype=torch.long),
    }
    return {k: v.to(device) for k, v in batch.items()}


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def median_ms(fn: Callable[[], Any], device: str, repeat: int) -> float:
    fn()
    sync(device)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def floor_ms(batch: dict[str, torch.Tensor], device: str, repeat: int) -> float:
    """Fastest single full read of each needed input (torch sum, torch amax, numpy sum), summed."""
    total = 0.0
    for key in READ_KEYS:
        t = batch[key]
        readers: list[Callable[[], Any]] = [t.sum, t.amax]
        if device == "cpu":
            readers.append(t.numpy().sum)
        total += min(median_ms(r, device, repeat) for r in readers)
    return total


def count_syncs(fn: Callable[[], Any]) -> int:
    """Host syncs of one call, counted by torch's CUDA sync debug mode (one warning per sync)."""
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn()
            torch.cuda.synchronize()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message).lower() for w in caught)


def bench_size(device: str, b: int, p: int, r: int, repeat: int) -> None:
    """Print the table rows of one device and size."""
    from verl import DataProto
    from verl.trainer.ppo.metric_utils import compute_data_metrics as verl_compute

    import rlmetrics
    from rlmetrics import _data, _lengths

    batch = make_batch(b, p, r, device)
    proto = DataProto.from_dict(tensors=dict(batch))

    def verl_call() -> Any:
        return verl_compute(proto, use_critic=True)

    def ours_call() -> Any:
        return rlmetrics.compute_data_metrics(batch)

    cuda = device == "cuda"
    verl_ms = median_ms(verl_call, device, repeat)
    rows: list[tuple[str, float, Any]] = [("verl 0.9.1", verl_ms, count_syncs(verl_call) if cuda else "")]
    rows.append(("rlmetrics", median_ms(ours_call, device, repeat), count_syncs(ours_call) if cuda else ""))
    if device == "cpu":
        kernel, lengths = _data.token_rows_kernel, _lengths.attention_lengths_kernel
        _data.token_rows_kernel = lambda: None
        _lengths.attention_lengths_kernel = lambda: None
        try:
            rows.append(("rlmetrics, numpy engine (no numba)", median_ms(ours_call, device, repeat), ""))
        finally:
            _data.token_rows_kernel, _lengths.attention_lengths_kernel = kernel, lengths
    floor = floor_ms(batch, device, repeat)
    rows.append(("floor: read each input once", floor, ""))
    for name, ms, syncs in rows:
        size = f"{b} x {p} x {r}"
        print(f"| {device} | {size} | {name} | {ms:.2f} | {verl_ms / ms:.1f}x | {ms / floor:.2f} | {syncs} |")
    ours, ref = ours_call(), verl_call()
    worst = max(abs(ours[k] - float(ref[k])) / max(abs(float(ref[k])), 1.0) for k in ref)
    print(f"|  |  | (max rel. difference ours vs verl: {worst:.1e}) |  |  |  |  |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda", "both"], default="cpu")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    devices = ["cpu", "cuda"] if args.device == "both" else [args.device]
    print(
        f"# compute_data_metrics, float32, use_critic=True -- {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, torch {torch.__version__} ({torch.get_num_threads()} threads)"
    )
    header = "| device | B x P x R | impl | median ms | vs verl | vs floor | host syncs |"
    print(header)
    print("|---|---|---|---:|---:|---:|---:|")
    for device in devices:
        for b, p, r in SIZES:
            bench_size(device, b, p, r, args.repeat)


if __name__ == "__main__":
    main()

"""compute_data_metrics: rlmetrics vs verl 0.9.1, and vs the floor of reading every input once.

Run by hand (needs the parity extra: ``pip install --no-deps verl==0.9.1`` and its import deps):

    python bench/bench_data_metrics.py                # CPU, both sizes
    python bench/bench_data_metrics.py --device cuda  # also on the GPU, with host-sync counts
    python bench/bench_data_metrics.py --grouped      # group_by= with 1, 8, 64 categories vs plain

Sizes (float32, int64 masks, use_critic=True): B=256,P=512,R=1024 and B=1024,P=1024,R=4096.
Rows: verl; rlmetrics as it runs (the fused numba kernel on the caller's thread at these sizes,
both above ``FUSED_MIN_ELEMENTS``); rlmetrics on its array-API path (what runs without numba:
numpy in cache-sized row blocks); the floor. The floor is one pass that reads every input the
metrics need (scores, rewards, advantages, returns, values, response_mask, attention_mask)
once, in sequence, with the fastest reader at hand (torch's multi-threaded sum or amax,
numpy's sum), timed exactly like the calls: no single-pass reader beats it. Each figure is the
median of ``--repeat`` timed calls after a warm-up call (which also loads, or on first use
compiles, the numba kernel).

A second reference row times each input *alone*, repeatedly, and sums the medians. It is not a
floor: a single 16-42 MB input stays in the
last-level cache between repeats, so it measures cache bandwidth, while a call reads all
154 MB (large size) and streams from memory. ``--cold`` evicts the caches (reads a 1 GiB
buffer) before every timed call of every row, for figures with nothing cache-resident.
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


#: Written before each timed call under ``--cold`` (CPU), to evict the caches.
_EVICT: dict[str, Any] = {}


def evict_caches() -> None:
    buf = _EVICT.get("buf")
    if buf is not None:
        buf.sum()  # reading evicts without leaving dirty lines to write back during the call


def median_ms(fn: Callable[[], Any], device: str, repeat: int) -> float:
    fn()
    sync(device)
    times = []
    for _ in range(repeat):
        if device == "cpu":
            evict_caches()
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def floor_ms(batch: dict[str, torch.Tensor], device: str, repeat: int) -> float:
    """One pass reading every needed input once, in sequence: the fastest of three readers."""
    tensors = [batch[key] for key in READ_KEYS]
    readers: list[Callable[[], Any]] = [
        lambda: [t.sum() for t in tensors],
        lambda: [t.amax() for t in tensors],
    ]
    if device == "cpu":
        arrays = [t.numpy() for t in tensors]
        readers.append(lambda: [a.sum() for a in arrays])
    return min(median_ms(r, device, repeat) for r in readers)


def each_alone_ms(batch: dict[str, torch.Tensor], device: str, repeat: int) -> float:
    """Each input read alone, repeatedly (fastest reader each), medians summed: cache-resident."""
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
    from rlmetrics._core import lengths as _lengths
    from rlmetrics.training import data as _data

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
        threshold = _data.FUSED_MIN_ELEMENTS
        _data.FUSED_MIN_ELEMENTS = _lengths.FUSED_MIN_ELEMENTS = 1 << 62
        try:
            rows.append(("rlmetrics, array-API path (no numba)", median_ms(ours_call, device, repeat), ""))
        finally:
            _data.FUSED_MIN_ELEMENTS = _lengths.FUSED_MIN_ELEMENTS = threshold
    floor = floor_ms(batch, device, repeat)
    rows.append(("floor: one pass reading every input once", floor, ""))
    alone = "each input alone, repeated" + ("" if _EVICT else ": cache-resident, not a floor")
    rows.append((f"({alone})", each_alone_ms(batch, device, repeat), ""))
    for name, ms, syncs in rows:
        size = f"{b} x {p} x {r}"
        print(f"| {device} | {size} | {name} | {ms:.2f} | {verl_ms / ms:.1f}x | {ms / floor:.2f} | {syncs} |")
    ours, ref = ours_call(), verl_call()
    worst = max(abs(ours[k] - float(ref[k])) / max(abs(float(ref[k])), 1.0) for k in ref)
    print(f"|  |  | (max rel. difference ours vs verl: {worst:.1e}) |  |  |  |  |")


def bench_grouped(device: str, b: int, p: int, r: int, repeat: int) -> None:
    """Rows of the grouped section: group_by= with 1, 8 and 64 categories vs the plain call."""
    import numpy as np

    import rlmetrics

    batch = make_batch(b, p, r, device)
    plain_ms = median_ms(lambda: rlmetrics.compute_data_metrics(batch), device, repeat)
    size = f"{b} x {p} x {r}"
    print(f"| {device} | {size} | plain | {plain_ms:.2f} | 1.00x | {'' if device == 'cpu' else 0} |")
    for n_cat in (1, 8, 64):
        labels = np.asarray([f"source_{i % n_cat}" for i in range(b)], dtype=object)
        grouped = {**batch, "data_source": labels}

        def call(grouped: dict = grouped) -> Any:
            return rlmetrics.compute_data_metrics(grouped, group_by="data_source")

        ms = median_ms(call, device, repeat)
        syncs = count_syncs(call) if device == "cuda" else ""
        print(
            f"| {device} | {size} | group_by, {n_cat} categories | {ms:.2f} | {ms / plain_ms:.2f}x "
            f"| {syncs} |"
        )
    split = {**batch, "acc": np.arange(b) % 2 == 0}
    ms = median_ms(lambda: rlmetrics.compute_data_metrics(split, split_by_outcome=True), device, repeat)
    print(f"| {device} | {size} | split_by_outcome (2 categories) | {ms:.2f} | {ms / plain_ms:.2f}x |  |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda", "both"], default="cpu")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--cold", action="store_true", help="evict the CPU caches before every timed call")
    parser.add_argument("--grouped", action="store_true", help="only the group_by= section (no verl needed)")
    args = parser.parse_args()
    if args.cold:
        import numpy as np

        _EVICT["buf"] = np.zeros(1 << 27)  # 1 GiB of float64

    devices = ["cpu", "cuda"] if args.device == "both" else [args.device]
    print(
        f"# compute_data_metrics, float32, use_critic=True{', cold caches' if args.cold else ''} -- "
        f"{platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, torch {torch.__version__} ({torch.get_num_threads()} threads)"
    )
    if args.grouped:
        print("| device | B x P x R | call | median ms | vs plain | host syncs |")
        print("|---|---|---|---:|---:|---:|")
        for device in devices:
            for b, p, r in SIZES:
                bench_grouped(device, b, p, r, args.repeat)
        return
    header = "| device | B x P x R | impl | median ms | vs verl | vs floor | host syncs |"
    print(header)
    print("|---|---|---|---:|---:|---:|---:|")
    for device in devices:
        for b, p, r in SIZES:
            bench_size(device, b, p, r, args.repeat)


if __name__ == "__main__":
    main()

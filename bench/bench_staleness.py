"""Benchmark of the staleness family beside the rollout mismatch family, run by hand; prints a table.

At verl's sizes (B=1024 samples, R=4096 response tokens, torch CPU, float32 log-probs), each case
timed as the median of ``--repeats`` interleaved runs after one warm-up:

* ``compute_rollout_mismatch_metrics`` (token TIS): the family the lag's cost sits beside;
* ``compute_staleness_metrics`` with per-sample versions only (the cheap, common case);
* the same with per-sample versions, rewards, timestamps and dropped samples;
* per-token versions (partial rollouts) with the response mask;
* per-token versions with old/rollout log-probs: the k3 KL and importance weight per lag bucket.

Usage::

    python bench/bench_staleness.py
    python bench/bench_staleness.py --batch 256 --response 1024 --repeats 7
"""

from __future__ import annotations

import argparse
import statistics
import time


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


def bench(b: int, r: int, repeats: int) -> None:
    import torch

    from rlmetrics import compute_rollout_mismatch_metrics, compute_staleness_metrics

    g = torch.Generator().manual_seed(1)  # a local generator: the global RNG stays untouched
    lens = torch.randint(1, r + 1, (b,), generator=g)
    mask = (torch.arange(r)[None, :] < lens[:, None]).long()
    old = -torch.rand(b, r, generator=g) * 3
    roll = old + 0.05 * torch.randn(b, r, generator=g)
    current = 100
    oldest = current - torch.randint(0, 12, (b,), generator=g)
    # partial rollouts: a version step at a random token of about a third of the rows
    cut = torch.randint(0, r, (b,), generator=g)
    bumped = torch.rand(b, generator=g) < 0.3
    step = ((torch.arange(r)[None, :] >= cut[:, None]) & bumped[:, None]).long()
    per_token = torch.clamp(oldest[:, None] + step, max=current)
    rewards = torch.randn(b, generator=g)
    start = torch.rand(b, generator=g) * 100
    enqueue = start + torch.rand(b, generator=g) * 30
    dequeue = enqueue + torch.rand(b, generator=g) * 10
    dropped = current - torch.randint(8, 16, (b // 8,), generator=g)
    extras = {
        "rewards": rewards,
        "start_times": start,
        "enqueue_times": enqueue,
        "dequeue_times": dequeue,
        "train_time": float(dequeue.max()) + 1.0,
        "dropped_versions": dropped,
        "dropped_lengths": torch.randint(1, r, (b // 8,), generator=g).float(),
    }
    cases = [
        ("rollout mismatch (token TIS)", lambda: compute_rollout_mismatch_metrics(old, roll, mask)),
        (
            "staleness, per-sample versions",
            lambda: compute_staleness_metrics(oldest, current_version=current),
        ),
        (
            "  + rewards, times, dropped",
            lambda: compute_staleness_metrics(oldest, current_version=current, response_mask=mask, **extras),
        ),
        (
            "staleness, per-token versions",
            lambda: compute_staleness_metrics(per_token, current_version=current, response_mask=mask),
        ),
        (
            "  + log-probs (cost per bucket)",
            lambda: compute_staleness_metrics(
                per_token,
                current_version=current,
                response_mask=mask,
                old_log_probs=old,
                rollout_log_probs=roll,
                **extras,
            ),
        ),
    ]
    medians = _interleaved_medians([fn for _, fn in cases], repeats)
    base = medians[0]
    print(
        f"\n## staleness beside rollout mismatch, B={b}, R={r}, torch CPU, threads={torch.get_num_threads()}"
    )
    print(f"{'case':<34}{'median (ms)':>12}{'vs mismatch':>13}")
    for (name, _), t in zip(cases, medians):
        print(f"{name:<34}{t * 1e3:>12.2f}{t / base:>12.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--response", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    bench(args.batch, args.response, args.repeats)


if __name__ == "__main__":
    main()

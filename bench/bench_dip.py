"""Benchmark of Hartigan's dip (``rlmetrics._core.dip``) beside the ``diptest`` package (AS 217 in
C, the peer; timed when importable, never a dependency), and what the dip test adds to
``compute_group_metrics``; run by hand, prints a table.

Every case is the median of ``--repeats`` interleaved runs after one warm-up, on uniform samples
(the p-value's null) of n = 64 ... 4096; the group statistics on GRPO batches of ``groups``
prompts x 8 rollouts (0/1 rewards), with and without the dip test's share (the dip of the same
solve rates, timed alone).

Usage::

    python bench/bench_dip.py
    PYTHONPATH=/path/to/diptest python bench/bench_dip.py --repeats 15
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any


def _interleaved_medians(fns: list[Callable[[], Any]], repeats: int) -> list[float]:
    """Median seconds of each function, the repeats taken in turn (after one warm-up each)."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def main() -> None:
    import numpy as np

    from rlmetrics._core.dip import dip
    from rlmetrics.policy.groups import compute_group_metrics

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    try:
        import diptest
    except ImportError:
        diptest = None
    rng = np.random.default_rng(0)
    print("| n | ours ms | diptest ms | ours / diptest | same dip |\n|---:|---:|---:|---:|---|")
    for n in (64, 256, 1024, 4096):
        x = rng.random(n)
        fns: list[Callable[[], Any]] = [lambda x=x: dip(x)]
        if diptest is not None:
            fns.append(lambda x=x: diptest.dipstat(x))
        ms = [1e3 * t for t in _interleaved_medians(fns, args.repeats)]
        peer = (
            f"{ms[1]:.3f} | {ms[0] / ms[1]:.0f}x | {abs(dip(x) - diptest.dipstat(x)) < 1e-12}"
            if diptest
            else "- | - | -"
        )
        print(f"| {n} | {ms[0]:.3f} | {peer} |")
    print("\n| groups x 8 | compute_group_metrics ms | of which the dip ms |\n|---:|---:|---:|")
    for groups in (64, 256, 1024):
        uids = np.repeat(np.arange(groups), 8)
        rewards = (rng.random(groups * 8) < np.repeat(rng.random(groups), 8)).astype(np.float64)
        rates = (np.bincount(uids, weights=rewards) + rng.random(groups)) / 9.0
        whole, alone = _interleaved_medians(
            [lambda u=uids, r=rewards: compute_group_metrics(u, r), lambda s=rates: dip(s)], args.repeats
        )
        print(f"| {groups} | {1e3 * whole:.2f} | {1e3 * alone:.2f} |")


if __name__ == "__main__":
    main()

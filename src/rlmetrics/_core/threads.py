"""The threads rlmetrics' CPU kernels share.

numpy and the numba kernels release the GIL, so row blocks spread over plain threads run in
parallel. One lazily created pool serves every module (plain threads degrade gracefully on a
busy machine, where OpenMP's spinning barriers collapse), plus one background thread for work
that overlaps the caller's.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

__all__ = ["N_THREADS", "background", "map_row_blocks", "pool"]

#: Worker threads of :func:`pool`: the CPU count, at most 8.
N_THREADS = max(1, min(os.cpu_count() or 1, 8))

_POOL: ThreadPoolExecutor | None = None
_BACKGROUND: ThreadPoolExecutor | None = None


def _forget_after_fork() -> None:
    """A forked child has none of its parent's threads: its first use starts new executors
    (the inherited ones would queue work that no thread ever runs)."""
    global _POOL, _BACKGROUND
    _POOL = _BACKGROUND = None


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_forget_after_fork)


def pool() -> ThreadPoolExecutor:
    """The shared pool of :data:`N_THREADS` workers (its tasks must not wait on the pool)."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=N_THREADS, thread_name_prefix="rlmetrics")
    return _POOL


def background() -> ThreadPoolExecutor:
    """One thread for work that overlaps the caller's (it may submit to :func:`pool`)."""
    global _BACKGROUND
    if _BACKGROUND is None:
        _BACKGROUND = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rlmetrics-bg")
    return _BACKGROUND


#: Elements (rows x columns) below which a per-row kernel runs on the calling thread.
ROW_BLOCK_ELEMENTS = 1 << 20


def map_row_blocks(fn: Callable[[slice], Any], shape: tuple[int, ...]) -> Any:
    """Apply a per-row kernel to contiguous row blocks on :func:`pool`; stack its output(s) in order.

    ``fn(rows)`` returns an array (or a tuple of arrays) with one leading entry per row of the
    slice; small inputs run on the calling thread.
    """
    n_rows, width = shape
    per_block = max(1, ROW_BLOCK_ELEMENTS // max(width, 1))
    if n_rows <= per_block:
        return fn(slice(0, n_rows))
    n_blocks = min(N_THREADS, -(-n_rows // per_block))
    step = -(-n_rows // n_blocks)
    parts = list(pool().map(fn, [slice(start, start + step) for start in range(0, n_rows, step)]))
    if isinstance(parts[0], tuple):
        return tuple(np.concatenate(p) for p in zip(*parts))
    return np.concatenate(parts)

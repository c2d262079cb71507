"""The threads rlmetrics' CPU kernels share.

numpy and the numba kernels release the GIL, so row blocks spread over plain threads run in
parallel. One lazily created pool serves every module (plain threads degrade gracefully on a
busy machine, where OpenMP's spinning barriers collapse), plus one background thread for work
that overlaps the caller's.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

__all__ = ["N_THREADS", "background", "pool"]

#: Worker threads of :func:`pool`: the CPU count, at most 8.
N_THREADS = max(1, min(os.cpu_count() or 1, 8))

_POOL: ThreadPoolExecutor | None = None
_BACKGROUND: ThreadPoolExecutor | None = None


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

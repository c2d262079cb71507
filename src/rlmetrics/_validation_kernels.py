"""Optional numba kernel for the maj@k bootstrap of :mod:`rlmetrics._validation`.

For every prompt (a pattern of predictions, each named by the position of its first occurrence)
and every bootstrap draw, verl's majority vote picks the most common prediction, ties going to
the one that appears first in the draw, and returns the value at that prediction's first slot.
With ``k <= 47`` draws per sample the pick is the argmax of an exact integer score per
prediction, ``count * 2**k + sum of 2**(k - 1 - first_slot)`` over its drawn positions (see
``_majority_counts_bits``), and the highest bit of the winner's low part names its first slot.
The kernel sums the per-position scores of each prediction over all draws in contiguous
(vectorised) loops, instead of the numpy path's matrix product and full-size temporaries. Only
integer counts come out, so the numpy path gives identical numbers. The kernel releases the
GIL; large calls spread prompts over a thread pool. Set ``RLMETRICS_NO_NUMBA=1`` to force the
numpy path.
"""

from __future__ import annotations

import itertools
import os
from functools import cache
from typing import Any

import numpy as np

from ._threads import N_THREADS, background, pool

__all__ = ["background", "majority_counts_tables", "majority_kernel"]

# Fewest patterns per thread.
_PROMPT_BLOCK = 512
# Fewer (pattern x draw) pairs than this run on the calling thread.
_THREAD_MIN_WORK = 1 << 22


@cache
def _compiled() -> Any | None:
    if os.environ.get("RLMETRICS_NO_NUMBA"):
        return None
    try:
        import numba
    except ImportError:
        return None

    @numba.njit(cache=True, nogil=True)
    def majority(dense, n_codes, scores, slot_pos, weights, k, p_lo, p_hi, out):  # type: ignore[no-untyped-def]
        """``out[p, pos]`` = total weight of the draws whose majority pick for pattern ``p`` is ``pos``.

        ``dense[p, j]``: index (0 .. n_codes[p] - 1) of position j's prediction; ``scores[j, r]``:
        position j's score in draw r. Per pattern, every prediction's score is summed over all
        draws at once (contiguous, vectorised loops; the largest prediction's as the total minus
        the others'), the max taken, and the winning slot read from the highest bit below
        ``2**k`` (the float64 exponent of the exact low part).
        """
        n = dense.shape[1]
        n_rows = scores.shape[1]
        m_max = 1
        for p in range(p_lo, p_hi):
            m_max = max(m_max, n_codes[p])
        acc = np.empty((m_max, n_rows), scores.dtype)
        total = np.zeros(n_rows, scores.dtype)
        for j in range(n):
            for r in range(n_rows):
                total[r] += scores[j, r]
        best = np.empty(n_rows, scores.dtype)
        rest = np.empty(n_rows, scores.dtype)
        fbuf = np.empty(n_rows, np.float64)
        ibuf = fbuf.view(np.int64)
        cnt = np.zeros(n, np.int64)
        size = np.zeros(m_max, np.int64)
        low_mask = scores.dtype.type((1 << k) - 1)
        top = k + 1022  # slot = k - 1 - floor(log2(low)) = top - biased exponent
        for p in range(p_lo, p_hi):
            m = n_codes[p]
            size[:m] = 0
            for j in range(n):
                size[dense[p, j]] += 1
            big = 0
            for c in range(1, m):
                if size[c] > size[big]:
                    big = c
            acc[:m] = 0
            for j in range(n):
                c = dense[p, j]
                if c != big:
                    a = acc[c]
                    sj = scores[j]
                    for r in range(n_rows):
                        a[r] += sj[r]
            rest[:] = total
            best[:] = 0
            for c in range(m):
                if c != big:
                    a = acc[c]
                    for r in range(n_rows):
                        rest[r] -= a[r]
                        best[r] = max(best[r], a[r])
            for r in range(n_rows):
                fbuf[r] = max(best[r], rest[r]) & low_mask
            for r in range(n_rows):
                cnt[slot_pos[r, top - (ibuf[r] >> 52)]] += weights[r]
            for j in range(n):
                out[p, j] = cnt[j]
                cnt[j] = 0
        return 0

    return majority


def majority_kernel() -> Any | None:
    """The compiled kernel, or ``None`` when numba is missing or disabled."""
    return _compiled()


def _run(kernel: Any, dense: np.ndarray, rest: tuple[Any, ...], out: np.ndarray) -> None:
    """The kernel over all rows of ``dense``, split across threads when the work is large."""
    n_pat = dense.shape[0]
    work = n_pat * rest[1].shape[1]
    n_threads = N_THREADS
    if work < _THREAD_MIN_WORK or n_threads == 1 or n_pat < 2 * _PROMPT_BLOCK:
        kernel(dense, *rest, 0, n_pat, out)
        return
    # a few parts per thread, taken in turn: a thread slowed by other load takes fewer
    n_parts = min(4 * n_threads, n_pat // _PROMPT_BLOCK)
    bounds = np.linspace(0, n_pat, n_parts + 1).astype(np.int64).tolist()

    def part(lo: int, hi: int) -> None:
        kernel(dense, *rest, lo, hi, out)

    futures = [pool().submit(part, lo, hi) for lo, hi in itertools.pairwise(bounds) if hi > lo]
    for f in futures:
        f.result()


def majority_counts_tables(
    kernel: Any,
    patterns: np.ndarray,
    k: int,
    idx: np.ndarray,
    mult: np.ndarray,
    first: np.ndarray,
    weights: np.ndarray,
    scratch: dict[str, Any] | None = None,
) -> np.ndarray:
    """Majority-pick counts ``(n_patterns, n)`` for ``3 <= k <= 47`` with the compiled kernel.

    Parameters
    ----------
    kernel
        :func:`majority_kernel`'s function.
    patterns : (P, n) int
        Per pattern, each position's prediction named by its first position.
    idx, mult, first : (R, k), (R, n), (R, n)
        Draws, multiplicity of each position per draw, first slot of each position (k if absent).
    weights : (R,) int64
        Number of bootstrap draws each row stands for.
    scratch : dict, optional
        Reused across calls on the same ``patterns`` (other ``k``): keeps their ``k``-free layout.
    """
    n_pat, n = patterns.shape
    weights = np.ascontiguousarray(weights, dtype=np.int64)
    out = np.zeros((n_pat, n), dtype=np.int64)
    scratch = {} if scratch is None else scratch
    if "dense" not in scratch:
        is_code = patterns == np.arange(n)[None, :]
        n_codes = is_code.sum(axis=1)
        single = n_codes == 1  # a single prediction always wins, at the first slot
        rows = np.flatnonzero(~single)
        # dense[p, j]: rank of position j's prediction among the pattern's predictions
        dense = np.take_along_axis(np.cumsum(is_code[rows], axis=1) - 1, patterns[rows], axis=1)
        scratch["single"] = single
        scratch["rows"] = rows
        scratch["n_codes"] = n_codes[rows].astype(np.int64)
        scratch["dense"] = np.ascontiguousarray(dense, dtype=np.int32)
    single, rows = scratch["single"], scratch["rows"]
    if single.any():
        out[single] = np.bincount(idx[:, 0], weights=weights, minlength=n).astype(np.int64)[None, :]
    if rows.shape[0] == 0:
        return out
    # score of position j in draw r: multiplicity * 2**k + 2**(k - 1 - first slot) if drawn
    drawn = first < k
    bits = np.where(drawn, np.left_shift(np.int64(1), np.where(drawn, k - 1 - first, 0)), 0)
    # narrowest integer type holding any prediction's score sum, (k + 1) * 2**k - 1: more SIMD lanes
    bound = (k + 1) << k
    score_t = next(t for t in (np.int8, np.int16, np.int32, np.int64) if bound <= np.iinfo(t).max)
    scores = np.ascontiguousarray((mult.astype(np.int64) * (1 << k) + bits).T, dtype=score_t)
    slot_pos = np.ascontiguousarray(idx, dtype=np.uint8 if n <= 256 else np.int32)
    rest = (scratch["n_codes"], scores, slot_pos, weights, k)
    got = np.zeros((rows.shape[0], n), dtype=np.int64)
    _run(kernel, scratch["dense"], rest, got)
    out[rows] = got
    return out

"""Optional numba kernels for the bootstrap statistics of :mod:`rlmetrics._validation`.

**best@k / worst@k** (:func:`best_worst_kernel`): per prompt row, the bootstrap draws whose best
(worst) sample has rank ``r`` are read off the subset-sum table of the draws (``Z[A]``: draws
whose positions all lie in bit set ``A``) at the row's sorted prefixes (complements), and their
weighted mean and std taken, for every ``k``, in one pass with nothing but the row in cache.

**maj@k** (:func:`majority_kernel`):

For every prompt (a pattern of predictions, each named by the position of its first occurrence)
and every bootstrap draw, verl's majority vote picks the most common prediction, ties going to
the one that appears first in the draw, and returns the value at that prediction's first slot.
With ``k <= 47`` draws per sample the pick is the argmax of an exact integer score per
prediction, ``count * 2**k + sum of 2**(k - 1 - first_slot)`` over its drawn positions (see
``_majority_counts_bits``), and the highest bit of the winner's low part names its first slot.
The kernel sums the per-position scores of each prediction over all draws in contiguous
(vectorised) loops, instead of the numpy path's matrix product and full-size temporaries. Only
integer counts come out, so the numpy path gives identical numbers.

**Helpers**: first-occurrence codes of prediction rows (:func:`local_codes_kernel`), the subset
sums (zeta transform) behind the best/worst tables (:func:`subset_sums_kernel`), and the
weighted mean/std of values under per-pattern counts (:func:`weighted_rows_kernel`).

Every kernel releases the GIL; large calls spread rows over the shared thread pool. Set
``RLMETRICS_NO_NUMBA=1`` to force the numpy paths.
"""

from __future__ import annotations

import itertools
import os
from functools import cache
from typing import Any

import numpy as np

from ._threads import N_THREADS, background, pool

__all__ = [
    "background",
    "best_worst_kernel",
    "best_worst_tables",
    "kernel_draws",
    "local_codes_kernel",
    "majority_counts_tables",
    "majority_kernel",
    "prepare_patterns",
    "subset_sums_kernel",
    "weighted_rows_kernel",
]

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

    @numba.njit(cache=True, nogil=True, inline="always")
    def weighted_mean_std(counts, vals, total):  # type: ignore[no-untyped-def]
        """Mean and population std of ``vals`` with ``counts[r]`` copies of ``vals[r]`` (two passes)."""
        mean = 0.0
        for r in range(vals.shape[0]):
            mean += counts[r] * vals[r]
        mean /= total
        var = 0.0
        for r in range(vals.shape[0]):
            d = vals[r] - mean
            var += counts[r] * (d * d)
        return mean, np.sqrt(var / total)

    @numba.njit(cache=True, nogil=True)
    def best_worst(values, tables, total, lo, hi, out):  # type: ignore[no-untyped-def]
        """``out[t, :, q]`` = best mean, best std, worst mean, worst std of row ``q`` under ``tables[t]``.

        Each row is ranked here, stably with NaN last (``np.argsort(kind="stable")``'s order).
        """
        n = values.shape[1]
        full = (np.int64(1) << n) - 1
        sv = np.empty(n, np.float64)
        pos = np.empty(n, np.int64)
        prefix = np.empty(n + 1, np.int64)
        best = np.empty(n, np.float64)
        worst = np.empty(n, np.float64)
        inside = np.empty(n + 1, np.int64)
        above = np.empty(n + 1, np.int64)
        for q in range(lo, hi):
            # stable ranks by counting (branch-free, vectorised; n <= 20 here): value i comes
            # before value j if smaller, or equal and earlier; NaNs last, in sample order
            row = values[q]
            for j in range(n):
                x = row[j]
                r = 0
                if x == x:
                    for i in range(n):
                        y = row[i]
                        r += 1 if (y < x) or (y == x and i < j) else 0
                else:
                    for i in range(n):
                        y = row[i]
                        r += 1 if (y == y) or i < j else 0
                sv[r] = x
                pos[r] = j
            prefix[0] = 0
            for r in range(n):
                prefix[r + 1] = prefix[r] | (np.int64(1) << pos[r])
            for t in range(tables.shape[0]):
                tab = tables[t]
                # draws inside the r lowest ranks / inside the n - r highest: one lookup each
                for r in range(n + 1):
                    inside[r] = tab[prefix[r]]
                    above[r] = tab[full ^ prefix[r]]
                for r in range(n):
                    # draws whose max rank is r; draws whose min rank is r
                    best[r] = inside[r + 1] - inside[r]
                    worst[r] = above[r] - above[r + 1]
                out[t, 0, q], out[t, 1, q] = weighted_mean_std(best, sv, total)
                out[t, 2, q], out[t, 3, q] = weighted_mean_std(worst, sv, total)
        return 0

    @numba.njit(cache=True, nogil=True)
    def local_codes(codes):  # type: ignore[no-untyped-def]
        """Per row, each code replaced by the position of its first occurrence in the row."""
        q, n = codes.shape
        out = np.empty((q, n), np.int64)
        for p in range(q):
            row = codes[p]
            for j in range(n):
                c = row[j]
                f = 0
                while row[f] != c:
                    f += 1
                out[p, j] = f
        return out

    @numba.njit(cache=True, nogil=True)
    def dense_codes(patterns):  # type: ignore[no-untyped-def]
        """Per row of first-occurrence codes: each position's prediction ranked by first
        appearance (0, 1, ...) and the number of distinct predictions."""
        q, n = patterns.shape
        dense = np.empty((q, n), np.int32)
        n_codes = np.empty(q, np.int64)
        rank = np.empty(n, np.int32)
        for p in range(q):
            m = 0
            for j in range(n):
                f = patterns[p, j]
                if f == j:
                    rank[j] = m
                    m += 1
                dense[p, j] = rank[f]
            n_codes[p] = m
        return dense, n_codes

    @numba.njit(cache=True, nogil=True)
    def weighted_rows(vals, counts, inverse, rows, total):  # type: ignore[no-untyped-def]
        """Mean and population std of ``vals[i]`` weighted by ``counts[inverse[rows[i]]]``."""
        q = vals.shape[0]
        mean = np.empty(q, np.float64)
        std = np.empty(q, np.float64)
        for i in range(q):
            mean[i], std[i] = weighted_mean_std(counts[inverse[rows[i]]], vals[i], total)
        return mean, std

    @numba.njit(cache=True, nogil=True)
    def subset_sums(table, n_bits):  # type: ignore[no-untyped-def]
        """In place: ``table[A]`` becomes the sum of ``table[B]`` over the subsets ``B`` of ``A``."""
        size = table.shape[0]
        low = 0
        if n_bits >= 3:
            # the three lowest bits within each block of 8, in registers (short strided loops
            # would not vectorise)
            for b in range(0, size, 8):
                a0, a1, a2, a3 = table[b], table[b + 1], table[b + 2], table[b + 3]
                a4, a5, a6, a7 = table[b + 4], table[b + 5], table[b + 6], table[b + 7]
                a1 += a0
                a3 += a2
                a5 += a4
                a7 += a6
                a2 += a0
                a3 += a1
                a6 += a4
                a7 += a5
                a4 += a0
                a5 += a1
                a6 += a2
                a7 += a3
                table[b + 1], table[b + 2], table[b + 3] = a1, a2, a3
                table[b + 4], table[b + 5], table[b + 6], table[b + 7] = a4, a5, a6, a7
            low = 3
        for bit in range(low, n_bits):
            step = 1 << bit
            for base in range(0, size, 2 * step):
                lo = table[base : base + step]  # row views: the adds vectorise
                hi = table[base + step : base + 2 * step]
                for i in range(step):
                    hi[i] += lo[i]
        return 0

    return majority, best_worst, local_codes, dense_codes, weighted_rows, subset_sums


def _pick(index: int) -> Any | None:
    """Kernel ``index`` of :func:`_compiled`, or ``None`` when numba is missing or disabled."""
    compiled = _compiled()
    return None if compiled is None else compiled[index]


def majority_kernel() -> Any | None:
    """The compiled maj@k kernel, or ``None`` when numba is missing or disabled."""
    return _pick(0)


def best_worst_kernel() -> Any | None:
    """The compiled best@k/worst@k kernel, or ``None`` when numba is missing or disabled."""
    return _pick(1)


def local_codes_kernel() -> Any | None:
    """``kernel(codes (Q, n) int) -> (Q, n) int64`` first-occurrence positions, or ``None``."""
    return _pick(2)


def weighted_rows_kernel() -> Any | None:
    """``kernel(vals (Q, n), counts (U, n), inverse (P,), rows (Q,), total) -> (mean, std)``, or ``None``.

    Row ``i`` of ``vals`` is weighted by ``counts[inverse[rows[i]]]`` (distinct count rows shared
    by many prompts are never expanded).
    """
    return _pick(4)


def subset_sums_kernel() -> Any | None:
    """``kernel(table (2**n,), n)``: in-place sums over subsets (the zeta transform), or ``None``."""
    return _pick(5)


#: Rows (prompts x variables) below which the best/worst kernel runs on the calling thread.
_BEST_WORST_THREAD_ROWS = 16384


def best_worst_tables(kernel: Any, values: np.ndarray, tables: np.ndarray, total: int) -> np.ndarray:
    """best@k / worst@k means and stds of every row, for every subset-sum table, with the kernel.

    Parameters
    ----------
    values : (Q, n) float64
        One row per prompt, in sample order (sorted in the kernel).
    tables : (K, 2**n) int
        Subset-sum table of the bootstrap draws, one per ``k``.
    total : int
        Bootstrap draws per table.

    Returns
    -------
    (K, 4, Q) float64: best mean, best std, worst mean, worst std.
    """
    q = values.shape[0]
    values = np.ascontiguousarray(values, dtype=np.float64)
    out = np.empty((tables.shape[0], 4, q), dtype=np.float64)
    if q < _BEST_WORST_THREAD_ROWS or N_THREADS == 1:
        kernel(values, tables, float(total), 0, q, out)
        return out
    bounds = np.linspace(0, q, N_THREADS + 1).astype(np.int64).tolist()
    futures = [
        pool().submit(kernel, values, tables, float(total), lo, hi, out)
        for lo, hi in itertools.pairwise(bounds)
    ]
    for f in futures:
        f.result()
    return out


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


def kernel_draws(
    k: int, idx: np.ndarray, mult: np.ndarray, first: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The data-independent inputs of the maj@k kernel for one ``k`` (cacheable per n, k, seed).

    Parameters
    ----------
    idx, mult, first : (R, k), (R, n), (R, n)
        Draws, multiplicity of each position per draw, first slot of each position (k if absent).
    weights : (R,) int
        Number of bootstrap draws each row stands for.

    Returns
    -------
    scores : (n, R) narrowest int
        Score of position j in draw r: ``multiplicity * 2**k + 2**(k - 1 - first slot)`` if drawn.
    slot_pos : (R, k) uint8 or int32
        Position drawn in each slot.
    weights : (R,) int64
    single_counts : (n,) int64
        Weighted count of draws whose first slot is each position (a one-prediction pattern's picks).
    """
    n = mult.shape[1]
    weights = np.ascontiguousarray(weights, dtype=np.int64)
    drawn = first < k
    bits = np.where(drawn, np.left_shift(np.int64(1), np.where(drawn, k - 1 - first, 0)), 0)
    # narrowest integer type holding any prediction's score sum, (k + 1) * 2**k - 1: more SIMD lanes
    bound = (k + 1) << k
    score_t = next(t for t in (np.int8, np.int16, np.int32, np.int64) if bound <= np.iinfo(t).max)
    scores = np.ascontiguousarray((mult.astype(np.int64) * (1 << k) + bits).T, dtype=score_t)
    slot_pos = np.ascontiguousarray(idx, dtype=np.uint8 if n <= 256 else np.int32)
    single = np.bincount(idx[:, 0], weights=weights, minlength=n).astype(np.int64)
    for a in (scores, slot_pos, weights, single):
        a.setflags(write=False)
    return scores, slot_pos, weights, single


def prepare_patterns(patterns: np.ndarray, scratch: dict[str, Any]) -> None:
    """Fill ``scratch`` with the ``k``-free kernel layout of ``patterns`` (first-occurrence codes)."""
    if "dense" in scratch:
        return
    # dense[p, j]: rank of position j's prediction among the pattern's predictions
    dense, n_codes = _pick(3)(np.ascontiguousarray(patterns))  # type: ignore[misc]
    single = n_codes == 1  # a single prediction always wins, at the first slot
    rows = np.flatnonzero(~single)
    scratch["single"] = single
    scratch["rows"] = rows
    scratch["n_codes"] = n_codes[rows]
    scratch["dense"] = dense[rows]


def majority_counts_tables(
    kernel: Any,
    patterns: np.ndarray,
    k: int,
    draws: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    scratch: dict[str, Any] | None = None,
) -> np.ndarray:
    """Majority-pick counts ``(n_patterns, n)`` for ``3 <= k <= 47`` with the compiled kernel.

    Parameters
    ----------
    kernel
        :func:`majority_kernel`'s function.
    patterns : (P, n) int
        Per pattern, each position's prediction named by its first position.
    draws
        :func:`kernel_draws` of this ``k``.
    scratch : dict, optional
        :func:`prepare_patterns` of ``patterns``, reused across ``k`` (filled here if empty).
    """
    n_pat, n = patterns.shape
    scores, slot_pos, weights, single_counts = draws
    out = np.zeros((n_pat, n), dtype=np.int64)
    scratch = {} if scratch is None else scratch
    prepare_patterns(patterns, scratch)
    single, rows = scratch["single"], scratch["rows"]
    if single.any():
        out[single] = single_counts[None, :]
    if rows.shape[0] == 0:
        return out
    rest = (scratch["n_codes"], scores, slot_pos, weights, k)
    got = np.zeros((rows.shape[0], n), dtype=np.int64)
    _run(kernel, scratch["dense"], rest, got)
    out[rows] = got
    return out

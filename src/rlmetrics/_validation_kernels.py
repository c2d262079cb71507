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
integer counts come out, so the numpy path gives identical numbers. The scores of every ``k``
are stacked (:func:`stack_draws`, int16 / int32 / int64 by ``k``) so that one call covers them
all, and the patterns are cut in chunks that the threads calling :meth:`MajorityJob.work`
claim one at a time (from either end, without locks; a chunk claimed twice at once is computed
twice, with identical results).

**Helpers**: first-occurrence codes of prediction rows (:func:`local_codes_kernel`,
:func:`pattern_keys_kernel`), the subset sums (zeta transform) behind the best/worst tables
(:func:`subset_sums_kernel`, :func:`draw_set_tables_kernel`), and the weighted mean/std of
values under per-pattern counts (:func:`weighted_rows_kernel`).

Every kernel releases the GIL; large calls spread rows over the shared thread pool. Sums of
products of floats may be reassociated by the compiler (vectorised; results move by ~1e-16
relative, NaN and inf keep their meaning). Set ``RLMETRICS_NO_NUMBA=1`` to force the numpy paths.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from functools import cache
from typing import Any, NamedTuple

import numpy as np

from ._threads import N_THREADS, background, pool

__all__ = [
    "MAJORITY_MAX_K",
    "MajorityDraws",
    "MajorityJob",
    "background",
    "best_worst_kernel",
    "best_worst_tables",
    "draw_set_tables_kernel",
    "local_codes_kernel",
    "majority_counts",
    "majority_kernel",
    "pattern_keys_kernel",
    "prepare_patterns",
    "stack_draws",
    "subset_sums_kernel",
    "weighted_rows_kernel",
]

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

    # sums of products may be reassociated (vectorised): results move by ~1e-16 relative, NaN
    # and inf keep their IEEE meaning (no 'nnan' / 'ninf' flags)
    _REASSOC = {"reassoc", "contract"}

    @numba.njit(cache=True, nogil=True)
    def majority_tables(idx, k, scores, slot_flat):  # type: ignore[no-untyped-def]
        """Fill the data-independent maj@k tables of the draws ``idx`` (R, k), in place.

        ``scores[j, r]`` (zeroed, (n + 1, R)): position j's score in draw r,
        ``multiplicity * 2**k + 2**(k - 1 - first slot)`` when drawn; row ``n`` holds their sum.
        ``slot_flat[r * k + t]``: the position drawn in slot t of draw r.
        """
        n_rows = idx.shape[0]
        n = scores.shape[0] - 1
        seen = np.zeros(n, np.bool_)
        unit = np.int64(1) << k
        for r in range(n_rows):
            tot = np.int64(0)
            for t in range(k):
                j = idx[r, t]
                slot_flat[r * k + t] = j
                add = unit
                if not seen[j]:
                    seen[j] = True
                    add += np.int64(1) << (k - 1 - t)
                scores[j, r] += add
                tot += add
            scores[n, r] = tot
            for t in range(k):
                seen[idx[r, t]] = False
        return 0

    @numba.njit(cache=True, nogil=True)
    def majority_k(  # type: ignore[no-untyped-def]
        dense,
        n_codes,
        bigs,
        tab,
        col0,
        n_rows,
        slot_flat,
        s0,
        weights,
        w0,
        k,
        p_lo,
        p_hi,
        out,
        acc,
        low,
        f32,
        f64,
        lin,
        cnt,
    ):
        """``out[p, pos]``: weight of one ``k``'s draws whose majority pick for pattern ``p`` is ``pos``.

        ``dense[p, j]``: index (0 .. n_codes[p] - 1) of position j's prediction; ``bigs[p]``: the
        prediction with the most positions (its score is the total minus the others'). Draw r of
        this ``k`` is column ``col0 + r`` of ``tab`` (:func:`majority_tables`), its slots start at
        ``s0 + r * k`` in ``slot_flat`` and its weight is ``weights[w0 + r]`` (``w0 < 0``: all 1).
        Per pattern, every prediction's score is summed over all draws in contiguous (vectorised)
        loops, the max taken, and the winning slot read from the highest bit below ``2**k`` (the
        float exponent of the exact low part); the position drawn there gets the draw's weight.
        ``acc`` (m_max, >= n_rows) and ``low`` (>= n_rows) of ``tab``'s type, ``f32``, ``f64``, ``lin``
        (>= n_rows) and ``cnt`` (n, zeroed) are scratch space.
        """
        n = dense.shape[1]
        tot = tab[n, col0 : col0 + n_rows]
        slots = slot_flat[s0 : s0 + n_rows * k]
        weighted = w0 >= 0
        w = weights[max(w0, 0) : max(w0, 0) + (n_rows if weighted else 0)]
        i32 = f32.view(np.int32)  # f32 is exact for k <= 24
        i64 = f64.view(np.int64)  # f64 is exact for k <= 53
        low_mask = tab.dtype.type((np.int64(1) << k) - 1)
        for p in range(p_lo, p_hi):
            m = n_codes[p]
            if m == 1:
                continue
            big = bigs[p]
            for c in range(m - 1):
                a = acc[c]
                for r in range(n_rows):
                    a[r] = 0
            for j in range(n):
                c = dense[p, j]
                if c != big:
                    a = acc[c if c < big else c - 1]
                    sj = tab[j, col0 : col0 + n_rows]
                    for r in range(n_rows):
                        a[r] += sj[r]
            if m == 2:
                a0 = acc[0]
                for r in range(n_rows):
                    x = a0[r]
                    y = tot[r] - x
                    low[r] = (x if x > y else y) & low_mask
            elif m == 3:
                a0 = acc[0]
                a1 = acc[1]
                for r in range(n_rows):
                    x = a0[r]
                    y = a1[r]
                    z = tot[r] - x - y
                    b = x if x > y else y
                    low[r] = (b if b > z else z) & low_mask
            else:
                a0 = acc[0]
                for r in range(n_rows):
                    low[r] = tot[r] - a0[r]
                for c in range(1, m - 1):
                    a = acc[c]
                    for r in range(n_rows):
                        low[r] -= a[r]
                for c in range(m - 1):
                    a = acc[c]
                    for r in range(n_rows):
                        low[r] = max(low[r], a[r])
                for r in range(n_rows):
                    low[r] &= low_mask
            # slot = k - 1 - floor(log2(low)): the float's biased exponent, read off its bits
            if k <= 24:
                for r in range(n_rows):
                    f32[r] = low[r]
                for r in range(n_rows):
                    lin[r] = r * k + (k + 126 - (i32[r] >> 23))
            else:
                for r in range(n_rows):
                    f64[r] = low[r]
                for r in range(n_rows):
                    lin[r] = r * k + (k + 1022 - (i64[r] >> 52))
            if weighted:
                for r in range(n_rows):
                    cnt[slots[lin[r]]] += w[r]
            else:
                for r in range(n_rows):
                    cnt[slots[lin[r]]] += 1
            for j in range(n):
                out[p, j] = cnt[j]
                cnt[j] = 0
        return 0

    @numba.njit(cache=True, nogil=True)
    def majority_all(  # type: ignore[no-untyped-def]
        dense,
        n_codes,
        ks,
        kinds,
        cols,
        rows,
        slot_at,
        weight_at,
        tab16,
        tab32,
        tab64,
        slot_flat,
        weights,
        singles,
        claim,
        chunk,
        first,
        step,
        out,
    ):
        """Majority counts ``out[t, p, :]`` of every ``k = ks[t]``, over chunks of ``chunk`` patterns.

        Walks the chunks ``first, first + step, ...`` (``step`` is 1 or -1) and stops at the first one
        that ``claim`` marks as taken, marking each before computing it: threads walking towards each
        other share the work without locks (a chunk taken by two threads at once is computed twice,
        with identical results). One call covers all ``k`` (the stacked tables of
        :func:`stack_draws`): the caller's thread needs the GIL only to start it. Single-prediction
        patterns and ``k <= 2`` take the first slot's counts ``singles[t]`` (the first drawn answer
        always wins). Returns the number of chunks computed.
        """
        n_pat, n = dense.shape
        n_chunks = claim.shape[0]
        bigs = np.zeros(n_pat, np.int64)
        size = np.zeros(n, np.int64)
        # scratch of every table width, sized for the largest k (allocated once per call)
        m_max = 1
        for p in range(n_pat):
            m_max = max(m_max, n_codes[p])
        r_max = 1
        for t in range(ks.shape[0]):
            r_max = max(r_max, rows[t])
        acc16 = np.empty((m_max, r_max if tab16.shape[1] else 0), np.int16)
        acc32 = np.empty((m_max, r_max if tab32.shape[1] else 0), np.int32)
        acc64 = np.empty((m_max, r_max if tab64.shape[1] else 0), np.int64)
        low16 = np.empty(acc16.shape[1], np.int16)
        low32 = np.empty(acc32.shape[1], np.int32)
        low64 = np.empty(acc64.shape[1], np.int64)
        f32 = np.empty(r_max, np.float32)
        f64 = np.empty(r_max, np.float64)
        lin = np.empty(r_max, np.int64)
        cnt = np.zeros(n, np.int64)
        done = 0
        c = first
        while 0 <= c < n_chunks and claim[c] == 0:
            claim[c] = 1
            p_lo = c * chunk
            p_hi = min(n_pat, p_lo + chunk)
            for p in range(p_lo, p_hi):
                m = n_codes[p]
                size[:m] = 0
                for j in range(n):
                    size[dense[p, j]] += 1
                big = 0
                for q in range(1, m):
                    if size[q] > size[big]:
                        big = q
                bigs[p] = big
            for t in range(ks.shape[0]):
                k = ks[t]
                res = out[t]
                for p in range(p_lo, p_hi):
                    if n_codes[p] == 1 or k <= 2:
                        for j in range(n):
                            res[p, j] = singles[t, j]
                if k <= 2:
                    continue
                args = (cols[t], rows[t], slot_flat, slot_at[t], weights, weight_at[t], k, p_lo, p_hi, res)
                if kinds[t] == 0:
                    majority_k(dense, n_codes, bigs, tab16, *args, acc16, low16, f32, f64, lin, cnt)
                elif kinds[t] == 1:
                    majority_k(dense, n_codes, bigs, tab32, *args, acc32, low32, f32, f64, lin, cnt)
                else:
                    majority_k(dense, n_codes, bigs, tab64, *args, acc64, low64, f32, f64, lin, cnt)
            done += 1
            c += step
        return done

    @numba.njit(cache=True, nogil=True, inline="always", fastmath=_REASSOC)
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

    @numba.njit(cache=True, nogil=True, fastmath=_REASSOC)
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

    @numba.njit(cache=True, nogil=True, fastmath=_REASSOC)
    def weighted_rows(vals, counts, inverse, rows, total):  # type: ignore[no-untyped-def]
        """Mean and population std of ``vals[i]`` weighted by ``counts[t, inverse[rows[i]]]``, per ``t``."""
        n_t = counts.shape[0]
        q = vals.shape[0]
        mean = np.empty((n_t, q), np.float64)
        std = np.empty((n_t, q), np.float64)
        for t in range(n_t):
            for i in range(q):
                mean[t, i], std[t, i] = weighted_mean_std(counts[t, inverse[rows[i]]], vals[i], total)
        return mean, std

    @numba.njit(cache=True, nogil=True)
    def pattern_keys(codes, starts, prompts, n):  # type: ignore[no-untyped-def]
        """First-occurrence codes ``local[i, j]`` of the ``n`` codes from ``starts[prompts[i]]`` on,
        and (``n <= 16``) each row packed into one 64-bit key, 4 bits per position."""
        q = prompts.shape[0]
        local = np.empty((q, n), np.int64)
        keys = np.zeros(q, np.uint64)
        for i in range(q):
            s = starts[prompts[i]]
            key = np.uint64(0)
            for j in range(n):
                c = codes[s + j]
                f = 0
                while codes[s + f] != c:
                    f += 1
                local[i, j] = f
                if n <= 16:
                    key |= np.uint64(f) << np.uint64(4 * j)
            keys[i] = key
        return local, keys

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

    @numba.njit(cache=True, nogil=True)
    def draw_set_tables(flat, ks, starts, n_rows, n_bits, out):  # type: ignore[no-untyped-def]
        """``out[t, A]`` (zeroed, (K, 2**n_bits)) = number of draws of ``ks[t]`` whose positions all lie
        in bit set ``A``; draw r of ``ks[t]`` is ``flat[starts[t] + r * k : ... + k]``."""
        for t in range(ks.shape[0]):
            k = ks[t]
            row = out[t]
            at = starts[t]
            for r in range(n_rows):
                mask = np.int64(0)
                for s in range(k):
                    mask |= np.int64(1) << flat[at + r * k + s]
                row[mask] += 1
            subset_sums(row, n_bits)
        return 0

    return (
        majority_all,
        best_worst,
        local_codes,
        dense_codes,
        weighted_rows,
        subset_sums,
        majority_tables,
        pattern_keys,
        draw_set_tables,
    )


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
    """``kernel(vals (Q, n), counts (T, U, n), inverse (P,), rows (Q,), total) -> (mean, std)``, each
    (T, Q), or ``None``.

    Row ``i`` of ``vals`` is weighted by ``counts[t, inverse[rows[i]]]`` (distinct count rows shared
    by many prompts are never expanded).
    """
    return _pick(4)


def pattern_keys_kernel() -> Any | None:
    """``kernel(codes (S,), starts (P + 1,), prompts (Q,), n) -> (local (Q, n) int64, keys (Q,) uint64)``,
    or ``None``: first-occurrence codes of each prompt's ``n`` codes, packed 4 bits a position when
    ``n <= 16``."""
    return _pick(7)


def draw_set_tables_kernel() -> Any | None:
    """``kernel(flat, ks, starts, n_rows, n, out (K, 2**n))``: every ``k``'s subset-sum table of its
    draws, in place, or ``None``."""
    return _pick(8)


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


class MajorityDraws(NamedTuple):
    """The data-independent maj@k inputs of every ``k`` of one ``n``, stacked for one kernel call.

    Draw ``r`` of ``ks[t]`` is column ``cols[t] + r`` of the score table of its width
    (``kinds[t]``: 0 int16, 1 int32, 2 int64; the narrowest holding ``(k + 1) * 2**k - 1``), its
    slots start at ``slot_at[t] + r * k`` in ``slot_flat``, its weight (the number of bootstrap
    draws it stands for) is ``weights[weight_at[t] + r]``, or 1 when ``weight_at[t] < 0``.
    ``singles[t]``: weighted count of draws whose first slot is each position.
    """

    ks: np.ndarray
    kinds: np.ndarray
    cols: np.ndarray
    rows: np.ndarray
    slot_at: np.ndarray
    weight_at: np.ndarray
    tab16: np.ndarray
    tab32: np.ndarray
    tab64: np.ndarray
    slot_flat: np.ndarray
    weights: np.ndarray
    singles: np.ndarray


#: Largest ``k`` the majority kernel takes (its scores, up to ``(k + 1) * 2**k``, fit int64).
MAJORITY_MAX_K = 47


def stack_draws(
    n: int, ks: Sequence[int], draws: Sequence[tuple[np.ndarray, np.ndarray | None]]
) -> MajorityDraws:
    """:class:`MajorityDraws` of ``draws[t] = (idx (R, k), weights (R,) or None for all 1)``, ``k = ks[t]``.

    ``1 <= k <= MAJORITY_MAX_K``; ``n`` is the number of samples the indices are drawn from.
    ``k <= 2`` keeps only the first slot's counts (the first drawn answer always wins).
    """
    tables = _pick(6)
    assert tables is not None, "stack_draws needs numba"
    kinds, cols, rows, slot_at, weight_at = [], [], [], [], []
    parts: dict[int, list[np.ndarray]] = {0: [], 1: [], 2: []}
    width = {0: 0, 1: 0, 2: 0}
    slot_parts, weight_parts, singles = [], [], []
    n_slots = n_weights = 0
    slot_t = np.uint8 if n <= 256 else np.int32
    for k, (idx, w) in zip(ks, draws):
        if not 1 <= k <= MAJORITY_MAX_K:
            raise ValueError(f"k must be in 1 .. {MAJORITY_MAX_K} for the majority kernel; got {k}")
        bound = (k + 1) << k
        kind = 0 if bound <= np.iinfo(np.int16).max else 1 if bound <= np.iinfo(np.int32).max else 2
        # k <= 2: the kernel takes the first slot's counts (singles), no table
        n_rows = idx.shape[0] if k > 2 else 0
        scores = np.zeros((n + 1, n_rows), dtype=(np.int16, np.int32, np.int64)[kind])
        slots = np.empty(n_rows * k, dtype=slot_t)
        if n_rows:
            tables(np.ascontiguousarray(idx, dtype=np.int64), k, scores, slots)
        kinds.append(kind)
        rows.append(n_rows)
        cols.append(width[kind])
        width[kind] += n_rows
        parts[kind].append(scores)
        slot_at.append(n_slots)
        n_slots += n_rows * k
        slot_parts.append(slots)
        if w is None:
            weight_at.append(-1)
            singles.append(np.bincount(idx[:, 0], minlength=n))
        else:
            weight_at.append(n_weights)
            n_weights += n_rows
            weight_parts.append(np.asarray(w[:n_rows], dtype=np.int64))
            singles.append(np.bincount(idx[:, 0], weights=w, minlength=n).astype(np.int64))

    def stacked(kind: int) -> np.ndarray:
        if not parts[kind]:
            return np.zeros((n + 1, 0), dtype=(np.int16, np.int32, np.int64)[kind])
        return np.ascontiguousarray(np.concatenate(parts[kind], axis=1))

    def ints(values: list[int]) -> np.ndarray:
        return np.asarray(values, dtype=np.int64)

    out = MajorityDraws(
        ints(list(ks)),
        ints(kinds),
        ints(cols),
        ints(rows),
        ints(slot_at),
        ints(weight_at),
        stacked(0),
        stacked(1),
        stacked(2),
        np.concatenate(slot_parts) if slot_parts else np.zeros(0, dtype=slot_t),
        np.concatenate(weight_parts) if weight_parts else np.zeros(0, dtype=np.int64),
        np.stack(singles).astype(np.int64) if singles else np.zeros((0, n), dtype=np.int64),
    )
    for a in out:
        a.setflags(write=False)
    return out


def prepare_patterns(patterns: np.ndarray, scratch: dict[str, Any]) -> None:
    """Fill ``scratch`` with the ``k``-free kernel layout of ``patterns`` (first-occurrence codes):
    ``dense[p, j]``, the rank of position j's prediction among the pattern's, and ``n_codes``."""
    if "dense" in scratch:
        return
    scratch["dense"], scratch["n_codes"] = _pick(3)(np.ascontiguousarray(patterns))  # type: ignore[misc]


#: Patterns per chunk of the majority kernel's shared work list.
_MAJ_CHUNK = 16


class MajorityJob:
    """The maj@k counts of ``patterns`` for every ``k`` of ``draws``, computed by whoever calls :meth:`work`.

    Threads calling ``work()`` take chunks of patterns from a shared list (the background thread
    from the front, the caller from the back once its own work is done), so the counts are ready
    as soon as the two meet. :attr:`out` is complete when every call has returned.
    """

    def __init__(
        self, kernel: Any, patterns: np.ndarray, draws: MajorityDraws, scratch: dict[str, Any]
    ) -> None:
        n_pat, n = patterns.shape
        prepare_patterns(patterns, scratch)
        self._kernel = kernel
        self._args = (scratch["dense"], scratch["n_codes"], *draws)
        self.chunk = max(1, _MAJ_CHUNK)
        self.claim = np.zeros(-(-n_pat // self.chunk), dtype=np.int8)
        total = int(draws.singles.sum(axis=1).max(initial=0))
        count_t = np.int16 if total <= np.iinfo(np.int16).max else np.int64
        self.out = np.empty((draws.ks.shape[0], n_pat, n), dtype=count_t)
        work = n_pat * int(draws.rows.sum())
        #: whether :meth:`work` from the front spreads over :func:`pool` (large inputs)
        self.spread = work >= _THREAD_MIN_WORK and N_THREADS > 1 and self.claim.shape[0] > 1

    def work(self, forward: bool = True) -> int:
        """Compute unclaimed chunks from the front (``forward``) or the back; the number done.

        From the front, large inputs are spread over :func:`pool` (one walker per thread, each
        starting at its share).
        """
        n_chunks = self.claim.shape[0]
        if not forward:
            return int(self._kernel(*self._args, self.claim, self.chunk, n_chunks - 1, -1, self.out))
        n_walkers = min(N_THREADS, n_chunks) if self.spread else 1
        starts = [(i * n_chunks) // n_walkers for i in range(n_walkers)]

        def walk(first: int) -> int:
            return int(self._kernel(*self._args, self.claim, self.chunk, first, 1, self.out))

        futures = [pool().submit(walk, s) for s in starts[1:]]
        done = walk(starts[0])
        return done + sum(int(f.result()) for f in futures)


def majority_counts(
    kernel: Any, patterns: np.ndarray, draws: MajorityDraws, scratch: dict[str, Any] | None = None
) -> np.ndarray:
    """Majority-pick counts ``(K, n_patterns, n)`` of every ``k`` of ``draws`` with the compiled kernel.

    Parameters
    ----------
    kernel
        :func:`majority_kernel`'s function.
    patterns : (P, n) int
        Per pattern, each position's prediction named by its first position.
    draws
        :func:`stack_draws` of the ``k`` wanted, drawn from ``n`` samples.
    scratch : dict, optional
        :func:`prepare_patterns` of ``patterns``, reused across calls (filled here if empty).

    Returns
    -------
    (K, P, n) int16 when every count fits (at most the total weight of a ``k``'s draws), else int64.
    Large inputs are split over :func:`pool`.
    """
    job = MajorityJob(kernel, patterns, draws, {} if scratch is None else scratch)
    job.work()
    return job.out

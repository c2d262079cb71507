"""The numba kernels of :mod:`rlmetrics.validation.kernels` (imported only when numba is).

Top-level functions, so that numba's on-disk cache finds them again in a new process: a
compiled function defined in a closure is keyed by its closure's contents, and a closure
holding other compiled functions never matches (each process compiled afresh and added files
to ``__pycache__``). :mod:`rlmetrics.validation.kernels` documents what each computes.
"""

from __future__ import annotations

import numba
import numpy as np

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

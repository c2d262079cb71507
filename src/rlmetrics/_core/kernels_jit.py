"""The numba kernels of :mod:`rlmetrics._core.kernels` (imported only when numba is).

Top-level functions, so that numba's on-disk cache finds them again in a new process: a
compiled function defined in a closure is keyed by its closure's contents, and a closure
holding other compiled functions never matches (each process would compile afresh and add
files to ``__pycache__``). :mod:`rlmetrics._core.kernels` documents what they compute.
"""

from __future__ import annotations

import numba
import numba.extending
import numpy

#: Columns per block of the token kernel: long enough to amortise the per-block reductions,
#: short enough that partly masked blocks (the end of a response) stay cheap.
_BLOCK = 256

# Reassociation lets LLVM vectorise the float64 accumulations; no-NaN/no-inf assumptions
# are NOT made (NaN in a valid slot must still propagate to the sums).
_FAST = {"reassoc", "contract", "nsz"}


def narrow(k, like):  # type: ignore[no-untyped-def]
    return k


@numba.extending.overload(narrow)
def _narrow(k, like):  # type: ignore[no-untyped-def]
    # numba widens integer arithmetic to int64: cast keys back to the bits' width so that
    # int32 keys of float32 data vectorise eight lanes wide.
    kind = like.dtype
    return lambda k, like: kind(k)


@numba.njit(cache=True, nogil=True, inline="always")
def attention_counts(row, split):  # type: ignore[no-untyped-def]
    """(nonzero entries before ``split``, nonzero entries from it, entries other than 0/1)."""
    # Row views indexed from 0: no negative-index wraparound, so the loops vectorise.
    p_row = row[:split]
    q_row = row[split:]
    p_n = 0
    p_one = 0
    for j in range(p_row.shape[0]):
        v = p_row[j]
        p_n += 1 if v != 0 else 0
        p_one += 1 if v == 1 else 0
    r_n = 0
    r_one = 0
    for j in range(q_row.shape[0]):
        v = q_row[j]
        r_n += 1 if v != 0 else 0
        r_one += 1 if v == 1 else 0
    return p_n, r_n, (p_n - p_one) + (r_n - r_one)


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def token_rows(  # type: ignore[no-untyped-def]
    adv,
    ret,
    val,
    adv_bits,
    ret_bits,
    val_bits,
    mask,
    use_critic,
    magnitude,
    scores,
    rewards,
    attention,
    split,
):
    """The fused per-row token kernel (:func:`rlmetrics._core.kernels.token_rows_kernel` says what
    it takes and returns).

    One loop on purpose, and the one function exempt from the package's limit of 60 lines a
    function (``tests/test_architecture.py``): every sum, centred moment and extreme of a row is
    accumulated in the same pass over its column blocks, so that each input is read from memory
    once. Split into helpers, each would either make its own pass over the data (the passes this
    kernel exists to save) or take and return the row's nineteen running counts, sums and extremes at
    every block; and the inner loops' vectorisation was measured in this form
    (``bench/bench_data_metrics.py``), so a split would have to be measured again.
    """
    n_rows, width = mask.shape
    sums = numpy.zeros((n_rows, 8), dtype=numpy.float64)
    keys = numpy.empty((n_rows, 6), dtype=numpy.int64)
    seq = numpy.zeros((n_rows, 5), dtype=numpy.float64)
    lowest = numpy.int64(-(2**62))
    highest = numpy.int64(2**62)
    # Key arithmetic in the bits' own integer type (int32 for float32: eight lanes).
    consts = numpy.empty(3, dtype=adv_bits.dtype)
    consts[0] = 0
    consts[1] = magnitude
    consts[2] = -magnitude - 1
    k_zero = consts[0]
    mag = consts[1]
    k_lo = consts[2]
    k_hi = consts[1]
    split = min(max(split, 0), attention.shape[1])
    for i in range(n_rows):
        # Sequence-level: score and reward sums, prompt/response lengths (same row, same pass).
        # Row views indexed from 0: no negative-index wraparound, so the loops vectorise.
        s_row = scores[i]
        w_row = rewards[i]
        s_s = 0.0
        w_s = 0.0
        for j in range(s_row.shape[0]):
            s_s += numpy.float64(s_row[j])
        for j in range(w_row.shape[0]):
            w_s += numpy.float64(w_row[j])
        p_n, r_n, att_bad = attention_counts(attention[i], split)
        seq[i, 0] = s_s
        seq[i, 1] = w_s
        seq[i, 2] = p_n
        seq[i, 3] = r_n
        seq[i, 4] = att_bad
        # Token-level, in column blocks: a block whose mask is all zero is skipped (its
        # values are never read), one that is all one runs without selects.
        n = 0
        bad = 0
        first = -1
        r_shift = 0.0
        d_shift = 0.0
        a_s = 0.0
        r_s = 0.0
        r_c = 0.0
        r_c2 = 0.0
        v_s = 0.0
        d_s = 0.0
        d_c = 0.0
        d_c2 = 0.0
        a_hi = k_lo
        a_lo = k_hi
        r_hi = k_lo
        r_lo = k_hi
        v_hi = k_lo
        v_lo = k_hi
        for j0 in range(0, width, _BLOCK):
            m_b = mask[i, j0 : j0 + _BLOCK]
            c_on = 0
            c_one = 0
            for j in range(m_b.shape[0]):
                mv = m_b[j]
                c_on += 1 if mv != 0 else 0
                c_one += 1 if mv == 1 else 0
            if c_on == 0:
                continue
            n += c_on
            bad += c_on - c_one
            if first < 0:
                # The row's first valid token: the shift that centres the second moments.
                first = 0
                while m_b[first] == 0:
                    first += 1
                first += j0
                r_shift = numpy.float64(ret[i, first])
                d_shift = r_shift - numpy.float64(val[i, first])
            a_b = adv[i, j0 : j0 + _BLOCK]
            r_b = ret[i, j0 : j0 + _BLOCK]
            v_b = val[i, j0 : j0 + _BLOCK]
            ak_b = adv_bits[i, j0 : j0 + _BLOCK]
            rk_b = ret_bits[i, j0 : j0 + _BLOCK]
            vk_b = val_bits[i, j0 : j0 + _BLOCK]
            if c_one == m_b.shape[0]:
                for j in range(m_b.shape[0]):
                    a64 = numpy.float64(a_b[j])
                    r64 = numpy.float64(r_b[j])
                    a_s += a64
                    r_s += r64
                    rc = r64 - r_shift
                    r_c += rc
                    r_c2 += rc * rc
                    # max/min on the floats' order-preserving integer keys: integer
                    # max/min vectorise, float max/min with NaN semantics do not.
                    b = ak_b[j]
                    k = narrow(b ^ (mag if b < k_zero else k_zero), ak_b)
                    a_hi = max(a_hi, k)
                    a_lo = min(a_lo, k)
                    b = rk_b[j]
                    k = narrow(b ^ (mag if b < k_zero else k_zero), rk_b)
                    r_hi = max(r_hi, k)
                    r_lo = min(r_lo, k)
                if use_critic:
                    for j in range(m_b.shape[0]):
                        v64 = numpy.float64(v_b[j])
                        d = numpy.float64(r_b[j]) - v64
                        v_s += v64
                        d_s += d
                        dc = d - d_shift
                        d_c += dc
                        d_c2 += dc * dc
                        b = vk_b[j]
                        k = narrow(b ^ (mag if b < k_zero else k_zero), vk_b)
                        v_hi = max(v_hi, k)
                        v_lo = min(v_lo, k)
            else:
                for j in range(m_b.shape[0]):
                    on = m_b[j] != 0
                    a64 = numpy.float64(a_b[j])
                    r64 = numpy.float64(r_b[j])
                    # Selects, not multiplies: a NaN in a masked-out slot must not leak in.
                    a_s += a64 if on else 0.0
                    r_s += r64 if on else 0.0
                    rc = (r64 - r_shift) if on else 0.0
                    r_c += rc
                    r_c2 += rc * rc
                    b = ak_b[j]
                    k = narrow(b ^ (mag if b < k_zero else k_zero), ak_b)
                    a_hi = max(a_hi, k if on else k_lo)
                    a_lo = min(a_lo, k if on else k_hi)
                    b = rk_b[j]
                    k = narrow(b ^ (mag if b < k_zero else k_zero), rk_b)
                    r_hi = max(r_hi, k if on else k_lo)
                    r_lo = min(r_lo, k if on else k_hi)
                if use_critic:
                    for j in range(m_b.shape[0]):
                        on = m_b[j] != 0
                        v64 = numpy.float64(v_b[j])
                        d = numpy.float64(r_b[j]) - v64
                        v_s += v64 if on else 0.0
                        d_s += d if on else 0.0
                        dc = (d - d_shift) if on else 0.0
                        d_c += dc
                        d_c2 += dc * dc
                        b = vk_b[j]
                        k = narrow(b ^ (mag if b < k_zero else k_zero), vk_b)
                        v_hi = max(v_hi, k if on else k_lo)
                        v_lo = min(v_lo, k if on else k_hi)
        sums[i, 7] = bad
        if n == 0:
            for c in range(0, 6, 2):
                keys[i, c] = lowest
                keys[i, c + 1] = highest
            continue
        sums[i, 0] = n
        sums[i, 1] = a_s
        sums[i, 2] = r_s
        # Centred second moments of the row (shifted data: no cancellation).
        sums[i, 3] = r_c2 - r_c * r_c / n
        keys[i, 0] = a_hi
        keys[i, 1] = a_lo
        keys[i, 2] = r_hi
        keys[i, 3] = r_lo
        if use_critic:
            sums[i, 4] = v_s
            sums[i, 5] = d_s
            sums[i, 6] = d_c2 - d_c * d_c / n
            keys[i, 4] = v_hi
            keys[i, 5] = v_lo
        else:
            keys[i, 4] = lowest
            keys[i, 5] = highest
    return sums, keys, seq


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def attention_lengths(attention, split):  # type: ignore[no-untyped-def]
    n_rows, width = attention.shape
    out = numpy.empty((n_rows, 3), dtype=numpy.float64)
    split = min(max(split, 0), width)
    for i in range(n_rows):
        out[i, 0], out[i, 1], out[i, 2] = attention_counts(attention[i], split)
    return out


@numba.njit(cache=True, nogil=True, fastmath=False)
def w_token(e, s, one):  # type: ignore[no-untyped-def]
    """verl's ``1 - 2 exp(old_log_probs) + sum_pi_squared`` given ``e = exp(old_log_probs)``.

    Compiled with fast-math explicitly off (a callee otherwise inherits its caller's flags), so
    that no reassociation changes verl's order of operations (``2 e`` is exact, then
    ``1 - 2 e``, then ``+ s``, each rounded to the dtype).
    """
    return (one - (e + e)) + s


@numba.njit(cache=True, nogil=True, fastmath=_FAST)
def variance_rows(mask, e, spi, adv, rho, use_is, one, clamp, out, row0):  # type: ignore[no-untyped-def]
    n_rows, width = e.shape
    bad = 0
    for i in range(n_rows):
        # Row views indexed from 0: no negative-index wraparound, so the loops vectorise.
        m_row = mask[i]
        e_row = e[i]
        s_row = spi[i]
        a_row = adv[i]
        cnt = 0.0
        a_s = 0.0
        w_s = 0.0
        wo_s = 0.0
        r_s = 0.0
        if use_is:
            r_row = rho[i]
            for j in range(width):
                x = m_row[j]
                bad |= x & ~1
                on = x != 0
                wt = w_token(e_row[j], s_row[j], one)
                r = r_row[j]
                r2 = r * r
                # Selects, not multiplies: a NaN in a masked-out slot must not leak in.
                cnt += 1.0 if on else 0.0
                a_s += numpy.float64(a_row[j]) if on else 0.0
                w_s += numpy.float64(wt * r2) if on else 0.0
                # min(r2, clamp) that keeps a NaN r2
                wo_s += numpy.float64(wt * (clamp if r2 >= clamp else r2)) if on else 0.0
                r_s += numpy.float64(r) if on else 0.0
        else:
            for j in range(width):
                x = m_row[j]
                bad |= x & ~1
                on = x != 0
                wt = w_token(e_row[j], s_row[j], one)
                cnt += 1.0 if on else 0.0
                a_s += numpy.float64(a_row[j]) if on else 0.0
                w_s += numpy.float64(wt) if on else 0.0
        o = out[row0 + i]
        o[0] = cnt
        o[1] = a_s
        o[2] = w_s
        o[3] = wo_s
        o[4] = r_s
    return bad


# --- the token-id text statistics (rlmetrics.training.text) -----------------------------------------

#: Odd 64-bit multiplier of the n-gram hash (golden ratio): a bijection of the running code.
_GRAM_MUL = numpy.uint64(0x9E3779B97F4A7C15)
_ID_LIMIT = 2**32
#: Hash-set slots per n-gram, at least: a load of at most 1/4 keeps most inserts at one probe. At
#: 1/2 the probe count varies enough to mispredict a branch per n-gram (twice the time, measured
#: on the 2-core Xeon VM: ``bench/RESULTS.md``); the set of a 4,096-token row (16K slots, 192 KB)
#: still fits the L2 cache.
_SLOTS_PER_GRAM = 4


@numba.njit(cache=True, nogil=True)
def gather_row(ids_row, mask_row, units):  # type: ignore[no-untyped-def]
    """The row's selected ids, in order, into ``units`` (int64); a zero-width ``mask_row`` selects
    every id. Returns (how many, mask entries other than 0/1, selected ids outside [0, 2**32))."""
    bad_id = 0
    if mask_row.shape[0] == 0:
        for j in range(ids_row.shape[0]):
            v = numpy.int64(ids_row[j])
            units[j] = v
            bad_id += 1 if (v < 0 or v >= _ID_LIMIT) else 0
        return ids_row.shape[0], 0, bad_id
    k = 0
    bad_mask = 0
    for j in range(ids_row.shape[0]):
        m = mask_row[j]
        on = m != 0
        bad_mask += 0 if (m == 0 or m == 1) else 1
        v = numpy.int64(ids_row[j])
        units[k] = v  # written always, kept only when selected: no branch
        k += 1 if on else 0
        bad_id += 1 if (on and (v < 0 or v >= _ID_LIMIT)) else 0
    return k, bad_mask, bad_id


@numba.njit(cache=True, nogil=True)
def distinct_grams(units, length, n, slots, hashes):  # type: ignore[no-untyped-def]
    """Exact number of distinct ``n``-grams of ``units[:length]`` (0 under ``n`` units).

    An open-addressing hash set of at least :data:`_SLOTS_PER_GRAM` slots an n-gram (a power of
    two, linear probing): ``slots`` holds each distinct n-gram's start plus one (0: empty),
    ``hashes`` its hash; equal hashes are confirmed on the units, so the count is exact. The hash
    is polynomial and rolled along the row (one step an n-gram whatever ``n``: a loop over the
    ``n`` units, of a length known only at run time, was measured 1.6x slower), mixed once more
    for the slot (its top bits).
    """
    count = length - n + 1
    if count <= 0:
        return 0
    size = 2
    shift = 63
    while size < _SLOTS_PER_GRAM * count:
        size <<= 1
        shift -= 1
    slots[:size] = 0
    top = numpy.uint64(shift)
    h = numpy.uint64(0)
    drop = numpy.uint64(1)  # _GRAM_MUL ** (n - 1): the weight of the unit leaving the window
    for q in range(n):
        h = h * _GRAM_MUL + numpy.uint64(units[q])
        drop = drop * _GRAM_MUL if q > 0 else drop
    found = 0
    for j in range(count):
        if j > 0:
            h = (h - numpy.uint64(units[j - 1]) * drop) * _GRAM_MUL + numpy.uint64(units[j + n - 1])
        s = numpy.int64(((h ^ (h >> numpy.uint64(31))) * _GRAM_MUL) >> top)
        while True:
            p = slots[s] - 1
            if p < 0:
                slots[s] = j + 1
                hashes[s] = h
                found += 1
                break
            if hashes[s] == h:
                q = 0
                while q < n and units[p + q] == units[j + q]:
                    q += 1
                if q == n:
                    break
            s = (s + 1) & (size - 1)
    return found


@numba.njit(cache=True, nogil=True)
def row_ends_in_loop(units, length, repeats, max_period):  # type: ignore[no-untyped-def]
    """:func:`rlmetrics.training.text.ends_in_loop` of ``units[:length]``."""
    for p in range(1, min(max_period, length // repeats) + 1):
        if units[length - 1] != units[length - 1 - p]:  # cheap rejection of most periods
            continue
        j = length - (repeats - 1) * p
        while j < length and units[j] == units[j - p]:
            j += 1
        if j == length:
            return True
    return False


@numba.njit(cache=True, nogil=True)
def first_match(units, length, tag):  # type: ignore[no-untyped-def]
    """Start of the first occurrence of ``tag`` in ``units[:length]``, or -1."""
    k = tag.shape[0]
    for j in range(length - k + 1):
        q = 0
        while q < k and units[j + q] == tag[q]:
            q += 1
        if q == k:
            return j
    return -1


@numba.njit(cache=True, nogil=True)
def think_lengths(units, length, open_tag, close_tag):  # type: ignore[no-untyped-def]
    """(closed, thinking length, answer length) of ``units[:length]``, as ``text.py`` defines them."""
    n_open = open_tag.shape[0]
    end = first_match(units, length, close_tag)
    start = first_match(units, length, open_tag)
    if end >= 0:
        since = start + n_open if 0 <= start <= end - n_open else 0
        return 1, end - since, length - end - close_tag.shape[0]
    if start >= 0:
        return 0, length - start - n_open, 0
    return 0, 0, length


@numba.njit(cache=True, nogil=True)
def text_rows(ids, mask, n, repeats, max_period, open_tag, close_tag):  # type: ignore[no-untyped-def]
    n_rows, width = ids.shape
    out = numpy.zeros((n_rows, 6), dtype=numpy.int64)
    units = numpy.empty(width, dtype=numpy.int64)
    size = 2
    while size < _SLOTS_PER_GRAM * width:
        size <<= 1
    slots = numpy.empty(size, dtype=numpy.int32)
    hashes = numpy.empty(size, dtype=numpy.uint64)
    bad_mask = 0
    bad_id = 0
    for i in range(n_rows):
        length, row_bad_mask, row_bad_id = gather_row(ids[i], mask[i], units)
        bad_mask += row_bad_mask
        bad_id += row_bad_id
        out[i, 0] = length
        out[i, 1] = distinct_grams(units, length, n, slots, hashes)
        out[i, 2] = row_ends_in_loop(units, length, repeats, max_period)
        if close_tag.shape[0] > 0:
            out[i, 3], out[i, 4], out[i, 5] = think_lengths(units, length, open_tag, close_tag)
    return out, bad_mask, bad_id

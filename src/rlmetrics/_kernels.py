"""Fused CPU kernels (optional, with numba): every token statistic in one pass over the data.

numpy and eager torch need one pass over memory per operation (mask, multiply, sum, max, min,
centre, square ...), about thirty passes for ``compute_data_metrics``. These kernels read each
input once, accumulating in float64. They release the GIL: the caller spreads row blocks over a
thread pool (plain threads degrade gracefully on a busy machine, where OpenMP's spinning
barriers collapse). They are used for CPU inputs when
numba is installed (``pip install 'rlmetrics[fast]'``); without it the numpy path gives the
same numbers, slower. Set ``RLMETRICS_NO_NUMBA=1`` to force the numpy path.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import numpy

__all__ = [
    "ROW_KEY_FIELDS",
    "ROW_SEQ_FIELDS",
    "ROW_SUM_FIELDS",
    "attention_lengths_kernel",
    "float_keys_to_values",
    "token_rows_kernel",
]

#: Columns of the per-row sums table that :func:`token_rows_kernel` fills.
ROW_SUM_FIELDS = (
    "n",
    "adv_sum",
    "ret_sum",
    "ret_m2",
    "val_sum",
    "diff_sum",
    "diff_m2",
    "n_invalid",
)
#: Columns of its per-row sequence table.
ROW_SEQ_FIELDS = ("score_sum", "reward_sum", "prompt_len", "response_len", "attention_invalid")
#: Columns of its per-row extremes table (order-preserving integer keys of the floats).
ROW_KEY_FIELDS = ("adv_max", "adv_min", "ret_max", "ret_min", "val_max", "val_min")


def float_keys_to_values(keys: numpy.ndarray, dtype: numpy.dtype) -> numpy.ndarray:
    """Invert the kernels' order-preserving map from float bits to integers."""
    bits = 8 * numpy.dtype(dtype).itemsize
    magnitude = (1 << (bits - 1)) - 1
    k = keys.astype(numpy.int64)
    b = k ^ ((k >> (bits - 1)) & magnitude)
    int_type = numpy.int32 if bits == 32 else numpy.int64
    return b.astype(int_type).view(dtype)


@cache
def _compiled() -> tuple[Any, Any] | None:
    if os.environ.get("RLMETRICS_NO_NUMBA"):
        return None
    try:
        import numba
    except ImportError:
        return None

    # Reassociation lets LLVM vectorise the float64 accumulations; no-NaN/no-inf assumptions
    # are NOT made (NaN in a valid slot must still propagate to the sums).
    fast = {"reassoc", "contract", "nsz"}

    @numba.njit(cache=True, nogil=True, fastmath=fast)
    def token_rows(  # type: ignore[no-untyped-def]
        adv,
        ret,
        val,
        adv_bits,
        ret_bits,
        val_bits,
        mask,
        use_critic,
        sign_shift,
        magnitude,
        scores,
        rewards,
        attention,
        split,
    ):
        n_rows, width = mask.shape
        sums = numpy.zeros((n_rows, 8), dtype=numpy.float64)
        keys = numpy.empty((n_rows, 6), dtype=numpy.int64)
        seq = numpy.zeros((n_rows, 5), dtype=numpy.float64)
        lowest = numpy.int64(-(2**62))
        highest = numpy.int64(2**62)
        for i in range(n_rows):
            # Sequence-level: score and reward sums, prompt/response lengths (same row, same pass).
            s_s = 0.0
            w_s = 0.0
            for j in range(scores.shape[1]):
                s_s += numpy.float64(scores[i, j])
            for j in range(rewards.shape[1]):
                w_s += numpy.float64(rewards[i, j])
            p_n = 0
            r_n = 0
            a_bad = 0
            for j in range(split):
                v = attention[i, j]
                p_n += 1 if v != 0 else 0
                a_bad += 1 if (v != 0 and v != 1) else 0
            for j in range(split, attention.shape[1]):
                v = attention[i, j]
                r_n += 1 if v != 0 else 0
                a_bad += 1 if (v != 0 and v != 1) else 0
            seq[i, 0] = s_s
            seq[i, 1] = w_s
            seq[i, 2] = p_n
            seq[i, 3] = r_n
            seq[i, 4] = a_bad
            # The row's first valid token: the shift that centres the second moments.
            first = -1
            for j in range(width):
                if mask[i, j] != 0:
                    first = j
                    break
            if first < 0:
                for c in range(0, 6, 2):
                    keys[i, c] = lowest
                    keys[i, c + 1] = highest
                continue
            r_shift = numpy.float64(ret[i, first])
            n = 0.0
            bad = 0.0
            a_s = 0.0
            r_s = 0.0
            r_c = 0.0
            r_c2 = 0.0
            a_hi = lowest
            a_lo = highest
            r_hi = lowest
            r_lo = highest
            for j in range(first, width):
                mv = mask[i, j]
                on = mv != 0
                a = numpy.float64(adv[i, j])
                r = numpy.float64(ret[i, j])
                # Selects, not multiplies: a NaN in a masked-out slot must not leak in.
                n += 1.0 if on else 0.0
                bad += 1.0 if (on and mv != 1) else 0.0
                a_s += a if on else 0.0
                r_s += r if on else 0.0
                rc = (r - r_shift) if on else 0.0
                r_c += rc
                r_c2 += rc * rc
                # max/min on the floats' order-preserving integer keys: integer max/min
                # vectorise, float max/min with NaN semantics do not.
                b = numpy.int64(adv_bits[i, j])
                k = b ^ ((b >> sign_shift) & magnitude)
                a_hi = max(a_hi, k if on else lowest)
                a_lo = min(a_lo, k if on else highest)
                b = numpy.int64(ret_bits[i, j])
                k = b ^ ((b >> sign_shift) & magnitude)
                r_hi = max(r_hi, k if on else lowest)
                r_lo = min(r_lo, k if on else highest)
            sums[i, 0] = n
            sums[i, 1] = a_s
            sums[i, 2] = r_s
            # Centred second moments of the row (shifted data: no cancellation).
            sums[i, 3] = r_c2 - r_c * r_c / n
            sums[i, 7] = bad
            keys[i, 0] = a_hi
            keys[i, 1] = a_lo
            keys[i, 2] = r_hi
            keys[i, 3] = r_lo
            v_hi = lowest
            v_lo = highest
            if use_critic:
                d_shift = r_shift - numpy.float64(val[i, first])
                v_s = 0.0
                d_s = 0.0
                d_c = 0.0
                d_c2 = 0.0
                for j in range(first, width):
                    on = mask[i, j] != 0
                    v = numpy.float64(val[i, j])
                    d = numpy.float64(ret[i, j]) - v
                    v_s += v if on else 0.0
                    d_s += d if on else 0.0
                    dc = (d - d_shift) if on else 0.0
                    d_c += dc
                    d_c2 += dc * dc
                    b = numpy.int64(val_bits[i, j])
                    k = b ^ ((b >> sign_shift) & magnitude)
                    v_hi = max(v_hi, k if on else lowest)
                    v_lo = min(v_lo, k if on else highest)
                sums[i, 4] = v_s
                sums[i, 5] = d_s
                sums[i, 6] = d_c2 - d_c * d_c / n
            keys[i, 4] = v_hi
            keys[i, 5] = v_lo
        return sums, keys, seq

    @numba.njit(cache=True, nogil=True, fastmath=fast)
    def attention_lengths(attention, split):  # type: ignore[no-untyped-def]
        n_rows, width = attention.shape
        out = numpy.empty((n_rows, 3), dtype=numpy.float64)
        for i in range(n_rows):
            p = 0
            r = 0
            bad = 0
            for j in range(split):
                v = attention[i, j]
                p += 1 if v != 0 else 0
                bad += 1 if (v != 0 and v != 1) else 0
            for j in range(split, width):
                v = attention[i, j]
                r += 1 if v != 0 else 0
                bad += 1 if (v != 0 and v != 1) else 0
            out[i, 0] = p
            out[i, 1] = r
            out[i, 2] = bad
        return out

    return token_rows, attention_lengths


def token_rows_kernel() -> Any:
    """The fused per-row token kernel, or ``None`` without numba.

    ``kernel(adv, ret, val, adv_bits, ret_bits, val_bits, mask, use_critic, sign_shift,
    magnitude, scores, rewards, attention, split) -> (sums (B, 8) float64, keys (B, 6) int64,
    seq (B, 5) float64)``: the ``*_bits`` arguments are the value arrays viewed as same-width
    integers, ``sign_shift``/``magnitude`` their width - 1 and ``2**(width - 1) - 1``; columns
    :data:`ROW_SUM_FIELDS`, :data:`ROW_KEY_FIELDS` (:func:`float_keys_to_values` turns keys
    back into floats) and :data:`ROW_SEQ_FIELDS` (row sums of ``scores`` and ``rewards``,
    attention-mask counts before and after column ``split``; pass zero-width arrays to skip
    them). ``mask`` may be any integer, bool or float array; entries other than 0/1 are counted
    in ``n_invalid`` (``attention_invalid`` for the attention mask).
    """
    compiled = _compiled()
    return None if compiled is None else compiled[0]


def attention_lengths_kernel() -> Any:
    """The fused prompt/response length kernel, or ``None`` without numba.

    ``kernel(attention_mask, split) -> (B, 3) float64``: prompt length (columns before
    ``split``), response length, and entries other than 0/1.
    """
    compiled = _compiled()
    return None if compiled is None else compiled[1]

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

__all__ = ["ROW_FIELDS", "attention_lengths_kernel", "token_rows_kernel"]

#: Columns of the per-row table that :func:`token_rows_kernel` fills.
ROW_FIELDS = (
    "n",
    "adv_sum",
    "adv_max",
    "adv_min",
    "ret_sum",
    "ret_max",
    "ret_min",
    "ret_m2",
    "val_sum",
    "val_max",
    "val_min",
    "diff_sum",
    "diff_m2",
    "n_invalid",
)


@cache
def _compiled() -> tuple[Any, Any] | None:
    if os.environ.get("RLMETRICS_NO_NUMBA"):
        return None
    try:
        import numba
    except ImportError:
        return None

    @numba.njit(cache=True, nogil=True)
    def token_rows(adv, ret, val, mask, use_critic):  # type: ignore[no-untyped-def]
        n_rows, width = mask.shape
        out = numpy.empty((n_rows, 14), dtype=numpy.float64)
        for i in range(n_rows):
            n = 0
            bad = 0
            a_s = 0.0
            a_hi = -numpy.inf
            a_lo = numpy.inf
            r_s = 0.0
            r_hi = -numpy.inf
            r_lo = numpy.inf
            r_c = 0.0
            r_c2 = 0.0
            v_s = 0.0
            v_hi = -numpy.inf
            v_lo = numpy.inf
            d_s = 0.0
            d_c = 0.0
            d_c2 = 0.0
            r_shift = 0.0
            d_shift = 0.0
            for j in range(width):
                mv = mask[i, j]
                if mv == 0:
                    continue
                if mv != 1:
                    bad += 1
                a = numpy.float64(adv[i, j])
                r = numpy.float64(ret[i, j])
                if n == 0:
                    r_shift = r
                n += 1
                a_s += a
                a_hi = max(a_hi, a)
                a_lo = min(a_lo, a)
                r_s += r
                r_hi = max(r_hi, r)
                r_lo = min(r_lo, r)
                rc = r - r_shift
                r_c += rc
                r_c2 += rc * rc
                if use_critic:
                    v = numpy.float64(val[i, j])
                    d = r - v
                    if n == 1:
                        d_shift = d
                    v_s += v
                    d_s += d
                    v_hi = max(v_hi, v)
                    v_lo = min(v_lo, v)
                    dc = d - d_shift
                    d_c += dc
                    d_c2 += dc * dc
            out[i, 0] = n
            out[i, 1] = a_s
            out[i, 2] = a_hi
            out[i, 3] = a_lo
            out[i, 4] = r_s
            out[i, 5] = r_hi
            out[i, 6] = r_lo
            # Centred second moments of the row (shifted data: no cancellation).
            out[i, 7] = r_c2 - r_c * r_c / n if n > 0 else 0.0
            out[i, 8] = v_s
            out[i, 9] = v_hi
            out[i, 10] = v_lo
            out[i, 11] = d_s
            out[i, 12] = d_c2 - d_c * d_c / n if n > 0 else 0.0
            out[i, 13] = bad
        return out

    @numba.njit(cache=True, nogil=True)
    def attention_lengths(attention, split):  # type: ignore[no-untyped-def]
        n_rows, width = attention.shape
        out = numpy.empty((n_rows, 3), dtype=numpy.float64)
        for i in range(n_rows):
            p = 0
            r = 0
            bad = 0
            for j in range(width):
                v = attention[i, j]
                if v != 0:
                    if v != 1:
                        bad += 1
                    if j < split:
                        p += 1
                    else:
                        r += 1
            out[i, 0] = p
            out[i, 1] = r
            out[i, 2] = bad
        return out

    return token_rows, attention_lengths


import numpy  # noqa: E402  (used inside the jitted functions)


def token_rows_kernel() -> Any:
    """The fused per-row token kernel, or ``None`` without numba.

    ``kernel(adv, ret, val, mask, use_critic) -> (B, 14) float64`` with columns
    :data:`ROW_FIELDS`; ``mask`` any integer, bool or float array (entries other than 0/1 are
    counted in ``n_invalid``).
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

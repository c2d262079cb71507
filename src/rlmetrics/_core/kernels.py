"""Fused CPU kernels (optional, with numba): every token statistic in one pass over the data.

numpy and eager torch need one pass over memory per operation (mask, select, sum, max, min,
centre, square ...), about thirty passes for ``compute_data_metrics``. These kernels read each
input at most once, accumulating in float64; the token kernel works in column blocks of
``_BLOCK`` (256) and skips the values of blocks whose mask is all zero (padding), running blocks
whose mask is all one without selects. Loops index row views from 0 (no negative-index
wraparound, which would turn loads into gathers) and keep float32 extremes as int32 keys, so
they vectorise eight lanes wide where they can. They run on the caller's thread and release
the GIL while they do (other threads of the program keep running).

The text statistics of token ids (:mod:`rlmetrics.training.text`) have one too: a row's
lengths, distinct n-grams (a hash set, where numpy sorts), loop and thinking span in one pass.

They are used for large enough CPU inputs when numba is installed
(``pip install 'rlmetrics[fast]'``, see :data:`FUSED_MIN_ELEMENTS`); otherwise the array-API
path gives the same numbers, slower. Set ``RLMETRICS_NO_NUMBA=1`` to never load them.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import numpy

__all__ = [
    "FUSED_MIN_ELEMENTS",
    "ROW_KEY_FIELDS",
    "ROW_SEQ_FIELDS",
    "ROW_SUM_FIELDS",
    "attention_lengths_kernel",
    "float_keys_to_values",
    "text_rows_kernel",
    "token_rows_kernel",
    "variance_rows_kernel",
]

#: Elements (rows x columns of a token tensor) from which the fused kernels are used: where
#: they pay for their load time. Importing numba and loading the cached kernels costs about
#: 0.2 s once per process (compiling them, about 2 s, once per installation). At this size
#: (e.g. 256 x 1024) a call takes ~1 ms with the kernel and ~6 ms on the array-API path, so the
#: load is won back within ~40 calls; at 32K elements the saving is ~1 ms a call and a short
#: script never wins it back.
FUSED_MIN_ELEMENTS = 1 << 18

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
def _compiled() -> tuple[Any, Any, Any, Any] | None:
    if os.environ.get("RLMETRICS_NO_NUMBA"):
        return None
    try:
        from rlmetrics._core import kernels_jit as jit
    except ImportError:  # numba missing
        return None
    return jit.token_rows, jit.attention_lengths, jit.variance_rows, jit.text_rows


def token_rows_kernel() -> Any:
    """The fused per-row token kernel, or ``None`` without numba.

    ``kernel(adv, ret, val, adv_bits, ret_bits, val_bits, mask, use_critic, magnitude, scores,
    rewards, attention, split) -> (sums (B, 8) float64, keys (B, 6) int64, seq (B, 5)
    float64)``: the ``*_bits`` arguments are the value arrays viewed as same-width integers,
    ``magnitude`` is ``2**(width - 1) - 1``; columns :data:`ROW_SUM_FIELDS`,
    :data:`ROW_KEY_FIELDS` (:func:`float_keys_to_values` turns keys back into floats) and
    :data:`ROW_SEQ_FIELDS` (row sums of ``scores`` and ``rewards``, attention-mask counts
    before and after column ``split``; pass zero-width arrays to skip them). ``mask`` may be
    any integer, bool or float array; entries other than 0/1 are counted in ``n_invalid``
    (``attention_invalid`` for the attention mask).
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


def variance_rows_kernel() -> Any:
    """The fused per-row kernel of the variance proxies, or ``None`` without numba.

    ``kernel(mask, e, spi, adv, rho, use_is, one, clamp, out, row0) -> bad``: for each row ``i``
    of the int64 0/1 ``mask`` it writes into ``out[row0 + i]`` (float64, 5 columns) the row's
    count of response tokens, its sums of ``adv``, of ``W = (one - 2 e) + spi`` per token in
    the dtype of ``e`` (``W rho**2`` when ``use_is``), of ``W min(rho**2, clamp)`` and of
    ``rho`` (0 without ``use_is``; pass any array of the dtype of ``e`` as ``rho`` then).
    ``e`` is ``exp(old_log_probs)``; ``e``, ``spi`` and ``rho`` share one float dtype, as do
    ``one`` and ``clamp``. Masked-out entries are never added (a NaN there does not leak in).
    Returns the bitwise or of ``x & ~1`` over the mask entries: 0 exactly when every entry is
    0 or 1.
    """
    compiled = _compiled()
    return None if compiled is None else compiled[2]


def text_rows_kernel() -> Any:
    """The per-row kernel of the token-id text statistics, or ``None`` without numba.

    ``kernel(ids, mask, n, repeats, max_period, open_tag, close_tag) -> (rows (B, 6) int64,
    bad_mask, bad_ids)``: for each row of the integer ``ids``, the tokens ``mask`` selects (any
    integer, bool or float array; a zero-width one selects every token), in order: their number,
    distinct ``n``-grams (exact; 0 under ``n`` tokens), whether they end in a loop
    (:func:`rlmetrics.training.text.ends_in_loop`), and with a non-empty ``close_tag`` (int64
    ids; ``open_tag`` likewise) whether the thinking span is closed, its length and the answer's,
    as :mod:`rlmetrics.training.text` defines them. ``bad_mask`` counts mask entries other than 0
    and 1, ``bad_ids`` selected ids outside ``[0, 2**32)``; a row's numbers are only meaningful
    when both are 0.
    """
    compiled = _compiled()
    return None if compiled is None else compiled[3]

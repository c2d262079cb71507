"""Prompt and response lengths of a batch, as verl derives them."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlmetrics._core.array import (
    array_namespace,
    as_float,
    describe,
    mask_and_invalid_count,
    raise_invalid_mask,
)
from rlmetrics._core.batch import BatchView
from rlmetrics._core.kernels import FUSED_MIN_ELEMENTS, attention_lengths_kernel

__all__ = ["attention_split", "prompt_response_lengths", "response_width"]


def response_width(view: BatchView) -> int:
    """Padded response width ``R``: ``responses.shape[-1]`` (or ``response_mask``'s)."""
    if view.has("responses"):
        return int(view.tensor("responses").shape[-1])
    return int(view.tensor("response_mask", why="needed for the response width").shape[-1])


def prompt_response_lengths(view: BatchView) -> tuple[Any, Any, Any]:
    """Per-sample prompt and response lengths as float arrays of shape ``(B,)``.

    The third result counts attention-mask entries that are neither 0 nor 1 (``None`` when
    already checked on the host, as for numpy); torch callers check it after their one transfer.

    Uses ``prompt_length`` and ``response_length`` when the batch holds both (as verl does);
    otherwise splits ``attention_mask`` ``(B, P + R)`` into its first ``P`` and last ``R``
    columns, ``R`` being the width of ``responses``.
    """
    if view.has("prompt_length") and view.has("response_length"):
        prompt_len = view.tensor("prompt_length")
        response_len = view.tensor("response_length")
        if prompt_len.ndim != 1 or tuple(prompt_len.shape) != tuple(response_len.shape):
            raise ValueError(
                f"{view.arg}['prompt_length'] and {view.arg}['response_length'] must both have shape (B,); "
                f"got {tuple(prompt_len.shape)} and {tuple(response_len.shape)}"
            )
        return as_float(prompt_len), as_float(response_len), None
    attention, split = attention_split(view)
    xp = array_namespace(attention)
    if xp.isdtype(attention.dtype, "real floating") and attention.dtype not in (xp.float32, xp.float64):
        # bf16/fp16 masks: counted in float32 (exact to 2**24; fp16 sums stop at 2048, bf16 at 256),
        # and numba has no float16
        attention = xp.astype(attention, xp.float32)
    fused = isinstance(attention, np.ndarray) and attention.size >= FUSED_MIN_ELEMENTS
    kernel = attention_lengths_kernel() if fused else None
    if kernel is not None and attention.dtype.kind in "biuf":
        rows = kernel(attention, split)
        if rows[:, 2].any():
            raise_invalid_mask(attention, f"{view.arg}['attention_mask']")
        return rows[:, 0].astype(np.float32), rows[:, 1].astype(np.float32), None
    _, n_invalid = mask_and_invalid_count(attention, f"{view.arg}['attention_mask']")
    if attention.dtype == xp.bool:
        attention = xp.astype(attention, xp.int32)
    # Valid 0/1 masks: the row sums are the lengths (no boolean temporaries needed).
    prompt_len = xp.sum(attention[:, :split], axis=-1)
    response_len = xp.sum(attention[:, split:], axis=-1)
    return xp.astype(prompt_len, xp.float32), xp.astype(response_len, xp.float32), n_invalid


def attention_split(view: BatchView) -> tuple[Any, int]:
    """``attention_mask`` ``(B, P + R)`` and ``P``, the column where the responses start (validated)."""
    width = response_width(view)
    attention = view.tensor(
        "attention_mask", why="prompt and response lengths come from it when prompt_length is absent"
    )
    if attention.ndim != 2:
        raise ValueError(
            f"{view.arg}['attention_mask'] must have shape (B, P + R); got {describe(attention)}"
        )
    if view.has("prompts"):
        p_width = int(view.tensor("prompts").shape[-1])
        if p_width + width != attention.shape[-1]:
            raise ValueError(
                f"{view.arg}['attention_mask'] has {attention.shape[-1]} columns but prompts ({p_width}) + "
                f"responses ({width}) make {p_width + width}: the prompt/response split does not fit"
            )
    elif width > attention.shape[-1]:
        raise ValueError(
            f"{view.arg}['attention_mask'] has {attention.shape[-1]} columns, fewer than the response "
            f"width {width}"
        )
    return attention, attention.shape[-1] - width

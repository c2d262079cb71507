"""Synthetic batches in verl's layout and a tolerance-aware comparison with verl's results."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

__all__ = ["assert_close_to_reference", "make_batch", "to_numpy"]


def make_batch(
    batch_size: int,
    prompt_width: int,
    response_width: int,
    *,
    seed: int = 0,
    mask: str = "prefix",
    mask_dtype: Any = None,
    dtype: Any = None,
    aborted: float = 0.1,
    offset: float = 0.0,
    sparse_scores: bool = False,
    non_tensors: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A random batch in verl's layout: (tensors, non_tensors) as torch CPU tensors / numpy arrays.

    ``mask``: "prefix" (valid tokens first), "holes" (multi-turn: prefix with gaps), "random"
    (independent 0/1 per token). ``aborted``: fraction of samples with a zero-length response.
    """
    g = torch.Generator().manual_seed(seed)
    dtype = dtype or torch.float32
    mask_dtype = mask_dtype or torch.int64
    lengths = torch.randint(1, response_width + 1, (batch_size,), generator=g)
    if batch_size > 1:
        lengths[torch.rand(batch_size, generator=g) < aborted] = 0
    lengths[torch.rand(batch_size, generator=g) < 0.1] = response_width  # some clipped
    cols = torch.arange(response_width)
    response_mask = cols[None, :] < lengths[:, None]
    if mask == "holes":
        holes = torch.rand(batch_size, response_width, generator=g) < 0.2
        response_mask = response_mask & ~holes
    elif mask == "random":
        response_mask = (torch.rand(batch_size, response_width, generator=g) < 0.6) & (lengths[:, None] > 0)
    # The attention mask's response part counts the generated tokens (verl: response_length).
    resp_attention = cols[None, :] < lengths[:, None]
    p_len = torch.randint(1, prompt_width + 1, (batch_size,), generator=g)
    p_len[torch.rand(batch_size, generator=g) < 0.1] = prompt_width
    prompt_attention = torch.arange(prompt_width)[None, :] >= (prompt_width - p_len)[:, None]

    def rnd(scale: float = 1.0) -> Any:
        return (torch.randn(batch_size, response_width, generator=g) * scale + offset).to(dtype)

    if sparse_scores:  # verifiable reward: one 0/1 score on the last response token
        scores = torch.zeros(batch_size, response_width)
        last = (lengths - 1).clamp(min=0)
        scores[torch.arange(batch_size), last] = (torch.rand(batch_size, generator=g) < 0.5).float()
        scores = scores * (lengths[:, None] > 0)
        scores = scores.to(dtype)
    else:
        scores = rnd()
    tensors = {
        "token_level_scores": scores,
        "token_level_rewards": scores - 0.01 * rnd().abs() if not sparse_scores else scores.clone(),
        "advantages": rnd(),
        "returns": rnd(0.5),
        "values": rnd(0.5),
        "response_mask": response_mask.to(mask_dtype),
        "attention_mask": torch.cat([prompt_attention, resp_attention], dim=1).to(mask_dtype),
        "prompts": torch.zeros(batch_size, prompt_width, dtype=torch.int64),
        "responses": torch.zeros(batch_size, response_width, dtype=torch.int64),
    }
    extra: dict[str, Any] = {}
    if non_tensors:
        rng = np.random.default_rng(seed)
        extra["__num_turns__"] = rng.integers(1, 6, batch_size)
        extra["tool_call_counts"] = rng.integers(0, 4, batch_size)
    return tensors, extra


def to_numpy(tensors: dict[str, Any]) -> dict[str, Any]:
    return {k: v.float().numpy() if v.dtype == torch.bfloat16 else v.numpy() for k, v in tensors.items()}


def assert_close_to_reference(
    ours: dict[str, float], ref: dict[str, Any], *, scale: dict[str, float] | None = None, rtol: float = 1e-6
) -> None:
    """Same keys, and each value within ``rtol`` relative (NaN where the reference is NaN).

    ``scale`` gives, per key, the magnitude of the summands behind a mean: float32 summation in
    the reference is only accurate relative to that, not to a mean that cancels to near zero.
    """
    assert set(ours) == set(ref), (
        f"keys differ: only ours {set(ours) - set(ref)}, only ref {set(ref) - set(ours)}"
    )
    for key, expected in ref.items():
        expected = float(expected)
        got = ours[key]
        if np.isnan(expected):
            assert np.isnan(got), f"{key}: expected NaN, got {got}"
            continue
        tol = rtol * max(abs(expected), (scale or {}).get(key, 0.0))
        assert abs(got - expected) <= tol, f"{key}: ours {got!r} vs verl {expected!r} (tol {tol:.3g})"

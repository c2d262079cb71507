"""rlmetrics._core.lengths: prompt/response lengths against per-row loops, numba and numpy paths, errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rlmetrics._core import lengths as _lengths
from rlmetrics._core.batch import as_batch
from rlmetrics._core.kernels import attention_lengths_kernel
from rlmetrics._core.lengths import attention_split, prompt_response_lengths, response_width


def _use_kernel(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    """The fused numba kernel at every size, or never."""
    if on:
        pytest.importorskip("numba")
        if attention_lengths_kernel() is None:
            pytest.skip("numba disabled (RLMETRICS_NO_NUMBA)")
        monkeypatch.setattr(_lengths, "FUSED_MIN_ELEMENTS", 0)
    else:
        monkeypatch.setattr(_lengths, "attention_lengths_kernel", lambda: None)


@pytest.fixture(params=["numba", "numpy"], ids=["numba", "numpy"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test through the fused numba kernel and through the array-API path."""
    _use_kernel(monkeypatch, request.param == "numba")
    return str(request.param)


def verl_attention(
    rng: np.random.Generator, batch_size: int, prompt_width: int, resp_width: int, layout: str
) -> np.ndarray:
    """A 0/1 attention mask (B, P + R): left-padded prompts (suffix ones), right-padded responses."""
    p_len = rng.integers(0, prompt_width + 1, batch_size)
    r_len = rng.integers(0, resp_width + 1, batch_size)
    prompt = np.arange(prompt_width)[None, :] >= (prompt_width - p_len)[:, None]
    response = np.arange(resp_width)[None, :] < r_len[:, None]
    if layout == "holes":  # multi-turn: gaps inside the prefix / suffix
        prompt &= rng.random(prompt.shape) > 0.2
        response &= rng.random(response.shape) > 0.2
    elif layout == "random":
        prompt = rng.random(prompt.shape) < 0.5
        response = rng.random(response.shape) < 0.5
    return np.concatenate([prompt, response], axis=1)


def loop_lengths(attention: np.ndarray, split: int) -> tuple[list[float], list[float]]:
    """The slow reference: count the non-zero entries of each row on each side of ``split``."""
    prompt, response = [], []
    for row in np.asarray(attention).tolist():
        prompt.append(float(sum(1 for v in row[:split] if v != 0)))
        response.append(float(sum(1 for v in row[split:] if v != 0)))
    return prompt, response


LAYOUTS = [
    pytest.param(1, 3, 4, "prefix", id="B1-P3-R4-prefix"),
    pytest.param(7, 5, 9, "prefix", id="B7-P5-R9-prefix"),
    pytest.param(16, 8, 1, "prefix", id="B16-P8-R1-prefix"),
    pytest.param(9, 0, 6, "prefix", id="B9-P0-R6-prefix"),
    pytest.param(33, 17, 40, "holes", id="B33-P17-R40-holes"),
    pytest.param(20, 6, 11, "random", id="B20-P6-R11-random"),
    pytest.param(0, 4, 5, "prefix", id="B0-empty"),
]
NUMPY_DTYPES = [bool, np.int8, np.uint8, np.int32, np.int64, np.float32, np.float64]


# Every dtype on the array-API path; on the kernel a few (each dtype is a compiled signature).
ENGINE_DTYPES = [pytest.param("numpy", d, id=f"numpy-{np.dtype(d).name}") for d in NUMPY_DTYPES] + [
    pytest.param("numba", d, id=f"numba-{np.dtype(d).name}") for d in (bool, np.int8, np.int64, np.float32)
]


@pytest.mark.parametrize(("batch_size", "prompt_width", "resp_width", "layout"), LAYOUTS)
@pytest.mark.parametrize(("engine", "dtype"), ENGINE_DTYPES)
@pytest.mark.parametrize("with_prompts", [True, False], ids=["prompts", "no-prompts"])
def test_numpy_lengths_match_a_per_row_loop(
    monkeypatch, engine, batch_size, prompt_width, resp_width, layout, dtype, with_prompts
):
    _use_kernel(monkeypatch, engine == "numba")
    rng = np.random.default_rng(batch_size * 1000 + prompt_width * 10 + resp_width)
    attention = verl_attention(rng, batch_size, prompt_width, resp_width, layout).astype(dtype)
    batch = {"attention_mask": attention, "responses": np.zeros((batch_size, resp_width), dtype=np.int64)}
    if with_prompts:
        batch["prompts"] = np.zeros((batch_size, prompt_width), dtype=np.int64)
    prompt_len, response_len, n_invalid = prompt_response_lengths(as_batch(batch))
    expected_prompt, expected_response = loop_lengths(attention, prompt_width)
    assert n_invalid is None
    assert prompt_len.dtype == np.float32 and response_len.dtype == np.float32
    assert prompt_len.shape == response_len.shape == (batch_size,)
    assert prompt_len.tolist() == expected_prompt
    assert response_len.tolist() == expected_response


def test_many_rows(engine):
    # Above FUSED_MIN_ELEMENTS: the size the kernel is used at by default.
    rng = np.random.default_rng(11)
    batch_size, prompt_width, resp_width = 4500, 64, 192
    attention = verl_attention(rng, batch_size, prompt_width, resp_width, "prefix").astype(np.int8)
    view = as_batch({"attention_mask": attention, "response_mask": np.ones((batch_size, resp_width))})
    prompt_len, response_len, _ = prompt_response_lengths(view)
    np.testing.assert_array_equal(prompt_len, attention[:, :prompt_width].sum(axis=1))
    expected_prompt, expected_response = loop_lengths(attention[:50], prompt_width)
    assert prompt_len[:50].tolist() == expected_prompt
    assert response_len[:50].tolist() == expected_response
    np.testing.assert_array_equal(response_len, attention[:, prompt_width:].sum(axis=1))


TORCH_DTYPES = ["bool", "int8", "int64", "float32", "float16"]


@pytest.mark.parametrize(("batch_size", "prompt_width", "resp_width", "layout"), LAYOUTS[:6])
@pytest.mark.parametrize("dtype", TORCH_DTYPES, ids=TORCH_DTYPES)
def test_torch_lengths_match_a_per_row_loop(batch_size, prompt_width, resp_width, layout, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(batch_size + 7 * resp_width)
    attention_np = verl_attention(rng, batch_size, prompt_width, resp_width, layout)
    attention = torch.from_numpy(attention_np).to(getattr(torch, dtype))
    view = as_batch({"attention_mask": attention, "responses": torch.zeros(batch_size, resp_width)})
    prompt_len, response_len, n_invalid = prompt_response_lengths(view)
    expected_prompt, expected_response = loop_lengths(attention_np, prompt_width)
    assert prompt_len.dtype == torch.float32 and response_len.dtype == torch.float32
    assert prompt_len.tolist() == expected_prompt
    assert response_len.tolist() == expected_response
    if dtype == "bool":
        assert n_invalid is None
    else:
        assert int(n_invalid) == 0


def test_torch_invalid_entries_are_counted_not_raised():
    torch = pytest.importorskip("torch")
    attention = torch.tensor([[1, 1, 2, 0], [0, 3, 1, -1]])
    _, response_len, n_invalid = prompt_response_lengths(
        as_batch({"attention_mask": attention, "responses": torch.zeros(2, 2)})
    )
    assert torch.is_tensor(n_invalid) and int(n_invalid) == 3  # 2, 3 and -1; the caller raises
    assert response_len.shape == (2,)


@pytest.mark.parametrize(
    ("dtype", "bad", "found"),
    [(np.int64, 2, "2"), (np.int8, -1, "-1"), (np.float32, 0.5, "0.5"), (np.float64, np.nan, "nan")],
    ids=["int64-2", "int8-neg", "float32-half", "float64-nan"],
)
@pytest.mark.parametrize("side", ["prompt", "response"], ids=["in-prompt", "in-response"])
def test_numpy_invalid_entries_raise(engine, dtype, bad, found, side):
    rng = np.random.default_rng(12)
    attention = verl_attention(rng, 5, 4, 6, "prefix").astype(dtype)
    attention[3, 1 if side == "prompt" else 7] = bad
    view = as_batch({"attention_mask": attention, "responses": np.zeros((5, 6))}, arg="data")
    with pytest.raises(ValueError) as info:
        prompt_response_lengths(view)
    message = str(info.value)
    assert message.startswith(f"data['attention_mask'] must hold only 0 and 1; found {found} (")
    assert f"shape (5, 10) and dtype {np.dtype(dtype).name}" in message


# --- prompt_length / response_length given directly -------------------------------------------


@pytest.mark.parametrize(
    ("make", "dtype"),
    [
        (lambda v: np.asarray(v, dtype=np.int64), np.float32),
        (lambda v: np.asarray(v, dtype=np.float64), np.float64),
        (lambda v: np.asarray(v, dtype=np.float16), np.float32),
    ],
    ids=["int64", "float64", "float16"],
)
def test_explicit_lengths_are_used_without_attention(make, dtype):
    view = as_batch({"prompt_length": make([3, 5]), "response_length": make([7, 0])})
    prompt_len, response_len, n_invalid = prompt_response_lengths(view)
    assert n_invalid is None
    assert prompt_len.dtype == dtype and response_len.dtype == dtype
    assert prompt_len.tolist() == [3.0, 5.0] and response_len.tolist() == [7.0, 0.0]


def test_explicit_lengths_win_over_the_attention_mask():
    attention = np.ones((2, 5), dtype=np.int64)
    view = as_batch(
        {
            "prompt_length": np.array([1, 2]),
            "response_length": np.array([2, 2]),
            "attention_mask": attention,
            "responses": np.zeros((2, 3)),
        }
    )
    prompt_len, response_len, _ = prompt_response_lengths(view)
    assert prompt_len.tolist() == [1.0, 2.0] and response_len.tolist() == [2.0, 2.0]


@pytest.mark.parametrize(
    ("prompt_shape", "response_shape"),
    [((2,), (3,)), ((2, 1), (2, 1)), ((), ())],
    ids=["length-mismatch", "2d", "0d"],
)
def test_explicit_lengths_must_be_vectors_of_one_shape(prompt_shape, response_shape):
    view = as_batch({"prompt_length": np.ones(prompt_shape), "response_length": np.ones(response_shape)})
    with pytest.raises(ValueError) as info:
        prompt_response_lengths(view)
    assert str(info.value) == (
        "batch['prompt_length'] and batch['response_length'] must both have shape (B,); "
        f"got {prompt_shape} and {response_shape}"
    )


def test_only_one_explicit_length_falls_back_to_the_attention_mask():
    attention = np.array([[0, 1, 1, 1, 0]])
    view = as_batch(
        {"prompt_length": np.array([9]), "attention_mask": attention, "responses": np.zeros((1, 3))}
    )
    prompt_len, response_len, _ = prompt_response_lengths(view)
    assert prompt_len.tolist() == [1.0] and response_len.tolist() == [2.0]


# --- response_width / attention_split ---------------------------------------------------------


@pytest.mark.parametrize(
    ("batch", "expected"),
    [
        ({"responses": np.zeros((2, 7)), "response_mask": np.zeros((2, 3))}, 7),
        ({"response_mask": np.zeros((2, 3))}, 3),
        ({"responses": np.zeros((0, 4))}, 4),
    ],
    ids=["responses-first", "response_mask", "empty-batch"],
)
def test_response_width(batch, expected):
    assert response_width(as_batch(batch)) == expected


def test_response_width_needs_responses_or_response_mask():
    with pytest.raises(ValueError) as info:
        response_width(as_batch({"attention_mask": np.ones((2, 3))}))
    assert str(info.value) == (
        "batch is missing the tensor 'response_mask' (needed for the response width); "
        "tensors present: attention_mask"
    )


@pytest.mark.parametrize(
    ("prompt_width", "resp_width", "with_prompts"),
    [(3, 4, True), (3, 4, False), (0, 5, True), (0, 5, False), (6, 0, False)],
    ids=["prompts", "no-prompts", "no-prompt-columns", "no-prompt-columns-no-prompts", "no-response-columns"],
)
def test_attention_split(prompt_width, resp_width, with_prompts):
    attention = np.ones((2, prompt_width + resp_width))
    batch = {"attention_mask": attention, "responses": np.zeros((2, resp_width))}
    if with_prompts:
        batch["prompts"] = np.zeros((2, prompt_width))
    got, split = attention_split(as_batch(batch))
    assert got is attention and split == prompt_width


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        (
            {"attention_mask": np.ones((2, 8)), "prompts": np.zeros((2, 3)), "responses": np.zeros((2, 4))},
            "data['attention_mask'] has 8 columns but prompts (3) + responses (4) make 7: "
            "the prompt/response split does not fit",
        ),
        (
            {"attention_mask": np.ones((2, 6)), "prompts": np.zeros((2, 3)), "responses": np.zeros((2, 4))},
            "data['attention_mask'] has 6 columns but prompts (3) + responses (4) make 7: "
            "the prompt/response split does not fit",
        ),
        (
            {"attention_mask": np.ones((2, 3)), "responses": np.zeros((2, 4))},
            "data['attention_mask'] has 3 columns, fewer than the response width 4",
        ),
        (
            {"attention_mask": np.ones(7), "responses": np.zeros((2, 4))},
            "data['attention_mask'] must have shape (B, P + R); got ndarray of shape (7,) and dtype float64",
        ),
        (
            {"attention_mask": np.ones((2, 3, 4)), "responses": np.zeros((2, 4))},
            "data['attention_mask'] must have shape (B, P + R); "
            "got ndarray of shape (2, 3, 4) and dtype float64",
        ),
        (
            {"responses": np.zeros((2, 4)), "advantages": np.zeros((2, 4))},
            "data is missing the tensor 'attention_mask' (prompt and response lengths come from it when "
            "prompt_length is absent); tensors present: advantages, responses",
        ),
    ],
    ids=["too-wide", "too-narrow", "narrower-than-responses", "1d", "3d", "missing"],
)
def test_split_errors(engine, batch, message):
    view = as_batch(batch, arg="data")
    with pytest.raises(ValueError) as info:
        attention_split(view)
    assert str(info.value) == message
    with pytest.raises(ValueError) as info:
        prompt_response_lengths(view)
    assert str(info.value) == message


# --- low-precision float masks (numba has no float16; fp16/bf16 sums would round) -------------


def test_float16_numpy_mask_with_numba(monkeypatch):
    _use_kernel(monkeypatch, True)
    attention = np.array([[0, 1, 1, 1, 0]], dtype=np.float16)
    prompt_len, response_len, _ = prompt_response_lengths(
        as_batch({"attention_mask": attention, "responses": np.zeros((1, 3))})
    )
    assert prompt_len.tolist() == [1.0] and response_len.tolist() == [2.0]


def _long_row(lib: Any, dtype: Any, n_ones: int, width: int) -> Any:
    row = np.zeros((1, width))
    row[0, :n_ones] = 1
    return row.astype(dtype) if lib is np else lib.from_numpy(row).to(dtype)


@pytest.mark.parametrize("numba_kernel", [False, True], ids=["numpy-path", "numba-path"])
@pytest.mark.parametrize(
    ("lib_name", "dtype_name", "n_ones"),
    [("torch", "bfloat16", 257), ("torch", "float16", 2049), ("numpy", "float16", 2049)],
    ids=["torch-bf16-257", "torch-fp16-2049", "numpy-fp16-2049"],
)
def test_low_precision_float_masks_give_exact_lengths(
    monkeypatch, lib_name, dtype_name, n_ones, numba_kernel
):
    """Lengths are counted in at least float32: exact beyond 256 (bf16) and 2048 (fp16) ones."""
    lib = pytest.importorskip(lib_name)
    _use_kernel(monkeypatch, numba_kernel)
    width = 2100
    attention = _long_row(lib, getattr(lib, dtype_name), n_ones, width)
    responses = np.zeros((1, width)) if lib is np else lib.zeros(1, width)
    _, response_len, _ = prompt_response_lengths(
        as_batch({"attention_mask": attention, "responses": responses})
    )
    assert float(response_len[0]) == float(n_ones)

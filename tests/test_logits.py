"""Tests of rlmetrics.policy.logits: float64 softmax references, verl parity, bounded memory, errors."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics.policy.logits import (
    _chunk_rows,
    entropy_and_sum_pi_squared_from_logits,
    entropy_from_logits,
    sum_pi_squared_from_logits,
)

verl_F = pytest.importorskip("verl.utils.torch_functional")


def reference(logits: torch.Tensor, temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """float64 softmax: (entropy, sum pi^2) per row."""
    z = torch.as_tensor(logits).double() / temperature
    p = torch.softmax(z, dim=-1)
    return (-torch.special.xlogy(p, p).sum(-1)).numpy(), (p * p).sum(-1).numpy()


def make_logits(shape: tuple[int, ...], scale: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(*shape, generator=g) * scale
    z.view(-1, shape[-1])[0, : max(1, shape[-1] // 4)] = -math.inf  # masked vocabulary entries
    return z


DTYPES = [
    pytest.param(torch.bfloat16, id="torch-bf16"),
    pytest.param(torch.float16, id="torch-fp16"),
    pytest.param(torch.float32, id="torch-fp32"),
    pytest.param(torch.float64, id="torch-fp64"),
    pytest.param(np.float16, id="numpy-fp16"),
    pytest.param(np.float32, id="numpy-fp32"),
    pytest.param(np.float64, id="numpy-fp64"),
]
CHUNKS = [
    pytest.param({"chunk_size": 1}, id="chunk-1"),
    pytest.param({"chunk_size": 7}, id="chunk-7"),
    pytest.param({}, id="default"),
    pytest.param({"max_chunk_bytes": 3000}, id="tiny-byte-budget"),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("chunk", CHUNKS)
def test_matches_float64_softmax(dtype: object, chunk: dict) -> None:
    z = make_logits((5, 6, 301), scale=6.0, seed=0)
    if isinstance(dtype, torch.dtype):
        x = z.to(dtype)
        exact = x
    else:
        x = z.numpy().astype(dtype)  # type: ignore[call-overload]
        exact = torch.from_numpy(x)
    ref_h, ref_s = reference(exact)
    h, s = entropy_and_sum_pi_squared_from_logits(x, **chunk)
    s_only = sum_pi_squared_from_logits(x, **chunk)
    h_only = entropy_from_logits(x, **chunk)
    for out in (h, s, s_only, h_only):
        assert tuple(out.shape) == (5, 6)
        assert type(out) is type(x)
    tol = 1e-12 if dtype in (torch.float64, np.float64) else 1e-5
    np.testing.assert_allclose(np.asarray(s_only), ref_s, rtol=tol)
    np.testing.assert_allclose(np.asarray(s), ref_s, rtol=tol)
    np.testing.assert_allclose(np.asarray(h_only), ref_h, rtol=tol, atol=tol)
    np.testing.assert_allclose(np.asarray(h), ref_h, rtol=tol, atol=tol)


def test_torch_input_is_not_modified_and_has_no_grad() -> None:
    z = make_logits((4, 50), scale=3.0, seed=1).requires_grad_(True)
    before = z.detach().clone()
    s = sum_pi_squared_from_logits(z, chunk_size=2)
    h = entropy_from_logits(z, chunk_size=2)
    assert torch.equal(z.detach(), before)
    assert not s.requires_grad and not h.requires_grad


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0], ids=["t0.5", "t1", "t2"])
def test_temperature_and_verl_parity(temperature: float) -> None:
    z = make_logits((9, 211), scale=4.0, seed=2)
    z[0, :10] = 0.0  # verl's formula needs finite logits for a clean comparison
    z = z.clamp(min=-30)
    ref_h, ref_s = reference(z, temperature)
    s = sum_pi_squared_from_logits(z, temperature=temperature, chunk_size=4)
    h = entropy_from_logits(z, temperature=temperature, chunk_size=4)
    np.testing.assert_allclose(s.numpy(), ref_s, rtol=1e-5)
    np.testing.assert_allclose(h.numpy(), ref_h, rtol=1e-5, atol=1e-6)
    scaled = z / temperature
    np.testing.assert_allclose(
        s.numpy(), verl_F.calculate_sum_pi_squared_from_logits(scaled).numpy(), rtol=1e-5
    )
    np.testing.assert_allclose(h.numpy(), verl_F.entropy_from_logits(scaled).numpy(), rtol=1e-5, atol=1e-5)


def test_bf16_more_accurate_than_verl_formula_on_bf16() -> None:
    z = make_logits((16, 4096), scale=5.0, seed=3)
    zb = z.clamp(min=-50).to(torch.bfloat16)
    _, ref_s = reference(zb)
    ours = sum_pi_squared_from_logits(zb).double().numpy()
    theirs = verl_F.calculate_sum_pi_squared_from_logits(zb).double().numpy()
    assert np.max(np.abs(ours / ref_s - 1)) < 1e-5
    assert np.max(np.abs(theirs / ref_s - 1)) > np.max(np.abs(ours / ref_s - 1))


def test_degenerate_rows() -> None:
    z = torch.zeros(4, 5)
    z[1] = -math.inf
    z[2, 0] = math.nan
    z[3] = torch.tensor([0.0, -math.inf, -math.inf, -math.inf, -math.inf])
    h, s = entropy_and_sum_pi_squared_from_logits(z)
    assert s[0].item() == pytest.approx(0.2) and h[0].item() == pytest.approx(math.log(5))
    assert math.isnan(s[1]) and math.isnan(h[1]) and math.isnan(s[2]) and math.isnan(h[2])
    assert s[3].item() == 1.0 and h[3].item() == 0.0


def test_extra_memory_is_bounded_by_the_chunk_budget() -> None:
    x = np.random.default_rng(0).standard_normal((512, 4096)).astype(np.float16)  # 4 MiB
    budget = 64 * 1024
    for fn, temps in ((sum_pi_squared_from_logits, 1), (entropy_from_logits, 2)):
        tracemalloc.start()
        fn(x, max_chunk_bytes=budget)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        # A chunk is budget // (4 V temps) rows (at least one row), plus row vectors and the output.
        rows = _chunk_rows(512, 4096, temps, None, budget)
        assert rows == max(1, budget // (4 * 4096 * temps))
        assert peak < rows * 4096 * 4 * temps * 2 + 512 * 8 + 64 * 1024, (fn.__name__, peak)
        naive_peak = 512 * 4096 * 4
        assert peak < naive_peak / 10


@pytest.mark.parametrize(
    ("logits", "kwargs", "exc", "match"),
    [
        pytest.param([[0.0, 1.0]], {}, TypeError, "numpy array or a torch tensor; got list", id="list"),
        pytest.param(np.zeros((2, 3), dtype=np.int64), {}, TypeError, "floating array", id="int-numpy"),
        pytest.param(torch.zeros(2, 3, dtype=torch.int32), {}, TypeError, "floating tensor", id="int-torch"),
        pytest.param(np.zeros((2, 0), dtype=np.float32), {}, ValueError, r"V >= 1", id="empty-vocab"),
        pytest.param(
            np.zeros((2, 3), dtype=np.float32),
            {"chunk_size": 0},
            ValueError,
            "chunk_size must be an integer >= 1; got 0",
            id="chunk-0",
        ),
        pytest.param(
            np.zeros((2, 3), dtype=np.float32),
            {"chunk_size": 1.5},
            TypeError,
            "chunk_size must be an integer >= 1; got float 1.5",
            id="chunk-float",
        ),
        pytest.param(
            np.zeros((2, 3), dtype=np.float32),
            {"max_chunk_bytes": -1},
            ValueError,
            "max_chunk_bytes must be an integer >= 1; got -1",
            id="bytes-negative",
        ),
        pytest.param(
            np.zeros((2, 3), dtype=np.float32),
            {"temperature": 0.0},
            ValueError,
            "temperature must be a finite number > 0; got 0.0",
            id="temperature-0",
        ),
        pytest.param(
            np.zeros((2, 3), dtype=np.float32),
            {"temperature": math.inf},
            ValueError,
            "temperature must be a finite number > 0; got inf",
            id="temperature-inf",
        ),
        pytest.param(
            np.zeros((2, 3), dtype=np.float32),
            {"temperature": "1.0"},
            TypeError,
            "temperature must be a finite number > 0; got str '1.0'",
            id="temperature-str",
        ),
    ],
)
def test_errors(logits: object, kwargs: dict, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        sum_pi_squared_from_logits(logits, **kwargs)


@pytest.mark.parametrize("temperature", [np.float32(2.0), np.float64(2.0), np.int64(2), 2], ids=repr)
def test_numpy_scalar_temperatures_are_accepted(temperature: object) -> None:
    z = np.random.default_rng(3).standard_normal((3, 7)).astype(np.float32)
    np.testing.assert_allclose(
        sum_pi_squared_from_logits(z, temperature=temperature),  # type: ignore[arg-type]
        sum_pi_squared_from_logits(z, temperature=2.0),
        rtol=1e-6,
    )


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 6),
    vocab=st.integers(1, 40),
    scale=st.floats(0.0, 30.0),
    chunk=st.integers(1, 7),
    seed=st.integers(0, 10**6),
)
def test_properties(rows: int, vocab: int, scale: float, chunk: int, seed: int) -> None:
    z = np.random.default_rng(seed).standard_normal((rows, vocab)) * scale
    h, s = entropy_and_sum_pi_squared_from_logits(z.astype(np.float32), chunk_size=chunk)
    h64, s64 = entropy_and_sum_pi_squared_from_logits(z, chunk_size=chunk)
    ref_h, ref_s = reference(torch.from_numpy(z))
    np.testing.assert_allclose(s64, ref_s, rtol=1e-12)
    np.testing.assert_allclose(h64, ref_h, rtol=1e-9, atol=1e-12)
    assert np.all(s >= 1 / vocab * (1 - 1e-5)) and np.all(s <= 1 + 1e-6)
    assert np.all(h >= -1e-5) and np.all(h <= math.log(vocab) + 1e-5)
    # Renyi-2 entropy -log(sum pi^2) never exceeds the Shannon entropy.
    assert np.all(-np.log(s64) <= h64 + 1e-9)

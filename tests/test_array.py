"""rlmetrics._core.array: descriptions, float upcasts, mask validation, scalar checks, host transfers,
CPU tensors as numpy views and row blocks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlmetrics._core import array as _array
from rlmetrics._core.array import (
    as_float,
    check_dense,
    check_finite_scalar,
    check_mask,
    check_same_shape,
    cpu_block_rows,
    describe,
    host_view,
    is_array,
    mask_and_invalid_count,
    prepare_arrays,
    raise_invalid_mask,
    to_host,
    vectors_to_host,
)

torch = pytest.importorskip("torch")


# --- describe ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: np.zeros((2, 3), dtype=np.int8), "ndarray of shape (2, 3) and dtype int8"),
        (lambda: np.zeros((0,), dtype=np.float64), "ndarray of shape (0,) and dtype float64"),
        (lambda: torch.zeros(4, dtype=torch.bfloat16), "tensor of shape (4,) and dtype torch.bfloat16"),
        (lambda: torch.zeros(2, 1, 5, dtype=torch.bool), "tensor of shape (2, 1, 5) and dtype torch.bool"),
        (lambda: [1, 2], "list"),
        (lambda: None, "NoneType"),
    ],
    ids=["numpy-int8", "numpy-empty", "torch-bf16", "torch-bool-3d", "list", "none"],
)
def test_describe(make, expected):
    assert describe(make()) == expected


# --- as_float ---------------------------------------------------------------------------------

AS_FLOAT_CASES = [
    pytest.param(lambda: np.array([1.5, -2.0], dtype=np.float16), np.float32, False, id="np-f16"),
    pytest.param(lambda: np.array([1.5, -2.0], dtype=np.float32), np.float32, True, id="np-f32"),
    pytest.param(lambda: np.array([1.5, -2.0], dtype=np.float64), np.float64, True, id="np-f64"),
    pytest.param(lambda: np.array([1, -2], dtype=np.int32), np.float32, False, id="np-i32"),
    pytest.param(lambda: np.array([True, False]), np.float32, False, id="np-bool"),
    pytest.param(
        lambda: torch.tensor([1.5, -2.0], dtype=torch.bfloat16), torch.float32, False, id="torch-bf16"
    ),
    pytest.param(
        lambda: torch.tensor([1.5, -2.0], dtype=torch.float16), torch.float32, False, id="torch-f16"
    ),
    pytest.param(lambda: torch.tensor([1.5, -2.0], dtype=torch.float32), torch.float32, True, id="torch-f32"),
    pytest.param(lambda: torch.tensor([1.5, -2.0], dtype=torch.float64), torch.float64, True, id="torch-f64"),
    pytest.param(lambda: torch.tensor([1, -2], dtype=torch.int64), torch.float32, False, id="torch-i64"),
    pytest.param(lambda: torch.tensor([True, False]), torch.float32, False, id="torch-bool"),
]


@pytest.mark.parametrize(("make", "dtype", "same_object"), AS_FLOAT_CASES)
def test_as_float_dtype_values_and_no_copy(make, dtype, same_object):
    x = make()
    out = as_float(x)
    assert out.dtype == dtype
    assert (out is x) == same_object
    assert [float(v) for v in out] == [float(v) for v in x]  # values unchanged (all exact)


def test_as_float_with_explicit_namespace():
    from array_api_compat import array_namespace

    x = np.arange(3, dtype=np.int16)
    out = as_float(x, array_namespace(x))
    assert out.dtype == np.float32 and out.tolist() == [0.0, 1.0, 2.0]


# --- check_same_shape -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (lambda: np.zeros((2, 3)), lambda: np.ones((2, 3), dtype=np.int8)),
        (lambda: torch.zeros(4), lambda: np.zeros(4)),
        (lambda: np.zeros(()), lambda: torch.zeros(())),
    ],
    ids=["numpy", "torch-numpy", "0d"],
)
def test_check_same_shape_accepts_equal_shapes(a, b):
    assert check_same_shape(a(), b(), "a", "b") is None


@pytest.mark.parametrize(
    ("shape_a", "shape_b"),
    [((2, 3), (3, 2)), ((4,), (4, 1)), ((), (1,))],
    ids=["transposed", "extra-dim", "0d-vs-1d"],
)
def test_check_same_shape_error_names_both_arguments_and_shapes(shape_a, shape_b):
    with pytest.raises(ValueError, match=r"advantages and response_mask must have the same shape") as info:
        check_same_shape(np.zeros(shape_a), torch.zeros(shape_b), "advantages", "response_mask")
    assert f"got {shape_a} and {shape_b}" in str(info.value)


# --- mask_and_invalid_count / check_mask / raise_invalid_mask -----------------------------------

VALID_NUMPY_DTYPES = [np.int8, np.uint8, np.int32, np.int64, np.uint64, np.float32, np.float64]


@pytest.mark.parametrize("dtype", VALID_NUMPY_DTYPES, ids=[np.dtype(d).name for d in VALID_NUMPY_DTYPES])
def test_numpy_valid_masks_become_boolean_with_no_deferred_count(dtype):
    rng = np.random.default_rng(0)
    bits = rng.random((5, 7)) < 0.5
    as_bool, n_invalid = mask_and_invalid_count(bits.astype(dtype), "mask")
    assert n_invalid is None
    assert as_bool.dtype == np.bool_
    np.testing.assert_array_equal(as_bool, bits)


@pytest.mark.parametrize(
    "make",
    [lambda: np.array([True, False]), lambda: torch.tensor([True, False])],
    ids=["numpy", "torch"],
)
def test_bool_masks_are_returned_as_is(make):
    mask = make()
    as_bool, n_invalid = mask_and_invalid_count(mask, "mask")
    assert as_bool is mask and n_invalid is None


@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.bool_], ids=lambda d: f"empty-{np.dtype(d).name}")
def test_empty_numpy_mask(dtype):
    as_bool, n_invalid = mask_and_invalid_count(np.zeros((0, 3), dtype=dtype), "mask")
    assert as_bool.shape == (0, 3) and n_invalid is None


@pytest.mark.parametrize(
    ("values", "dtype", "found"),
    [
        ([0, 2, 1], np.int64, "2"),
        ([1, -1, 0], np.int32, "-1"),
        ([0, 255], np.uint8, "255"),
        ([1.0, 0.5], np.float32, "0.5"),
        ([0.0, np.nan], np.float64, "nan"),
        ([1, 0, 3], np.int8, "3"),
    ],
    ids=["int64-2", "int32-neg", "uint8-255", "float-half", "float-nan", "int8-3"],
)
def test_numpy_non_binary_masks_raise_naming_the_argument(values, dtype, found):
    mask = np.array(values, dtype=dtype)
    expected = f"batch['response_mask'] must hold only 0 and 1; found {found} ({describe(mask)})"
    with pytest.raises(ValueError) as info:
        mask_and_invalid_count(mask, "batch['response_mask']")
    assert str(info.value) == expected
    with pytest.raises(ValueError, match=r"must hold only 0 and 1"):
        check_mask(mask, "batch['response_mask']")


TORCH_MASK_DTYPES = [torch.int8, torch.int32, torch.int64, torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize(
    "dtype", TORCH_MASK_DTYPES, ids=[str(d).removeprefix("torch.") for d in TORCH_MASK_DTYPES]
)
@pytest.mark.parametrize("seed", [0, 1, 2], ids=["seed0", "seed1", "seed2"])
def test_torch_masks_defer_the_invalid_count(dtype, seed):
    rng = np.random.default_rng(seed)
    values = rng.integers(-2, 4, size=(6, 9))
    values[rng.random(values.shape) < 0.5] = 1  # mostly valid
    mask = torch.from_numpy(values).to(dtype)
    as_bool, n_invalid = mask_and_invalid_count(mask, "mask")
    assert torch.is_tensor(n_invalid) and n_invalid.ndim == 0  # stays a tensor (on device)
    assert int(n_invalid) == int(np.sum((values != 0) & (values != 1)))
    assert as_bool.dtype == torch.bool
    np.testing.assert_array_equal(as_bool.numpy(), values != 0)


def test_torch_valid_mask_counts_zero_and_check_mask_passes():
    rng = np.random.default_rng(3)
    bits = rng.random((4, 5)) < 0.3
    mask = torch.from_numpy(bits.astype(np.float32))
    _, n_invalid = mask_and_invalid_count(mask, "mask")
    assert int(n_invalid) == 0
    out = check_mask(mask, "mask")
    assert out.dtype == torch.bool
    np.testing.assert_array_equal(out.numpy(), bits)


@pytest.mark.parametrize(
    ("values", "dtype", "found"),
    [([0, 5, 1], torch.int64, "5"), ([0.25, 1.0], torch.float32, "0.25"), ([-3, 0], torch.int32, "-3")],
    ids=["int64", "float32", "int32-neg"],
)
def test_check_mask_raises_on_torch_non_binary(values, dtype, found):
    mask = torch.tensor(values, dtype=dtype)
    with pytest.raises(ValueError, match=rf"^m must hold only 0 and 1; found {found} \(tensor of shape"):
        check_mask(mask, "m")


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.array(["0", "1"]),
        lambda: np.array([1 + 0j, 0j]),
        lambda: np.array([0, 1], dtype=object),
        lambda: torch.tensor([1 + 0j, 0j]),
    ],
    ids=["numpy-str", "numpy-complex", "numpy-object", "torch-complex"],
)
def test_unsupported_mask_dtypes_raise_type_error(make):
    mask = make()
    with pytest.raises(TypeError) as info:
        mask_and_invalid_count(mask, "loss_mask")
    message = str(info.value)
    assert message.startswith("loss_mask must be a bool or 0/1 integer mask; got ")
    assert message.endswith(describe(mask))


@pytest.mark.parametrize(
    ("make", "found"),
    [
        (lambda: np.array([[0, 1], [7, 9]]), "7"),
        (lambda: np.array([1.0, -0.5, 2.0]), "-0.5"),
        (lambda: torch.tensor([[1, 1], [0, 4]], dtype=torch.int8), "4"),
        (lambda: torch.tensor([0.0, 1.0, 1.5], dtype=torch.bfloat16), "1.5"),
    ],
    ids=["numpy-2d", "numpy-float", "torch-int8-2d", "torch-bf16"],
)
def test_raise_invalid_mask_reports_the_first_bad_value(make, found):
    mask = make()
    with pytest.raises(ValueError) as info:
        raise_invalid_mask(mask, "attention_mask")
    assert str(info.value) == f"attention_mask must hold only 0 and 1; found {found} ({describe(mask)})"


def test_raise_invalid_mask_without_bad_values_still_raises():
    with pytest.raises(ValueError, match=r"^x must hold only 0 and 1; found nan \(ndarray"):
        raise_invalid_mask(np.array([0, 1, 1]), "x")


# --- check_finite_scalar ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, 3.0),
        (-2.5, -2.5),
        (np.float32(0.25), 0.25),
        (np.int64(7), 7.0),
        (torch.tensor(1.5), 1.5),
        (np.array(4.0), 4.0),
        (True, 1.0),
    ],
    ids=["int", "float", "np-float32", "np-int64", "torch-0d", "np-0d", "bool"],
)
def test_check_finite_scalar_returns_python_float(value, expected):
    out = check_finite_scalar(value, "eps")
    assert type(out) is float and out == expected


@pytest.mark.parametrize(
    "value", [math.nan, math.inf, -math.inf, np.float32("nan")], ids=["nan", "inf", "-inf", "np-nan"]
)
def test_check_finite_scalar_rejects_non_finite(value):
    with pytest.raises(ValueError, match=rf"^clip_ratio must be finite; got {float(value)}$"):
        check_finite_scalar(value, "clip_ratio")


@pytest.mark.parametrize("value", [0, -1e-9, -3], ids=["zero", "tiny-negative", "negative"])
def test_check_finite_scalar_positive(value):
    with pytest.raises(ValueError, match=rf"^n_gpus must be > 0; got {float(value)}$"):
        check_finite_scalar(value, "n_gpus", positive=True)
    assert check_finite_scalar(value, "n_gpus") == float(value)  # fine without positive=True


@pytest.mark.parametrize(
    ("value", "type_name"),
    [(None, "NoneType"), ("abc", "str"), ("1.5", "str"), (b"2", "bytes"), (1j, "complex"), ([1.0], "list")],
    ids=["none", "str", "numeric-str", "bytes", "complex", "list"],
)
def test_check_finite_scalar_rejects_non_numbers(value, type_name):
    with pytest.raises(TypeError) as info:
        check_finite_scalar(value, "lr")
    assert str(info.value) == f"lr must be a real number; got {type_name} {value!r}"


# --- vectors_to_host --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind",
    ["numpy", "torch"],
    ids=["numpy", "torch"],
)
@pytest.mark.parametrize("seed", [0, 1], ids=["seed0", "seed1"])
def test_vectors_to_host_round_trip(kind, seed):
    rng = np.random.default_rng(seed)
    sources = [
        rng.standard_normal(int(rng.integers(1, 9))),
        rng.integers(-5, 5, size=int(rng.integers(1, 9))),
        np.zeros(0),
        rng.standard_normal((2, 3)).astype(np.float32),  # flattened
        rng.random(4) < 0.5,
    ]
    vectors = sources if kind == "numpy" else [torch.from_numpy(np.ascontiguousarray(s)) for s in sources]
    out = vectors_to_host(*vectors)
    assert len(out) == len(sources)
    for got, src in zip(out, sources):
        assert isinstance(got, np.ndarray) and got.dtype == np.float64
        np.testing.assert_array_equal(got, np.asarray(src, dtype=np.float64).reshape(-1))


def test_vectors_to_host_torch_low_precision_and_grad():
    bf16 = torch.tensor([1.5, -0.25, 3.0], dtype=torch.bfloat16)
    grad = torch.tensor([0.1, 0.2], dtype=torch.float64, requires_grad=True) * 2
    a, b = vectors_to_host(bf16, grad)
    assert a.tolist() == [1.5, -0.25, 3.0]
    assert b.tolist() == [0.2, 0.4]


# --- to_host ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], []),
        ([1, 2.5, True], [1.0, 2.5, 1.0]),
        ([np.float64(1 / 3), 2, np.array(4, dtype=np.int32)], [1 / 3, 2.0, 4.0]),
        ([np.array([0.5], dtype=np.float32), 7], [0.5, 7.0]),
        (
            [torch.tensor(1 / 3, dtype=torch.float64), 5, torch.tensor([2], dtype=torch.int64)],
            [1 / 3, 5.0, 2.0],
        ),
        ([torch.tensor(1.5, dtype=torch.bfloat16), torch.tensor(True)], [1.5, 1.0]),
    ],
    ids=["empty", "python-only", "numpy-mixed", "numpy-1-element", "torch-mixed", "torch-bf16-bool"],
)
def test_to_host_keeps_order_and_float64_precision(values, expected):
    out = to_host(values)
    assert out == expected
    assert all(type(v) is float for v in out)


def test_to_host_detaches_and_accepts_explicit_namespace():
    from array_api_compat import array_namespace

    x = torch.tensor(2.0, requires_grad=True)
    y = x * 3
    assert to_host([y, 1], array_namespace(y)) == [6.0, 1.0]


def test_to_host_rejects_non_scalar_arrays():
    with pytest.raises(RuntimeError):
        to_host([torch.tensor([1.0, 2.0])])
    with pytest.raises(ValueError):
        to_host([np.array([1.0, 2.0])])


# --- host_view, prepare_arrays, cpu_block_rows ---------------------------------------------------


def test_prepare_arrays_views_cpu_tensors_without_copy():
    t = torch.arange(6.0).reshape(2, 3)
    _xp, (a, b, h, none), device, on_cpu = prepare_arrays(
        [t, t.bfloat16(), t.half(), None], ["t", "b", "h", "n"]
    )
    assert isinstance(a, np.ndarray) and on_cpu and device is None and none is None
    a[0, 0] = 42.0
    assert t[0, 0].item() == 42.0  # a view, not a copy
    assert b.dtype == np.float32 and h.dtype == np.float32


def test_prepare_arrays_keeps_tensors_when_cpu_tensors_take_the_device_path(monkeypatch):
    monkeypatch.setattr(_array, "_CPU_TENSORS_AS_NUMPY", False)
    t = torch.ones(2, 2, requires_grad=True) * 2
    _xp, (a,), device, on_cpu = prepare_arrays([t], ["t"])
    assert isinstance(a, torch.Tensor) and not a.requires_grad
    assert str(device) == "cpu" and not on_cpu


@pytest.mark.parametrize(
    ("make", "dtype"),
    [
        (lambda: np.ones(3, dtype=np.float16), np.float32),
        (lambda: np.ones(3, dtype=np.int8), np.int8),
        (lambda: torch.ones(3, dtype=torch.int64), np.int64),
        (lambda: torch.ones(3, dtype=torch.bfloat16), np.float32),
    ],
    ids=["numpy-fp16", "numpy-int8", "torch-int64", "torch-bf16"],
)
def test_host_view_dtypes(make, dtype):
    out = host_view(make())
    assert isinstance(out, np.ndarray) and out.dtype == dtype


@pytest.mark.parametrize(
    ("arrays", "exc", "match"),
    [
        pytest.param([np.zeros(2), torch.zeros(2)], TypeError, "must all be numpy arrays", id="mixed"),
        pytest.param(
            [[1.0, 2.0], np.zeros(2)], TypeError, "x0 must be a numpy array or a torch tensor", id="list"
        ),
        pytest.param(
            [torch.zeros(2), torch.zeros(2, device="meta")],
            TypeError,
            r"x1 is on the meta device, a shape without data",
            id="meta",
        ),
        pytest.param(
            [torch.eye(2).to_sparse(), torch.zeros(2, 2)],
            TypeError,
            r"x0 must be a dense tensor",
            id="sparse",
        ),
    ],
)
def test_prepare_arrays_errors(arrays, exc, match):
    with pytest.raises(exc, match=match):
        prepare_arrays(arrays, [f"x{i}" for i in range(len(arrays))])


@pytest.mark.parametrize(
    ("n", "width", "on_cpu", "expected"),
    [
        pytest.param(10, 4096, True, 8, id="cpu-wide"),
        pytest.param(10, 10**6, True, 1, id="cpu-very-wide"),
        pytest.param(10, 4096, False, 10, id="accelerator"),
        pytest.param(0, 4096, False, 1, id="accelerator-empty"),
    ],
)
def test_cpu_block_rows(n, width, on_cpu, expected):
    assert cpu_block_rows(n, width, on_cpu) == expected


#: Tensors whose values cannot be read as one dense array: (make, message).
NOT_DENSE = {
    "meta": (lambda: torch.zeros(3, 4, device="meta"), r"is on the meta device, a shape without data"),
    "sparse-coo": (
        lambda: torch.eye(3, 4).to_sparse(),
        r"must be a dense tensor; got layout torch.sparse_coo",
    ),
    "sparse-csr": (
        lambda: torch.eye(3, 4).to_sparse_csr(),
        r"must be a dense tensor; got layout torch.sparse_csr",
    ),
    "nested": (
        lambda: torch.nested.nested_tensor([torch.zeros(2), torch.zeros(4)]),
        r"must be a dense tensor; got a nested tensor of 2 rows .*to_padded_tensor",
    ),
}


@pytest.mark.parametrize("kind", sorted(NOT_DENSE), ids=sorted(NOT_DENSE))
def test_check_dense_refuses_tensors_without_dense_data_naming_them(kind):
    make, message = NOT_DENSE[kind]
    with pytest.raises(TypeError, match=r"^batch\['advantages'\] " + message):
        check_dense(make(), "batch['advantages']")


@pytest.mark.parametrize(
    "make",
    [lambda: np.zeros((2, 3)), lambda: torch.zeros(2, 3), lambda: torch.zeros(4, 6)[:, ::2], lambda: 1.5],
    ids=["numpy", "torch", "torch-strided-view", "scalar"],
)
def test_check_dense_passes_dense_inputs_through(make):
    x = make()
    assert check_dense(x, "x") is x


def test_describe_a_nested_tensor_without_its_shape():
    nested = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(5)])
    assert describe(nested) == "nested tensor of 2 rows and dtype torch.float32"
    assert is_array(nested) and not is_array([1.0])

"""Array helpers shared by every metric: namespaces, dtypes, validation, one host transfer.

The metric code is written once against the array API (``array_api_compat``) so that numpy
arrays and torch tensors (CPU or CUDA) go through the same lines. torch is never imported
here: it is only touched through the namespace of tensors the caller already passed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from array_api_compat import array_namespace, is_torch_array

__all__ = [
    "array_namespace",
    "as_float",
    "check_dense",
    "check_finite_scalar",
    "check_mask",
    "check_same_shape",
    "cpu_block_rows",
    "describe",
    "host_view",
    "is_array",
    "is_torch_array",
    "mask_and_invalid_count",
    "prepare_arrays",
    "raise_invalid_mask",
    "stays_torch",
    "to_host",
    "vectors_to_host",
]


def is_array(x: Any) -> bool:
    """Whether ``x`` is an array (anything with a shape and a dtype; any torch tensor, nested too)."""
    return bool(is_torch_array(x) or (hasattr(x, "shape") and hasattr(x, "dtype")))


def describe(x: Any) -> str:
    """Short description of an array for error messages: type, shape and dtype."""
    if is_torch_array(x) and x.is_nested:  # a nested tensor has no single shape
        return f"nested tensor of {x.size(0)} rows and dtype {x.dtype}"
    if is_array(x):
        kind = "tensor" if is_torch_array(x) else type(x).__name__
        return f"{kind} of shape {tuple(x.shape)} and dtype {x.dtype}"
    return type(x).__name__


def check_dense(x: Any, name: str) -> Any:
    """``x`` unless it is a torch tensor whose values cannot be read as one dense array.

    A nested (jagged) tensor, a sparse layout (COO, CSR ...) and a tensor on the ``meta``
    device (a shape without data) are refused with a ``TypeError`` naming ``name`` and what to
    do; everything else, numpy arrays included, is returned unchanged.

    Examples
    --------
    >>> check_dense(np.zeros(2), "batch['advantages']").shape
    (2,)
    """
    if not is_torch_array(x):
        return x
    if x.is_nested:
        raise TypeError(
            f"{name} must be a dense tensor; got a {describe(x)}: pad it "
            "(torch.nested.to_padded_tensor) and mark the padding in the mask"
        )
    if str(x.layout) != "torch.strided":
        raise TypeError(
            f"{name} must be a dense tensor; got layout {x.layout} ({describe(x)}): call .to_dense()"
        )
    if x.is_meta:
        raise TypeError(
            f"{name} is on the meta device, a shape without data ({describe(x)}): materialise it first"
        )
    return x


def stays_torch(x: Any) -> bool:
    """Whether ``x`` is a torch tensor that :func:`host_view` leaves as torch (not on the CPU)."""
    return bool(is_torch_array(x) and (not _CPU_TENSORS_AS_NUMPY or x.device.type != "cpu"))


def _is_floating(xp: Any, x: Any) -> bool:
    return bool(xp.isdtype(x.dtype, "real floating"))


def as_float(x: Any, xp: Any | None = None) -> Any:
    """Return ``x`` as a floating array of at least float32 precision (no copy when it already is).

    bf16/fp16 become float32, float64 stays float64, integers and bools become float32.
    """
    xp = xp or array_namespace(x)
    if _is_floating(xp, x) and x.dtype in (xp.float32, xp.float64):
        return x
    return xp.astype(x, xp.float32)


def check_same_shape(a: Any, b: Any, name_a: str, name_b: str) -> None:
    """Raise ``ValueError`` unless ``a`` and ``b`` have the same shape."""
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(
            f"{name_a} and {name_b} must have the same shape; got {tuple(a.shape)} and {tuple(b.shape)}"
        )


def check_mask(mask: Any, name: str) -> Any:
    """Validate a 0/1 mask and return it as a boolean array.

    Accepts bool arrays and integer or floating arrays holding only 0 and 1. On numpy the
    check is one pass (a bitwise-or reduction for integers); torch tensors are checked on their
    device, which costs a host sync: :func:`mask_and_invalid_count` defers it instead.
    """
    as_bool, n_invalid = mask_and_invalid_count(mask, name)
    if n_invalid is not None and int(n_invalid) > 0:
        raise_invalid_mask(mask, name)
    return as_bool


def mask_and_invalid_count(mask: Any, name: str) -> tuple[Any, Any]:
    """(boolean mask, number of entries that are neither 0 nor 1) -- the count stays on device.

    numpy masks are checked here and then the count is ``None``.
    """
    xp = array_namespace(mask)
    if mask.dtype == xp.bool:
        return mask, None
    integral = xp.isdtype(mask.dtype, "integral")
    if not (integral or xp.isdtype(mask.dtype, "real floating")):
        raise TypeError(f"{name} must be a bool or 0/1 integer mask; got {describe(mask)}")
    if isinstance(mask, np.ndarray):
        if integral:
            ok = mask.size == 0 or (int(np.bitwise_or.reduce(mask, axis=None)) & ~1) == 0
        else:
            ok = bool(np.all((mask == 0) | (mask == 1)))
        if not ok:
            raise_invalid_mask(mask, name)
        return mask != 0, None
    as_bool = mask != 0
    n_invalid = xp.count_nonzero(as_bool & (mask != 1))
    return as_bool, n_invalid


def raise_invalid_mask(mask: Any, name: str) -> None:
    """Raise the ``ValueError`` for a mask holding values other than 0 and 1."""
    bad = mask[(mask != 0) & (mask != 1)]
    example = float(bad[0]) if bad.shape[0] else float("nan")
    raise ValueError(f"{name} must hold only 0 and 1; found {example:g} ({describe(mask)})")


def check_finite_scalar(value: Any, name: str, *, positive: bool = False) -> float:
    """Return ``value`` as a float, raising ``ValueError`` if it is not finite (or not > 0).

    Strings are refused (``float("1.5")`` would parse them): a timing or a count read from a
    config as text is a caller's bug worth naming.
    """
    if isinstance(value, str | bytes):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__} {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__} {value!r}") from None
    if not math.isfinite(out):
        raise ValueError(f"{name} must be finite; got {out}")
    if positive and out <= 0:
        raise ValueError(f"{name} must be > 0; got {out}")
    return out


def vectors_to_host(*vectors: Any) -> list[np.ndarray]:
    """Copy several 1-d vectors (numpy, or torch on any device) to float64 numpy in **one** transfer.

    Examples
    --------
    >>> [v.tolist() for v in vectors_to_host(np.array([1.0, 2.0]), np.array([3]))]
    [[1.0, 2.0], [3.0]]
    """
    if vectors and is_torch_array(vectors[0]):
        import torch

        packed = torch.cat([v.reshape(-1).to(torch.float64) for v in vectors]).detach().cpu().numpy()
    else:
        packed = np.concatenate([np.asarray(v, dtype=np.float64).reshape(-1) for v in vectors])
    bounds = np.cumsum([0] + [int(np.prod(v.shape)) for v in vectors])
    return [packed[a:b] for a, b in itertools.pairwise(bounds)]


def to_host(values: Sequence[Any], xp: Any | None = None) -> list[float]:
    """Bring a list of scalars (0-d arrays of one namespace, or Python numbers) to Python floats.

    All array scalars are stacked on their device and copied to the host in **one** transfer,
    in float64.
    """
    idx = [i for i, v in enumerate(values) if hasattr(v, "shape")]
    out = [float(v) if not hasattr(v, "shape") else 0.0 for v in values]
    if not idx:
        return out
    arrays = [values[i] for i in idx]
    xp = xp or array_namespace(*arrays)
    stacked = xp.stack([xp.astype(xp.reshape(a, ()), xp.float64) for a in arrays])
    if is_torch_array(stacked):
        host = stacked.detach().cpu().numpy()
    else:
        host = np.asarray(stacked)
    for j, i in enumerate(idx):
        out[i] = float(host[j])
    return out


# CPU torch tensors are computed on as numpy views (see prepare_arrays). Tests turn this off to
# run, on the CPU, the path that CUDA tensors take.
_CPU_TENSORS_AS_NUMPY = True


def host_view(x: Any) -> Any:
    """A CPU torch tensor as a numpy array (a view: no copy), other arrays unchanged.

    bf16 and fp16 tensors and numpy float16 arrays become float32 copies: the statistics are
    computed in at least float32 (and numba has no float16). Tensors on an accelerator, and
    every tensor while the CPU-as-numpy switch is off, are returned detached and unchanged.
    """
    if is_torch_array(x):
        x = x.detach()
        if not _CPU_TENSORS_AS_NUMPY or x.device.type != "cpu":
            return x
        if x.dtype.is_floating_point and x.element_size() < 4:
            x = x.float()
        return x.numpy()
    if isinstance(x, np.ndarray) and x.dtype == np.float16:
        return x.astype(np.float32)
    return x


def prepare_arrays(arrays: Sequence[Any], names: Sequence[str]) -> tuple[Any, list[Any], Any, bool]:
    """Check one namespace and one device, and view CPU torch tensors as numpy (:func:`host_view`).

    Returns ``(xp, arrays, device, on_cpu)``: on the CPU the metric code runs numpy's
    single-threaded kernels on cache-sized row blocks (:func:`cpu_block_rows`) instead of many
    small multi-threaded torch launches; accelerator tensors stay where they are (``device``).
    ``None`` entries pass through.
    """
    for n, a in zip(names, arrays):
        if a is not None and not is_array(a):
            raise TypeError(f"{n} must be a numpy array or a torch tensor; got {type(a).__name__}")
        check_dense(a, n)
    present = [a for a in arrays if a is not None]
    kinds = {is_torch_array(a) for a in present}
    if len(kinds) > 1:
        described = ", ".join(f"{n}: {describe(a)}" for n, a in zip(names, arrays) if a is not None)
        raise TypeError(f"inputs must all be numpy arrays or all torch tensors; got {described}")
    if kinds == {True}:
        devices = {str(a.device) for a in present}
        if len(devices) > 1:
            described = ", ".join(f"{n} on {a.device}" for n, a in zip(names, arrays) if a is not None)
            raise ValueError(f"inputs must be on one device; got {described}")
    out = [None if a is None else host_view(a) for a in arrays]
    if any(is_torch_array(a) for a in out if a is not None):
        device = next(a for a in out if a is not None).device
        return array_namespace(*[a for a in out if a is not None]), out, device, False
    return array_namespace(np.empty(0)), [None if a is None else np.asarray(a) for a in out], None, True


#: Elements per row block when scanning token arrays on the CPU: float32 temporaries stay in L2.
BLOCK_ELEMENTS = 1 << 15


def cpu_block_rows(n_rows: int, width: int, on_cpu: bool) -> int:
    """Rows per block: cache-sized on the CPU, every row at once on an accelerator.

    >>> cpu_block_rows(10, 4096, True), cpu_block_rows(10, 4096, False)
    (8, 10)
    """
    if not on_cpu:
        return max(n_rows, 1)
    return max(1, BLOCK_ELEMENTS // max(width, 1))

"""Per-token statistics of the policy's distribution from logits, in bounded memory.

``sum_pi_squared_from_logits`` gives ``sum_v pi(v)^2 = exp(logsumexp(2 z) - 2 logsumexp(z))``
and ``entropy_from_logits`` gives ``H = logsumexp(z) - sum_v pi(v) z_v`` for every token. The
rows (tokens) are processed in chunks, each upcast to float32 (bf16/fp16 logits) and shifted by
its row maximum, so that:

* the extra memory is one (or two) float32 chunks, never a float32 copy of the whole tensor:
  a ``(8192, 152064)`` bf16 tensor (2.5 GB) needs at most ``max_chunk_bytes`` of temporaries,
  where the naive formula allocates several 5 GB float32 tensors;
* with ``e = exp(z - max z)`` (every term in ``(0, 1]``, the largest exactly 1) the sums
  ``S1 = sum e`` and ``S2 = sum e^2`` neither overflow nor underflow, and
  ``sum pi^2 = S2 / S1^2`` exactly equals the logsumexp formula.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlmetrics._core.array import check_dense, describe, is_array, is_torch_array
from rlmetrics._core.checks import check_int

__all__ = [
    "entropy_and_sum_pi_squared_from_logits",
    "entropy_from_logits",
    "sum_pi_squared_from_logits",
]

DEFAULT_MAX_CHUNK_BYTES = 256 * 2**20


def _chunk_rows(n_rows: int, vocab: int, n_temps: int, chunk_size: int | None, max_chunk_bytes: int) -> int:
    if chunk_size is not None:
        return check_int(chunk_size, "chunk_size", minimum=1)
    budget = check_int(max_chunk_bytes, "max_chunk_bytes", minimum=1)
    per_row = max(vocab, 1) * 4 * n_temps
    return max(1, min(max(n_rows, 1), budget // per_row))


def _check_logits(logits: Any, temperature: float) -> tuple[bool, int, int]:
    if not is_array(logits):
        raise TypeError(f"logits must be a numpy array or a torch tensor; got {type(logits).__name__}")
    check_dense(logits, "logits")
    if logits.ndim < 1 or logits.shape[-1] == 0:
        raise ValueError(f"logits must have shape (..., V) with V >= 1; got {describe(logits)}")
    torch_in = is_torch_array(logits)
    if torch_in:
        if not logits.dtype.is_floating_point:
            raise TypeError(
                f"logits must be a floating tensor (bf16, fp16, fp32 or fp64); got {describe(logits)}"
            )
    elif np.asarray(logits).dtype.kind != "f":
        raise TypeError(f"logits must be a floating array (fp16, fp32 or fp64); got {describe(logits)}")
    if isinstance(temperature, bool | np.bool_) or not isinstance(
        temperature, int | float | np.integer | np.floating
    ):
        raise TypeError(
            f"temperature must be a finite number > 0; got {type(temperature).__name__} {temperature!r}"
        )
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a finite number > 0; got {temperature!r}")
    vocab = int(logits.shape[-1])
    n_rows = int(math.prod(logits.shape[:-1]))
    return torch_in, n_rows, vocab


def _torch_chunks(logits: Any, want_h: bool, want_s: bool, rows: int, temperature: float) -> tuple[Any, Any]:
    import torch

    flat = logits.detach().reshape(-1, logits.shape[-1])
    work = torch.float64 if flat.dtype == torch.float64 else torch.float32
    n = flat.shape[0]
    h_out = torch.empty(n, dtype=work, device=flat.device) if want_h else None
    s_out = torch.empty(n, dtype=work, device=flat.device) if want_s else None
    lowest = torch.finfo(work).min
    with torch.no_grad():
        for start in range(0, n, rows):
            z = flat[start : start + rows].to(work, copy=True)
            if temperature != 1.0:
                z.div_(temperature)
            z.sub_(z.amax(dim=-1, keepdim=True))
            if not want_h:
                z.exp_()
                s1 = z.sum(dim=-1)
                z.mul_(z)
                assert s_out is not None
                s_out[start : start + rows] = z.sum(dim=-1) / (s1 * s1)
                del z  # free this chunk before the next one is allocated
                continue
            z.clamp_(min=lowest)  # -inf logits: e = 0 and e * z = 0 rather than NaN
            e = torch.exp(z)
            s1 = e.sum(dim=-1)
            z.mul_(e)
            assert h_out is not None
            h_out[start : start + rows] = torch.log(s1) - z.sum(dim=-1) / s1
            if want_s:
                e.mul_(e)
                assert s_out is not None
                s_out[start : start + rows] = e.sum(dim=-1) / (s1 * s1)
            del e, z
    shape = tuple(logits.shape[:-1])
    return (
        None if h_out is None else h_out.reshape(shape),
        None if s_out is None else s_out.reshape(shape),
    )


def _numpy_chunks(logits: Any, want_h: bool, want_s: bool, rows: int, temperature: float) -> tuple[Any, Any]:
    arr = np.asarray(logits)
    flat = arr.reshape(-1, arr.shape[-1])
    work = np.float64 if flat.dtype == np.float64 else np.float32
    n = flat.shape[0]
    h_out = np.empty(n, dtype=work) if want_h else None
    s_out = np.empty(n, dtype=work) if want_s else None
    lowest = np.finfo(work).min
    e = None
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for start in range(0, n, rows):
            z = flat[start : start + rows].astype(work, copy=True)
            if temperature != 1.0:
                z /= work(temperature)
            z -= z.max(axis=-1, keepdims=True)
            if not want_h:
                np.exp(z, out=z)
                s1 = z.sum(axis=-1)
                np.multiply(z, z, out=z)
                assert s_out is not None
                s_out[start : start + rows] = z.sum(axis=-1) / (s1 * s1)
                del z
                continue
            np.maximum(z, lowest, out=z)
            if e is None or e.shape != z.shape:
                e = np.empty_like(z)
            np.exp(z, out=e)
            s1 = e.sum(axis=-1)
            np.multiply(z, e, out=z)
            assert h_out is not None
            h_out[start : start + rows] = np.log(s1) - z.sum(axis=-1) / s1
            if want_s:
                np.multiply(e, e, out=e)
                assert s_out is not None
                s_out[start : start + rows] = e.sum(axis=-1) / (s1 * s1)
            del z
    shape = tuple(arr.shape[:-1])
    return (
        None if h_out is None else h_out.reshape(shape),
        None if s_out is None else s_out.reshape(shape),
    )


def _run(
    logits: Any, want_h: bool, want_s: bool, chunk_size: int | None, max_chunk_bytes: int, temperature: float
) -> tuple[Any, Any]:
    torch_in, n_rows, vocab = _check_logits(logits, temperature)
    temperature = float(temperature)  # numpy scalars: one Python float for every chunk
    rows = _chunk_rows(n_rows, vocab, 2 if want_h else 1, chunk_size, max_chunk_bytes)
    if torch_in:
        return _torch_chunks(logits, want_h, want_s, rows, temperature)
    return _numpy_chunks(logits, want_h, want_s, rows, temperature)


def sum_pi_squared_from_logits(
    logits: Any,
    *,
    chunk_size: int | None = None,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
    temperature: float = 1.0,
) -> Any:
    """Exact ``sum_v pi(v)^2`` per token, ``pi = softmax(logits / temperature)``, in bounded memory.

    Equal to verl's ``calculate_sum_pi_squared_from_logits`` (``exp(logsumexp(2 z) -
    2 logsumexp(z))``) without its full-size temporaries.

    Parameters
    ----------
    logits : array of shape ``(..., V)``
        numpy (fp16/fp32/fp64) or torch (bf16/fp16/fp32/fp64, CPU or CUDA). ``-inf`` entries
        (masked vocabulary) are allowed. Not modified.
    chunk_size : int, optional, keyword-only
        Rows (tokens) per chunk; overrides ``max_chunk_bytes``.
    max_chunk_bytes : int, keyword-only
        Bound on the float32 temporaries of a chunk (default 256 MiB): one chunk of
        ``max_chunk_bytes // (4 V)`` rows is upcast at a time.
    temperature : float, keyword-only
        Divide the logits by this (> 0) first, as the sampler does.

    Returns
    -------
    array of shape ``(...)``
        float32 (float64 for float64 logits), on the logits' device, no gradient. Values lie in
        ``[1/V, 1]``. A row with a NaN or ``+inf`` logit, or only ``-inf`` logits, gives NaN.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.log(np.array([[0.5, 0.25, 0.25], [1.0, 1e-30, 1e-30]], dtype=np.float32))
    >>> sum_pi_squared_from_logits(z, chunk_size=1).round(6)
    array([0.375, 1.   ], dtype=float32)
    """
    return _run(logits, False, True, chunk_size, max_chunk_bytes, temperature)[1]


def entropy_from_logits(
    logits: Any,
    *,
    chunk_size: int | None = None,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
    temperature: float = 1.0,
) -> Any:
    """Shannon entropy ``-sum_v pi(v) log pi(v)`` per token (nats), in bounded memory.

    Same value as verl's ``entropy_from_logits`` (``logsumexp(z) - sum softmax(z) z``), computed
    chunk by chunk in float32 with two chunk-sized temporaries. Arguments and returns as
    :func:`sum_pi_squared_from_logits`; values lie in ``[0, log V]``.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.zeros((2, 4), dtype=np.float16)
    >>> entropy_from_logits(z).round(6)  # uniform over 4: log 4
    array([1.386294, 1.386294], dtype=float32)
    """
    return _run(logits, True, False, chunk_size, max_chunk_bytes, temperature)[0]


def entropy_and_sum_pi_squared_from_logits(
    logits: Any,
    *,
    chunk_size: int | None = None,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
    temperature: float = 1.0,
) -> tuple[Any, Any]:
    """Both :func:`entropy_from_logits` and :func:`sum_pi_squared_from_logits` in one pass.

    Examples
    --------
    >>> import numpy as np
    >>> h, s = entropy_and_sum_pi_squared_from_logits(np.zeros((1, 2), dtype=np.float32))
    >>> h.round(6), s
    (array([0.693147], dtype=float32), array([0.5], dtype=float32))
    """
    return _run(logits, True, True, chunk_size, max_chunk_bytes, temperature)

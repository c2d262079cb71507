"""Transport over ``torch.distributed``: packed statistics in two collectives, and object gathers.

Exact aggregation across data-parallel ranks needs only three kinds of statistics: sums
(counts, totals; reduced by ``SUM``), maxima and minima. Packed into vectors, any number of
them costs two ``all_reduce`` calls -- one ``SUM``, one ``MAX`` -- because the minima travel
negated in the ``MAX`` call (``min(x) = -max(-x)``).

This module knows nothing of the metrics: it moves vectors and objects. It imports nothing
from rlmetrics, and torch only when a collective runs. numpy vectors travel as torch CPU
tensors (gloo); CUDA tensors stay on their device for nccl. Results come back in the caller's
array type and device.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

__all__ = ["all_gather_objects", "all_reduce_stats", "comm_device", "require_dist"]


def _is_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def require_dist() -> Any:
    """``torch.distributed``, initialised; otherwise an error that says what to do."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch is present in the test environment
        raise ImportError("process_group= needs torch.distributed: pip install 'rlmetrics[torch]'") from None
    if not dist.is_available():  # pragma: no cover
        raise RuntimeError("process_group=: torch.distributed is not available in this torch build")
    if not dist.is_initialized():
        raise RuntimeError(
            "process_group=: torch.distributed is not initialised; call "
            "torch.distributed.init_process_group(...) first (or pass process_group=None)"
        )
    return dist


def comm_device(process_group: Any, device: Any = None) -> Any:
    """The device that tensors must live on for the group's backend.

    gloo: the CPU; nccl: ``device`` if it is a CUDA device, else the current CUDA device; a
    mixed backend (``"cpu:gloo,cuda:nccl"``) or another one: ``device`` (the CPU if ``None``).
    """
    import torch

    backend = str(require_dist().get_backend(process_group)).lower()
    if backend == "gloo":
        return torch.device("cpu")
    if backend == "nccl":
        if device is not None and device.type == "cuda":
            return device
        return torch.device("cuda", torch.cuda.current_device())
    return device if device is not None else torch.device("cpu")


def _as_vector(x: Any, name: str) -> Any:
    """``x`` as a 1-d float64 torch tensor (a numpy array is wrapped without a copy when it can be)."""
    import torch

    if _is_tensor(x):
        t = x.detach()
    else:
        arr = np.asarray(x)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"{name} must hold numbers; got an array of dtype {arr.dtype}")
        t = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float64))
    if t.ndim != 1:
        raise ValueError(f"{name} must be a 1-d vector of statistics; got shape {tuple(t.shape)}")
    return t.to(torch.float64)


def all_reduce_stats(
    sums: Any,
    maxes: Any = None,
    mins: Any = None,
    *,
    process_group: Any = None,
) -> tuple[Any, Any, Any]:
    """All-reduce packed statistics: ``sums`` by ``SUM``, ``maxes`` by ``MAX``, ``mins`` by ``MIN``.

    Exactly two collective calls whatever the vector lengths (one when there are no extremes,
    none for empty vectors). Every rank must pass vectors of the same lengths in the same
    layout: a rank without data passes zeros, ``-inf`` maxima and ``+inf`` minima.

    Parameters
    ----------
    sums : array of shape ``(S,)``
        Counts and sums (numpy or torch, any real dtype; reduced in float64).
    maxes : array of shape ``(M,)``, optional
        Maxima (``-inf`` for "no value").
    mins : array of shape ``(N,)``, optional
        Minima (``+inf`` for "no value").
    process_group : torch.distributed.ProcessGroup, optional, keyword-only
        The group to reduce over; ``None`` is the default (world) group.

    Returns
    -------
    tuple
        ``(sums, maxes, mins)`` of the union of the ranks, float64: numpy arrays for numpy
        inputs, tensors on the inputs' device for torch inputs (``None`` stays ``None``).

    Examples
    --------
    Needs an initialised process group; in a world of one rank the statistics come back
    unchanged:

    >>> import numpy as np, torch.distributed as dist
    >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    >>> all_reduce_stats(np.array([3.0, 1.5]), np.array([2.0]), np.array([-1.0]))
    (array([3. , 1.5]), array([2.]), array([-1.]))
    >>> dist.destroy_process_group()
    """
    import torch

    dist = require_dist()
    if sums is None:
        raise TypeError("sums must be a 1-d array of statistics; got None")
    given = {"sums": sums, "maxes": maxes, "mins": mins}
    torch_in = any(_is_tensor(x) for x in given.values() if x is not None)
    s = _as_vector(sums, "sums")
    in_device = s.device
    comm = comm_device(process_group, in_device)
    empty = torch.empty(0, dtype=torch.float64, device=comm)
    s = s.to(comm).clone()
    hi = empty if maxes is None else _as_vector(maxes, "maxes").to(comm)
    lo = empty if mins is None else _as_vector(mins, "mins").to(comm)
    extremes = torch.cat([hi, -lo])
    if s.numel():
        dist.all_reduce(s, op=dist.ReduceOp.SUM, group=process_group)
    if extremes.numel():
        dist.all_reduce(extremes, op=dist.ReduceOp.MAX, group=process_group)
    n_hi = hi.numel()
    out = {"sums": s, "maxes": extremes[:n_hi], "mins": -extremes[n_hi:]}

    def back(name: str) -> Any:
        if given[name] is None:
            return None
        t = out[name]
        return t.to(in_device) if torch_in else t.cpu().numpy()

    return back("sums"), back("maxes"), back("mins")


def all_gather_objects(obj: Any, process_group: Any = None) -> list[Any]:
    """Every rank's ``obj`` (picklable), in rank order, on every rank (one ``all_gather_object``)."""
    dist = require_dist()
    gathered: list[Any] = [None] * dist.get_world_size(process_group)
    dist.all_gather_object(gathered, obj, group=process_group)
    return gathered

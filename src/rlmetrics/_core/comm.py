"""Transport over ``torch.distributed``: the agreement step, packed statistics, object gathers.

Exact aggregation across data-parallel ranks needs only three kinds of statistics: sums
(counts, totals; reduced by ``SUM``), maxima and minima. Packed into vectors, any number of
them costs two ``all_reduce`` calls -- one ``SUM``, one ``MAX`` -- because the minima travel
negated in the ``MAX`` call (``min(x) = -max(-x)``).

Before those, every distributed entry point calls :func:`agree`: one ``all_gather`` of two
int64 per rank (an "my input is bad" flag and a digest of the layout and options the rank is
about to reduce with). A rank whose input is invalid does not raise on its own -- the others
would wait in the next collective until the process group's timeout -- but joins this one,
and then every rank raises the same error, naming that rank and its reason; ranks that would
reduce different layouts or options raise the same error too, naming what differs. Only then
(both cases are rare) do the ranks exchange their messages, in a second collective.

This module knows nothing of the metrics: it moves vectors and objects. It imports nothing
from rlmetrics, and torch only when a collective runs. numpy vectors travel as torch CPU
tensors (gloo); CUDA tensors stay on their device for nccl. Results come back in the caller's
array type and device.
"""

from __future__ import annotations

import hashlib
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "agree",
    "all_gather_objects",
    "all_reduce_stats",
    "comm_device",
    "describe_disagreement",
    "require_dist",
    "signature_digest",
]


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
    check: bool = True,
) -> tuple[Any, Any, Any]:
    """All-reduce packed statistics: ``sums`` by ``SUM``, ``maxes`` by ``MAX``, ``mins`` by ``MIN``.

    Exactly two collective calls whatever the vector lengths (one when there are no extremes,
    none for empty vectors), after the agreement step (:func:`agree`, one tiny ``all_gather``):
    a rank whose vectors are invalid, or of other lengths than the others', makes every rank
    raise the same error. Every rank must pass vectors of the same lengths in the same layout:
    a rank without data passes zeros, ``-inf`` maxima and ``+inf`` minima.

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
    check : bool, keyword-only
        Make the agreement step first. ``False`` skips it, for callers that made their own
        (every ``compute_X(..., process_group=)`` agrees on its layout and options).

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
    given = {"sums": sums, "maxes": maxes, "mins": mins}
    vectors: dict[str, Any] = {}
    error: BaseException | None = None
    try:
        if sums is None:
            raise TypeError("sums must be a 1-d array of statistics; got None")
        for name, x in given.items():
            if x is not None:
                vectors[name] = _as_vector(x, name)
    except Exception as err:
        if not check:
            raise
        error = err
    if check:
        lengths = {name: int(v.numel()) for name, v in vectors.items()}
        where = vectors["sums"].device if "sums" in vectors else None
        agree(lengths, error, process_group=process_group, device=where, what="the lengths of the statistics")
    torch_in = any(_is_tensor(x) for x in given.values() if x is not None)
    s = vectors["sums"]
    in_device = s.device
    comm = comm_device(process_group, in_device)
    empty = torch.empty(0, dtype=torch.float64, device=comm)
    s = s.to(comm).clone()
    hi = vectors["maxes"].to(comm) if "maxes" in vectors else empty
    lo = vectors["mins"].to(comm) if "mins" in vectors else empty
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


_ATOMS = (str, int, bool, type(None))


def _canonical(x: Any) -> Any:
    """``x`` with mappings as sorted item tuples, sequences as tuples and numpy scalars as Python ones."""
    kind = type(x)
    if kind in _ATOMS:
        return x
    if kind is tuple and all(type(v) in _ATOMS for v in x):  # layouts, key pairs: the common case
        return x
    if isinstance(x, Mapping):
        return tuple(sorted((str(k), _canonical(v)) for k, v in x.items()))
    if isinstance(x, list | tuple):
        return tuple(_canonical(v) for v in x)
    if isinstance(x, set | frozenset):
        return tuple(sorted(repr(_canonical(v)) for v in x))
    if isinstance(x, np.generic):
        return _canonical(x.item())
    if isinstance(x, float) and math.isnan(x):
        return "nan"  # NaN != NaN, but two ranks passing NaN agree
    return x


def signature_digest(signature: Any) -> int:
    """A signed 64-bit digest of ``signature``, the same in every process.

    Python's ``hash`` of a string is salted per process, so it cannot be compared across
    ranks; this is BLAKE2b of the canonical ``repr`` (mappings sorted, numpy scalars as Python
    numbers).

    >>> signature_digest({"a": 1, "b": (2.0, "x")}) == signature_digest({"b": [2.0, "x"], "a": 1})
    True
    >>> signature_digest({"a": 1}) == signature_digest({"a": 2})
    False
    """
    text = repr(_canonical(signature)).encode("utf-8", "backslashreplace")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little", signed=True)


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _ranks(ranks: Sequence[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def describe_disagreement(what: str, signatures: Sequence[Mapping[str, Any]]) -> str:
    """The message for ranks whose signatures differ: each differing field, the ranks per value.

    >>> ranks = [{"use_critic": True}, {"use_critic": False}, {"use_critic": True}]
    >>> describe_disagreement("the options", ranks)
    'ranks disagree on the options: use_critic: ranks 0, 2: True; rank 1: False'
    """
    fields: list[str] = []
    for sig in signatures:
        fields.extend(k for k in sig if k not in fields)
    parts = []
    for name in fields:
        groups: dict[str, list[int]] = {}
        for rank, sig in enumerate(signatures):
            value = _short(_canonical(sig[name])) if name in sig else "absent"
            groups.setdefault(value, []).append(rank)
        if len(groups) > 1:
            parts.append(f"{name}: " + "; ".join(f"{_ranks(r)}: {v}" for v, r in groups.items()))
    return f"ranks disagree on {what}: " + (" | ".join(parts) or "(their signatures differ)")


def _error_payload(error: BaseException) -> tuple[str, str]:
    """(exception type to raise on every rank, message) for a rank's local error."""
    for kind in (TypeError, ValueError):
        if isinstance(error, kind):
            return kind.__name__, str(error)
    return "RuntimeError", f"{type(error).__name__}: {error}"


_KINDS: dict[str, type[Exception]] = {"TypeError": TypeError, "ValueError": ValueError}


def agree(
    signature: Mapping[str, Any],
    error: BaseException | None = None,
    *,
    process_group: Any = None,
    device: Any = None,
    what: str = "the layout and options",
    on_mismatch: str = "raise",
) -> list[Mapping[str, Any]] | None:
    """The agreement step before a reduction: is every rank's input valid, with the same signature?

    Collective: every rank of the group calls it, a rank whose input is bad included (it
    passes the exception it caught instead of raising it). One ``all_gather`` of two int64 per
    rank -- the error flag and :func:`signature_digest` of ``signature`` -- and, only when a
    rank failed or the digests differ, one ``all_gather_object`` of the messages and
    signatures.

    Parameters
    ----------
    signature : Mapping[str, Any]
        What must be the same on every rank for the reduction to be defined: the layout of the
        vectors about to be reduced, the options, the optional inputs present. Picklable,
        built from Python and numpy scalars, strings, tuples and mappings.
    error : BaseException, optional
        This rank's validation error, if its input is bad.
    process_group : torch.distributed.ProcessGroup, optional, keyword-only
        ``None`` is the default group.
    device : torch.device, optional, keyword-only
        Where this rank's data lives. For nccl the flags travel on a CUDA device and come back
        to the host (the decision to raise is the host's): one small synchronisation per call.
    what : str, keyword-only
        Names the signature in the message of a disagreement.
    on_mismatch : {"raise", "gather"}, keyword-only
        On differing signatures, raise a ``ValueError`` describing the difference on every rank
        (``"raise"``), or return every rank's signature (``"gather"``) for the caller to merge.

    Returns
    -------
    list of Mapping or None
        ``None`` when every rank is valid and the signatures agree; every rank's signature, in
        rank order, when they differ and ``on_mismatch="gather"``.

    Raises
    ------
    TypeError, ValueError, RuntimeError
        On every rank, when a rank's input is bad: ``"rank 2: <its message>"`` (several bad
        ranks are joined by ``"; "``), of the first bad rank's type (``TypeError`` and
        ``ValueError`` are kept, any other exception becomes a ``RuntimeError`` naming its
        type). On the bad rank it is chained to the original exception.
    ValueError
        On every rank, when the signatures differ and ``on_mismatch="raise"``.

    Examples
    --------
    >>> import torch.distributed as dist
    >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    >>> agree({"use_critic": True}) is None
    True
    >>> agree({"use_critic": True}, ValueError("batch is missing 'values'"))
    Traceback (most recent call last):
    ...
    ValueError: rank 0: batch is missing 'values'
    >>> dist.destroy_process_group()
    """
    import torch

    if on_mismatch not in ("raise", "gather"):
        raise ValueError(f"on_mismatch must be 'raise' or 'gather'; got {on_mismatch!r}")
    dist = require_dist()
    mine = torch.tensor(
        [0 if error is None else 1, signature_digest(signature)],
        dtype=torch.int64,
        device=comm_device(process_group, device),
    )
    parts = [torch.empty_like(mine) for _ in range(dist.get_world_size(process_group))]
    dist.all_gather(parts, mine, group=process_group)
    table = torch.stack(parts).cpu().tolist()
    failed = any(flag for flag, _ in table)
    if not failed and all(digest == table[0][1] for _, digest in table):
        return None
    # Every rank saw the same table, so every rank makes this second call (or none does).
    payload = (None if error is None else _error_payload(error), None if failed else dict(signature))
    gathered = all_gather_objects(payload, process_group)
    if failed:
        bad = [(rank, info) for rank, (info, _) in enumerate(gathered) if info is not None]
        exc = _KINDS.get(bad[0][1][0], RuntimeError)("; ".join(f"rank {r}: {msg}" for r, (_, msg) in bad))
        if error is not None:
            raise exc from error
        raise exc
    signatures = [sig for _, sig in gathered]
    if on_mismatch == "gather":
        return signatures
    raise ValueError(describe_disagreement(what, signatures))

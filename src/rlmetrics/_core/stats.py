"""Packed, mergeable sufficient statistics shared by the policy-side metrics.

Each policy metric (variance proxies, rollout/training mismatch, PPO update) first reduces its
inputs to named sums, maxima and minima, kept on the inputs' device as three float64 vectors.
They come to the host in **one** copy, and the statistics of several shards (data-parallel
ranks, micro-batches) merge exactly: add the sums, take the max of the maxima and the min of
the minima. A ``finalize_*`` function then turns the host values into the metric dictionary.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlmetrics._core.array import (
    array_namespace,
    describe,
    is_torch_array,
    mask_and_invalid_count,
    vectors_to_host,
)

__all__ = [
    "MASK_INVALID",
    "PolicyStats",
    "cpu_block_rows",
    "deferred_mask",
    "pack_stats",
    "prepare_arrays",
    "warn_undefined",
]

#: Sum entry counting mask values other than 0/1 (checked after the one host copy).
MASK_INVALID = "mask_invalid"


def deferred_mask(mask: Any, name: str) -> tuple[Any, Any]:
    """``(mask as bool, count of entries other than 0/1)`` with the check deferred on devices.

    numpy masks are checked here (``ValueError`` naming ``name``), their count is 0; a torch
    mask's count stays on its device, goes into the packed sums as :data:`MASK_INVALID` and is
    checked by :meth:`PolicyStats.to_host` after the single transfer (no extra host sync).
    """
    as_bool, n_invalid = mask_and_invalid_count(mask, name)
    return as_bool, (0.0 if n_invalid is None else n_invalid)


# Elements per row block when scanning token tensors on the CPU: keeps float32 temporaries in L2.
BLOCK_ELEMENTS = 1 << 15


def prepare_arrays(arrays: Sequence[Any], names: Sequence[str]) -> tuple[Any, list[Any], Any, bool]:
    """Detach, check one namespace, and view CPU torch tensors as numpy arrays (no copy).

    Returns ``(xp, arrays, device, on_cpu)``. Torch tensors on the CPU become numpy views
    (bf16 ones a float32 copy), so that the CPU path runs numpy's single-threaded kernels on
    cache-sized blocks instead of many small multi-threaded torch launches; CUDA tensors stay
    where they are. ``None`` entries pass through.
    """
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
        if devices == {"cpu"}:
            import torch

            out = [
                None
                if a is None
                else (a.detach().float().numpy() if a.dtype == torch.bfloat16 else a.detach().numpy())
                for a in arrays
            ]
            return array_namespace(np.empty(0)), out, None, True
        out = [None if a is None else a.detach() for a in arrays]
        return array_namespace(*present), out, present[0].device, False
    for n, a in zip(names, arrays):
        if a is not None and not hasattr(a, "dtype"):
            raise TypeError(f"{n} must be a numpy array or a torch tensor; got {type(a).__name__}")
    return array_namespace(np.empty(0)), [None if a is None else np.asarray(a) for a in arrays], None, True


def cpu_block_rows(n_rows: int, width: int, on_cpu: bool) -> int:
    """Rows per block: cache-sized on the CPU, every row at once on an accelerator."""
    if not on_cpu:
        return max(n_rows, 1)
    return max(1, BLOCK_ELEMENTS // max(width, 1))


@dataclass
class PolicyStats:
    """Named sums, maxima and minima of one batch (or shard), as float64 vectors.

    Attributes
    ----------
    kind : str
        Which metric family produced them (``"variance_proxy"``, ``"mismatch"``, ``"ppo"``).
    sum_names, max_names, min_names : tuple of str
        Names of the entries of ``sums``, ``maxes`` and ``mins``.
    sums, maxes, mins : arrays of shape ``(len(names),)``, float64
        On the inputs' device (numpy or torch). Empty extremes are ``-inf`` / ``+inf``.
    options : dict
        Options the finalize step needs (thresholds, batch size...), identical across shards.

    Examples
    --------
    >>> import numpy as np
    >>> a = pack_stats("demo", {"n": 2.0, "x": 3.0}, {"x": 2.5}, {"x": 0.5})
    >>> b = pack_stats("demo", {"n": 1.0, "x": 4.0}, {"x": 4.0}, {"x": 4.0})
    >>> PolicyStats.merge([a, b]).to_host()
    ({'n': 3.0, 'x': 7.0}, {'x': 4.0}, {'x': 0.5})
    """

    kind: str
    sum_names: tuple[str, ...]
    max_names: tuple[str, ...]
    min_names: tuple[str, ...]
    sums: Any
    maxes: Any
    mins: Any
    options: dict[str, Any]

    def to_host(self) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
        """The three vectors as name -> float dictionaries, in one device-to-host copy.

        Raises ``ValueError`` if a deferred mask check (:data:`MASK_INVALID`) found entries
        other than 0/1, here or on another rank; that entry is not returned.
        """
        sums, maxes, mins = vectors_to_host(self.sums, self.maxes, self.mins)
        host_sums = dict(zip(self.sum_names, sums.tolist()))
        n_invalid = host_sums.pop(MASK_INVALID, 0.0)
        if n_invalid > 0:
            name = self.options.get("mask_name", "response_mask")
            raise ValueError(
                f"{name} must hold only 0 and 1; found {n_invalid:g} other entries "
                "(in this batch or, with process_group=, another rank's)"
            )
        return (
            host_sums,
            dict(zip(self.max_names, maxes.tolist())),
            dict(zip(self.min_names, mins.tolist())),
        )

    def zeroed(self) -> PolicyStats:
        """The same layout with the statistics of an empty batch: zero sums, -inf/+inf extremes."""
        xp = array_namespace(self.sums)
        return PolicyStats(
            self.kind,
            self.sum_names,
            self.max_names,
            self.min_names,
            xp.zeros_like(self.sums),
            xp.full_like(self.maxes, -math.inf),
            xp.full_like(self.mins, math.inf),
            dict(self.options),
        )

    def all_reduce(self, process_group: Any = None) -> PolicyStats:
        """Statistics of the union of every rank's batch (two collectives: SUM, and MAX/-MIN)."""
        from rlmetrics._core.comm import all_reduce_stats

        sums, maxes, mins = all_reduce_stats(self.sums, self.maxes, self.mins, process_group=process_group)
        return PolicyStats(
            self.kind, self.sum_names, self.max_names, self.min_names, sums, maxes, mins, dict(self.options)
        )

    @classmethod
    def merge(cls, parts: Sequence[PolicyStats]) -> PolicyStats:
        """Statistics of the union of the batches that ``parts`` describe (host numpy arrays)."""
        if not parts:
            raise ValueError("parts must hold at least one PolicyStats; got an empty sequence")
        first = parts[0]
        for p in parts[1:]:
            if (p.kind, p.sum_names, p.max_names, p.min_names) != (
                first.kind,
                first.sum_names,
                first.max_names,
                first.min_names,
            ):
                raise ValueError(f"cannot merge {p.kind!r} statistics with {first.kind!r} statistics")
        # raw vectors (same layout): a deferred mask check is summed and raised by the merged to_host
        hosts = [vectors_to_host(p.sums, p.maxes, p.mins) for p in parts]
        sums = np.sum([h[0] for h in hosts], axis=0)
        maxes = np.max([h[1] for h in hosts], axis=0)
        mins = np.min([h[2] for h in hosts], axis=0)
        return cls(
            first.kind,
            first.sum_names,
            first.max_names,
            first.min_names,
            sums,
            maxes,
            mins,
            dict(first.options),
        )


def _stand_in(x: Any, fill: float) -> Any:
    """A (1, 1) array like ``x`` (namespace, dtype, device) holding ``fill``."""
    xp = array_namespace(x)
    return xp.full((1, 1), fill, dtype=x.dtype, device=getattr(x, "device", None))


def sharded_statistics(
    statistics: Any,
    arrays: dict[str, Any],
    process_group: Any,
    *,
    mask_key: str = "response_mask",
    **options: Any,
) -> PolicyStats:
    """``statistics(**arrays, **options)``, all-reduced over ``process_group`` when one is given.

    A rank whose shard has no rows still joins the collectives (raising would leave the others
    waiting): it contributes zero sums and empty extremes, in the layout that a one-token
    stand-in batch with the same options gives.
    """
    if process_group is None:
        return statistics(**arrays, **options)
    if arrays[mask_key].shape[0] == 0:
        stand_in = {
            k: _stand_in(v, 1.0 if k in (mask_key, "rollout_is_weights") else 0.0) for k, v in arrays.items()
        }
        stats = statistics(**stand_in, **options).zeroed()
    else:
        stats = statistics(**arrays, **options)
    return stats.all_reduce(process_group)


def pack_stats(
    kind: str,
    sums: dict[str, Any],
    maxes: dict[str, Any],
    mins: dict[str, Any],
    *,
    xp: Any = None,
    device: Any = None,
    options: dict[str, Any] | None = None,
) -> PolicyStats:
    """Stack named 0-d arrays (or Python numbers) into a :class:`PolicyStats` on ``device``."""

    def vec(values: list[Any]) -> Any:
        if xp is None or not values:
            if xp is not None and device is not None:
                return xp.zeros((0,), dtype=xp.float64, device=device)
            return np.asarray([float(v) for v in values], dtype=np.float64)
        return xp.stack(
            [
                xp.reshape(xp.astype(xp.asarray(v, device=device), xp.float64), ())
                if hasattr(v, "shape")
                else xp.asarray(float(v), dtype=xp.float64, device=device)
                for v in values
            ]
        )

    return PolicyStats(
        kind=kind,
        sum_names=tuple(sums),
        max_names=tuple(maxes),
        min_names=tuple(mins),
        sums=vec(list(sums.values())),
        maxes=vec(list(maxes.values())),
        mins=vec(list(mins.values())),
        options=dict(options or {}),
    )


def warn_undefined(message: str, *, stacklevel: int = 3) -> float:
    """Emit a ``RuntimeWarning`` for an undefined statistic and return NaN."""
    warnings.warn(message, RuntimeWarning, stacklevel=stacklevel)
    return math.nan

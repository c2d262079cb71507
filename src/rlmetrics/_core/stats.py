"""The sufficient-statistics type of every batch metric family: :class:`Stats`.

A family (data metrics, variance proxies, PPO update, rollout mismatch) first reduces its
inputs to named **sums**, **maxima** and **minima**, kept on the inputs' device as three
float64 vectors. Such statistics merge exactly -- add the sums, take the max of the maxima and
the min of the minima -- so micro-batches (:meth:`Stats.merge`) and data-parallel ranks
(:meth:`Stats.all_reduce`, two collectives) combine without error from averaging averages. The
family's finaliser then turns the host values into the metric dictionary
(:meth:`Stats.finalize`, one device-to-host copy).

A :class:`Stats` carries the options its finaliser needs and a reference to that finaliser, so
this module knows no family.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlmetrics._core.array import array_namespace, is_torch_array, vectors_to_host
from rlmetrics._core.comm import all_reduce_stats

__all__ = [
    "INVALID_MASK",
    "Finaliser",
    "Stats",
    "check_prefix",
    "invalid_mask_field",
    "stand_in_statistics",
    "with_prefix",
]

#: Prefix of a sum that counts mask entries other than 0/1, found on a device and checked by
#: :meth:`Stats.finalize` after the one host copy (no extra sync); the rest is the mask's name.
INVALID_MASK = "invalid mask entries: "

#: ``finaliser(sums, maxes, mins, options, **late) -> metrics``: host values by name.
Finaliser = Callable[..., dict[str, float]]


def invalid_mask_field(name: str) -> str:
    """Name of the sum that counts the entries of mask ``name`` other than 0/1."""
    return INVALID_MASK + name


def _vector(xp: Any, values: list[Any], device: Any) -> Any:
    """Stack 0-d arrays and Python numbers into a float64 vector of namespace ``xp``."""
    if xp is None:
        return np.asarray([float(v) for v in values], dtype=np.float64)
    if not values:
        return xp.zeros((0,), dtype=xp.float64, device=device)
    return xp.stack(
        [
            xp.reshape(xp.astype(v, xp.float64), ())
            if hasattr(v, "shape")
            else xp.asarray(float(v), dtype=xp.float64, device=device)
            for v in values
        ]
    )


@dataclass(frozen=True, eq=False)
class Stats:
    """Named sums, maxima and minima of one batch (or shard, or union of them), as float64 vectors.

    Attributes
    ----------
    kind : str
        The family that made them (``"data"``, ``"variance_proxy"``, ``"ppo"``, ``"mismatch"``).
    sum_names, max_names, min_names : tuple of str
        Names of the entries of ``sums``, ``maxes`` and ``mins``.
    sums, maxes, mins : arrays of shape ``(len(names),)``, float64
        On the inputs' device (numpy, or torch on any device). An empty set has zero sums,
        ``-inf`` maxima and ``+inf`` minima.
    options : Mapping[str, Any]
        The options the statistics were computed with, which the finaliser reads (thresholds,
        ``prefix`` ...). Statistics merge only with statistics of the same options.
    finaliser : Finaliser
        ``finaliser(sums, maxes, mins, options, **late)``: the family's metric dictionary from
        host values by name.

    Examples
    --------
    >>> import numpy as np
    >>> def mean(s, hi, lo, options):
    ...     return {"mean": s["x"] / s["n"], "max": hi["x"]}
    >>> a = Stats.pack("demo", {"n": 2.0, "x": 3.0}, {"x": 2.5}, {}, finaliser=mean)
    >>> b = Stats.pack("demo", {"n": 1.0, "x": 4.0}, {"x": 4.0}, {}, finaliser=mean)
    >>> Stats.merge(a, b).finalize()
    {'mean': 2.3333333333333335, 'max': 4.0}
    >>> (a + b).host_values()
    ({'n': 3.0, 'x': 7.0}, {'x': 4.0}, {})
    """

    kind: str
    sum_names: tuple[str, ...]
    max_names: tuple[str, ...]
    min_names: tuple[str, ...]
    sums: Any
    maxes: Any
    mins: Any
    options: Mapping[str, Any]
    finaliser: Finaliser = field(repr=False)

    @classmethod
    def pack(
        cls,
        kind: str,
        sums: Mapping[str, Any],
        maxes: Mapping[str, Any],
        mins: Mapping[str, Any],
        *,
        finaliser: Finaliser,
        options: Mapping[str, Any] | None = None,
        xp: Any = None,
        device: Any = None,
    ) -> Stats:
        """Stack named 0-d arrays (or Python numbers) into vectors of namespace ``xp`` on ``device``.

        Without ``xp`` the values must be Python numbers (or host scalars): numpy vectors.
        """
        return cls(
            kind=kind,
            sum_names=tuple(sums),
            max_names=tuple(maxes),
            min_names=tuple(mins),
            sums=_vector(xp, list(sums.values()), device),
            maxes=_vector(xp, list(maxes.values()), device),
            mins=_vector(xp, list(mins.values()), device),
            options=dict(options or {}),
            finaliser=finaliser,
        )

    def _like(self, sums: Any, maxes: Any, mins: Any) -> Stats:
        return Stats(
            self.kind,
            self.sum_names,
            self.max_names,
            self.min_names,
            sums,
            maxes,
            mins,
            self.options,
            self.finaliser,
        )

    def zeroed(self) -> Stats:
        """The same layout holding the statistics of an empty batch: zero sums, -inf/+inf extremes."""
        xp = array_namespace(self.sums)
        return self._like(
            xp.zeros_like(self.sums),
            xp.full_like(self.maxes, -math.inf),
            xp.full_like(self.mins, math.inf),
        )

    def to_host(self) -> Stats:
        """The same statistics as numpy vectors, in one device-to-host copy."""
        return self._like(*vectors_to_host(self.sums, self.maxes, self.mins))

    def host_values(self) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
        """``(sums, maxes, mins)`` as name -> float dictionaries, in one device-to-host copy."""
        sums, maxes, mins = vectors_to_host(self.sums, self.maxes, self.mins)
        return (
            dict(zip(self.sum_names, sums.tolist())),
            dict(zip(self.max_names, maxes.tolist())),
            dict(zip(self.min_names, mins.tolist())),
        )

    def merge(self, *others: Stats) -> Stats:
        """Statistics of the union of the batches that ``self`` and ``others`` describe (exact).

        ``Stats.merge(*parts)`` reads the same. Parts on one device merge there (no host
        copy); parts on different devices merge on the host. Deferred mask checks are summed,
        so a bad mask in any part still raises in :meth:`finalize`.
        """
        parts = (self, *others)
        for p in others:
            if not isinstance(p, Stats):
                raise TypeError(f"can merge Stats only with Stats; got {type(p).__name__}")
            if (p.kind, p.sum_names, p.max_names, p.min_names) != (
                self.kind,
                self.sum_names,
                self.max_names,
                self.min_names,
            ):
                raise ValueError(f"cannot merge {p.kind!r} statistics with {self.kind!r} statistics")
            if dict(p.options) != dict(self.options):
                differ = sorted(
                    k for k in set(p.options) | set(self.options) if p.options.get(k) != self.options.get(k)
                )
                raise ValueError(
                    f"cannot merge {self.kind!r} statistics computed with different options: {differ}"
                )
        if not others:
            return self
        devices = {str(p.sums.device) if is_torch_array(p.sums) else "numpy" for p in parts}
        if len(devices) > 1:
            parts = tuple(p.to_host() for p in parts)
        xp = array_namespace(parts[0].sums)
        return self._like(
            xp.sum(xp.stack([p.sums for p in parts]), axis=0),
            xp.max(xp.stack([p.maxes for p in parts]), axis=0),
            xp.min(xp.stack([p.mins for p in parts]), axis=0),
        )

    def __add__(self, other: Stats) -> Stats:
        return self.merge(other)

    def all_reduce(self, process_group: Any = None) -> Stats:
        """Statistics of the union of every rank's batch: one ``SUM`` and one ``MAX`` collective.

        Collective: every rank calls it with statistics of the same layout (a rank without data
        passes statistics of an empty batch). ``None`` is the default group.
        """
        sums, maxes, mins = all_reduce_stats(self.sums, self.maxes, self.mins, process_group=process_group)
        return self._like(sums, maxes, mins)

    def finalize(self, **late: Any) -> dict[str, float]:
        """The metric dictionary, from one device-to-host copy of the statistics.

        ``late`` are options that the family lets you give only now (``gradient_norm`` of the
        variance proxies, ``aggregation`` of the PPO update). Raises ``ValueError`` if a mask
        checked on its device held values other than 0 and 1, here or on another rank.
        """
        sums, maxes, mins = self.host_values()
        for name in [n for n in sums if n.startswith(INVALID_MASK)]:
            count = sums.pop(name)
            if count > 0:
                mask = name.removeprefix(INVALID_MASK)
                raise ValueError(
                    f"{mask} must hold only 0 and 1; found {count:g} other entries "
                    "(in this batch or, with process_group=, on another rank)"
                )
        return self.finaliser(sums, maxes, mins, self.options, **late)


def stand_in_statistics(
    statistics: Callable[..., Stats], arrays: Mapping[str, Any], ones: Collection[str], **options: Any
) -> Stats:
    """The statistics of a batch with no rows, in the layout the same options give.

    ``statistics(**stand_ins, **options).zeroed()``, the stand-ins being ``(1, 1)`` arrays like
    ``arrays`` (namespace, dtype, device) holding 1 for the names in ``ones`` (masks, weights)
    and 0 elsewhere. An empty shard then still joins the collectives of the others.
    """
    stand_ins: dict[str, Any] = {}
    for name, x in arrays.items():
        if x is None:
            stand_ins[name] = None
            continue
        xp = array_namespace(x)
        fill = 1 if name in ones else 0
        stand_ins[name] = xp.full((1, 1), fill, dtype=x.dtype, device=getattr(x, "device", None))
    return statistics(**stand_ins, **options).zeroed()


def check_prefix(prefix: Any) -> str:
    """``prefix`` if it is a string, else a ``TypeError`` naming it."""
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a string; got {type(prefix).__name__} {prefix!r}")
    return prefix


def with_prefix(metrics: Mapping[str, float], default: str, prefix: str) -> dict[str, float]:
    """``metrics`` with the family's ``default`` key prefix replaced by ``prefix``.

    >>> with_prefix({"grpo/num_groups": 3.0}, "grpo/", "train/grpo/")
    {'train/grpo/num_groups': 3.0}
    """
    if prefix == default:
        return dict(metrics)
    return {prefix + key.removeprefix(default): value for key, value in metrics.items()}

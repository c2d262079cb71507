"""Aggregation of metric lists: ``reduce_metrics``, ``Metric`` and ``AggregationType``.

Behaves like ``verl.utils.metric`` with one deliberate fix: the reducer of a plain list is
chosen from the key's **last path segment** (``.../max`` or ``..._max`` -> max, ``.../min`` or
``..._min`` -> min, anything else -> mean). verl tests for the substring ``"min"`` anywhere in
the key, so ``actor/minibatch_loss`` is min-reduced there; here it is averaged.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any

import numpy as np

from rlmetrics._core.array import is_torch_array

__all__ = ["AggregationType", "Metric", "reduce_metrics", "reducer_for_key"]


class AggregationType(Enum):
    """How a :class:`Metric` combines its values."""

    MEAN = "mean"
    SUM = "sum"
    MIN = "min"
    MAX = "max"


def reducer_for_key(key: str) -> AggregationType:
    """Aggregation implied by a metric key's last path segment.

    Examples
    --------
    >>> reducer_for_key("critic/score/max").value, reducer_for_key("actor/minibatch_loss").value
    ('max', 'mean')
    >>> reducer_for_key("perf/max_memory_allocated_gb").value, reducer_for_key("ratio_min").value
    ('max', 'min')
    """
    last = key.rsplit("/", 1)[-1]
    for kind in (AggregationType.MAX, AggregationType.MIN):
        tag = kind.value
        if last == tag or last.startswith(tag + "_") or last.endswith("_" + tag):
            return kind
    return AggregationType.MEAN


def _to_float(value: Any, *, where: str) -> float:
    if is_torch_array(value) or isinstance(value, np.ndarray):
        if int(np.prod(value.shape)) != 1:
            raise ValueError(f"{where}: only scalar arrays can be aggregated; got shape {tuple(value.shape)}")
        value = value.item() if hasattr(value, "item") else value
    if isinstance(value, bool | np.bool_):
        return float(value)
    if not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{where}: expected a number or a scalar array; got {type(value).__name__} {value!r}")
    return float(value)


def _aggregate(values: list[float], aggregation: AggregationType, *, key: str = "") -> float:
    if not values:
        where = f" for {key!r}" if key else ""
        warnings.warn(f"no values to aggregate{where}; returning NaN", RuntimeWarning, stacklevel=3)
        return math.nan
    arr = np.asarray(values, dtype=np.float64)
    if aggregation is AggregationType.MEAN:
        return float(np.mean(arr))
    if aggregation is AggregationType.SUM:
        return float(np.sum(arr))
    if aggregation is AggregationType.MIN:
        return float(np.min(arr))
    return float(np.max(arr))


class Metric:
    """Collects numeric values and aggregates them (mean, sum, min or max).

    Parameters
    ----------
    aggregation : str or AggregationType
        ``"mean"``, ``"sum"``, ``"min"`` or ``"max"``.
    value : number, scalar array, list of them or Metric, optional
        Initial value(s).

    Examples
    --------
    >>> m = Metric("mean", [1.0, 2.0])
    >>> m.append(3.0)
    >>> m.aggregate()
    2.0
    """

    def __init__(self, aggregation: str | AggregationType, value: Any = None) -> None:
        try:
            self.aggregation = (
                aggregation if isinstance(aggregation, AggregationType) else AggregationType(aggregation)
            )
        except ValueError:
            choices = ", ".join(repr(a.value) for a in AggregationType)
            raise ValueError(f"aggregation must be one of {choices}; got {aggregation!r}") from None
        self.values: list[float] = []
        if value is not None:
            if isinstance(value, list | tuple):
                self.extend(value)
            else:
                self.append(value)

    def __repr__(self) -> str:
        return f"Metric({self.aggregation.value!r}, n={len(self.values)})"

    def __len__(self) -> int:
        return len(self.values)

    def append(self, value: Any) -> None:
        """Add one value (a number, a scalar array, or every value of another Metric)."""
        if isinstance(value, Metric):
            self.extend(value)
            return
        self.values.append(_to_float(value, where="Metric.append"))

    def extend(self, values: Metric | Iterable[Any]) -> None:
        """Add many values, or all values of a Metric with the same aggregation."""
        if isinstance(values, Metric):
            if values.aggregation != self.aggregation:
                raise ValueError(
                    f"cannot merge a {values.aggregation.value!r} Metric into a "
                    f"{self.aggregation.value!r} Metric"
                )
            self.values.extend(values.values)
            return
        for value in values:
            self.append(value)

    def aggregate(self) -> float:
        """The aggregate of all values; NaN (with a warning) when there are none."""
        return _aggregate(self.values, self.aggregation)

    @classmethod
    def aggregate_dp(cls, metric_lists: list[Metric]) -> float:
        """Aggregate one Metric per data-parallel rank the way verl does.

        Mean and sum average over ranks position by position (every rank must hold the same
        number of values), then aggregate; min and max take the extreme of all values.
        """
        if not metric_lists:
            raise ValueError("metric_lists must hold at least one Metric; got an empty list")
        lengths = [len(m.values) for m in metric_lists]
        if len(set(lengths)) != 1:
            raise ValueError(f"every Metric in metric_lists must hold as many values; got lengths {lengths}")
        aggregation = metric_lists[0].aggregation
        arr = np.asarray([m.values for m in metric_lists], dtype=np.float64)
        if aggregation in (AggregationType.MEAN, AggregationType.SUM):
            return _aggregate(list(arr.mean(axis=0)), aggregation)
        return _aggregate(list(arr.ravel()), aggregation)

    def all_reduce(self, process_group: Any = None) -> float:
        """Aggregate over the union of every data-parallel rank's values (collective, exact).

        Unlike :meth:`aggregate_dp`, a mean is the mean of all values of all ranks, whatever
        the number of values per rank. See :func:`rlmetrics.all_reduce_metric`.
        """
        from rlmetrics._core.comm import all_reduce_metric

        return all_reduce_metric(self, process_group)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], aggregation: str | AggregationType) -> dict[str, Metric]:
        """One Metric per key of ``data``, each holding that key's value(s)."""
        return {key: cls(aggregation, value) for key, value in data.items()}

    def init_list(self) -> Metric:
        """An empty Metric with the same aggregation."""
        return Metric(self.aggregation)


def reduce_metrics(metrics: Mapping[str, Metric | Iterable[Any]]) -> dict[str, float]:
    """Reduce each metric's list of values to one number.

    A :class:`Metric` aggregates with its own aggregation; a plain list is reduced by
    :func:`reducer_for_key` (max, min or mean from the key's last path segment). An empty list
    gives NaN with a ``RuntimeWarning``. The input is not modified.

    Parameters
    ----------
    metrics : Mapping[str, Metric | list]
        Metric name to its values, e.g. one value per micro-batch.

    Returns
    -------
    dict[str, float]

    Examples
    --------
    >>> reduce_metrics({"loss": [1.0, 3.0], "critic/score/max": [5.0, 8.0], "actor/minibatch_loss": [1, 3]})
    {'loss': 2.0, 'critic/score/max': 8.0, 'actor/minibatch_loss': 2.0}
    """
    out: dict[str, float] = {}
    for key, val in metrics.items():
        if isinstance(val, Metric):
            out[key] = val.aggregate()
            continue
        if is_torch_array(val) or isinstance(val, np.ndarray):
            items: list[Any] = list(np.asarray(val.detach().cpu() if is_torch_array(val) else val).ravel())
        elif isinstance(val, int | float | np.number):
            items = [val]
        else:
            items = list(val)
        floats = [_to_float(v, where=f"metrics[{key!r}]") for v in items]
        out[key] = _aggregate(floats, reducer_for_key(key), key=key)
    return out

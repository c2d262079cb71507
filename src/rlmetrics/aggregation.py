"""Aggregation of metric values: ``reduce_metrics``, ``Metric``, and exactly across ranks.

``reduce_metrics``, ``Metric`` and ``AggregationType`` behave like ``verl.utils.metric`` with
one deliberate fix: the reducer of a plain list is chosen from the key's **last path segment**
(``.../max`` or ``..._max`` -> max, ``.../min`` or ``..._min`` -> min, anything else -> mean).
verl tests for the substring ``"min"`` anywhere in the key, so ``actor/minibatch_loss`` is
min-reduced there; here it is averaged.

Across data-parallel ranks, averaging per-rank means is wrong as soon as shards differ in size.
:class:`MetricCollector` keeps count, sum, sum of squares, max and min per key, as a
:class:`~rlmetrics._core.stats.Stats` (the type of every batch metric family), which merges
exactly. Its three distributed entry points -- :meth:`MetricCollector.all_reduce`,
:func:`all_reduce_metrics` and :func:`all_reduce_metric` (:meth:`Metric.all_reduce`) -- go
through the one agreement step of :func:`~rlmetrics._core.stats.agree_statistics`, then two
collectives for all keys together: a rank whose values are bad (NaN, not numbers) makes every
rank raise the same error naming it, instead of leaving the others waiting; ranks holding
different keys reduce their union.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import Any

import numpy as np

from rlmetrics._core.array import is_torch_array
from rlmetrics._core.stats import Stats, agree_statistics, all_reduce_checked
from rlmetrics.errors import UndefinedMetricWarning

__all__ = [
    "AggregationType",
    "Metric",
    "MetricCollector",
    "all_reduce_metric",
    "all_reduce_metrics",
    "reduce_metrics",
    "reducer_for_key",
]


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
        warnings.warn(f"no values to aggregate{where}; returning NaN", UndefinedMetricWarning, stacklevel=3)
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
    gives NaN with an ``UndefinedMetricWarning``. The input is not modified.

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


def _agreed_aggregations(signatures: list[Mapping[str, Any]]) -> dict[str, str]:
    """Judge of ranks holding different keys: the union of their keys with one aggregation each.

    Sorted by key; the same on every rank (every rank judges the same signatures). A key that
    two ranks aggregate differently raises the same ``ValueError`` on every rank.
    """
    kinds: dict[str, set[str]] = {}
    for sig in signatures:
        for key, agg in sig["aggregations"]:
            kinds.setdefault(key, set()).add(agg)
    clash = {k: sorted(v) for k, v in kinds.items() if len(v) > 1}
    if clash:
        raise ValueError(f"ranks disagree on the aggregation of some keys: {clash}")
    return {k: next(iter(v)) for k, v in sorted(kinds.items())}


def _same_keys(signatures: list[Mapping[str, Any]]) -> None:
    """Judge of ``keys=``: the ranks' keys differ (their only possible difference), so raise."""
    first = set(signatures[0]["layout"][1])
    diffs = []
    for rank, sig in enumerate(signatures[1:], start=1):
        mine = set(sig["layout"][1])
        if mine != first:
            lacks, extra = sorted(first - mine)[:5], sorted(mine - first)[:5]
            parts = ([f"lacks {lacks}"] if lacks else []) + ([f"has {extra} more"] if extra else [])
            diffs.append(f"rank {rank} " + " and ".join(parts) + " than rank 0")
    raise ValueError("keys= must be the same on every rank; " + "; ".join(diffs))


def _checked_keys(keys: Any) -> list[str]:
    """``keys=`` sorted and unique; a ``TypeError`` for one string or a key that is not one."""
    if isinstance(keys, str):
        raise TypeError(f"keys must be an iterable of metric keys, not one string; got {keys!r}")
    given = list(keys)
    bad = [k for k in given if not isinstance(k, str)]
    if bad:
        raise TypeError(f"keys must be strings; got {type(bad[0]).__name__} {bad[0]!r}")
    return sorted(set(given))


def _tensor_row(value: Any) -> Any:
    """``[count, sum, sumsq, max, min, n_nonfinite]`` of a tensor, float64, on its device."""
    import torch

    v = value.detach().reshape(-1).to(torch.float64)
    z = torch.zeros((), dtype=torch.float64, device=v.device)
    if v.numel():
        hi, lo = v.max(), v.min()
    else:
        hi, lo = z - math.inf, z + math.inf
    nonfinite = (~torch.isfinite(v)).sum().to(torch.float64)
    return torch.stack([z + v.numel(), v.sum(), (v * v).sum(), hi, lo, nonfinite])


def _host_row(key: str, value: Any) -> np.ndarray:
    """``[count, sum, sumsq, max, min, n_nonfinite]`` of a number, list, array or Metric."""
    if type(value) is float:  # the common case, without numpy (the same float64 numbers)
        total = 0.0 + value  # as numpy sums: from +0.0, so that a sum of -0.0 is +0.0
        return np.array([1.0, total, value * value, value, value, 0.0 if math.isfinite(value) else 1.0])
    if isinstance(value, Metric):
        value = value.values
    try:
        arr = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise TypeError(
            f"metrics[{key!r}] must be a number or an array/list of numbers; got {type(value).__name__}"
        ) from None
    n = arr.size
    hi, lo = (arr.max(), arr.min()) if n else (-math.inf, math.inf)
    return np.array([n, arr.sum(), np.dot(arr, arr), hi, lo, n - np.count_nonzero(np.isfinite(arr))])


def _values_to_host(metrics: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Per key, a float64 host vector of ``[count, sum, sumsq, max, min]``.

    Torch tensors are reduced on their device and all of them reach the host in one copy. NaN
    or infinite values raise a ``ValueError`` naming the key.
    """
    out: dict[str, np.ndarray] = {}
    on_device: dict[str, Any] = {}
    for key, value in metrics.items():
        if not isinstance(key, str):
            raise TypeError(f"metric keys must be strings; got {type(key).__name__} {key!r}")
        if is_torch_array(value):
            on_device[key] = _tensor_row(value)
        else:
            out[key] = _host_row(key, value)
    if on_device:
        import torch

        host = torch.stack([t.cpu() if t.device.type != "cpu" else t for t in on_device.values()]).numpy()
        out.update(zip(on_device, host))
    for key, row in out.items():
        if row[5]:
            raise ValueError(
                f"metrics[{key!r}] holds {int(row[5])} NaN or infinite value(s); expected finite numbers"
            )
    return {key: row[:5] for key, row in out.items()}


def _layout(keys: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The names of a collector's statistics for sorted ``keys``.

    Sums: every key's count, then every key's sum, then every key's sum of squares
    (``count/<key>``, ``sum/<key>``, ``sumsq/<key>``: sorted too); maxima and minima: the keys.
    """
    keys = tuple(keys)
    sums = tuple(f"{part}/{key}" for part in ("count", "sum", "sumsq") for key in keys)
    return sums, keys, keys


def _collected(keys: list[str], rows: np.ndarray) -> Stats:
    """The statistics of sorted ``keys`` from their ``(len(keys), 5)`` rows."""
    return Stats(_KIND, *_layout(keys), rows[:, :3].T.reshape(-1), rows[:, 3], rows[:, 4], {}, _compute)


def _union(a: Stats, b: Stats) -> Stats:
    """The statistics of both collectors' observations, over the union of their keys (exact)."""
    if not a.max_names:  # the first update: as it came (a -0.0 sum stays -0.0)
        return b
    if a.max_names != b.max_names:
        layout = _layout(sorted(set(a.max_names) | set(b.max_names)))
        a, b = a.reindexed(*layout), b.reindexed(*layout)
    return a.merge(b)


def _compute(
    s: dict[str, float],
    hi: dict[str, float],
    lo: dict[str, float],
    options: Mapping[str, Any],
    *,
    aggregations: Mapping[str, AggregationType],
) -> dict[str, float]:
    """The finaliser of a collector's statistics: one number per key (see ``compute``)."""
    out: dict[str, float] = {}
    for key in hi:  # sorted
        n, total = s["count/" + key], s["sum/" + key]
        agg = aggregations.get(key) or reducer_for_key(key)
        if n == 0:
            # stacklevel 4: the caller of MetricCollector.compute (through Stats.finalize)
            warnings.warn(
                f"no values to aggregate for {key!r}; returning NaN", UndefinedMetricWarning, stacklevel=4
            )
            out[key] = math.nan
        elif agg is AggregationType.MEAN:
            out[key] = total / n
        elif agg is AggregationType.SUM:
            out[key] = total
        elif agg is AggregationType.MAX:
            out[key] = hi[key]
        else:
            out[key] = lo[key]
    return out


_KIND = "metrics"
_NOTHING = _collected([], np.zeros((0, 5)))


class MetricCollector:
    """Sufficient statistics of many metrics (count, sum, sum of squares, min, max per key).

    Every value passed to :meth:`update` is one observation; the collector reduces them on the
    spot, so memory does not grow with the number of steps. The statistics are a
    :class:`~rlmetrics._core.stats.Stats` (the type of every batch metric family): collectors
    merge exactly (:meth:`merge`, ``+``), and :meth:`all_reduce` gives the statistics of the
    union of all data-parallel ranks with two collective calls for all keys together, after
    the agreement step every distributed entry point shares.

    Parameters
    ----------
    aggregations : dict[str, str or AggregationType], optional, keyword-only
        What :meth:`compute` reports per key; the default follows the key's last path segment
        (:func:`~rlmetrics.reducer_for_key`: ``.../max`` -> max, ``.../min`` -> min, else mean).

    Notes
    -----
    Sums and sums of squares are float64; the variance ``(sumsq - sum**2 / n) / (n - 1)`` loses
    relative precision when the spread is tiny compared with the mean (relative error about
    ``1e-16 * mean**2 / var``).

    Examples
    --------
    >>> c = MetricCollector()
    >>> c.update({"actor/pg_loss": [0.5, 1.5], "actor/grad_norm/max": 2.0})
    >>> c.update({"actor/pg_loss": 4.0, "actor/grad_norm/max": 7.0})
    >>> c.compute()
    {'actor/grad_norm/max': 7.0, 'actor/pg_loss': 2.0}
    >>> c.summary("actor/pg_loss")
    {'count': 3.0, 'mean': 2.0, 'std': 1.8027756377319946, 'min': 0.5, 'max': 4.0, 'sum': 6.0}
    """

    def __init__(self, *, aggregations: Mapping[str, str | AggregationType] | None = None) -> None:
        self._stats: Stats = _NOTHING  # immutable: every change makes new statistics
        self._aggregations: dict[str, AggregationType] = {}
        for key, agg in (aggregations or {}).items():
            try:
                self._aggregations[key] = agg if isinstance(agg, AggregationType) else AggregationType(agg)
            except ValueError:
                choices = ", ".join(repr(a.value) for a in AggregationType)
                raise ValueError(f"aggregations[{key!r}] must be one of {choices}; got {agg!r}") from None

    def __repr__(self) -> str:
        return f"MetricCollector(keys={len(self)})"

    def __len__(self) -> int:
        return len(self._stats.max_names)

    def __contains__(self, key: object) -> bool:
        return key in self._stats.max_names

    def keys(self) -> list[str]:
        """The collected keys, sorted."""
        return list(self._stats.max_names)

    def aggregation(self, key: str) -> AggregationType:
        """What :meth:`compute` reports for ``key``."""
        return self._aggregations.get(key) or reducer_for_key(key)

    def update(self, metrics: Mapping[str, Any]) -> None:
        """Add observations: per key a number, a 0-d or n-d array/tensor, a list or a ``Metric``.

        Every element is one observation. Torch tensors are reduced on their device and reach
        the host in one copy per call. NaN or infinite values raise ``ValueError`` naming the key
        (nothing is added then).
        """
        if not isinstance(metrics, Mapping):
            raise TypeError(f"metrics must be a mapping of key to values; got {type(metrics).__name__}")
        rows = _values_to_host(metrics)
        keys = sorted(rows)
        table = np.array([rows[k] for k in keys]).reshape(-1, 5)
        self._stats = _union(self._stats, _collected(keys, table))

    def _with(self, stats: Stats) -> MetricCollector:
        """A collector with these aggregations holding ``stats``."""
        out = MetricCollector(aggregations=self._aggregations)
        out._stats = stats
        return out

    def merge(self, other: MetricCollector) -> MetricCollector:
        """A new collector holding the observations of both (exact)."""
        if not isinstance(other, MetricCollector):
            raise TypeError(f"other must be a MetricCollector; got {type(other).__name__}")
        out = self._with(_union(self._stats, other._stats))
        for key, agg in other._aggregations.items():
            out._aggregations.setdefault(key, agg)
        return out

    __add__ = merge

    def copy(self) -> MetricCollector:
        """An independent copy."""
        return self._with(self._stats)

    def reset(self) -> None:
        """Forget every observation (the aggregations are kept)."""
        self._stats = _NOTHING

    def all_reduce(self, process_group: Any = None, *, keys: Iterable[str] | None = None) -> MetricCollector:
        """A new collector with the statistics of the union of all ranks' observations.

        Parameters
        ----------
        process_group : torch.distributed.ProcessGroup, optional
            ``None`` is the default group.
        keys : iterable of str, optional, keyword-only
            The keys to reduce, identical on every rank (checked: otherwise every rank raises
            the same ``ValueError``). By default the ranks reduce the union of their keys, so
            a rank that saw no value of a key (an empty shard) still takes part: one tiny
            agreement collective, plus one object all-gather of the key lists when they
            differ (a key that ranks aggregate differently raises the same ``ValueError`` on
            every rank).

        Returns
        -------
        MetricCollector
            Same on every rank; ``self`` is unchanged.
        """
        if keys is None:
            return _all_reduced(lambda: self, process_group, what="MetricCollector.all_reduce")
        wanted = keys

        def make() -> Stats:
            return self._stats.reindexed(*_layout(_checked_keys(wanted)))

        stats, _ = agree_statistics(make, process_group, what="keys=", judge=_same_keys)
        assert stats is not None  # make() returns statistics or raises
        return self._with(stats._reduced(process_group))

    def summary(self, key: str) -> dict[str, float]:
        """``count``, ``mean``, ``std`` (unbiased), ``min``, ``max`` and ``sum`` of one key.

        ``std`` is NaN (with an ``UndefinedMetricWarning``) for fewer than two observations.
        """
        if key not in self:
            present = ", ".join(self.keys()) or "none"
            raise ValueError(f"key {key!r} was never collected; keys present: {present}")
        s, high, low = self._stats.host_values()
        n, total, sumsq = s["count/" + key], s["sum/" + key], s["sumsq/" + key]
        hi, lo = high[key], low[key]
        if n == 0:
            warnings.warn(
                f"no values collected for {key!r}; its statistics are NaN",
                UndefinedMetricWarning,
                stacklevel=2,
            )
            nan = math.nan
            return {"count": 0.0, "mean": nan, "std": nan, "min": nan, "max": nan, "sum": 0.0}
        if n >= 2:
            std = math.sqrt(max(sumsq - total * total / n, 0.0) / (n - 1))
        else:
            warnings.warn(
                f"std of {key!r} needs at least two observations; got {int(n)}",
                UndefinedMetricWarning,
                stacklevel=2,
            )
            std = math.nan
        return {"count": n, "mean": total / n, "std": std, "min": lo, "max": hi, "sum": total}

    def compute(self) -> dict[str, float]:
        """One number per key, sorted by key: its mean, sum, min or max (see ``aggregations``).

        A key that was registered with no value (an empty list) gives NaN with a
        ``UndefinedMetricWarning``.
        """
        return self._stats.finalize(aggregations=self._aggregations)


def _all_reduced(make: Callable[[], MetricCollector], process_group: Any, *, what: str) -> MetricCollector:
    """``make()``'s collector over the union of every rank's keys: the agreement, then two reductions.

    ``make()`` runs inside the agreement step (:func:`~rlmetrics._core.stats.agree_statistics`):
    a rank whose values are bad makes every rank raise the same error, naming it. When the
    ranks' keys (or aggregations) differ, their signatures are gathered and
    :func:`_agreed_aggregations` gives the union, which every rank reduces.
    """
    made: list[MetricCollector] = []
    extra: dict[str, Any] = {}

    def statistics() -> Stats:
        collector = make()
        made.append(collector)
        extra["aggregations"] = tuple((k, collector.aggregation(k).value) for k in collector.keys())
        return collector._stats

    stats, agreed = agree_statistics(
        statistics, process_group, what=what, extra=extra, judge=_agreed_aggregations
    )
    assert stats is not None  # make() returns a collector or raises
    if agreed is not None:
        stats = stats.reindexed(*_layout(agreed))
    out = made[0]._with(stats._reduced(process_group))
    out._aggregations.update({k: AggregationType(a) for k, a in (agreed or {}).items()})
    return out


def all_reduce_metrics(
    metrics: Mapping[str, Metric | Iterable[Any]], process_group: Any = None
) -> dict[str, float]:
    """``reduce_metrics`` over the union of all ranks' values, exactly.

    A mean is the mean of every value of every rank (not the mean of per-rank means), a sum the
    sum over all ranks, a max/min the extreme over all ranks. :class:`~rlmetrics.Metric` values
    use their aggregation, plain lists :func:`~rlmetrics.reducer_for_key`. The ranks first agree
    (one tiny collective; the key lists are gathered only when they differ, and the union is
    reduced), then all keys travel in one ``SUM`` and one ``MAX`` all-reduce. A key with no
    value on any rank gives NaN with an ``UndefinedMetricWarning``. A rank whose values are bad (NaN or
    infinite values, not numbers) makes every rank raise the same ``ValueError`` /
    ``TypeError``, naming that rank and key.

    Parameters
    ----------
    metrics : Mapping[str, Metric | list]
        This rank's values per key.
    process_group : torch.distributed.ProcessGroup, optional
        ``None`` is the default group.

    Returns
    -------
    dict[str, float]
        Sorted by key; the same on every rank.
    """

    def make() -> MetricCollector:  # checked inside the agreement (a rank raising alone would hang)
        if not isinstance(metrics, Mapping):
            raise TypeError(f"metrics must be a mapping of key to values; got {type(metrics).__name__}")
        aggregations = {
            key: (val.aggregation if isinstance(val, Metric) else reducer_for_key(key))
            for key, val in metrics.items()
            if isinstance(key, str)
        }
        collector = MetricCollector(aggregations=aggregations)
        collector.update(metrics)
        return collector

    return _all_reduced(make, process_group, what="all_reduce_metrics").compute()


def all_reduce_metric(metric: Metric, process_group: Any = None) -> float:
    """Aggregate of one :class:`~rlmetrics.Metric` over the union of all ranks' values.

    Every rank must call it (collective): one tiny agreement collective (a rank whose values
    are bad, or whose Metric has another aggregation, makes every rank raise the same error),
    then two ``all_reduce`` calls. NaN with an ``UndefinedMetricWarning`` when no rank holds a value.
    """
    key = "metric"
    agreed: dict[str, str] = {}

    def make() -> Stats:  # checked inside the agreement
        if not isinstance(metric, Metric):
            raise TypeError(f"metric must be a Metric; got {type(metric).__name__}")
        agreed["aggregation"] = metric.aggregation.value
        collector = MetricCollector()
        collector.update({key: metric.values})
        return collector._stats

    stats = all_reduce_checked(
        make, process_group, what="all_reduce_metric", extra=agreed, topic="the Metric's aggregation"
    )
    assert stats is not None  # make() returns statistics or raises
    return MetricCollector(aggregations={key: agreed["aggregation"]})._with(stats).compute()[key]

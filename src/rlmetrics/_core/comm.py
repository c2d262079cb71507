"""Exact aggregation of metrics across data-parallel ranks.

Averaging per-rank means is wrong as soon as shards differ in size, and summing per-rank sums
makes a metric grow with the number of ranks. Here every metric is kept as **sufficient
statistics** that merge exactly -- counts and sums (merged by addition), maxima and minima --
and the statistics of all metrics are packed into contiguous vectors so that a whole metric
dictionary costs two ``torch.distributed.all_reduce`` calls: one ``SUM`` and one ``MAX`` (the
minima travel negated in the ``MAX`` call, ``min(x) = -max(-x)``).

* :func:`all_reduce_stats` -- the generic primitive on packed ``sums``/``maxes``/``mins``.
* :func:`all_reduce_data_stats` -- used by ``compute_data_metrics(..., process_group=)``.
* :func:`all_reduce_metrics` -- a distributed ``reduce_metrics`` over lists and ``Metric``.
* :class:`MetricCollector` -- count, sum, sum of squares, min and max per key; merges and
  all-reduces exactly.

numpy statistics travel as torch CPU tensors (gloo); CUDA tensors stay on their device for
nccl. Results come back in the caller's array type and device.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from rlmetrics._core.array import is_torch_array
from rlmetrics.aggregation import AggregationType, Metric, reducer_for_key

__all__ = [
    "MetricCollector",
    "all_reduce_data_stats",
    "all_reduce_metrics",
    "all_reduce_stats",
    "empty_data_stats",
]

# Layout of one key's statistics inside a MetricCollector.
_COUNT, _SUM, _SUMSQ, _MAX, _MIN = range(5)


# ---------------------------------------------------------------------------------------------
# Communication
# ---------------------------------------------------------------------------------------------


def _dist() -> Any:
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover - torch is present in the test environment
        raise ImportError(
            "distributed aggregation needs torch.distributed: pip install 'rlmetrics[torch]'"
        ) from None
    if not dist.is_available():  # pragma: no cover
        raise RuntimeError("torch.distributed is not available in this torch build")
    if not dist.is_initialized():
        raise RuntimeError(
            "process_group: torch.distributed is not initialised; call "
            "torch.distributed.init_process_group(...) first (or pass process_group=None)"
        )
    return dist


def _comm_device(dist: Any, process_group: Any, device: Any) -> Any:
    """Device the packed statistics must live on for the group's backend."""
    import torch

    backend = str(dist.get_backend(process_group)).lower()
    if backend == "gloo":
        return torch.device("cpu")
    if backend == "nccl":
        if device is not None and device.type == "cuda":
            return device
        return torch.device("cuda", torch.cuda.current_device())
    # Mixed backends ("cpu:gloo,cuda:nccl") and others: keep the data where it is.
    return device if device is not None else torch.device("cpu")


def _all_reduce_packed(sums: Any, extremes: Any, process_group: Any) -> tuple[Any, Any]:
    """SUM-reduce ``sums`` and MAX-reduce ``extremes`` (1-d float64 torch tensors), in place."""
    dist = _dist()
    if sums.numel():
        dist.all_reduce(sums, op=dist.ReduceOp.SUM, group=process_group)
    if extremes.numel():
        dist.all_reduce(extremes, op=dist.ReduceOp.MAX, group=process_group)
    return sums, extremes


def _to_torch_1d(x: Any, name: str) -> Any:
    import torch

    if is_torch_array(x):
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
    """All-reduce packed sufficient statistics: sums by ``SUM``, maxes by ``MAX``, mins by ``MIN``.

    Exactly two collective calls whatever the vector lengths (the minima are negated and ride
    in the ``MAX`` call). Every rank must pass vectors of the same lengths in the same layout.

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
        ``(sums, maxes, mins)`` of the union of the ranks, float64, as numpy arrays for numpy
        inputs and as tensors on the inputs' device for torch inputs (``None`` stays ``None``).

    Examples
    --------
    Needs an initialised process group; with a world of one rank the statistics come back
    unchanged:

    >>> import numpy as np, torch.distributed as dist
    >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    >>> all_reduce_stats(np.array([3.0, 1.5]), np.array([2.0]), np.array([-1.0]))
    (array([3. , 1.5]), array([2.]), array([-1.]))
    >>> dist.destroy_process_group()
    """
    import torch

    dist = _dist()
    parts = [("sums", sums), ("maxes", maxes), ("mins", mins)]
    tensors = {name: None if x is None else _to_torch_1d(x, name) for name, x in parts}
    torch_in = any(is_torch_array(x) for _, x in parts if x is not None)
    in_device = next((t.device for t in tensors.values() if t is not None), None)
    comm = _comm_device(dist, process_group, in_device)
    s = tensors["sums"]
    if s is None:
        raise TypeError("sums must be a 1-d array of statistics; got None")
    s = s.to(comm).clone()
    hi = tensors["maxes"] if tensors["maxes"] is not None else torch.empty(0, dtype=torch.float64)
    lo = tensors["mins"] if tensors["mins"] is not None else torch.empty(0, dtype=torch.float64)
    n_hi = hi.numel()
    ext = torch.cat([hi.to(comm), -lo.to(comm)])
    s, ext = _all_reduce_packed(s, ext, process_group)
    out_hi, out_lo = ext[:n_hi], -ext[n_hi:]

    def back(t: Any, given: Any) -> Any:
        if given is None:
            return None
        if torch_in:
            return t.to(in_device)
        return t.cpu().numpy()

    return back(s, sums), back(out_hi, maxes), back(out_lo, mins)


def all_reduce_data_stats(stats: Any, process_group: Any = None) -> Any:
    """:class:`~rlmetrics.training.data.DataStats` of the union of all ranks' batches.

    Two collective calls (``SUM`` of the sums, ``MAX`` of the maxima and negated minima). A
    rank whose shard is empty contributes :func:`empty_data_stats`.

    Parameters
    ----------
    stats : DataStats
        This rank's statistics (``sums``, ``maxes``, ``mins`` vectors, numpy or torch).
    process_group : torch.distributed.ProcessGroup, optional
        ``None`` is the default group.

    Returns
    -------
    DataStats
        Same array type and device as ``stats``.
    """
    from rlmetrics.training.data import DataStats

    if not isinstance(stats, DataStats):
        raise TypeError(f"stats must be a DataStats; got {type(stats).__name__}")
    sums, maxes, mins = all_reduce_stats(stats.sums, stats.maxes, stats.mins, process_group=process_group)
    return DataStats(sums=sums, maxes=maxes, mins=mins)


def empty_data_stats(device: Any = None) -> Any:
    """:class:`~rlmetrics.training.data.DataStats` of an empty shard: zero sums, -inf maxes, +inf mins.

    Parameters
    ----------
    device : str or torch.device, optional
        ``None`` gives numpy arrays; otherwise float64 torch tensors on that device.

    Examples
    --------
    >>> s = empty_data_stats()
    >>> float(s.sums.sum()), float(s.maxes.max()), float(s.mins.min())
    (0.0, -inf, inf)
    """
    from rlmetrics.training.data import EXTREME_FIELDS, SUM_FIELDS, DataStats

    n_s, n_e = len(SUM_FIELDS), len(EXTREME_FIELDS)
    if device is None:
        return DataStats(sums=np.zeros(n_s), maxes=np.full(n_e, -math.inf), mins=np.full(n_e, math.inf))
    import torch

    dev, f64 = torch.device(device), torch.float64
    return DataStats(
        sums=torch.zeros(n_s, dtype=f64, device=dev),
        maxes=torch.full((n_e,), -math.inf, dtype=f64, device=dev),
        mins=torch.full((n_e,), math.inf, dtype=f64, device=dev),
    )


def _gather_layout(local: list[tuple[str, str]], process_group: Any) -> list[tuple[str, str]]:
    """Sorted union of every rank's ``(key, aggregation)`` pairs; same result on every rank."""
    dist = _dist()
    world = dist.get_world_size(process_group)
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, sorted(local), group=process_group)
    kinds: dict[str, set[str]] = {}
    for items in gathered:
        for key, agg in items:
            kinds.setdefault(key, set()).add(agg)
    clash = {k: sorted(v) for k, v in kinds.items() if len(v) > 1}
    if clash:
        raise ValueError(f"ranks disagree on the aggregation of some keys: {clash}")
    return [(k, next(iter(v))) for k, v in sorted(kinds.items())]


# ---------------------------------------------------------------------------------------------
# Collector
# ---------------------------------------------------------------------------------------------


def _values_to_host(metrics: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Per key, a float64 host vector of ``[count, sum, sumsq, max, min, n_nonfinite]``.

    Torch tensors are reduced on their device and all of them reach the host in one copy.
    """
    out: dict[str, np.ndarray] = {}
    torch_keys: list[str] = []
    torch_stats: list[Any] = []
    for key, value in metrics.items():
        if not isinstance(key, str):
            raise TypeError(f"metric keys must be strings; got {type(key).__name__} {key!r}")
        if is_torch_array(value):
            import torch

            v = value.detach().reshape(-1).to(torch.float64)
            finite = torch.isfinite(v)
            z = torch.zeros((), dtype=torch.float64, device=v.device)
            if v.numel():
                hi, lo = v.max(), v.min()
            else:
                hi = torch.full((), -math.inf, dtype=torch.float64, device=v.device)
                lo = torch.full((), math.inf, dtype=torch.float64, device=v.device)
            torch_keys.append(key)
            torch_stats.append(
                torch.stack(
                    [
                        z + v.numel(),
                        v.sum(),
                        (v * v).sum(),
                        hi,
                        lo,
                        (~finite).sum().to(torch.float64),
                    ]
                )
            )
            continue
        if isinstance(value, Metric):
            value = value.values
        try:
            arr = np.asarray(value, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise TypeError(
                f"metrics[{key!r}] must be a number or an array/list of numbers; got {type(value).__name__}"
            ) from None
        n = arr.size
        out[key] = np.array(
            [
                n,
                arr.sum(),
                np.dot(arr, arr),
                arr.max() if n else -math.inf,
                arr.min() if n else math.inf,
                n - np.count_nonzero(np.isfinite(arr)),
            ]
        )
    if torch_stats:
        import torch

        host = torch.stack([t.cpu() if t.device.type != "cpu" else t for t in torch_stats]).numpy()
        for key, row in zip(torch_keys, host):
            out[key] = row
    for key, row in out.items():
        if row[5]:
            raise ValueError(
                f"metrics[{key!r}] holds {int(row[5])} NaN or infinite value(s); expected finite numbers"
            )
    return out


class MetricCollector:
    """Sufficient statistics of many metrics (count, sum, sum of squares, min, max per key).

    Every value passed to :meth:`update` is one observation; the collector reduces them on the
    spot, so memory does not grow with the number of steps. Collectors merge exactly
    (:meth:`merge`, ``+``), and :meth:`all_reduce` gives the statistics of the union of all
    data-parallel ranks with two collective calls for all keys together.

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
        self._stats: dict[str, np.ndarray] = {}
        self._aggregations: dict[str, AggregationType] = {}
        for key, agg in (aggregations or {}).items():
            try:
                self._aggregations[key] = agg if isinstance(agg, AggregationType) else AggregationType(agg)
            except ValueError:
                choices = ", ".join(repr(a.value) for a in AggregationType)
                raise ValueError(f"aggregations[{key!r}] must be one of {choices}; got {agg!r}") from None

    def __repr__(self) -> str:
        return f"MetricCollector(keys={len(self._stats)})"

    def __len__(self) -> int:
        return len(self._stats)

    def __contains__(self, key: object) -> bool:
        return key in self._stats

    def keys(self) -> list[str]:
        """The collected keys, sorted."""
        return sorted(self._stats)

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
        for key, row in _values_to_host(metrics).items():
            self._merge_row(key, row[:5])

    def _merge_row(self, key: str, row: np.ndarray) -> None:
        cur = self._stats.get(key)
        if cur is None:
            self._stats[key] = row.astype(np.float64, copy=True)
            return
        cur[_COUNT] += row[_COUNT]
        cur[_SUM] += row[_SUM]
        cur[_SUMSQ] += row[_SUMSQ]
        cur[_MAX] = max(cur[_MAX], row[_MAX])
        cur[_MIN] = min(cur[_MIN], row[_MIN])

    def merge(self, other: MetricCollector) -> MetricCollector:
        """A new collector holding the observations of both (exact)."""
        if not isinstance(other, MetricCollector):
            raise TypeError(f"other must be a MetricCollector; got {type(other).__name__}")
        out = self.copy()
        for key, agg in other._aggregations.items():
            out._aggregations.setdefault(key, agg)
        for key, row in other._stats.items():
            out._merge_row(key, row)
        return out

    __add__ = merge

    def copy(self) -> MetricCollector:
        """An independent copy."""
        out = MetricCollector(aggregations=self._aggregations)
        out._stats = {k: v.copy() for k, v in self._stats.items()}
        return out

    def reset(self) -> None:
        """Forget every observation (the aggregations are kept)."""
        self._stats.clear()

    def all_reduce(self, process_group: Any = None, *, keys: Iterable[str] | None = None) -> MetricCollector:
        """A new collector with the statistics of the union of all ranks' observations.

        Parameters
        ----------
        process_group : torch.distributed.ProcessGroup, optional
            ``None`` is the default group.
        keys : iterable of str, optional, keyword-only
            The keys to reduce, identical on every rank. By default the ranks first exchange
            their key lists (one small ``all_gather_object``) and reduce the union, so a rank
            that saw no value of a key (an empty shard) still takes part.

        Returns
        -------
        MetricCollector
            Same on every rank; ``self`` is unchanged.
        """
        import torch

        if keys is None:
            local = [(k, self.aggregation(k).value) for k in self._stats]
            layout = [k for k, _ in _gather_layout(local, process_group)]
        else:
            layout = sorted(set(keys))
        empty = np.array([0.0, 0.0, 0.0, -math.inf, math.inf])
        rows = np.stack([self._stats.get(k, empty) for k in layout]) if layout else np.zeros((0, 5))
        dist = _dist()
        comm = _comm_device(dist, process_group, None)
        sums = torch.from_numpy(np.ascontiguousarray(rows[:, :3]).reshape(-1)).to(comm)
        ext = torch.from_numpy(np.concatenate([rows[:, _MAX], -rows[:, _MIN]])).to(comm)
        sums, ext = _all_reduce_packed(sums, ext, process_group)
        s_host = sums.cpu().numpy().reshape(-1, 3)
        e_host = ext.cpu().numpy()
        n = len(layout)
        out = MetricCollector(aggregations=self._aggregations)
        for i, key in enumerate(layout):
            out._stats[key] = np.array([*s_host[i], e_host[i], -e_host[n + i]])
        return out

    def summary(self, key: str) -> dict[str, float]:
        """``count``, ``mean``, ``std`` (unbiased), ``min``, ``max`` and ``sum`` of one key.

        ``std`` is NaN (with a ``RuntimeWarning``) for fewer than two observations.
        """
        if key not in self._stats:
            present = ", ".join(sorted(self._stats)) or "none"
            raise ValueError(f"key {key!r} was never collected; keys present: {present}")
        n, total, sumsq, hi, lo = (float(x) for x in self._stats[key])
        if n == 0:
            warnings.warn(
                f"no values collected for {key!r}; its statistics are NaN", RuntimeWarning, stacklevel=2
            )
            nan = math.nan
            return {"count": 0.0, "mean": nan, "std": nan, "min": nan, "max": nan, "sum": 0.0}
        if n >= 2:
            std = math.sqrt(max(sumsq - total * total / n, 0.0) / (n - 1))
        else:
            warnings.warn(
                f"std of {key!r} needs at least two observations; got {int(n)}", RuntimeWarning, stacklevel=2
            )
            std = math.nan
        return {"count": n, "mean": total / n, "std": std, "min": lo, "max": hi, "sum": total}

    def compute(self) -> dict[str, float]:
        """One number per key, sorted by key: its mean, sum, min or max (see ``aggregations``).

        A key that was registered with no value (an empty list) gives NaN with a
        ``RuntimeWarning``.
        """
        out: dict[str, float] = {}
        for key in sorted(self._stats):
            n, total, _, hi, lo = (float(x) for x in self._stats[key])
            agg = self.aggregation(key)
            if n == 0:
                warnings.warn(
                    f"no values to aggregate for {key!r}; returning NaN", RuntimeWarning, stacklevel=2
                )
                out[key] = math.nan
            elif agg is AggregationType.MEAN:
                out[key] = total / n
            elif agg is AggregationType.SUM:
                out[key] = total
            elif agg is AggregationType.MAX:
                out[key] = hi
            else:
                out[key] = lo
        return out


# ---------------------------------------------------------------------------------------------
# reduce_metrics across ranks, Metric.all_reduce
# ---------------------------------------------------------------------------------------------


def all_reduce_metrics(
    metrics: Mapping[str, Metric | Iterable[Any]], process_group: Any = None
) -> dict[str, float]:
    """``reduce_metrics`` over the union of all ranks' values, exactly.

    A mean is the mean of every value of every rank (not the mean of per-rank means), a sum the
    sum over all ranks, a max/min the extreme over all ranks. :class:`~rlmetrics.Metric` values
    use their aggregation, plain lists :func:`~rlmetrics.reducer_for_key`. The ranks exchange
    their key lists (one small ``all_gather_object``), then all keys travel in one ``SUM`` and
    one ``MAX`` all-reduce. A key with no value on any rank gives NaN with a ``RuntimeWarning``.

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
    if not isinstance(metrics, Mapping):
        raise TypeError(f"metrics must be a mapping of key to values; got {type(metrics).__name__}")
    aggregations = {
        key: (val.aggregation if isinstance(val, Metric) else reducer_for_key(key))
        for key, val in metrics.items()
    }
    collector = MetricCollector(aggregations=aggregations)
    collector.update(metrics)
    local = [(k, a.value) for k, a in aggregations.items()]
    layout = _gather_layout(local, process_group)
    reduced = collector.all_reduce(process_group, keys=[k for k, _ in layout])
    reduced._aggregations.update({k: AggregationType(a) for k, a in layout})
    return reduced.compute()


def all_reduce_metric(metric: Metric, process_group: Any = None) -> float:
    """Aggregate of one :class:`~rlmetrics.Metric` over the union of all ranks' values.

    Every rank must call it (collective); two ``all_reduce`` calls, no object exchange. NaN
    with a ``RuntimeWarning`` when no rank holds a value.
    """
    if not isinstance(metric, Metric):
        raise TypeError(f"metric must be a Metric; got {type(metric).__name__}")
    key = "metric"
    collector = MetricCollector(aggregations={key: metric.aggregation})
    collector.update({key: metric.values})
    reduced = collector.all_reduce(process_group, keys=[key])
    return reduced.compute()[key]

"""The sufficient-statistics type of every batch metric family: :class:`Stats`.

A family (data metrics, variance proxies, PPO update, rollout mismatch) first reduces its
inputs to named **sums**, **maxima** and **minima**, kept on the inputs' device as three
float64 vectors. Such statistics merge exactly -- add the sums, take the max of the maxima and
the min of the minima -- so micro-batches (:meth:`Stats.merge`) and data-parallel ranks
(:meth:`Stats.all_reduce`, two collectives after the agreement step of
:func:`~rlmetrics._core.comm.agree`) combine without error from averaging averages. The
family's finaliser then turns the host values into the metric dictionary
(:meth:`Stats.finalize`, one device-to-host copy).

A :class:`Stats` carries the options its finaliser needs and a reference to that finaliser, so
this module knows no family.

The distributed entry points, all through one agreement step (:func:`agree_statistics`, on
:func:`~rlmetrics._core.comm.agree`):

* :meth:`Stats.all_reduce`: statistics already made, reduced over the ranks;
* :func:`all_reduce_checked`: statistics made on each rank inside the agreement (a rank whose
  input is bad raises with the others, never alone), then reduced;
* :func:`metrics_from`: the decorator that makes every ``compute_X(..., process_group=)`` from
  its ``X_statistics`` (statistics, then :func:`all_reduce_checked`, then
  :meth:`Stats.finalize`);
* ``MetricCollector.all_reduce`` (:mod:`rlmetrics.aggregation`): the same agreement step, with
  a judge that lets ranks hold different keys and reduces their union.

:func:`~rlmetrics._core.comm.all_reduce_stats` (bare vectors, its own length agreement) stays
the transport under them.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import numpy as np

from rlmetrics._core.array import array_namespace, is_torch_array, vectors_to_host
from rlmetrics._core.categories import is_category_field
from rlmetrics._core.comm import agree, all_reduce_stats, describe_disagreement

__all__ = [
    "ANY",
    "INVALID_MASK",
    "Finaliser",
    "Stats",
    "agree_statistics",
    "all_reduce_checked",
    "check_prefix",
    "invalid_mask_field",
    "metrics_from",
    "stand_in_statistics",
    "union_layout",
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


def _take(xp: Any, vector: Any, names: tuple[str, ...], wanted: tuple[str, ...], fill: float) -> Any:
    """``vector`` (entries named ``names``) read at ``wanted``, ``fill`` where a name is absent."""
    where = {name: i for i, name in enumerate(names)}
    device = getattr(vector, "device", None) if is_torch_array(vector) else None
    padded = xp.concat([vector, xp.full((1,), fill, dtype=vector.dtype, device=device)])
    index = xp.asarray([where.get(name, len(names)) for name in wanted], dtype=xp.int64, device=device)
    return xp.take(padded, index, axis=0)


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

    def reindexed(
        self, sum_names: Sequence[str], max_names: Sequence[str], min_names: Sequence[str]
    ) -> Stats:
        """The same statistics in another layout (a superset, a subset, another order).

        A name absent here holds the statistics of nothing (0, ``-inf``, ``+inf``); a name
        absent from the new layout is dropped. The vectors stay where they are.
        """
        layout = (tuple(sum_names), tuple(max_names), tuple(min_names))
        if layout == (self.sum_names, self.max_names, self.min_names):
            return self
        xp = array_namespace(self.sums)
        return Stats(
            self.kind,
            *layout,
            _take(xp, self.sums, self.sum_names, layout[0], 0.0),
            _take(xp, self.maxes, self.max_names, layout[1], -math.inf),
            _take(xp, self.mins, self.min_names, layout[2], math.inf),
            self.options,
            self.finaliser,
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
        copy); parts on different devices merge on the host. Parts whose layouts differ only
        in per-category entries (``group_by=``: they saw different categories) merge over the
        union of their entries (:func:`union_layout`). Deferred mask checks are summed,
        so a bad mask in any part still raises in :meth:`finalize`.
        """
        parts = (self, *others)
        for p in others:
            if not isinstance(p, Stats):
                raise TypeError(f"can merge Stats only with Stats; got {type(p).__name__}")
            if p.kind != self.kind or _plain_layout(p) != _plain_layout(self):
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
        layouts = {p.layout() for p in parts}
        if len(layouts) > 1:  # parts that saw different categories: their union, sorted
            union = union_layout(layouts)
            parts = tuple(p.reindexed(*union) for p in parts)
        devices = {str(p.sums.device) if is_torch_array(p.sums) else "numpy" for p in parts}
        if len(devices) > 1:
            parts = tuple(p.to_host() for p in parts)
        xp = array_namespace(parts[0].sums)
        return parts[0]._like(  # parts[0]: in the union's layout when the layouts differ
            xp.sum(xp.stack([p.sums for p in parts]), axis=0),
            xp.max(xp.stack([p.maxes for p in parts]), axis=0),
            xp.min(xp.stack([p.mins for p in parts]), axis=0),
        )

    def layout(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        """``(sum_names, max_names, min_names)``."""
        return self.sum_names, self.max_names, self.min_names

    def __add__(self, other: Stats) -> Stats:
        return self.merge(other)

    def signature(self) -> dict[str, Any]:
        """What ranks must share for their statistics to all-reduce: kind, layout and options."""
        return {
            "kind": self.kind,
            "layout": (self.sum_names, self.max_names, self.min_names),
            **{str(k): v for k, v in self.options.items()},
        }

    def all_reduce(self, process_group: Any = None) -> Stats:
        """Statistics of the union of every rank's batch: one ``SUM`` and one ``MAX`` collective.

        Collective: every rank calls it with statistics of the same kind, layout and options (a
        rank without data passes statistics of an empty batch). A tiny agreement collective
        goes first (:func:`agree_statistics`, the one every distributed entry point shares):
        ranks whose statistics differ raise the same ``ValueError`` on every rank, naming what
        differs, instead of reducing vectors of different layouts. ``None`` is the default group.
        """
        what = f"the {self.kind!r} statistics"
        reduced = all_reduce_checked(lambda: self, process_group, what=what, topic=what)
        assert reduced is not None  # the statistics are made: never None
        return reduced

    def _device(self) -> Any:
        return self.sums.device if is_torch_array(self.sums) else None

    def _reduced(self, process_group: Any) -> Stats:
        """The all-reduce itself, the agreement having been made."""
        sums, maxes, mins = all_reduce_stats(
            self.sums, self.maxes, self.mins, process_group=process_group, check=False
        )
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


Layout = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]


def _plain_layout(stats: Stats) -> Layout:
    """The layout without its per-category entries (those of ``group_by=``)."""
    return cast(
        Layout, tuple(tuple(n for n in names if not is_category_field(n)) for names in stats.layout())
    )


def union_layout(layouts: Collection[Layout]) -> Layout:
    """The union of layouts that differ only in per-category entries: the plain entries in their
    order, then every per-category entry, sorted (the same on every rank)."""
    merged = []
    for i in range(3):
        plain = next(iter(layouts))[i]
        extra = sorted({n for lay in layouts for n in lay[i] if is_category_field(n)})
        merged.append(tuple(n for n in plain if not is_category_field(n)) + tuple(extra))
    return cast(Layout, tuple(merged))


#: Signature field of a rank whose family made no statistics (the inputs it needs are absent).
MISSING = "missing inputs"

#: A signature value that matches any other (an empty shard has no say on optional inputs).
ANY = "<any>"


def _conflicts(signatures: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The signatures reduced to their conflicting fields (empty dicts when they are compatible).

    A field conflicts when two ranks hold different values other than :data:`ANY`.
    """
    fields = {name for sig in signatures for name in sig}
    keep = {
        name
        for name in fields
        if len({repr(sig.get(name, MISSING)) for sig in signatures if sig.get(name, MISSING) != ANY}) > 1
    }
    return [{k: v for k, v in sig.items() if k in keep} for sig in signatures]


#: ``judge(signatures)``: raises when the ranks' differing signatures cannot reduce, else returns
#: what the caller needs to reduce them (the union of the ranks' keys ...).
Judge = Callable[[list[Mapping[str, Any]]], Any]


def agree_statistics(
    make: Callable[[], Stats | None],
    process_group: Any,
    *,
    what: str,
    device: Any = None,
    missing: Callable[[], str] | None = None,
    extra: Mapping[str, Any] | None = None,
    topic: str | None = None,
    judge: Judge | None = None,
) -> tuple[Stats | None, Any]:
    """The agreement step of every reduction of statistics: ``make()`` here, checked on every rank.

    Collective. A rank whose ``make()`` raises (bad input) does not leave the others waiting in
    a collective: it joins the agreement (:func:`~rlmetrics._core.comm.agree`, one tiny
    ``all_gather``) and every rank raises the same error, ``"rank 2: <reason>"``. When the
    ranks' signatures (:meth:`Stats.signature` plus ``extra``) differ, they are gathered and
    judged: by ``judge`` if given, else every rank raises the same ``ValueError`` naming the
    differing options (a value :data:`ANY` matches any other).

    Parameters
    ----------
    make : callable
        Computes this rank's statistics; any exception it raises is caught. It may return
        ``None`` when the family's optional inputs are absent (the variance proxies without
        ``sum_pi_squared``): ``None`` on every rank is agreed; on some ranks only, every rank
        raises a ``ValueError`` naming those ranks and ``missing()``'s reason.
    process_group : torch.distributed.ProcessGroup or None
        The group (``None``: the default group).
    what : str, keyword-only
        The entry point, for the messages (``"compute_data_metrics"``).
    device : torch.device, optional, keyword-only
        The inputs' device, used by a rank whose ``make()`` failed (nccl needs a CUDA device).
    missing : callable, optional, keyword-only
        Why ``make()`` returned ``None`` on this rank (e.g. ``"batch has no 'sum_pi_squared'"``).
    extra : Mapping, optional, keyword-only
        More fields every rank must agree on beyond the statistics' own signature, read after
        ``make()`` (which may fill it in).
    topic : str, optional, keyword-only
        What the ranks disagree on, in the message (default ``"the options of <what>"``).
    judge : callable, optional, keyword-only
        ``judge(signatures)`` replaces the default check of differing signatures: it raises
        (on every rank alike: every rank sees the same signatures) or returns what the caller
        needs to reduce them.

    Returns
    -------
    tuple
        ``(stats, verdict)``: this rank's statistics (``None`` where ``make()`` gave ``None`` on
        every rank) and ``judge``'s verdict (``None`` when the signatures agree). Without
        ``judge``, ranks whose layouts differ only in per-category entries agree, and the
        verdict is the union layout (:func:`union_layout`) that every rank must reduce.
    """
    stats: Stats | None = None
    error: BaseException | None = None
    reason = ""
    try:
        stats = make()
        if stats is None and missing is not None:
            reason = missing()
    except Exception as err:  # any failure on one rank must reach the others, not strand them
        error = err
    signature: dict[str, Any] = {MISSING: reason} if stats is None else stats.signature()
    if stats is not None and extra:
        signature.update(extra)
    where = device if stats is None else stats._device()
    signatures = agree(
        signature, error, process_group=process_group, device=where, what=what, on_mismatch="gather"
    )
    if signatures is None:
        return stats, None
    if judge is not None:
        return stats, judge(signatures)
    return stats, _check_options(signatures, what, topic or f"the options of {what}")


def _check_options(signatures: list[Mapping[str, Any]], what: str, topic: str) -> Layout | None:
    """The default judge: inputs present on every rank or none, and no conflicting option.

    Layouts that differ only in per-category entries (ranks that saw different categories)
    agree: the verdict is their union (:func:`union_layout`), which every rank reduces.
    """
    absent = [(rank, sig[MISSING]) for rank, sig in enumerate(signatures) if MISSING in sig]
    if absent and len(absent) < len(signatures):
        raise ValueError(
            "; ".join(f"rank {rank}: {why or 'inputs missing'}" for rank, why in absent)
            + f"; the other ranks have the inputs of {what} (every rank must pass the same tensors)"
        )
    if absent:
        return None
    conflicts = _conflicts(signatures)
    union = None
    if any("layout" in c for c in conflicts):
        layouts = [cast(Layout, sig["layout"]) for sig in signatures]
        plain = {
            tuple(tuple(n for n in names if not is_category_field(n)) for names in lay) for lay in layouts
        }
        if len(plain) == 1:
            union = union_layout(layouts)
            conflicts = [{k: v for k, v in c.items() if k != "layout"} for c in conflicts]
    if any(conflicts):
        raise ValueError(describe_disagreement(topic, conflicts))
    return union


def all_reduce_checked(
    make: Callable[[], Stats | None],
    process_group: Any,
    *,
    what: str,
    device: Any = None,
    missing: Callable[[], str] | None = None,
    extra: Mapping[str, Any] | None = None,
    topic: str | None = None,
) -> Stats | None:
    """``make()`` on this rank, agreed over every rank (:func:`agree_statistics`), then all-reduced.

    The distributed path of every ``compute_X(..., process_group=)`` (through
    :func:`metrics_from`) and of :meth:`Stats.all_reduce`: one tiny agreement collective, then
    one ``SUM`` and one ``MAX`` all-reduce. Arguments as :func:`agree_statistics`.

    Returns
    -------
    Stats or None
        The statistics of the union of the ranks' batches (``None`` where ``make()`` gave
        ``None`` on every rank).
    """
    stats, union = agree_statistics(
        make, process_group, what=what, device=device, missing=missing, extra=extra, topic=topic
    )
    if stats is None:
        return None
    if union is not None:  # ranks that saw different categories reduce the union of their entries
        stats = stats.reindexed(*union)
    return stats._reduced(process_group)


_Compute = TypeVar("_Compute", bound=Callable[..., dict[str, float]])


def metrics_from(
    statistics: Callable[..., Stats | None],
    *,
    late: tuple[str, ...] = (),
    check_late: Callable[..., object] | None = None,
    agree_on: Callable[[Any], Mapping[str, Any]] | None = None,
    missing: Callable[[Any], str] | None = None,
) -> Callable[[_Compute], _Compute]:
    """Decorator: ``compute_X(..., process_group=None)`` made from its ``X_statistics``.

    The decorated function gives the public signature and docstring; its body is empty (it is
    called first, so that a wrong call raises Python's own ``TypeError`` naming it). It takes
    the parameters of ``statistics`` (same names, kinds and defaults: checked at import), the
    ``late`` options of :meth:`Stats.finalize`, and a keyword-only ``process_group=None``.
    A call is ``statistics(...)``, then, with ``process_group``, :func:`all_reduce_checked`
    (the statistics are made inside the agreement step), then ``.finalize(**late)``; ``{}``
    when ``statistics`` returns ``None`` (optional inputs absent, on every rank).

    Parameters
    ----------
    statistics : callable
        ``X_statistics(...) -> Stats`` (or ``None``).
    late : tuple of str, keyword-only
        Parameters passed to :meth:`Stats.finalize` instead (``gradient_norm``).
    check_late : callable, optional, keyword-only
        ``check_late(**late)`` validates them before the collectives, with ``process_group=``.
    agree_on : callable, optional, keyword-only
        ``agree_on(first_argument)``: more fields the ranks must agree on (optional keys).
    missing : callable, optional, keyword-only
        ``missing(first_argument)``: why ``statistics`` returned ``None``.
    """

    def decorate(fn: _Compute) -> _Compute:
        n_positional, late_positional, first = _routing(fn, statistics, late)

        @functools.wraps(fn)
        def compute(*args: Any, **kwargs: Any) -> dict[str, float]:
            fn(*args, **kwargs)  # a wrong call: Python's TypeError, naming compute_X
            process_group = kwargs.pop("process_group", None)
            options = {name: kwargs.pop(name) for name in late if name in kwargs}
            options.update(zip(late_positional, args[n_positional:]))
            args = args[:n_positional]
            if process_group is None:
                stats = statistics(*args, **kwargs)
                return {} if stats is None else stats.finalize(**options)
            present: dict[str, Any] = {}
            head = args[0] if args else kwargs.get(first)
            tensors = [v for v in (*args, *kwargs.values()) if is_torch_array(v)]

            def make() -> Stats | None:
                if check_late is not None:
                    check_late(**options)  # checked before the collectives, like the inputs
                made = statistics(*args, **kwargs)
                if made is not None and agree_on is not None:
                    present.update(agree_on(head))
                return made

            stats = all_reduce_checked(
                make,
                process_group,
                what=fn.__name__,
                device=tensors[0].device if tensors else None,  # the inputs' device, whichever is given
                missing=None if missing is None else lambda: missing(head),
                extra=present,
            )
            # {} on every rank when every rank lacks the optional inputs; mixed ranks raised
            return {} if stats is None else stats.finalize(**options)

        return cast(_Compute, compute)

    return decorate


def _routing(
    fn: Callable[..., Any], statistics: Callable[..., Any], late: tuple[str, ...]
) -> tuple[int, tuple[str, ...], str]:
    """(positional parameters of ``statistics``, ``late`` ones of ``fn`` after them, first name).

    Checks that ``fn``'s parameters are ``statistics``' plus ``late`` plus a keyword-only
    ``process_group=None``, so that the two signatures cannot drift apart.
    """
    params = list(inspect.signature(fn).parameters.values())
    wanted = list(inspect.signature(statistics).parameters.values())
    group = params[-1] if params else None
    if group is None or (group.name, group.kind, group.default) != (
        "process_group",
        inspect.Parameter.KEYWORD_ONLY,
        None,
    ):
        raise TypeError(f"{fn.__name__} must end with a keyword-only process_group=None")
    own = [p for p in params[:-1] if p.name not in late]
    if [(p.name, p.kind, p.default) for p in own] != [(p.name, p.kind, p.default) for p in wanted]:
        raise TypeError(f"{fn.__name__} must take the parameters of {statistics.__name__}, then {late}")
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    n_positional = sum(p.kind in positional for p in wanted)
    late_positional = tuple(p.name for p in params[n_positional:-1] if p.kind in positional)
    if any(name not in late for name in late_positional):
        raise TypeError(f"{fn.__name__}: the positional parameters of {statistics.__name__} come first")
    return n_positional, late_positional, params[0].name


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

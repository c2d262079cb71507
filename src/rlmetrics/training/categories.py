"""Metrics by category (``group_by=``, the outcome split) for the batch families, exact across ranks.

A family that takes ``group_by=`` reads each sample's label (:func:`resolve_groups`), reduces
its per-row quantities once per category with segment sums, maxima and minima over the category
codes (:func:`category_entries`: one vectorised pass per group, whatever the number of
categories), and appends the results to its :class:`~rlmetrics._core.stats.Stats` as extra named
entries (:func:`with_entries`). The plain entries, hence the plain keys, stay as they are.
Statistics of parts that saw different categories merge and all-reduce over the union of their
entries (``Stats.merge``; the agreement step of ``Stats.all_reduce``). The finaliser splits the
host values back by category (:func:`split_by_category`), folds the categories beyond
``max_categories`` into :data:`~rlmetrics.keys.OTHER_CATEGORY` (one warning), and names each
category's metrics with :func:`~rlmetrics.keys.category_key`.

Where the folding happens: only in the finaliser, on the union of every merged part and rank.
The statistics keep every category's entries exactly, however many categories a part has, so
which categories stay does not depend on how the batch was split: the ``max_categories - 1``
with the most samples in the union (ties by name) stay, and the merged statistics of any split
finalise to the metrics of the whole batch. (Folding each part before merging would not: a
category kept in one part and folded in another would leave samples in both its own entries and
``<other>``.)

A hard cap bounds the entries one call makes: a group with more than
:data:`EXACT_CATEGORIES` categories in one call (or ``max_categories``, when larger), typically
a per-sample or per-prompt id passed as ``group_by=`` by mistake, is folded already in the
statistics, to that many categories, with its own :class:`~rlmetrics.errors.RLMetricsWarning`
saying that merged and all-reduced per-category metrics are then approximate. Below the cap
nothing is approximate.
"""

from __future__ import annotations

import functools
import math
import operator
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from rlmetrics import keys as K
from rlmetrics._core.array import array_namespace, is_torch_array
from rlmetrics._core.batch import BatchView
from rlmetrics._core.categories import (
    category_codes,
    field_names,
    is_category_field,
    limit_categories,
    on_device,
    parse_field,
    segment_max,
    segment_min,
    segment_sum,
)
from rlmetrics._core.checks import check_int
from rlmetrics._core.stats import Stats
from rlmetrics.errors import RLMetricsWarning

__all__ = [
    "DEFAULT_MAX_CATEGORIES",
    "EXACT_CATEGORIES",
    "Group",
    "category_entries",
    "check_max_categories",
    "finalize_by_category",
    "finalize_with_categories",
    "resolve_groups",
    "split_by_category",
    "warn_folded",
    "with_entries",
]

#: Default ``max_categories=``: the categories beyond it are reported as one ``<other>``.
DEFAULT_MAX_CATEGORIES = 64

#: Hard cap on the categories of one group that one call keeps exactly in its statistics (or
#: ``max_categories``, when larger). Each category costs a few dozen entries (names, vector
#: slots, the layout ranks agree on), so a label with one category per sample (an id) would
#: otherwise make statistics as large as the batch times the fields. Beyond the cap the call
#: folds its least frequent categories into ``<other>`` before merging, with a warning that the
#: merged per-category metrics are approximate; at or below it they are exact.
EXACT_CATEGORIES = 4096

#: Host values of statistics: ``(sums, maxes, mins)`` by name.
Values = tuple[dict[str, float], dict[str, float], dict[str, float]]


class Group(NamedTuple):
    """One grouping of the batch's samples: its name, sorted category names, each row's code."""

    name: str
    categories: tuple[str, ...]
    codes: np.ndarray


def check_max_categories(value: Any) -> int:
    """``max_categories=``: an integer >= 1."""
    return check_int(value, "max_categories", minimum=1)


def warn_folded(group: str, max_categories: int) -> None:
    """The one warning of a call whose categories beyond ``max_categories`` were folded."""
    warnings.warn(
        f"group_by {group!r} has more than max_categories={max_categories} categories: the least "
        f"frequent are reported together as {K.OTHER_CATEGORY!r}",
        RLMetricsWarning,
        stacklevel=4,
    )


def _column(view: BatchView, name: str, why: str) -> Any:
    """A per-sample column of the batch: a non-tensor entry, else a tensor."""
    if name in view.non_tensors:
        return view.non_tensors[name]
    if view.has(name):
        return view.tensor(name)
    raise KeyError(f"{why}: the batch has no column {name!r} (non-tensor keys: {sorted(view.non_tensors)})")


def resolve_groups(
    view: BatchView,
    n_rows: int,
    *,
    group_by: Any,
    group_name: str | None,
    max_categories: int,
    split_by_outcome: bool = False,
    score_threshold: float | None = None,
    seq_score: Any = None,
) -> list[Group]:
    """The groupings a call asks for: ``group_by=`` (a column name or labels) and the outcome split
    (a family without outcomes leaves its three options out).

    ``seq_score`` (each row's score, any namespace) is read only with ``score_threshold=``.
    Every category is kept (``max_categories`` applies when the statistics are finalised), up to
    the hard cap :data:`EXACT_CATEGORIES` (or ``max_categories``, when larger).
    """
    groups: list[Group] = []
    if group_by is not None:
        if isinstance(group_by, str):
            name, labels, where = (
                group_name or group_by,
                _column(view, group_by, "group_by"),
                f"batch[{group_by!r}]",
            )
        else:
            name, labels, where = group_name or "group", group_by, "group_by"
        K.category_key("", name, "")  # checks the group name
        categories, codes = category_codes(labels, n_rows, where=where)
        groups.append(_capped(Group(name, categories, codes), max(EXACT_CATEGORIES, max_categories)))
    outcome = _outcome_labels(view, n_rows, split_by_outcome, score_threshold, seq_score)
    if outcome is not None:
        names = (K.OUTCOME_CORRECT, K.OUTCOME_INCORRECT)
        present = sorted({names[0] if ok else names[1] for ok in outcome.tolist()})
        index = {c: i for i, c in enumerate(present)}
        codes = np.where(outcome, index.get(names[0], 0), index.get(names[1], 0)).astype(np.int64)
        groups.append(Group(K.OUTCOME_GROUP, tuple(present), codes))
    if len({g.name for g in groups}) < len(groups):
        raise ValueError(f"group_name must differ from {K.OUTCOME_GROUP!r} with split_by_outcome=")
    return groups


def _capped(group: Group, cap: int) -> Group:
    """``group`` itself, or, beyond ``cap`` categories, its most frequent ``cap - 1`` and
    ``<other>``, with a warning that merging then is approximate (see :data:`EXACT_CATEGORIES`)."""
    if len(group.categories) <= cap:
        return group
    names, codes, _ = limit_categories(group.categories, group.codes, cap, K.OTHER_CATEGORY)
    warnings.warn(
        f"group_by {group.name!r} has {len(group.categories)} categories in one call, more than the "
        f"{cap} whose statistics are kept exactly: the least frequent are folded into "
        f"{K.OTHER_CATEGORY!r} before merging, so per-category metrics of merged parts or ranks are "
        "approximate (group by a coarser label, or raise max_categories=)",
        RLMetricsWarning,
        stacklevel=4,
    )
    return Group(group.name, names, codes)


def _outcome_labels(
    view: BatchView, n_rows: int, split: bool, threshold: float | None, seq_score: Any
) -> np.ndarray | None:
    """Each row's outcome (True: correct), from ``acc`` or from the score and ``score_threshold``."""
    if not isinstance(split, bool | np.bool_):
        raise TypeError(f"split_by_outcome must be a bool; got {type(split).__name__} {split!r}")
    if threshold is not None:
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or math.isnan(threshold):
            raise TypeError(f"score_threshold must be a real number; got {threshold!r}")
        score = seq_score.detach().cpu().numpy() if is_torch_array(seq_score) else np.asarray(seq_score)
        return np.asarray(score >= threshold, dtype=bool).reshape(-1)
    if not split:
        return None
    acc = _column(view, "acc", "split_by_outcome=True reads 'acc' (or pass score_threshold=)")
    acc = acc.detach().cpu().numpy() if is_torch_array(acc) else np.asarray(acc)
    if acc.shape != (n_rows,) or acc.dtype.kind not in "biuf":
        raise ValueError(
            f"batch['acc'] must hold one number or bool per sample ({n_rows},); got {acc.dtype} {acc.shape}"
        )
    return np.asarray(acc > 0.5, dtype=bool)


class Columns(NamedTuple):
    """Per-row quantities of a family, by the entry name each one reduces to (each ``(B,)``)."""

    sums: Mapping[str, Any]
    maxes: Mapping[str, Any]
    mins: Mapping[str, Any]
    #: ``(m2_name, sq_over_n_name, n column, sum column, per-row M2 column)``: centred second
    #: moments combined over the rows of each category (Chan), kept with ``S**2 / n`` to merge.
    moments: Sequence[tuple[str, str, Any, Any, Any]] = ()


def _stack(xp: Any, columns: Sequence[Any], like: Any) -> Any:
    """The columns as one ``(B, F)`` float64 array (a number: the same value on every row;
    no columns: ``(B, 0)``, for a family without maxima or minima)."""
    device = like.device if is_torch_array(like) else None
    n = like.shape[0]
    if not columns:
        return xp.zeros((n, 0), dtype=xp.float64, device=device)
    return xp.stack(
        [
            xp.astype(c, xp.float64)
            if hasattr(c, "shape")
            else xp.full((n,), float(c), dtype=xp.float64, device=device)
            for c in columns
        ],
        axis=1,
    )


def _moments(
    xp: Any, codes: Any, n_cat: int, moments: Sequence[tuple[str, str, Any, Any, Any]], like: Any
) -> tuple[list[str], Any]:
    """Per-category M2 and ``S**2 / n`` of each moment spec: ``(names, (n_cat, 2 * len) array)``.

    Every spec at once: one segment sum of the ``(n, S, M2)`` columns, one of the between-row
    terms (Chan: each row's ``n * (row mean - category mean)**2``).
    """
    if not moments:
        return [], None
    k = len(moments)
    rows = _stack(xp, [c for spec in moments for c in spec[2:]], like)  # (B, 3k): n, S, M2 per spec
    nt = segment_sum(rows, codes, n_cat)
    n64, t64 = rows[:, 0::3], rows[:, 1::3]  # (B, k)
    n_c, s_c, m2_c = nt[:, 0::3], nt[:, 1::3], nt[:, 2::3]  # (n_cat, k)
    has_c = n_c > 0
    mean_c = s_c / xp.where(has_c, n_c, xp.ones_like(n_c))
    at_row = xp.take(mean_c, codes, axis=0)  # (B, k)
    has = n64 > 0
    dev = xp.where(has, t64 / xp.where(has, n64, xp.ones_like(n64)), at_row) - at_row
    between = segment_sum(n64 * dev * dev, codes, n_cat)
    zero = xp.zeros_like(n_c)
    m2 = xp.where(has_c, m2_c + between, zero)
    sq = xp.where(has_c, s_c * s_c / xp.where(has_c, n_c, xp.ones_like(n_c)), zero)
    out = xp.stack([m2, sq], axis=2)  # (n_cat, k, 2): each spec's M2 then S**2 / n
    names = [name for spec in moments for name in spec[:2]]
    return names, xp.reshape(out, (n_cat, 2 * k))


def category_entries(groups: Sequence[Group], columns: Columns, like: Any) -> tuple[list[Any], list[Any]]:
    """Per-category entries: ``([sum names, max names, min names], [sums, maxes, mins])`` vectors.

    ``like`` is a ``(B,)`` array of the batch's namespace and device. One segment reduction per
    group and kind over all columns at once.
    """
    xp = array_namespace(like)
    names: list[list[str]] = [[], [], []]
    vectors: list[list[Any]] = [[], [], []]
    for group in groups:
        codes, n_cat = on_device(group.codes, like), len(group.categories)
        parts = [
            (list(columns.sums), segment_sum(_stack(xp, list(columns.sums.values()), like), codes, n_cat)),
            (list(columns.maxes), segment_max(_stack(xp, list(columns.maxes.values()), like), codes, n_cat)),
            (list(columns.mins), segment_min(_stack(xp, list(columns.mins.values()), like), codes, n_cat)),
        ]
        m_names, m_values = _moments(xp, codes, n_cat, columns.moments, like)
        if m_values is not None:
            parts[0] = (parts[0][0] + m_names, xp.concat([parts[0][1], m_values], axis=1))
        for i, (fields, matrix) in enumerate(parts):
            names[i] += field_names(group.name, group.categories, tuple(fields))
            vectors[i].append(xp.reshape(matrix, (-1,)))
    return names, [xp.concat(v) if v else None for v in vectors]


def with_entries(stats: Stats, names: list[Any], vectors: list[Any]) -> Stats:
    """``stats`` with per-category entries appended (from :func:`category_entries`)."""
    if not names[0]:
        return stats
    xp = array_namespace(stats.sums)
    return Stats(
        stats.kind,
        stats.sum_names + tuple(names[0]),
        stats.max_names + tuple(names[1]),
        stats.min_names + tuple(names[2]),
        xp.concat([stats.sums, vectors[0]]),
        xp.concat([stats.maxes, vectors[1]]),
        xp.concat([stats.mins, vectors[2]]),
        stats.options,
        stats.finaliser,
    )


def split_by_category(
    sums: dict[str, float], maxes: dict[str, float], mins: dict[str, float]
) -> tuple[Values, dict[tuple[str, str], Values]]:
    """Host values split into the plain ones and, by ``(group, category)``, each category's."""
    plain: Values = ({}, {}, {})
    by: dict[tuple[str, str], Values] = {}
    for i, values in enumerate((sums, maxes, mins)):
        listed = list(values.values())
        names = tuple(values)
        for where, fields, take in (_cached_plan if len(names) <= _CACHED_PLAN else _plan)(names):
            got = take(listed)
            row = dict(zip(fields, got if len(fields) > 1 else (got,)))
            if where is None:
                plain[i].update(row)
            else:
                by.setdefault(where, ({}, {}, {}))[i].update(row)
    return plain, by


def _plan(names: tuple[str, ...]) -> tuple[tuple[tuple[str, str] | None, tuple[str, ...], Any], ...]:
    """Where the entries go: ``((group, category) or None for the plain ones, fields, getter)``,
    the getter picking those entries' values out of the list of all values (in ``names`` order)."""
    spots: dict[tuple[str, str] | None, tuple[list[str], list[int]]] = {}
    for i, name in enumerate(names):
        if is_category_field(name):
            group, category, field = parse_field(name)
            where: tuple[str, str] | None = (group, category)
        else:
            where, field = None, name
        fields, index = spots.setdefault(where, ([], []))
        fields.append(field)
        index.append(i)
    return tuple((where, tuple(f), operator.itemgetter(*ix)) for where, (f, ix) in spots.items())


#: Layouts of at most this many entries keep their plan (the same every step); larger ones (many
#: categories, which may change every step) are planned afresh rather than kept in the cache.
_CACHED_PLAN = 1 << 13
_cached_plan = functools.lru_cache(maxsize=64)(_plan)


#: How sums, maxima and minima of two categories combine (NaN spreads, as in the reductions).
_COMBINE: tuple[Callable[[float, float], float], ...] = (
    lambda a, b: a + b,
    lambda a, b: math.nan if math.isnan(a) or math.isnan(b) else max(a, b),
    lambda a, b: math.nan if math.isnan(a) or math.isnan(b) else min(a, b),
)


def _fold(
    by: dict[tuple[str, str], Values], count: str, max_categories: int
) -> dict[tuple[str, str], Values]:
    """At most ``max_categories`` categories per group; the least frequent (by ``count``) folded
    into :data:`~rlmetrics.keys.OTHER_CATEGORY` (sums added, extremes combined).

    ``by`` holds the union of every merged part and rank, so the categories kept (the most
    samples, ties by name) and the folded values are those of the whole batch, whatever the split.
    """
    out: dict[tuple[str, str], Values] = {}
    for group in sorted({g for g, _ in by}):
        cats = sorted((c for g, c in by if g == group), key=lambda c: (-by[group, c][0].get(count, 0.0), c))
        if len(cats) <= max_categories:
            out.update({(group, c): by[group, c] for c in cats})
            continue
        warn_folded(group, max_categories)
        kept = [c for c in cats if c != K.OTHER_CATEGORY][: max_categories - 1]
        out.update({(group, c): by[group, c] for c in kept})
        other: Values = ({}, {}, {})
        for c in cats:
            if c in kept:
                continue
            for i, combine in enumerate(_COMBINE):
                for name, value in by[group, c][i].items():
                    other[i][name] = combine(other[i][name], value) if name in other[i] else value
        out[group, K.OTHER_CATEGORY] = other
    return out


def finalize_with_categories(
    values: Values,
    finalize: Any,
    plain: Mapping[str, Any],
    *,
    count: str,
    max_categories: int,
    per_category: Any = None,
) -> dict[str, float]:
    """A grouped family's metrics: the plain ones, then each category's.

    ``values`` are the host ``(sums, maxes, mins)`` with the category entries among them;
    ``finalize(sums, maxes, mins, plain)`` makes the plain metrics and, unless ``per_category``
    is given, each category's (see :func:`finalize_by_category`).
    """
    (s, hi, lo), by = split_by_category(*values)
    metrics = finalize(s, hi, lo, plain)
    metrics.update(
        finalize_by_category(by, per_category or finalize, plain, count=count, max_categories=max_categories)
    )
    return metrics


def finalize_by_category(
    by: dict[tuple[str, str], Values],
    finalize: Any,
    options: Mapping[str, Any],
    *,
    count: str,
    max_categories: int,
) -> dict[str, float]:
    """Each category's metrics, ``finalize(sums, maxes, mins, options)`` renamed by
    :func:`~rlmetrics.keys.category_key`; a category with ``count == 0`` (seen nowhere) is skipped."""
    metrics: dict[str, float] = {}
    for (group, category), (s, hi, lo) in sorted(_fold(by, count, max_categories).items()):
        if s.get(count, 0.0) <= 0:
            continue
        head = K.category_key("", group, category)  # "by_<group>/<token>/": named once per category
        for key, value in finalize(s, hi, lo, options).items():
            metrics[head + key] = value
    return metrics

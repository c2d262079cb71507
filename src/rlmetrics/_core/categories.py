"""Per-sample categories of a batch, and the per-category entries of a :class:`~rlmetrics._core.stats.Stats`.

A batch family given ``group_by=`` reduces each of its per-row quantities once per category, as
extra named entries of the same statistics (``field_name(group, category, field)``), so that
:meth:`Stats.merge` and :meth:`Stats.all_reduce` stay exact: parts (micro-batches, ranks) that
saw different categories combine over the union of their entries, a category absent from a part
holding the statistics of nothing there. The categories of a batch are sorted by name, so every
rank lays out the same vector for the same categories.

Here: the labels read and factorised into sorted category codes (:func:`category_codes`), the
limit on their number (:func:`limit_categories`), vectorised segment sums, maxima and minima
over the codes for numpy and torch (:func:`segment_sum`, :func:`segment_max`,
:func:`segment_min`), and the entry names (:func:`field_name`, :func:`parse_field`).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from rlmetrics._core.array import is_torch_array

__all__ = [
    "FIELD_MARK",
    "category_codes",
    "field_name",
    "field_names",
    "is_category_field",
    "limit_categories",
    "parse_field",
    "segment_max",
    "segment_min",
    "segment_sum",
]

#: First character of every per-category entry name (no plain entry starts with it).
FIELD_MARK = "\x1e"
_SEP = "\x1f"


def field_name(group: str, category: str, field: str) -> str:
    """Name of the entry of ``field`` restricted to ``category`` of ``group``."""
    return f"{FIELD_MARK}{group}{_SEP}{category}{_SEP}{field}"


#: Layouts of at most this many categories are cached (the same every step); larger ones (a
#: high-cardinality label whose categories change every step) are built afresh, not kept.
CACHED_CATEGORIES = 256


def field_names(group: str, categories: tuple[str, ...], fields: tuple[str, ...]) -> tuple[str, ...]:
    """The entry names of every field of every category, category-major."""
    if len(categories) <= CACHED_CATEGORIES:
        return _cached_field_names(group, categories, fields)
    return _field_names(group, categories, fields)


def _field_names(group: str, categories: tuple[str, ...], fields: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(field_name(group, c, f) for c in categories for f in fields)


_cached_field_names = functools.lru_cache(maxsize=256)(_field_names)  # one layout per group and family


def is_category_field(name: str) -> bool:
    """Whether ``name`` is a per-category entry (made by :func:`field_name`)."""
    return name.startswith(FIELD_MARK)


@functools.lru_cache(maxsize=1 << 14)  # the same names come back every step
def parse_field(name: str) -> tuple[str, str, str]:
    """``(group, category, field)`` of a per-category entry name."""
    group, rest = name[1:].split(_SEP, 1)
    category, field = rest.rsplit(_SEP, 1)
    return group, category, field


def _labels_array(labels: Any, n_rows: int, where: str) -> np.ndarray:
    """``labels`` as a 1-d host array of ``n_rows`` entries, or a clear error."""
    if is_torch_array(labels):
        labels = labels.detach().cpu().numpy()
    if isinstance(labels, str | bytes) or not hasattr(labels, "__len__"):
        raise TypeError(f"{where} must be a sequence of labels, one per sample; got {type(labels).__name__}")
    arr = np.asarray(labels, dtype=object) if not isinstance(labels, np.ndarray) else labels
    if arr.ndim != 1:
        raise ValueError(f"{where} must be 1-d, one label per sample; got shape {arr.shape}")
    if arr.shape[0] != n_rows:
        raise ValueError(f"{where} must hold one label per sample ({n_rows}); got {arr.shape[0]}")
    return arr


def _label_text(label: Any) -> str:
    """A label as its category name: strings as they are, bytes decoded, numbers by ``str``."""
    if isinstance(label, bytes):
        return label.decode("utf-8", "replace")
    if isinstance(label, np.generic):
        label = label.item()
    if isinstance(label, float) and label.is_integer():
        return str(int(label))
    return str(label)


def category_codes(labels: Any, n_rows: int, *, where: str) -> tuple[tuple[str, ...], np.ndarray]:
    """The sorted category names of ``labels`` and each sample's code into them (int64, host).

    Labels are strings (verl's ``data_source``), bytes, numbers (``3`` and ``3.0`` are one
    category, ``"3"``) or booleans; each becomes its text. ``where`` names the argument in errors.
    """
    arr = _labels_array(labels, n_rows, where)
    if arr.dtype.kind in "US":
        texts = arr.astype(str)
    elif arr.dtype.kind == "b":
        texts = np.where(arr, "True", "False")
    elif arr.dtype.kind in "iu":
        texts = arr.astype(np.int64).astype(str)
    else:
        if arr.dtype.kind == "f" and np.isnan(arr).any():
            raise ValueError(f"{where} holds NaN labels")
        items = arr.tolist()
        if all(type(v) is str for v in items):  # verl's data_source: strings as they are
            texts = np.asarray(items, dtype=str)
        else:
            texts = np.asarray([_label_text(v) for v in items], dtype=object).astype(str)
    names, codes = np.unique(texts, return_inverse=True)
    return tuple(str(n) for n in names.tolist()), codes.astype(np.int64).reshape(-1)


def limit_categories(
    names: tuple[str, ...], codes: np.ndarray, max_categories: int, other: str
) -> tuple[tuple[str, ...], np.ndarray, bool]:
    """At most ``max_categories`` categories: the most frequent ``max_categories - 1`` (ties by
    name) kept, the others folded into ``other``. Returns ``(names, codes, folded)``, sorted."""
    if len(names) <= max_categories:
        return names, codes, False
    counts = np.bincount(codes, minlength=len(names))
    order = sorted(range(len(names)), key=lambda c: (-counts[c], names[c]))
    kept = {names[c] for c in order[: max_categories - 1]}
    new_names = tuple(sorted(kept | {other}))
    index = {name: i for i, name in enumerate(new_names)}
    remap = np.asarray([index[n] if n in kept else index[other] for n in names], dtype=np.int64)
    return new_names, remap[codes], True


def on_device(codes: np.ndarray, like: Any) -> Any:
    """The codes in the namespace and on the device of ``like`` (a torch tensor or numpy array)."""
    if is_torch_array(like):
        import torch

        return torch.as_tensor(codes, device=like.device)
    return codes


def segment_sum(values: Any, codes: Any, n: int) -> Any:
    """``(n, F)`` sums of the rows of ``values`` ``(B, F)`` by code (float64)."""
    if is_torch_array(values):
        import torch

        sums = torch.zeros((n, values.shape[1]), dtype=torch.float64, device=values.device)
        return sums.index_add_(0, codes, values.to(torch.float64))
    values = np.asarray(values, dtype=np.float64)
    out = np.empty((n, values.shape[1]), dtype=np.float64)
    if n * values.shape[0] > _ONEHOT_SIZE:  # many categories: one scatter per column, O(B) memory
        for col in range(values.shape[1]):
            out[:, col] = np.bincount(codes, weights=values[:, col], minlength=n)
        return out
    onehot = np.zeros((n, values.shape[0]), dtype=np.float64)
    onehot[codes, np.arange(values.shape[0])] = 1.0
    # a zero times a non-finite value is NaN: sum those columns by scatter instead of by product
    finite = np.isfinite(values).all(axis=0)
    out[:, finite] = onehot @ values[:, finite]
    for f in np.flatnonzero(~finite):
        out[:, f] = np.bincount(codes, weights=values[:, f], minlength=n)
    return out


#: Largest ``(categories, rows)`` one-hot matrix :func:`segment_sum` multiplies by (8 MiB).
_ONEHOT_SIZE = 1 << 20


def _segment_extreme(values: Any, codes: Any, n: int, largest: bool) -> Any:
    fill = -math.inf if largest else math.inf
    if is_torch_array(values):
        import torch

        ext = torch.full((n, values.shape[1]), fill, dtype=torch.float64, device=values.device)
        index = codes[:, None].expand(-1, values.shape[1])
        return ext.scatter_reduce_(0, index, values.to(torch.float64), "amax" if largest else "amin")
    out = np.full((n, values.shape[1]), fill, dtype=np.float64)
    if values.shape[0] == 0:
        return out
    # rows sorted by code, each code's run reduced at once (a few times faster than ufunc.at)
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    reduce = np.maximum if largest else np.minimum  # NaN spreads, as in the plain reductions
    out[ordered[starts]] = reduce.reduceat(np.asarray(values, dtype=np.float64)[order], starts, axis=0)
    return out


def segment_max(values: Any, codes: Any, n: int) -> Any:
    """``(n, F)`` maxima of the rows of ``values`` ``(B, F)`` by code (``-inf`` where none; NaN spreads)."""
    return _segment_extreme(values, codes, n, True)


def segment_min(values: Any, codes: Any, n: int) -> Any:
    """``(n, F)`` minima of the rows of ``values`` ``(B, F)`` by code (``+inf`` where none; NaN spreads)."""
    return _segment_extreme(values, codes, n, False)

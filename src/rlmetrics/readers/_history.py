"""The history type every reader returns, and the rows-to-history step they share.

A *history* is a mapping of metric key -> ``(steps, values)``: two 1-d numpy arrays of the same
length, steps int64 and increasing, values float64 (NaN where the run logged a non-finite value).
It lives here, below every consumer (:mod:`rlmetrics.health`, :mod:`rlmetrics.report`), and is
re-exported by :mod:`rlmetrics.health.findings`, where it was first defined.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from rlmetrics import keys as K

__all__ = ["History", "as_history", "last_per_step", "rows_history"]

#: metric key -> (steps, values), both 1-d numpy arrays of one length, steps increasing
History = Mapping[str, tuple[np.ndarray, np.ndarray]]

_Series = dict[str, tuple[np.ndarray, np.ndarray]]
_NUMERIC = frozenset({int, float})


def as_history(data: Any) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """A history from ``read_jsonl`` rows (dicts with a ``step``) or a mapping key -> (steps, values).

    Rows: every numeric field other than ``step`` and ``timestamp`` becomes a series; a row
    without an integer ``step`` is numbered after the previous one. Steps logged twice keep the
    last value. Non-numeric values are ignored.

    Examples
    --------
    >>> h = as_history([{"step": 0, "a": 1.0}, {"step": 1, "a": 2.0, "b": 5}])
    >>> h["a"][1].tolist(), h["b"][0].tolist()
    ([1.0, 2.0], [1])
    """
    if isinstance(data, Mapping):
        out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        in_order: dict[int, Any] = {}  # id -> the steps found in order (keys often share them)
        for key, pair in data.items():
            try:
                steps, values = pair
            except (TypeError, ValueError):
                raise TypeError(
                    f"history[{key!r}] must be a (steps, values) pair; got {type(pair).__name__}"
                ) from None
            s, v = np.asarray(steps, dtype=np.int64), np.asarray(values, dtype=np.float64)
            s, v = (s if s.ndim == 1 else s.reshape(-1)), (v if v.ndim == 1 else v.reshape(-1))
            if s.shape != v.shape:
                raise ValueError(f"history[{key!r}]: {s.size} steps but {v.size} values")
            if in_order.get(id(steps)) is steps:
                out[str(key)] = (s, v)
                continue
            out[str(key)] = last_per_step(s, v)
            if out[str(key)][0] is s:  # returned as it came: in step order, no step twice
                in_order[id(steps)] = steps  # kept: its id is not another's while it is checked
        return out
    if not isinstance(data, Iterable):
        raise TypeError(
            f"history must be a list of rows or a mapping key -> (steps, values); got {type(data).__name__}"
        )
    history, _ = rows_history(data)
    return history


def rows_history(rows: Iterable[Any]) -> tuple[_Series, tuple[np.ndarray, np.ndarray] | None]:
    """The history of ``rows`` (as :func:`as_history` reads them) and their ``(steps, timestamps)``.

    Consecutive rows with the same keys, every value an int or a float (a tracker's usual run),
    are read as one float table; any other row key by key. The timestamps are the finite
    ``timestamp`` fields, at their row's step (None when no row has one).

    Examples
    --------
    >>> history, times = rows_history([{"step": 1, "timestamp": 10.0, "a": 1}, {"step": 2, "a": True}])
    >>> history["a"][0].tolist(), times[1].tolist()
    ([1], [10.0])
    """
    chunks: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    pending: dict[str, tuple[list[int], list[float]]] = {}

    def flush() -> None:
        for key, (s, v) in pending.items():
            chunks.setdefault(key, []).append((np.asarray(s, np.int64), np.asarray(v, np.float64)))
        pending.clear()

    block: list[Any] = []
    names: tuple[Any, ...] = ()
    step = -1
    for row in [*rows, None]:  # None ends the last block
        if row is not None and not isinstance(row, Mapping):
            raise TypeError(f"history rows must be dicts; got {type(row).__name__}")
        keys = () if row is None else tuple(row)
        if block and (row is None or keys != names):
            table = _table(block, step)
            if table is None:
                for r in block:
                    step = _row_into(pending, r, step)
            else:
                flush()
                steps, columns = table
                for key, values in columns.items():
                    chunks.setdefault(key, []).append((steps, values))
                step = int(steps[-1])
            block = []
        if row is not None:
            if not block:
                names = keys
            block.append(row)
    flush()
    series = {
        key: last_per_step(*map(np.concatenate, zip(*parts))) if len(parts) > 1 else last_per_step(*parts[0])
        for key, parts in chunks.items()
    }
    stamps = series.pop(K.TRACKING_TIMESTAMP, None)
    times = None
    if stamps is not None:
        ok = np.isfinite(stamps[1])
        times = (stamps[0][ok], stamps[1][ok])
    return series, times


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _row_into(pending: dict[str, tuple[list[int], list[float]]], row: Mapping[str, Any], step: int) -> int:
    """Add one row's numeric fields to ``pending``; the row's step (numbered after ``step`` if none)."""
    raw: Any = row.get(K.TRACKING_STEP)
    step = int(raw) if _number(raw) and math.isfinite(raw) else step + 1
    for key, value in row.items():
        if key == K.TRACKING_STEP or not _number(value):
            continue
        steps_of, values_of = pending.setdefault(str(key), ([], []))
        steps_of.append(step)
        values_of.append(float(value))
    return step


def _table(block: list[Any], step: int) -> tuple[np.ndarray, dict[str, np.ndarray]] | None:
    """Rows with the same keys, every value an int or a float, as (steps, key -> values); else None."""
    first = block[0]
    if len(block) < 2 or not {type(v) for r in block for v in r.values()} <= _NUMERIC:
        return None
    names = list(first)
    table = np.array([list(r.values()) for r in block], dtype=np.float64)
    if K.TRACKING_STEP in names:
        if not np.isfinite(table[:, names.index(K.TRACKING_STEP)]).all():
            return None  # a NaN step: numbered after the row before, row by row
        steps = np.fromiter((int(r[K.TRACKING_STEP]) for r in block), np.int64, len(block))
    else:
        steps = np.arange(step + 1, step + 1 + len(block), dtype=np.int64)
    return steps, {str(k): table[:, j] for j, k in enumerate(names) if k != K.TRACKING_STEP}


def last_per_step(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort by step; of a step logged twice keep the last value logged.

    Examples
    --------
    >>> [a.tolist() for a in last_per_step(np.array([2, 1, 2]), np.array([0.5, 0.1, 0.7]))]
    [[1, 2], [0.1, 0.7]]
    """
    if steps.size < 2 or bool((steps[1:] > steps[:-1]).all()):
        return steps, values  # already in step order with no step twice: a run as it was logged
    order = np.argsort(steps, kind="stable")
    steps, values = steps[order], values[order]
    if steps.size > 1:
        keep = np.append(steps[1:] != steps[:-1], True)
        steps, values = steps[keep], values[keep]
    return steps, values

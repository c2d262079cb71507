"""A growing JSON-lines run read incrementally: the complete lines appended since the last read.

:func:`read_tail` reads a ``metrics.jsonl`` (``"rlmetrics-jsonl"``) or a verl file-logger
``.jsonl`` (``"verl-jsonl"``) from a byte offset to its last complete line and returns the
history of those lines only, with the offset to read from next time; :func:`extend_history`
lays it over the history read before. A line still being written (no newline yet) waits for the
next read, so a run being written never warns about a torn last line.

What :func:`~rlmetrics.readers.read_run` checks once (the format, a rollout dump, the config)
is not checked again here; the caller reads the whole run with it first, then the tail.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from rlmetrics import keys as K
from rlmetrics.readers._history import History, last_per_step, rows_history
from rlmetrics.readers._run import Notes
from rlmetrics.readers.jsonl import RLMETRICS_JSONL, VERL_JSONL, is_verl_record

__all__ = ["TAIL_FORMATS", "HistoryBuffers", "Tail", "complete_size", "extend_history", "read_tail"]

#: The formats :func:`read_tail` reads.
TAIL_FORMATS = (RLMETRICS_JSONL, VERL_JSONL)
_CHUNK = 64 * 1024  # bytes read back from the end to find the last line break


class Tail(NamedTuple):
    """The lines appended to a JSON-lines run since an offset.

    Attributes
    ----------
    series : dict
        The history of the new lines only (metric key -> ``(steps, values)``).
    times : tuple of ndarray or None
        ``(steps, seconds)`` of their ``timestamp`` fields (rlmetrics JSONL), or None.
    offset : int
        The byte offset after the last complete line read: where the next read starts.
    n_lines : int
        How many records were read.
    """

    series: dict[str, tuple[np.ndarray, np.ndarray]]
    times: tuple[np.ndarray, np.ndarray] | None
    offset: int
    n_lines: int


def complete_size(path: str | os.PathLike[str], size: int | None = None) -> int:
    """The byte length of ``path`` up to and including its last line break (0 if it has none).

    ``size`` is the length to look in (default: the file's size now).
    """
    with open(path, "rb") as fh:
        end = os.fstat(fh.fileno()).st_size if size is None else size
        pos = end
        while pos > 0:
            start = max(0, pos - _CHUNK)
            fh.seek(start)
            block = fh.read(pos - start)
            cut = block.rfind(b"\n")
            if cut >= 0:
                return start + cut + 1
            pos = start
    return 0


def read_tail(path: str | os.PathLike[str], offset: int, *, fmt: str) -> Tail | None:
    """The complete lines of the JSON-lines run ``path`` from byte ``offset`` on.

    Parameters
    ----------
    path : str or Path
        The ``metrics.jsonl`` or verl ``.jsonl`` file.
    offset : int
        Where the previous read ended (:attr:`Tail.offset`, or :func:`complete_size` of what a
        full read read).
    fmt : {"rlmetrics-jsonl", "verl-jsonl"}, keyword-only
        The format the run was read as.

    Returns
    -------
    Tail or None
        The new lines' history (empty when nothing complete was appended); None when the tail
        cannot be read on its own and the run must be read again whole: the file shrank (it was
        rewritten), or a new record has no numeric step (it is numbered after the one before).
        An unreadable line is skipped with a ``RunReadWarning`` naming it, as a full read does.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = Path(d) / "metrics.jsonl"
    ...     _ = p.write_text('{"step": 1, "a": 0.5}\\n{"step": 2, "a": 0.25}\\n{"step": 3, "a"')
    ...     tail = read_tail(p, 0, fmt="rlmetrics-jsonl")
    >>> tail.series["a"][1].tolist(), tail.offset, tail.n_lines
    ([0.5, 0.25], 45, 2)
    """
    if fmt not in TAIL_FORMATS:
        raise ValueError(f"fmt must be one of {TAIL_FORMATS}; got {fmt!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be a byte offset (an int >= 0); got {offset!r}")
    p = Path(path)
    with open(p, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size < offset:
            return None
        fh.seek(offset)
        data = fh.read(size - offset)
    cut = data.rfind(b"\n") + 1
    rows = _rows(str(p), data[:cut], offset, fmt)
    if rows is None:
        return None
    series, times = rows_history(rows) if rows else ({}, None)
    return Tail(series, times, offset + cut, len(rows))


def _rows(name: str, data: bytes, offset: int, fmt: str) -> list[dict[str, Any]] | None:
    notes = Notes()
    rows: list[dict[str, Any]] = []
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            notes.warn(
                f"{name}: skipping an unreadable line after byte {offset} (a fragment of a crash?): {err}"
            )
            continue
        row = _row(record, fmt)
        if row is None:
            return None
        rows.append(row)
    return rows


def _row(record: Any, fmt: str) -> dict[str, Any] | None:
    """The flat row of one record, or None when it has no numeric step."""
    if not isinstance(record, dict):
        return None
    if fmt == VERL_JSONL:
        if not is_verl_record(record):
            return None
        data = record["data"]
        row = {k: math.nan if v is None else v for k, v in data.items() if k != K.TRACKING_STEP}
        row[K.TRACKING_STEP] = record[K.TRACKING_STEP]
        record = row
    step = record.get(K.TRACKING_STEP)
    if isinstance(step, bool) or not isinstance(step, int | float) or not math.isfinite(step):
        return None
    return record


class HistoryBuffers:
    """Room for a followed run's arrays to grow in place: :func:`extend_history` appends a new
    point to the spare end of the array it handed out last, in amortised O(1), instead of copying
    the whole series.

    The arrays handed out are read-only views of the first points of a larger buffer; a point
    once handed out is never written again (an array grows in place only when it is the latest
    view of its buffer: a history extended twice from the same state gets a copy the second
    time). Keep one per run, and a new one when the run is read again whole.
    """

    __slots__ = ("_latest",)

    def __init__(self) -> None:
        self._latest: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id(view) -> (buffer, view)

    def __len__(self) -> int:
        return len(self._latest)

    def adopt(self, history: History) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """``history`` with its arrays copied into buffers with room to grow, the keys whose steps
        are equal sharing one steps array (the keys of one table of records: one steps buffer
        grows for all of them).

        Examples
        --------
        >>> buffers = HistoryBuffers()
        >>> h = buffers.adopt({"a": (np.array([1, 2]), np.array([0.1, 0.2])),
        ...                    "b": (np.array([1, 2]), np.array([5.0, 6.0]))})
        >>> h["a"][0] is h["b"][0], h["a"][1].flags.writeable
        (True, False)
        """
        adopted: list[np.ndarray] = []
        out = {}
        for key, (steps, values) in history.items():
            same = (a for a in adopted if a.shape == steps.shape and np.array_equal(a, steps))
            shared = next(same, None)
            if shared is None:
                shared = self.append(np.asarray(steps)[:0], np.asarray(steps))
                adopted.append(shared)
            out[key] = (shared, self.append(np.asarray(values)[:0], np.asarray(values)))
        return out

    def append(self, old: np.ndarray, new: np.ndarray) -> np.ndarray:
        """``np.concatenate([old, new])`` as a read-only view, written into ``old``'s buffer when
        ``old`` is the latest view of one with room left (else into a new buffer, an eighth larger
        than needed: a copy every ``n / 8`` appends)."""
        n, total = old.size, old.size + new.size
        dtype = np.result_type(old, new)
        kept = self._latest.pop(id(old), None)
        if kept is not None and kept[1] is old and total <= kept[0].size and kept[0].dtype == dtype:
            buffer = kept[0]
        else:
            buffer = np.empty(total + total // 8 + 64, dtype=dtype)  # an eighth to spare: 1/8 more memory
            buffer[:n] = old
        buffer[n:total] = new
        view = buffer[:total]
        view.flags.writeable = False
        self._latest[id(view)] = (buffer, view)
        return view


def extend_history(
    history: History, new: History, *, buffers: HistoryBuffers | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``history`` with the points of ``new`` laid over it: a step in both keeps ``new``'s value.

    Keys that share their steps array in ``history`` and have the same new steps (the keys of
    one table of records) share one steps array in the result too.

    Parameters
    ----------
    history, new : History
        Metric key -> ``(steps, values)``.
    buffers : HistoryBuffers, optional
        Where the run's arrays grow in place (:class:`HistoryBuffers`): new points appended
        after the last step are written to the spare end of the arrays, and read-only views
        handed out. Without it, the arrays are copied.

    Examples
    --------
    >>> old = {"a": (np.array([1, 2]), np.array([0.1, 0.2]))}
    >>> new = {"a": (np.array([2, 3]), np.array([0.5, 0.3])), "b": (np.array([3]), np.array([1.0]))}
    >>> out = extend_history(old, new)
    >>> out["a"][1].tolist(), out["b"][0].tolist()
    ([0.1, 0.5, 0.3], [3])
    """
    out = dict(history)
    # (id of the old steps, the new steps) -> the steps of both: computed once for the keys sharing them
    joined: dict[tuple[int, bytes], np.ndarray | None] = {}
    for key, (steps, values) in new.items():
        if key not in out:
            out[key] = (steps, values)
            continue
        old_steps, old_values = out[key]
        pair = (id(old_steps), steps.tobytes())  # `out` holds the old steps: their id is theirs
        if pair not in joined:
            after = old_steps.size and steps.size and steps[0] > old_steps[-1] and (np.diff(steps) > 0).all()
            joined[pair] = _join(old_steps, steps, buffers) if after else None
        both_steps = joined[pair]
        if both_steps is None:  # not after the last step: sorted and merged, copied
            out[key] = last_per_step(np.concatenate([old_steps, steps]), np.concatenate([old_values, values]))
        else:  # appended in step order: already sorted, no step twice
            out[key] = both_steps, _join(old_values, values, buffers)
    return out


def _join(old: np.ndarray, new: np.ndarray, buffers: HistoryBuffers | None) -> np.ndarray:
    return np.concatenate([old, new]) if buffers is None else buffers.append(old, new)

"""The ``jsonl`` backend (a run's ``metrics.jsonl``) and :func:`read_jsonl`, its reader."""

from __future__ import annotations

import errno
import json
import math
import os
import time
import warnings
from pathlib import Path
from typing import Any

from rlmetrics import keys as K
from rlmetrics.errors import RunReadWarning
from rlmetrics.tracking._backend import RunInfo
from rlmetrics.tracking._files import _unwritable, _write_atomic
from rlmetrics.tracking._values import _config_json

__all__ = ["JsonlBackend", "read_jsonl"]


_STEP, _TIMESTAMP = K.TRACKING_STEP, K.TRACKING_TIMESTAMP
_now = time.time

#: How ``read_jsonl`` treats a key logged twice at one step.
_REPEATED = ("last", "all")


class JsonlBackend:
    """``metrics.jsonl`` in the run directory: one JSON object per line, each line one ``write``
    to an ``O_APPEND`` file, and the config in ``config.json``.

    Parameters
    ----------
    fsync : bool, keyword-only
        ``os.fsync`` the file after every step (survives power loss, slower; a killed process
        loses at most the line being written either way).

    Examples
    --------
    >>> import tempfile
    >>> from rlmetrics.tracking import Tracker
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with Tracker("demo", "run1", backends=[JsonlBackend(fsync=True)], log_dir=d) as tr:
    ...         tr.log({"a": 1.0}, step=0)
    ...     [row["a"] for row in read_jsonl(tr.jsonl_path)]
    [1.0]
    """

    name = "jsonl"
    max_step = None  # JSON holds any integer

    def __init__(self, *, fsync: bool = False) -> None:
        if not isinstance(fsync, bool):
            raise TypeError(f"fsync must be a bool; got {type(fsync).__name__} {fsync!r}")
        self.fsync = fsync
        self.path: Path | None = None
        self._fh: Any = None
        self._torn = False
        self._orjson: Any = None
        self._dumps: Any = None
        self._newline = 0

    def __repr__(self) -> str:
        return f"JsonlBackend(fsync={self.fsync})"

    def start(self, run: RunInfo) -> list[str]:
        if self.path is not None:
            raise RuntimeError(f"this JsonlBackend already writes {str(self.path)!r}; make one per tracker")
        self.path = run.run_dir / "metrics.jsonl"
        try:
            if run.config:
                _write_atomic(run.run_dir / "config.json", _config_json(run.config) + "\n")
            # Unbuffered and O_APPEND: each write() lands whole at the end of the file, whatever
            # another process appends at the same time.
            self._fh = open(self.path, "ab", buffering=0)
        except OSError as err:
            raise _unwritable(self.path, err, "write the run's metrics.jsonl") from None
        # A previous run that crashed mid-line left no newline: start on a fresh line so the
        # fragment stays a line of its own (read_jsonl skips it). The newline goes out with
        # the first record, in its write.
        size = self.path.stat().st_size
        if size:
            with open(self.path, "rb") as fh:
                fh.seek(size - 1)
                self._torn = fh.read(1) != b"\n"
        try:  # optional speed-up (about 5x per line); json is used for lines holding NaN/inf
            import orjson

            self._orjson = orjson
            self._dumps, self._newline = orjson.dumps, orjson.OPT_APPEND_NEWLINE
        except ImportError:
            self._orjson = self._dumps = None
        return []

    def log(self, metrics: dict[str, float], step: int) -> None:
        fh = self._fh
        if fh is None:
            raise RuntimeError(f"{self.path} is closed" if self.path else "JsonlBackend.log before start()")
        head = {_STEP: step, _TIMESTAMP: _now()}
        line = None
        # orjson writes NaN/inf as null: those lines go through json, which writes NaN/Infinity. A
        # finite sum proves every value finite (NaN and inf propagate; a sum that overflows goes
        # through json too, which writes the same line).
        dumps = self._dumps
        if dumps is not None and math.isfinite(sum(metrics.values())):
            try:  # the head and the metrics apart: no merged dict to build
                start = dumps(head)
                body = dumps(metrics, option=self._newline)
            except TypeError:  # a step beyond 64 bits, a key of a str subclass: json writes them
                pass
            else:
                line = b"".join((start[:-1], b",", memoryview(body)[1:])) if len(body) > 3 else start + b"\n"
        if line is None:
            line = (json.dumps({**head, **metrics}, separators=(",", ":")) + "\n").encode("utf-8")
        if self._torn:  # the last write failed part-way (or a crash cut the last line)
            line = b"\n" + line
        self._torn = True
        written = fh.write(line)
        if written != len(line):  # a regular file writes less only when full
            self._write_rest(memoryview(line)[written or 0 :], written)
        self._torn = False
        if self.fsync:
            os.fsync(fh.fileno())

    def _write_rest(self, view: memoryview, written: int | None) -> None:
        while True:
            if not written:
                raise OSError(errno.EIO, f"{self.path}: the write wrote nothing")
            if not view.nbytes:
                return
            written = self._fh.write(view)
            view = view[written or 0 :]

    def finish(self, *, exit_code: int = 0) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def read_jsonl(
    path: str | os.PathLike[str], *, strict: bool = False, repeated: str = "last"
) -> list[dict[str, Any]]:
    """Read a jsonl metrics file written by the ``jsonl`` backend.

    A line cut short by a crash (the last line, or a fragment a resumed run wrote after) is
    skipped with a warning.

    Parameters
    ----------
    path : str or Path
        The ``metrics.jsonl`` file.
    strict : bool, keyword-only
        Raise ``ValueError`` (with the line number) on an unreadable line that is not the last.
    repeated : {"last", "all"}, keyword-only
        A key logged again, with another value, at a step it was already logged at (a run
        appended to twice, a resumed run re-logging steps): ``"last"`` keeps the value logged
        last, removes the earlier one from its row and warns once; a record whose every metric
        is logged again later at its step goes. Records of one step with other keys (a summary
        logged beside a step, sharing ``epoch`` with it) are kept as they are. ``"all"``: every
        row as written.

    Returns
    -------
    list[dict]
        One dict per record, in file order (``NaN``/``Infinity`` tokens come back as floats).

    Examples
    --------
    >>> import tempfile, warnings
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = Path(d) / "metrics.jsonl"
    ...     _ = p.write_text('{"step": 0, "a": 1}\\n{"step": 1, "a": 2}\\n{"step": 0, "a": 3}\\n')
    ...     with warnings.catch_warnings(record=True) as caught:
    ...         warnings.simplefilter("always")
    ...         rows = read_jsonl(p)
    >>> rows, "1 step logged more than once" in str(caught[0].message)
    ([{'step': 1, 'a': 2}, {'step': 0, 'a': 3}], True)
    """
    if repeated not in _REPEATED:
        raise ValueError(f"repeated must be one of {_REPEATED}; got {repeated!r}")
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"path: no jsonl file at {str(p)!r}")
    data = p.read_bytes()
    lines = data.split(b"\n")
    complete = data.endswith(b"\n")
    rows: list[dict[str, Any]] = []
    for i, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        last = i == len(lines) and not complete
        try:
            row = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            if last:
                warnings.warn(
                    f"{p}: skipping the truncated last line {i} ({len(raw)} bytes)",
                    RunReadWarning,
                    stacklevel=2,
                )
            elif strict:
                raise ValueError(f"{p}:{i}: not a JSON object ({err})") from None
            else:
                warnings.warn(
                    f"{p}: skipping unreadable line {i} (a fragment left by a crash?): {err}",
                    RunReadWarning,
                    stacklevel=2,
                )
            continue
        if not isinstance(row, dict):
            raise ValueError(f"{p}:{i}: expected a JSON object per line; got {type(row).__name__}")
        rows.append(row)
    if repeated == "last":
        rows = _keep_last(p, rows)
    return rows


def _step_of(row: dict[str, Any]) -> Any:
    step = row.get(K.TRACKING_STEP)
    return step if isinstance(step, int | float) and not isinstance(step, bool) else None


def _same(a: Any, b: Any) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _keep_last(p: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Of a key logged again at a step with another value, only the value logged last; warns once.

    A record whose every metric is logged again later at its step goes (the run was appended to
    twice). A key logged again with the same value beside other keys (``epoch`` in TRL's summary
    record) is no conflict: that record stays whole.
    """
    from collections import Counter

    counts = Counter(_step_of(row) for row in rows)
    counts.pop(None, None)
    again = {step for step, n in counts.items() if n > 1}
    if not again:
        return rows
    later: dict[Any, dict[str, Any]] = {}  # step -> key -> the value logged last
    repeated: dict[Any, str] = {}
    kept: list[dict[str, Any]] = []
    for row in reversed(rows):  # the last record of a step first
        step = _step_of(row)
        if step not in again:
            kept.append(row)
            continue
        last = later.setdefault(step, {})
        metrics = [k for k in row if k not in K.TRACKING_FIELDS]
        twice = [k for k in metrics if k in last]
        differ = [k for k in twice if not _same(row[k], last[k])]
        for k in metrics:
            last.setdefault(k, row[k])
        if metrics and len(twice) == len(metrics):
            repeated[step] = twice[0]
            continue  # nothing of this record is the last value logged
        if differ:
            repeated[step] = differ[0]
            row = {k: v for k, v in row.items() if k not in differ}
        kept.append(row)
    if not repeated:
        return rows
    kept.reverse()
    first = min(repeated)
    warnings.warn(
        f"{p}: {len(repeated)} step{'s' * (len(repeated) != 1)} logged more than once (the run was "
        f"appended to twice, or resumed from an earlier step); e.g. step {first}: {repeated[first]!r}; "
        "keeping the values logged last",
        RunReadWarning,
        stacklevel=3,
    )
    return kept

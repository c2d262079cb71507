"""The ``jsonl`` backend (a run's ``metrics.jsonl``) and :func:`read_jsonl`, its reader."""

from __future__ import annotations

import errno
import json
import os
import time
from math import isfinite as _isfinite
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlmetrics import keys as K
from rlmetrics.readers.jsonl import RUN_END_FILE, read_jsonl  # the run reader's, re-exported here
from rlmetrics.readers.samples import SAMPLES_FILE
from rlmetrics.tracking._backend import RunInfo
from rlmetrics.tracking._files import _unwritable, _write_atomic
from rlmetrics.tracking._values import _config_json

if TYPE_CHECKING:
    from rlmetrics.training.samples import SampleTable

__all__ = ["JsonlBackend", "read_jsonl"]


_STEP, _TIMESTAMP = K.TRACKING_STEP, K.TRACKING_TIMESTAMP
_now = time.time

#: How ``read_jsonl`` treats a key logged twice at one step.


class JsonlBackend:
    """``metrics.jsonl`` in the run directory: one JSON object per line, each line one ``write``
    to an ``O_APPEND`` file, and the config in ``config.json``; sample tables
    (:meth:`~rlmetrics.tracking.Tracker.log_samples`) in ``samples.jsonl`` beside it, one row a
    line (``{"step": 3, "prompt": ..., "chosen": "max"}``), each table one ``write``.

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
    keeps_records = False  # each record is written out in log() and not kept

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
        self._last_step: int | None = None
        self._samples_fh: Any = None
        self._samples_torn = False

    def __repr__(self) -> str:
        return f"JsonlBackend(fsync={self.fsync})"

    def start(self, run: RunInfo) -> list[str]:
        if self.path is not None:
            raise RuntimeError(f"this JsonlBackend already writes {str(self.path)!r}; make one per tracker")
        self.path = run.run_dir / "metrics.jsonl"
        self._last_step = None
        try:
            (run.run_dir / RUN_END_FILE).unlink(missing_ok=True)  # a resumed run is running again
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
        self._torn = _ends_torn(self.path)
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
        self._last_step = step
        head = {_STEP: step, _TIMESTAMP: _now()}
        dumps = self._dumps
        # orjson writes NaN/inf as null: those lines go through json, which writes NaN/Infinity. A
        # finite sum proves every value finite (NaN and inf propagate; a sum that overflows goes
        # through json too, which writes the same line).
        if dumps is not None and _isfinite(sum(metrics.values())):
            try:  # the head and the metrics apart, joined as bytes: no merged dict to build
                start = dumps(head)
                body = dumps(metrics, option=self._newline)
            except TypeError:  # a step beyond 64 bits, a key of a str subclass: json writes them
                line = _json_line(head, metrics)
            else:  # '{"step":1,"timestamp":2}' and '{"k":3}\n' -> '{"step":1,"timestamp":2,"k":3}\n'
                line = start[:-1] + b"," + body[1:] if len(body) > 3 else start + b"\n"
        else:
            line = _json_line(head, metrics)
        if self._torn:  # the last write failed part-way (or a crash cut the last line)
            line = b"\n" + line
            self._torn = False  # torn again below if this write fails too
        # One unbuffered write a step, no flush needed: verl's file logger's durability (the line
        # is in the OS's cache when log() returns; fsync=True for the disk). A write that fails
        # or stops part-way leaves the line torn: the next one starts on a fresh line.
        try:
            written = fh.write(line)
            if written != len(line):  # a regular file writes less only when full
                self._write_rest(memoryview(line)[written or 0 :], written)
        except BaseException:
            self._torn = True
            raise
        if self.fsync:
            os.fsync(fh.fileno())

    def _write_rest(self, view: memoryview, written: int | None, fh: Any = None) -> None:
        fh = self._fh if fh is None else fh
        while True:
            if not written:
                raise OSError(errno.EIO, f"{fh.name}: the write wrote nothing")
            if not view.nbytes:
                return
            written = fh.write(view)
            view = view[written or 0 :]

    def log_samples(self, table: SampleTable, step: int) -> None:
        """Append the table's rows to ``samples.jsonl`` (one line a row, with ``step``), in one ``write``."""
        if self._fh is None:
            raise RuntimeError(
                f"{self.path} is closed" if self.path else "JsonlBackend.log_samples before start()"
            )
        fh = self._samples_fh
        if fh is None:
            assert self.path is not None
            path = self.path.parent / SAMPLES_FILE
            try:
                fh = self._samples_fh = open(path, "ab", buffering=0)
            except OSError as err:
                raise _unwritable(path, err, "write the run's samples.jsonl") from None
            self._samples_torn = _ends_torn(path)
        lines = []
        for row in table.rows():
            row[K.SAMPLES_STEP] = step
            try:
                lines.append(json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
            except UnicodeEncodeError:  # a lone surrogate: \u escapes keep the line valid UTF-8
                lines.append(json.dumps(row, separators=(",", ":")).encode("ascii"))
        if not lines:
            return
        data = b"\n".join(lines) + b"\n"
        if self._samples_torn:
            data = b"\n" + data
        self._samples_torn = True
        written = fh.write(data)
        if written != len(data):
            self._write_rest(memoryview(data)[written or 0 :], written, fh)
        self._samples_torn = False
        if self.fsync:
            os.fsync(fh.fileno())

    def finish(self, *, exit_code: int = 0) -> None:
        """Close ``metrics.jsonl``; mark the run finished (:data:`~rlmetrics.readers.jsonl.RUN_END_FILE`)."""
        if self._samples_fh is not None:
            self._samples_fh.close()
            self._samples_fh = None
        if self._fh is None:
            return
        self._fh.close()
        self._fh = None
        assert self.path is not None
        end = {"exit_code": exit_code, "last_step": self._last_step, _TIMESTAMP: _now()}
        try:
            _write_atomic(self.path.parent / RUN_END_FILE, json.dumps(end) + "\n")
        except OSError as err:
            raise _unwritable(self.path.parent / RUN_END_FILE, err, "mark the run finished") from None


def _json_line(head: dict[str, Any], metrics: dict[str, float]) -> bytes:
    """One record as a line through :mod:`json` (NaN and infinities as ``NaN``/``Infinity``)."""
    return (json.dumps({**head, **metrics}, separators=(",", ":")) + "\n").encode("utf-8")


def _ends_torn(path: Path) -> bool:
    """Whether the file ends mid-line (a crash cut its last line): the next write starts a new one."""
    size = path.stat().st_size
    if not size:
        return False
    with open(path, "rb") as fh:
        fh.seek(size - 1)
        return fh.read(1) != b"\n"

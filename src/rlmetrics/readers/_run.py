"""What :func:`rlmetrics.readers.read_run` returns, and what its format readers share.

* :class:`Run`: a run read back: its series, the format, its steps, the warnings of the read.
* :class:`Source`: the file, folder or stream being read, its name as messages show it, its
  bytes read once.
* :class:`Notes`: the warnings of one read, emitted as they come (``RunReadWarning``,
  attributed to the caller outside rlmetrics) and kept for :attr:`Run.warnings`.
"""

from __future__ import annotations

import io
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

from rlmetrics.errors import RunReadWarning

__all__ = ["Notes", "Parsed", "Run", "Source"]

_SHOWN_LINES = 10  # line numbers a warning lists
_PACKAGE = str(Path(__file__).resolve().parent.parent)  # rlmetrics/
# the top layers read runs as users do: a warning is attributed to their line
_USERS = tuple(f"{_PACKAGE}/{layer}/" for layer in ("cli", "demo", "integrations"))


@dataclass(frozen=True)
class Run:
    """A run read back from any format :func:`~rlmetrics.readers.read_run` knows.

    Attributes
    ----------
    series : dict[str, tuple[numpy.ndarray, numpy.ndarray]]
        The history: metric key -> ``(steps, values)``, int64 steps increasing, float64 values
        (NaN kept; a step logged twice keeps its last value).
    format : str
        The format read, one of :data:`rlmetrics.readers.FORMATS` (``"verl-console"`` ...).
    path : Path or None
        The file or folder read (the file found in a run folder); None for a stream (stdin).
    times : tuple[numpy.ndarray, numpy.ndarray] or None
        ``(steps, seconds)``: the Unix time each step was written (a rlmetrics JSONL's
        ``timestamp``); None for formats without one.
    config : dict
        The run's configuration (the ``config.json`` beside a rlmetrics JSONL), empty if none.
    warnings : tuple of str
        The messages of the warnings the read emitted (damaged lines skipped, with their numbers;
        a step logged twice; a config not read).
    """

    series: dict[str, tuple[np.ndarray, np.ndarray]]
    format: str
    path: Path | None = None
    times: tuple[np.ndarray, np.ndarray] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def steps(self) -> np.ndarray:
        """Every step at which some metric was logged, increasing (int64)."""
        if not self.series:
            return np.zeros(0, np.int64)
        return np.unique(np.concatenate([s for s, _ in self.series.values()]))

    @property
    def n_steps(self) -> int:
        """How many distinct steps the run logged."""
        return int(self.steps.size)


class Parsed(NamedTuple):
    """What a format reader returns: the history, and the times and config where it has them."""

    series: dict[str, tuple[np.ndarray, np.ndarray]]
    times: tuple[np.ndarray, np.ndarray] | None = None
    config: Mapping[str, Any] = MappingProxyType({})


class Source:
    """A file, folder or stream to read: ``name`` for messages, ``path`` (None for a stream).

    The bytes of a file are read once, when a reader or the detection first asks for them.
    """

    __slots__ = ("_data", "name", "path")

    def __init__(self, name: str, path: Path | None = None, data: bytes | None = None) -> None:
        self.name, self.path, self._data = name, path, data

    @classmethod
    def of_path(cls, path: Path) -> Source:
        return cls(str(path), path)

    def data(self) -> bytes:
        if self._data is None:
            assert self.path is not None
            self._data = self.path.read_bytes()
        return self._data

    def head(self, size: int) -> bytes:
        """The first ``size`` bytes (a file's whole bytes are not read for it)."""
        if self._data is not None or self.path is None:
            return self.data()[:size]
        with open(self.path, "rb") as fh:
            return fh.read(size)

    def first_line(self) -> bytes | None:
        """The first line that is not blank (with its line break), or None."""
        if self._data is not None or self.path is None:
            return next((raw for raw in io.BytesIO(self.data()) if raw.strip()), None)
        with open(self.path, "rb") as fh:  # a long file: its first lines only
            return next((raw for raw in fh if raw.strip()), None)

    def text(self) -> str:
        """The bytes as UTF-8 text, an undecodable byte read as U+FFFD."""
        return self.data().decode("utf-8", errors="replace")

    def suffix(self) -> str:
        return "" if self.path is None else self.path.suffix


class Notes:
    """The warnings of one read: each emitted when noted, and kept in order."""

    __slots__ = ("messages",)

    def __init__(self) -> None:
        self.messages: list[str] = []

    def warn(self, message: str) -> None:
        self.messages.append(message)
        warnings.warn(message, RunReadWarning, stacklevel=_outside_stacklevel())

    def damaged(self, name: str, linenos: list[int], n_read: int, what: str) -> None:
        """One warning for the damaged records of a text log: how many, and the line of each."""
        if not linenos:
            return
        n = len(linenos)
        self.warn(
            f"{name}: {n} damaged {what} record{'s' if n > 1 else ''} skipped ({n_read} read), at "
            f"{_lines(linenos)}: cut off, or a field that does not read back"
        )

    def cut(self, name: str, linenos: list[int], what: str) -> None:
        """One warning for the records of a text log cut off at their end (a paste, a crash), read
        up to the cut: how many, and the line of each."""
        if not linenos:
            return
        n = len(linenos)
        self.warn(
            f"{name}: {n} {what} record{'s' if n > 1 else ''} cut off at {'their' if n > 1 else 'its'} "
            f"end, read up to the cut (the field cut in two left out), at {_lines(linenos)}"
        )


def _inside(filename: str) -> bool:
    return filename.startswith(_PACKAGE) and not filename.startswith(_USERS)


def _outside_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside the library (the user's call that read the
    run, or the CLI command's)."""
    frame: Any = sys._getframe(1)  # Notes.warn: stacklevel 1
    level = 1
    while frame is not None and _inside(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    return level if frame is not None else 1


def _lines(linenos: list[int]) -> str:
    """``line 3`` or ``lines 3, 9, 12 and 40 more``: the first few of a list of line numbers."""
    n = len(linenos)
    shown = ", ".join(map(str, linenos[:_SHOWN_LINES]))
    more = f" and {n - _SHOWN_LINES} more" if n > _SHOWN_LINES else ""
    return f"line{'s' if n > 1 else ''} {shown}{more}"

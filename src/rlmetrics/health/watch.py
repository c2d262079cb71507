"""Runs followed as they grow: re-read when their files change, re-diagnosed, new findings reported.

:class:`Watcher` holds the runs of a watch (one, or a sweep). Each :meth:`Watcher.poll` is one
refresh: it looks at every run's files (their size and modification time, a ``stat`` each),
and re-reads and re-diagnoses the runs that changed, the least recently refreshed first, until
its time budget is spent; the others wait for the next poll (:attr:`Watcher.pending`). It
returns the findings that are new since the previous poll: a kind, or a kind at a higher
severity, not reported before for that run (a finding whose onset moves is not new again).

A JSON-lines run (``metrics.jsonl``, verl's file logger) is read whole once, then only the
lines appended since (:func:`rlmetrics.readers.tail.read_tail`); every other format is read
again whole with :func:`rlmetrics.readers.read_run` when its files change (a console log being
written by ``nohup``, a TensorBoard folder). A run whose files do not exist yet, or hold no
complete record yet, is *waiting*; one that cannot be read (a rollout dump, a missing
optional package) is *failed* and no longer followed.

A run has *finished* when its log says so: TRL's training summary (``train_runtime``, logged
once after the last step: a key of a TensorBoard or ``trainer_state.json`` run, a dict at the
end of a printed log) or verl's ``Final validation metrics`` line at the end of a console log.
A rlmetrics run has finished when its Tracker did: ``finish()`` leaves
:data:`~rlmetrics.readers.jsonl.RUN_END_FILE` beside ``metrics.jsonl``. Other runs hold no end mark
(verl's file logger, a killed run): the caller ends such a run after a time without new steps
(:meth:`RunState.idle_for`).
"""

from __future__ import annotations

import io
import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from rlmetrics.errors import RunReadError, ValidationDumpError
from rlmetrics.health.findings import ERROR, SEVERITIES, Diagnosis, Finding, History
from rlmetrics.health.smoothing import SeriesCache
from rlmetrics.readers import TRL_PRINTED, VERL_CONSOLE, read_run
from rlmetrics.readers._run import Source
from rlmetrics.readers.detect import locate
from rlmetrics.readers.jsonl import RLMETRICS_JSONL, RUN_END_FILE, run_end
from rlmetrics.readers.tail import TAIL_FORMATS, HistoryBuffers, complete_size, extend_history, read_tail

__all__ = ["KEY_SIGNALS", "NewFinding", "RunState", "Watcher", "at_least", "key_values", "run_finished"]

#: The signals a watch shows for every run (:data:`rlmetrics.health.signals.SIGNALS`).
KEY_SIGNALS = ("reward", "kl_ref", "entropy", "response_length")
#: The summary TRL / transformers logs once, after the last step (printed, trainer_state, TB/W&B).
_TRL_END_KEYS = ("train_runtime", "train/train_runtime")
#: What a console log prints at its end: verl's trainer when fit() is done, TRL's summary dict
#: (which the reader of printed logs leaves out: it is not a step)
_END_MARKS = {VERL_CONSOLE: b"Final validation metrics", TRL_PRINTED: b"'train_runtime'"}
_END_TAIL = 64 * 1024  # bytes at the end of a console log searched for the end mark

WAITING, FOLLOWING, FINISHED, FAILED, IDLE = "waiting", "following", "finished", "failed", "idle"


class NewFinding(NamedTuple):
    """A finding reported for the first time: the run's state and the finding."""

    run: RunState
    finding: Finding


@dataclass(eq=False)
class RunState:
    """One followed run: what was read of it, its diagnosis, and what was reported.

    Attributes
    ----------
    source : Path
        The path given (a file or a run folder).
    name : str
        Its label.
    status : str
        ``"waiting"``, ``"following"``, ``"finished"``, ``"failed"`` or ``"idle"`` (ended by
        :meth:`Watcher.expire`).
    format : str or None
        The format read (:data:`rlmetrics.readers.FORMATS`), None until read.
    history : dict
        Metric key -> ``(steps, values)``, everything read so far.
    diagnosis : Diagnosis or None
        The latest diagnosis.
    last_step : int or None
        The highest step read.
    problem : str or None
        Why the run is waiting or failed (or why the latest diagnosis could not run).
    warnings : list of str
        The distinct warnings its reads emitted, in order.
    values : dict
        The last finite value of each of :data:`KEY_SIGNALS` (None when not logged), as of the
        last read.
    """

    source: Path
    name: str
    status: str = WAITING
    format: str | None = None
    history: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    diagnosis: Diagnosis | None = None
    last_step: int | None = None
    problem: str | None = None
    warnings: list[str] = field(default_factory=list)
    values: dict[str, float | None] = field(default_factory=lambda: dict.fromkeys(KEY_SIGNALS))
    target: Path | None = None  # the file or folder read
    offset: int = 0  # where the next tail read starts (JSON-lines runs)
    signature: Any = None  # the size and mtime of the files read, when last read
    last_growth: float = 0.0  # the clock's time when a new step last arrived (or the watch began)
    refreshed: float = -math.inf  # the clock's time of the last refresh
    reported: dict[str, str] = field(default_factory=dict)  # kind -> the severity reported
    cache: SeriesCache = field(default_factory=SeriesCache)  # its window statistics, for the next diagnosis
    buffers: HistoryBuffers = field(default_factory=HistoryBuffers)  # where its arrays grow in place

    @property
    def ended(self) -> bool:
        """Finished, failed or idle: no longer followed."""
        return self.status in (FINISHED, FAILED, IDLE)

    def idle_for(self, now: float) -> float:
        """Seconds (of the watcher's clock) since a new step last arrived."""
        return now - self.last_growth


def key_values(history: History, *, signals: Mapping[str, str] | None = None) -> dict[str, float | None]:
    """The last finite value of each of :data:`KEY_SIGNALS` in ``history`` (None when not logged).

    Examples
    --------
    >>> h = {"actor/entropy": (np.array([1, 2]), np.array([0.9, np.nan]))}
    >>> key_values(h)
    {'reward': None, 'kl_ref': None, 'entropy': 0.9, 'response_length': None}
    """
    from rlmetrics.health.signals import resolve, with_signals

    try:
        named = with_signals(history, signals)
    except ValueError:  # a key the run has not logged yet: the default candidates meanwhile
        named = history
    out: dict[str, float | None] = {}
    for signal in KEY_SIGNALS:
        series = resolve(named, signal)
        out[signal] = None if series is None else _last_finite(series.values)
    return out


def _last_finite(values: np.ndarray) -> float | None:
    """The last finite value (None if none), looked for from the end: usually the last point."""
    end = values.size
    while end > 0:
        chunk = values[max(end - 64, 0) : end]
        where = np.flatnonzero(np.isfinite(chunk))
        if where.size:
            return float(chunk[where[-1]])
        end -= chunk.size
    return None


def run_finished(fmt: str | None, history: History, target: Path | None = None) -> bool:
    """Whether a run's log marks its end (see the module docstring).

    Examples
    --------
    >>> run_finished("trl-printed", {"train_runtime": (np.array([10]), np.array([31.5]))})
    True
    >>> run_finished("rlmetrics-jsonl", {"actor/entropy": (np.array([1]), np.array([0.5]))})
    False
    """
    if any(key in history for key in _TRL_END_KEYS):
        return True
    if fmt == RLMETRICS_JSONL and target is not None:
        return run_end(target if target.is_file() else target / "metrics.jsonl") is not None
    mark = _END_MARKS.get(fmt or "")
    if mark is not None and target is not None and target.is_file():
        with open(target, "rb") as fh:
            size = fh.seek(0, io.SEEK_END)
            fh.seek(max(0, size - _END_TAIL))
            return mark in fh.read()
    return False


def _signature(path: Path) -> Any:
    """The size and modification time of ``path``, or of every file directly in the folder."""
    try:
        if not path.is_dir():
            st = path.stat()
            # a Tracker's end mark beside a metrics.jsonl changes the run without changing its file
            return st.st_ino, st.st_size, st.st_mtime_ns, (path.parent / RUN_END_FILE).exists()
        stats = [(f.name, f.stat()) for f in path.iterdir() if f.is_file()]
        return tuple(sorted((name, st.st_size, st.st_mtime_ns) for name, st in stats))
    except OSError:  # removed or rotated while being looked at: read it again
        return None


class Watcher:
    """The runs of one watch, refreshed by :meth:`poll`.

    Parameters
    ----------
    sources : sequence of Path
        The runs (files or run folders), in any format :func:`~rlmetrics.readers.read_run` reads.
    names : sequence of str, optional
        Their labels (default: the file or folder name).
    thresholds, signals : dict, optional
        As :func:`rlmetrics.health.diagnose` takes them.
    clock : callable
        Seconds, monotonic (:func:`time.monotonic`).
    """

    def __init__(
        self,
        sources: Sequence[Path],
        *,
        names: Sequence[str] | None = None,
        thresholds: Mapping[str, Mapping[str, float]] | None = None,
        signals: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        labels = list(names) if names is not None else [Path(s).name or str(s) for s in sources]
        if len(labels) != len(sources):
            raise ValueError(f"names: expected one per source ({len(sources)}); got {len(labels)}")
        self.clock = clock
        self.thresholds, self.signals = thresholds, signals
        now = clock()
        self.runs = [RunState(Path(s), n, last_growth=now) for s, n in zip(sources, labels, strict=True)]
        self._dirty: set[int] = set(range(len(self.runs)))  # every run is read on the first poll

    @property
    def pending(self) -> int:
        """Runs whose files changed and that the last poll's budget left for the next one."""
        return len(self._dirty)

    def poll(self, *, budget: float | None = None) -> list[NewFinding]:
        """One refresh: look at every run, re-read and re-diagnose those that changed.

        Parameters
        ----------
        budget : float or None, keyword-only
            Seconds to spend re-reading; the runs left wait for the next poll (at least one run
            is refreshed per poll). None: every changed run.

        Returns
        -------
        list of NewFinding
            The findings reported for the first time, in run order then step order.
        """
        start = self.clock()
        for i, run in enumerate(self.runs):
            if not run.ended and (run.target is None or _signature(run.target) != run.signature):
                self._dirty.add(i)
        new: list[NewFinding] = []
        for n, i in enumerate(sorted(self._dirty, key=lambda j: self.runs[j].refreshed)):
            # at least one run per poll: a budget shorter than one read still makes progress
            if n and budget is not None and self.clock() - start >= budget:
                break
            self._dirty.discard(i)
            new.extend(self._refresh(self.runs[i]))
        new.sort(key=lambda f: (self.runs.index(f.run), f.finding.step))
        return new

    def _refresh(self, run: RunState) -> list[NewFinding]:
        """Read what is new in ``run``, diagnose it again, and return its new findings."""
        run.refreshed = self.clock()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            grew = self._read(run)
        for w in caught:
            text = str(w.message)
            if text not in run.warnings:
                run.warnings.append(text)
        if grew:
            run.last_growth = self.clock()
            run.values = key_values(run.history, signals=self.signals)
        if run.status != FOLLOWING:
            return []
        new = self._diagnose(run) if grew else []
        if run_finished(run.format, run.history, run.target):  # the end mark may come without a step
            run.status = FINISHED
        return new

    def _read(self, run: RunState) -> bool:
        """Read ``run`` (its tail where it can); whether it gained a step."""
        try:
            if run.format in TAIL_FORMATS and run.target is not None and run.history:
                tail = read_tail(run.target, run.offset, fmt=run.format)
                if tail is not None:
                    signature = _signature(run.target)
                    if tail.series:
                        run.history = extend_history(run.history, tail.series, buffers=run.buffers)
                    run.offset, run.signature = tail.offset, signature
                    return self._grew(run)
            self._read_whole(run)
        except ValidationDumpError as err:
            run.status, run.problem = FAILED, str(err)
            return False
        except RunReadError as err:  # not there yet, empty, or no complete record yet
            if run.status == WAITING:
                run.problem = str(err)
            return False
        except Exception as err:
            run.status, run.problem = FAILED, f"{type(err).__name__}: {err}"
            return False
        run.status, run.problem = FOLLOWING, None
        return self._grew(run)

    def _read_whole(self, run: RunState) -> None:
        fmt, src = locate(Source.of_path(run.source))
        target = src.path if src.path is not None else run.source
        signature = _signature(target)
        if fmt in TAIL_FORMATS and target.is_file():
            # the complete lines only: the line being written is read by the next tail
            size = complete_size(target)
            with open(target, "rb") as fh:
                data = fh.read(size)
            stream = io.BytesIO(data)
            stream.name = str(target)  # type: ignore[misc]
            read = read_run(stream)
            run.offset = size
        else:
            read = read_run(run.source)
            target = read.path or target
        run.format, run.target, run.signature = read.format, target, signature
        run.buffers = HistoryBuffers()
        run.history = run.buffers.adopt(read.series)

    def _grew(self, run: RunState) -> bool:
        last = max((int(s[-1]) for s, _ in run.history.values() if s.size), default=None)
        grew = last is not None and (run.last_step is None or last > run.last_step)
        if grew:
            run.last_step = last
        return grew

    def _diagnose(self, run: RunState) -> list[NewFinding]:
        from rlmetrics.health.rules import diagnose

        try:
            run.diagnosis = diagnose(
                run.history, thresholds=self.thresholds, signals=self.signals, cache=run.cache
            )
        except ValueError as err:  # e.g. a --signal key this run has not logged yet
            run.problem = str(err)
            return []
        run.problem = None
        new = []
        for finding in run.diagnosis.findings:
            before = run.reported.get(finding.kind)
            if before is None or SEVERITIES.index(finding.severity) > SEVERITIES.index(before):
                run.reported[finding.kind] = finding.severity
                new.append(NewFinding(run, finding))
        return new

    def expire(self, idle: float) -> list[RunState]:
        """End the runs without a new step for ``idle`` seconds (status ``"idle"``); those ended now."""
        now = self.clock()
        expired = [run for run in self.runs if not run.ended and run.idle_for(now) >= idle]
        for run in expired:
            run.status = IDLE
        return expired

    def ended(self, *, idle: float | None = None) -> bool:
        """Whether every run has finished or failed, or been idle ``idle`` seconds (when given)."""
        now = self.clock()
        return all(run.ended or (idle is not None and run.idle_for(now) >= idle) for run in self.runs)


def at_least(finding: Finding, severity: str) -> bool:
    """Whether ``finding`` is of ``severity`` or above (``"error"`` above ``"warning"``).

    >>> at_least(Finding("nonfinite", "error", 1, ()), "warning")
    True
    """
    if severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {SEVERITIES}; got {severity!r}")
    return finding.severity == ERROR or severity == finding.severity

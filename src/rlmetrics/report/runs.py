"""Runs read for a report: per-metric series, the wall-clock time of each step, the config.

:func:`load_run` is :func:`rlmetrics.readers.read_run` (every format it knows: a
:class:`rlmetrics.Tracker` run with its ``timestamp`` per line and the ``config.json`` beside
it, verl's file logger and console, TensorBoard, TRL's ``trainer_state.json`` and printed logs,
W&B offline, CSV exports), its series as float64 for plotting, labelled. A validation rollout
dump (one line per generated sample, with ``input``/``output`` text) is refused with a pointer
to ``rlmetrics validate``: its one numeric column drawn against a repeated step would be a
meaningless curve. A run's sample tables (``samples.jsonl`` beside a Tracker's ``metrics.jsonl``,
or in ``<experiment>/`` beside verl's ``<experiment>.jsonl``: :func:`rlmetrics.readers.samples_beside`)
are read with it, for the page's sample browser.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rlmetrics.errors import RunReadError, RunReadWarning, ValidationDumpError
from rlmetrics.readers import RLMETRICS_JSONL, read_run
from rlmetrics.readers.jsonl import DUMP_FIELDS
from rlmetrics.readers.samples import read_samples, samples_beside

if TYPE_CHECKING:
    from rlmetrics.training.samples import SampleTable

__all__ = ["DUMP_FIELDS", "RunCurves", "ValidationDumpError", "load_run", "unique_names"]

#: Config entries shown as the command that started the run.
COMMAND_KEYS = ("command", "cmd", "argv", "cli")
_METRICS_FILE = "metrics.jsonl"


@dataclass
class RunCurves:
    """The numeric series of one run.

    Attributes
    ----------
    name : str
        Label of the run in plots and tables.
    path : Path
        The file or folder read.
    series : dict[str, tuple[numpy.ndarray, numpy.ndarray]]
        Metric key to ``(steps, values)``, float64 arrays of equal length, steps increasing
        (a step logged twice keeps its last value; NaN values kept).
    times : tuple[numpy.ndarray, numpy.ndarray] or None
        ``(steps, seconds)``: the Unix time each logged step was written (the ``timestamp``
        of a Tracker's JSONL), steps increasing; None when the format has no time.
    config : dict
        The run's configuration (``config.json`` beside a Tracker's JSONL), empty if none.
    source : str
        The format read (``"rlmetrics-jsonl"``, ``"verl-jsonl"``, ``"tensorboard"`` ...).
    samples : dict[int, SampleTable]
        The run's sample tables by step (``samples.jsonl`` beside its ``metrics.jsonl``), empty
        if none were logged.
    """

    name: str
    path: Path
    series: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    times: tuple[np.ndarray, np.ndarray] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    source: str = RLMETRICS_JSONL
    samples: dict[int, SampleTable] = field(default_factory=dict)

    @property
    def step_range(self) -> str:
        """First and last logged step, as ``"1-12"`` (``"none"`` for a run without metrics)."""
        steps = np.concatenate([s for s, _ in self.series.values()]) if self.series else np.zeros(0)
        return f"{steps.min():g}-{steps.max():g}" if steps.size else "none"

    @property
    def duration(self) -> float | None:
        """Seconds from the first to the last logged step (None without times)."""
        if self.times is None or self.times[1].size == 0:
            return None
        t = self.times[1]
        return float(np.nanmax(t) - np.nanmin(t))

    @property
    def started(self) -> float | None:
        """Unix time of the first logged step (None without times)."""
        if self.times is None or self.times[1].size == 0:
            return None
        return float(np.nanmin(self.times[1]))

    @property
    def command(self) -> str | None:
        """The command line recorded in the config (``command``, ``cmd``, ``argv`` or ``cli``)."""
        for key in COMMAND_KEYS:
            value = self.config.get(key)
            if isinstance(value, str) and value:
                return value
            if isinstance(value, list | tuple) and value:
                return " ".join(str(v) for v in value)
        return None


def load_run(path: str | os.PathLike[str], *, name: str | None = None) -> RunCurves:
    """Read a run into per-metric ``(steps, values)`` series.

    Parameters
    ----------
    path : str or Path
        A Tracker's ``metrics.jsonl`` (or its folder; a truncated last line, or an unreadable
        one, is skipped with a ``RunReadWarning``), or any run :func:`rlmetrics.readers.read_run`
        reads: a verl file-logger ``.jsonl`` or console log, a TensorBoard log directory, a
        ``trainer_state.json`` or TRL output folder, a W&B offline run, a CSV export.
    name : str, optional, keyword-only
        Label (default: the run's folder name when the file is ``metrics.jsonl``, else the
        file's stem, or the folder's name).

    Returns
    -------
    RunCurves

    Raises
    ------
    ValidationDumpError
        The file is a validation rollout dump (use ``rlmetrics validate``).
    ValueError
        Nothing readable (see :class:`rlmetrics.RunReadError`).

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = pathlib.Path(d) / "run.jsonl"
    ...     _ = p.write_text('{"step": 1, "timestamp": 10.0, "a/x": 1.0}\\n'
    ...                      '{"step": 2, "timestamp": 12.5, "a/x": 3.0, "b/y": 5}\\n')
    ...     run = load_run(p)
    >>> run.name, run.series["a/x"][1].tolist(), run.series["b/y"][0].tolist(), run.duration
    ('run', [1.0, 3.0], [2.0], 2.5)
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a str or os.PathLike; got {type(path).__name__}")
    p = Path(path)
    if not p.exists():
        raise ValueError(f"path: no such file or directory: {str(p)!r}")
    run = read_run(p, allow_empty=True)  # a run that logged no number yet is drawn empty
    series = {k: (s.astype(np.float64), v) for k, (s, v) in run.series.items()}
    times = None if run.times is None else (run.times[0].astype(np.float64), run.times[1])
    if name is None:
        target = p / _METRICS_FILE if p.is_dir() and (p / _METRICS_FILE).is_file() else p
        if target.name == _METRICS_FILE and target.parent.name:
            name = target.parent.name
        else:
            name = p.stem if p.is_file() else p.name
    return RunCurves(
        name=name or str(p),
        path=p,
        series=series,
        times=times,
        config=dict(run.config),
        source=run.format,
        samples=_samples_of(p),
    )


def _samples_of(path: Path) -> dict[int, SampleTable]:
    """The sample tables that go with a run (:func:`~rlmetrics.readers.samples.samples_beside`),
    else none. An unreadable ``samples.jsonl`` costs the samples alone, with a
    :class:`RunReadWarning`."""
    found = samples_beside(path)
    if found is None:
        return {}
    try:
        return read_samples(found)
    except RunReadError as err:
        warnings.warn(f"{err}; the report shows no samples of this run", RunReadWarning, stacklevel=3)
        return {}


def unique_names(runs: list[RunCurves]) -> None:
    """Suffix repeated run names in place (``run``, ``run (2)``); number them all if that collides."""
    seen: dict[str, int] = {}
    for run in runs:
        n = seen.get(run.name, 0)
        seen[run.name] = n + 1
        if n:
            run.name = f"{run.name} ({n + 1})"
    if len({run.name for run in runs}) < len(runs):
        for i, run in enumerate(runs, start=1):
            run.name = f"{i}: {run.name}"


def flat_config(config: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """``(dotted.key, value)`` pairs of a nested config, sorted by key, values as short text.

    Examples
    --------
    >>> flat_config({"b": 1, "a": {"x": [1, 2], "y": None}})
    [('a.x', '[1, 2]'), ('a.y', 'null'), ('b', '1')]
    """
    out: list[tuple[str, str]] = []
    for key in sorted(config, key=str):
        value = config[key]
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.extend(flat_config(value, prefix=name + "."))
        else:
            out.append((name, json.dumps(value, default=str)))
    return out

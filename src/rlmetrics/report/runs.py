"""Runs read for a report: per-metric series, the wall-clock time of each step, the config.

:func:`load_run` reads a :class:`rlmetrics.Tracker` run (``metrics.jsonl``, with its
``timestamp`` per line and the ``config.json`` beside it) itself, and every other format
:func:`rlmetrics.health.sources.load_history` knows (verl's file logger, TensorBoard, TRL's
``trainer_state.json``, W&B offline) through it. A validation rollout dump (one line per
generated sample, with ``input``/``output`` text) is refused with a pointer to
``rlmetrics validate``: its one numeric column drawn against a repeated step would be a
meaningless curve.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from rlmetrics import keys as K
from rlmetrics.errors import RunReadWarning, ValidationDumpError
from rlmetrics.health.findings import last_per_step
from rlmetrics.tracking import read_jsonl

__all__ = ["RunCurves", "ValidationDumpError", "load_run", "unique_names"]

#: Fields of a verl validation dump line (``<dump_dir>/<step>.jsonl``) that a metrics run never has.
DUMP_FIELDS = ("input", "output", "gts", "prompt", "response", "data_source", "uid")
#: Config entries shown as the command that started the run.
COMMAND_KEYS = ("command", "cmd", "argv", "cli")
_CONFIG_FILE = "config.json"
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
    """

    name: str
    path: Path
    series: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    times: tuple[np.ndarray, np.ndarray] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    source: str = "rlmetrics-jsonl"

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


def _is_tracker_jsonl(p: Path) -> bool:
    """A JSONL file whose first record is a flat row (not verl's ``{"step", "data"}`` record)."""
    if p.suffix.lower() not in (".jsonl", ".ndjson") or not p.is_file():
        return False
    with open(p, "rb") as fh:
        for raw in fh:
            if raw.strip():
                try:
                    record = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    return True  # read_jsonl reports it (a cut first line)
                return not (
                    isinstance(record, dict)
                    and set(record) == {"step", "data"}
                    and isinstance(record["data"], dict)
                )
    return True


def _check_not_a_dump(p: Path, rows: list[dict[str, Any]]) -> None:
    for row in rows[:50]:
        text = [k for k in DUMP_FIELDS if isinstance(row.get(k), str)]
        if text:
            raise ValidationDumpError(
                f"{str(p)!r} is a validation rollout dump (one line per generated sample, with "
                f"{', '.join(text)}), not a run's metrics: summarise it with `rlmetrics validate {p}` "
                "(a folder of per-step dumps gives curves against the step, `--plot` draws them); "
                "`rlmetrics report` draws the metrics.jsonl of a training run"
            )


def _read_config(folder: Path) -> dict[str, Any]:
    path = folder / _CONFIG_FILE
    if not path.is_file():
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        warnings.warn(f"{path}: config not read ({err})", RunReadWarning, stacklevel=3)
        return {}
    return config if isinstance(config, dict) else {"config": config}


def _number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float)


_NUMERIC = frozenset({int, float})


def _columns(
    p: Path, rows: list[dict[str, Any]], first: int
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], tuple[np.ndarray, np.ndarray] | None]:
    """The rows ``first, first + 1, ...`` (all with the same keys, every value an int or a float)
    as columns: key -> (steps, values), and (steps, timestamps)."""
    names = list(rows[0])
    table = np.array([list(r.values()) for r in rows], dtype=np.float64)
    if K.TRACKING_STEP in names:
        steps = table[:, names.index(K.TRACKING_STEP)]
        bad = np.flatnonzero(~np.isfinite(steps))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"{p}: row {first + i + 1} has a non-numeric step {rows[i][K.TRACKING_STEP]!r}")
    else:
        steps = np.arange(first, first + len(rows), dtype=np.float64)
    series = {k: (steps, table[:, j]) for j, k in enumerate(names) if k not in K.TRACKING_FIELDS}
    times = None
    if K.TRACKING_TIMESTAMP in names:
        stamps = table[:, names.index(K.TRACKING_TIMESTAMP)]
        ok = np.isfinite(stamps)
        times = (steps[ok], stamps[ok])
    return series, times


def _row_columns(
    p: Path, row: dict[str, Any], i: int
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], tuple[np.ndarray, np.ndarray] | None]:
    """One row with some non-numeric value (kept out) as columns of one point."""
    step = row.get(K.TRACKING_STEP, i)
    if not _number(step) or not math.isfinite(step):
        raise ValueError(f"{p}: row {i + 1} has a non-numeric step {step!r}")
    at = np.array([float(step)])
    series = {
        k: (at, np.array([float(v)])) for k, v in row.items() if k not in K.TRACKING_FIELDS and _number(v)
    }
    stamp: Any = row.get(K.TRACKING_TIMESTAMP)
    times = (at, np.array([float(stamp)])) if _number(stamp) and math.isfinite(stamp) else None
    return series, times


def _read_tracker_jsonl(p: Path) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], Any]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = read_jsonl(p)
    for w in caught:  # re-issue (once, attributed to the caller) e.g. the truncated-line warning
        warnings.warn(str(w.message), w.category, stacklevel=3)
    if not rows:
        raise ValueError(f"path: {str(p)!r} holds no complete JSON line")
    _check_not_a_dump(p, rows)
    # Consecutive rows logging the same keys, all numbers (a Tracker's usual run), are read as
    # one float table; another row (a bool, a string, a null) key by key.
    parts: list[tuple[dict[str, tuple[np.ndarray, np.ndarray]], tuple[np.ndarray, np.ndarray] | None]] = []
    start = 0
    while start < len(rows):
        keys = tuple(rows[start])  # in order: the table's columns follow it
        stop = start + 1
        while stop < len(rows) and tuple(rows[stop]) == keys:
            stop += 1
        block = rows[start:stop]
        if set(map(type, chain.from_iterable(r.values() for r in block))) <= _NUMERIC:
            parts.append(_columns(p, block, start))
        else:
            parts.extend(_row_columns(p, row, start + j) for j, row in enumerate(block))
        start = stop
    chunks: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {}
    for series, _ in parts:
        for key, (s, v) in series.items():
            acc = chunks.setdefault(key, ([], []))
            acc[0].append(s)
            acc[1].append(v)
    out = {k: last_per_step(np.concatenate(s), np.concatenate(v)) for k, (s, v) in chunks.items()}
    stamped = [t for _, t in parts if t is not None and t[0].size]
    times = last_per_step(*map(np.concatenate, zip(*stamped))) if stamped else None
    return out, times


def load_run(path: str | os.PathLike[str], *, name: str | None = None) -> RunCurves:
    """Read a run into per-metric ``(steps, values)`` series.

    Parameters
    ----------
    path : str or Path
        A Tracker's ``metrics.jsonl`` (or its folder; a truncated last line is skipped with a
        ``RunReadWarning``), or any run :func:`rlmetrics.load_history` reads: a verl
        file-logger ``.jsonl``, a TensorBoard log directory, a ``trainer_state.json`` or TRL
        output folder, a W&B offline run.
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
    target = p / _METRICS_FILE if p.is_dir() and (p / _METRICS_FILE).is_file() else p
    config: dict[str, Any] = {}
    times = None
    if _is_tracker_jsonl(target):
        series, times = _read_tracker_jsonl(target)
        source = "rlmetrics-jsonl"
        config = _read_config(target.parent)
    elif not p.exists():
        raise ValueError(f"path: no such file or directory: {str(p)!r}")
    else:
        from rlmetrics.health.sources import load_history

        history, source = load_history(p)
        series = {
            k: (np.asarray(s, dtype=np.float64), np.asarray(v, dtype=np.float64))
            for k, (s, v) in history.items()
        }
    if name is None:
        if target.name == _METRICS_FILE and target.parent.name:
            name = target.parent.name
        else:
            name = p.stem if p.is_file() else p.name
    return RunCurves(name=name or str(p), path=p, series=series, times=times, config=config, source=source)


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

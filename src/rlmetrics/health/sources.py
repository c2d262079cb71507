"""Runs read from the files trainers and trackers write, as one :data:`History`.

:func:`load_history` takes a file or a directory and tells the format from what it finds:

========================= ======================================================================
source kind               what is read
========================= ======================================================================
``"rlmetrics-jsonl"``     ``metrics.jsonl`` of :class:`rlmetrics.Tracker` (flat rows with ``step``)
``"verl-jsonl"``          verl's ``file`` logger: one ``{"step": s, "data": {...}}`` per line;
                          its ``orjson`` writes NaN and +/-inf as ``null``, read back as NaN
``"tensorboard"``         the ``events.out.tfevents.*`` files of one log directory (verl's and
                          TRL's ``tensorboard`` loggers), every scalar, no per-tag cap
``"trl-trainer-state"``   ``trainer_state.json`` of TRL / transformers (its ``log_history``)
``"wandb-offline"``       a W&B offline run (``offline-run-*/run-*.wandb``): its history records,
                          as wandb's own reader prints them (``wandb leet inspect --json``,
                          wandb >= 0.31)
``"verl-console"``        a verl console log as printed or pasted: its ``step:N - key:value``
                          records (colour codes, Ray prefixes, other lines and hard wraps
                          allowed; see :mod:`rlmetrics.health.textlogs`)
``"trl-printed"``         a TRL / transformers console log: the ``{'loss': ..., ...}`` dicts the
                          trainer prints (numbered 1, 2, ... unless they hold a step), or a
                          notebook progress table (``Step | Training Loss | ...``)
``"csv-export"``          a metric history exported as CSV: W&B's panel export (``Step``,
                          ``<run> - <key>`` columns), TensorBoard's scalar CSV (``Wall time,
                          Step,Value``), a long ``key,value,step`` table (MLflow)
========================= ======================================================================

A directory is searched in this order, the first match wins: ``metrics.jsonl``;
``trainer_state.json`` (else the one of the highest-numbered ``checkpoint-*``); TensorBoard
event files anywhere below it (outside ``wandb`` folders); a W&B run (``run-*.wandb`` in it, in
a run folder below it, or in its ``wandb/``); a single ``*.jsonl`` file. A file is told by its
name (``events.out.tfevents.*``, ``*.wandb``, ``*.json``), else by its content: a first line that is a
JSON object is a jsonl run; else the file's first 512 KiB are read as a verl console log, then as a
TRL printed log (and a ``trainer_state.json`` saved under another name is read as one). TensorBoard's rule
holds for event files: a directory holding them is one run (all its event files, a restarted run
included), so a directory whose subdirectories hold several runs is an error that lists them;
pass one of them.

Every failure to read is a :class:`RunReadError` (a ``ValueError``) naming the path and what was
expected. A cut-off last line (a run still writing, or a crash) is skipped with a warning, and so
are the damaged records of a text log (one warning per file, with their count).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rlmetrics import keys as K
from rlmetrics.errors import RunReadError, RunReadWarning
from rlmetrics.health import csvlogs, textlogs
from rlmetrics.health.findings import as_history
from rlmetrics.tracking import read_jsonl

__all__ = [
    "CSV_EXPORT",
    "RLMETRICS_JSONL",
    "SOURCES",
    "TENSORBOARD",
    "TRL_PRINTED",
    "TRL_TRAINER_STATE",
    "VERL_CONSOLE",
    "VERL_JSONL",
    "WANDB_OFFLINE",
    "RunReadError",
    "load_history",
]

RLMETRICS_JSONL = "rlmetrics-jsonl"
VERL_JSONL = "verl-jsonl"
TENSORBOARD = "tensorboard"
TRL_TRAINER_STATE = "trl-trainer-state"
WANDB_OFFLINE = "wandb-offline"
VERL_CONSOLE = "verl-console"
TRL_PRINTED = "trl-printed"
CSV_EXPORT = "csv-export"
#: Every source kind :func:`load_history` returns.
SOURCES = (
    RLMETRICS_JSONL,
    VERL_JSONL,
    TENSORBOARD,
    TRL_TRAINER_STATE,
    WANDB_OFFLINE,
    VERL_CONSOLE,
    TRL_PRINTED,
    CSV_EXPORT,
)

_EXPECTED = (
    "a rlmetrics metrics.jsonl, a verl file-logger .jsonl, a TensorBoard log directory "
    "(events.out.tfevents.*), a trainer_state.json (TRL / transformers) or a W&B offline run "
    "(offline-run-*/run-*.wandb), or a text log: a verl console log (step:N - key:value lines) or "
    "the {'loss': ...} dicts (or progress table) a TRL / transformers trainer prints, or a CSV export "
    "(W&B, TensorBoard, MLflow: a step column and metric columns, or key,value,step rows)"
)
_TEXT_HEAD = 512 * 1024  # how much of a file is read to tell a text log
_EVENTS_GLOB = "events.out.tfevents.*"
_TRAINER_STATE = "trainer_state.json"
_LOG_HISTORY = "log_history"
_VERL_STEP, _VERL_DATA = "step", "data"  # verl's FileLogger record: {"step": s, "data": {...}}
_History = dict[str, tuple[np.ndarray, np.ndarray]]
_CHECKPOINT = re.compile(r"checkpoint-(\d+)$")


def load_history(path: str | os.PathLike[str]) -> tuple[_History, str]:
    """Read a run's metrics from any of the formats above.

    Parameters
    ----------
    path : str or Path
        A file (``metrics.jsonl``, a verl ``.jsonl``, an event file, ``trainer_state.json``, a
        ``.wandb`` file) or a directory holding one run (a rlmetrics run folder, a TensorBoard
        log directory, a TRL output or checkpoint directory, a W&B ``offline-run-*`` or
        ``wandb/`` folder with one run).

    Returns
    -------
    history : dict
        Metric key -> ``(steps, values)``, int64 and float64 arrays of one length, steps
        increasing (see :mod:`rlmetrics.health.findings`).
    source : str
        One of :data:`SOURCES`.

    Raises
    ------
    RunReadError
        The path does not exist, is empty, holds no recognisable run or several runs, has an
        unreadable line, or no numeric metric.
    ImportError
        A TensorBoard or W&B run and the package to read it is not installed.

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as d:
    ...     f = Path(d) / "exp.jsonl"
    ...     _ = f.write_text('{"step": 1, "data": {"actor/entropy": 0.9}}\\n'
    ...                      '{"step": 2, "data": {"actor/entropy": null}}\\n')
    ...     history, source = load_history(f)
    >>> source, history["actor/entropy"][0].tolist(), history["actor/entropy"][1].tolist()
    ('verl-jsonl', [1, 2], [0.9, nan])
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a str or os.PathLike; got {type(path).__name__}")
    p = Path(path)
    if not p.exists():
        raise RunReadError(f"{str(p)!r}: no such file or directory; expected {_EXPECTED}")
    kind, target = _locate_dir(p) if p.is_dir() else _detect_file(p)
    history = _READERS[kind](target)
    if not history:
        raise RunReadError(f"{str(target)!r} ({kind}): no numeric metric in the run")
    return history, kind


# ---------------------------------------------------------------------------------------------
# Detection
# ---------------------------------------------------------------------------------------------


def _detect_file(p: Path) -> tuple[str, Path]:
    if p.name.startswith("events.out.tfevents."):
        return TENSORBOARD, p
    if p.suffix == ".wandb":
        return WANDB_OFFLINE, p
    if p.stat().st_size == 0:
        raise RunReadError(f"{str(p)!r}: the file is empty; expected {_EXPECTED}")
    if p.suffix == ".json":
        return TRL_TRAINER_STATE, p
    first = _first_line(p)
    if first is None:
        raise RunReadError(f"{str(p)!r}: the file holds only blank lines; expected {_EXPECTED}")
    try:
        record = json.loads(first)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        kind = _detect_text(p)
        if kind is None:
            raise RunReadError(
                f"{str(p)!r}: the first line is not JSON ({err}) and no text log was recognised in the "
                f"file; expected {_EXPECTED}"
            ) from None
        return kind, p
    if not isinstance(record, dict):
        kind = _detect_text(p)
        if kind is None:
            raise RunReadError(
                f"{str(p)!r}: expected a JSON object per line; the first line is a {type(record).__name__}"
            )
        return kind, p
    if set(record) == {_VERL_STEP, _VERL_DATA} and isinstance(record[_VERL_DATA], dict):
        return VERL_JSONL, p
    return RLMETRICS_JSONL, p


def _detect_text(p: Path) -> str | None:
    """The kind of the text log ``p`` by its first :data:`_TEXT_HEAD` bytes, or None."""
    with open(p, "rb") as fh:
        head = fh.read(_TEXT_HEAD).decode("utf-8", errors="replace")
    if head.lstrip().startswith("{") and f'"{_LOG_HISTORY}"' in head:  # a renamed trainer_state.json
        return TRL_TRAINER_STATE
    if textlogs.is_verl_console(head):
        return VERL_CONSOLE
    if textlogs.is_trl_printed(head):
        return TRL_PRINTED
    if csvlogs.is_csv_export(head):
        return CSV_EXPORT
    return None


def _first_line(p: Path) -> bytes | None:
    with open(p, "rb") as fh:
        for raw in fh:
            if raw.strip():
                return raw
    return None


def _locate_dir(p: Path) -> tuple[str, Path]:
    jsonl = p / "metrics.jsonl"
    if jsonl.is_file():
        return _detect_file(jsonl)
    state = p / _TRAINER_STATE
    if state.is_file():
        return TRL_TRAINER_STATE, state
    checkpoints = sorted(
        (int(m.group(1)), c)
        for c in p.glob(f"checkpoint-*/{_TRAINER_STATE}")
        if (m := _CHECKPOINT.match(c.parent.name))
    )
    if checkpoints:  # the last checkpoint's log_history holds every earlier one
        return TRL_TRAINER_STATE, checkpoints[-1][1]
    event_dirs = sorted(
        {f.parent for f in p.rglob(_EVENTS_GLOB) if f.is_file() and "wandb" not in f.relative_to(p).parts}
    )
    if len(event_dirs) == 1:
        return TENSORBOARD, event_dirs[0]
    if event_dirs:
        raise RunReadError(_several(p, "TensorBoard runs (directories with event files)", event_dirs))
    runs = _wandb_runs(p)
    if len(runs) == 1:
        return WANDB_OFFLINE, runs[0]
    if runs:
        raise RunReadError(_several(p, "W&B runs", runs))
    files = sorted(f for f in p.glob("*.jsonl") if f.is_file())
    if len(files) == 1:
        return _detect_file(files[0])
    if files:
        raise RunReadError(_several(p, "jsonl files", files))
    raise RunReadError(f"{str(p)!r}: no run in this directory (no event files either); expected {_EXPECTED}")


def _wandb_runs(p: Path) -> list[Path]:
    """The ``run-*.wandb`` files of the W&B runs in ``p`` (a run folder, ``wandb/`` or its parent)."""
    for pattern in ("run-*.wandb", "*/run-*.wandb", "wandb/*/run-*.wandb"):
        found = {f.resolve() for f in p.glob(pattern) if f.is_file()}  # latest-run is a symlink
        if found:
            return sorted(found)
    return []


def _several(p: Path, what: str, found: list[Path]) -> str:
    listed = ", ".join(repr(str(f.relative_to(p) if f.is_relative_to(p) else f)) for f in found[:20])
    more = f" and {len(found) - 20} more" if len(found) > 20 else ""
    return f"{str(p)!r} holds {len(found)} {what}: {listed}{more}; pass one of them"


# ---------------------------------------------------------------------------------------------
# Readers
# ---------------------------------------------------------------------------------------------


def _read_rows(p: Path, *, repeated: str = "last") -> list[dict[str, Any]]:
    try:
        return read_jsonl(p, strict=True, repeated=repeated)
    except ValueError as err:
        raise RunReadError(f"{err}; expected one JSON object per line") from None


def _read_rlmetrics_jsonl(p: Path) -> _History:
    return as_history(_read_rows(p))


def _read_verl_jsonl(p: Path) -> _History:
    rows = []
    # every record as written: verl nests a step's metrics under "data", so a step logged twice
    # is merged key by key below (as_history keeps each key's last value), not record by record
    for i, record in enumerate(_read_rows(p, repeated="all"), start=1):
        data = record.get(_VERL_DATA)
        if not isinstance(data, dict) or _VERL_STEP not in record:
            raise RunReadError(
                f"{str(p)!r}: record {i} is not verl's {{'step': ..., 'data': {{...}}}}; "
                f"got keys {sorted(record)}"
            )
        row = {k: math.nan if v is None else v for k, v in data.items() if k != K.TRACKING_STEP}
        row[K.TRACKING_STEP] = record[_VERL_STEP]
        rows.append(row)
    return as_history(rows)


def _read_trainer_state(p: Path) -> _History:
    try:
        state = json.loads(p.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise RunReadError(f"{str(p)!r}: not JSON ({err}); expected a trainer_state.json") from None
    logs = state.get(_LOG_HISTORY) if isinstance(state, dict) else None
    if not isinstance(logs, list) or not all(isinstance(r, dict) for r in logs):
        raise RunReadError(
            f"{str(p)!r}: expected a trainer_state.json (TRL / transformers) with a "
            f"{_LOG_HISTORY!r} list of dicts; got {type(state).__name__}"
            + (f" with keys {sorted(state)[:10]}" if isinstance(state, dict) else "")
        )
    return as_history(logs)


def _read_text_log(p: Path, parse: Callable[[str], tuple[list[dict[str, Any]], int]], what: str) -> _History:
    text = p.read_bytes().decode("utf-8", errors="replace")
    rows, skipped = parse(text)
    if skipped:
        warnings.warn(
            f"{p}: {skipped} damaged {what} record{'s' if skipped > 1 else ''} skipped "
            f"({len(rows)} read): cut off, or a field that does not read back",
            RunReadWarning,
            stacklevel=4,
        )
    return as_history(rows)


def _read_verl_console(p: Path) -> _History:
    return _read_text_log(p, textlogs.parse_verl_console, "verl console")


def _read_trl_printed(p: Path) -> _History:
    return _read_text_log(p, textlogs.parse_trl_printed, "TRL printed")


def _read_csv_export(p: Path) -> _History:
    return _read_text_log(p, lambda text: csvlogs.parse_csv_export(text, name=p.stem), "CSV")


def _read_tensorboard(p: Path) -> _History:
    try:
        from tensorboard.backend.event_processing import event_accumulator as ea
        from tensorboard.util import tensor_util
    except ImportError:
        raise ImportError(
            f"reading the TensorBoard log {str(p)!r} needs tensorboard: pip install 'rlmetrics[tensorboard]'"
        ) from None
    # 0 = keep every event (the default keeps 10,000 scalars per tag, sampled); 1 for the
    # kinds not read, so images and histograms do not fill memory
    guidance = {ea.SCALARS: 0, ea.TENSORS: 0, ea.IMAGES: 1, ea.AUDIO: 1, ea.HISTOGRAMS: 1}
    guidance[ea.COMPRESSED_HISTOGRAMS] = 1
    acc = ea.EventAccumulator(str(p), size_guidance=guidance)
    try:
        acc.Reload()
    except Exception as err:  # a corrupt file: TensorBoard's reader raises its own errors
        raise RunReadError(f"{str(p)!r}: TensorBoard could not read the event file(s): {err}") from None
    tags = acc.Tags()
    series: dict[str, tuple[list[int], list[float]]] = {}
    for tag in tags.get(ea.SCALARS, []):
        events = acc.Scalars(tag)
        series[tag] = ([e.step for e in events], [e.value for e in events])
    for tag in tags.get(ea.TENSORS, []):
        # tf.summary.scalar (TF2) writes scalars as tensors of the "scalars" plugin
        if tag in series or acc.SummaryMetadata(tag).plugin_data.plugin_name != "scalars":
            continue
        steps, values = [], []
        for e in acc.Tensors(tag):
            arr = tensor_util.make_ndarray(e.tensor_proto)
            if arr.size == 1 and arr.dtype.kind in "fiu":
                steps.append(e.step)
                values.append(float(arr.reshape(())))
        if steps:
            series[tag] = (steps, values)
    arrays = {k: (np.asarray(s, np.int64), np.asarray(v, np.float64)) for k, (s, v) in series.items()}
    return as_history(arrays)


# W&B's transaction log (``.wandb``) is read by wandb itself: ``wandb leet inspect --json FILE``
# (wandb >= 0.31) prints each record of the file as one JSON line, in the order written. Only
# the history records are kept; NaN and +/-inf arrive as the strings W&B writes for them.
WANDB_MIN_VERSION = "0.31"
_WANDB_INSTALL = "pip install 'rlmetrics[wandb]'"
_WANDB_UPGRADE = f"pip install -U 'wandb>={WANDB_MIN_VERSION}'"
_WANDB_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_WANDB_RECORDS = ("history", "partial_history")


def _wandb_command(p: Path) -> list[str]:
    """The command that prints the records of the run file ``p`` (wandb's own reader)."""
    import importlib.util

    if importlib.util.find_spec("wandb") is None:
        raise ImportError(f"reading the W&B run {str(p)!r} needs wandb: {_WANDB_INSTALL}")
    return [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(p)]


def _wandb_rows(lines: Iterator[str]) -> list[dict[str, Any]]:
    """The rows (metrics and ``step``) of the history records among ``lines``."""
    rows: list[dict[str, Any]] = []
    for line in lines:
        if 'history"' not in line:  # most records are not history: skip their parse
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        kind = record.get("type") if isinstance(record, dict) else None
        if kind not in _WANDB_RECORDS or not isinstance(record.get(kind), dict):
            continue
        part = record[kind]
        items = part.get("item")
        if not isinstance(items, dict):
            continue
        step = items.get("_step", (part.get("step") or {}).get("num"))
        row = {
            key: _WANDB_FLOATS.get(value, value) if isinstance(value, str) else value
            for key, value in items.items()
            if not key.startswith("_")  # _step, _timestamp, _runtime, _wandb: W&B's own
        }
        if row and step is not None:
            row[K.TRACKING_STEP] = step
            rows.append(row)
    return rows


def _read_wandb(p: Path) -> _History:
    import subprocess
    import tempfile

    command = _wandb_command(p)
    env = os.environ | {"WANDB_SILENT": "true"}
    # stdout is read as it comes (a long run prints much); stderr, a few lines, goes to a file
    # so that neither pipe can fill up while the other is read
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errors:
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=errors, text=True, encoding="utf-8", env=env
        ) as proc:
            assert proc.stdout is not None
            rows = _wandb_rows(iter(proc.stdout))
        errors.seek(0)
        err = errors.read().strip()
    if proc.returncode != 0:
        last = err.splitlines()[-1] if err else f"exit code {proc.returncode}"
        if "No such command" in err or "No such option" in err:
            raise RunReadError(
                f"{str(p)!r}: the installed wandb has no `wandb leet inspect`: {_WANDB_UPGRADE}"
            )
        raise RunReadError(f"{str(p)!r}: wandb could not read the run file: {last.removeprefix('Error: ')}")
    if "incomplete" in err and not rows:
        raise RunReadError(
            f"{str(p)!r}: the W&B run file ends in an incomplete record before any history record "
            "(cut off, or a run that stopped at its start)"
        )
    if "incomplete" in err:
        warnings.warn(
            f"{p}: {len(rows)} steps read; the file ends in an incomplete record (a run still "
            "writing, or one that crashed)",
            RunReadWarning,
            stacklevel=4,
        )
    return as_history(rows)


_READERS: dict[str, Callable[[Path], _History]] = {
    RLMETRICS_JSONL: _read_rlmetrics_jsonl,
    VERL_JSONL: _read_verl_jsonl,
    TENSORBOARD: _read_tensorboard,
    TRL_TRAINER_STATE: _read_trainer_state,
    WANDB_OFFLINE: _read_wandb,
    VERL_CONSOLE: _read_verl_console,
    TRL_PRINTED: _read_trl_printed,
    CSV_EXPORT: _read_csv_export,
}

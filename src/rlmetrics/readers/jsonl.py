"""JSON-lines runs: a rlmetrics ``metrics.jsonl`` and verl's file logger, and :func:`read_jsonl`.

* ``"rlmetrics-jsonl"``: the ``metrics.jsonl`` of :class:`rlmetrics.Tracker`, flat rows with
  ``step`` and ``timestamp``; the ``config.json`` beside it is read as the run's config. Other
  flat JSON lines are read the same way: a row without ``step`` is numbered after the one before,
  unless it holds ms-swift's counter ``"global_step/max_steps": "2/4389"`` (step 2).
* ``"verl-jsonl"``: verl's ``file`` logger, one ``{"step": s, "data": {...}}`` per line; its
  ``orjson`` writes NaN and +/-inf as ``null``, read back as NaN.

:func:`read_jsonl` is the line reader both use (and :func:`rlmetrics.tracking.read_jsonl`): a
line cut short by a crash is skipped with a ``RunReadWarning`` naming it. A validation rollout
dump (one line per generated sample, with ``input``/``output`` text) is refused with a
:class:`~rlmetrics.errors.ValidationDumpError` pointing at ``rlmetrics validate``.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from rlmetrics import keys as K
from rlmetrics.errors import RunReadError, ValidationDumpError
from rlmetrics.readers._history import as_history, rows_history
from rlmetrics.readers._run import Notes, Parsed, Source

__all__ = [
    "DUMP_FIELDS",
    "RLMETRICS_JSONL",
    "RUN_END_FILE",
    "VERL_JSONL",
    "is_verl_record",
    "last_step",
    "read_jsonl",
    "run_end",
]

RLMETRICS_JSONL = "rlmetrics-jsonl"
VERL_JSONL = "verl-jsonl"
#: Fields of a verl validation dump line (``<dump_dir>/<step>.jsonl``) that a metrics run never has.
DUMP_FIELDS = ("input", "output", "gts", "prompt", "response", "data_source", "uid")
#: How :func:`read_jsonl` treats a key logged twice at one step.
_REPEATED = ("last", "all")
_VERL_STEP, _VERL_DATA = "step", "data"  # verl's FileLogger record: {"step": s, "data": {...}}
_CONFIG_FILE = "config.json"
#: Written beside a run's ``metrics.jsonl`` when its Tracker finishes (``{"exit_code": 0,
#: "last_step": 99, "_timestamp": ...}``); removed when the run is resumed. A run without it is
#: still running, or was killed.
RUN_END_FILE = "finished.json"
_DUMP_HEAD = 50  # rows looked at to tell a rollout dump


def run_end(metrics_path: str | Path) -> dict[str, Any] | None:
    """The end record a finished Tracker left beside ``metrics_path``, ``None`` when there is none.

    A file that is not a JSON object (cut by a crash) reads as ``{}``: the run did end.
    """
    path = Path(metrics_path).parent / RUN_END_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return {}
    try:
        record = json.loads(text)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def is_verl_record(record: Any) -> bool:
    """Whether ``record`` (a parsed line) is verl's file-logger ``{"step": s, "data": {...}}``."""
    return (
        isinstance(record, dict)
        and set(record) == {_VERL_STEP, _VERL_DATA}
        and isinstance(record[_VERL_DATA], dict)
    )


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
    return jsonl_rows(Source.of_path(p), Notes(), strict=strict, repeated=repeated)


def jsonl_rows(src: Source, notes: Notes, *, strict: bool, repeated: str) -> list[dict[str, Any]]:
    """The records of the JSON-lines ``src`` (see :func:`read_jsonl`); warnings go to ``notes``."""
    data = src.data()
    lines = data.split(b"\n")
    complete = data.endswith(b"\n")
    rows: list[dict[str, Any]] = []
    # the last line with text: cut off when it opens an object that it does not close (a paste
    # cut there, a crash), whether or not a line break was added after it
    last = max((i for i, raw in enumerate(lines, start=1) if raw.strip()), default=0)
    for i, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            opened = raw.lstrip().startswith(b"{") and not raw.rstrip().endswith(b"}")
            if (i == len(lines) and not complete) or (i == last and opened):
                notes.warn(f"{src.name}: skipping the truncated last line {i} ({len(raw)} bytes)")
            elif strict:
                raise ValueError(f"{src.name}:{i}: not a JSON object ({err})") from None
            else:
                notes.warn(f"{src.name}: skipping unreadable line {i} (a fragment left by a crash?): {err}")
            continue
        if not isinstance(row, dict):
            raise ValueError(f"{src.name}:{i}: expected a JSON object per line; got {type(row).__name__}")
        rows.append(row)
    if repeated == "last":
        rows = _keep_last(src, rows, notes)
    return rows


def _step_of(row: dict[str, Any]) -> Any:
    step = row.get(K.TRACKING_STEP)
    return step if isinstance(step, int | float) and not isinstance(step, bool) else None


def _same(a: Any, b: Any) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _keep_last(src: Source, rows: list[dict[str, Any]], notes: Notes) -> list[dict[str, Any]]:
    """Of a key logged again at a step with another value, only the value logged last; warns once.

    A record whose every metric is logged again later at its step goes (the run was appended to
    twice). A key logged again with the same value beside other keys (``epoch`` in TRL's summary
    record) is no conflict: that record stays whole.
    """
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
    notes.warn(
        f"{src.name}: {len(repeated)} step{'s' * (len(repeated) != 1)} logged more than once (the run was "
        f"appended to twice, or resumed from an earlier step); e.g. step {first}: {repeated[first]!r}; "
        "keeping the values logged last"
    )
    return kept


def _rows(src: Source, notes: Notes, *, strict: bool, repeated: str) -> list[dict[str, Any]]:
    try:
        return jsonl_rows(src, notes, strict=strict, repeated=repeated)
    except RunReadError:
        raise
    except ValueError as err:
        raise RunReadError(f"{err}; expected one JSON object per line") from None


def read_rlmetrics_jsonl(src: Source, notes: Notes, *, strict: bool = False) -> Parsed:
    """A rlmetrics ``metrics.jsonl``: its history, the time of each step, the ``config.json`` beside it."""
    rows = _rows(src, notes, strict=strict, repeated="all")
    if not rows:
        raise RunReadError(f"{src.name!r} holds no complete JSON line")
    _check_not_a_dump(src, rows)  # before a dump's repeated step is warned about
    rows = [_swift_step(row) for row in rows]
    rows = _keep_last(src, rows, notes)
    rows = _drop_bad_steps(src, rows, notes)
    series, times = rows_history(rows)
    config = {} if src.path is None else _read_config(src.path.parent, notes)
    return Parsed(series, times, config)


_STEP_COUNTER = re.compile(r"\s*(\d+)\s*/\s*\d+\s*")


def _swift_step(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with the step of ms-swift's counter (``"global_step/max_steps": "2/4389"``) when it
    holds no ``step`` of its own."""
    counter = row.get(K.SWIFT_STEP_COUNTER)
    if K.TRACKING_STEP in row or not isinstance(counter, str):
        return row
    m = _STEP_COUNTER.fullmatch(counter)
    return row if m is None else {**row, K.TRACKING_STEP: int(m.group(1))}


def _drop_bad_steps(src: Source, rows: list[dict[str, Any]], notes: Notes) -> list[dict[str, Any]]:
    """``rows`` without those whose step is not a finite number (each costs its row, with one warning).

    A row without a step is kept: it is numbered after the one before.
    """
    bad = [
        i
        for i, row in enumerate(rows, start=1)
        if K.TRACKING_STEP in row and (_step_of(row) is None or not math.isfinite(row[K.TRACKING_STEP]))
    ]
    if not bad:
        return rows
    first = rows[bad[0] - 1][K.TRACKING_STEP]
    if len(bad) == len(rows):
        raise RunReadError(f"{src.name}: every row has a non-numeric step (row 1: {first!r})")
    notes.warn(
        f"{src.name}: skipping {len(bad)} row{'s' * (len(bad) != 1)} with a step that is not a finite "
        f"number (rows {', '.join(map(str, bad[:10]))}{' ...' if len(bad) > 10 else ''}; e.g. {first!r})"
    )
    skip = set(bad)
    return [row for i, row in enumerate(rows, start=1) if i not in skip]


def read_verl_jsonl(src: Source, notes: Notes, *, strict: bool = False) -> Parsed:
    """verl's file logger: ``{"step": s, "data": {...}}`` per line, ``null`` read as NaN."""
    rows = []
    # every record as written: verl nests a step's metrics under "data", so a step logged twice
    # is merged key by key below (as_history keeps each key's last value), not record by record
    for i, record in enumerate(_rows(src, notes, strict=strict, repeated="all"), start=1):
        data = record.get(_VERL_DATA)
        if not isinstance(data, dict) or _VERL_STEP not in record:
            raise RunReadError(
                f"{src.name!r}: record {i} is not verl's {{'step': ..., 'data': {{...}}}}; "
                f"got keys {sorted(record)}"
            )
        row = {k: math.nan if v is None else v for k, v in data.items() if k != K.TRACKING_STEP}
        row[K.TRACKING_STEP] = record[_VERL_STEP]
        rows.append(row)
    return Parsed(as_history(rows))


def _check_not_a_dump(src: Source, rows: list[dict[str, Any]]) -> None:
    for row in rows[:_DUMP_HEAD]:
        text = [k for k in DUMP_FIELDS if isinstance(row.get(k), str)]
        if text:
            raise ValidationDumpError(
                f"{src.name!r} is a validation rollout dump (one line per generated sample, with "
                f"{', '.join(text)}), not a run's metrics: summarise it with `rlmetrics validate "
                f"{src.name}` (a folder of per-step dumps gives curves against the step, `--plot` "
                "draws them); `rlmetrics report` and `rlmetrics diagnose` read a training run's metrics"
            )


def _read_config(folder: Path, notes: Notes) -> dict[str, Any]:
    path = folder / _CONFIG_FILE
    if not path.is_file():
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        notes.warn(f"{path}: config not read ({err})")
        return {}
    return config if isinstance(config, dict) else {"config": config}


def last_step(path: str | os.PathLike[str], *, tail: int = 1 << 20) -> int | None:
    """The largest step among the last complete records of a rlmetrics ``metrics.jsonl`` (its
    last ``tail`` bytes): where a resumed run goes on. None when the file is missing, not a
    regular file, or holds no complete record with a step.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = pathlib.Path(d) / "metrics.jsonl"
    ...     _ = p.write_text('{"step": 3, "a": 1.0}\\n{"step": 4, "a": 2.0}\\n{"step": 5, "a"')
    ...     last_step(p), last_step(pathlib.Path(d) / "none.jsonl")
    (4, None)
    """
    path = Path(path)
    if not path.is_file():  # missing, or not a regular file (a device reads forever)
        return None
    with open(path, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(0, size - tail))
        data = fh.read(tail)
    lines = data.split(b"\n")
    if size > tail:
        lines = lines[1:]  # the first one is cut by the window
    best: int | None = None
    for raw in lines:
        if not raw.strip():
            continue
        try:
            step = json.loads(raw).get(K.TRACKING_STEP)
        except (ValueError, AttributeError):  # a cut or foreign line
            continue
        if isinstance(step, int) and not isinstance(step, bool) and (best is None or step > best):
            best = step
    return best

"""Metric histories exported as CSV by the trackers' web pages, read as rows.

Three layouts, told apart by the header:

* **wide**, one column per metric and one row per step (W&B's "Export as CSV" of a panel, a
  pandas ``to_csv`` of a run's history): a step column (``Step``, ``step``, ``_step``,
  ``global_step`` or ``trainer/global_step``) and metric columns. W&B names a column
  ``<run> - <key>`` and adds ``<run> - <key>__MIN`` / ``__MAX`` (the range of a smoothed or
  sampled panel): the run name is cut off and the range columns are left out;
* **TensorBoard scalar** (its "download CSV" of one tag): ``Wall time,Step,Value``; the metric
  is named after the file, ``run-<run>-tag-<tag>.csv`` giving ``<tag>`` (TensorBoard writes a
  ``/`` of the tag as ``_``; the name is kept as written, and the health rules' signals match a
  key in that form too, :mod:`rlmetrics.health.signals`). A folder of such files, one per tag
  (the downloads of one run's scalar cards), is read as one run, its files' series side by side;
* **long**, one row per (metric, step) (MLflow's metric history, a tidy export): ``key`` (or
  ``metric``), ``value`` and ``step`` columns.

A per-category key logged to MLflow by rlmetrics (its category token's ``%`` written as ``:``,
MLflow refusing ``%``) is read back as the key (:func:`rlmetrics.keys.key_from_mlflow_name`), in
either layout; MLflow's other changes (``@`` as ``_at_``, a long key's hash) are kept as written.

Cells that are empty or not numbers are missing values (W&B leaves a cell empty where a metric
was not logged at that step), but for the long layout's empty value, a NaN (its row says the
metric was logged at that step; pandas' ``to_csv`` writes NaN as an empty cell); ``nan``, ``inf``
and ``-inf`` are read as floats. A row whose
step is not a whole number is damaged: it is skipped and counted.
"""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path
from typing import Any

from rlmetrics.errors import RunReadError
from rlmetrics.keys import key_from_mlflow_name
from rlmetrics.readers._history import as_history
from rlmetrics.readers._run import Notes, Parsed, Source

__all__ = [
    "CSV_EXPORT",
    "csv_export_records",
    "is_csv_export",
    "parse_csv_export",
    "read_csv_export",
    "tensorboard_csv_files",
]

CSV_EXPORT = "csv-export"

_STEP_COLUMNS = ("step", "_step", "global_step", "trainer/global_step")
_TB_HEADER = ("wall time", "step", "value")
_LONG_KEY = ("key", "metric", "name", "tag")
_WANDB_RANGE = re.compile(r"__(MIN|MAX)$")
_WANDB_RUN = re.compile(r"^.+? - ")
_TB_FILE = re.compile(r"^run[-_].*?[-_]tag[-_](?P<tag>.+)$")


def _header(text: str) -> tuple[list[str], str] | None:
    """The header's cells and the delimiter, when the first non-blank line looks like a CSV header."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    delimiter = "\t" if first.count("\t") > first.count(",") else ","
    cells = next(csv.reader([first], delimiter=delimiter), [])
    if len(cells) < 2:
        return None
    return [c.strip() for c in cells], delimiter


def _layout(cells: list[str]) -> str | None:
    lower = [c.lower() for c in cells]
    if tuple(lower) == _TB_HEADER:
        return "tensorboard"
    if "value" in lower and "step" in lower and any(k in lower for k in _LONG_KEY):
        return "long"
    if any(c in _STEP_COLUMNS for c in lower):
        return "wide"
    return None


def is_csv_export(head: str) -> bool:
    """Whether ``head`` (the start of a file) is a CSV export of a metric history.

    >>> is_csv_export("Step,run-1 - train/reward,run-1 - train/reward__MIN\\n1,0.5,0.4\\n")
    True
    >>> is_csv_export("step:1 - actor/entropy:0.4\\n")
    False
    """
    found = _header(head)
    return found is not None and _layout(found[0]) is not None


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


def _step(cell: str) -> int | None:
    value = _number(cell)
    if value is None or not math.isfinite(value) or value != int(value):
        return None
    return int(value)


def _metric_name(column: str) -> str | None:
    """A wide column's metric key: W&B's run prefix cut, its range columns left out."""
    if _WANDB_RANGE.search(column):
        return None
    return _WANDB_RUN.sub("", column, count=1) or None


def parse_csv_export(text: str, *, name: str = "value") -> tuple[list[dict[str, Any]], int]:
    """Rows (``{"step": s, key: value, ...}``) of a CSV export, and the number of damaged rows.

    Parameters
    ----------
    text : str
        The file's text.
    name : str, keyword-only
        The file's name without its suffix: the metric of a TensorBoard scalar CSV is named
        after it.

    Returns
    -------
    rows : list of dict
        One per step that holds a value, in step order; a metric missing at a step is left out
        of its row.
    skipped : int
        Rows whose step is missing or not a whole number.

    Examples
    --------
    >>> rows, skipped = parse_csv_export("Step,r - a/x,r - a/x__MIN\\n1,0.5,0.4\\n2,,\\n3,nan,0\\n")
    >>> rows, skipped
    ([{'step': 1, 'a/x': 0.5}, {'step': 3, 'a/x': nan}], 0)
    >>> parse_csv_export("Wall time,Step,Value\\n1.7e9,10,0.25\\n", name="run-exp-tag-train_reward")[0]
    [{'step': 10, 'train_reward': 0.25}]
    """
    rows, damaged = csv_export_records(text, name=name)
    return rows, len(damaged)


def csv_export_records(text: str, *, name: str = "value") -> tuple[list[dict[str, Any]], list[int]]:
    """:func:`parse_csv_export`, with the line number (from 1) of each damaged row.

    >>> csv_export_records("step,a\\n1,0.5\\nx,0.7\\n3,0.9\\n")
    ([{'step': 1, 'a': 0.5}, {'step': 3, 'a': 0.9}], [3])
    """
    found = _header(text)
    layout = None if found is None else _layout(found[0])
    if found is None or layout is None:
        return [], []
    cells, delimiter = found
    lower = [c.lower() for c in cells]
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    next(reader)  # the header
    by_step: dict[int, dict[str, Any]] = {}
    damaged: list[int] = []
    if layout == "wide":
        step_at = next(i for i, c in enumerate(lower) if c in _STEP_COLUMNS)
        keys = {i: _metric_name(c) for i, c in enumerate(cells) if i != step_at}
        keys = {i: None if k is None else key_from_mlflow_name(k) for i, k in keys.items()}
    elif layout == "tensorboard":
        match = _TB_FILE.match(name)
        metric = match.group("tag") if match else name
        step_at, keys = 1, {2: metric}
    else:
        step_at = lower.index("step")
        key_at = next(lower.index(k) for k in _LONG_KEY if k in lower)
        value_at = lower.index("value")
    for row in reader:
        if not any(cell.strip() for cell in row):
            continue
        step = _step(row[step_at]) if step_at < len(row) else None
        if step is None:
            damaged.append(reader.line_num)
            continue
        record = by_step.setdefault(step, {"step": step})
        if layout == "long":
            if max(key_at, value_at) >= len(row) or not row[key_at].strip():
                damaged.append(reader.line_num)
                continue
            # a row is there only where the metric was logged: an empty value is a NaN (pandas'
            # to_csv writes NaN so), not a step without it
            cell = row[value_at].strip()
            value = math.nan if not cell else _number(cell)
            if value is not None:
                record[key_from_mlflow_name(row[key_at].strip())] = value
            continue
        for i, key in keys.items():
            if key is None or i >= len(row):
                continue
            value = _number(row[i])
            if value is not None:
                record[key] = value
    return [by_step[s] for s in sorted(by_step) if len(by_step[s]) > 1], damaged


def tensorboard_csv_files(p: Path) -> list[Path]:
    """The TensorBoard scalar CSVs (``Wall time,Step,Value``) directly in the folder ``p``, by name.

    Only when every ``*.csv`` file there is one: a folder that mixes other CSV files is no run.
    """
    files = sorted(f for f in p.glob("*.csv") if f.is_file())
    for f in files:
        with f.open("rb") as fh:
            found = _header(fh.read(4096).decode("utf-8", errors="replace"))
        if found is None or _layout(found[0]) != "tensorboard":
            return []
    return files


def read_csv_export(src: Source, notes: Notes, *, strict: bool = False) -> Parsed:
    """A CSV export: its rows' history; damaged rows skipped with one warning naming their lines.

    A folder (:func:`tensorboard_csv_files`) is read file by file, each file's metric a series.
    """
    if src.path is not None and src.path.is_dir():
        series: dict[str, tuple[Any, Any]] = {}
        for f in tensorboard_csv_files(src.path):
            read = read_csv_export(Source.of_path(f), notes).series
            if series.keys() & read.keys():  # the same tag downloaded from two runs
                raise RunReadError(
                    f"{src.name!r}: the tag {next(iter(read))!r} of {f.name!r} is in an earlier file too: "
                    "the folder holds several runs' CSVs; pass a folder of one run's"
                )
            series |= read
        return Parsed(series)
    stem = "value" if src.path is None else src.path.stem
    rows, damaged = csv_export_records(src.text(), name=stem)
    notes.damaged(src.name, damaged, len(rows), "CSV")
    return Parsed(as_history(rows))

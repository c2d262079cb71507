"""W&B offline runs (``offline-run-*/run-*.wandb``): their history records.

W&B's transaction log (``.wandb``) is read by wandb itself: ``wandb leet inspect --json FILE``
(wandb >= 0.31) prints each record of the file as one JSON line, in the order written. Only the
history records are kept; NaN and +/-inf arrive as the strings W&B writes for them.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlmetrics import keys as K
from rlmetrics.errors import RunReadError
from rlmetrics.readers._history import as_history
from rlmetrics.readers._run import Notes, Parsed, Source

__all__ = ["WANDB_MIN_VERSION", "WANDB_OFFLINE", "read_wandb", "wandb_runs"]

WANDB_OFFLINE = "wandb-offline"
WANDB_MIN_VERSION = "0.31"
_WANDB_INSTALL = "pip install 'rlmetrics[wandb]'"
_WANDB_UPGRADE = f"pip install -U 'wandb>={WANDB_MIN_VERSION}'"
_WANDB_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_WANDB_RECORDS = ("history", "partial_history")


def wandb_runs(p: Path) -> list[Path]:
    """The ``run-*.wandb`` files of the W&B runs in ``p`` (a run folder, ``wandb/`` or its parent)."""
    for pattern in ("run-*.wandb", "*/run-*.wandb", "wandb/*/run-*.wandb"):
        found = {f.resolve() for f in p.glob(pattern) if f.is_file()}  # latest-run is a symlink
        if found:
            return sorted(found)
    return []


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


def _inspect(p: Path) -> tuple[list[dict[str, Any]], int, str]:
    """Run wandb's reader on ``p``: the history rows, its exit code, its stderr."""
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
        return rows, proc.returncode, errors.read().strip()


def read_wandb(src: Source, notes: Notes, *, strict: bool = False) -> Parsed:
    """The history of the W&B run file ``src`` (``run-*.wandb``)."""
    assert src.path is not None
    rows, code, err = _inspect(src.path)
    if code != 0:
        last = err.splitlines()[-1] if err else f"exit code {code}"
        if "No such command" in err or "No such option" in err:
            raise RunReadError(
                f"{src.name!r}: the installed wandb has no `wandb leet inspect`: {_WANDB_UPGRADE}"
            )
        raise RunReadError(f"{src.name!r}: wandb could not read the run file: {last.removeprefix('Error: ')}")
    if "incomplete" in err and not rows:
        raise RunReadError(
            f"{src.name!r}: the W&B run file ends in an incomplete record before any history record "
            "(cut off, or a run that stopped at its start)"
        )
    if "incomplete" in err:
        notes.warn(
            f"{src.name}: {len(rows)} steps read; the file ends in an incomplete record (a run still "
            "writing, or one that crashed)"
        )
    return Parsed(as_history(rows))

"""Which format a run is in, told by its content (a few names: event files, ``.wandb``, ``.json``).

A directory is searched in this order, the first match wins: ``metrics.jsonl``;
``trainer_state.json`` (else the one of the highest-numbered ``checkpoint-*``); TensorBoard
event files anywhere below it (outside ``wandb`` folders); a W&B run (``run-*.wandb`` in it, in
a run folder below it, or in its ``wandb/``); a single ``*.jsonl`` file; TensorBoard's scalar
CSV downloads (every ``*.csv`` in it one tag's ``Wall time,Step,Value``), read together. A file
is told by its name (``events.out.tfevents.*``, ``*.wandb``, ``*.json``), else by its content, as a stream
(stdin) always is: a first line that is a JSON object is a JSON-lines run (verl's records
``{"step", "data"}``, a one-line ``trainer_state.json``, else rlmetrics rows); else the first
512 KiB are read as a verl console log, then as a TRL printed log, then as a CSV export, then as
printed ``key: value`` summaries (and a pretty-printed ``trainer_state.json`` under another name
is read as one). TensorBoard's rule
holds for event files: a directory holding them is one run (all its event files, a restarted run
included), so a directory whose subdirectories hold several runs is an error that lists them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from rlmetrics.errors import RunReadError
from rlmetrics.readers import csvlogs, keyvalue, textlogs
from rlmetrics.readers._run import Source
from rlmetrics.readers.csvlogs import CSV_EXPORT
from rlmetrics.readers.jsonl import RLMETRICS_JSONL, VERL_JSONL, is_verl_record
from rlmetrics.readers.keyvalue import KEY_VALUE
from rlmetrics.readers.tensorboard import EVENTS_GLOB, TENSORBOARD
from rlmetrics.readers.textlogs import TRL_PRINTED, VERL_CONSOLE
from rlmetrics.readers.trainer_state import LOG_HISTORY, TRAINER_STATE, TRL_TRAINER_STATE
from rlmetrics.readers.wandb import WANDB_OFFLINE, wandb_runs

__all__ = ["EXPECTED", "locate"]

#: What a run may be, as error messages say it.
EXPECTED = (
    "a rlmetrics metrics.jsonl, a verl file-logger .jsonl, a TensorBoard log directory "
    "(events.out.tfevents.*), a trainer_state.json (TRL / transformers) or a W&B offline run "
    "(offline-run-*/run-*.wandb), or a text log: a verl console log (step:N - key:value lines) or "
    "the {'loss': ...} dicts (or progress table) a TRL / transformers trainer prints, or a CSV export "
    "(W&B, TensorBoard, MLflow: a step column and metric columns, or key,value,step rows), or printed "
    "key: value summaries of metrics (reward: 0.5 | kl: 0.01, W&B's run summary)"
)
_TEXT_HEAD = 512 * 1024  # how much of a file is read to tell a text log
_CHECKPOINT = re.compile(r"checkpoint-(\d+)$")


def locate(src: Source) -> tuple[str, Source]:
    """The format of ``src`` and what to read: the file found in a run folder, else ``src``.

    Raises
    ------
    RunReadError
        Nothing there, an empty file, no recognisable run, or several runs in a folder.
    """
    p = src.path
    if p is None:
        return _detect_content(src), src
    if not p.exists():
        raise RunReadError(f"{str(p)!r}: no such file or directory; expected {EXPECTED}")
    return _locate_dir(p) if p.is_dir() else _detect_file(p)


def _detect_file(p: Path) -> tuple[str, Source]:
    src = Source.of_path(p)
    if p.name.startswith("events.out.tfevents."):
        return TENSORBOARD, src
    if p.suffix == ".wandb":
        return WANDB_OFFLINE, src
    if p.stat().st_size == 0:
        raise RunReadError(f"{str(p)!r}: the file is empty; expected {EXPECTED}")
    if p.suffix == ".json":
        return TRL_TRAINER_STATE, src
    return _detect_content(src), src


def _detect_content(src: Source) -> str:
    if not src.head(1):
        raise RunReadError(f"{src.name!r}: the file is empty; expected {EXPECTED}")
    first = src.first_line()
    if first is None:
        raise RunReadError(f"{src.name!r}: the file holds only blank lines; expected {EXPECTED}")
    try:
        record = json.loads(first)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        kind = _detect_text(src.head(_TEXT_HEAD))
        if kind is not None:
            return kind
        if _torn_only_line(src, first):  # a run that crashed in its first write
            return RLMETRICS_JSONL
        raise RunReadError(
            f"{src.name!r}: the first line is not JSON ({err}) and no text log was recognised in the "
            f"file; expected {EXPECTED}"
        ) from None
    if not isinstance(record, dict):
        kind = _detect_text(src.head(_TEXT_HEAD))
        if kind is None:
            raise RunReadError(
                f"{src.name!r}: expected a JSON object per line; the first line is a {type(record).__name__}"
            )
        return kind
    if is_verl_record(record):
        return VERL_JSONL
    if isinstance(record.get(LOG_HISTORY), list):  # a trainer_state.json on one line
        return TRL_TRAINER_STATE
    return RLMETRICS_JSONL


def _torn_only_line(src: Source, first: bytes) -> bool:
    """Whether the only line of ``src`` is a JSON object cut off (no newline after it)."""
    if not first.lstrip().startswith(b"{") or first.endswith(b"\n"):
        return False
    return src.data().strip() == first.strip()  # no line before it either


def _detect_text(data: bytes) -> str | None:
    """The kind of the text log whose first :data:`_TEXT_HEAD` bytes are ``data``, or None."""
    head = data.decode("utf-8", errors="replace")
    if head.lstrip().startswith("{") and f'"{LOG_HISTORY}"' in head:  # a renamed trainer_state.json
        return TRL_TRAINER_STATE
    if textlogs.is_verl_console(head):
        return VERL_CONSOLE
    if textlogs.is_trl_printed(head):
        return TRL_PRINTED
    if csvlogs.is_csv_export(head):
        return CSV_EXPORT
    if keyvalue.is_key_value(head):  # the loosest, last: only what no other format reads
        return KEY_VALUE
    return None


def _locate_dir(p: Path) -> tuple[str, Source]:
    jsonl = p / "metrics.jsonl"
    if jsonl.is_file():
        return _detect_file(jsonl)
    state = p / TRAINER_STATE
    if state.is_file():
        return TRL_TRAINER_STATE, Source.of_path(state)
    checkpoints = sorted(
        (int(m.group(1)), c)
        for c in p.glob(f"checkpoint-*/{TRAINER_STATE}")
        if (m := _CHECKPOINT.match(c.parent.name))
    )
    if checkpoints:  # the last checkpoint's log_history holds every earlier one
        return TRL_TRAINER_STATE, Source.of_path(checkpoints[-1][1])
    event_dirs = sorted(
        {f.parent for f in p.rglob(EVENTS_GLOB) if f.is_file() and "wandb" not in f.relative_to(p).parts}
    )
    if len(event_dirs) == 1:
        return TENSORBOARD, Source.of_path(event_dirs[0])
    if event_dirs:
        raise RunReadError(_several(p, "TensorBoard runs (directories with event files)", event_dirs))
    runs = wandb_runs(p)
    if len(runs) == 1:
        return WANDB_OFFLINE, Source.of_path(runs[0])
    if runs:
        raise RunReadError(_several(p, "W&B runs", runs))
    files = sorted(f for f in p.glob("*.jsonl") if f.is_file())
    if len(files) == 1:
        return _detect_file(files[0])
    if files:
        raise RunReadError(_several(p, "jsonl files", files))
    if csvlogs.tensorboard_csv_files(p):  # TensorBoard's CSV downloads of a run, a file a tag
        return CSV_EXPORT, Source.of_path(p)
    raise RunReadError(f"{str(p)!r}: no run in this directory (no event files either); expected {EXPECTED}")


def _several(p: Path, what: str, found: list[Path]) -> str:
    listed = ", ".join(repr(str(f.relative_to(p) if f.is_relative_to(p) else f)) for f in found[:20])
    more = f" and {len(found) - 20} more" if len(found) > 20 else ""
    return f"{str(p)!r} holds {len(found)} {what}: {listed}{more}; pass one of them"

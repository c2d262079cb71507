"""The one entry point: :func:`read_run`, any run format, told by content, from a path or a stream."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from rlmetrics.errors import RunReadError
from rlmetrics.readers._run import Notes, Parsed, Run, Source
from rlmetrics.readers.csvlogs import CSV_EXPORT, read_csv_export
from rlmetrics.readers.detect import locate
from rlmetrics.readers.jsonl import RLMETRICS_JSONL, VERL_JSONL, read_rlmetrics_jsonl, read_verl_jsonl
from rlmetrics.readers.keyvalue import KEY_VALUE, read_key_value
from rlmetrics.readers.tensorboard import TENSORBOARD, read_tensorboard
from rlmetrics.readers.textlogs import TRL_PRINTED, VERL_CONSOLE, read_trl_printed, read_verl_console
from rlmetrics.readers.trainer_state import TRL_TRAINER_STATE, read_trainer_state
from rlmetrics.readers.wandb import WANDB_OFFLINE, read_wandb

__all__ = ["FORMATS", "STDIN", "read_run"]

#: The source :func:`read_run` reads from standard input.
STDIN = "-"

_Reader = Callable[..., Parsed]
_READERS: dict[str, _Reader] = {
    RLMETRICS_JSONL: read_rlmetrics_jsonl,
    VERL_JSONL: read_verl_jsonl,
    TENSORBOARD: read_tensorboard,
    TRL_TRAINER_STATE: read_trainer_state,
    WANDB_OFFLINE: read_wandb,
    VERL_CONSOLE: read_verl_console,
    TRL_PRINTED: read_trl_printed,
    CSV_EXPORT: read_csv_export,
    KEY_VALUE: read_key_value,
}
#: Every format :func:`read_run` reads (:attr:`Run.format`).
FORMATS = tuple(_READERS)


def read_run(
    source: str | os.PathLike[str] | IO[bytes] | IO[str], *, strict: bool = False, allow_empty: bool = False
) -> Run:
    """Read a run's metrics from any format rlmetrics knows, told by its content.

    Parameters
    ----------
    source : str, Path or file object
        A file or a run folder (see :mod:`rlmetrics.readers`), ``"-"`` for standard input, or an
        open file (bytes or text) holding a log, read to its end. A stream is told by content
        only: JSON lines, a ``trainer_state.json``, a console log, a CSV export or printed
        ``key: value`` summaries.
    strict : bool, keyword-only
        A damaged line of a JSON-lines run (not the last, which a crash may cut) is an error
        naming the line; by default it is skipped with a ``RunReadWarning`` naming it. The
        damaged records of a text log are always skipped with a warning (one cut off at its
        end is read up to the cut).
    allow_empty : bool, keyword-only
        Return a run without any numeric metric (empty :attr:`Run.series`) instead of raising.

    Returns
    -------
    Run
        The series, the format read, the steps, the warnings emitted.

    Raises
    ------
    RunReadError
        Nothing there, an empty source, no recognisable run or several runs in a folder, a
        damaged file, or no numeric metric (unless ``allow_empty``). A validation rollout dump is a
        :class:`~rlmetrics.errors.ValidationDumpError` (use ``rlmetrics validate``).
    ImportError
        A TensorBoard or W&B run and the package to read it is not installed.
    TypeError
        ``source`` is of another type.

    Examples
    --------
    >>> import io
    >>> log = b"(TaskRunner pid=7) step:1 - actor/entropy:0.9\\nstep:2 - actor/entropy:nan\\n"
    >>> run = read_run(io.BytesIO(log))
    >>> run.format, run.n_steps, run.series["actor/entropy"][1].tolist()
    ('verl-console', 2, [0.9, nan])
    """
    kind, target = locate(_source(source))
    notes = Notes()
    parsed = _READERS[kind](target, notes, strict=strict)
    if not parsed.series and not allow_empty:
        raise RunReadError(f"{target.name!r} ({kind}): no numeric metric in the run")
    return Run(parsed.series, kind, target.path, parsed.times, dict(parsed.config), tuple(notes.messages))


def _source(source: Any) -> Source:
    if isinstance(source, str) and source == STDIN:
        return _stream(sys.stdin.buffer, "<stdin>")
    if isinstance(source, str | os.PathLike):
        return Source.of_path(Path(source))
    if callable(getattr(source, "read", None)):
        name = getattr(source, "name", None)
        return _stream(source, name if isinstance(name, str) else "<stream>")
    raise TypeError(f"source must be a path, '-' (stdin) or an open file; got {type(source).__name__}")


def _stream(stream: Any, name: str) -> Source:
    data = stream.read()
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not isinstance(data, bytes | bytearray):
        raise TypeError(f"source: the stream {name!r} must give bytes or text; it gave {type(data).__name__}")
    return Source(name, None, bytes(data))

"""Runs read for a diagnosis, as one :data:`~rlmetrics.health.findings.History`.

:func:`load_history` is :func:`rlmetrics.readers.read_run` with ``strict=True`` (a damaged line
of a JSON-lines run is an error naming it), returning the history and the format read. Every
format, the detection by content and the messages are those of :mod:`rlmetrics.readers`:

========================= ======================================================================
source kind               what is read
========================= ======================================================================
``"rlmetrics-jsonl"``     ``metrics.jsonl`` of :class:`rlmetrics.Tracker` (flat rows with ``step``)
``"verl-jsonl"``          verl's ``file`` logger: one ``{"step": s, "data": {...}}`` per line
``"tensorboard"``         the ``events.out.tfevents.*`` files of one log directory
``"trl-trainer-state"``   ``trainer_state.json`` of TRL / transformers (its ``log_history``)
``"wandb-offline"``       a W&B offline run (``offline-run-*/run-*.wandb``)
``"verl-console"``        a verl console log as printed or pasted (see :mod:`rlmetrics.readers.textlogs`)
``"trl-printed"``         a TRL / transformers console log: printed dicts or a notebook table
``"csv-export"``          a metric history exported as CSV (W&B, TensorBoard, MLflow)
``"key-value"``           printed ``key: value`` summaries of metrics (:mod:`rlmetrics.readers.keyvalue`)
========================= ======================================================================

Every failure to read is a :class:`RunReadError` (a ``ValueError``) naming the path and what was
expected. A cut-off last line (a run still writing, or a crash) is skipped with a warning, and so
are the damaged records of a text log (one warning per file, with their count and lines).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

import numpy as np

from rlmetrics.errors import RunReadError
from rlmetrics.readers import (
    CSV_EXPORT,
    FORMATS,
    KEY_VALUE,
    RLMETRICS_JSONL,
    TENSORBOARD,
    TRL_PRINTED,
    TRL_TRAINER_STATE,
    VERL_CONSOLE,
    VERL_JSONL,
    WANDB_OFFLINE,
    read_run,
)
from rlmetrics.readers.wandb import WANDB_MIN_VERSION

__all__ = [
    "CSV_EXPORT",
    "KEY_VALUE",
    "RLMETRICS_JSONL",
    "SOURCES",
    "TENSORBOARD",
    "TRL_PRINTED",
    "TRL_TRAINER_STATE",
    "VERL_CONSOLE",
    "VERL_JSONL",
    "WANDB_MIN_VERSION",
    "WANDB_OFFLINE",
    "RunReadError",
    "load_history",
]

#: Every source kind :func:`load_history` returns (:data:`rlmetrics.readers.FORMATS`).
SOURCES = FORMATS


def load_history(
    path: str | os.PathLike[str] | IO[bytes],
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], str]:
    """Read a run's metrics from any of the formats above.

    Parameters
    ----------
    path : str, Path or binary file
        A file (``metrics.jsonl``, a verl ``.jsonl``, an event file, ``trainer_state.json``, a
        ``.wandb`` file, a console log, a CSV export) or a directory holding one run (a rlmetrics
        run folder, a TensorBoard log directory, a TRL output or checkpoint directory, a W&B
        ``offline-run-*`` or ``wandb/`` folder with one run); or an open binary file (a log piped
        in), read to its end and told by content.

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
    if isinstance(path, str | os.PathLike):
        path = Path(path)  # "-" is a file of that name here, not stdin
    elif not callable(getattr(path, "read", None)):
        raise TypeError(
            f"path must be a str or os.PathLike; got {type(path).__name__} (or pass an open file)"
        )
    run = read_run(path, strict=True)
    return run.series, run.format

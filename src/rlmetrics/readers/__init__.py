"""Runs read back from the files trainers and trackers write: one reader, every format.

>>> import io
>>> from rlmetrics.readers import read_run
>>> run = read_run(io.BytesIO(b"{'loss': 0.5, 'reward': 0.1}\\n{'loss': 0.4, 'reward': 0.3}\\n"))
>>> run.format, run.n_steps, run.series["reward"][0].tolist()
('trl-printed', 2, [1, 2])

:func:`read_run` takes a file, a run folder, ``"-"`` (stdin) or an open file, tells the format
by content (:mod:`~rlmetrics.readers.detect`) and returns a :class:`Run`: the per-key series
(the *history* every consumer reads), the format read, its steps and the warnings of the read.

========================= ======================================================================
format                    what is read (module)
========================= ======================================================================
``"rlmetrics-jsonl"``     ``metrics.jsonl`` of :class:`rlmetrics.Tracker` (flat rows with ``step``),
                          its ``timestamp`` per step and the ``config.json`` beside it (``jsonl``)
``"verl-jsonl"``          verl's ``file`` logger: one ``{"step": s, "data": {...}}`` per line;
                          its ``orjson`` writes NaN and +/-inf as ``null``, read back as NaN (``jsonl``)
``"tensorboard"``         the ``events.out.tfevents.*`` files of one log directory (verl's and
                          TRL's ``tensorboard`` loggers), every scalar, no per-tag cap (``tensorboard``)
``"trl-trainer-state"``   ``trainer_state.json`` of TRL / transformers, its ``log_history``
                          (``trainer_state``)
``"wandb-offline"``       a W&B offline run (``offline-run-*/run-*.wandb``): its history records,
                          as wandb's own reader prints them (wandb >= 0.31) (``wandb``)
``"verl-console"``        a verl console log as printed or pasted: ``step:N - key:value`` records,
                          colour codes, Ray prefixes, other lines and hard wraps allowed (``textlogs``)
``"trl-printed"``         a TRL / transformers console log: the ``{'loss': ..., ...}`` dicts the
                          trainer prints, or a notebook progress table (``textlogs``)
``"csv-export"``          a metric history exported as CSV by W&B, TensorBoard or MLflow; a folder
                          of TensorBoard's downloads, a file per tag, read as one run (``csvlogs``)
``"key-value"``           printed ``key: value`` summaries of metrics (``reward: 0.53 | kl: 0.01``,
                          ``Step 12`` blocks, transformers' ``***** train metrics *****``, W&B's
                          run summary), a record a step when steps are marked (``keyvalue``)
========================= ======================================================================

The sample tables a tracker logged (``samples.jsonl``, :meth:`Tracker.log_samples
<rlmetrics.tracking.Tracker.log_samples>`) are read by :func:`~rlmetrics.readers.samples.read_samples`,
one table per step.

Rollout dumps (validation generations, one line per sample) are read by
:mod:`~rlmetrics.readers.dumps`, column by column with bounded memory.

A damaged line costs that line: a cut-off last line of a JSON-lines run (one that opens an
object it does not close, a line break after it or not), an unreadable line (unless
``strict=True``), the damaged records of a text log or a CSV export are skipped with a
:class:`~rlmetrics.errors.RunReadWarning` naming the lines; a text log's record cut off at its
end (a paste, a capture that stops inside it) is read up to the cut, with a warning.
Every failure to read is a
:class:`~rlmetrics.errors.RunReadError` (a ``ValueError``) naming the source and what was expected.

This package sits low in the stack: it imports :mod:`rlmetrics.keys` and
:mod:`rlmetrics.errors` only (TensorBoard, wandb and pyarrow when a run needs them), so that
:mod:`rlmetrics.tracking`, :mod:`rlmetrics.health`, :mod:`rlmetrics.report` and the CLI all read
runs through it.
"""

from __future__ import annotations

from rlmetrics.errors import RunReadError, RunReadWarning, ValidationDumpError
from rlmetrics.readers._history import History, as_history, last_per_step
from rlmetrics.readers._read import FORMATS, STDIN, read_run
from rlmetrics.readers._run import Run
from rlmetrics.readers.csvlogs import CSV_EXPORT
from rlmetrics.readers.jsonl import RLMETRICS_JSONL, VERL_JSONL, read_jsonl
from rlmetrics.readers.keyvalue import KEY_VALUE
from rlmetrics.readers.samples import SAMPLES_FILE, read_samples, samples_beside
from rlmetrics.readers.tensorboard import TENSORBOARD
from rlmetrics.readers.textlogs import TRL_PRINTED, VERL_CONSOLE
from rlmetrics.readers.trainer_state import TRL_TRAINER_STATE
from rlmetrics.readers.wandb import WANDB_OFFLINE

__all__ = [
    "CSV_EXPORT",
    "FORMATS",
    "KEY_VALUE",
    "RLMETRICS_JSONL",
    "SAMPLES_FILE",
    "STDIN",
    "TENSORBOARD",
    "TRL_PRINTED",
    "TRL_TRAINER_STATE",
    "VERL_CONSOLE",
    "VERL_JSONL",
    "WANDB_OFFLINE",
    "History",
    "Run",
    "RunReadError",
    "RunReadWarning",
    "ValidationDumpError",
    "as_history",
    "last_per_step",
    "read_jsonl",
    "read_run",
    "read_samples",
    "samples_beside",
]

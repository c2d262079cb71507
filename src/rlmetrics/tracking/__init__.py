"""Experiment tracking: one ``Tracker`` fanning metrics out to jsonl, console, TensorBoard, W&B, MLflow.

The role verl's ``Tracking`` plays, with these guarantees:

* values are converted once, before any backend sees them: Python/numpy numbers, bools, and
  one-element numpy arrays or torch tensors (all tensors of a step reach the host in one
  transfer) become floats; anything else is a ``TypeError`` naming the key;
* keys are checked once, in :meth:`Tracker.log`: numpy strings become ``str``; a key that no
  backend can store (a lone surrogate: not UTF-8) or a value that no float holds (an int
  beyond 1.8e308) is dropped from that step with a warning naming key and step;
* a record is the unit of failure, never the backend: a backend that raises while logging
  (disk full, network down) loses that one record, with a warning naming backend
  and step (the 1st, 2nd, 4th, 8th ... loss of a backend are warned, :attr:`Tracker.lost`
  counts them all), and keeps logging; the other backends are not affected;
* each backend's own limits are handled by that backend with a fixed mapping: MLflow names
  (:func:`mlflow_key`: a category token's ``%`` -> ``:``, read back by
  :func:`rlmetrics.keys.key_from_mlflow_name`; ``@`` -> ``_at_``, characters MLflow refuses
  -> ``_``, empty, ``.`` and ``..`` path segments -> ``_``, names over 250 characters cut to
  241 plus ``-`` and 8 hex digits of the key's SHA-256; a key whose name another key took gets that suffix too
  (hashed again, salted, if that is taken as well), with a warning;
  param values over 6000 characters cut, with a warning); TensorBoard, MLflow, W&B and
  trackio store steps as int64, so a step above ``2**63 - 1`` is a record lost for them
  (jsonl keeps it); a key MLflow still refuses is dropped alone, with a warning;
* NaN and +/-inf follow one policy for every backend (``nonfinite="keep" | "drop" | "error"``);
* the configuration is logged once where the backend supports it; config keys that collide
  once flattened (``{"a": {"b": 1}}`` beside ``"a.b"``) are a ``ValueError``;
* run identity: ``project`` and ``experiment`` are plain names (no path separators, ``.``,
  ``..`` or NUL), so the run directory ``log_dir/project/experiment`` always lies under
  ``log_dir``; an existing run directory is never written into unless ``resume=True``: by
  default the run takes the first free name ``experiment-2``, ``experiment-3`` ... (claimed
  atomically, so concurrent processes get different names) and says so with a
  warning (:attr:`Tracker.renamed_from`); ``resume=True`` continues the run
  (:attr:`Tracker.start_step` is the step after its last logged one);
* a missing optional package is an ``ImportError`` with the ``pip install`` line; a run
  directory that cannot be created or written is an ``OSError`` naming it, at construction;
* an optional health monitor (``monitor=``, e.g. :class:`rlmetrics.health.monitor.HealthMonitor`)
  sees every step; each new finding is one warning and one ``health/<kind>`` record
  (1.0 warning, 2.0 error) logged with that step; a monitor that raises is switched off with a
  warning and logging goes on.

Each backend is a class configured by its own constructor (:class:`JsonlBackend`,
:class:`ConsoleBackend`, :class:`TensorBoardBackend`, :class:`WandbBackend`,
:class:`MlflowBackend`, :class:`TrackioBackend`) and started by the tracker on the run it claimed
(the :class:`Backend` protocol); ``Tracker(backends=["jsonl", WandbBackend(mode="offline")])``
mixes names and objects, and :func:`register_backend` adds names.

The ``jsonl`` backend (the default, no dependency) writes one flat JSON object per line,
``{"step": 3, "timestamp": 1764441600.0, "critic/score/mean": 0.5, ...}``, each line in one
``write`` to a file opened with ``O_APPEND`` (optionally fsynced), so a process killed at any
point loses at most the line being written, and two processes appending to one run (both
``resume=True``) never interleave their lines. :func:`read_jsonl` skips a cut-off line with a
warning, and of a key logged twice at one step keeps the value logged last, with a warning.
NaN and infinities are written as the ``NaN``/``Infinity``/``-Infinity`` tokens that Python's
``json`` reads back.

:meth:`Tracker.log_samples` writes a step's :class:`SampleTable` (from
:func:`~rlmetrics.training.samples.select_samples`) to every backend in its own form:
``samples.jsonl`` beside ``metrics.jsonl`` (read back by
:func:`~rlmetrics.readers.samples.read_samples`), a ``wandb.Table``, a TensorBoard text table,
an MLflow table artifact ``samples/step_<step>.json``, a ``trackio.Table``, a console line. One
backend failing loses those samples alone, as with a record.

The warnings of a tracker are :class:`~rlmetrics.errors.TrackingWarning`, a finding of its health
monitor a :class:`~rlmetrics.errors.HealthWarning`, and those of :func:`read_jsonl`
:class:`~rlmetrics.errors.RunReadWarning` (all ``RuntimeWarning``).
"""

from __future__ import annotations

from rlmetrics.tracking._backend import (
    MAX_STEP_INT64,
    Backend,
    RunInfo,
    TrackingBackend,
    backend_names,
    register_backend,
)
from rlmetrics.tracking.console import DEFAULT_CONSOLE_KEYS, ConsoleBackend
from rlmetrics.tracking.jsonl import JsonlBackend, read_jsonl
from rlmetrics.tracking.mlflow import MlflowBackend, mlflow_key
from rlmetrics.tracking.tensorboard import TensorBoardBackend
from rlmetrics.tracking.tracker import BACKENDS, Tracker, check_backends
from rlmetrics.tracking.trackio import TrackioBackend
from rlmetrics.tracking.wandb import WandbBackend
from rlmetrics.training.samples import SampleTable

__all__ = [
    "BACKENDS",
    "DEFAULT_CONSOLE_KEYS",
    "MAX_STEP_INT64",
    "Backend",
    "ConsoleBackend",
    "JsonlBackend",
    "MlflowBackend",
    "RunInfo",
    "SampleTable",
    "TensorBoardBackend",
    "Tracker",
    "TrackingBackend",
    "TrackioBackend",
    "WandbBackend",
    "backend_names",
    "check_backends",
    "mlflow_key",
    "read_jsonl",
    "register_backend",
]

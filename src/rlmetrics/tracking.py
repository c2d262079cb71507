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
  (:func:`mlflow_key`: ``@`` -> ``_at_``, characters MLflow refuses -> ``_``, empty, ``.``
  and ``..`` path segments -> ``_``, names over 250 characters cut to 241 plus ``-`` and 8
  hex digits of the key's SHA-256; a key whose name another key took gets that suffix too;
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

The ``jsonl`` backend (the default, no dependency) writes one flat JSON object per line,
``{"step": 3, "timestamp": 1764441600.0, "critic/score/mean": 0.5, ...}``, each line in one
``write`` to a file opened with ``O_APPEND`` (optionally fsynced), so a process killed at any
point loses at most the line being written, and two processes appending to one run (both
``resume=True``) never interleave their lines. :func:`read_jsonl` skips a cut-off line with a
warning, and of a key logged twice at one step keeps the value logged last, with a warning.
NaN and infinities are written as the ``NaN``/``Infinity``/``-Infinity`` tokens that Python's
``json`` reads back.

The warnings of a tracker are :class:`~rlmetrics.errors.TrackingWarning`, a finding of its health
monitor a :class:`~rlmetrics.errors.HealthWarning`, and those of :func:`read_jsonl`
:class:`~rlmetrics.errors.RunReadWarning` (all ``RuntimeWarning``).
"""

from __future__ import annotations

import dataclasses
import errno
import fnmatch
import hashlib
import json
import math
import os
import posixpath
import re
import sys
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TextIO, runtime_checkable

import numpy as np

from rlmetrics import keys as K
from rlmetrics._core.array import is_torch_array
from rlmetrics._core.checks import check_int
from rlmetrics.errors import HealthWarning, RunReadWarning, TrackingWarning

__all__ = ["BACKENDS", "DEFAULT_CONSOLE_KEYS", "Tracker", "TrackingBackend", "check_backends", "read_jsonl"]

#: The built-in backend names.
BACKENDS = ("console", "jsonl", "mlflow", "tensorboard", "trackio", "wandb")

#: Keys (``fnmatch`` patterns) the console backend shows by default, in this order.
DEFAULT_CONSOLE_KEYS = (
    K.SCORE_MEAN,
    K.REWARDS_MEAN,
    K.ACTOR_PG_LOSS,
    K.ACTOR_ENTROPY,
    K.PPO_KL,
    K.ACTOR_GRAD_NORM,
    K.CRITIC_VF_LOSS,
    K.RESPONSE_LENGTH_MEAN,
    f"{K.VAL_CORE_PREFIX}/*",
    K.timing_s(K.STAGE_STEP),
    K.PERF_THROUGHPUT,
)

_NONFINITE = ("keep", "drop", "error")

#: The largest step TensorBoard, MLflow, W&B and trackio store (int64).
MAX_STEP_INT64 = 2**63 - 1

#: How ``read_jsonl`` treats a key logged twice at one step.
_REPEATED = ("last", "all")


@runtime_checkable
class TrackingBackend(Protocol):
    """What a backend object passed in ``Tracker(backends=[...])`` must provide."""

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Record one step's metrics (floats, already converted and checked).

        An exception loses this record for this backend only (one warning); the tracker goes on
        calling it. A backend may set ``max_step`` (an int): records of later steps are not
        passed to it, each a record lost with a warning.
        """

    def finish(self) -> None:
        """Flush and close."""


# ---------------------------------------------------------------------------------------------
# Value conversion
# ---------------------------------------------------------------------------------------------


def _key_problem(key: str) -> str | None:
    """Why no backend can store ``key`` (None: it can be stored)."""
    if key.isascii():
        return None
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"the key is not valid UTF-8 (a lone surrogate {key[err.start]!r} at position {err.start})"
    return None


def _convert(metrics: Mapping[str, Any]) -> tuple[dict[str, float], list[tuple[str, str]]]:
    """Every value as a float, and the ``(key, reason)`` of the keys dropped.

    Keys: ``str`` subclasses (``numpy.str_``) become ``str``; a key that is not valid UTF-8 is
    dropped. Values: torch tensors reach the host in one transfer; an int too large for a
    float64 is dropped. Wrong types are a ``TypeError`` naming the key.
    """
    if not isinstance(metrics, Mapping):
        raise TypeError(f"metrics must be a mapping of key to number; got {type(metrics).__name__}")
    out: dict[str, float] = {}
    dropped: list[tuple[str, str]] = []
    tensor_keys: list[str] = []
    tensors: list[Any] = []
    for key, value in metrics.items():
        if type(key) is not str:
            if not isinstance(key, str):
                raise TypeError(f"metric keys must be strings; got {type(key).__name__} {key!r}")
            key = str.__str__(key)  # numpy.str_ and other subclasses: the plain string
            if key in out:
                dropped.append((key, "the key is given twice (as str and as a str subclass)"))
                continue
        if not key.isascii():  # the common case skips the call
            problem = _key_problem(key)
            if problem is not None:
                dropped.append((key, problem))
                continue
        if key in K.TRACKING_FIELDS:
            raise ValueError(f"metrics[{key!r}]: {key!r} is reserved by the tracker; rename the metric")
        kind = type(value)
        if kind is float or kind is np.float64 or kind is np.float32:  # the common case
            out[key] = float(value)
            continue
        if is_torch_array(value):
            if value.numel() != 1:
                raise TypeError(
                    f"metrics[{key!r}] must be a number or a one-element tensor; got shape "
                    f"{tuple(value.shape)}"
                )
            if value.is_complex() or not (
                value.is_floating_point()
                or value.dtype.is_signed
                or str(value.dtype) in ("torch.bool", "torch.uint8")
            ):
                raise TypeError(
                    f"metrics[{key!r}] must be a real number; got a tensor of dtype {value.dtype}"
                )
            tensor_keys.append(key)
            tensors.append(value.detach().reshape(()))
            out[key] = math.nan  # placeholder, keeps the key order
            continue
        if isinstance(value, np.ndarray):
            if value.size != 1:
                raise TypeError(
                    f"metrics[{key!r}] must be a number or a one-element array; got shape {value.shape}"
                )
            value = value.reshape(()).item()
        if isinstance(value, bool | np.bool_):
            out[key] = float(value)
        elif isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, complex):
            try:
                out[key] = float(value)
            except OverflowError:  # a Python int beyond float64's range
                dropped.append(
                    (key, f"its value, an integer of {int(value).bit_length()} bits, is beyond a float64")
                )
        else:
            raise TypeError(
                f"metrics[{key!r}] must be a number (int, float, numpy scalar, one-element array or tensor); "
                f"got {type(value).__name__} {value!r:.60}"
            )
    if tensors:
        import torch

        host = torch.stack([t.to(torch.float64) for t in tensors]).cpu().tolist()
        for key, val in zip(tensor_keys, host):
            out[key] = float(val)
    return out, dropped


def _apply_nonfinite(metrics: dict[str, float], policy: str) -> dict[str, float]:
    bad = [k for k, v in metrics.items() if not math.isfinite(v)]
    if not bad or policy == "keep":
        return metrics
    if policy == "error":
        raise ValueError(
            f"metrics[{bad[0]!r}] is {metrics[bad[0]]}; non-finite values are not allowed "
            f"(nonfinite='error'); all non-finite keys: {bad}"
        )
    return {k: v for k, v in metrics.items() if k not in bad}


def _config_to_dict(config: Any) -> dict[str, Any]:
    """A plain dict from a dict, dataclass, OmegaConf config or argparse namespace."""
    if config is None:
        return {}
    if type(config).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf

        return dict(OmegaConf.to_container(config, resolve=True))  # type: ignore[arg-type]
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        return dataclasses.asdict(config)
    if isinstance(config, Mapping):
        return dict(config)
    if hasattr(config, "__dict__"):
        return dict(vars(config))
    raise TypeError(
        f"config must be a dict, dataclass, OmegaConf config or namespace; got {type(config).__name__}"
    )


def _flatten(config: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; two entries with one flat name are a ``ValueError``."""
    out: dict[str, Any] = {}
    origin: dict[str, tuple[Any, ...]] = {}

    def where(path: tuple[Any, ...]) -> str:
        return "config" + "".join(f"[{part!r}]" for part in path)

    def walk(mapping: Mapping[Any, Any], path: tuple[Any, ...]) -> None:
        for key, value in mapping.items():
            here = (*path, key)
            if isinstance(value, Mapping) and value:
                walk(value, here)
                continue
            name = ".".join(map(str, here))
            if name in out:
                raise ValueError(
                    f"config: {where(origin[name])} and {where(here)} both flatten to {name!r} "
                    "(MLflow's params are the flattened config); rename one"
                )
            out[name], origin[name] = value, here

    walk(config, ())
    return out


def _config_json(config: Mapping[str, Any]) -> str:
    try:
        return json.dumps(config, indent=2, sort_keys=True, default=str)
    except TypeError:  # keys of mixed types (int and str) cannot be sorted
        return json.dumps(config, indent=2, default=str)


def _write_atomic(path: Path, text: str) -> None:
    """Write ``path`` through a temporary file and a rename: a reader sees the old or the new text."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _unwritable(path: Path, err: OSError, what: str) -> OSError:
    """A clear error for a run directory that cannot be created or written."""
    reason = err.strerror or str(err)
    return type(err)(
        err.errno or errno.EACCES,
        f"cannot {what} ({reason}); pass a log_dir you can write to",
        str(path),
    )


def _name_problem(value: str) -> str | None:
    if value in (".", ".."):
        return "is '.' or '..'"
    seps = {"/", "\\", os.sep} | ({os.altsep} if os.altsep else set())
    if any(sep in value for sep in seps):
        return "holds a path separator"
    if "\0" in value:
        return "holds a NUL character"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid UTF-8 (a lone surrogate)"
    if size > 200:
        return f"is {size} bytes long (at most 200: a folder name, with room for a suffix)"
    return None


def _check_name(value: Any, arg: str) -> str:
    """``value`` as a plain folder name, or an error naming ``arg``."""
    if not isinstance(value, str) or not value:
        raise TypeError(f"{arg} must be a non-empty str; got {value!r}")
    value = str.__str__(value)
    problem = _name_problem(value)
    if problem is not None:
        raise ValueError(
            f"{arg} must be a plain name (it is a folder under log_dir: no path separators, "
            f"'.', '..' or NUL); got {value!r}, which {problem}"
        )
    return value


def _last_logged_step(path: Path, tail: int = 1 << 20) -> int | None:
    """The largest step among the last complete records of a metrics.jsonl (its last ``tail`` bytes)."""
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


# ---------------------------------------------------------------------------------------------
# Backends
# ---------------------------------------------------------------------------------------------


class _JsonlBackend:
    """``metrics.jsonl``: one JSON object per line, each line one ``write`` to an ``O_APPEND`` file."""

    name = "jsonl"
    max_step = None  # JSON holds any integer

    def __init__(self, run_dir: Path, config: Mapping[str, Any], *, fsync: bool = False) -> None:
        self.path = run_dir / "metrics.jsonl"
        self.fsync = fsync
        try:
            if config:
                _write_atomic(run_dir / "config.json", _config_json(config) + "\n")
            # Unbuffered and O_APPEND: each write() lands whole at the end of the file, whatever
            # another process appends at the same time.
            self._fh: Any = open(self.path, "ab", buffering=0)
        except OSError as err:
            raise _unwritable(self.path, err, "write the run's metrics.jsonl") from None
        # A previous run that crashed mid-line left no newline: start on a fresh line so the
        # fragment stays a line of its own (read_jsonl skips it). The newline goes out with
        # the first record, in its write.
        self._torn = False
        size = self.path.stat().st_size
        if size:
            with open(self.path, "rb") as fh:
                fh.seek(size - 1)
                self._torn = fh.read(1) != b"\n"
        try:  # optional speed-up (about 5x per line); json is used for lines holding NaN/inf
            import orjson

            self._orjson: Any = orjson
        except ImportError:
            self._orjson = None

    def _encode(self, record: dict[str, Any], metrics: dict[str, float]) -> bytes:
        if self._orjson is not None and all(map(math.isfinite, metrics.values())):
            try:
                return self._orjson.dumps(record) + b"\n"
            except TypeError:  # e.g. a step beyond 64 bits, which json writes
                pass
        return (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8")

    def log(self, metrics: dict[str, float], step: int) -> None:
        if self._fh is None:
            raise RuntimeError(f"{self.path} is closed")
        record = {K.TRACKING_STEP: step, K.TRACKING_TIMESTAMP: time.time(), **metrics}
        line = self._encode(record, metrics)
        if self._torn:  # the last write failed part-way (or a crash cut the last line)
            line = b"\n" + line
        self._torn = True
        view = memoryview(line)
        while view.nbytes:  # one write(); a regular file writes less only when full
            written = self._fh.write(view)
            if not written:
                raise OSError(errno.EIO, f"{self.path}: the write wrote nothing")
            view = view[written:]
        self._torn = False
        if self.fsync:
            os.fsync(self._fh.fileno())

    def finish(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class _ConsoleBackend:
    name = "console"

    def __init__(
        self, project: str, experiment: str, *, keys: Sequence[str] | None = None, file: TextIO | None = None
    ) -> None:
        from rich.console import Console

        self.patterns = tuple(DEFAULT_CONSOLE_KEYS if keys is None else keys)
        self.console = Console(file=file if file is not None else sys.stdout, highlight=False, soft_wrap=True)
        self.console.print(f"[bold]{project}[/bold] / {experiment}")

    def _select(self, metrics: Mapping[str, float]) -> list[str]:
        chosen: list[str] = []
        for pattern in self.patterns:
            for key in metrics:
                if key not in chosen and fnmatch.fnmatchcase(key, pattern):
                    chosen.append(key)
        return chosen or list(metrics)[:6]

    def log(self, metrics: dict[str, float], step: int) -> None:
        from rich.markup import escape

        shown = self._select(metrics)
        parts = [f"[dim]{escape(k)}[/dim] {_fmt(metrics[k])}" for k in shown]
        more = len(metrics) - len(shown)
        tail = f" [dim](+{more} more)[/dim]" if more else ""
        self.console.print(f"[bold]step {step}[/bold] | " + " | ".join(parts) + tail)

    def finish(self) -> None:
        self.console.file.flush()


def _fmt(value: float) -> str:
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


class _TensorBoardBackend:
    name = "tensorboard"
    max_step = MAX_STEP_INT64  # an event's step is an int64

    def __init__(self, run_dir: Path, config: Mapping[str, Any]) -> None:
        try:
            from tensorboard.compat.proto import event_pb2, summary_pb2
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError:
            raise ImportError(
                "the tensorboard backend needs tensorboard: pip install 'rlmetrics[tensorboard]'"
            ) from None
        self._event_pb2, self._summary_pb2 = event_pb2, summary_pb2
        self.log_dir = run_dir / "tensorboard"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._writer = EventFileWriter(str(self.log_dir))
        if config:
            self._add_text("config", "```\n" + _config_json(config) + "\n```", step=0)
            self._writer.flush()

    def _add_text(self, tag: str, text: str, step: int) -> None:
        from tensorboard.compat.proto import tensor_pb2, tensor_shape_pb2, types_pb2

        s = self._summary_pb2
        meta = s.SummaryMetadata(plugin_data=s.SummaryMetadata.PluginData(plugin_name="text"))
        tensor = tensor_pb2.TensorProto(
            dtype=types_pb2.DT_STRING,
            string_val=[text.encode("utf-8")],
            tensor_shape=tensor_shape_pb2.TensorShapeProto(
                dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1)]
            ),
        )
        summary = s.Summary(value=[s.Summary.Value(tag=tag, metadata=meta, tensor=tensor)])
        self._writer.add_event(self._event_pb2.Event(wall_time=time.time(), step=step, summary=summary))

    def log(self, metrics: dict[str, float], step: int) -> None:
        s = self._summary_pb2
        summary = s.Summary(value=[s.Summary.Value(tag=k, simple_value=v) for k, v in metrics.items()])
        self._writer.add_event(self._event_pb2.Event(wall_time=time.time(), step=step, summary=summary))
        self._writer.flush()

    def finish(self) -> None:
        self._writer.close()


class _WandbBackend:
    name = "wandb"
    max_step = MAX_STEP_INT64
    #: The run id, kept in the run directory so that ``resume=True`` continues the same W&B run.
    ID_FILE = "wandb-run-id"

    def __init__(
        self,
        project: str,
        experiment: str,
        run_dir: Path,
        config: Mapping[str, Any],
        *,
        mode: str | None = None,
        resume: bool = False,
        **kwargs: Any,
    ) -> None:
        try:
            import wandb
        except ImportError:
            raise ImportError("the wandb backend needs wandb: pip install 'rlmetrics[wandb]'") from None
        options: dict[str, Any] = {"project": project, "name": experiment, "dir": str(run_dir)}
        if config:
            options["config"] = dict(config)
        if mode is not None:
            options["mode"] = mode
        id_file = run_dir / self.ID_FILE
        if resume and "id" not in kwargs and id_file.is_file():
            options["id"] = id_file.read_text(encoding="utf-8").strip()
            options["resume"] = "allow"
        options.update(kwargs)
        self.run = wandb.init(**options)
        run_id = getattr(self.run, "id", None)
        if isinstance(run_id, str) and run_id:
            _write_atomic(id_file, run_id + "\n")

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def finish(self, exit_code: int = 0) -> None:
        self.run.finish(exit_code=exit_code)


_MLFLOW_BAD_CHARS = re.compile(r"[^\w\-. /:]")
_MLFLOW_MAX_KEY = 250  # MLflow's MAX_ENTITY_KEY_LENGTH (metric and param names)
_MLFLOW_MAX_PARAM = 6000  # MLflow's MAX_PARAM_VAL_LENGTH


def _hash8(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:8]


def _with_hash(name: str, key: str) -> str:
    """``name`` ending in ``-`` and 8 hex digits of ``key``'s SHA-256, within MLflow's 250 characters."""
    return name[: _MLFLOW_MAX_KEY - 9] + "-" + _hash8(key)


def mlflow_key(key: str) -> str:
    """An MLflow-legal metric/param name for ``key``; the same key always gives the same name.

    1. ``@`` -> ``_at_`` (as verl does); characters MLflow refuses (not a letter, digit, ``_``,
       ``-``, ``.``, space, ``/`` or ``:``) -> ``_``;
    2. MLflow names are paths: an empty, ``.`` or ``..`` segment (``a//b``, ``/a``, ``a/``,
       ``a/./b``) -> as many ``_`` (one for an empty one), and a leading ``..`` -> ``_.``;
    3. a name over 250 characters (MLflow's limit) keeps its first 241 and ends in ``-`` and
       the first 8 hex digits of the SHA-256 of the full key.

    Examples
    --------
    >>> mlflow_key("val-core/gsm8k/acc/mean@8")
    'val-core/gsm8k/acc/mean_at_8'
    >>> mlflow_key("a//b/"), mlflow_key("")
    ('a/_/b/_', '_')
    >>> name = mlflow_key("k" * 300)
    >>> len(name), name[:3], name[-9]
    (250, 'kkk', '-')
    """
    name = _MLFLOW_BAD_CHARS.sub("_", key.replace("@", "_at_"))
    if name == "" or name.startswith(("/", "..")) or posixpath.normpath(name) != name:
        parts = ("_" * max(1, len(part)) if part in ("", ".", "..") else part for part in name.split("/"))
        name = "/".join(parts)
        if name.startswith(".."):
            name = "_" + name[1:]
    if len(name) > _MLFLOW_MAX_KEY:
        name = _with_hash(name, key)
    return name


class _MlflowBackend:
    name = "mlflow"
    max_step = MAX_STEP_INT64  # a metric's step is an int64
    _BATCH = 1000  # MLflow's limit of metrics per log_batch call
    _PARAM_BATCH = 100

    def __init__(
        self,
        project: str,
        experiment: str,
        log_dir: Path,
        params: Mapping[str, Any],
        *,
        tracking_uri: str | None = None,
        resume: bool = False,
    ) -> None:
        try:
            from mlflow.entities import Metric as MlMetric
            from mlflow.entities import Param
            from mlflow.exceptions import MlflowException
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise ImportError("the mlflow backend needs mlflow: pip install 'rlmetrics[mlflow]'") from None
        self._Metric, self._MlflowException = MlMetric, MlflowException
        #: Warnings for the tracker to give (the constructor cannot return them).
        self.notes: list[str] = []
        self._names: dict[str, str] = {}  # key -> MLflow name
        self._owners: dict[str, str] = {}  # MLflow name -> key
        if tracking_uri is None:
            try:
                log_dir.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise _unwritable(log_dir, err, "create log_dir for MLflow's store") from None
            tracking_uri = f"sqlite:///{(log_dir / 'mlflow.db').resolve()}"
        self.tracking_uri = tracking_uri
        self.client = MlflowClient(tracking_uri=tracking_uri)
        exp = self.client.get_experiment_by_name(project)
        exp_id = exp.experiment_id if exp is not None else self.client.create_experiment(project)
        run = self._find_run(exp_id, experiment) if resume else None
        old: dict[str, str] = {}
        if run is None:
            self.run_id = self.client.create_run(exp_id, run_name=experiment).info.run_id
        else:
            self.run_id = run.info.run_id
            old = dict(run.data.params)
            self.client.update_run(self.run_id, status="RUNNING")
        items = []
        for key, value in params.items():
            name, text = self._name(str(key), self.notes), str(value)
            if len(text) > _MLFLOW_MAX_PARAM:
                self.notes.append(
                    f"param {key!r}: its value of {len(text)} characters is cut to MLflow's "
                    f"{_MLFLOW_MAX_PARAM}"
                )
                text = text[:_MLFLOW_MAX_PARAM]
            if name in old:
                if old[name] != text:
                    self.notes.append(
                        f"param {key!r} is {text[:60]!r} here but {old[name][:60]!r} in the resumed run; "
                        "MLflow keeps a run's first value"
                    )
                continue
            items.append(Param(name, text))
        for i in range(0, len(items), self._PARAM_BATCH):
            self.client.log_batch(self.run_id, params=items[i : i + self._PARAM_BATCH])

    def _find_run(self, exp_id: str, experiment: str) -> Any:
        """The latest run named ``experiment`` in the experiment, or None."""
        if "'" in experiment and '"' in experiment:
            return None  # not expressible in MLflow's filter syntax: a new run
        quote = '"' if "'" in experiment else "'"
        runs = self.client.search_runs(
            [exp_id],
            filter_string=f"attributes.run_name = {quote}{experiment}{quote}",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
        return runs[0] if runs else None

    def _name(self, key: str, notes: list[str]) -> str:
        """The MLflow name of ``key``: :func:`mlflow_key`, with a hash suffix if another key has that name."""
        name = self._names.get(key)
        if name is not None:
            return name
        name = mlflow_key(key)
        if len(key.replace("@", "_at_")) > _MLFLOW_MAX_KEY:
            notes.append(
                f"key {key[:60]!r}... is over MLflow's {_MLFLOW_MAX_KEY} characters: logged as {name!r}"
            )
        owner = self._owners.get(name)
        if owner is not None and owner != key:
            taken = name
            name = _with_hash(name, key)
            notes.append(
                f"key {key!r} maps to the MLflow name {taken!r} of key {owner!r}: logged as {name!r}"
            )
        self._owners.setdefault(name, key)
        self._names[key] = name
        return name

    def log(self, metrics: dict[str, float], step: int) -> list[str]:
        notes: list[str] = []
        ts = int(time.time() * 1000)
        items = [self._Metric(self._name(k, notes), v, ts, step) for k, v in metrics.items()]
        for i in range(0, len(items), self._BATCH):
            chunk = items[i : i + self._BATCH]
            try:
                self.client.log_batch(self.run_id, metrics=chunk)
            except self._MlflowException as err:
                if getattr(err, "error_code", None) != "INVALID_PARAMETER_VALUE":
                    raise
                notes.extend(self._log_one_by_one(chunk))
        return notes

    def _log_one_by_one(self, chunk: list[Any]) -> list[str]:
        """MLflow refused a batch: log its metrics one at a time, dropping only those it refuses."""
        notes = []
        keys = {name: key for key, name in self._names.items()}
        for item in chunk:
            try:
                self.client.log_batch(self.run_id, metrics=[item])
            except self._MlflowException as err:
                notes.append(
                    f"key {keys.get(item.key, item.key)!r} dropped: MLflow refuses it ({err.message})"
                )
        return notes

    def finish(self, exit_code: int = 0) -> None:
        self.client.set_terminated(self.run_id, status="FINISHED" if exit_code == 0 else "FAILED")


class _TrackioBackend:
    """A trackio run: its local SQLite store (``$TRACKIO_DIR``, default ``$HF_HOME/trackio``).

    trackio keeps one current run per process: ``trackio.init`` finishes the one before, so this
    backend and TRL's ``report_to="trackio"`` should not run side by side.
    """

    name = "trackio"
    max_step = MAX_STEP_INT64  # SQLite's INTEGER

    def __init__(
        self, project: str, experiment: str, config: Mapping[str, Any], *, resume: bool = False, **kwargs: Any
    ) -> None:
        try:
            import trackio
        except ImportError:
            raise ImportError("the trackio backend needs trackio: pip install 'rlmetrics[trackio]'") from None
        options: dict[str, Any] = {"project": project, "name": experiment}
        if config:
            options["config"] = dict(config)
        if resume:
            options["resume"] = "allow"
        options.update(kwargs)
        self._trackio = trackio
        self.run = trackio.init(**options)

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def finish(self) -> None:
        self.run.finish()
        # no longer trackio's current run (else its exit hook finishes it a second time)
        current = getattr(getattr(self._trackio, "context_vars", None), "current_run", None)
        if current is not None and current.get() is self.run:
            current.set(None)


# ---------------------------------------------------------------------------------------------
# Tracker
# ---------------------------------------------------------------------------------------------


class Tracker:
    """Log metric dictionaries to several tracking backends at once.

    Parameters
    ----------
    project, experiment : str
        Project (W&B project, MLflow experiment) and run name: plain names (folders under
        ``log_dir``: no path separators, ``.``, ``..``, NUL, at most 200 bytes), else a
        ``ValueError``. If ``log_dir/project/experiment`` exists and ``resume`` is False, the
        run takes the first free name ``experiment-2``, ``experiment-3``, ... (a
        warning says which; :attr:`experiment` is the name used,
        :attr:`renamed_from` the one asked for).
    backends : str or sequence of (str or backend object)
        Names from :data:`BACKENDS` (``"jsonl"``, ``"console"``, ``"tensorboard"``, ``"wandb"``,
        ``"mlflow"``, ``"trackio"``; a comma-separated string works too) and/or objects with
        ``log(metrics, step)`` and ``finish()``.
    config : dict, dataclass, OmegaConf config or namespace, optional
        Logged once: ``config.json`` (jsonl), a text summary (TensorBoard), the run config
        (W&B), flattened params (MLflow).
    log_dir : str or Path, keyword-only
        Root of the local files; a run's files go to ``log_dir/project/experiment/``
        (``metrics.jsonl``, ``config.json``, ``tensorboard/``, ``wandb/``) and MLflow's default
        store is ``log_dir/mlflow.db``.
    resume : bool, keyword-only
        Continue the run in ``log_dir/project/experiment`` (created if missing): jsonl appends
        to its ``metrics.jsonl`` (and replaces ``config.json``, with a warning if the config
        changed), TensorBoard adds an event file, MLflow and trackio continue the latest run of
        that name, W&B the run whose id the run directory keeps. :attr:`start_step` is the step
        after the last one logged; logging an earlier step again warns once (readers keep the
        value logged last). Two processes may resume one run at the same time: each jsonl
        record is one ``O_APPEND`` write, so their lines never mix.
    fsync : bool, keyword-only
        ``os.fsync`` the jsonl file after every step (survives power loss, slower; a killed
        process loses at most the line being written either way).
    nonfinite : {"keep", "drop", "error"}, keyword-only
        NaN/inf values: passed on to every backend (jsonl writes ``NaN``/``Infinity``, MLflow
        stores inf as +/-1.8e308), dropped from the step everywhere, or a ``ValueError``.
    console_keys : sequence of str, optional, keyword-only
        ``fnmatch`` patterns of the keys the console shows (default
        :data:`DEFAULT_CONSOLE_KEYS`; the first six keys when none matches).
    console_file : file, optional, keyword-only
        Where the console backend writes (default ``sys.stdout``).
    wandb_mode : str, optional, keyword-only
        ``"offline"`` (no network), ``"online"`` or ``"disabled"``; default: W&B's own
        (``WANDB_MODE``).
    wandb_kwargs : dict, optional, keyword-only
        Extra ``wandb.init`` arguments (``entity``, ``tags``, ...).
    mlflow_tracking_uri : str, optional, keyword-only
        Default: a local sqlite store in ``log_dir``.
    trackio_kwargs : dict, optional, keyword-only
        Extra ``trackio.init`` arguments (``space_id``, ``group``, ``auto_log_gpu``, ...). trackio
        writes to its own local SQLite store (``$TRACKIO_DIR``, default ``$HF_HOME/trackio``),
        not to ``log_dir``; the project and run are ``project`` and ``experiment``.
    monitor : object, optional, keyword-only
        A health monitor with ``update(values, step) -> list of findings`` (each finding with
        ``kind``, ``severity``, ``step`` and ``advice``), e.g.
        :class:`rlmetrics.health.monitor.HealthMonitor`. It receives every step's converted
        values (before the ``nonfinite`` policy drops any, so a NaN loss is seen). Each finding
        it returns is reported once: a warning ``"rlmetrics health: <kind>
        (<severity>) from step N: <advice>"`` and a record ``health/<kind>`` logged to every
        backend with the current step, valued :data:`rlmetrics.keys.HEALTH_SEVERITY_VALUE`
        (1.0 warning, 2.0 error). If the monitor also has ``check() -> list of findings``,
        :meth:`finish` runs it once more, so that the steps after its last due diagnosis are
        checked too; those findings are logged with the last step. A monitor that raises gets
        one warning and is switched off (``monitor`` becomes ``None``); the metrics are logged
        all the same.

    Attributes
    ----------
    experiment : str
        The run name used (``experiment``, or its suffixed form when that run existed).
    renamed_from : str or None
        The name asked for, when the run was given a new one; else None.
    run_dir : Path
        ``log_dir/project/experiment``.
    start_step : int
        0, or with ``resume=True`` the step after the last one the run logged.
    lost : dict[str, int]
        Records each backend lost (it raised, or the step was beyond its range).
    failed : dict[str, BaseException]
        The last error of each backend that raised.

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with Tracker("demo", "run1", config={"lr": 1e-6}, log_dir=d) as tracker:
    ...         tracker.log({"critic/score/mean": np.float32(0.5), "response_length/mean": 120}, step=1)
    ...     rows = read_jsonl(tracker.jsonl_path)
    >>> rows[0]["step"], rows[0]["critic/score/mean"], rows[0]["response_length/mean"]
    (1, 0.5, 120.0)
    """

    def __init__(
        self,
        project: str,
        experiment: str,
        backends: str | Sequence[str | TrackingBackend] = ("jsonl",),
        config: Any = None,
        *,
        log_dir: str | os.PathLike[str] = "rlmetrics_logs",
        resume: bool = False,
        fsync: bool = False,
        nonfinite: str = "keep",
        console_keys: Sequence[str] | None = None,
        console_file: TextIO | None = None,
        wandb_mode: str | None = None,
        wandb_kwargs: Mapping[str, Any] | None = None,
        mlflow_tracking_uri: str | None = None,
        monitor: Any = None,
        trackio_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        project = _check_name(project, "project")
        experiment = _check_name(experiment, "experiment")
        if not isinstance(resume, bool):
            raise TypeError(f"resume must be a bool; got {type(resume).__name__} {resume!r}")
        if nonfinite not in _NONFINITE:
            raise ValueError(f"nonfinite must be one of {_NONFINITE}; got {nonfinite!r}")
        if monitor is not None and not callable(getattr(monitor, "update", None)):
            raise TypeError(
                f"monitor must have an update(values, step) method (e.g. a HealthMonitor); "
                f"got {type(monitor).__name__}"
            )
        self.monitor = monitor
        self._last_step: int | None = None
        self.project, self.nonfinite, self.resume = project, nonfinite, resume
        self.config = _config_to_dict(config)
        self._params = _flatten(self.config)  # colliding names fail here, before anything is written
        specs = _parse_backends(backends)
        self.log_dir = Path(log_dir)
        self.failed: dict[str, BaseException] = {}
        self.lost: dict[str, int] = {}
        self._lost_steps: dict[str, list[int]] = {}
        self.backends: dict[str, Any] = {}
        self._finished = False
        self._created: list[Path] = []
        self.experiment, self.run_dir = self._claim(experiment)
        self.renamed_from: str | None = experiment if self.experiment != experiment else None
        self._resumed_last = _last_logged_step(self.run_dir / "metrics.jsonl") if resume else None
        self.start_step = 0 if self._resumed_last is None else self._resumed_last + 1
        self._warned_overlap = False
        if self.renamed_from is not None:
            warnings.warn(
                f"run directory {str(self.log_dir / project / experiment)!r} exists: this run is "
                f"{self.experiment!r} ({str(self.run_dir)!r}); pass resume=True to continue the old one",
                TrackingWarning,
                stacklevel=2,
            )
        if resume:
            self._check_resumed_config()
        try:
            for spec in specs:
                name, backend = self._make(
                    spec,
                    fsync=fsync,
                    console_keys=console_keys,
                    console_file=console_file,
                    wandb_mode=wandb_mode,
                    wandb_kwargs=wandb_kwargs,
                    mlflow_tracking_uri=mlflow_tracking_uri,
                    trackio_kwargs=trackio_kwargs,
                )
                self.backends[name] = backend
                for note in getattr(backend, "notes", None) or ():
                    warnings.warn(f"tracking backend {name!r}: {note}", TrackingWarning, stacklevel=2)
        except BaseException:
            self._finish_all(exit_code=1)
            self._release()
            raise

    def _claim(self, experiment: str) -> tuple[str, Path]:
        """The run's name and directory: created here (``os.mkdir`` is atomic: one process wins a name)."""
        project_dir = self.log_dir / self.project
        missing = [d for d in (project_dir, self.log_dir, *self.log_dir.parents) if not d.exists()]
        try:
            project_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise _unwritable(project_dir, err, "create the project folder under log_dir") from None
        self._created = missing  # deepest first: removed again if the construction fails
        name, n = experiment, 1
        while True:
            path = project_dir / name
            try:
                os.mkdir(path)
            except FileExistsError:
                if self.resume and path.is_dir():
                    return name, path
                n += 1
                name = f"{experiment}-{n}"
                continue
            except OSError as err:
                self._release()
                raise _unwritable(path, err, "create the run directory") from None
            self._created.insert(0, path)
            return name, path

    def _release(self) -> None:
        """After a failed construction: remove the run directory it created (nothing was logged
        yet) and the folders above it that it created, if empty."""
        import shutil

        for i, path in enumerate(self._created):
            try:
                if i == 0 and path == getattr(self, "run_dir", None):
                    shutil.rmtree(path)
                else:
                    path.rmdir()
            except OSError:  # not empty, or already gone
                pass
        self._created = []

    def _check_resumed_config(self) -> None:
        path = self.run_dir / "config.json"
        if not self.config or not path.is_file():
            return
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        new = json.loads(_config_json(self.config))
        if old != new:
            changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
            warnings.warn(
                f"resume: the config differs from {str(path)!r} (top-level keys {changed[:10]}); "
                "config.json now holds the new config",
                TrackingWarning,
                stacklevel=3,
            )

    def __repr__(self) -> str:
        return f"Tracker({self.project!r}, {self.experiment!r}, backends={list(self.backends)})"

    def _make(self, spec: str | TrackingBackend, **opts: Any) -> tuple[str, Any]:
        if not isinstance(spec, str):
            name = getattr(spec, "name", None) or type(spec).__name__
            while name in self.backends:
                name += "_"
            return name, spec
        if spec in self.backends:
            raise ValueError(f"backends lists {spec!r} twice")
        if spec == "jsonl":
            return spec, _JsonlBackend(self.run_dir, self.config, fsync=opts["fsync"])
        if spec == "console":
            return spec, _ConsoleBackend(
                self.project, self.experiment, keys=opts["console_keys"], file=opts["console_file"]
            )
        if spec == "tensorboard":
            return spec, _TensorBoardBackend(self.run_dir, self.config)
        if spec == "wandb":
            return spec, _WandbBackend(
                self.project,
                self.experiment,
                self.run_dir,
                self.config,
                mode=opts["wandb_mode"],
                resume=self.resume,
                **dict(opts["wandb_kwargs"] or {}),
            )
        if spec == "trackio":
            return spec, _TrackioBackend(
                self.project,
                self.experiment,
                self.config,
                resume=self.resume,
                **dict(opts["trackio_kwargs"] or {}),
            )
        return spec, _MlflowBackend(
            self.project,
            self.experiment,
            self.log_dir,
            self._params,
            tracking_uri=opts["mlflow_tracking_uri"],
            resume=self.resume,
        )

    @property
    def jsonl_path(self) -> Path:
        """Path of the jsonl file (``log_dir/project/experiment/metrics.jsonl``)."""
        return self.run_dir / "metrics.jsonl"

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        """Log one step's metrics to every backend.

        Parameters
        ----------
        metrics : Mapping[str, number | numpy scalar | one-element array or tensor]
            Flat dict, e.g. from ``compute_data_metrics``. ``step`` and ``timestamp`` are
            reserved keys. A key no backend can store (not valid UTF-8) or a value no float
            holds is dropped from this step with a warning; the rest is logged.
        step : int
            The training step (>= 0).

        Raises
        ------
        TypeError, ValueError
            A value or key of the wrong type, a reserved key, a bad step, a non-finite value
            with ``nonfinite="error"``: nothing of this step is logged.
        """
        if self._finished:
            raise RuntimeError("Tracker.log called after finish()")
        step = check_int(step, "step", minimum=0)
        converted, dropped = _convert(metrics)
        for key, why in dropped:
            warnings.warn(
                f"step {step}: metrics[{key!r}] is dropped for every backend: {why}",
                TrackingWarning,
                stacklevel=2,
            )
        values = _apply_nonfinite(converted, self.nonfinite)
        if self._resumed_last is not None and step <= self._resumed_last and not self._warned_overlap:
            self._warned_overlap = True
            warnings.warn(
                f"step {step} is at or before step {self._resumed_last}, the last one the resumed run "
                f"logged: readers keep the values logged last (Tracker.start_step is {self.start_step})",
                TrackingWarning,
                stacklevel=2,
            )
        if self.monitor is not None:
            values = self._check_health(converted, values, step)
        self._last_step = step
        self._log_to_backends(values, step)

    def _log_to_backends(self, values: Mapping[str, float], step: int) -> None:
        for name, backend in self.backends.items():
            limit = getattr(backend, "max_step", None)
            if isinstance(limit, int) and step > limit:
                self._lose(name, step, f"step {step} is beyond its step range (0 to {limit})")
                continue
            try:
                notes = backend.log(dict(values), step)
            except Exception as err:
                self._lose(name, step, f"{type(err).__name__}: {err}", err)
                continue
            if isinstance(notes, list):
                for note in notes:
                    warnings.warn(
                        f"tracking backend {name!r}, step {step}: {note}", TrackingWarning, stacklevel=3
                    )

    def _lose(self, name: str, step: int, why: str, err: BaseException | None = None) -> None:
        """One record lost by one backend: counted; warned at the 1st, 2nd, 4th, 8th ... loss."""
        count = self.lost[name] = self.lost.get(name, 0) + 1
        if err is not None:
            self.failed[name] = err
        steps = self._lost_steps.setdefault(name, [])
        if len(steps) < 10:
            steps.append(step)
        if count & (count - 1) == 0:
            more = f"; {count} records lost so far (warned at the 1st, 2nd, 4th ...)" if count > 1 else ""
            warnings.warn(
                f"tracking backend {name!r} lost the record of step {step}; it keeps logging{more}: {why}",
                TrackingWarning,
                stacklevel=4,
            )

    def _check_health(
        self, converted: dict[str, float], values: dict[str, float], step: int
    ) -> dict[str, float]:
        """Pass the step to the monitor; each new finding: one warning, one ``health/<kind>`` record."""
        return self._report_health(
            lambda: self.monitor.update(converted, step), values, "update", stacklevel=4
        )

    def _report_health(
        self, run: Any, values: dict[str, float], where: str, *, stacklevel: int
    ) -> dict[str, float]:
        """``values`` plus a ``health/<kind>`` record per finding ``run()`` returns, each also warned once.

        ``stacklevel`` points the warnings at the caller of the public method (log or finish).
        """
        try:
            findings = run()
            records = {}
            messages = []
            for finding in findings or ():
                kind, severity = str(finding.kind), str(finding.severity)
                records[K.health(kind)] = K.HEALTH_SEVERITY_VALUE.get(
                    severity, K.HEALTH_SEVERITY_VALUE["error"]
                )
                messages.append(
                    f"rlmetrics health: {kind} ({severity}) from step {finding.step}: {finding.advice}"
                )
        except Exception as err:
            self.monitor = None
            warnings.warn(
                f"the health monitor failed in {where}() and is switched off; logging goes on: "
                f"{type(err).__name__}: {err}",
                TrackingWarning,
                stacklevel=stacklevel,
            )
            return values
        for message in messages:
            warnings.warn(message, HealthWarning, stacklevel=stacklevel)
        return {**values, **records} if records else values

    def _finish_all(self, exit_code: int) -> None:
        for name, backend in self.backends.items():
            try:
                if isinstance(backend, _WandbBackend | _MlflowBackend):
                    backend.finish(exit_code=exit_code)
                else:
                    backend.finish()
            except Exception as err:
                self.failed[name] = err
                warnings.warn(
                    f"tracking backend {name!r} failed in finish(): {type(err).__name__}: {err}",
                    TrackingWarning,
                    stacklevel=3,
                )

    def finish(self, *, exit_code: int = 0) -> None:
        """Flush and close every backend (idempotent); ``exit_code != 0`` marks W&B/MLflow runs failed.

        A backend that lost more than one record gets one more warning with the count.
        """
        if self._finished:
            return
        self._finished = True
        check = getattr(self.monitor, "check", None)
        if callable(check) and self._last_step is not None:
            # steps since the last due diagnosis: their findings, logged with the last step
            records = self._report_health(check, {}, "check", stacklevel=3)
            if records:
                self._log_to_backends(records, self._last_step)
        self._finish_all(exit_code)
        for name, count in self.lost.items():
            if count > 1:
                steps = ", ".join(map(str, self._lost_steps[name])) + (", ..." if count > 10 else "")
                last = self.failed.get(name)
                tail = f"; last error: {type(last).__name__}: {last}" if last is not None else ""
                warnings.warn(
                    f"tracking backend {name!r} lost {count} records of this run (steps {steps}){tail}",
                    TrackingWarning,
                    stacklevel=2,
                )

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.finish(exit_code=0 if exc_type is None else 1)


#: The package each optional backend imports, and its install line.
_BACKEND_PACKAGES = {
    "tensorboard": ("tensorboard", "pip install 'rlmetrics[tensorboard]'"),
    "wandb": ("wandb", "pip install 'rlmetrics[wandb]'"),
    "mlflow": ("mlflow", "pip install 'rlmetrics[mlflow]'"),
    "trackio": ("trackio", "pip install 'rlmetrics[trackio]'"),
}


def check_backends(names: Iterable[str]) -> None:
    """Fail before any work when a named backend's package is missing (without importing it).

    Raises
    ------
    ImportError
        Naming every missing backend and its install line.

    Examples
    --------
    >>> check_backends(["jsonl", "console"])
    """
    import importlib.util

    missing = []
    for name in names:
        if name in _BACKEND_PACKAGES:
            package, line = _BACKEND_PACKAGES[name]
            if importlib.util.find_spec(package) is None:
                missing.append(f"the {name} backend needs {package}: {line}")
    if missing:
        raise ImportError("; ".join(missing))


def _parse_backends(backends: Any) -> list[Any]:
    if isinstance(backends, str):
        backends = [b.strip() for b in backends.split(",") if b.strip()]
    if not isinstance(backends, Iterable):
        raise TypeError(
            f"backends must be a name, a list of names or backend objects; got {type(backends).__name__}"
        )
    specs = list(backends)
    if not specs:
        raise ValueError(f"backends must name at least one backend; choose from {BACKENDS}")
    for spec in specs:
        if isinstance(spec, str):
            if spec not in BACKENDS:
                raise ValueError(f"unknown tracking backend {spec!r}; known: {', '.join(BACKENDS)}")
        elif not (callable(getattr(spec, "log", None)) and callable(getattr(spec, "finish", None))):
            raise TypeError(
                f"a backend object needs log(metrics, step) and finish(); got {type(spec).__name__}"
            )
    return specs


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
    data = p.read_bytes()
    lines = data.split(b"\n")
    complete = data.endswith(b"\n")
    rows: list[dict[str, Any]] = []
    for i, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        last = i == len(lines) and not complete
        try:
            row = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            if last:
                warnings.warn(
                    f"{p}: skipping the truncated last line {i} ({len(raw)} bytes)",
                    RunReadWarning,
                    stacklevel=2,
                )
            elif strict:
                raise ValueError(f"{p}:{i}: not a JSON object ({err})") from None
            else:
                warnings.warn(
                    f"{p}: skipping unreadable line {i} (a fragment left by a crash?): {err}",
                    RunReadWarning,
                    stacklevel=2,
                )
            continue
        if not isinstance(row, dict):
            raise ValueError(f"{p}:{i}: expected a JSON object per line; got {type(row).__name__}")
        rows.append(row)
    if repeated == "last":
        rows = _keep_last(p, rows)
    return rows


def _step_of(row: dict[str, Any]) -> Any:
    step = row.get(K.TRACKING_STEP)
    return step if isinstance(step, int | float) and not isinstance(step, bool) else None


def _same(a: Any, b: Any) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _keep_last(p: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Of a key logged again at a step with another value, only the value logged last; warns once.

    A record whose every metric is logged again later at its step goes (the run was appended to
    twice). A key logged again with the same value beside other keys (``epoch`` in TRL's summary
    record) is no conflict: that record stays whole.
    """
    from collections import Counter

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
    warnings.warn(
        f"{p}: {len(repeated)} step{'s' * (len(repeated) != 1)} logged more than once (the run was "
        f"appended to twice, or resumed from an earlier step); e.g. step {first}: {repeated[first]!r}; "
        "keeping the values logged last",
        RunReadWarning,
        stacklevel=3,
    )
    return kept

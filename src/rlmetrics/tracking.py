"""Experiment tracking: one ``Tracker`` fanning metrics out to jsonl, console, TensorBoard, W&B, MLflow.

The role verl's ``Tracking`` plays, with these guarantees:

* values are converted once, before any backend sees them: Python/numpy numbers, bools, and
  one-element numpy arrays or torch tensors (all tensors of a step reach the host in one
  transfer) become floats; anything else is a ``TypeError`` naming the key;
* NaN and +/-inf follow one policy for every backend (``nonfinite="keep" | "drop" | "error"``);
* the configuration is logged once where the backend supports it;
* a backend that raises while logging (disk full, network down) gets one ``RuntimeWarning``
  and is switched off; the other backends keep logging and training goes on;
* a missing optional package is an ``ImportError`` with the ``pip install`` line;
* an optional health monitor (``monitor=``, e.g. :class:`rlmetrics.health.monitor.HealthMonitor`)
  sees every step; each new finding is one ``RuntimeWarning`` and one ``health/<kind>`` record
  (1.0 warning, 2.0 error) logged with that step; a monitor that raises is switched off with a
  warning and logging goes on.

The ``jsonl`` backend (the default, no dependency) writes one flat JSON object per line,
``{"step": 3, "timestamp": 1764441600.0, "critic/score/mean": 0.5, ...}``, flushed (and
optionally fsynced) every step, so a crash loses at most the line being written;
:func:`read_jsonl` skips such a truncated line with a warning. NaN and infinities are written
as the ``NaN``/``Infinity``/``-Infinity`` tokens that Python's ``json`` reads back.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import math
import os
import re
import sys
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TextIO, runtime_checkable

import numpy as np

from rlmetrics import keys as K
from rlmetrics._core.array import is_torch_array
from rlmetrics._core.checks import check_int

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


@runtime_checkable
class TrackingBackend(Protocol):
    """What a backend object passed in ``Tracker(backends=[...])`` must provide."""

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Record one step's metrics (floats, already converted and checked)."""

    def finish(self) -> None:
        """Flush and close."""


# ---------------------------------------------------------------------------------------------
# Value conversion
# ---------------------------------------------------------------------------------------------


def _convert(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Every value as a float; torch tensors reach the host in one transfer."""
    if not isinstance(metrics, Mapping):
        raise TypeError(f"metrics must be a mapping of key to number; got {type(metrics).__name__}")
    out: dict[str, float] = {}
    tensor_keys: list[str] = []
    tensors: list[Any] = []
    for key, value in metrics.items():
        if not isinstance(key, str):
            raise TypeError(f"metric keys must be strings; got {type(key).__name__} {key!r}")
        if key in K.TRACKING_FIELDS:
            raise ValueError(f"metrics[{key!r}]: {key!r} is reserved by the tracker; rename the metric")
        kind = type(value)
        if kind is float or kind is int or kind is np.float64 or kind is np.float32:  # the common case
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
            out[key] = float(value)
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
    return out


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


def _flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _config_json(config: Mapping[str, Any]) -> str:
    return json.dumps(config, indent=2, sort_keys=True, default=str)


# ---------------------------------------------------------------------------------------------
# Backends
# ---------------------------------------------------------------------------------------------


class _JsonlBackend:
    name = "jsonl"

    def __init__(self, run_dir: Path, config: Mapping[str, Any], *, fsync: bool = False) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.path = run_dir / "metrics.jsonl"
        self.fsync = fsync
        if config:
            (run_dir / "config.json").write_text(_config_json(config) + "\n", encoding="utf-8")
        # A previous run that crashed mid-line left no newline: start on a fresh line so the
        # fragment stays a line of its own (read_jsonl skips it).
        needs_newline = False
        if self.path.exists() and self.path.stat().st_size:
            with open(self.path, "rb") as fh:
                fh.seek(-1, os.SEEK_END)
                needs_newline = fh.read(1) != b"\n"
        self._fh: BinaryIO | None = open(self.path, "ab")
        if needs_newline:
            self._fh.write(b"\n")
            self._fh.flush()
        try:  # optional speed-up (about 5x per line); json is used for lines holding NaN/inf
            import orjson

            self._orjson: Any = orjson
        except ImportError:
            self._orjson = None

    def log(self, metrics: dict[str, float], step: int) -> None:
        if self._fh is None:
            raise RuntimeError(f"{self.path} is closed")
        record = {K.TRACKING_STEP: step, K.TRACKING_TIMESTAMP: time.time(), **metrics}
        if self._orjson is not None and all(map(math.isfinite, metrics.values())):
            line = self._orjson.dumps(record) + b"\n"
        else:
            line = (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8")
        # One write call per line, then flush: a crash can only cut the line being written.
        self._fh.write(line)
        self._fh.flush()
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

    def __init__(
        self,
        project: str,
        experiment: str,
        run_dir: Path,
        config: Mapping[str, Any],
        *,
        mode: str | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            import wandb
        except ImportError:
            raise ImportError("the wandb backend needs wandb: pip install 'rlmetrics[wandb]'") from None
        run_dir.mkdir(parents=True, exist_ok=True)
        options: dict[str, Any] = {"project": project, "name": experiment, "dir": str(run_dir)}
        if config:
            options["config"] = dict(config)
        if mode is not None:
            options["mode"] = mode
        options.update(kwargs)
        self.run = wandb.init(**options)

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def finish(self, exit_code: int = 0) -> None:
        self.run.finish(exit_code=exit_code)


_MLFLOW_BAD_CHARS = re.compile(r"[^\w\-. /:]")


def mlflow_key(key: str) -> str:
    """An MLflow-legal metric/param name: ``@`` -> ``_at_`` (as verl does), other illegal characters -> ``_``.

    Examples
    --------
    >>> mlflow_key("val-core/gsm8k/acc/mean@8")
    'val-core/gsm8k/acc/mean_at_8'
    """
    return _MLFLOW_BAD_CHARS.sub("_", key.replace("@", "_at_"))


class _MlflowBackend:
    name = "mlflow"
    _BATCH = 1000  # MLflow's limit of metrics per log_batch call
    _PARAM_BATCH = 100

    def __init__(
        self,
        project: str,
        experiment: str,
        log_dir: Path,
        config: Mapping[str, Any],
        *,
        tracking_uri: str | None = None,
    ) -> None:
        try:
            from mlflow.entities import Metric as MlMetric
            from mlflow.entities import Param
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise ImportError("the mlflow backend needs mlflow: pip install 'rlmetrics[mlflow]'") from None
        self._Metric = MlMetric
        if tracking_uri is None:
            log_dir.mkdir(parents=True, exist_ok=True)
            tracking_uri = f"sqlite:///{(log_dir / 'mlflow.db').resolve()}"
        self.tracking_uri = tracking_uri
        self.client = MlflowClient(tracking_uri=tracking_uri)
        exp = self.client.get_experiment_by_name(project)
        exp_id = exp.experiment_id if exp is not None else self.client.create_experiment(project)
        self.run_id = self.client.create_run(exp_id, run_name=experiment).info.run_id
        params = [Param(mlflow_key(k), str(v)[:6000]) for k, v in _flatten(config).items()]
        for i in range(0, len(params), self._PARAM_BATCH):
            self.client.log_batch(self.run_id, params=params[i : i + self._PARAM_BATCH])

    def log(self, metrics: dict[str, float], step: int) -> None:
        ts = int(time.time() * 1000)
        items = [self._Metric(mlflow_key(k), v, ts, step) for k, v in metrics.items()]
        for i in range(0, len(items), self._BATCH):
            self.client.log_batch(self.run_id, metrics=items[i : i + self._BATCH])

    def finish(self, exit_code: int = 0) -> None:
        self.client.set_terminated(self.run_id, status="FINISHED" if exit_code == 0 else "FAILED")


class _TrackioBackend:
    """A trackio run: its local SQLite store (``$TRACKIO_DIR``, default ``$HF_HOME/trackio``).

    trackio keeps one current run per process: ``trackio.init`` finishes the one before, so this
    backend and TRL's ``report_to="trackio"`` should not run side by side.
    """

    name = "trackio"

    def __init__(self, project: str, experiment: str, config: Mapping[str, Any], **kwargs: Any) -> None:
        try:
            import trackio
        except ImportError:
            raise ImportError("the trackio backend needs trackio: pip install 'rlmetrics[trackio]'") from None
        options: dict[str, Any] = {"project": project, "name": experiment}
        if config:
            options["config"] = dict(config)
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
        Project (W&B project, MLflow experiment) and run name.
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
    fsync : bool, keyword-only
        ``os.fsync`` the jsonl file after every step (survives power loss, slower).
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
        it returns is reported once: a ``RuntimeWarning`` ``"rlmetrics health: <kind>
        (<severity>) from step N: <advice>"`` and a record ``health/<kind>`` logged to every
        backend with the current step, valued :data:`rlmetrics.keys.HEALTH_SEVERITY_VALUE`
        (1.0 warning, 2.0 error). If the monitor also has ``check() -> list of findings``,
        :meth:`finish` runs it once more, so that the steps after its last due diagnosis are
        checked too; those findings are logged with the last step. A monitor that raises gets
        one warning and is switched off (``monitor`` becomes ``None``); the metrics are logged
        all the same.

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
        for arg, value in (("project", project), ("experiment", experiment)):
            if not isinstance(value, str) or not value:
                raise TypeError(f"{arg} must be a non-empty str; got {value!r}")
        if nonfinite not in _NONFINITE:
            raise ValueError(f"nonfinite must be one of {_NONFINITE}; got {nonfinite!r}")
        if monitor is not None and not callable(getattr(monitor, "update", None)):
            raise TypeError(
                f"monitor must have an update(values, step) method (e.g. a HealthMonitor); "
                f"got {type(monitor).__name__}"
            )
        self.monitor = monitor
        self._last_step: int | None = None
        self.project, self.experiment, self.nonfinite = project, experiment, nonfinite
        self.config = _config_to_dict(config)
        self.log_dir = Path(log_dir)
        self.run_dir = self.log_dir / project / experiment
        self.failed: dict[str, BaseException] = {}
        self.backends: dict[str, Any] = {}
        self._finished = False
        specs = _parse_backends(backends)
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
        except BaseException:
            self._finish_all(exit_code=1)
            raise

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
                **dict(opts["wandb_kwargs"] or {}),
            )
        if spec == "trackio":
            return spec, _TrackioBackend(
                self.project, self.experiment, self.config, **dict(opts["trackio_kwargs"] or {})
            )
        return spec, _MlflowBackend(
            self.project, self.experiment, self.log_dir, self.config, tracking_uri=opts["mlflow_tracking_uri"]
        )

    @property
    def jsonl_path(self) -> Path:
        """Path of the jsonl file (``log_dir/project/experiment/metrics.jsonl``)."""
        return self.run_dir / "metrics.jsonl"

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        """Log one step's metrics to every working backend.

        Parameters
        ----------
        metrics : Mapping[str, number | numpy scalar | one-element array or tensor]
            Flat dict, e.g. from ``compute_data_metrics``. ``step`` and ``timestamp`` are
            reserved keys.
        step : int
            The training step (>= 0).
        """
        if self._finished:
            raise RuntimeError("Tracker.log called after finish()")
        step = check_int(step, "step", minimum=0)
        converted = _convert(metrics)
        values = _apply_nonfinite(converted, self.nonfinite)
        if self.monitor is not None:
            values = self._check_health(converted, values, step)
        self._last_step = step
        self._log_to_backends(values, step)

    def _log_to_backends(self, values: Mapping[str, float], step: int) -> None:
        for name, backend in self.backends.items():
            if name in self.failed:
                continue
            try:
                backend.log(dict(values), step)
            except Exception as err:
                self._disable(name, backend, err, "log")

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
                RuntimeWarning,
                stacklevel=stacklevel,
            )
            return values
        for message in messages:
            warnings.warn(message, RuntimeWarning, stacklevel=stacklevel)
        return {**values, **records} if records else values

    def _disable(self, name: str, backend: Any, err: BaseException, where: str) -> None:
        self.failed[name] = err
        warnings.warn(
            f"tracking backend {name!r} failed in {where}() and is switched off; the other backends keep "
            f"logging: {type(err).__name__}: {err}",
            RuntimeWarning,
            stacklevel=3,
        )
        try:
            backend.finish()
        except Exception:  # it already failed once; one warning is enough
            pass

    def _finish_all(self, exit_code: int) -> None:
        for name, backend in self.backends.items():
            if name in self.failed:
                continue
            try:
                if isinstance(backend, _WandbBackend | _MlflowBackend):
                    backend.finish(exit_code=exit_code)
                else:
                    backend.finish()
            except Exception as err:
                self.failed[name] = err
                warnings.warn(
                    f"tracking backend {name!r} failed in finish(): {type(err).__name__}: {err}",
                    RuntimeWarning,
                    stacklevel=3,
                )

    def finish(self, *, exit_code: int = 0) -> None:
        """Flush and close every backend (idempotent); ``exit_code != 0`` marks W&B/MLflow runs failed."""
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


def read_jsonl(path: str | os.PathLike[str], *, strict: bool = False) -> list[dict[str, Any]]:
    """Read a jsonl metrics file written by the ``jsonl`` backend.

    A line cut short by a crash (the last line, or a fragment a resumed run wrote after) is
    skipped with a ``RuntimeWarning``.

    Parameters
    ----------
    path : str or Path
        The ``metrics.jsonl`` file.
    strict : bool, keyword-only
        Raise ``ValueError`` (with the line number) on an unreadable line that is not the last.

    Returns
    -------
    list[dict]
        One dict per step, in file order (``NaN``/``Infinity`` tokens come back as floats).
    """
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
                    RuntimeWarning,
                    stacklevel=2,
                )
            elif strict:
                raise ValueError(f"{p}:{i}: not a JSON object ({err})") from None
            else:
                warnings.warn(
                    f"{p}: skipping unreadable line {i} (a fragment left by a crash?): {err}",
                    RuntimeWarning,
                    stacklevel=2,
                )
            continue
        if not isinstance(row, dict):
            raise ValueError(f"{p}:{i}: expected a JSON object per line; got {type(row).__name__}")
        rows.append(row)
    return rows

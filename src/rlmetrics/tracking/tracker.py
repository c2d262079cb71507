"""The :class:`Tracker`: claims the run, converts each record once, fans it out to its backends."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from rlmetrics import keys as K
from rlmetrics._core.checks import check_int
from rlmetrics.errors import HealthWarning, TrackingWarning
from rlmetrics.tracking._backend import TrackingBackend
from rlmetrics.tracking._files import _check_name, _last_logged_step, _unwritable
from rlmetrics.tracking._values import (
    _NONFINITE,
    _apply_nonfinite,
    _config_json,
    _config_to_dict,
    _convert,
    _flatten,
)
from rlmetrics.tracking.console import _ConsoleBackend
from rlmetrics.tracking.jsonl import _JsonlBackend
from rlmetrics.tracking.mlflow import _MlflowBackend
from rlmetrics.tracking.tensorboard import _TensorBoardBackend
from rlmetrics.tracking.trackio import _TrackioBackend
from rlmetrics.tracking.wandb import _WandbBackend

__all__ = ["BACKENDS", "Tracker", "check_backends"]


#: The built-in backend names.
BACKENDS = ("console", "jsonl", "mlflow", "tensorboard", "trackio", "wandb")


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
    >>> from rlmetrics.tracking import read_jsonl
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

"""The :class:`Tracker`: claims the run, converts each record once, fans it out to its backends."""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlmetrics._core.checks import check_int
from rlmetrics.errors import HealthWarning, RunStopped, TrackingWarning
from rlmetrics.readers.jsonl import last_step
from rlmetrics.tracking._backend import (
    Backend,
    RunInfo,
    TrackingBackend,
    _complete,
    _make_named,
    backend_names,
    register_backend,
)
from rlmetrics.tracking._files import _check_name, _claim_run, _remove_created
from rlmetrics.tracking._health import _finding_records
from rlmetrics.tracking._values import (
    _NONFINITE,
    _apply_nonfinite,
    _config_json,
    _config_to_dict,
    _Converter,
    _flatten,
)
from rlmetrics.tracking.console import ConsoleBackend
from rlmetrics.tracking.jsonl import JsonlBackend
from rlmetrics.tracking.mlflow import MlflowBackend
from rlmetrics.tracking.tensorboard import TensorBoardBackend
from rlmetrics.tracking.trackio import TrackioBackend
from rlmetrics.tracking.wandb import WandbBackend
from rlmetrics.training.samples import SampleTable

__all__ = ["BACKENDS", "Tracker", "check_backends"]


#: The built-in backend names (:func:`~rlmetrics.tracking.register_backend` adds others).
BACKENDS = ("console", "jsonl", "mlflow", "tensorboard", "trackio", "wandb")

for _cls in (ConsoleBackend, JsonlBackend, MlflowBackend, TensorBoardBackend, TrackioBackend, WandbBackend):
    register_backend(_cls.name, _cls, replace=True)

#: The tracker's compatibility keywords: keyword -> (backend name, that backend's constructor keyword).
_BACKEND_KEYWORDS = {
    "fsync": ("jsonl", "fsync"),
    "console_keys": ("console", "keys"),
    "console_file": ("console", "file"),
    "wandb_mode": ("wandb", "mode"),
    "wandb_kwargs": ("wandb", "init_kwargs"),
    "mlflow_tracking_uri": ("mlflow", "tracking_uri"),
    "trackio_kwargs": ("trackio", "init_kwargs"),
}

#: The class each backend name of :data:`_BACKEND_KEYWORDS` stands for (the new spelling's).
_BACKEND_CLASSES = {
    "jsonl": "JsonlBackend",
    "console": "ConsoleBackend",
    "wandb": "WandbBackend",
    "mlflow": "MlflowBackend",
    "trackio": "TrackioBackend",
}

#: One entry of the backends to start: the name asked for (None: an object), what the caller
#: passed (kept in :attr:`Tracker.backends`) and the :class:`Backend` the tracker calls.
_Spec = tuple[str | None, Any, Backend]


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
        Backend names (:data:`BACKENDS`: ``"jsonl"``, ``"console"``, ``"tensorboard"``,
        ``"wandb"``, ``"mlflow"``, ``"trackio"``, and those of
        :func:`~rlmetrics.tracking.register_backend`; a comma-separated string works too) and/or
        backend objects: configured ones (``WandbBackend(mode="offline")``, ``ConsoleBackend(keys=[...])``:
        see :class:`~rlmetrics.tracking.Backend`), or any object with ``log(metrics, step)``
        and ``finish()``.
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
        all the same. A monitor's actions (``HealthMonitor(actions=...)``) are logged as
        ``health_action/<kind>`` records with the step they were taken at; a ``"raise"`` action's
        :class:`~rlmetrics.errors.RunStopped` leaves :meth:`log` (or :meth:`finish`) after the
        step and its records are written, and a ``"stop"`` sets ``monitor.should_stop``.

    **backend_options
        Deprecated (a ``DeprecationWarning`` naming the new spelling; they still work): options
        of the backends given by name, kept from before the backend constructors
        (``Tracker(backends="wandb", wandb_mode="offline")`` is
        ``Tracker(backends=[WandbBackend(mode="offline")])``):

        ``fsync`` (``JsonlBackend(fsync=)``: ``os.fsync`` after every step), ``console_keys`` and
        ``console_file`` (``ConsoleBackend(keys=, file=)``), ``wandb_mode`` and ``wandb_kwargs``
        (``WandbBackend(mode=, init_kwargs=)``), ``mlflow_tracking_uri``
        (``MlflowBackend(tracking_uri=)``, default a local sqlite store in ``log_dir``),
        ``trackio_kwargs`` (``TrackioBackend(init_kwargs=)``; trackio writes to its own local
        store, ``$TRACKIO_DIR``, not to ``log_dir``).

    Attributes
    ----------
    experiment : str
        The run name used (``experiment``, or its suffixed form when that run existed).
    renamed_from : str or None
        The name asked for, when the run was given a new one; else None.
    run_dir : Path
        ``log_dir/project/experiment``.
    backends : dict[str, object]
        The backends by name, in order: the objects built for names, and those passed as they
        were given.
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
        backends: str | Sequence[str | Backend | TrackingBackend] = ("jsonl",),
        config: Any = None,
        *,
        log_dir: str | os.PathLike[str] = "rlmetrics_logs",
        resume: bool = False,
        nonfinite: str = "keep",
        monitor: Any = None,
        **backend_options: Any,
    ) -> None:
        project = _check_name(project, "project")
        experiment = _check_name(experiment, "experiment")
        _check_options(resume, nonfinite, monitor)
        self.monitor = monitor
        self._stopped: RunStopped | None = None
        self.project, self.nonfinite, self.resume = project, nonfinite, resume
        self.config = _config_to_dict(config)
        self._params = _flatten(self.config)  # colliding names fail here, before anything is written
        specs = _parse_backends(backends, _options_by_backend(backend_options))
        self.log_dir = Path(log_dir)
        self.failed: dict[str, BaseException] = {}
        self.lost: dict[str, int] = {}
        self._lost_steps: dict[str, list[int]] = {}
        self.backends: dict[str, Any] = {}
        # what log() calls, in order: name, backend, its step limit, whether it gets a copy (while
        # starting: whether it keeps its records)
        self._targets: list[tuple[str, Backend, int | None, bool]] = []
        self._borrow = False  # no backend keeps its record: log() may pass the caller's dict on
        self._convert = _Converter().__call__  # a bound method: a cheaper call than the instance
        # the per-step work beyond the conversion: the nonfinite policy, the resume overlap check
        self._checks = nonfinite != "keep" or resume
        self._finished, self._warned_overlap = False, False
        self._no_samples: set[str] = set()  # backends that record no sample tables (warned once)
        self._last_step: int | None = None
        # the folders the claim created, deepest first: removed again if the construction fails
        self.experiment, self.run_dir, self._created = _claim_run(
            self.log_dir, project, experiment, resume=resume
        )
        self.renamed_from: str | None = experiment if self.experiment != experiment else None
        self._resumed_last = last_step(self.run_dir / "metrics.jsonl") if resume else None
        self.start_step = 0 if self._resumed_last is None else self._resumed_last + 1
        if self.renamed_from is not None:
            warnings.warn(
                f"run directory {str(self.log_dir / project / experiment)!r} exists: this run is "
                f"{self.experiment!r} ({str(self.run_dir)!r}); pass resume=True to continue the old one",
                TrackingWarning,
                stacklevel=2,
            )
        if resume:
            self._check_resumed_config()
        self._start(specs)

    def _release(self) -> None:
        """After a failed construction: remove what the claim created (nothing was logged yet)."""
        _remove_created(self._created, self.run_dir)
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

    def _start(self, specs: list[_Spec]) -> None:
        """Start every backend on the claimed run; if one fails, finish those started and release the run."""
        run = RunInfo(
            project=self.project,
            experiment=self.experiment,
            run_dir=self.run_dir,
            log_dir=self.log_dir,
            config=self.config,
            params=self._params,
            resume=self.resume,
        )
        try:
            for asked, given, backend in specs:
                name = asked or backend.name
                while name in self.backends:
                    name += "_"
                notes = backend.start(run)
                self.backends[name] = given
                self._targets.append((name, backend, backend.max_step, backend.keeps_records))
                for note in notes or ():
                    warnings.warn(f"tracking backend {name!r}: {note}", TrackingWarning, stacklevel=3)
        except BaseException:
            self._finish_all(exit_code=1)
            self._release()
            raise
        self._borrow = not any(keeps for *_, keeps in self._targets)
        # from here the flag says whether the backend gets a copy: it keeps records and is not the last
        last = len(self._targets) - 1
        self._targets = [
            (n, b, lim, keeps and i != last) for i, (n, b, lim, keeps) in enumerate(self._targets)
        ]

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
        if type(step) is not int or step < 0:
            step = check_int(step, "step", minimum=0)
        monitor = self.monitor
        # the caller's dict itself may reach backends that neither keep nor change it (no monitor)
        values, dropped = self._convert(metrics, monitor is None and self._borrow)
        if dropped or monitor is not None or self._checks:  # the common step skips all of these
            values = self._prepare(values, dropped, step)
        self._last_step = step
        self._log_to_backends(values, step)
        if self._stopped is not None:
            self._raise_stopped()

    def log_samples(self, table: SampleTable, step: int) -> None:
        """Log one step's sample table to every backend that records samples.

        Each backend writes it in its own form: ``samples.jsonl`` beside ``metrics.jsonl``
        (jsonl, one line per row), a ``wandb.Table`` (W&B), a markdown table as text
        (TensorBoard), a table artifact ``samples/step_<step>.json`` (MLflow), a
        ``trackio.Table`` (trackio), a one-line note (console). A backend that records no
        sample tables (see :meth:`Backend.log_samples <rlmetrics.tracking.Backend.log_samples>`)
        is skipped (one warning per run); one that raises loses these samples alone (counted in
        :attr:`lost`, warned like a lost record) and the others are not affected.

        Parameters
        ----------
        table : SampleTable
            The rows, e.g. from :func:`~rlmetrics.training.samples.select_samples` (or an object
            with ``rows()`` giving them as dicts); its ``step`` column is set to ``step``.
        step : int
            The training step (>= 0), usually the one of the metrics logged beside it.

        Raises
        ------
        TypeError, ValueError
            ``table`` is not a :class:`~rlmetrics.training.samples.SampleTable`, a bad step:
            nothing is logged.

        Examples
        --------
        >>> import tempfile
        >>> from rlmetrics.readers.samples import read_samples
        >>> from rlmetrics.training.samples import select_samples
        >>> with tempfile.TemporaryDirectory() as d:
        ...     with Tracker("demo", "run1", log_dir=d) as tracker:
        ...         table = select_samples(["1+1="], ["2"], [1.0])
        ...         tracker.log_samples(table, step=4)
        ...     read_samples(tracker.run_dir)[4].response
        ('2',)
        """
        if self._finished:
            raise RuntimeError("Tracker.log_samples called after finish()")
        if type(step) is not int or step < 0:
            step = check_int(step, "step", minimum=0)
        if not isinstance(table, SampleTable):
            rows = getattr(table, "rows", None)  # a SampleTable of a reloaded module, or alike
            if not callable(rows):
                raise TypeError(
                    f"table must be a SampleTable (rlmetrics.training.samples.select_samples); "
                    f"got {type(table).__name__}"
                )
            table = SampleTable.from_rows(rows())
        if any(s != step for s in table.step):
            table = dataclasses.replace(table, step=(step,) * len(table))
        for name, backend, limit, _ in self._targets:
            if name in self._no_samples:
                continue
            what = f"the samples of step {step}"
            if limit is not None and step > limit:
                self._lose(
                    name,
                    step,
                    f"step {step} is beyond its step range (0 to {limit})",
                    what=what,
                    stacklevel=3,
                )
                continue
            try:
                notes = backend.log_samples(table, step)
            except NotImplementedError:  # the backend records no sample tables (Backend.log_samples)
                self._no_samples.add(name)
                warnings.warn(
                    f"tracking backend {name!r} has no log_samples(table, step): it skips the "
                    "sample tables of this run",
                    TrackingWarning,
                    stacklevel=2,
                )
                continue
            except Exception as err:
                self._lose(name, step, f"{type(err).__name__}: {err}", err, what=what, stacklevel=3)
                continue
            for note in notes or ():
                warnings.warn(
                    f"tracking backend {name!r}, samples of step {step}: {note}",
                    TrackingWarning,
                    stacklevel=2,
                )

    def _prepare(self, converted: dict[str, float], dropped: Sequence[tuple[str, str]], step: int) -> dict:
        """The converted step after the drop warnings, the ``nonfinite`` policy, the resume overlap
        check and the health monitor."""
        if dropped:
            self._warn_dropped(dropped, step)
        values = converted if self.nonfinite == "keep" else _apply_nonfinite(converted, self.nonfinite)
        if self._resumed_last is not None and step <= self._resumed_last and not self._warned_overlap:
            self._warn_overlap(step)
        if self.monitor is not None:
            values = self._check_health(converted, values, step)
        return values

    def _warn_dropped(self, dropped: Sequence[tuple[str, str]], step: int) -> None:
        for key, why in dropped:
            warnings.warn(
                f"step {step}: metrics[{key!r}] is dropped for every backend: {why}",
                TrackingWarning,
                stacklevel=4,
            )

    def _warn_overlap(self, step: int) -> None:
        self._warned_overlap = True
        warnings.warn(
            f"step {step} is at or before step {self._resumed_last}, the last one the resumed run "
            f"logged: readers keep the values logged last (Tracker.start_step is {self.start_step})",
            TrackingWarning,
            stacklevel=4,
        )

    def _log_to_backends(self, values: dict[str, float], step: int) -> None:
        """Each backend its record; a failure loses that record alone.

        ``values`` itself goes to the backends that do not keep their records and to the last
        one; the others get a copy each.
        """
        for name, backend, limit, copy in self._targets:
            if limit is not None and step > limit:
                self._lose(name, step, f"step {step} is beyond its step range (0 to {limit})")
                continue
            try:
                notes = backend.log(dict(values) if copy else values, step)
            except Exception as err:
                self._lose(name, step, f"{type(err).__name__}: {err}", err)
                continue
            for note in notes or ():
                warnings.warn(
                    f"tracking backend {name!r}, step {step}: {note}", TrackingWarning, stacklevel=3
                )

    def _lose(
        self,
        name: str,
        step: int,
        why: str,
        err: BaseException | None = None,
        *,
        what: str = "",
        stacklevel: int = 4,
    ) -> None:
        """One record (``what``: default the metrics of ``step``) lost by one backend: counted;
        warned at the 1st, 2nd, 4th, 8th ... loss."""
        count = self.lost[name] = self.lost.get(name, 0) + 1
        if err is not None:
            self.failed[name] = err
        steps = self._lost_steps.setdefault(name, [])
        if len(steps) < 10:
            steps.append(step)
        if count & (count - 1) == 0:
            more = f"; {count} records lost so far (warned at the 1st, 2nd, 4th ...)" if count > 1 else ""
            warnings.warn(
                f"tracking backend {name!r} lost {what or f'the record of step {step}'}; "
                f"it keeps logging{more}: {why}",
                TrackingWarning,
                stacklevel=stacklevel,
            )

    def _check_health(
        self, converted: dict[str, float], values: dict[str, float], step: int
    ) -> dict[str, float]:
        """Pass the step to the monitor; each new finding: one warning, one ``health/<kind>`` record."""
        return self._report_health(
            lambda: self.monitor.update(converted, step), values, "update", stacklevel=5
        )

    def _report_health(
        self, run: Any, values: dict[str, float], where: str, *, stacklevel: int
    ) -> dict[str, float]:
        """``values`` plus a ``health/<kind>`` record per finding ``run()`` returns, each also warned once.

        ``stacklevel`` points the warnings at the caller of the public method (log or finish).
        """
        try:
            records, messages = _finding_records(run())
        except RunStopped as stop:  # a "raise" action: the step and its records are logged first
            records, messages = _finding_records(stop.findings)
            self._stopped = stop
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
        pop = getattr(self.monitor, "pop_action_records", None)
        if callable(pop):
            records.update(pop())
        return {**values, **records} if records else values

    def _raise_stopped(self) -> None:
        """Raise the RunStopped a ``"raise"`` action of the monitor left, once its step is logged."""
        stop, self._stopped = self._stopped, None
        if stop is not None:
            raise stop

    def _finish_all(self, exit_code: int) -> None:
        for name, backend, *_ in self._targets:
            try:
                backend.finish(exit_code=exit_code)
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
        self._warn_lost_totals()
        self._raise_stopped()

    def _warn_lost_totals(self) -> None:
        """One more warning for each backend that lost more than one record, with the count."""
        for name, count in self.lost.items():
            if count > 1:
                steps = ", ".join(map(str, self._lost_steps[name])) + (", ..." if count > 10 else "")
                last = self.failed.get(name)
                tail = f"; last error: {type(last).__name__}: {last}" if last is not None else ""
                warnings.warn(
                    f"tracking backend {name!r} lost {count} records of this run (steps {steps}){tail}",
                    TrackingWarning,
                    stacklevel=3,
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


def _check_options(resume: Any, nonfinite: Any, monitor: Any) -> None:
    if not isinstance(resume, bool):
        raise TypeError(f"resume must be a bool; got {type(resume).__name__} {resume!r}")
    if nonfinite not in _NONFINITE:
        raise ValueError(f"nonfinite must be one of {_NONFINITE}; got {nonfinite!r}")
    if monitor is not None and not callable(getattr(monitor, "update", None)):
        raise TypeError(
            f"monitor must have an update(values, step) method (e.g. a HealthMonitor); "
            f"got {type(monitor).__name__}"
        )


def _options_by_backend(keywords: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The tracker's compatibility keywords (``wandb_mode=``, ...) as constructor options per backend name."""
    options: dict[str, dict[str, Any]] = {}
    for keyword, value in keywords.items():
        if keyword not in _BACKEND_KEYWORDS:
            raise TypeError(f"Tracker() got an unexpected keyword argument {keyword!r}")
        name, option = _BACKEND_KEYWORDS[keyword]
        warnings.warn(
            f"Tracker({keyword}=...) is deprecated and will be removed; configure the backend "
            f"instead: Tracker(backends=[{_BACKEND_CLASSES[name]}({option}=...)])",
            DeprecationWarning,
            stacklevel=3,
        )
        if value is None:
            continue
        options.setdefault(name, {})[option] = bool(value) if keyword == "fsync" else value
    return options


def _parse_backends(backends: Any, options: Mapping[str, Mapping[str, Any]]) -> list[_Spec]:
    """The backends to start: names made by their factories (with ``options``), objects completed."""
    if isinstance(backends, str):
        backends = [b.strip() for b in backends.split(",") if b.strip()]
    if not isinstance(backends, Iterable):
        raise TypeError(
            f"backends must be a name, a list of names or backend objects; got {type(backends).__name__}"
        )
    given = list(backends)
    if not given:
        raise ValueError(f"backends must name at least one backend; choose from {', '.join(backend_names())}")
    names = [spec for spec in given if isinstance(spec, str)]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"backends lists {twice[0]!r} twice")
    for name in names:
        if name not in backend_names():
            raise ValueError(f"unknown tracking backend {name!r}; known: {', '.join(backend_names())}")
    specs: list[_Spec] = []
    for spec in given:
        if isinstance(spec, str):
            backend = _make_named(spec, options.get(spec, {}))
            specs.append((spec, backend, backend))
        else:
            specs.append((None, spec, _complete(spec, "a backend object")))
    return specs

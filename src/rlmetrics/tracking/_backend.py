"""What a tracking backend provides (:class:`Backend`), the run it is started on, and the name registry."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from rlmetrics.training.samples import SampleTable

__all__ = [
    "MAX_STEP_INT64",
    "Backend",
    "RunInfo",
    "TrackingBackend",
    "backend_names",
    "register_backend",
]


#: The largest step TensorBoard, MLflow, W&B and trackio store (int64).
MAX_STEP_INT64 = 2**63 - 1


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """The run a :class:`Backend` is started on (:meth:`Backend.start`), claimed by the tracker.

    Attributes
    ----------
    project, experiment : str
        The project and the run name used (the suffixed one when the name was taken).
    run_dir : Path
        ``log_dir/project/experiment``, created by the tracker.
    log_dir : Path
        The root of the local files.
    config : Mapping
        The run's configuration as a plain dict (empty: none given).
    params : Mapping
        ``config`` flattened to ``{"a.b": value}`` (MLflow's params).
    resume : bool
        Continue the run of that name where the backend can (``Tracker(resume=True)``).
    """

    project: str
    experiment: str
    run_dir: Path
    log_dir: Path
    config: Mapping[str, Any]
    params: Mapping[str, Any]
    resume: bool = False


@runtime_checkable
class Backend(Protocol):
    """Everything the :class:`~rlmetrics.tracking.Tracker` asks of a backend.

    A backend is configured by its own constructor (``WandbBackend(mode="offline")``), which
    only checks its options; :meth:`start` opens it on the run the tracker claimed. Objects with
    fewer members are accepted too, completed with defaults: only ``log(metrics, step)`` and
    ``finish()`` (:class:`TrackingBackend`), or this protocol without ``keeps_records`` (then
    True) or without ``log_samples`` (then it records no sample tables).

    Attributes
    ----------
    name : str
        The key in :attr:`Tracker.backends <rlmetrics.tracking.Tracker.backends>` and in the
        warnings (a ``_`` is appended while it is taken).
    max_step : int or None
        The largest step the backend stores (None: any). The records of later steps are not
        passed to it, each a record lost with a warning.
    keeps_records : bool
        False declares that :meth:`log` only reads its ``metrics`` during the call (it neither
        keeps the dict nor changes it): the tracker then passes it the caller's own dict
        uncopied when every backend declares so. The built-in jsonl, console and tensorboard
        backends do; True is the safe answer.
    """

    name: str
    max_step: int | None
    keeps_records: bool

    def start(self, run: RunInfo) -> Sequence[str]:
        """Open the backend on ``run``; return notes for the tracker to warn (e.g. cut params).

        An exception fails the tracker's construction (the backends started before are
        finished with ``exit_code=1`` and the run directory is removed).
        """

    def log(self, metrics: dict[str, float], step: int) -> Sequence[str] | None:
        """Record one step's metrics (floats, already converted and checked); return notes or None.

        An exception loses this record for this backend only (one warning); the tracker goes on
        calling it. Each note (a key the backend dropped or renamed) is one warning.
        """

    def log_samples(self, table: SampleTable, step: int) -> Sequence[str] | None:
        """Record one step's sample table in the backend's own form; return notes or None like :meth:`log`.

        See :meth:`Tracker.log_samples <rlmetrics.tracking.Tracker.log_samples>`. A backend
        that records no sample tables raises ``NotImplementedError``: the tracker skips it for
        the rest of the run, with one warning. Another exception loses these samples alone.
        """

    def finish(self, *, exit_code: int = 0) -> None:
        """Flush and close; ``exit_code != 0`` marks the run failed where the backend can."""


@runtime_checkable
class TrackingBackend(Protocol):
    """The least a backend object passed in ``Tracker(backends=[...])`` must provide.

    ``name``, ``max_step`` (an int) and ``notes`` (a list of str, warned once after the
    construction) are read if present; ``finish`` is called without arguments. See
    :class:`Backend` for the complete protocol.
    """

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Record one step's metrics (floats, already converted and checked)."""

    def finish(self) -> None:
        """Flush and close."""


def _check_name_option(value: Any, arg: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise TypeError(f"{arg} must be a non-empty str or None; got {value!r}")
    return value


def _check_init_kwargs(value: Any, arg: str) -> dict[str, Any]:
    """A copy of ``value``, a mapping of str keys (extra ``init`` arguments), or an error naming ``arg``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{arg} must be a mapping of argument names to values; got {type(value).__name__}")
    wrong = [k for k in value if not isinstance(k, str)]
    if wrong:
        raise TypeError(f"{arg} must have str keys (argument names); got {wrong[0]!r}")
    return dict(value)


@runtime_checkable
class _Core(Protocol):
    """The members of :class:`Backend` without defaults (those that a :class:`_Completed` forwards)."""

    name: str
    max_step: int | None

    def start(self, run: RunInfo) -> Sequence[str]: ...

    def log(self, metrics: dict[str, float], step: int) -> Sequence[str] | None: ...

    def finish(self, *, exit_code: int = 0) -> None: ...


class _Completed:
    """A backend object that lacks members of :class:`Backend`, completed with the defaults.

    A :class:`TrackingBackend` (``log`` and ``finish`` only: its ``notes`` attribute is warned,
    ``finish`` gets no argument) or a backend written before ``keeps_records`` and
    ``log_samples`` joined the protocol (its ``start`` notes and ``finish(exit_code=)`` as they
    are). Absent: ``keeps_records`` is True, and ``log_samples`` raises ``NotImplementedError``.
    """

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self._core = isinstance(obj, _Core) and isinstance(obj.name, str)
        self.name = str(getattr(obj, "name", None) or type(obj).__name__)
        limit = getattr(obj, "max_step", None)
        self.max_step = limit if isinstance(limit, int) and not isinstance(limit, bool) else None
        self.keeps_records = getattr(obj, "keeps_records", True) is not False
        samples = getattr(obj, "log_samples", None)
        self._log_samples = samples if callable(samples) else None

    def start(self, run: RunInfo) -> Sequence[str]:
        if self._core:
            return self.obj.start(run)
        start = getattr(self.obj, "start", None)
        if callable(start):
            start(run)
        return [str(note) for note in getattr(self.obj, "notes", None) or ()]

    def log(self, metrics: dict[str, float], step: int) -> Sequence[str] | None:
        notes = self.obj.log(metrics, step)
        return notes if self._core or isinstance(notes, list) else None

    def log_samples(self, table: SampleTable, step: int) -> Sequence[str] | None:
        if self._log_samples is None:
            raise NotImplementedError(f"{type(self.obj).__name__} has no log_samples(table, step)")
        return self._log_samples(table, step)

    def finish(self, *, exit_code: int = 0) -> None:
        if self._core:
            self.obj.finish(exit_code=exit_code)
        else:
            self.obj.finish()


def _complete(obj: Any, where: str) -> Backend:
    """``obj`` as a :class:`Backend`: itself when it is one, else completed with the defaults."""
    if not (callable(getattr(obj, "log", None)) and callable(getattr(obj, "finish", None))):
        raise TypeError(f"{where} needs log(metrics, step) and finish(); got {type(obj).__name__}")
    if (
        isinstance(obj, Backend)
        and isinstance(obj.name, str)
        and isinstance(obj.keeps_records, bool)
        and (obj.max_step is None or (isinstance(obj.max_step, int) and not isinstance(obj.max_step, bool)))
    ):
        return obj
    return _Completed(obj)


#: name -> factory of the backends ``Tracker(backends=[...])`` accepts by name (filled by tracker.py).
_FACTORIES: dict[str, Callable[..., Any]] = {}


def register_backend(name: str, factory: Callable[[], Any], *, replace: bool = False) -> None:
    """Make ``name`` a backend name of ``Tracker(backends=[...])``.

    Parameters
    ----------
    name : str
        A non-empty name without ``,`` or spaces (``backends="jsonl,name"`` splits at commas).
    factory : callable
        Called without arguments for each tracker that names the backend; returns a
        :class:`Backend` (or an object with ``log(metrics, step)`` and ``finish()``). A
        backend class with default options is a factory.
    replace : bool, keyword-only
        Replace the factory of a name already registered (else a ``ValueError``).

    Examples
    --------
    >>> class Printer:
    ...     name, max_step = "printer", None
    ...     def start(self, run): return []
    ...     def log(self, metrics, step): print(step, metrics)
    ...     def finish(self, *, exit_code=0): pass
    >>> register_backend("printer", Printer)  # doctest: +SKIP
    >>> Tracker("demo", "run1", backends=["jsonl", "printer"])  # doctest: +SKIP
    """
    if not isinstance(name, str) or not name or any(c in name for c in ", \t\n"):
        raise ValueError(f"name must be a non-empty str without commas or spaces; got {name!r}")
    if not callable(factory):
        raise TypeError(f"factory must be callable (e.g. a backend class); got {type(factory).__name__}")
    if name in _FACTORIES and not replace:
        raise ValueError(f"the backend name {name!r} is registered already; pass replace=True to replace it")
    _FACTORIES[name] = factory


def backend_names() -> tuple[str, ...]:
    """The names ``Tracker(backends=[...])`` accepts: the built-in ones and those registered."""
    return tuple(sorted(_FACTORIES))


def _make_named(name: str, options: Mapping[str, Any]) -> Backend:
    """The backend of a registered ``name``, built by its factory (``options``: the tracker's
    compatibility keywords for that backend, e.g. ``wandb_mode``)."""
    factory = _FACTORIES.get(name)
    if factory is None:
        raise ValueError(f"unknown tracking backend {name!r}; known: {', '.join(backend_names())}")
    return _complete(factory(**options), f"the factory of backend {name!r} returned an object that")

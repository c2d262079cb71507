"""The ``trackio`` backend: trackio's local SQLite store (trackio's own client)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rlmetrics import keys as K
from rlmetrics.tracking._backend import MAX_STEP_INT64, RunInfo, _check_init_kwargs, _check_name_option

if TYPE_CHECKING:
    from rlmetrics.training.samples import SampleTable

__all__ = ["TrackioBackend"]


class TrackioBackend:
    """A trackio run: its local SQLite store (``$TRACKIO_DIR``, default ``$HF_HOME/trackio``), not
    ``log_dir``; sample tables as ``trackio.Table``.

    trackio keeps one current run per process: ``trackio.init`` finishes the one before, so this
    backend and TRL's ``report_to="trackio"`` should not run side by side.

    Parameters
    ----------
    project : str, optional, keyword-only
        The trackio project (default: the tracker's ``project``; the run is its ``experiment``).
    init_kwargs : mapping, optional, keyword-only
        Extra ``trackio.init`` arguments (``space_id``, ``group``, ``auto_log_gpu``, ...); they win
        over the above.

    Examples
    --------
    >>> TrackioBackend(init_kwargs={"auto_log_gpu": False})
    TrackioBackend(project=None)
    """

    name = "trackio"
    max_step = MAX_STEP_INT64  # SQLite's INTEGER
    keeps_records = True  # trackio.log may queue the dict

    def __init__(self, *, project: str | None = None, init_kwargs: Mapping[str, Any] | None = None) -> None:
        self.project = _check_name_option(project, "project")
        self.init_kwargs = _check_init_kwargs(init_kwargs, "init_kwargs")
        self.run: Any = None
        self._trackio: Any = None

    def __repr__(self) -> str:
        return f"TrackioBackend(project={self.project!r})"

    def start(self, run: RunInfo) -> list[str]:
        try:
            import trackio
        except ImportError:
            raise ImportError("the trackio backend needs trackio: pip install 'rlmetrics[trackio]'") from None
        options: dict[str, Any] = {"project": self.project or run.project, "name": run.experiment}
        if run.config:
            options["config"] = dict(run.config)
        if run.resume:
            options["resume"] = "allow"
        options.update(self.init_kwargs)
        self._trackio = trackio
        self.run = trackio.init(**options)
        return []

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def log_samples(self, table: SampleTable, step: int) -> None:
        """The table as a ``trackio.Table`` under the key ``samples``."""
        columns = table.as_dict()
        data = [list(values) for values in zip(*columns.values(), strict=True)]
        self.run.log({K.SAMPLES_TABLE: self._trackio.Table(columns=list(columns), data=data)}, step=step)

    def finish(self, *, exit_code: int = 0) -> None:
        if self.run is None:
            return
        self.run.finish()
        # no longer trackio's current run (else its exit hook finishes it a second time)
        current = getattr(getattr(self._trackio, "context_vars", None), "current_run", None)
        if current is not None and current.get() is self.run:
            current.set(None)

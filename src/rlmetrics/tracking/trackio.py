"""The ``trackio`` backend: trackio's local SQLite store (trackio's own client)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlmetrics.tracking._backend import MAX_STEP_INT64


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

"""The ``wandb`` backend: a W&B run, online or offline (wandb's own client)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlmetrics.tracking._backend import MAX_STEP_INT64
from rlmetrics.tracking._files import _write_atomic


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

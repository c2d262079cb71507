"""The ``wandb`` backend: a W&B run, online or offline (wandb's own client)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rlmetrics import keys as K
from rlmetrics.tracking._backend import MAX_STEP_INT64, RunInfo, _check_init_kwargs, _check_name_option
from rlmetrics.tracking._files import _write_atomic

if TYPE_CHECKING:
    from rlmetrics.training.samples import SampleTable

__all__ = ["WandbBackend"]

#: The modes ``wandb.init`` takes.
WANDB_MODES = ("online", "offline", "disabled", "shared")


class WandbBackend:
    """A W&B run in ``run_dir/wandb`` (sample tables as ``wandb.Table``); with ``resume=True`` the
    tracker continues the W&B run whose id the run directory keeps.

    Parameters
    ----------
    project, name : str, optional, keyword-only
        The W&B project and run name (default: the tracker's ``project`` and ``experiment``).
    mode : {"online", "offline", "disabled", "shared"}, optional, keyword-only
        Default: W&B's own (``WANDB_MODE``).
    init_kwargs : mapping, optional, keyword-only
        Extra ``wandb.init`` arguments (``entity``, ``tags``, ...); they win over the above.

    Examples
    --------
    >>> WandbBackend(mode="offline", init_kwargs={"tags": ["grpo"]})
    WandbBackend(mode='offline')
    >>> WandbBackend(mode="offfline")
    Traceback (most recent call last):
    ...
    ValueError: mode must be one of ('online', 'offline', 'disabled', 'shared') or None; got 'offfline'
    """

    name = "wandb"
    max_step = MAX_STEP_INT64
    keeps_records = True  # wandb.log may hold the dict until it is sent
    #: The run id, kept in the run directory so that ``resume=True`` continues the same W&B run.
    ID_FILE = "wandb-run-id"

    def __init__(
        self,
        *,
        project: str | None = None,
        name: str | None = None,
        mode: str | None = None,
        init_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if mode is not None and mode not in WANDB_MODES:
            raise ValueError(f"mode must be one of {WANDB_MODES} or None; got {mode!r}")
        self.project = _check_name_option(project, "project")
        self.run_name = _check_name_option(name, "name")
        self.mode = mode
        self.init_kwargs = _check_init_kwargs(init_kwargs, "init_kwargs")
        self.run: Any = None

    def __repr__(self) -> str:
        return f"WandbBackend(mode={self.mode!r})"

    def start(self, run: RunInfo) -> list[str]:
        try:
            import wandb
        except ImportError:
            raise ImportError("the wandb backend needs wandb: pip install 'rlmetrics[wandb]'") from None
        options: dict[str, Any] = {
            "project": self.project or run.project,
            "name": self.run_name or run.experiment,
            "dir": str(run.run_dir),
        }
        if run.config:
            options["config"] = dict(run.config)
        if self.mode is not None:
            options["mode"] = self.mode
        id_file = run.run_dir / self.ID_FILE
        if run.resume and "id" not in self.init_kwargs and id_file.is_file():
            options["id"] = id_file.read_text(encoding="utf-8").strip()
            options["resume"] = "allow"
        options.update(self.init_kwargs)
        self.run = wandb.init(**options)
        run_id = getattr(self.run, "id", None)
        if isinstance(run_id, str) and run_id:
            _write_atomic(id_file, run_id + "\n")
        return []

    def log(self, metrics: dict[str, float], step: int) -> None:
        self.run.log(metrics, step=step)

    def log_samples(self, table: SampleTable, step: int) -> None:
        """The table as a ``wandb.Table`` under the key ``samples`` (W&B keeps the steps of a run
        increasing: log the samples of a step before the metrics of a later one)."""
        import wandb

        columns = table.as_dict()
        data = [list(values) for values in zip(*columns.values(), strict=True)]
        self.run.log({K.SAMPLES_TABLE: wandb.Table(columns=list(columns), data=data)}, step=step)

    def finish(self, *, exit_code: int = 0) -> None:
        if self.run is not None:
            self.run.finish(exit_code=exit_code)

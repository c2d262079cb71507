"""rlmetrics in TRL's ``GRPOTrainer``: one callback that mirrors the run and adds exact group statistics.

:class:`RLMetricsCallback` is a ``transformers.TrainerCallback``. On the main process it writes
every record the trainer logs (``on_log``: TRL's ``reward``, ``kl``, ``entropy``,
``completions/...``, the Trainer's ``loss``, ``grad_norm``, ``learning_rate``, evaluation
``eval_...``) into a :class:`rlmetrics.Tracker` run (``metrics.jsonl`` by default), with the
trainer's ``global_step``; ``rlmetrics report`` and ``rlmetrics diagnose`` read that run, their
rules knowing TRL's names (:mod:`rlmetrics.health.signals`). With ``monitor=True`` the live
:class:`rlmetrics.HealthMonitor` runs on it (each finding a ``HealthWarning`` and a
``health/<kind>`` record). The tracker is finished ``on_train_end``.

Stopping a lost run: give the monitor an action policy
(``monitor=HealthMonitor(actions={"nonfinite": "stop", "error": "stop"})``). When it says stop, the
callback sets ``control.should_training_stop`` and ``control.should_save`` (the Trainer saves a
checkpoint of that step, then ends the loop), warns once (a ``HealthWarning`` naming the finding)
and logs a ``health_action/<kind>`` record. A ``"raise"`` action stops the same way, and
``trainer.train()`` then raises :class:`rlmetrics.errors.RunStopped` from ``on_train_end``, once the
checkpoint is saved and the run closed.

Exact group statistics. TRL logs, per logging step, the mean over the generation batches of
the window of each batch's ``reward_std`` and ``frac_reward_zero_std``; and no per-group
statistic beyond that fraction. A callback's hooks are given no rewards, so the callback reads
them from the trainer it is attached to (``callback.attach(trainer)``): after every micro-step
it takes the rewards of a new generation batch from the trainer's completion log
(``trainer._logs["rewards"]``, each reward function's values for the whole batch, already
gathered from every process by TRL, in TRL's order: consecutive blocks of ``num_generations``
completions of one prompt), weighs them as TRL does (``reward_weights``; NaN where every
function returned ``None``), and at the next log adds, over every completion of the window,

* verl's definitions under ``grpo/`` (:func:`rlmetrics.compute_group_metrics`: groups with
  zero spread, all solved / none solved at ``solved_threshold``, the mean within-group std,
  the group sizes), unscorable completions left out;
* TRL's definitions under ``grpo-trl/`` (``reward``, ``reward_std`` over the whole window,
  ``frac_reward_zero_std``; ``definition="trl"``), in float64.

Nothing of TRL is patched and no collective is issued (the rewards are gathered already).
Two private attributes of the trainer are read (``_logs``, and ``_metrics`` to see that a new
batch was scored): if a TRL release changes them, or the batch does not have TRL 1.16's layout
(checked: the prompts of each block are equal), the group statistics are switched off with
one warning and the mirroring goes on. Tested with TRL 1.16.0 and transformers 5.24.
"""

from __future__ import annotations

import inspect
import math
import numbers
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlmetrics import keys as K
from rlmetrics.errors import HealthWarning, TrackingWarning
from rlmetrics.policy.groups import compute_group_metrics
from rlmetrics.tracking import Tracker
from rlmetrics.tracking.tracker import _BACKEND_KEYWORDS

try:
    from transformers import TrainerCallback
except ImportError:  # pragma: no cover - exercised in a process without transformers
    raise ImportError(
        "rlmetrics.integrations.trl needs transformers and trl: pip install 'rlmetrics[trl]'"
    ) from None

__all__ = ["RLMetricsCallback"]

#: Tracker options the callback passes through (everything but what it sets itself).
_TRACKER_OPTIONS = frozenset(inspect.signature(Tracker).parameters) - {
    "project",
    "experiment",
    "backends",
    "config",
    "log_dir",
    "monitor",
    "backend_options",
} | frozenset(_BACKEND_KEYWORDS)

_TRAIN = "train"


class _GroupLayoutError(RuntimeError):
    """The trainer's rewards are not laid out as TRL 1.16 lays them out."""


class RLMetricsCallback(TrainerCallback):
    """Mirror a TRL ``GRPOTrainer`` run into an rlmetrics run, with the live health monitor.

    Parameters
    ----------
    project : str
        The run's project (default ``"trl"``).
    experiment : str, optional
        The run's name; default the trainer's ``run_name`` (path separators become ``_``), else
        the name of its ``output_dir``.
    backends : str or sequence, keyword-only
        :class:`rlmetrics.Tracker` backends (default ``("jsonl",)``).
    log_dir : str or Path, optional, keyword-only
        Root of the run's files; default ``<output_dir>/rlmetrics``. The run is
        ``log_dir/project/experiment/`` (:attr:`run_dir`).
    monitor : bool or monitor, keyword-only
        ``True`` (default): a :class:`rlmetrics.HealthMonitor` with its defaults; ``False``:
        none; or a monitor object, passed to the tracker as is. A monitor with an action
        policy (``HealthMonitor(actions=...)``) stops the training when it says so (its
        ``defer_raise`` is set: a ``"raise"`` is raised at the end of training, after the
        checkpoint).
    save_on_stop : bool, keyword-only
        When the monitor stops the run, save a checkpoint of that step first
        (``control.should_save``; default ``True``).
    group_metrics : bool, keyword-only
        Add the exact group statistics of each logging window (default ``True``; needs
        :meth:`attach`).
    solved_threshold : float, keyword-only
        A completion is solved when its (weighted) reward is ``>=`` this (``grpo/frac_all_solved``,
        ``grpo/frac_none_solved``; default 1.0).
    log_config : bool, keyword-only
        Log the trainer's arguments (``args.to_dict()``, tokens masked) as the run's config
        (default ``True``).
    **tracker_options
        Passed to :class:`rlmetrics.Tracker` (``fsync``, ``nonfinite``, ``console_keys``,
        ``wandb_mode``, ``trackio_kwargs``, ...).

    Attributes
    ----------
    tracker : Tracker or None
        The open run on the main process (``None`` before training, and on other processes).

    Notes
    -----
    Only the main process (``state.is_world_process_zero``) writes. A logged value of ``None``
    (TRL logs one for a metric with no valid value in the window) is written as NaN; values that
    are not numbers are left out, with one warning per key. Where TRL logs several records at
    one step (the last training step's, then the summary ``train_runtime`` ...), each is a line
    of its own with that step.

    Examples
    --------
    >>> from rlmetrics.integrations.trl import RLMetricsCallback
    >>> callback = RLMetricsCallback(experiment="grpo-qwen", nonfinite="keep")
    >>> callback.tracker is None
    True

    With a trainer (``trainer = GRPOTrainer(...)``)::

        RLMetricsCallback().attach(trainer)
        trainer.train()          # then: rlmetrics diagnose <output_dir>/rlmetrics/trl/<run>
    """

    def __init__(
        self,
        project: str = "trl",
        experiment: str | None = None,
        *,
        backends: str | Sequence[Any] = ("jsonl",),
        log_dir: str | Path | None = None,
        monitor: Any = True,
        group_metrics: bool = True,
        solved_threshold: float = 1.0,
        log_config: bool = True,
        save_on_stop: bool = True,
        **tracker_options: Any,
    ) -> None:
        _check_options(project, experiment, tracker_options, group_metrics, log_config, solved_threshold)
        if not isinstance(save_on_stop, bool):
            raise TypeError(f"save_on_stop must be a bool; got {type(save_on_stop).__name__}")
        self.save_on_stop: bool = save_on_stop
        self.project: str = project
        self.experiment: str | None = experiment
        self.backends: str | Sequence[Any] = backends
        self.log_dir: str | Path | None = log_dir
        self.monitor: Any = monitor
        self.solved_threshold: float = float(solved_threshold)
        self.log_config: bool = log_config
        self.tracker_options: dict[str, Any] = tracker_options
        self.tracker: Tracker | None = None
        self.trainer: Any = None
        self._live: Any = None  # the monitor given to the tracker (kept if the tracker drops it)
        self._stopped = False
        self._groups = _GroupWindow(enabled=group_metrics)
        self._numeric = _NumericRecord()

    @property
    def group_metrics(self) -> bool:
        """Whether the exact group statistics are added (False once they were switched off)."""
        return self._groups.enabled

    @group_metrics.setter
    def group_metrics(self, value: bool) -> None:
        self._groups.enabled = bool(value)

    # --- set-up ----------------------------------------------------------------------------------

    def attach(self, trainer: Any) -> RLMetricsCallback:
        """Register with ``trainer`` (``trainer.add_callback``) and read its rewards; returns self.

        Examples
        --------
        >>> class Trainer:  # the two things attach needs of a GRPOTrainer
        ...     def __init__(self):
        ...         self.callbacks = []
        ...     def add_callback(self, callback):
        ...         self.callbacks.append(callback)
        >>> trainer = Trainer()
        >>> callback = RLMetricsCallback().attach(trainer)
        >>> trainer.callbacks == [callback], callback.trainer is trainer
        (True, True)
        """
        if not callable(getattr(trainer, "add_callback", None)):
            raise TypeError(f"trainer must be a transformers/TRL Trainer; got {type(trainer).__name__}")
        handler = getattr(trainer, "callback_handler", None)
        if self not in getattr(handler, "callbacks", ()):
            trainer.add_callback(self)
        self.trainer = trainer
        return self

    @property
    def run_dir(self) -> Path | None:
        """The run's directory (``log_dir/project/experiment``), once training has begun."""
        return None if self.tracker is None else self.tracker.run_dir

    def _open(self, args: Any) -> Tracker:
        if self.tracker is not None and not self.tracker._finished:
            return self.tracker
        output_dir = Path(getattr(args, "output_dir", None) or ".")
        log_dir = Path(self.log_dir) if self.log_dir is not None else output_dir / "rlmetrics"
        config = args.to_dict() if self.log_config and callable(getattr(args, "to_dict", None)) else None
        self._live, self._stopped = _live_monitor(self.monitor), False
        if isinstance(getattr(self._live, "defer_raise", None), bool):
            self._live.defer_raise = True  # raised on_train_end, after the checkpoint
        self.tracker = Tracker(
            self.project,
            _experiment_name(self.experiment, args, output_dir),
            self.backends,
            config,
            log_dir=log_dir,
            monitor=self._live,
            **self.tracker_options,
        )
        return self.tracker

    # --- transformers hooks ------------------------------------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        self._open(args)
        if self.group_metrics and self.trainer is None:
            warnings.warn(
                "RLMetricsCallback: the exact group statistics need the trainer: register the callback "
                "with RLMetricsCallback(...).attach(trainer), or pass group_metrics=False; the trainer's "
                "records are mirrored all the same",
                TrackingWarning,
                stacklevel=2,
            )
        self._groups.start(self.trainer)

    def on_substep_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            self._groups.collect(self.trainer)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            self._groups.collect(self.trainer)

    def on_log(
        self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if not state.is_world_process_zero or logs is None:
            return
        tracker = self._open(args)
        record = self._numeric(logs)
        if _training(self.trainer):
            record.update(self._groups.take(self.trainer, self.solved_threshold))
        tracker.log(record, step=int(state.global_step))
        self._act(tracker, control, int(state.global_step))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.tracker is not None:
            self.tracker.finish()
        raise_pending = getattr(self._live, "raise_pending", None)
        if callable(raise_pending):
            raise_pending()  # a "raise" action: RunStopped out of trainer.train(), the run saved

    def _act(self, tracker: Tracker, control: Any, step: int) -> None:
        """Log the monitor's action records; when it says stop, stop the training (a checkpoint first)."""
        pop = getattr(self._live, "pop_action_records", None)
        records = pop() if callable(pop) else None
        if records:
            tracker.log(records, step=step)
        if self._stopped or not getattr(self._live, "should_stop", False):
            return
        self._stopped = True
        if control is not None:
            control.should_training_stop = True
            if self.save_on_stop:
                control.should_save = True
        reason = getattr(self._live, "stop_reason", None)
        saved = "a checkpoint of this step is saved, then " if self.save_on_stop else ""
        warnings.warn(
            f"rlmetrics health: stopping the training at step {step} on {getattr(reason, 'kind', '?')} "
            f"({getattr(reason, 'severity', '?')}) from step {getattr(reason, 'step', '?')}: {saved}the "
            f"trainer ends its loop",
            HealthWarning,
            stacklevel=3,
        )


# --- the callback's pieces ---------------------------------------------------------------------


def _check_options(
    project: Any,
    experiment: Any,
    tracker_options: Mapping[str, Any],
    group_metrics: Any,
    log_config: Any,
    solved_threshold: Any,
) -> None:
    """The callback's arguments, or an error naming the bad one."""
    if not isinstance(project, str) or not project:
        raise TypeError(f"project must be a non-empty str; got {project!r}")
    if experiment is not None and (not isinstance(experiment, str) or not experiment):
        raise TypeError(f"experiment must be a non-empty str or None; got {experiment!r}")
    unknown = sorted(set(tracker_options) - _TRACKER_OPTIONS)
    if unknown:
        raise TypeError(
            f"unknown option(s) {', '.join(map(repr, unknown))}; Tracker options are "
            f"{', '.join(sorted(_TRACKER_OPTIONS))}"
        )
    for name, flag in (("group_metrics", group_metrics), ("log_config", log_config)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool; got {type(flag).__name__} {flag!r}")
    if isinstance(solved_threshold, bool) or not isinstance(solved_threshold, numbers.Real):
        raise TypeError(f"solved_threshold must be a number; got {solved_threshold!r}")
    if not math.isfinite(solved_threshold):
        raise ValueError(f"solved_threshold must be finite; got {solved_threshold}")


def _experiment_name(experiment: str | None, args: Any, output_dir: Path) -> str:
    """The run's name: the one given, else the trainer's ``run_name``, else its output folder's."""
    name = experiment or getattr(args, "run_name", None) or output_dir.resolve().name or "run"
    # a run name such as "org/model-grpo" is one folder name here (the Tracker refuses separators)
    return str(name.replace("/", "_").replace("\\", "_").strip(".") or "run")


def _live_monitor(monitor: Any) -> Any:
    """The tracker's monitor: ``True`` a default :class:`HealthMonitor`, a false value none."""
    if monitor is True:
        from rlmetrics.health.monitor import HealthMonitor

        return HealthMonitor()
    return monitor or None


def _training(trainer: Any) -> bool:
    """Whether the trainer's model is in training mode (an evaluation log has no new rewards)."""
    model = getattr(trainer, "model", None)
    return bool(getattr(model, "training", True))


class _NumericRecord:
    """A logged record as the tracker takes it: numbers kept, ``None`` as NaN, the rest left out
    with one warning per key."""

    def __init__(self) -> None:
        self._skipped_keys: set[Any] = set()

    def __call__(self, logs: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in logs.items():
            if not isinstance(key, str) or key in K.TRACKING_FIELDS:
                why = f"{key!r} is reserved by the tracker" if isinstance(key, str) else "is not a string"
                self._skip(key, f"logged key {why}")
            elif value is None:
                out[key] = math.nan
            elif isinstance(value, numbers.Real) or (
                callable(getattr(value, "numel", None)) and value.numel() == 1
            ):
                out[key] = value
            else:
                self._skip(key, f"logged value {key!r} is not a number ({type(value).__name__})")
        return out

    def _skip(self, key: Any, why: str) -> None:
        if key not in self._skipped_keys:
            self._skipped_keys.add(key)
            warnings.warn(
                f"RLMetricsCallback: {why}; it is left out of the rlmetrics run",
                TrackingWarning,
                stacklevel=4,
            )


class _GroupWindow:
    """The weighted rewards of the generation batches of one logging window, read from the
    trainer after each micro-step, and their exact group statistics at the log. Any surprise in
    the trainer's layout switches them off, with one warning."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        # the weighted rewards of each generation batch since the last log
        self._window: list[np.ndarray] = []
        # the trainer's count of generation batches since its last log, as last read
        self._seen: int = 0
        self._group_size: int = 0

    def start(self, trainer: Any) -> None:
        """A new training run: an empty window, the trainer's count as it is now."""
        self._window, self._seen = [], self._generation_count(trainer)

    def collect(self, trainer: Any) -> None:
        """Take the rewards of a generation batch scored since the last look."""
        n = self._generation_count(trainer)
        if n <= self._seen or not self.enabled:
            return
        try:
            if n > self._seen + 1:
                raise _GroupLayoutError(
                    f"{n - self._seen} generation batches were scored between two micro-steps; only the "
                    "last one's rewards can be read"
                )
            rewards, self._group_size = _generation_rewards(trainer)
            self._window.append(rewards)
            self._seen = n
        except Exception as err:
            self._switch_off(f"{type(err).__name__}: {err}")

    def take(self, trainer: Any, solved_threshold: float) -> dict[str, float]:
        """The window's statistics at a training log; the window then starts again."""
        self.collect(trainer)
        out = self._metrics(solved_threshold)
        # TRL empties its per-log lists right after this hook: its generation count restarts
        self._window, self._seen = [], 0
        return out

    def _generation_count(self, trainer: Any) -> int:
        """How many generation batches TRL has scored since its last log (its ``reward`` list)."""
        if not self.enabled or trainer is None:
            return 0
        try:
            return len(trainer._metrics[_TRAIN].get(K.TRL_REWARD, ()))
        except (AttributeError, KeyError, TypeError) as err:
            self._switch_off(f"the trainer has no TRL metrics store ({type(err).__name__}: {err})")
            return 0

    def _metrics(self, solved_threshold: float) -> dict[str, float]:
        if not self._window or not self.enabled:
            return {}
        try:
            return _window_metrics(self._window, self._group_size, solved_threshold)
        except Exception as err:
            self._switch_off(f"{type(err).__name__}: {err}")
            return {}

    def _switch_off(self, why: str) -> None:
        self.enabled = False
        self._window = []
        warnings.warn(
            f"RLMetricsCallback: the exact group statistics are switched off ({why}); the trainer's own "
            "records are still mirrored",
            TrackingWarning,
            stacklevel=4,
        )


def _generation_rewards(trainer: Any) -> tuple[np.ndarray, int]:
    """The weighted reward of every completion of the newest generation batch, in TRL's order,
    and the group size."""
    t = trainer
    names = list(t.reward_func_names)
    if len(set(names)) != len(names):
        raise _GroupLayoutError(f"two reward functions share a name ({names}): their logs are merged")
    # the completion log keeps the newest generation batch (TRL: maxlen=generation_batch_size)
    n = int(t.args.generation_batch_size)
    columns = [np.asarray(list(t._logs["rewards"][name])[-n:], dtype=np.float64) for name in names]
    size = int(t.num_generations)
    if any(c.shape != (n,) for c in columns) or n == 0 or n % size:
        raise _GroupLayoutError(
            f"reward logs of lengths {[c.shape[0] for c in columns]} for a generation batch of {n} "
            f"in groups of {size}"
        )
    prompts = list(t._logs["prompt"])[-n:]
    if len(prompts) == n and any(prompts[i] != prompts[i - i % size] for i in range(n)):
        raise _GroupLayoutError(f"the completions are not in consecutive groups of {size} per prompt")
    weights = np.asarray(t.reward_weights.detach().cpu().double().numpy(), dtype=np.float64)
    per_func = np.stack(columns, axis=1)
    rewards = np.nansum(per_func * weights, axis=1)
    rewards[np.isnan(per_func).all(axis=1)] = np.nan
    return rewards, size


def _window_metrics(window: list[np.ndarray], group_size: int, solved_threshold: float) -> dict[str, float]:
    """TRL's definitions under ``grpo-trl/`` and verl's under ``grpo/`` (scorable completions only)
    over every completion of the window, each batch's groups numbered apart."""
    rewards = np.concatenate(window)
    sizes = [len(w) // group_size for w in window]
    offsets = np.cumsum([0, *sizes[:-1]])
    uids = np.concatenate([off + np.arange(len(w)) // group_size for off, w in zip(offsets, window)])
    out = compute_group_metrics(uids, rewards, definition="trl", prefix=K.GRPO_TRL_PREFIX)
    scorable = ~np.isnan(rewards)
    if scorable.any():
        out.update(
            compute_group_metrics(uids[scorable], rewards[scorable], solved_threshold=solved_threshold)
        )
    return out

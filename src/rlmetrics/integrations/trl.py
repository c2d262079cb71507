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
  zero spread, all solved / none solved at ``solved_threshold``, the training pass rates
  ``grpo/pass@1`` and ``grpo/pass@<num_generations>`` (the unbiased estimator over each group's
  completions solved at ``solved_threshold``, over the groups with that many scorable ones), the
  mean within-group std, the group sizes), unscorable completions left out;
* TRL's definitions under ``grpo-trl/`` (``reward``, ``reward_std`` over the whole window,
  ``frac_reward_zero_std``; ``definition="trl"``), in float64.

The same window gives the reward components (:func:`rlmetrics.compute_reward_component_metrics`
over each function's values, ``reward_components=``); with ``group_by=<dataset column>`` the group
statistics and the components per category (each completion's label from TRL's ``_logs["extra"]``,
what a reward function logged with ``log_extra``, else the training dataset's value for its prompt,
indexed once), and with ``split_by_outcome=True`` the components of the completions at or above
``solved_threshold`` and of the others. TRL keeps no per-completion tokens for a callback, so the
token-level families (lengths, entropy, advantages per category) are not computed here. The
entropy in particular (checked in TRL 1.16.0's ``GRPOTrainer``): the token entropies exist only
inside ``_compute_loss``, per micro-batch of the optimisation (not of the generation batch the
completion log holds), and only their global masked mean is kept (``_metrics["entropy"]``, the
logged ``entropy``); ``_logs`` holds no per-completion entropy, so the entropy per category or
outcome needs the user's own :func:`rlmetrics.compute_entropy_metrics` (a subclass overriding
``_compute_loss``), not this callback.

Text and samples. From the same completion log (``_logs["prompt"]``, ``_logs["completion"]``, the
decoded texts TRL gathers for its own ``log_completions``), every logging window also gets the text
statistics of all its completions (:func:`rlmetrics.compute_text_metrics` on the decoded text,
``text/...``: loops, distinct-n, compression and non-word ratios, empty responses, thinking spans,
the ``format_pattern=`` check; the generation batches merged exactly, ``text_metrics=``), and the
run a sample table of the window's last generation batch (:func:`rlmetrics.select_samples`: the
highest, lowest and median weighted reward and random rows, ``sample_rows=`` and ``sample_bytes=``;
:meth:`Tracker.log_samples <rlmetrics.tracking.Tracker.log_samples>` writes it to every backend,
``samples.jsonl`` beside ``metrics.jsonl``). A conversational completion is its messages' text
joined, a conversational prompt ``role: content`` lines. What TRL does not keep cannot be logged:
its completion log holds no token ids and no finish reason, so the rows' ``length`` and
``stop_reason`` are empty, lengths are in characters and there are no ``text/stop_reason/...`` rates
(TRL's own ``completions/clipped_ratio`` is mirrored); unscorable completions (every reward function
returned ``None``) are left out of the sample table, not of the text statistics.

Nothing of TRL is patched and no collective is issued (the rewards are gathered already).
Two private attributes of the trainer are read (``_logs``, and ``_metrics`` to see that a new
batch was scored): if a TRL release changes them, or the batch does not have TRL 1.16's layout
(checked: the prompts of each block are equal), the group statistics are switched off with
one warning and the mirroring goes on. Tested with TRL 1.16.0 and transformers 5.24.
"""

from __future__ import annotations

import inspect
import json
import math
import numbers
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from rlmetrics import keys as K
from rlmetrics._core.categories import category_codes, limit_categories
from rlmetrics._core.checks import check_int
from rlmetrics.errors import HealthWarning, TrackingWarning, UndefinedMetricWarning
from rlmetrics.policy.groups import compute_group_metrics
from rlmetrics.tracking import Tracker
from rlmetrics.tracking.tracker import _BACKEND_KEYWORDS
from rlmetrics.training.categories import DEFAULT_MAX_CATEGORIES, check_max_categories, warn_folded
from rlmetrics.training.rewards import compute_reward_component_metrics
from rlmetrics.training.samples import MIN_CELL_BYTES, SampleTable, select_samples
from rlmetrics.training.text import _check_text_options, text_statistics

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


class _CategoryError(RuntimeError):
    """The completions' categories cannot be read (the rest of the window statistics go on)."""


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
        ``grpo/frac_none_solved``, ``grpo/pass@1``, ``grpo/pass@<num_generations>``; default 1.0).
    log_config : bool, keyword-only
        Log the trainer's arguments (``args.to_dict()``, tokens masked) as the run's config
        (default ``True``).
    reward_components : bool, keyword-only
        Add :func:`rlmetrics.compute_reward_component_metrics` of the window: each reward
        function's values over every completion (``None`` not given), weighted by
        ``reward_weights`` for the share each decides, under
        ``reward_components/<func>/{mean,std,max,min,decides_frac}`` (default ``True``; needs
        :meth:`attach`).
    group_by : str, optional, keyword-only
        A dataset column (``"data_source"``): the group statistics and the reward components also
        per category, ``by_<column>/<category>/...``. Each completion's label is the column's
        value that a reward function logged with TRL's ``log_extra`` (``log_extra(column,
        kwargs[column])``), else the training dataset's value for its prompt. A prompt the
        dataset lacks or holds with two labels switches the per-category statistics off, with
        one warning.
    split_by_outcome : bool, keyword-only
        The reward components also for the correct (weighted reward ``>= solved_threshold``) and
        the incorrect scorable completions, ``by_outcome/{correct,incorrect}/...`` (default
        ``False``: TRL has no correctness field, the threshold has to fit the rewards).
    max_categories : int, keyword-only
        At most this many categories of ``group_by`` (default 64); the least frequent together as
        ``<other>``, with one warning.
    text_metrics : bool, keyword-only
        Add the text statistics of every completion of the window (``text/...``, default ``True``;
        needs :meth:`attach`).
    text_options : dict, optional, keyword-only
        Keywords of :func:`rlmetrics.compute_text_metrics` (``format_pattern``, ``think_span``,
        ``ngram``, ``loop_repeats``, ``loop_max_period``, ``compression``), checked here.
    sample_rows : int, keyword-only
        Rows of the sample table logged at each training log (default 8: max, min and median
        reward and 5 random rows); 0 logs none. Needs :meth:`attach`.
    sample_bytes : int, keyword-only
        The most UTF-8 bytes of the table's prompts and responses together (default 65536; the
        longest texts are cut first, :func:`rlmetrics.select_samples`).
    **tracker_options
        Passed to :class:`rlmetrics.Tracker` (``nonfinite``, ``resume``; the deprecated backend
        keywords ``fsync``, ``console_keys``, ``wandb_mode``, ``trackio_kwargs`` ... still work, with
        a ``DeprecationWarning``: pass configured backends, ``backends=[JsonlBackend(fsync=True)]``).

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
        reward_components: bool = True,
        group_by: str | None = None,
        split_by_outcome: bool = False,
        max_categories: int = DEFAULT_MAX_CATEGORIES,
        text_metrics: bool = True,
        text_options: Mapping[str, Any] | None = None,
        sample_rows: int = 8,
        sample_bytes: int = 65536,
        **tracker_options: Any,
    ) -> None:
        _check_options(project, experiment, tracker_options, group_metrics, log_config, solved_threshold)
        _check_category_options(reward_components, group_by, split_by_outcome)
        self._text = _TextWindow(text_metrics, text_options, sample_rows, sample_bytes)
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
        self._groups = _GroupWindow(
            enabled=group_metrics or reward_components,
            group_stats=group_metrics,
            components=reward_components,
            group_by=group_by,
            split_by_outcome=split_by_outcome,
            max_categories=check_max_categories(max_categories),
        )
        self._numeric = _NumericRecord()

    @property
    def group_metrics(self) -> bool:
        """Whether the exact group statistics are added (False once they were switched off)."""
        return self._groups.enabled and self._groups.group_stats

    @group_metrics.setter
    def group_metrics(self, value: bool) -> None:
        self._groups.group_stats = bool(value)
        self._groups.enabled = self._groups.group_stats or self._groups.components

    @property
    def group_by(self) -> str | None:
        """The dataset column of the per-category statistics (None once they were switched off)."""
        return self._groups.group_by if self._groups.enabled else None

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
        if (self._groups.enabled or self._text.enabled) and self.trainer is None:
            warnings.warn(
                "RLMetricsCallback: the exact group statistics, reward components, text statistics and "
                "sample tables need the trainer: register the callback with "
                "RLMetricsCallback(...).attach(trainer), or pass group_metrics=False, "
                "reward_components=False, text_metrics=False, sample_rows=0; the trainer's records are "
                "mirrored all the same",
                TrackingWarning,
                stacklevel=2,
            )
        self._groups.start(self.trainer)

        self._text.start(self.trainer)

    def on_substep_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            self._collect()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            self._collect()

    def _collect(self) -> None:
        self._groups.collect(self.trainer)
        self._text.collect(self.trainer, self._groups.newest_labels())

    def on_log(
        self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if not state.is_world_process_zero or logs is None:
            return
        tracker = self._open(args)
        record = self._numeric(logs)
        step = int(state.global_step)
        table = None
        if _training(self.trainer):
            self._collect()
            record.update(self._groups.take(self.trainer, self.solved_threshold))
            text, table = self._text.take(step, int(getattr(args, "seed", 0) or 0))
            record.update(text)
        tracker.log(record, step=step)
        if table is not None and len(table):
            tracker.log_samples(table, step=step)
        self._act(tracker, control, step)

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


def _check_category_options(reward_components: Any, group_by: Any, split_by_outcome: Any) -> None:
    """The per-category and reward-component options, or an error naming the bad one."""
    for name, flag in (("reward_components", reward_components), ("split_by_outcome", split_by_outcome)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool; got {type(flag).__name__} {flag!r}")
    if group_by is None:
        return
    if not isinstance(group_by, str):
        raise TypeError(f"group_by must be a dataset column name or None; got {type(group_by).__name__}")
    if group_by == K.OUTCOME_GROUP and split_by_outcome:
        raise ValueError(f"group_by must differ from {K.OUTCOME_GROUP!r} with split_by_outcome=True")
    try:
        K.category_key("", group_by, "")
    except ValueError:
        raise ValueError(
            f"group_by names the group in the metric keys: ASCII letters, digits, '_', '-' and '.'; "
            f"got {group_by!r}"
        ) from None


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


class _Generation(NamedTuple):
    """One generation batch of the window, in TRL's order (each ``(n,)`` but ``per_func``)."""

    #: the weighted reward of every completion (NaN: unscorable, every function returned None)
    rewards: np.ndarray
    #: ``(n, F)``: each reward function's values, NaN where it returned None
    per_func: np.ndarray
    #: each completion's category (``group_by=``), None without
    labels: np.ndarray | None


class _GroupWindow:
    """The rewards of the generation batches of one logging window, read from the trainer after
    each micro-step, and their exact statistics at the log (the group statistics, the reward
    components, per category). Any surprise in the trainer's layout switches them off, with one
    warning; labels that cannot be read switch off the per-category statistics only."""

    def __init__(
        self,
        *,
        enabled: bool,
        group_stats: bool = True,
        components: bool = False,
        group_by: str | None = None,
        split_by_outcome: bool = False,
        max_categories: int = DEFAULT_MAX_CATEGORIES,
    ) -> None:
        self.enabled = enabled
        self.group_stats = group_stats
        self.components = components
        self.group_by = group_by
        self.split_by_outcome = split_by_outcome
        self.max_categories = max_categories
        # the generation batches since the last log
        self._window: list[_Generation] = []
        # the trainer's count of generation batches since its last log, as last read
        self._seen: int = 0
        self._group_size: int = 0
        self._names: list[str] = []
        self._weights: dict[str, float] = {}
        # prompt -> the dataset's label (None: two labels), built once from the training dataset
        self._index: dict[Any, Any] | None = None

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
            rewards, per_func, self._group_size, self._names, self._weights = _generation_rewards(trainer)
        except Exception as err:
            self._switch_off(f"{type(err).__name__}: {err}")
            return
        self._window.append(_Generation(rewards, per_func, self._labels(trainer, rewards.shape[0])))
        self._seen = n

    def newest_labels(self) -> np.ndarray | None:
        """The categories of the newest generation batch's completions (None: none read)."""
        return self._window[-1].labels if self._window and self.enabled else None

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

    def _labels(self, trainer: Any, n: int) -> np.ndarray | None:
        """The newest batch's category of every completion, or None (the categories switched off)."""
        if self.group_by is None:
            return None
        try:
            return _completion_labels(trainer, self.group_by, n, self._dataset_index)
        except Exception as err:
            self._categories_off(f"{type(err).__name__}: {err}")
            return None

    def _dataset_index(self, trainer: Any) -> dict[Any, Any]:
        if self._index is None:
            self._index = _prompt_index(getattr(trainer, "train_dataset", None), str(self.group_by))
        return self._index

    def _metrics(self, solved_threshold: float) -> dict[str, float]:
        if not self._window or not self.enabled:
            return {}
        labelled = self.group_by is not None and all(g.labels is not None for g in self._window)
        try:
            return _window_metrics(
                self._window,
                self._group_size,
                solved_threshold,
                group_stats=self.group_stats,
                components=self.components,
                names=self._names,
                weights=self._weights,
                group_by=self.group_by if labelled else None,
                split_by_outcome=self.split_by_outcome,
                max_categories=self.max_categories,
            )
        except _CategoryError as err:
            self._categories_off(str(err))
            return self._metrics(solved_threshold)
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

    def _categories_off(self, why: str) -> None:
        column, self.group_by = self.group_by, None
        self._window = [g._replace(labels=None) for g in self._window]
        warnings.warn(
            f"RLMetricsCallback: the statistics per {column!r} are switched off ({why}); the others go on",
            TrackingWarning,
            stacklevel=4,
        )


class _Texts(NamedTuple):
    """The newest generation batch's texts, as the sample table takes them (each ``(n,)``)."""

    prompts: list[str]
    completions: list[str]
    #: the weighted reward of every completion (NaN: unscorable)
    rewards: np.ndarray
    labels: np.ndarray | None


class _TextWindow:
    """The text statistics of the generation batches of one logging window (merged exactly) and
    the newest batch's texts for the sample table, read from TRL's completion log after each
    micro-step. A surprise in the log switches them off, with one warning."""

    def __init__(self, metrics: Any, options: Any, rows: Any, max_bytes: Any) -> None:
        if not isinstance(metrics, bool):
            raise TypeError(f"text_metrics must be a bool; got {type(metrics).__name__} {metrics!r}")
        self.options = _check_text_options(options)  # bad options fail here, before training
        self.rows = check_int(rows, "sample_rows", minimum=0)
        self.max_bytes = check_int(max_bytes, "sample_bytes", minimum=2 * MIN_CELL_BYTES)
        self.metrics = metrics
        self.enabled = metrics or self.rows > 0
        self._stats: Any = None
        self._newest: _Texts | None = None
        self._seen = 0

    def start(self, trainer: Any) -> None:
        self._stats, self._newest = None, None
        self._seen = _batch_count(trainer) if self.enabled else 0

    def collect(self, trainer: Any, labels: np.ndarray | None) -> None:
        """Take the texts of a generation batch scored since the last look."""
        if not self.enabled or trainer is None:
            return
        n = _batch_count(trainer)
        if n <= self._seen:
            return
        missed, self._seen = n - self._seen - 1, n
        try:
            if missed:
                raise _GroupLayoutError(
                    f"{missed + 1} generation batches were scored between two micro-steps; only the last "
                    "one's texts can be read"
                )
            texts = _generation_texts(trainer, labels)
            if self.metrics:
                stats = text_statistics(texts.completions, **self.options)
                self._stats = stats if self._stats is None else self._stats + stats
        except Exception as err:
            self._switch_off(f"{type(err).__name__}: {err}")
            return
        self._newest = texts

    def take(self, step: int, seed: int) -> tuple[dict[str, float], SampleTable | None]:
        """The window's text statistics and the sample table of its newest batch; then a new window."""
        stats, newest = self._stats, self._newest
        self._stats, self._newest, self._seen = None, None, 0  # TRL empties its per-log lists next
        if not self.enabled:
            return {}, None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UndefinedMetricWarning)  # NaN: undefined on these texts
                metrics = stats.finalize() if stats is not None else {}
            table = None
            if newest is not None and self.rows > 0:
                keep = np.flatnonzero(~np.isnan(newest.rewards))  # unscorable: no reward to rank by
                table = select_samples(
                    [newest.prompts[i] for i in keep],
                    [newest.completions[i] for i in keep],
                    newest.rewards[keep],
                    categories=None if newest.labels is None else [str(v) for v in newest.labels[keep]],
                    n_random=max(self.rows - 3, 0),
                    max_rows=self.rows,
                    max_bytes=self.max_bytes,
                    seed=seed,
                    step=step,
                )
        except Exception as err:
            self._switch_off(f"{type(err).__name__}: {err}")
            return {}, None
        return metrics, table

    def _switch_off(self, why: str) -> None:
        self.enabled = False
        self._stats, self._newest = None, None
        warnings.warn(
            f"RLMetricsCallback: the text statistics and sample tables are switched off ({why}); the "
            "trainer's own records are still mirrored",
            TrackingWarning,
            stacklevel=4,
        )


def _batch_count(trainer: Any) -> int:
    """How many generation batches TRL has scored since its last log (0 when it cannot be read)."""
    try:
        return len(trainer._metrics[_TRAIN].get(K.TRL_REWARD, ()))
    except (AttributeError, KeyError, TypeError):
        return 0


def _message_text(content: Any) -> str:
    """A message's ``content`` as text: a string, or the ``text`` of its parts (multimodal)."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return "" if content is None else str(content)


def _as_text(value: Any, *, roles: bool) -> str:
    """A TRL prompt or completion as text: a string as it is, a conversation (a list of messages)
    as its messages' contents (``role: content`` lines with ``roles``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and all(isinstance(m, Mapping) for m in value):
        if roles:
            return "\n".join(f"{m.get('role', '?')}: {_message_text(m.get('content'))}" for m in value)
        return "".join(_message_text(m.get("content")) for m in value)
    raise TypeError(f"a TRL prompt or completion must be a string or a list of messages; got {value!r:.80}")


def _generation_texts(trainer: Any, labels: np.ndarray | None) -> _Texts:
    """The prompts, completions and weighted rewards of the newest generation batch, from TRL's log."""
    t = trainer
    n = int(t.args.generation_batch_size)
    prompts = list(t._logs["prompt"])[-n:]
    completions = list(t._logs["completion"])[-n:]
    if len(prompts) != n or len(completions) != n:
        raise _GroupLayoutError(
            f"the completion log holds {len(prompts)} prompts and {len(completions)} completions for a "
            f"generation batch of {n}"
        )
    names = list(t.reward_func_names)
    columns = [np.asarray(list(t._logs["rewards"][name])[-n:], dtype=np.float64) for name in names]
    if any(c.shape != (n,) for c in columns):
        raise _GroupLayoutError(f"reward logs of lengths {[c.shape[0] for c in columns]} for a batch of {n}")
    weights = np.asarray(t.reward_weights.detach().cpu().double().numpy(), dtype=np.float64)
    per_func = np.stack(columns, axis=1) if columns else np.full((n, 0), np.nan)
    rewards = np.nansum(per_func * weights, axis=1)
    rewards[np.isnan(per_func).all(axis=1)] = np.nan
    return _Texts(
        [_as_text(p, roles=True) for p in prompts],
        [_as_text(c, roles=False) for c in completions],
        rewards,
        labels if labels is not None and labels.shape == (n,) else None,
    )


def _generation_rewards(trainer: Any) -> tuple[np.ndarray, np.ndarray, int, list[str], dict[str, float]]:
    """The weighted reward of every completion of the newest generation batch, in TRL's order,
    each function's values ``(n, F)``, the group size, the functions' names and weights."""
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
    return rewards, per_func, size, names, dict(zip(names, weights.tolist()))


def _prompt_key(prompt: Any) -> Any:
    """A prompt as a dictionary key: a string as it is, a conversation (list of messages) as JSON."""
    if isinstance(prompt, str):
        return prompt
    return json.dumps(prompt, sort_keys=True, default=str)


def _prompt_index(dataset: Any, column: str) -> dict[Any, Any]:
    """The training dataset's ``column`` by prompt (``None`` for a prompt listed with two labels)."""
    names = getattr(dataset, "column_names", None)
    if dataset is None or names is None:
        raise _CategoryError(
            f"the trainer has no training dataset with columns to read {column!r} from; log it from a reward "
            f"function with log_extra({column!r}, kwargs[{column!r}])"
        )
    if column not in names or "prompt" not in names:
        raise _CategoryError(f"the training dataset has no {column!r} and 'prompt' columns (it has {names})")
    index: dict[Any, Any] = {}
    for prompt, label in zip(dataset["prompt"], dataset[column]):
        key = _prompt_key(prompt)
        index[key] = label if index.get(key, label) == label else None
    return index


def _completion_labels(trainer: Any, column: str, n: int, index_of: Any) -> np.ndarray:
    """Each completion's ``column`` of the newest generation batch: what a reward function logged
    with ``log_extra`` (TRL's ``_logs["extra"]``, gathered, in TRL's order), else the dataset's by
    prompt."""
    logged = getattr(trainer, "_logs", {}).get("extra", {}).get(column)
    if logged is not None and len(logged) >= n:
        values = list(logged)[-n:]
        if all(v is not None for v in values):
            return np.asarray(values, dtype=object)
    index = index_of(trainer)
    prompts = list(trainer._logs["prompt"])[-n:]
    if len(prompts) != n:
        raise _CategoryError(f"the completion log holds {len(prompts)} prompts for a batch of {n}")
    labels = []
    for prompt in prompts:
        key = _prompt_key(prompt)
        if key not in index:
            raise _CategoryError(f"a prompt is not in the training dataset: {str(prompt)[:60]!r}")
        if index[key] is None:
            raise _CategoryError(
                f"a prompt has two {column!r} values in the training dataset: {str(prompt)[:60]!r}"
            )
        labels.append(index[key])
    return np.asarray(labels, dtype=object)


def _by_category(labels: np.ndarray, rows: np.ndarray, group: str, metrics: Any) -> dict[str, float]:
    """``metrics(rows of c)`` for each category ``c`` of ``labels[rows]``, under ``category_key``."""
    names, codes = category_codes(labels[rows], int(rows.sum()), where=group)
    where = np.flatnonzero(rows)
    out: dict[str, float] = {}
    for c, category in enumerate(names):
        chosen = np.zeros(rows.shape[0], dtype=bool)
        chosen[where[codes == c]] = True
        out.update({K.category_key(k, group, category): v for k, v in metrics(chosen).items()})
    return out


def _folded_labels(labels: np.ndarray, group: str, max_categories: int) -> np.ndarray:
    """The labels as category names, those beyond ``max_categories`` as ``<other>`` (one warning)."""
    names, codes = category_codes(labels, labels.shape[0], where=group)
    names, codes, folded = limit_categories(names, codes, max_categories, K.OTHER_CATEGORY)
    if folded:
        warn_folded(group, max_categories)
    return np.asarray(names, dtype=object)[codes]


def _window_metrics(
    window: list[_Generation],
    group_size: int,
    solved_threshold: float,
    *,
    group_stats: bool = True,
    components: bool = False,
    names: Sequence[str] = (),
    weights: Mapping[str, float] | None = None,
    group_by: str | None = None,
    split_by_outcome: bool = False,
    max_categories: int = DEFAULT_MAX_CATEGORIES,
) -> dict[str, float]:
    """Over every completion of the window, each batch's groups numbered apart: TRL's group
    definitions under ``grpo-trl/`` and verl's under ``grpo/`` (scorable completions only), the
    reward components; per category of ``group_by`` and per outcome where asked."""
    rewards = np.concatenate([g.rewards for g in window])
    sizes = [len(g.rewards) // group_size for g in window]
    offsets = np.cumsum([0, *sizes[:-1]])
    uids = np.concatenate([off + np.arange(len(g.rewards)) // group_size for off, g in zip(offsets, window)])
    labels = None
    if group_by is not None:
        labels = _folded_labels(np.concatenate([g.labels for g in window]), group_by, max_categories)
    scorable = ~np.isnan(rewards)
    out: dict[str, float] = {}
    if group_stats:
        name = group_by if labels is not None else None
        try:
            out.update(
                compute_group_metrics(
                    uids,
                    rewards,
                    definition="trl",
                    prefix=K.GRPO_TRL_PREFIX,
                    group_by=labels,
                    group_name=name,
                )
            )
            if scorable.any():
                out.update(
                    compute_group_metrics(
                        uids[scorable],
                        rewards[scorable],
                        solved_threshold=solved_threshold,
                        pass_k=sorted({1, group_size}),
                        group_by=None if labels is None else labels[scorable],
                        group_name=name,
                    )
                )
        except ValueError as err:
            if labels is None or "share one category" not in str(err):
                raise
            raise _CategoryError(str(err)) from None
    if components and names:
        per_func = np.concatenate([g.per_func for g in window])

        def reward_components(rows: np.ndarray) -> dict[str, float]:
            parts = {name: per_func[rows, j] for j, name in enumerate(names)}
            return compute_reward_component_metrics(parts, weights=weights)

        everything = np.ones(rewards.shape[0], dtype=bool)
        out.update(reward_components(everything))
        if labels is not None and group_by is not None:
            out.update(_by_category(labels, everything, group_by, reward_components))
        if split_by_outcome and scorable.any():
            outcome = np.where(rewards >= solved_threshold, K.OUTCOME_CORRECT, K.OUTCOME_INCORRECT)
            out.update(_by_category(outcome.astype(object), scorable, K.OUTCOME_GROUP, reward_components))
    return out

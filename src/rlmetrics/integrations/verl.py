"""verl running rlmetrics: its metric functions replaced where its trainers bound them.

verl's trainers bind the metric functions by name (``from verl.trainer.ppo.metric_utils import
compute_data_metrics, ...`` in ``verl/trainer/ppo/ray_trainer.py``, the v1
``trainer_base.py``, ``experimental/separation/ray_trainer.py``; ``reduce_metrics`` from
``verl.utils.metric``), so swapping an import changes nothing. :func:`patch` replaces, in the
current process, every binding of those functions in a loaded verl module, found by identity
(the function objects verl defines, wherever a module bound them), and installs an import hook
that does the same to every verl module imported later, right after it executes. Each verl
function gets a replacement with verl's exact signature that runs rlmetrics' equivalent:

* ``compute_data_metrics``: :func:`rlmetrics.compute_data_metrics` (with the patch's
  ``max_response_length=`` / ``max_prompt_length=``), also per ``data_source`` and per outcome
  (``acc``) where the batch carries them, plus the reward components of verl's
  ``reward_extra_info`` (``by_data_source=``, ``split_by_outcome=``, ``reward_components=``, on by
  default), the training pass rates of the GRPO groups (``group_metrics=``: ``grpo/pass@k``,
  ``grpo/frac_all_solved``, ``grpo/frac_none_solved``, the within-group reward spread, per
  ``data_source`` too), the off-policy staleness metrics, and the policy entropy per data source
  and outcome (``entropy_metrics=``: verl drops the token entropies before its data metrics, so
  the trainers' ``_compute_old_log_prob`` is wrapped to keep each response's mean entropy in
  ``non_tensor_batch["rlmetrics_entropy"]``);
* ``compute_timing_metrics``, ``compute_variance_proxy_metrics``, ``bootstrap_metric``,
  ``calc_maj_val``: the rlmetrics functions of the same names;
* ``compute_throughout_metrics``: :func:`rlmetrics.compute_throughput_metrics` (``perf/mfu``
  with ``peak_flops=`` and ``flops_per_token=`` or ``num_params=``);
* ``process_validation_metrics``: :func:`rlmetrics.process_validation_metrics` (verl's numbers)
  plus the exact ``pass@k`` of every 0/1 variable;
* ``reduce_metrics`` (``verl.utils.metric``'s and ``metric_utils``' deprecated alias):
  :func:`rlmetrics.reduce_metrics` (reducer from the key's last path segment; verl's ``Metric``
  objects aggregate as themselves; the dict updated in place and returned, as verl does).

Text and samples (``text_metrics=``, ``text_options=``, ``decode_responses=``, ``sample_rows=``):
``compute_data_metrics`` also logs the text statistics of the training batch's responses from their
token ids (``text/...``, with stop reasons read from the ids: the tokenizer's end of sequence, the
length limit, else ``other``; verl's batch keeps no finish reason), and with the tokenizer of the
trainer calling it (found on the stack, as the staleness version) decodes the few rows of a sample
table (max, min, median reward, random rows; :func:`rlmetrics.training.samples.choose_samples`, so
by default the batch is never decoded whole) and appends it to ``samples.jsonl``; the trainers'
``_maybe_log_val_generations`` (every validation's decoded inputs, outputs and scores) is wrapped
to add their text statistics (``val-text/...``, through the validation flattener that follows)
and a table in ``val_samples.jsonl``. ``text_options`` (keywords of
:func:`rlmetrics.compute_text_metrics`) reach both; a ``format_pattern`` (text only) reaches the
training batch with ``decode_responses=True``, which decodes its every response each step. Both files
are in ``samples_dir=``, by default the folder beside verl's file logger's
``<project>/<experiment>.jsonl`` named as it without ``.jsonl``; read them with
:func:`rlmetrics.readers.read_samples`.

The exact ``pass@k`` (the unbiased estimator, :func:`rlmetrics.prompt_estimates`, averaged over
the prompts with at least ``k`` samples; ``acc`` padded with verl's ``expected_acc_counts``) is
added beside verl's ``mean@N`` / ``best@k/mean`` ...; verl's trainers file a metric under
``val-core`` only when its name starts with ``mean``, ``maj`` or ``best``, so the trainers'
``_val_metrics_update`` (the method that turns the nested dict into logger keys) is wrapped to
file the core variable's ``pass@k`` under ``val-core/<source>/<var>/pass@k``.

verl does not run its trainer in the launching process: ``main_ppo`` builds it inside a Ray
actor (``TaskRunner``). :func:`runtime_env` is the Ray ``runtime_env`` whose
``worker_process_setup_hook`` makes every worker of the job call :func:`patch` (the options
travel as JSON in an environment variable); with verl's launcher that is one Hydra override::

    python -m verl.trainer.main_ppo ... \\
        ++ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=rlmetrics.integrations.verl.setup_worker

and a second one for options (JSON; a Hydra single-quoted string inside the shell's double quotes)::

    "++ray_kwargs.ray_init.runtime_env.env_vars.RLMETRICS_VERL_OPTIONS='{\\"max_response_length\\": 1024}'"

Stopping a lost run: with ``monitor=True`` the live :class:`rlmetrics.HealthMonitor` reads every
step a patched trainer's ``fit`` logs (verl's ``Tracking.log`` is wrapped; the trainers whose
class has the validation flattener have their ``fit`` wrapped: ``RayPPOTrainer``, the v1
``PPOTrainer``, the separation trainer; an ``async def fit`` is not). Each finding is a
``HealthWarning`` and a ``health/<kind>`` record logged with the step; ``actions=`` (as
``HealthMonitor(actions=...)``) acts on them. verl's loop has no stop flag, and the step's
``logger.log`` is its last call: on ``"stop"`` the wrapped ``log`` logs the step (with its
``health/`` and ``health_action/`` records), prints ``rlmetrics health: run stopped at step N on
<kind> (<severity>) from step M: <advice>; verl's fit ends here`` and raises
:class:`rlmetrics.errors.RunStopped`, which the wrapped ``fit`` catches:
it runs verl's end-of-training clean-up (the async calls finalised, the dump executor shut
down) and returns, the run ended after that step; no checkpoint is saved beyond verl's own
``save_freq`` ones (a lost run's weights are rarely worth one). On ``"raise"`` the same
``RunStopped`` leaves ``fit`` (the Ray task fails, ``main_ppo`` exits non-zero with the message;
the exception crosses Ray with its finding, step and message).

:func:`unpatch` puts every original back (the same objects). Tested with verl 0.9.1; another
version gets a :class:`VerlPatchWarning` naming what was and was not patched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import re
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeGuard

import numpy as np

from rlmetrics import keys
from rlmetrics._core.batch import as_batch
from rlmetrics._core.checks import check_int
from rlmetrics.aggregation import Metric
from rlmetrics.aggregation import reduce_metrics as _reduce_metrics
from rlmetrics.errors import (
    HealthWarning,
    RLMetricsWarning,
    RunStopped,
    TrackingWarning,
    UndefinedMetricWarning,
)
from rlmetrics.health.monitor import ActionPolicy, HealthMonitor
from rlmetrics.keys import ValName
from rlmetrics.policy.entropy import LOSS_AGG_MODES, compute_entropy_metrics
from rlmetrics.policy.groups import compute_group_metrics
from rlmetrics.policy.mismatch import parse_is_threshold
from rlmetrics.policy.staleness import compute_staleness_metrics
from rlmetrics.policy.variance import compute_variance_proxy_metrics
from rlmetrics.readers.samples import SAMPLES_FILE
from rlmetrics.training.categories import DEFAULT_MAX_CATEGORIES, check_max_categories
from rlmetrics.training.data import compute_data_metrics as _compute_data_metrics
from rlmetrics.training.rewards import compute_reward_component_metrics
from rlmetrics.training.samples import MIN_CELL_BYTES, SampleTable, choose_samples, select_samples
from rlmetrics.training.text import _check_text_options, compute_text_metrics
from rlmetrics.training.timing import _peak_flops, compute_throughput_metrics, compute_timing_metrics
from rlmetrics.validation.exact.summary import prompt_estimates
from rlmetrics.validation.verl.bootstrap import bootstrap_metric, calc_maj_val
from rlmetrics.validation.verl.bootstrap import process_validation_metrics as _process_validation_metrics

__all__ = [
    "OPTIONS_ENV",
    "SETUP_HOOK",
    "TESTED_VERSION",
    "PatchReport",
    "VerlPatchOptions",
    "VerlPatchWarning",
    "merge_runtime_env",
    "patch",
    "patched",
    "report",
    "runtime_env",
    "setup_worker",
    "unpatch",
]

#: The verl release the replacements are checked against (signatures, keys, values).
TESTED_VERSION = "0.9.1"
#: Environment variable that carries :func:`patch`'s options (JSON) to the Ray workers.
OPTIONS_ENV = "RLMETRICS_VERL_OPTIONS"
_INSTALL = f"pip install 'verl=={TESTED_VERSION}'"

#: Where verl defines the functions patch() replaces (the modules whose objects are looked for
#: by identity everywhere else). A name a module lacks is reported as not patched.
_DEFINITIONS: dict[str, tuple[str, ...]] = {
    "verl.trainer.ppo.metric_utils": (
        "compute_data_metrics",
        "compute_timing_metrics",
        "compute_throughout_metrics",
        "compute_variance_proxy_metrics",
        "process_validation_metrics",
        "bootstrap_metric",
        "calc_maj_val",
        "reduce_metrics",  # verl's deprecated alias of verl.utils.metric.reduce_metrics
    ),
    "verl.utils.metric.utils": ("reduce_metrics",),
}
#: The trainers' method that files the nested validation dict under val-core / val-aux.
_VAL_FLATTENER = "_val_metrics_update"
#: The trainers' method given every validation's decoded generations (inputs, outputs, scores).
_VAL_GENERATIONS = "_maybe_log_val_generations"
#: The trainers' old-log-prob pass (``(DataProto, mfu)`` from the batch), wrapped to keep each
#: response's mean entropy in the batch before the loop drops the token entropies.
_OLD_LOG_PROB = "_compute_old_log_prob"
#: The training loop of a trainer (a class with the flattener), wrapped to end it on a stop.
_FIT = "fit"
#: verl's logger class and its method that every trainer calls once per step, wrapped to feed
#: the live monitor: (module, class) -> method.
_LOGGERS = {("verl.utils.tracking", "Tracking"): "log"}


class VerlPatchWarning(RLMetricsWarning, UserWarning):
    """A verl module that failed to import, or a verl version other than the tested one."""


class PatchReport(NamedTuple):
    """Where :func:`patch` stands."""

    #: whether the replacements are installed (and the import hook is watching)
    active: bool
    #: verl's installed version (``None`` if its metadata is missing)
    version: str | None
    #: the options every replacement runs with
    options: dict[str, Any]
    #: the bindings replaced, ``module.attribute`` (``module.Class.method`` for the trainers'
    #: validation flattener), sorted
    patched: tuple[str, ...]
    #: verl functions looked for and not found (``module.name``): not patched
    missing: tuple[str, ...]
    #: verl modules that failed to import (``module: error``): skipped
    failed: tuple[str, ...]


# ----------------------------------------------------------------------------- options
@dataclass(frozen=True)
class VerlPatchOptions:
    """The options of :func:`patch`, checked once; every replacement runs with them.

    :func:`patch` and :func:`runtime_env` / :func:`merge_runtime_env` build one from their keywords
    (an unknown keyword is a ``TypeError`` naming it); the Ray workers receive it as JSON
    (:meth:`to_json`) in :data:`OPTIONS_ENV`, which :func:`setup_worker` reads (:meth:`from_json`).
    The attributes are those of :func:`patch` (its docstring says what each does), normalised:
    ``ks`` and ``packages`` as tuples, the lengths as ``int``, the FLOP counts as ``float``.

    Raises
    ------
    TypeError, ValueError
        An option of the wrong type or value (the message names it, what was expected and what
        came); ``peak_flops`` without exactly one of ``flops_per_token`` / ``num_params``, or
        either of those without ``peak_flops``.

    Examples
    --------
    >>> from rlmetrics.integrations.verl import VerlPatchOptions
    >>> options = VerlPatchOptions(max_response_length=1024, ks=[1, 4])
    >>> options.ks, options.to_json(only=["ks"])
    ((1, 4), '{"ks": [1, 4]}')
    >>> VerlPatchOptions.from_json(options.to_json()) == options
    True
    """

    max_response_length: int | None = None
    max_prompt_length: int | None = None
    flops_per_token: float | None = None
    num_params: float | None = None
    peak_flops: float | str | None = None
    pass_at_k: bool = True
    #: any sequence of ints; kept as a tuple
    ks: Sequence[int] | None = None
    #: any sequence of top-level package names; kept as a tuple
    packages: Sequence[str] = ("verl",)
    preload: bool = True
    monitor: bool = False
    #: kind or severity -> "warn" | "stop" | "raise" (:class:`rlmetrics.health.monitor.ActionPolicy`)
    actions: Mapping[str, str] | None = None
    by_data_source: bool = True
    split_by_outcome: bool = True
    reward_components: bool = True
    group_metrics: bool = True
    entropy_metrics: bool = True
    solved_threshold: float = 1.0
    max_categories: int = DEFAULT_MAX_CATEGORIES
    text_metrics: bool = True
    #: keywords of :func:`rlmetrics.compute_text_metrics` (``format_pattern`` as a string,
    #: ``think_span`` as a tuple of two strings or of two tuples of token ids); ``{}`` as None
    text_options: Mapping[str, Any] | None = None
    decode_responses: bool = False
    sample_rows: int = 8
    sample_bytes: int = 65536
    samples_dir: str | None = None

    def __post_init__(self) -> None:
        lengths = {
            name: _optional_length(getattr(self, name), name)
            for name in ("max_response_length", "max_prompt_length")
        }
        flops = {
            name: _optional_positive(getattr(self, name), name) for name in ("flops_per_token", "num_params")
        }
        _check_mfu(self.peak_flops, flops["flops_per_token"], flops["num_params"])
        checked = {
            **lengths,
            **flops,
            "ks": _optional_ks(self.ks),
            "pass_at_k": _flag(self.pass_at_k, "pass_at_k"),
            "preload": _flag(self.preload, "preload"),
            "packages": _strings(self.packages, "packages"),
            "monitor": _flag(self.monitor, "monitor"),
            "actions": _actions(self.actions, self.monitor),
            "by_data_source": _flag(self.by_data_source, "by_data_source"),
            "split_by_outcome": _flag(self.split_by_outcome, "split_by_outcome"),
            "reward_components": _flag(self.reward_components, "reward_components"),
            "group_metrics": _flag(self.group_metrics, "group_metrics"),
            "entropy_metrics": _flag(self.entropy_metrics, "entropy_metrics"),
            "solved_threshold": _real(self.solved_threshold, "solved_threshold"),
            "max_categories": check_max_categories(self.max_categories),
            "text_metrics": _flag(self.text_metrics, "text_metrics"),
            "text_options": _text_options(self.text_options),
            "decode_responses": _flag(self.decode_responses, "decode_responses"),
            "sample_rows": check_int(self.sample_rows, "sample_rows", minimum=0),
            "sample_bytes": check_int(self.sample_bytes, "sample_bytes", minimum=2 * MIN_CELL_BYTES),
            "samples_dir": _optional_dir(self.samples_dir),
        }
        for name, value in checked.items():  # frozen: the normalised values are set once, here
            object.__setattr__(self, name, value)

    def as_dict(self, *, only: Iterable[str] | None = None) -> dict[str, Any]:
        """The options as plain JSON values (tuples as lists); ``only`` keeps the named ones."""
        names = [f.name for f in dataclasses.fields(self)] if only is None else list(only)
        return {name: _plain(getattr(self, name)) for name in names}

    def to_json(self, *, only: Iterable[str] | None = None) -> str:
        """The options as a JSON object (sorted keys); ``only`` keeps the named ones (the others
        then take their defaults in :meth:`from_json`)."""
        return json.dumps(self.as_dict(only=only), sort_keys=True)

    @classmethod
    def from_json(cls, raw: str, **defaults: Any) -> VerlPatchOptions:
        """The options of a JSON object (``""``: none), checked; ``defaults`` fill the keys it lacks.

        Raises
        ------
        ValueError
            ``raw`` is not a JSON object.
        TypeError, ValueError
            An option is unknown or bad (as the constructor).
        """
        raw = raw.strip()
        try:
            given = json.loads(raw) if raw else {}
        except json.JSONDecodeError as err:
            raise ValueError(
                f"{OPTIONS_ENV} must be a JSON object of rlmetrics.integrations.verl.patch() options, "
                f'e.g. {{"max_response_length": 1024}}; got {raw!r} ({err}). verl does not resolve '
                f"OmegaConf interpolations in ray_kwargs.ray_init.runtime_env: write the numbers"
            ) from None
        if not isinstance(given, dict):
            raise ValueError(f"{OPTIONS_ENV} must be a JSON object; got {raw!r}")
        return cls(**{**defaults, **given})


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return [_plain(v) for v in value] if isinstance(value, tuple) else value


def _text_options(value: Any) -> dict[str, Any] | None:
    """``text_options`` checked (:func:`rlmetrics.training.text._check_text_options`, the tags as
    strings or token ids) and made JSON: a compiled ``format_pattern`` as its string, which it
    must equal (flags written inline); ``{}`` as None."""
    options = _check_text_options(value, id_tags=True)
    pattern = options.get("format_pattern")
    if isinstance(pattern, re.Pattern):
        if re.compile(pattern.pattern).flags != pattern.flags:
            raise TypeError(
                "text_options['format_pattern'] travels to the Ray workers as JSON, a string: write the "
                f"flags of the compiled pattern inline (e.g. '(?i)' for re.IGNORECASE); got {pattern!r}"
            )
        options["format_pattern"] = pattern.pattern
    return options or None


def _actions(actions: Any, monitor: Any) -> dict[str, str] | None:
    """The action policy as a plain dict (checked by :class:`ActionPolicy`); it needs the monitor."""
    if actions is None:
        return None
    if monitor is not True:
        raise ValueError(f"actions= needs monitor=True (the live monitor takes the actions); got {actions!r}")
    return dict(ActionPolicy(actions).actions)


def _optional_dir(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str | os.PathLike) or not str(value):
        raise TypeError(f"samples_dir must be a folder path (str) or None; got {value!r}")
    return str(value)


def _optional_length(value: Any, name: str) -> int | None:
    return None if value is None else check_int(value, name, minimum=1)


def _optional_positive(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{name} must be a positive number or None; got {type(value).__name__} {value!r}")
    if not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number or None; got {value!r}")
    return float(value)


def _optional_ks(ks: Any) -> tuple[int, ...] | None:
    if ks is None:
        return None
    if isinstance(ks, str | bytes) or not isinstance(ks, Sequence | np.ndarray) or len(ks) == 0:
        raise TypeError(f"ks must be a non-empty list of integers >= 1 or None; got {ks!r}")
    return tuple(check_int(k, f"ks[{i}]", minimum=1) for i, k in enumerate(ks))


def _real(value: Any, name: str) -> float:
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{name} must be a real number; got {type(value).__name__} {value!r}")
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite; got {value!r}")
    return float(value)


def _strings(value: Any, name: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise TypeError(f"{name} must be a non-empty list of package names; got {value!r}")
    for item in value:
        if not isinstance(item, str) or not item.isidentifier():
            raise ValueError(f"{name} must hold top-level package names such as 'verl'; got {item!r}")
    return tuple(value)


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False; got {type(value).__name__} {value!r}")
    return bool(value)


def _check_mfu(peak_flops: Any, flops_per_token: float | None, num_params: float | None) -> None:
    """``perf/mfu`` needs the peak and exactly one of the FLOP counts, or none of the three."""
    if peak_flops is not None:
        _peak_flops(peak_flops)  # an accelerator name or FLOP/s, checked now rather than at step 1
        if (flops_per_token is None) == (num_params is None):
            raise ValueError(
                "peak_flops= needs exactly one of flops_per_token= or num_params= (for perf/mfu)"
            )
    elif flops_per_token is not None or num_params is not None:
        raise ValueError(
            "flops_per_token= and num_params= need peak_flops= (FLOP/s or a name such as 'H100')"
        )


# ----------------------------------------------------------------------------- the replacements
# Each runs rlmetrics with verl's call signature and the options of the last patch().
def compute_data_metrics(batch: Any, use_critic: bool = True) -> dict[str, float]:
    """verl's ``compute_data_metrics(batch, use_critic)``: :func:`rlmetrics.compute_data_metrics`
    with the patch's ``max_response_length`` / ``max_prompt_length``, per category where the batch
    has the labels (:func:`_grouping`), the reward components (:func:`_reward_component_metrics`)
    and the staleness metrics (:func:`_staleness_metrics`), the entropy per category and outcome
    (:func:`_entropy_metrics`), the text statistics of the responses and
    a sample table (:func:`_text_and_samples`), the GRPO groups' pass rates (:func:`_group_metrics`).
    verl's keys are the plain ones, as they are without the categories."""
    o = _STATE.options
    view = as_batch(batch, arg="batch")
    return (
        _compute_data_metrics(
            batch,
            use_critic,
            max_response_length=o.max_response_length,
            max_prompt_length=o.max_prompt_length,
            **_grouping(view, o),
        )
        | _reward_component_metrics(view, o)
        | _entropy_metrics(view, o)
        | _group_metrics(view, o)
        | _staleness_metrics(batch)  # the off-policy trainers' version fields, when the batch has them
        | _text_and_samples(view, o)
    )


def compute_throughout_metrics(batch: Any, timing_raw: Mapping[str, float], n_gpus: int) -> dict[str, float]:
    """verl's ``compute_throughout_metrics(batch, timing_raw, n_gpus)``:
    :func:`rlmetrics.compute_throughput_metrics`, with ``perf/mfu`` when the patch has the FLOPs."""
    o = _STATE.options
    return compute_throughput_metrics(
        batch,
        timing_raw,
        n_gpus,
        flops_per_token=o.flops_per_token,
        num_params=o.num_params,
        peak_flops=o.peak_flops,
    )


def process_validation_metrics(
    data_sources: Any,
    sample_uids: Any,
    infos_dict: Mapping[str, Sequence[Any]],
    seed: int = 42,
    expected_acc_counts: Mapping[tuple[str, str], int] | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """verl's ``process_validation_metrics``: :func:`rlmetrics.process_validation_metrics` (verl's
    numbers), plus, with ``pass_at_k=True``, the exact ``pass@k`` of every 0/1 variable."""
    out = _process_validation_metrics(
        data_sources, sample_uids, infos_dict, seed=seed, expected_acc_counts=expected_acc_counts
    )
    if _STATE.options.pass_at_k and out:
        _add_pass_at_k(out, data_sources, sample_uids, infos_dict, expected_acc_counts, _STATE.options.ks)
    return out


def reduce_metrics(metrics: Any) -> Any:
    """verl's ``reduce_metrics(metrics)``: :func:`rlmetrics.reduce_metrics` (the reducer of each
    key from its last path segment; verl's ``Metric`` objects aggregate as themselves). As verl,
    the dict is updated in place and returned."""
    if not isinstance(metrics, Mapping):
        raise TypeError(f"metrics must be a mapping of key to values; got {type(metrics).__name__}")
    converted = {key: _as_metric(value) for key, value in metrics.items()}
    out = _reduce_metrics(converted)
    if isinstance(metrics, MutableMapping):
        metrics.update(out)
        return metrics
    return out


def _as_metric(value: Any) -> Any:
    """verl's ``Metric`` (or any object with ``aggregation`` and ``values``) as rlmetrics' one."""
    if isinstance(value, Metric) or not (hasattr(value, "aggregation") and hasattr(value, "values")):
        return value
    aggregation = getattr(value.aggregation, "value", value.aggregation)
    return Metric(aggregation, list(value.values))


#: verl's function name -> the rlmetrics function its replacement calls.
_IMPLEMENTATIONS: dict[str, Callable[..., Any]] = {
    "compute_data_metrics": compute_data_metrics,
    "compute_timing_metrics": compute_timing_metrics,
    "compute_throughout_metrics": compute_throughout_metrics,
    "compute_variance_proxy_metrics": compute_variance_proxy_metrics,
    "process_validation_metrics": process_validation_metrics,
    "bootstrap_metric": bootstrap_metric,
    "calc_maj_val": calc_maj_val,
    "reduce_metrics": reduce_metrics,
}


# ----------------------------------------------------------------------------- categories
#: The per-sample label of verl's datasets (``data.reward_fn_key``'s default), in ``non_tensor_batch``.
DATA_SOURCE_FIELD = "data_source"
#: The per-sample outcome a reward function reports in ``reward_extra_info`` (verl's math scorers).
ACC_FIELD = "acc"
#: verl's ``meta_info`` entry naming the ``reward_extra_info`` fields its reward managers and loops put
#: in ``non_tensor_batch`` (``experimental/reward_loop/reward_loop.py``, ``agent_loop.py``; read back
#: by ``trainer/ppo/reward.py``'s ``extract_reward``, verl 0.9.1).
REWARD_EXTRA_KEYS = "reward_extra_keys"
#: A reward function's dict result files its total under ``score`` (verl's reward managers), the
#: reward verl logs as ``critic/score/...``: it is not one of the components.
REWARD_TOTAL_FIELD = "score"


def _rows(view: Any) -> int | None:
    mask = view.get("response_mask")
    if mask is None:
        mask = view.get("attention_mask")
    return None if mask is None else int(mask.shape[0])


def _grouping(view: Any, options: VerlPatchOptions) -> dict[str, Any]:
    """The ``group_by=`` / ``split_by_outcome=`` keywords of the batch's data metrics.

    ``group_by="data_source"`` when ``by_data_source`` and the batch carries one label per sample;
    ``split_by_outcome=True`` when ``split_by_outcome`` and the batch carries a numeric or boolean
    ``acc`` per sample (verl's math scorers' ``reward_extra_info``). A field of another shape or
    type is left out, so that a batch rlmetrics cannot split still gets verl's metrics.
    """
    n = _rows(view)
    out: dict[str, Any] = {}
    labels = view.non_tensor(DATA_SOURCE_FIELD)
    if options.by_data_source and labels is not None and np.shape(labels) == (n,):
        out["group_by"] = DATA_SOURCE_FIELD
    if options.split_by_outcome and _acc(view, n) is not None:
        out["split_by_outcome"] = True
    if out:
        out["max_categories"] = options.max_categories
    return out


def _acc(view: Any, n: int | None) -> np.ndarray | None:
    """The batch's ``acc`` when it is one number or bool per sample (else None: not an outcome)."""
    acc = view.non_tensor(ACC_FIELD)
    if acc is None or np.shape(acc) != (n,) or np.asarray(acc).dtype.kind not in "biuf":
        return None
    return np.asarray(acc)


#: verl's group id of every rollout (the prompt it answers; GRPO's groups), in ``non_tensor_batch``.
UID_FIELD = "uid"
#: The keys of :func:`rlmetrics.compute_group_metrics` that count solved samples (the rest are of
#: the score's spread): with ``acc`` in the batch they come from ``acc``.
_SOLVED_KEYS = (
    keys.GRPO_FRAC_ALL_SOLVED,
    keys.GRPO_FRAC_NONE_SOLVED,
    keys.GRPO_SOLVE_RATE_DIP,
    keys.GRPO_SOLVE_RATE_DIP_PVALUE,
)


def _is_solved_key(key: str) -> bool:
    split = keys.split_category_key(key)
    plain = key if split is None else split[0]
    return plain in _SOLVED_KEYS or plain.startswith(keys.GRPO_PASS + "@")


def _group_metrics(view: Any, options: VerlPatchOptions) -> dict[str, float]:
    """:func:`rlmetrics.compute_group_metrics` of the batch's GRPO groups (``uid``), per data source
    where the data metrics are (:func:`_grouping`): the spread statistics of the score
    (``token_level_scores`` summed), the solved ones (``pass@k``, all / none solved) of ``acc > 0.5``
    where the batch has ``acc`` (:func:`_acc`), else of ``score >= solved_threshold``. Nothing
    without ``group_metrics``, ``uid`` or the scores, or when no prompt has two rollouts; a failure
    warns and costs these alone."""
    n = _rows(view)
    uids = view.non_tensor(UID_FIELD) if options.group_metrics else None
    if uids is None or np.shape(uids) != (n,) or not view.has("token_level_scores"):
        return {}
    try:
        uids = np.asarray(uids)
        largest = int(np.unique(uids, return_counts=True)[1].max()) if n else 0
        if largest < 2:  # no repeated rollouts: no groups to speak of
            return {}
        scores = view.get("token_level_scores")
        scores = _host(scores.double() if hasattr(scores, "double") else scores).astype(np.float64).sum(-1)
        ks = tuple(k for k in (options.ks or (1, largest)) if k <= largest) or None
        common: dict[str, Any] = {"max_categories": options.max_categories}
        if "group_by" in _grouping(view, options):  # per data source, as the data metrics
            labels = np.asarray(view.non_tensor(DATA_SOURCE_FIELD))
            common |= {"group_by": labels, "group_name": DATA_SOURCE_FIELD}
        acc = _acc(view, n)
        if acc is None:
            return compute_group_metrics(
                uids, scores, solved_threshold=options.solved_threshold, pass_k=ks, **common
            )
        solved = compute_group_metrics(uids, (acc > 0.5).astype(np.float64), pass_k=ks, **common)
        spread = compute_group_metrics(uids, scores, **common)
        return spread | {k: v for k, v in solved.items() if _is_solved_key(k)}
    except Exception as err:  # the batch's other metrics go on
        warnings.warn(
            f"the GRPO group metrics (pass@k, solved shares) of the batch not logged: "
            f"{type(err).__name__}: {err}",
            VerlPatchWarning,
            stacklevel=3,
        )
        return {}


def _reward_component_metrics(view: Any, options: VerlPatchOptions) -> dict[str, float]:
    """:func:`rlmetrics.compute_reward_component_metrics` of the batch's ``reward_extra_info`` fields.

    The numeric fields named by ``meta_info["reward_extra_keys"]`` (but ``score``, the total): one
    value per sample, ``None`` as NaN (not given); a field of text (verl's ``pred``) or of another
    shape is not a component. Nothing when ``reward_components`` is off or no field qualifies.
    """
    names = view.meta_info.get(REWARD_EXTRA_KEYS) if options.reward_components else None
    if not names:
        return {}
    n = _rows(view)
    components = {}
    for name in names:
        values = _numeric(view.non_tensor(name), n) if name != REWARD_TOTAL_FIELD else None
        if values is not None and np.isinf(values).any():
            warnings.warn(
                f"reward_extra_info field {name!r} has infinite values: not logged as a reward component",
                VerlPatchWarning,
                stacklevel=3,
            )
        elif values is not None:
            components[str(name)] = values
    return compute_reward_component_metrics(components) if components else {}


def _numeric(values: Any, n: int | None) -> np.ndarray | None:
    """A per-sample field as float64 (``None``: NaN), or None when it is not one number a sample."""
    if values is None or np.shape(values) != (n,):
        return None
    arr = np.asarray(values)
    if arr.dtype.kind not in "biufO":
        return None
    if arr.dtype.kind == "O":
        items = arr.tolist()
        if not all(v is None or isinstance(v, int | float | np.number) for v in items):
            return None
        arr = np.asarray([np.nan if v is None else float(v) for v in items], dtype=np.float64)
    return arr.astype(np.float64)


# ----------------------------------------------------------------------------- entropy by category
#: The ``non_tensor_batch`` field where the wrapped old-log-prob pass files each response's mean
#: token entropy (NaN for a response without tokens). verl's trainers compute the token entropies
#: there (``entropys``), log their aggregate as ``actor/entropy`` and drop them
#: (``old_log_prob.batch.pop("entropys")``) before ``compute_data_metrics`` runs: one float a sample
#: kept instead lets the data metrics split the entropy by data source and outcome.
ENTROPY_FIELD = "rlmetrics_entropy"


def _keeping_entropy(method: Callable[..., Any]) -> Callable[..., Any]:
    """A trainer's ``_compute_old_log_prob(batch)``, then :func:`_keep_entropy` of its result.
    Any other signature or result (the v1 trainer's ``KVBatchMeta``) passes through untouched."""

    @functools.wraps(method)
    def wrapper(self: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
        out = method(self, batch, *args, **kwargs)
        if _STATE.options.entropy_metrics:
            _keep_entropy(batch, out)
        return out

    return wrapper


def _keep_entropy(batch: Any, out: Any) -> None:
    """File each response's mean entropy (over ``response_mask``) in ``batch.non_tensor_batch``
    when the pass returned verl's ``(DataProto with "entropys", mfu)``; a failure warns and
    costs the split entropy alone."""
    produced = out[0] if isinstance(out, tuple) and out else None
    tensors, non_tensors = getattr(produced, "batch", None), getattr(batch, "non_tensor_batch", None)
    inputs = getattr(batch, "batch", None)
    if tensors is None or inputs is None or not isinstance(non_tensors, dict):
        return
    if "entropys" not in tensors.keys() or "response_mask" not in inputs.keys():
        return
    try:
        entropy, mask = tensors["entropys"].detach(), inputs["response_mask"].detach()
        mask = mask.to(entropy.device)
        weights = (mask != 0).double()
        sums = (entropy.double() * weights).sum(-1)
        non_tensors[ENTROPY_FIELD] = (sums / weights.sum(-1)).cpu().numpy()  # 0 / 0: NaN
    except Exception as err:  # the step goes on
        warnings.warn(
            f"the responses' entropy not kept for its split by data source and outcome: "
            f"{type(err).__name__}: {err}",
            VerlPatchWarning,
            stacklevel=3,
        )


def _entropy_metrics(view: Any, options: VerlPatchOptions) -> dict[str, float]:
    """:func:`rlmetrics.compute_entropy_metrics` of the responses' kept entropy (:data:`ENTROPY_FIELD`)
    per data source and outcome, as the data metrics split (:func:`_grouping`), aggregated as the
    calling trainer's ``actor.loss_agg_mode`` (and ``loss_scale_factor``) aggregate verl's
    ``actor/entropy``. Only the per-category keys: verl logs the plain one itself. Nothing
    without the field, a split, or the mask; a failure warns and costs these alone."""
    n = _rows(view)
    means = view.non_tensor(ENTROPY_FIELD) if options.entropy_metrics else None
    grouping = _grouping(view, options)
    if means is None or np.shape(means) != (n,) or not grouping or view.get("response_mask") is None:
        return {}
    try:
        split: dict[str, Any] = {"max_categories": options.max_categories}
        if "group_by" in grouping:
            split |= {
                "group_by": np.asarray(view.non_tensor(DATA_SOURCE_FIELD)),
                "group_name": DATA_SOURCE_FIELD,
            }
        if grouping.get("split_by_outcome"):
            split["outcome"] = _acc(view, n)
        mode, scale = _loss_aggregation(_configured_trainer())
        out = compute_entropy_metrics(
            np.asarray(means, dtype=np.float64),
            _host(view.get("response_mask")),
            loss_agg_mode=mode,
            loss_scale_factor=scale,
            **split,
        )
        return {k: v for k, v in out.items() if keys.split_category_key(k) is not None}
    except Exception as err:  # the batch's other metrics go on
        warnings.warn(
            f"the entropy per data source and outcome not logged: {type(err).__name__}: {err}",
            VerlPatchWarning,
            stacklevel=3,
        )
        return {}


def _trainer_up_the_stack(accepts: Callable[[Any], bool], frames: int) -> Any:
    """The first ``self`` that ``accepts``, among the ``frames`` callers of the function that asks
    (the replacement it was called from, then that one's callers); None when none does."""
    frame: Any = sys._getframe(2)
    for _ in range(frames):
        frame = frame.f_back
        if frame is None:
            return None
        trainer = frame.f_locals.get("self")
        if accepts(trainer):
            return trainer
    return None


def _configured_trainer() -> Any:
    """The verl trainer (an object with a ``config``) whose method called the replacement."""
    return _trainer_up_the_stack(lambda t: getattr(t, "config", None) is not None, _TRAINER_FRAMES + 2)


def _loss_aggregation(trainer: Any) -> tuple[str, float | None]:
    """The trainer's ``actor_rollout_ref.actor.loss_agg_mode`` and ``loss_scale_factor`` (verl's
    ``agg_loss`` of ``actor/entropy``); verl's default ``token-mean`` where none is found."""
    node = getattr(trainer, "config", None)
    for name in ("actor_rollout_ref", "actor"):
        node = node.get(name) if isinstance(node, Mapping) else getattr(node, name, None)
    get = node.get if isinstance(node, Mapping) else functools.partial(getattr, node)
    mode = get("loss_agg_mode", None) if node is not None else None
    scale = get("loss_scale_factor", None) if node is not None else None
    if mode is None:
        return "token-mean", None
    if mode not in LOSS_AGG_MODES:
        raise ValueError(f"actor.loss_agg_mode {mode!r} is not one of {', '.join(LOSS_AGG_MODES)}")
    return str(mode), None if scale is None else float(scale)


# ----------------------------------------------------------------------------- off-policy staleness
#: The per-sample version fields of verl's off-policy and asynchronous trainers, as ``(oldest,
#: newest)`` names in the batch's ``non_tensor_batch`` (``newest`` None: one version per sample),
#: the first pair present is read. verl 0.9.1's agent loop files every trajectory's
#: ``min_global_steps`` / ``max_global_steps`` (the weights' versions at its first and last token,
#: ``verl/experimental/agent_loop/agent_loop.py``, from ``workers/rollout/llm_server.py``), read by
#: the fully-async trainer (``experimental/fully_async_policy/detach_utils.py``) and the v1 trainer;
#: ``policy_versions`` is :func:`rlmetrics.compute_staleness_metrics`' own default, for a custom loop.
STALENESS_VERSION_FIELDS: tuple[tuple[str, str | None], ...] = (
    ("min_global_steps", "max_global_steps"),
    ("policy_versions", None),
)
_TRAINER_FRAMES = 8  # frames above compute_data_metrics searched for the verl trainer calling it
_VERL_IS_THRESHOLD = 2.0  # verl's default algorithm.rollout_correction.rollout_is_threshold


def _staleness_metrics(batch: Any) -> dict[str, float]:
    """verl's ``compute_data_metrics`` also logs :func:`rlmetrics.compute_staleness_metrics` (with
    verl's ``training/off_policy/...`` names, ``peer_names=("verl",)``) when the batch carries the
    version fields of :data:`STALENESS_VERSION_FIELDS` and the trainer calling it has a version:

    * the fully-async trainer (``current_param_version``): the version its update ran with (its
      step has already counted the next version when ``local_trigger_step`` is back at 1);
    * any other (``global_steps``): ``global_steps - 1``, the v1 trainer's convention.

    The token importance weights and the k3 KL per lag bucket come from ``old_log_probs`` and
    ``rollout_log_probs`` when the batch has both (the share of weights above the trainer's
    ``algorithm.rollout_correction.rollout_is_threshold``, verl's 2.0 by default), the rewards
    from ``token_level_scores``. A batch
    without the fields, or with a missing (None) version, adds nothing.
    """
    view = as_batch(batch, arg="batch")
    for oldest_name, newest_name in STALENESS_VERSION_FIELDS:
        oldest = _versions(view.non_tensor(oldest_name))
        if oldest is not None:
            newest = _versions(view.non_tensor(newest_name)) if newest_name else None
            break
    else:
        return {}
    trainer, current = _versioned_trainer()
    if current is None:
        warnings.warn(
            f"the batch carries {oldest_name!r} but no verl trainer with a version (current_param_version "
            "or global_steps) called compute_data_metrics: the staleness metrics are not logged",
            VerlPatchWarning,
            stacklevel=3,
        )
        return {}
    mask = view.get("response_mask")
    like = functools.partial(_beside, mask)
    scores = view.get("token_level_scores")
    has_log_probs = view.has("old_log_probs") and view.has("rollout_log_probs")
    return compute_staleness_metrics(
        like(oldest),
        current_version=current,
        newest_versions=None if newest is None else like(newest),
        response_mask=mask,
        old_log_probs=view.get("old_log_probs") if has_log_probs else None,
        rollout_log_probs=view.get("rollout_log_probs") if has_log_probs else None,
        rewards=None if scores is None else scores.sum(-1),
        peer_names=("verl",),
        rollout_is_threshold=_rollout_is_threshold(trainer),
    )


def _rollout_is_threshold(trainer: Any) -> Any:
    """The trainer's ``algorithm.rollout_correction.rollout_is_threshold`` (verl's truncation of the
    IS weights, so that the share above it per lag bucket is verl's), else verl's default 2.0."""
    node = getattr(trainer, "config", None)
    for name in ("algorithm", "rollout_correction", "rollout_is_threshold"):
        node = node.get(name) if isinstance(node, Mapping) else getattr(node, name, None)
        if node is None:
            return _VERL_IS_THRESHOLD
    try:
        parse_is_threshold(node)
    except (TypeError, ValueError) as err:
        warnings.warn(
            f"the trainer's algorithm.rollout_correction.rollout_is_threshold is unusable ({err}); the "
            f"staleness metrics count the IS weights above {_VERL_IS_THRESHOLD}",
            VerlPatchWarning,
            stacklevel=4,
        )
        return _VERL_IS_THRESHOLD
    return node


def _versions(values: Any) -> np.ndarray | None:
    """A version field as an int64 array; None when absent or when a sample has no version."""
    if values is None:
        return None
    values = list(np.asarray(values, dtype=object).reshape(-1))
    if not values or any(v is None for v in values):
        return None
    return np.asarray(values, dtype=np.int64)


def _beside(tensor: Any, values: np.ndarray) -> Any:
    """``values`` as a torch tensor on the device of ``tensor`` when it is one (else as they are)."""
    if tensor is None or type(tensor).__module__.split(".")[0] != "torch":
        return values
    import torch  # loaded: the batch holds torch tensors

    return torch.as_tensor(values, device=tensor.device)


def _versioned_trainer() -> tuple[Any, int | None]:
    """The calling verl trainer and the policy version it updated (see :func:`_staleness_metrics`);
    ``(None, None)`` when no caller has a version."""
    trainer = _trainer_up_the_stack(_has_version, _TRAINER_FRAMES)
    if trainer is None:
        return None, None
    version = getattr(trainer, "current_param_version", None)
    if _is_int(version):
        counted_next = getattr(trainer, "local_trigger_step", None) == 1 and version > 0
        return trainer, version - 1 if counted_next else version
    return trainer, int(trainer.global_steps) - 1


def _has_version(trainer: Any) -> bool:
    """Whether ``trainer`` counts policy versions (``current_param_version``) or steps."""
    version, steps = getattr(trainer, "current_param_version", None), getattr(trainer, "global_steps", None)
    return _is_int(version) or _is_int(steps)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


# ----------------------------------------------------------------------------- text and samples
#: The sample tables' file of the training steps and of the validations, in the samples folder.
TRAIN_SAMPLES_FILE, VAL_SAMPLES_FILE = SAMPLES_FILE, "val_samples.jsonl"
_STOP, _LENGTH, _OTHER = "stop", "length", "other"


def _calling_trainer() -> Any:
    """The verl trainer (an object with a ``tokenizer``) whose method called the replacement."""
    return _trainer_up_the_stack(
        lambda t: callable(getattr(getattr(t, "tokenizer", None), "decode", None)), _TRAINER_FRAMES + 2
    )


def _eos_ids(tokenizer: Any) -> set[int]:
    eos = getattr(tokenizer, "eos_token_id", None)
    items = eos if isinstance(eos, list | tuple) else [eos]
    return {int(e) for e in items if isinstance(e, int | np.integer)}


def _host(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


def _stop_reasons(ids: np.ndarray, mask: np.ndarray, eos: set[int], limit: int) -> list[str]:
    """Per response: ``stop`` (its last token is an end of sequence), ``length`` (it reached the
    limit), else ``other`` (a stop string, a tool call, an abort: verl's batch does not say)."""
    lengths = mask.sum(axis=1)
    out = []
    for row, m, n in zip(ids, mask, lengths.tolist()):
        last = int(row[m][-1]) if n else None
        out.append(_STOP if last in eos else _LENGTH if n >= limit else _OTHER)
    return out


#: The ``text_options`` that apply to token ids (the training batch unless ``decode_responses``);
#: ``think_span`` too when its tags are token ids; ``format_pattern`` needs text.
_ID_TEXT_OPTIONS = frozenset({"compression", "ngram", "loop_repeats", "loop_max_period"})


def _options_on_ids(text_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The keywords of the token-id call: the options of :data:`_ID_TEXT_OPTIONS`, ``think_span``
    when it is ``None`` or token ids (string tags cannot be looked for in ids)."""
    given = text_options or {}
    out = {k: v for k, v in given.items() if k in _ID_TEXT_OPTIONS}
    span = given.get("think_span", "")
    if span is None or (span and not isinstance(span[0], str)):
        out["think_span"] = span
    return out


def _options_on_text(text_options: Mapping[str, Any] | None, tokenizer: Any) -> dict[str, Any]:
    """The keywords of a call on decoded text: every option, a ``think_span`` of token ids as the
    tags the tokenizer decodes them to (no thinking statistics without a tokenizer)."""
    out = dict(text_options or {})
    span = out.get("think_span")
    if span and not isinstance(span[0], str):
        decode = getattr(tokenizer, "decode", None)
        out["think_span"] = (
            None if decode is None else tuple(decode(list(tag), skip_special_tokens=False) for tag in span)
        )
    return out


def _decoded(tokenizer: Any, ids: np.ndarray, mask: np.ndarray) -> list[str]:
    """Every response's tokens decoded as verl decodes its validation (``skip_special_tokens``)."""
    rows = [row[m].tolist() for row, m in zip(ids, mask)]
    batch_decode = getattr(tokenizer, "batch_decode", None)
    if callable(batch_decode):
        return list(batch_decode(rows, skip_special_tokens=True))
    return [tokenizer.decode(row, skip_special_tokens=True) for row in rows]


def _text_and_samples(view: Any, options: VerlPatchOptions) -> dict[str, float]:
    """The text statistics of the batch's responses (``text/...``, with their stop reasons when the
    calling trainer's tokenizer names its end of sequence): from their token ids with the options
    that apply to ids (:func:`_options_on_ids`), or, with ``decode_responses``, from every response
    decoded with the trainer's tokenizer with all of ``text_options``. With the tokenizer, a sample
    table of ``sample_rows`` rows (those rows alone decoded, unless all are), appended to
    ``samples.jsonl`` (:func:`_samples_dir`). A failure warns and costs these alone."""
    if not (options.text_metrics or options.sample_rows) or not view.has("responses"):
        return {}
    try:
        ids = _host(view.get("responses"))
        mask = view.get("response_mask")
        if mask is None:
            mask = view.get("attention_mask")[:, -ids.shape[1] :]
        mask = _host(mask).astype(bool)
        trainer = _calling_trainer()
        tokenizer = getattr(trainer, "tokenizer", None)
        limit = options.max_response_length or ids.shape[1]
        eos = _eos_ids(tokenizer)
        stops = _stop_reasons(ids, mask, eos, limit) if eos else None
        out: dict[str, float] = {}
        texts: list[str] | None = None
        if options.text_metrics:
            out, texts = _batch_text_metrics(options, tokenizer, ids, mask, stops)
        if options.sample_rows and tokenizer is not None and view.has("token_level_scores"):
            _log_train_samples(view, options, trainer, (ids, mask, texts), stops)
        return out
    except Exception as err:  # the batch's other metrics go on
        warnings.warn(
            f"text statistics / samples of the batch not logged: {type(err).__name__}: {err}",
            VerlPatchWarning,
            stacklevel=3,
        )
        return {}


def _batch_text_metrics(
    options: VerlPatchOptions, tokenizer: Any, ids: np.ndarray, mask: np.ndarray, stops: list[str] | None
) -> tuple[dict[str, float], list[str] | None]:
    """The batch's ``text/...`` from its token ids, or with ``decode_responses`` and a tokenizer from
    every response decoded (then also the decoded texts, else None)."""
    texts = None
    if options.decode_responses and tokenizer is not None:
        texts = _decoded(tokenizer, ids, mask)
        kw = {"responses": texts, **_options_on_text(options.text_options, tokenizer)}
    else:
        if options.decode_responses:
            warnings.warn(
                "decode_responses=True, but no verl trainer with a tokenizer called "
                "compute_data_metrics: the text statistics are computed from the token ids",
                VerlPatchWarning,
                stacklevel=4,
            )
        kw = {"token_ids": ids, "response_mask": mask, **_options_on_ids(options.text_options)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)  # NaN: undefined on this batch
        return compute_text_metrics(stop_reasons=stops, **kw), texts


def _log_train_samples(
    view: Any,
    options: VerlPatchOptions,
    trainer: Any,
    batch_rows: tuple[np.ndarray, np.ndarray, list[str] | None],
    stops: Any,
) -> None:
    """Decode the chosen rows of the batch (``batch_rows``: the response ids, their mask and the
    decoded texts when every row already is) and append their table to the samples folder."""
    ids, mask, texts = batch_rows
    step = getattr(trainer, "global_steps", None)
    step = step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None
    folder = _samples_dir(trainer, options)
    if step is None or folder is None:
        return
    rewards = _host(view.get("token_level_scores")).astype(np.float64).sum(axis=-1)
    n = rewards.shape[0]
    rewards = np.where(np.isfinite(rewards), rewards, 0.0)
    kw = {"n_random": max(options.sample_rows - 3, 0), "max_rows": options.sample_rows, "step": step}
    picks = [i for i, _ in choose_samples(rewards, **kw)]
    prompts, responses = [""] * n, [""] * n
    prompt_ids = _host(view.get("prompts")) if view.has("prompts") else None
    decode = trainer.tokenizer.decode
    for i in picks:
        if texts is not None:
            responses[i] = texts[i]
        else:
            responses[i] = decode(ids[i][mask[i]].tolist(), skip_special_tokens=True)
        if prompt_ids is not None:
            prompts[i] = decode(prompt_ids[i].tolist(), skip_special_tokens=True)
    labels = view.non_tensor(DATA_SOURCE_FIELD)
    table = select_samples(
        prompts,
        responses,
        rewards,
        lengths=mask.sum(axis=1),
        stop_reasons=stops,
        categories=[str(v) for v in labels] if labels is not None and np.shape(labels) == (n,) else None,
        max_bytes=options.sample_bytes,
        **kw,
    )
    _append_samples(folder / TRAIN_SAMPLES_FILE, table)


def _samples_dir(trainer: Any, options: VerlPatchOptions) -> Path | None:
    """``samples_dir``, else the folder beside verl's file logger's ``<project>/<experiment>.jsonl``
    named as it without ``.jsonl`` (``VERL_FILE_LOGGER_PATH``, or ``VERL_FILE_LOGGER_ROOT`` (default
    ``.``), the trainer's ``trainer.project_name`` and ``trainer.experiment_name``)."""
    if options.samples_dir is not None:
        return Path(options.samples_dir)
    path = os.environ.get("VERL_FILE_LOGGER_PATH")
    if path:
        return Path(path).with_suffix("")
    config = getattr(getattr(trainer, "config", None), "trainer", None)
    project = getattr(config, "project_name", None)
    experiment = getattr(config, "experiment_name", None)
    if not (isinstance(project, str) and isinstance(experiment, str)):
        return None
    root = Path(os.path.expanduser(os.environ.get("VERL_FILE_LOGGER_ROOT", ".")))
    return root / project / experiment


def _append_samples(path: Path, table: SampleTable) -> None:
    """The table's rows appended to ``path`` (JSON lines, :func:`rlmetrics.readers.read_samples`)."""
    if not len(table):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in table.rows()).encode("utf-8")
    with open(path, "ab") as fh:
        fh.write(data)


def _val_generations(log: Callable[..., Any]) -> Callable[..., Any]:
    """verl's ``_maybe_log_val_generations(inputs, outputs, scores)`` (every validation's decoded
    generations), then their text statistics, kept for the validation flattener that follows
    (``val-text/...``), and a sample table in ``val_samples.jsonl``."""

    @functools.wraps(log)
    def wrapper(self: Any, inputs: Any, outputs: Any, scores: Any, *args: Any, **kwargs: Any) -> Any:
        result = log(self, inputs, outputs, scores, *args, **kwargs)
        options = _STATE.options
        try:
            if options.text_metrics:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UndefinedMetricWarning)
                    _STATE.val_text = compute_text_metrics(
                        list(outputs),
                        prefix=keys.VAL_TEXT_PREFIX,
                        **_options_on_text(options.text_options, getattr(self, "tokenizer", None)),
                    )
            folder = _samples_dir(self, options)
            step = getattr(self, "global_steps", None)
            if options.sample_rows and folder is not None and isinstance(step, int) and step >= 0:
                table = select_samples(
                    list(inputs),
                    list(outputs),
                    np.nan_to_num(np.asarray(scores, dtype=np.float64)),
                    n_random=max(options.sample_rows - 3, 0),
                    max_rows=options.sample_rows,
                    max_bytes=options.sample_bytes,
                    step=step,
                )
                _append_samples(folder / VAL_SAMPLES_FILE, table)
        except Exception as err:
            warnings.warn(
                f"text statistics / samples of the validation not logged: {type(err).__name__}: {err}",
                VerlPatchWarning,
                stacklevel=2,
            )
        return result

    return wrapper


# ----------------------------------------------------------------------------- pass@k
def _is_pass_at_k(name: str) -> bool:
    _, at, k = name.rpartition("@")
    return bool(at) and k.isdigit() and keys.at_k(ValName.PASS, int(k)) == name


def _padded(
    sources: list[Any], uids: list[Any], infos: dict[str, list[Any]], expected: Mapping[tuple[Any, Any], int]
) -> None:
    """verl's failed-session padding, on the sample lists: in the sources that report ``acc``,
    each listed prompt's ``acc`` gets zeros up to its expected count (other variables None)."""
    acc = infos[ValName.ACC]
    observed = Counter((s, u) for s, u, a in zip(sources, uids, acc) if a is not None)
    acc_sources = {s for s, _ in observed}
    for (src, uid), count in expected.items():
        missing = int(count) - observed.get((src, uid), 0)
        if src not in acc_sources or missing <= 0:
            continue
        sources.extend([src] * missing)
        uids.extend([uid] * missing)
        for name, values in infos.items():
            values.extend([0.0 if name == ValName.ACC else None] * missing)


def _add_pass_at_k(
    out: dict[str, dict[str, dict[str, float]]],
    data_sources: Any,
    sample_uids: Any,
    infos_dict: Mapping[str, Sequence[Any]],
    expected: Mapping[tuple[Any, Any], int] | None,
    ks: Sequence[int] | None,
) -> None:
    """Add ``pass@k`` (mean over the prompts with >= k samples) to each 0/1 variable of ``out``."""
    sources, uids = list(data_sources), list(sample_uids)
    numeric = {var for per_source in out.values() for var in per_source}  # what verl computed on
    infos = {name: list(values) for name, values in infos_dict.items() if name in numeric}
    if expected and ValName.ACC in infos:
        _padded(sources, uids, infos, expected)
    try:
        tables = prompt_estimates(sources, uids, infos, ks=ks)
    except (TypeError, ValueError) as err:  # verl skips what prompt_estimates refuses
        warnings.warn(f"pass@k not added to the validation metrics: {err}", VerlPatchWarning, stacklevel=3)
        return
    by_name = {str(src): per_var for src, per_var in out.items()}
    for src, per_var in tables.items():
        for var, table in per_var.items():
            target = by_name.get(src, {}).get(var)
            if target is None or not table.binary:
                continue
            for j, name in enumerate(table.names):
                column = table.values[:, j]
                if _is_pass_at_k(name) and not np.isnan(column).all():
                    target[name] = float(np.nanmean(column))


def _promote_pass_at_k(metrics: Any) -> Any:
    """File the core variable's ``val-aux/<source>/<var>/pass@k`` under ``val-core`` (in place)."""
    if not isinstance(metrics, dict):
        return metrics
    aux = f"{keys.VAL_AUX_PREFIX}/"
    acc, reward = keys.VAL_CORE_VARS
    moves = []
    for key in metrics:
        if not isinstance(key, str) or not key.startswith(aux):
            continue
        parts = key[len(aux) :].rsplit("/", 2)
        if len(parts) != 3 or not _is_pass_at_k(parts[2]):
            continue
        src, var, name = parts
        has_acc = any(
            k.startswith(keys.val_metric(section, src, acc, ""))
            for k in metrics
            if isinstance(k, str)
            for section in (keys.VAL_CORE_PREFIX, keys.VAL_AUX_PREFIX)
        )
        if var == (acc if has_acc else reward):
            moves.append((key, keys.val_metric(keys.VAL_CORE_PREFIX, src, var, name)))
    for old, new in moves:
        metrics[new] = metrics.pop(old)
    return metrics


# ----------------------------------------------------------------------------- patch state
class _Site(NamedTuple):
    owner: Any  # a module or a class
    attr: str
    original: Any
    replacement: Any
    label: str


class _State:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.active = False
        self.options = VerlPatchOptions()
        self.finder: _Finder | None = None
        # id(verl's function) -> (it, its replacement); id(replacement) -> the same pair
        self.by_original: dict[int, tuple[Any, Any]] = {}
        self.by_replacement: dict[int, tuple[Any, Any]] = {}
        self.sites: dict[tuple[int, str], _Site] = {}
        self.missing: set[str] = set()
        self.failed: dict[str, str] = {}
        # the live monitor of the patched fit running now (None: none, or switched off)
        self.live: HealthMonitor | None = None
        self.in_fit = False
        # the text statistics of the last validation's generations, for its flattener
        self.val_text: dict[str, float] = {}

    def watched(self, name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in self.options.packages)

    def capture(self, module: Any) -> None:
        """Learn verl's functions from the module that defines them."""
        name = getattr(module, "__name__", None)
        for fname in _DEFINITIONS.get(name or "", ()):
            fn = vars(module).get(fname)
            if fn is None:
                self.missing.add(f"{name}.{fname}")
            elif id(fn) not in self.by_replacement and id(fn) not in self.by_original:
                self.missing.discard(f"{name}.{fname}")
                self._register(fn, _replacement(fname, fn))

    def _register(self, original: Any, replacement: Any) -> None:
        self.by_original[id(original)] = (original, replacement)
        self.by_replacement[id(replacement)] = (original, replacement)

    def patch_module(self, module: Any) -> None:
        """Replace every binding of a verl function in ``module``, and wrap its trainers' flattener."""
        name = getattr(module, "__name__", None)
        try:
            namespace = vars(module)
        except TypeError:  # not a module (a placeholder some packages keep in sys.modules)
            return
        if not isinstance(name, str) or not self.watched(name):
            return
        self.capture(module)
        for attr, value in list(namespace.items()):
            if inspect.isclass(value) and value.__module__ == name:
                self._patch_class(value)
            pair = self.by_original.get(id(value))
            if pair is not None and pair[0] is value:
                setattr(module, attr, pair[1])
            else:  # bound during a nested import, after its definer was patched
                pair = self.by_replacement.get(id(value))
                if pair is None or pair[1] is not value:
                    continue
            self.sites[(id(module), attr)] = _Site(module, attr, pair[0], pair[1], f"{name}.{attr}")

    def _patch_class(self, cls: type) -> None:
        """Wrap a trainer's validation flattener and ``fit``, and verl's logger's ``log``."""
        self._wrap(cls, _VAL_FLATTENER, _promoting)
        self._wrap(cls, _VAL_GENERATIONS, _val_generations)
        self._wrap(cls, _OLD_LOG_PROB, _keeping_entropy)
        if hasattr(cls, _VAL_FLATTENER) and not inspect.iscoroutinefunction(cls.__dict__.get(_FIT)):
            self._wrap(cls, _FIT, _stopping_fit)
        method = _LOGGERS.get((cls.__module__, cls.__qualname__))
        if method is not None:
            self._wrap(cls, method, _monitored_log)

    def _wrap(self, cls: type, attr: str, make: Callable[[Any], Any]) -> None:
        fn = cls.__dict__.get(attr)
        if not inspect.isfunction(fn) or id(fn) in self.by_replacement:
            return
        wrapper = make(fn)
        self._register(fn, wrapper)
        setattr(cls, attr, wrapper)
        label = f"{cls.__module__}.{cls.__qualname__}.{attr}"
        self.sites[(id(cls), attr)] = _Site(cls, attr, fn, wrapper, label)

    def scan(self) -> None:
        """Patch every loaded watched module (the definers first, so their functions are known)."""
        loaded = [(n, m) for n, m in list(sys.modules.items()) if m is not None and self.watched(n)]
        for name, module in loaded:
            if name in _DEFINITIONS:
                self.capture(module)
        for _, module in loaded:
            self.patch_module(module)

    def restore(self) -> list[str]:
        """Put every original back where the replacement still sits; forget everything."""
        restored = []
        for site in self.sites.values():
            if site.owner.__dict__.get(site.attr) is site.replacement:
                setattr(site.owner, site.attr, site.original)
                restored.append(site.label)
        if self.finder is not None:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(self.finder)
        self.reset()
        return sorted(restored)


def _replacement(name: str, original: Any) -> Callable[..., Any]:
    """A function of its own for ``original`` (so that every binding of it is known and restored
    exactly) that calls rlmetrics' ``name``; ``__wrapped__`` is that rlmetrics function."""
    impl = _IMPLEMENTATIONS[name]

    def replacement(*args: Any, **kwargs: Any) -> Any:
        return impl(*args, **kwargs)

    return functools.update_wrapper(replacement, impl)


def _promoting(flattener: Callable[..., Any]) -> Callable[..., Any]:
    """The trainer's validation flattener, then the core variable's pass@k filed under val-core."""

    @functools.wraps(flattener)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = _promote_pass_at_k(flattener(*args, **kwargs))
        text, _STATE.val_text = _STATE.val_text, {}
        if isinstance(out, dict):
            out.update(text)  # the text statistics of this validation's generations
        return out

    return wrapper


# ----------------------------------------------------------------------------- the live monitor
def _stopping_fit(fit: Callable[..., Any]) -> Callable[..., Any]:
    """A trainer's ``fit`` with the live monitor (``monitor=True``): a ``"stop"`` ends it after
    the step, a ``"raise"`` leaves it as :class:`RunStopped`."""

    @functools.wraps(fit)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        options = _STATE.options
        if not options.monitor or _STATE.in_fit:  # off, or a subclass's fit calling super().fit()
            return fit(self, *args, **kwargs)
        _STATE.in_fit = True
        _STATE.live = HealthMonitor(every=1, budget=None, actions=options.actions, defer_raise=True)
        try:
            return fit(self, *args, **kwargs)
        except RunStopped as stop:
            if stop.action != "stop":
                raise
            _end_of_training(self)
            return None
        finally:
            _STATE.in_fit, _STATE.live = False, None

    return wrapper


def _end_of_training(trainer: Any) -> None:
    """What verl's fit does after its last step: finalise the async calls, shut the dump executor."""
    finalize = getattr(getattr(trainer, "actor_rollout_wg", None), "async_calls_finalize_fn_exec", None)
    if callable(finalize):
        finalize(blocking=True)
    shutdown = getattr(trainer, "_shutdown_dump_executor", None)
    if callable(shutdown):
        shutdown()


def _monitored_log(log: Callable[..., Any]) -> Callable[..., Any]:
    """verl's ``Tracking.log``, the step fed to the live monitor first: its new findings and
    actions are logged with the step; then a stop ends the step with :class:`RunStopped`."""

    @functools.wraps(log)
    def wrapper(self: Any, data: Any, step: Any, *args: Any, **kwargs: Any) -> Any:
        live = _STATE.live
        if live is None or not isinstance(data, Mapping):
            return log(self, data, step, *args, **kwargs)
        records = _feed(live, data, step)
        out = log(self, {**data, **records} if records else data, step, *args, **kwargs)
        if live.should_stop and _STATE.live is live:
            _STATE.live = None  # acted once: a later log (verl's clean-up) is not monitored
            reason = live.stop_reason
            print(f"{RunStopped(reason, action='stop', step=int(step))}; verl's fit ends here", flush=True)
            live.raise_pending()  # a "raise" action
            raise RunStopped(reason, action="stop", step=int(step))
        return out

    return wrapper


def _feed(live: HealthMonitor, data: Mapping[Any, Any], step: Any) -> dict[str, float]:
    """One logged step into the monitor: its ``health/<kind>`` and ``health_action/<kind>``
    records (each finding also a ``HealthWarning``). A monitor that fails is switched off."""
    scalars = {
        k: float(v)
        for k, v in data.items()
        if isinstance(k, str)
        and isinstance(v, int | float | np.integer | np.floating)
        and not isinstance(v, bool)
    }
    try:
        found = live.update(scalars, int(step))
    except Exception as err:  # the metrics go on being logged without it
        _STATE.live = None
        warnings.warn(
            f"the health monitor failed at step {step} and is switched off; verl's logging goes on: "
            f"{type(err).__name__}: {err}",
            TrackingWarning,
            stacklevel=3,
        )
        return {}
    records = {keys.health(f.kind): keys.HEALTH_SEVERITY_VALUE[f.severity] for f in found}
    for f in found:
        warnings.warn(
            f"rlmetrics health: {f.kind} ({f.severity}) from step {f.step}: {f.advice}",
            HealthWarning,
            stacklevel=3,
        )
    records.update(live.pop_action_records())
    return records


_STATE = _State()


# ----------------------------------------------------------------------------- the import hook
class _Loader:
    """A module's loader, then :meth:`_State.patch_module` on the module it executed."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, is_package, ...
        if name == "_loader":  # not set yet (a copy being built)
            raise AttributeError(name)
        return getattr(self._loader, name)

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        # the module keeps its own loader (inspect, importlib.resources and reload read it)
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self._loader
        self._loader.exec_module(module)
        if _STATE.active:
            _STATE.patch_module(module)


class _Finder:
    """A meta path finder for the watched packages: the spec of the finders after it, with a
    loader that patches the module once it has executed."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if not _STATE.active or not _STATE.watched(fullname):
            return None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or isinstance(finder, _Finder) or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None

    def invalidate_caches(self) -> None:
        return None


# ----------------------------------------------------------------------------- discovery
def _verl_version() -> str | None:
    try:
        return importlib.metadata.version("verl")
    except importlib.metadata.PackageNotFoundError:
        return None


def _require_verl() -> None:
    try:
        found = importlib.util.find_spec("verl") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ImportError(
            f"rlmetrics.integrations.verl needs verl (tested with {TESTED_VERSION}): {_INSTALL}"
        )


@functools.lru_cache(maxsize=8)
def _binding_modules(packages: tuple[str, ...]) -> tuple[str, ...]:
    """Modules of ``packages`` whose source binds one of verl's metric functions by name
    (``from <definer or its package> import ..., name, ...``): read from the files, not imported."""
    sources = sorted(set(_DEFINITIONS) | {m.rpartition(".")[0] for m in _DEFINITIONS})
    modules = b"|".join(re.escape(m.encode()) for m in sources)
    from_import = re.compile(rb"from\s+(?:" + modules + rb")\s+import\s+(\([^)]*\)|[^\n]*)")
    names = sorted({n for group in _DEFINITIONS.values() for n in group})
    named = re.compile(rb"\b(?:" + b"|".join(n.encode() for n in names) + rb")\b")
    found = []
    for package in packages:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        for root in (spec.submodule_search_locations or []) if spec is not None else []:
            base = Path(root)
            for path in sorted(base.rglob("*.py")):
                parts = path.relative_to(base).with_suffix("").parts
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                if not all(p.isidentifier() for p in parts):
                    continue
                try:
                    text = path.read_bytes()
                except OSError:
                    continue
                if any(named.search(m.group(1)) for m in from_import.finditer(text)):
                    found.append(".".join((package, *parts)))
    return tuple(found)


def _preload() -> None:
    """Import the definers and every module that refers to their functions; a module that fails
    to import is skipped with a warning naming it."""
    targets = [*_DEFINITIONS, *_binding_modules(tuple(_STATE.options.packages))]
    for name in dict.fromkeys(targets):
        if name in sys.modules or name in _STATE.failed:
            continue
        try:
            importlib.import_module(name)
        except Exception as err:  # any error of a module's top level: skip that module
            _STATE.failed[name] = f"{type(err).__name__}: {err}"
            if name in _DEFINITIONS:
                _STATE.missing.update(f"{name}.{f}" for f in _DEFINITIONS[name])
            warnings.warn(
                f"verl module {name} failed to import ({type(err).__name__}: {err}); skipped, "
                f"its metric functions are not patched (patched when it imports later)",
                VerlPatchWarning,
                stacklevel=4,  # _preload, _install, patch, the caller
            )


# ----------------------------------------------------------------------------- public API
def report() -> PatchReport:
    """Where the patch stands: active or not, verl's version, options, what is patched.

    Returns
    -------
    PatchReport

    Examples
    --------
    >>> from rlmetrics.integrations import verl as rv
    >>> rv.report().active
    False
    """
    return PatchReport(
        active=_STATE.active,
        version=_verl_version(),
        options=_STATE.options.as_dict(),
        patched=tuple(sorted(s.label for s in _STATE.sites.values())),
        missing=tuple(sorted(_STATE.missing)),
        failed=tuple(f"{name}: {err}" for name, err in sorted(_STATE.failed.items())),
    )


def patch(
    *,
    max_response_length: int | None = None,
    max_prompt_length: int | None = None,
    flops_per_token: float | None = None,
    num_params: float | None = None,
    peak_flops: float | str | None = None,
    pass_at_k: bool = True,
    ks: Sequence[int] | None = None,
    packages: Sequence[str] = ("verl",),
    preload: bool = True,
    monitor: bool = False,
    actions: Mapping[str, str] | None = None,
    by_data_source: bool = True,
    split_by_outcome: bool = True,
    reward_components: bool = True,
    group_metrics: bool = True,
    entropy_metrics: bool = True,
    solved_threshold: float = 1.0,
    max_categories: int = DEFAULT_MAX_CATEGORIES,
    text_metrics: bool = True,
    text_options: Mapping[str, Any] | None = None,
    decode_responses: bool = False,
    sample_rows: int = 8,
    sample_bytes: int = 65536,
    samples_dir: str | None = None,
) -> PatchReport:
    """Make verl's trainers, in this process, compute their metrics with rlmetrics.

    Every binding of verl's metric functions in a loaded module of ``packages`` is replaced
    (found by identity), and modules imported later are patched as they load (an import hook).
    Calling it again is harmless: the same replacements, the new options. The options are
    checked once, into a :class:`VerlPatchOptions`.

    Parameters
    ----------
    max_response_length, max_prompt_length : int, keyword-only, optional
        The configured limits (verl's ``data.max_response_length`` ...), so that
        ``response_length/clip_ratio`` counts responses that hit the limit even when the batch
        is padded to its longest row (:func:`rlmetrics.compute_data_metrics`).
    flops_per_token, num_params, peak_flops : keyword-only, optional
        ``peak_flops`` (FLOP/s or an accelerator name) and one of the others add ``perf/mfu``
        to the throughput metrics (:func:`rlmetrics.compute_throughput_metrics`).
    pass_at_k : bool, keyword-only
        Add the exact ``pass@k`` of every 0/1 validation variable (under ``val-core`` for the
        core variable, ``val-aux`` for the others).
    ks : sequence of int, keyword-only, optional
        The k of ``pass@k``; default 1, 2, 4, ... and the largest number of samples.
    packages : sequence of str, keyword-only
        Top-level packages whose modules are patched (add a recipe package, e.g.
        ``["verl", "recipe"]``).
    preload : bool, keyword-only
        Also import verl's metric modules and every module of ``packages`` whose source imports
        one of their functions by name (found by reading the files, not from a list), so that
        the report is complete now; a module that fails to import is skipped with a
        :class:`VerlPatchWarning`.
    monitor : bool, keyword-only
        Run the live :class:`rlmetrics.HealthMonitor` on every step a patched trainer's ``fit``
        logs (a diagnosis per step; findings as ``HealthWarning`` and ``health/<kind>`` records).
    actions : dict, keyword-only, optional
        What the monitor does on a finding, kind or severity -> ``"warn"`` / ``"stop"`` /
        ``"raise"`` (:class:`rlmetrics.health.monitor.ActionPolicy`; needs ``monitor=True``):
        ``"stop"`` ends ``fit`` after the step, ``"raise"`` raises
        :class:`rlmetrics.errors.RunStopped` out of it (the module docstring says how).
    by_data_source : bool, keyword-only
        The data metrics also per ``data_source`` when the batch carries it (verl's datasets do):
        ``by_data_source/<source>/critic/score/mean`` ... (``group_by="data_source"`` of
        :func:`rlmetrics.compute_data_metrics`); verl's keys stay as they are.
    split_by_outcome : bool, keyword-only
        The data metrics also for the correct and the incorrect samples
        (``by_outcome/correct/response_length/mean`` ...) when the batch carries a numeric or
        boolean ``acc`` (a reward function's ``reward_extra_info``, as verl's math scorers').
    reward_components : bool, keyword-only
        Log :func:`rlmetrics.compute_reward_component_metrics` of the numeric ``reward_extra_info``
        fields (those ``meta_info["reward_extra_keys"]`` names, but the total ``score``):
        ``reward_components/<name>/{mean,std,max,min,decides_frac}``.
    group_metrics : bool, keyword-only
        Log the training pass rates of the GRPO groups when the batch has verl's ``uid`` (the
        prompt of each rollout) and some prompt has several rollouts
        (:func:`rlmetrics.compute_group_metrics`): ``grpo/pass@k`` (the unbiased estimator over
        each group's samples, for the ``ks`` not above the largest group; without ``ks``, 1 and
        the largest group size), ``grpo/frac_all_solved``, ``grpo/frac_none_solved``, and of the
        score (``token_level_scores`` summed, verl's ``critic/score``) the within-group spread
        ``grpo/reward_std/mean``, ``grpo/frac_reward_zero_std`` and the group sizes; with
        ``by_data_source`` also per data source (``by_data_source/<source>/grpo/pass@1`` ...). A
        sample is solved when its ``acc`` is above 0.5, where the batch carries a numeric or
        boolean ``acc`` per sample (as the outcome split), else when its score is
        ``>= solved_threshold``.
    entropy_metrics : bool, keyword-only
        Log the policy entropy per data source and per outcome
        (``by_data_source/<source>/actor/entropy``, ``by_outcome/correct/actor/entropy``, as the
        data metrics split; :func:`rlmetrics.compute_entropy_metrics` aggregated by the trainer's
        ``actor.loss_agg_mode``). verl's trainers compute the token entropies in their
        ``_compute_old_log_prob``, log their aggregate ``actor/entropy`` and drop them before
        ``compute_data_metrics``; the patch wraps that method (the one hook, on the trainer
        classes, restored by :func:`unpatch`) to file each response's mean entropy over
        ``response_mask`` in ``non_tensor_batch["rlmetrics_entropy"]`` (one float a sample; NaN
        for a response without tokens). verl's ``actor/entropy`` itself is left as verl logs it.
        Without the old-log-prob pass (``rollout_correction.bypass_mode``) there is no entropy.
    solved_threshold : float, keyword-only
        The score at or above which a sample without ``acc`` is solved (default 1.0, the full
        marks of verl's rule-based scorers; ``compute_group_metrics``' ``solved_threshold``).
    max_categories : int, keyword-only
        At most this many data sources are reported; the least frequent together as ``<other>``
        (one warning).
    text_metrics : bool, keyword-only
        Add :func:`rlmetrics.compute_text_metrics` of the training batch's responses, from their
        token ids (``text/...``: length in tokens, empty responses, loops, distinct-n; the
        compression ratio with ``text_options={"compression": True}``; the stop reasons when the
        calling trainer's tokenizer has an ``eos_token_id``: ``stop`` for a response ending in it,
        ``length`` for one at the limit, ``other`` else), and of every validation's decoded
        generations (``val-text/...``, with the compression and non-word ratios and the default
        thinking tags, as on any text).
    text_options : dict, keyword-only, optional
        Keywords of :func:`rlmetrics.compute_text_metrics`, checked here: ``format_pattern`` (a
        regular expression as a string, e.g. ``r"\\boxed\\{.+\\}"``, flags inline; a compiled
        one is taken as its string), ``think_span`` (``(open, close)`` as strings, or as token
        ids: an id or a list of ids each), ``ngram``, ``loop_repeats``, ``loop_max_period``,
        ``compression``. The validation (decoded text) takes them all, a ``think_span`` of ids
        decoded with the trainer's tokenizer. The training batch from its token ids takes
        ``compression``, ``ngram``, ``loop_repeats``, ``loop_max_period`` and a ``think_span``
        of ids; ``format_pattern`` and string tags need ``decode_responses=True`` there.
    decode_responses : bool, keyword-only
        Decode every response of each training batch with the calling trainer's tokenizer
        (``batch_decode``, ``skip_special_tokens=True`` as verl's validation: thinking tags that
        are special tokens are dropped) and compute ``text/...`` on the text, with all of
        ``text_options``: the one way to have ``text/format/match_ratio`` (what the
        ``format_failure_rise`` rule reads) and the non-word ratio of the training rollouts;
        lengths are then in characters. Default ``False``: decoding the whole batch and the
        statistics of text (Python over every word, zlib on by default) cost about 3 s per
        million response tokens (measured on one CPU core, 256 responses of 4,096 tokens,
        decoding and statistics about half each), against about 0.2 s from the ids, in the
        trainer's process each step.
    sample_rows : int, keyword-only
        Rows of the sample table of each training step (max, min and median reward, random rows;
        only those rows are decoded, with the trainer's tokenizer, unless ``decode_responses``) and
        of each validation, appended to ``samples.jsonl`` and ``val_samples.jsonl`` in the samples
        folder; 0: none.
    sample_bytes : int, keyword-only
        The most UTF-8 bytes of a table's prompts and responses (:func:`rlmetrics.select_samples`).
    samples_dir : str, keyword-only, optional
        The samples folder; default the one beside verl's file logger's
        ``<project>/<experiment>.jsonl``, named as it without ``.jsonl``.

    Returns
    -------
    PatchReport

    Raises
    ------
    ImportError
        verl is not installed.

    Warns
    -----
    VerlPatchWarning
        A module that failed to import; a verl version other than :data:`TESTED_VERSION`
        (naming what was and was not patched); a ``format_pattern`` without
        ``decode_responses=True`` (it checks the validation's generations alone).

    Examples
    --------
    >>> from rlmetrics.integrations import verl as rv
    >>> with rv.patched(max_response_length=1024, preload=False) as r:
    ...     r.active, r.options["max_response_length"]
    (True, 1024)
    >>> rv.report().active
    False
    """
    options = VerlPatchOptions(
        max_response_length=max_response_length,
        max_prompt_length=max_prompt_length,
        flops_per_token=flops_per_token,
        num_params=num_params,
        peak_flops=peak_flops,
        pass_at_k=pass_at_k,
        ks=ks,
        packages=packages,
        preload=preload,
        monitor=monitor,
        actions=actions,
        by_data_source=by_data_source,
        split_by_outcome=split_by_outcome,
        reward_components=reward_components,
        group_metrics=group_metrics,
        entropy_metrics=entropy_metrics,
        solved_threshold=solved_threshold,
        max_categories=max_categories,
        text_metrics=text_metrics,
        text_options=text_options,
        decode_responses=decode_responses,
        sample_rows=sample_rows,
        sample_bytes=sample_bytes,
        samples_dir=samples_dir,
    )
    return _install(options)


def _install(options: VerlPatchOptions) -> PatchReport:
    """Install the replacements and the import hook with ``options``; warn where verl differs."""
    _require_verl()
    _STATE.options = options
    if not _STATE.active:
        _STATE.active = True
        _STATE.finder = _Finder()
        sys.meta_path.insert(0, _STATE.finder)
    _STATE.scan()
    if options.preload:
        _preload()
    if (
        options.text_metrics
        and not options.decode_responses
        and "format_pattern" in (options.text_options or {})
    ):
        warnings.warn(
            "text_options format_pattern checks the validation's generations alone (val-text/format/...): "
            "the training batch's text/format/match_ratio, which the format_failure_rise rule reads, "
            "needs decode_responses=True",
            VerlPatchWarning,
            stacklevel=3,
        )
    result = report()
    if result.version != TESTED_VERSION or result.missing:
        warnings.warn(
            f"verl {result.version or '(version unknown)'} is not the version rlmetrics.integrations.verl "
            f"is tested with ({TESTED_VERSION}): patched {', '.join(result.patched) or 'nothing yet'}; "
            f"not patched: {', '.join(result.missing + result.failed) or 'nothing known'}"
            + ("" if options.preload else " (modules imported later are patched as they load)"),
            VerlPatchWarning,
            stacklevel=3,
        )
    return result


def unpatch() -> tuple[str, ...]:
    """Put verl's original functions back (the same objects) and remove the import hook.

    A binding that something else replaced after :func:`patch` is left alone.

    Returns
    -------
    tuple of str
        The bindings restored, ``module.attribute``.

    Examples
    --------
    >>> from rlmetrics.integrations import verl as rv
    >>> rv.unpatch()  # nothing patched: nothing to restore
    ()
    """
    return tuple(_STATE.restore())


@contextlib.contextmanager
def patched(**options: Any) -> Iterator[PatchReport]:
    """:func:`patch` for a ``with`` block; on exit the previous state comes back (unpatched, or
    patched with the previous options).

    Examples
    --------
    >>> from rlmetrics.integrations import verl as rv
    >>> with rv.patched(preload=False, pass_at_k=False) as r:
    ...     r.options["pass_at_k"]
    False
    """
    previous = _STATE.options if _STATE.active else None
    result = patch(**options)
    try:
        yield result
    finally:
        if previous is None:
            unpatch()
        else:
            _STATE.options = previous


#: The ``worker_process_setup_hook`` of :func:`runtime_env`: Ray imports and calls it in every
#: worker before it runs a task or an actor.
SETUP_HOOK = f"{__name__}.setup_worker"


def runtime_env(**options: Any) -> dict[str, Any]:
    """The Ray ``runtime_env`` that makes every worker of a job call :func:`patch` with ``options``.

    A ``worker_process_setup_hook`` (:data:`SETUP_HOOK`) and the options as JSON in
    :data:`OPTIONS_ENV`. In the workers ``preload`` defaults to False: the import hook patches
    the trainer module when verl's ``TaskRunner`` imports it. Merge it into an existing
    ``runtime_env`` (verl's ``ray_kwargs.ray_init.runtime_env``) with :func:`merge_runtime_env`.

    Parameters
    ----------
    **options
        Keyword arguments of :func:`patch` (checked now, so a typo fails at launch), all JSON:
        ``text_options`` with its ``format_pattern`` as a string and its ``think_span`` as
        strings or token ids.

    Returns
    -------
    dict
        ``{"worker_process_setup_hook": SETUP_HOOK, "env_vars": {OPTIONS_ENV: "<json>"}}``.

    Examples
    --------
    >>> from rlmetrics.integrations.verl import runtime_env
    >>> env = runtime_env(max_response_length=2048)
    >>> env["worker_process_setup_hook"], env["env_vars"]["RLMETRICS_VERL_OPTIONS"]
    ('rlmetrics.integrations.verl.setup_worker', '{"max_response_length": 2048}')
    >>> env = runtime_env(text_options={"format_pattern": "Answer: [A-D]"}, decode_responses=True)
    >>> env["env_vars"]["RLMETRICS_VERL_OPTIONS"]
    '{"decode_responses": true, "text_options": {"format_pattern": "Answer: [A-D]"}}'
    """
    checked = VerlPatchOptions(**options)
    # only the options given: the others take the workers' defaults (preload=False there)
    return {"worker_process_setup_hook": SETUP_HOOK, "env_vars": {OPTIONS_ENV: checked.to_json(only=options)}}


def merge_runtime_env(base: Mapping[str, Any] | None, **options: Any) -> dict[str, Any]:
    """``base`` (a Ray ``runtime_env``, e.g. verl's) with :func:`runtime_env` merged in.

    ``env_vars`` are merged (rlmetrics' variable replaces one already there); a different
    ``worker_process_setup_hook`` in ``base`` is an error, since Ray runs one hook per worker.

    Parameters
    ----------
    base : mapping or None
        The runtime_env to extend (not modified).
    **options
        Keyword arguments of :func:`patch`.

    Returns
    -------
    dict

    Raises
    ------
    ValueError
        ``base`` has another setup hook.

    Examples
    --------
    >>> from rlmetrics.integrations.verl import merge_runtime_env
    >>> env = merge_runtime_env({"env_vars": {"TOKENIZERS_PARALLELISM": "true"}, "working_dir": None})
    >>> sorted(env["env_vars"]), env["working_dir"]
    (['RLMETRICS_VERL_OPTIONS', 'TOKENIZERS_PARALLELISM'], None)
    """
    if base is not None and not isinstance(base, Mapping):
        raise TypeError(f"base must be a runtime_env mapping or None; got {type(base).__name__}")
    ours = runtime_env(**options)
    merged = dict(base or {})
    hook = merged.get("worker_process_setup_hook")
    if hook not in (None, SETUP_HOOK):
        raise ValueError(
            f"base already has worker_process_setup_hook {hook!r}; Ray runs one hook per worker: "
            f"call rlmetrics.integrations.verl.patch() from that hook instead"
        )
    env_vars = merged.get("env_vars") or {}
    if not isinstance(env_vars, Mapping):
        raise TypeError(f"base['env_vars'] must be a mapping; got {type(env_vars).__name__}")
    merged["env_vars"] = {**env_vars, **ours["env_vars"]}
    merged["worker_process_setup_hook"] = SETUP_HOOK
    return merged


def setup_worker() -> None:
    """Ray's ``worker_process_setup_hook``: :func:`patch` with the options of :data:`OPTIONS_ENV`.

    Raises
    ------
    ValueError
        The variable is not a JSON object (Ray then stops the worker with this message).
    """
    _install(VerlPatchOptions.from_json(os.environ.get(OPTIONS_ENV, ""), preload=False))

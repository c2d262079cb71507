"""rlmetrics: training and validation metrics for RL fine-tuning of language models.

A drop-in for ``verl.trainer.ppo.metric_utils`` (same names, arguments, keys and values),
faster, with exact estimators beside verl's bootstrap, and tracking backends.

>>> import numpy as np, rlmetrics
>>> batch = {
...     "token_level_scores": np.array([[0.0, 1.0], [0.0, 0.0]], dtype=np.float32),
...     "token_level_rewards": np.array([[0.0, 1.0], [0.0, 0.0]], dtype=np.float32),
...     "advantages": np.array([[0.5, 0.5], [-0.5, 0.0]], dtype=np.float32),
...     "returns": np.array([[1.0, 1.0], [0.0, 0.0]], dtype=np.float32),
...     "response_mask": np.array([[1, 1], [1, 0]]),
...     "attention_mask": np.array([[1, 1, 1, 1], [0, 1, 1, 0]]),
...     "prompts": np.zeros((2, 2), dtype=np.int64),
...     "responses": np.zeros((2, 2), dtype=np.int64),
... }
>>> m = rlmetrics.compute_data_metrics(batch, use_critic=False)
>>> m["critic/score/mean"], m["response_length/mean"], m["prompt_length/clip_ratio"]
(0.5, 1.5, 0.5)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rlmetrics import keys as keys
from rlmetrics._core.batch import BatchView, as_batch
from rlmetrics._core.comm import all_reduce_stats
from rlmetrics._core.stats import Stats
from rlmetrics.aggregation import (
    AggregationType,
    Metric,
    MetricCollector,
    all_reduce_metric,
    all_reduce_metrics,
    reduce_metrics,
    reducer_for_key,
)
from rlmetrics.errors import RLMetricsError, RunStopped, UndefinedMetricWarning
from rlmetrics.health import Diagnosis, Finding, HealthMonitor, RunReadError, diagnose, load_history
from rlmetrics.health.monitor import ActionPolicy
from rlmetrics.policy.entropy import compute_entropy_metrics, entropy_statistics
from rlmetrics.policy.groups import compute_group_metrics
from rlmetrics.policy.logits import (
    entropy_and_sum_pi_squared_from_logits,
    entropy_from_logits,
    sum_pi_squared_from_logits,
)
from rlmetrics.policy.mismatch import compute_rollout_mismatch_metrics, rollout_mismatch_statistics
from rlmetrics.policy.ppo import compute_ppo_update_metrics, ppo_update_statistics
from rlmetrics.policy.staleness import compute_staleness_metrics, staleness_statistics
from rlmetrics.policy.variance import compute_variance_proxy_metrics, variance_proxy_statistics
from rlmetrics.tracking import Tracker, TrackingBackend, read_jsonl
from rlmetrics.training.data import compute_data_metrics, data_statistics
from rlmetrics.training.rewards import compute_reward_component_metrics, reward_component_statistics
from rlmetrics.training.samples import SampleTable, select_samples
from rlmetrics.training.text import compute_text_metrics, text_statistics
from rlmetrics.training.timers import Stage, StageTimer, timer
from rlmetrics.training.timing import (
    ACCELERATOR_PEAK_FLOPS,
    compute_mfu,
    compute_throughout_metrics,
    compute_throughput_metrics,
    compute_timing_metrics,
)
from rlmetrics.validation.comparison.curves import compare_curves, pass_at_k_curves
from rlmetrics.validation.comparison.paired import paired_difference
from rlmetrics.validation.comparison.plan import plan_evaluation
from rlmetrics.validation.comparison.seeds import combine_seeds, compare_seed_groups
from rlmetrics.validation.comparison.tables import compare_summaries, compare_tables
from rlmetrics.validation.exact.estimators import (
    Estimate,
    best_at_k,
    cover_at_tau,
    maj_at_k,
    pass_at_k,
    pass_hat_k,
    worst_at_k,
)
from rlmetrics.validation.exact.intervals import mean_interval, wilson_interval
from rlmetrics.validation.exact.summary import SummaryOptions, prompt_estimates, summarize_validation
from rlmetrics.validation.verl.bootstrap import (
    bootstrap_indices,
    bootstrap_metric,
    calc_maj_val,
    flatten_validation_metrics,
    process_validation_metrics,
)

if TYPE_CHECKING:
    from rlmetrics.demo.run import DemoConfig, DemoResult, run_demo
    from rlmetrics.report import load_run, write_report

from rlmetrics._version import __version__

# Names imported on first use: the demo and the report sit on top of the stack (and reach for
# torch and matplotlib), so ``import rlmetrics`` stays at numpy and array-api-compat.
_LAZY = {
    "DemoConfig": "rlmetrics.demo.run",
    "DemoResult": "rlmetrics.demo.run",
    "run_demo": "rlmetrics.demo.run",
    "load_run": "rlmetrics.report",
    "write_report": "rlmetrics.report",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rlmetrics' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "ACCELERATOR_PEAK_FLOPS",
    "ActionPolicy",
    "AggregationType",
    "BatchView",
    "DemoConfig",
    "DemoResult",
    "Diagnosis",
    "Estimate",
    "Finding",
    "HealthMonitor",
    "Metric",
    "MetricCollector",
    "RLMetricsError",
    "RunReadError",
    "RunStopped",
    "SampleTable",
    "Stage",
    "StageTimer",
    "Stats",
    "SummaryOptions",
    "Tracker",
    "TrackingBackend",
    "UndefinedMetricWarning",
    "__version__",
    "all_reduce_metric",
    "all_reduce_metrics",
    "all_reduce_stats",
    "as_batch",
    "best_at_k",
    "bootstrap_indices",
    "bootstrap_metric",
    "calc_maj_val",
    "combine_seeds",
    "compare_curves",
    "compare_seed_groups",
    "compare_summaries",
    "compare_tables",
    "compute_data_metrics",
    "compute_entropy_metrics",
    "compute_group_metrics",
    "compute_mfu",
    "compute_ppo_update_metrics",
    "compute_reward_component_metrics",
    "compute_rollout_mismatch_metrics",
    "compute_staleness_metrics",
    "compute_text_metrics",
    "compute_throughout_metrics",
    "compute_throughput_metrics",
    "compute_timing_metrics",
    "compute_variance_proxy_metrics",
    "cover_at_tau",
    "data_statistics",
    "diagnose",
    "entropy_and_sum_pi_squared_from_logits",
    "entropy_from_logits",
    "entropy_statistics",
    "flatten_validation_metrics",
    "keys",
    "load_history",
    "load_run",
    "maj_at_k",
    "mean_interval",
    "paired_difference",
    "pass_at_k",
    "pass_at_k_curves",
    "pass_hat_k",
    "plan_evaluation",
    "ppo_update_statistics",
    "process_validation_metrics",
    "prompt_estimates",
    "read_jsonl",
    "reduce_metrics",
    "reducer_for_key",
    "reward_component_statistics",
    "rollout_mismatch_statistics",
    "run_demo",
    "select_samples",
    "staleness_statistics",
    "sum_pi_squared_from_logits",
    "summarize_validation",
    "text_statistics",
    "timer",
    "variance_proxy_statistics",
    "wilson_interval",
    "worst_at_k",
    "write_report",
]

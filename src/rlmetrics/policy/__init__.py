"""Policy-side metrics: how the policy and its update behave, beside the data they see.

* :mod:`~rlmetrics.policy.variance`: verl's gradient-variance proxies.
* :mod:`~rlmetrics.policy.logits`: entropy and the sum of squared probabilities from logits,
  chunked to bound memory.
* :mod:`~rlmetrics.policy.entropy`: the responses' entropy (verl's ``actor/entropy``, any
  ``loss_agg_mode``), per category and per outcome.
* :mod:`~rlmetrics.policy.ppo`: PPO update statistics (clip fractions by side, approximate KL,
  the ratio's range).
* :mod:`~rlmetrics.policy.mismatch`: rollout/training mismatch (importance weights, KL,
  chi-squared, perplexities).
* :mod:`~rlmetrics.policy.groups`: GRPO group statistics (groups without reward spread,
  solved by all or by none).
* :mod:`~rlmetrics.policy.staleness`: off-policy / asynchronous staleness (version lag, spans,
  ages, dropped samples) and what the lag costs, per lag bucket.
"""

from __future__ import annotations

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

__all__ = [
    "compute_entropy_metrics",
    "compute_group_metrics",
    "compute_ppo_update_metrics",
    "compute_rollout_mismatch_metrics",
    "compute_staleness_metrics",
    "compute_variance_proxy_metrics",
    "entropy_and_sum_pi_squared_from_logits",
    "entropy_from_logits",
    "entropy_statistics",
    "ppo_update_statistics",
    "rollout_mismatch_statistics",
    "staleness_statistics",
    "sum_pi_squared_from_logits",
    "variance_proxy_statistics",
]

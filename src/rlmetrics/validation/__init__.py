"""Validation metrics: verl's bootstrap statistics, exact estimators and a summary with error bars.

* :mod:`~rlmetrics.validation.bootstrap`: verl 0.9.1's ``process_validation_metrics`` (same
  keys and values), ``bootstrap_metric`` and ``calc_maj_val``, vectorised over prompts.
* :mod:`~rlmetrics.validation.estimators`: exact pass@k, best@k, worst@k and maj@k.
* :mod:`~rlmetrics.validation.summary`: those estimators (and pass^k, cover@tau) per source
  and variable, per prompt and as means with intervals across prompts
  (:mod:`~rlmetrics.validation.intervals`: Wilson on the effective number of prompts, t,
  bootstrap; clustered standard errors).
* :mod:`~rlmetrics.validation.evals`: two evaluations compared prompt by prompt (paired
  differences, pass@k curves and their crossover), on :mod:`~rlmetrics.validation.compare`'s
  statistics.
* :mod:`~rlmetrics.validation.dumps`: rollout dumps (files, folders of per-step dumps) read
  with bounded memory.

Their building blocks: :mod:`~rlmetrics.validation.inputs` (grouping and columns),
:mod:`~rlmetrics.validation.draws` (verl's bootstrap draws, shared),
:mod:`~rlmetrics.validation.extremes` (best@k / worst@k from rank counts) and
:mod:`~rlmetrics.validation.majority` (maj@k from vote scores).
"""

from __future__ import annotations

from rlmetrics.validation.bootstrap import (
    bootstrap_indices,
    bootstrap_metric,
    calc_maj_val,
    flatten_validation_metrics,
    process_validation_metrics,
)
from rlmetrics.validation.compare import (
    CurveComparison,
    PairedDifference,
    compare_curves,
    match_prompts,
    paired_difference,
    pass_at_k_curves,
    pass_hat_k_curves,
    unpaired_difference,
)
from rlmetrics.validation.estimators import (
    Estimate,
    best_at_k,
    cover_at_tau,
    maj_at_k,
    pass_at_k,
    pass_hat_k,
    worst_at_k,
)
from rlmetrics.validation.evals import TableComparison, compare_summaries, compare_tables
from rlmetrics.validation.intervals import (
    CI_METHODS,
    Interval,
    column_intervals,
    mean_interval,
    wilson_interval,
)
from rlmetrics.validation.summary import (
    PromptTable,
    default_ks,
    prompt_estimates,
    summarize_table,
    summarize_validation,
)

__all__ = [
    "CI_METHODS",
    "CurveComparison",
    "Estimate",
    "Interval",
    "PairedDifference",
    "PromptTable",
    "TableComparison",
    "best_at_k",
    "bootstrap_indices",
    "bootstrap_metric",
    "calc_maj_val",
    "column_intervals",
    "compare_curves",
    "compare_summaries",
    "compare_tables",
    "cover_at_tau",
    "default_ks",
    "flatten_validation_metrics",
    "maj_at_k",
    "match_prompts",
    "mean_interval",
    "paired_difference",
    "pass_at_k",
    "pass_at_k_curves",
    "pass_hat_k",
    "pass_hat_k_curves",
    "process_validation_metrics",
    "prompt_estimates",
    "summarize_table",
    "summarize_validation",
    "unpaired_difference",
    "wilson_interval",
    "worst_at_k",
]

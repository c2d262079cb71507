"""Validation metrics in three places, by job.

* :mod:`~rlmetrics.validation.verl`: verl's bootstrap engine, verl 0.9.1's
  ``process_validation_metrics`` (same keys and values), ``bootstrap_metric`` and
  ``calc_maj_val``, vectorised over prompts.
* :mod:`~rlmetrics.validation.exact`: exact pass@k, pass^k, best@k, worst@k, maj@k and cover@tau,
  per prompt and as means with intervals across prompts (``summarize_validation``, its options
  one ``SummaryOptions``); the input grouping and the one maj@k vote counter.
* :mod:`~rlmetrics.validation.comparison`: two evaluations compared prompt by prompt (paired
  differences, pass@k curves with a simultaneous band and their crossover, whole tables), several
  training seeds combined (``combine_seeds``, ``compare_seed_groups``) and evaluations planned
  (``plan_evaluation``).
Rollout dumps (files, folders of per-step dumps) are read by :mod:`rlmetrics.readers.dumps`
(``rlmetrics.validation.dumps`` is a shim).

The arrows: comparison -> exact <- verl (verl reads its inputs and vote patterns with exact's
``inputs`` and ``votes``). The old flat modules (``rlmetrics.validation.bootstrap``,
``.compare``, ``.evals``, ``.summary``, ``.intervals``, ``.estimators``, ``.majority``,
``.extremes``, ``.draws``, ``.inputs``) re-export the same objects from their new places.
"""

from __future__ import annotations

from rlmetrics.validation.comparison.curves import (
    CurveComparison,
    compare_curves,
    pass_at_k_curves,
    pass_hat_k_curves,
)
from rlmetrics.validation.comparison.paired import (
    PairedDifference,
    match_prompts,
    paired_difference,
    unpaired_difference,
)
from rlmetrics.validation.comparison.plan import EvaluationPlan, PilotSpread, pilot_spread, plan_evaluation
from rlmetrics.validation.comparison.seeds import (
    SeedComparison,
    SeedSummary,
    combine_seeds,
    compare_seed_groups,
)
from rlmetrics.validation.comparison.tables import TableComparison, compare_summaries, compare_tables
from rlmetrics.validation.exact.estimators import (
    Estimate,
    best_at_k,
    cover_at_tau,
    maj_at_k,
    pass_at_k,
    pass_hat_k,
    worst_at_k,
)
from rlmetrics.validation.exact.intervals import (
    CI_METHODS,
    Interval,
    column_intervals,
    mean_interval,
    wilson_interval,
)
from rlmetrics.validation.exact.summary import (
    PromptTable,
    SummaryOptions,
    default_ks,
    prompt_estimates,
    summarize_table,
    summarize_validation,
)
from rlmetrics.validation.verl.bootstrap import (
    bootstrap_indices,
    bootstrap_metric,
    calc_maj_val,
    flatten_validation_metrics,
    process_validation_metrics,
)

__all__ = [
    "CI_METHODS",
    "CurveComparison",
    "Estimate",
    "EvaluationPlan",
    "Interval",
    "PairedDifference",
    "PilotSpread",
    "PromptTable",
    "SeedComparison",
    "SeedSummary",
    "SummaryOptions",
    "TableComparison",
    "best_at_k",
    "bootstrap_indices",
    "bootstrap_metric",
    "calc_maj_val",
    "column_intervals",
    "combine_seeds",
    "compare_curves",
    "compare_seed_groups",
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
    "pilot_spread",
    "plan_evaluation",
    "process_validation_metrics",
    "prompt_estimates",
    "summarize_table",
    "summarize_validation",
    "unpaired_difference",
    "wilson_interval",
    "worst_at_k",
]

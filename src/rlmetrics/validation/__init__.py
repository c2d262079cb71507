"""Validation metrics: verl's bootstrap statistics, exact estimators and a summary with error bars.

* :mod:`~rlmetrics.validation.bootstrap`: verl 0.9.1's ``process_validation_metrics`` (same
  keys and values), ``bootstrap_metric`` and ``calc_maj_val``, vectorised over prompts.
* :mod:`~rlmetrics.validation.estimators`: exact pass@k, best@k, worst@k and maj@k.
* :mod:`~rlmetrics.validation.summary`: those estimators per source and variable, with
  standard errors and confidence intervals across prompts.

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
from rlmetrics.validation.estimators import Estimate, best_at_k, maj_at_k, pass_at_k, worst_at_k
from rlmetrics.validation.summary import default_ks, summarize_validation

__all__ = [
    "Estimate",
    "best_at_k",
    "bootstrap_indices",
    "bootstrap_metric",
    "calc_maj_val",
    "default_ks",
    "flatten_validation_metrics",
    "maj_at_k",
    "pass_at_k",
    "process_validation_metrics",
    "summarize_validation",
    "worst_at_k",
]

"""The old path of :mod:`rlmetrics.validation.verl.bootstrap` (kept so that old imports work).

New code imports from the new place; this module only re-exports its public names.
"""

from __future__ import annotations

from rlmetrics.validation.verl.bootstrap import (
    MAX_DRAWS,
    MAX_SAMPLES_PER_PROMPT,
    bootstrap_indices,
    bootstrap_metric,
    calc_maj_val,
    flatten_validation_metrics,
    process_validation_metrics,
)

__all__ = [
    "MAX_DRAWS",
    "MAX_SAMPLES_PER_PROMPT",
    "bootstrap_indices",
    "bootstrap_metric",
    "calc_maj_val",
    "flatten_validation_metrics",
    "process_validation_metrics",
]

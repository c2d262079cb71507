"""The old path of :mod:`rlmetrics.validation.exact.estimators` (kept so that old imports work).

New code imports from the new place; this module only re-exports its public names.
"""

from __future__ import annotations

from rlmetrics.validation.exact.estimators import (
    Estimate,
    best_at_k,
    cover_at_tau,
    maj_at_k,
    pass_at_k,
    pass_hat_k,
    worst_at_k,
)

__all__ = [
    "Estimate",
    "best_at_k",
    "cover_at_tau",
    "maj_at_k",
    "pass_at_k",
    "pass_hat_k",
    "worst_at_k",
]

"""The old path of :mod:`rlmetrics.validation.verl.extremes` (kept so that old imports work).

New code imports from the new place; this module only re-exports its public names.
"""

from __future__ import annotations

from rlmetrics.validation.verl.extremes import (
    BestWorst,
    best_worst_stats,
    rank_counts,
    weighted_mean_std,
    weighted_mean_std_blocks,
)

__all__ = [
    "BestWorst",
    "best_worst_stats",
    "rank_counts",
    "weighted_mean_std",
    "weighted_mean_std_blocks",
]

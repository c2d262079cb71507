"""The old path of :mod:`rlmetrics.validation.verl.majority` (kept so that old imports work).

New code imports from the new place; this module only re-exports its public names.
"""

from __future__ import annotations

from rlmetrics.validation.verl.majority import (
    majority_counts,
    majority_counts_distinct,
    pattern_counts,
)

__all__ = [
    "majority_counts",
    "majority_counts_distinct",
    "pattern_counts",
]

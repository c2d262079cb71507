"""The old path of :mod:`rlmetrics.validation.comparison.paired` and
:mod:`rlmetrics.validation.comparison.curves` (kept so that old imports work).

New code imports from the new place; this module only re-exports its public names.
"""

from __future__ import annotations

from rlmetrics.validation.comparison.curves import (
    CurveComparison,
    compare_curves,
    describe_curves,
    pass_at_k_curves,
    pass_hat_k_curves,
)
from rlmetrics.validation.comparison.paired import (
    Matched,
    PairedDifference,
    match_prompts,
    paired_difference,
    unpaired_difference,
)

__all__ = [
    "CurveComparison",
    "Matched",
    "PairedDifference",
    "compare_curves",
    "describe_curves",
    "match_prompts",
    "paired_difference",
    "pass_at_k_curves",
    "pass_hat_k_curves",
    "unpaired_difference",
]

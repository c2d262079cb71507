"""The old path of :mod:`rlmetrics.validation.comparison.tables` (kept so that old imports work).

New code imports from the new place; this module only re-exports its public names.
"""

from __future__ import annotations

from rlmetrics.validation.comparison.tables import (
    TableComparison,
    compare_summaries,
    compare_tables,
)

__all__ = [
    "TableComparison",
    "compare_summaries",
    "compare_tables",
]

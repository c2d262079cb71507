"""The old path of :mod:`rlmetrics.validation.exact.intervals` (kept so that old imports work).

New code imports from the new place; this module only re-exports its public names.
"""

from __future__ import annotations

from rlmetrics.validation.exact.intervals import (
    CI_METHODS,
    Interval,
    IntervalTable,
    column_intervals,
    mean_interval,
    standard_errors,
    wilson_interval,
)

__all__ = [
    "CI_METHODS",
    "Interval",
    "IntervalTable",
    "column_intervals",
    "mean_interval",
    "standard_errors",
    "wilson_interval",
]

"""The old path of :mod:`rlmetrics.validation.verl.draws` (kept so that old imports work).

New code imports from the new place; this module only re-exports its public names.
"""

from __future__ import annotations

from rlmetrics.validation.verl.draws import (
    clear_caches,
    distinct_draws,
    draw_tables,
    fold_draws,
    indices,
    prefetch,
    subset_table,
    top_bit_slot,
)

__all__ = [
    "clear_caches",
    "distinct_draws",
    "draw_tables",
    "fold_draws",
    "indices",
    "prefetch",
    "subset_table",
    "top_bit_slot",
]

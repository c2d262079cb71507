"""The old path of :mod:`rlmetrics.validation.exact.inputs` (kept so that old imports work).

New code imports from the new place; this module only re-exports its public names.
"""

from __future__ import annotations

from rlmetrics.validation.exact.inputs import (
    Column,
    Predictions,
    Prompts,
    as_list,
    factorize,
    group_prompts,
    local_codes,
    predictions,
    read_column,
    unique_rows,
)

__all__ = [
    "Column",
    "Predictions",
    "Prompts",
    "as_list",
    "factorize",
    "group_prompts",
    "local_codes",
    "predictions",
    "read_column",
    "unique_rows",
]

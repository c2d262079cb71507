"""The old path of :mod:`rlmetrics.validation.exact.summary` (kept so that old imports work).

New code imports from the new place; this module only re-exports its public names.
"""

from __future__ import annotations

from rlmetrics.validation.exact.summary import (
    DEFAULT_TAUS,
    PromptTable,
    default_ks,
    prompt_estimates,
    summarize_table,
    summarize_validation,
)

__all__ = [
    "DEFAULT_TAUS",
    "PromptTable",
    "default_ks",
    "prompt_estimates",
    "summarize_table",
    "summarize_validation",
]

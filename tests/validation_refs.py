"""Shared references of the validation tests: verl's bootstrap numbers and first-occurrence patterns."""

from __future__ import annotations

import numpy as np

__all__ = ["N_BOOT", "SEED", "first_positions"]

# verl's defaults: 1000 bootstrap draws, seed 42
N_BOOT, SEED = 1000, 42


def first_positions(codes: np.ndarray) -> np.ndarray:
    """Each code replaced by the position of its first occurrence in its row; a plain loop."""
    return np.array([[row.index(c) for c in row] for row in codes.tolist()], dtype=np.int64).reshape(
        codes.shape
    )

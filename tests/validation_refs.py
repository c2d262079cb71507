"""Shared references of the validation tests: verl's bootstrap numbers, first-occurrence patterns and
clustered runs for the comparison tests."""

from __future__ import annotations

import numpy as np

__all__ = ["N_BOOT", "SEED", "clustered_runs", "first_positions"]

# verl's defaults: 1000 bootstrap draws, seed 42
N_BOOT, SEED = 1000, 42


def first_positions(codes: np.ndarray) -> np.ndarray:
    """Each code replaced by the position of its first occurrence in its row; a plain loop."""
    return np.array([[row.index(c) for c in row] for row in codes.tolist()], dtype=np.int64).reshape(
        codes.shape
    )


def clustered_runs(rng, g: int, m: int, n: int):
    """Correct counts of two runs on ``g`` clusters of ``m`` prompts, with no difference on average.

    Prompts share their cluster's difficulty; in each cluster one run is better by a random
    logit gap, and which one is a fair coin: the runs are exchangeable, so the true difference
    is 0 at every k, while the differences are strongly correlated within a cluster.
    """
    from scipy import special

    x = rng.normal(0.0, 1.0, g).repeat(m) + rng.normal(0.0, 0.5, g * m)
    gap = np.abs(rng.normal(0.0, 1.0, g)).repeat(m)
    lo, hi = special.expit(x), special.expit(x + gap)
    swap = (rng.random(g) < 0.5).repeat(m)
    pa, pb = np.where(swap, hi, lo), np.where(swap, lo, hi)
    return rng.binomial(n, pa), rng.binomial(n, pb), np.arange(g).repeat(m)

"""Simulated evaluations for the coverage tests and bench/bench_coverage.py (not a test module).

An evaluation as it looks in practice: each prompt's solve rate ``p`` drawn from
``Beta(mean * c, (1 - mean) * c)`` (concentration ``c = 1``: U-shaped, most prompts always or never
solved), ``n`` samples a prompt, each correct with probability ``p`` (one wrong answer, so maj@k
is a vote between right and wrong, ties split evenly as rlmetrics splits them). The per-prompt
estimates are the ones ``summarize_validation`` computes (``test_coverage`` checks that on one
draw), and the targets are the population's values in closed form, e.g.
``pass@k = 1 - B(a, b + k) / B(a, b)``.

Every function takes its own ``numpy.random.Generator``; the global RNG is never used.
"""

from __future__ import annotations

from math import comb

import numpy as np
from scipy.special import betaln

#: (name, k) of the simulated metrics; k = 0 is the mean over the n samples (mean@N)
METRICS = (("mean@8", 0), ("pass@4", 4), ("pass@8", 8), ("pass^4", 4), ("maj@4", 4))
#: the grid of the coverage tests and of the bench
PROMPTS = (30, 100, 300, 1000)
MEANS = (0.01, 0.02, 0.05, 0.2, 0.5, 0.8, 0.95, 0.98, 0.99)
SAMPLES = 8
CONCENTRATION = 1.0
#: the metrics of the paired tables: the least and the most skewed near the edges
PAIRED_METRICS = (("mean@8", 0), ("pass@4", 4))


def paired_delta(mean: float, n_prompts: int) -> float:
    """The shift of the mean rate the paired power is judged against: ``sqrt(min(m, 1 - m) / (2 P))``,
    toward the middle."""
    delta = float(np.sqrt(min(mean, 1.0 - mean) / (2.0 * n_prompts)))
    return delta if mean <= 0.5 else -delta


def paired_counts(
    rng: np.random.Generator, mean: float, n_prompts: int, reps: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Correct counts of run A, of a rerun of A (the null) and of a shifted B, and B's mean rate.

    B's prompts keep their quantile: each rate moved to the same quantile of
    ``Beta(m', 1 - m')``, ``m' = mean + paired_delta(mean, n_prompts)``, so B's population
    value of a metric is ``target(name, k, m')``.
    """
    from scipy.stats import beta

    rates = draw_rates(rng, mean, n_prompts, reps)
    new_mean = mean + paired_delta(mean, n_prompts)
    shifted = beta.ppf(beta.cdf(rates, mean, 1.0 - mean), new_mean, 1.0 - new_mean)
    ca, cb = draw_counts(rng, rates), draw_counts(rng, rates)
    return ca, cb, draw_counts(rng, shifted), new_mean


def _hyper(n: int, k: int, c: int, j: int) -> float:
    """Chance that ``k`` of ``n`` samples drawn without replacement hold ``j`` of the ``c`` correct."""
    return comb(c, j) * comb(n - c, k - j) / comb(n, k)


def _maj_weight(k: int, j: int) -> float:
    """Chance that a vote of ``k`` with ``j`` right answers (one wrong answer) is won by the right one."""
    return 1.0 if 2 * j > k else 0.5 if 2 * j == k else 0.0


def estimate_table(name: str, k: int, n: int) -> np.ndarray:
    """(n + 1,) the per-prompt estimate of metric ``name`` for ``c = 0 .. n`` correct of ``n``."""
    c = np.arange(n + 1)
    if name.startswith("mean"):
        return c / n
    if name.startswith("pass@"):
        return np.array([1.0 - comb(n - ci, k) / comb(n, k) for ci in c])
    if name.startswith("pass^"):
        return np.array([comb(ci, k) / comb(n, k) for ci in c])
    if name.startswith("maj@"):
        return np.array([sum(_hyper(n, k, ci, j) * _maj_weight(k, j) for j in range(k + 1)) for ci in c])
    raise ValueError(f"unknown metric {name!r}")


def target(name: str, k: int, mean: float, concentration: float = CONCENTRATION) -> float:
    """The population's value of metric ``name`` when the solve rates are Beta(mean c, (1 - mean) c)."""
    a, b = mean * concentration, (1.0 - mean) * concentration

    def moment(i: int, j: int) -> float:  # E[p^i (1 - p)^j]
        return float(np.exp(betaln(a + i, b + j) - betaln(a, b)))

    if name.startswith("mean"):
        return mean
    if name.startswith("pass@"):
        return 1.0 - moment(0, k)
    if name.startswith("pass^"):
        return moment(k, 0)
    if name.startswith("maj@"):
        return sum(comb(k, j) * moment(j, k - j) * _maj_weight(k, j) for j in range(k + 1))
    raise ValueError(f"unknown metric {name!r}")


def draw_rates(
    rng: np.random.Generator, mean: float, n_prompts: int, reps: int, concentration: float = CONCENTRATION
) -> np.ndarray:
    """(n_prompts, reps) solve rates, one column per simulated evaluation."""
    return rng.beta(mean * concentration, (1.0 - mean) * concentration, size=(n_prompts, reps))


def draw_counts(rng: np.random.Generator, rates: np.ndarray, n: int = SAMPLES) -> np.ndarray:
    """Correct samples of ``n`` per prompt, for rates of any shape."""
    return rng.binomial(n, rates)


def estimates(counts: np.ndarray, name: str, k: int, n: int = SAMPLES) -> np.ndarray:
    """Per-prompt estimates of metric ``name`` from the correct counts (same shape)."""
    return estimate_table(name, k, n)[counts]

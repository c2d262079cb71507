"""rlmetrics.validation.extremes: verl's bootstrap best@k / worst@k statistics from rank counts,
against brute force over the bootstrap draws, and the weighted mean and std."""

from __future__ import annotations

import numpy as np
import pytest

from rlmetrics.validation.verl import bootstrap as V
from rlmetrics.validation.verl import draws, extremes
from validation_refs import N_BOOT, SEED


def close(got: np.ndarray, want: np.ndarray, values: np.ndarray, **kw) -> None:
    """rtol 1e-12, and an absolute slack of 1e-12 times the values' scale (a zero std comes out
    exactly 0 from the counts, a few ulps of the values from 1000 draws' mean)."""
    scale = max(1.0, float(np.nanmax(np.abs(values), initial=0.0, where=np.isfinite(values))))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * scale, **kw)


def brute_best_worst(values: np.ndarray, k: int) -> np.ndarray:
    """(4, Q): mean and population std over the draws of the max, then of the min, per row."""
    drawn = values[:, draws.indices(values.shape[1], k, N_BOOT, SEED)]  # (Q, draws, k)
    best, worst = drawn.max(axis=2), drawn.min(axis=2)
    return np.stack([best.mean(axis=1), best.std(axis=1), worst.mean(axis=1), worst.std(axis=1)])


def best_worst_values(rng: np.random.Generator, n: int) -> np.ndarray:
    """Continuous rows, rows with ties, a constant row and a 0/1 row."""
    rows = [
        rng.standard_normal(n),
        rng.standard_normal(n) * 1e3 - 5.0,
        rng.integers(0, 3, n).astype(np.float64),
        rng.integers(-1, 2, n).astype(np.float64) * 0.5,
        np.full(n, 2.5),
        (np.arange(n) % 2).astype(np.float64),
        -np.arange(n, dtype=np.float64),
    ]
    return np.array(rows)


@pytest.mark.parametrize(
    ("q", "n"), [(5000, 16), (3, 16), (700, 7), (40, 24)], ids=["zeta-blocks", "ranks", "n7", "n24"]
)
def test_best_worst_stats_equal_unblocked(q, n):
    """The cache-blocked best/worst statistics are bit for bit the unblocked ones, on both count
    paths (subset-sum table and drawn ranks)."""
    rng = np.random.default_rng(q + n)
    vals = rng.normal(size=(q, n))
    vals[: q // 2] = np.round(vals[: q // 2])  # ties
    order = np.argsort(vals, axis=1, kind="stable")
    ks = V._gen_ns(n)
    got = extremes.best_worst_stats(vals, ks, 1000, 42)
    for k in ks:
        sorted_vals, best, worst = extremes.rank_counts(vals, k, 1000, 42, order=order)
        want = extremes.weighted_mean_std(sorted_vals, best, 1000) + extremes.weighted_mean_std(
            sorted_vals, worst, 1000
        )
        for g, w in zip(got[k], want, strict=True):
            np.testing.assert_array_equal(g, w)
    maj = rng.integers(0, 1000, (q, n))
    blocked = np.stack(extremes.weighted_mean_std_blocks(vals, maj, 1000))
    np.testing.assert_array_equal(blocked, np.stack(extremes.weighted_mean_std(vals, maj, 1000)))


BW_CASES = [(1, (1, 2, 3)), (3, (1, 2, 3, 4)), (5, (1, 2, 3, 5, 8)), (8, (2, 4, 8, 16)), (24, (2, 24))]


@pytest.mark.parametrize(("n", "ks"), BW_CASES, ids=[f"n{n}" for n, _ in BW_CASES])
def test_best_worst_stats_match_brute_force(n, ks):
    """Both count paths (subset-sum table up to n = 20, drawn ranks beyond) against the draws."""
    rng = np.random.default_rng(n)
    values = best_worst_values(rng, n)
    got = extremes.best_worst_stats(values, ks, N_BOOT, SEED)
    for k in ks:
        close(np.array(got[k]), brute_best_worst(values, k), values, err_msg=f"k={k}")
        # the constant row: every draw gives its value, with no spread
        np.testing.assert_allclose([got[k].best_mean[4], got[k].worst_mean[4]], 2.5, rtol=1e-15)
        np.testing.assert_allclose([got[k].best_std[4], got[k].worst_std[4]], 0.0, atol=1e-12)


def test_best_worst_stats_float32_and_noncontiguous_values():
    rng = np.random.default_rng(9)
    wide = rng.standard_normal((6, 10)).astype(np.float32)
    values = wide[:, ::2]  # (6, 5), strided, float32
    got = extremes.best_worst_stats(values, [3], N_BOOT, SEED)
    close(np.array(got[3]), brute_best_worst(values.astype(np.float64), 3), values)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_best_worst_nan_and_inf_rows():
    """A NaN anywhere in a row makes all four of its statistics NaN (0 * NaN in the weighted
    sums); finite rows match the draws."""
    rng = np.random.default_rng(4)
    n, ks = 6, [1, 2, 4]
    values = rng.standard_normal((7, n))
    values[1, 2] = np.nan
    values[2, [0, 5]] = np.nan
    values[3] = np.nan
    values[4, 1] = np.inf
    values[5, [0, 3]] = [-np.inf, np.inf]
    stats = extremes.best_worst_stats(values, ks, N_BOOT, SEED)
    finite_rows = [0, 6]
    for k in ks:
        got = np.array(stats[k])
        assert np.isnan(got[:, 1:4]).all()
        close(got[:, finite_rows], brute_best_worst(values[finite_rows], k), values[finite_rows])


@pytest.mark.parametrize("count_dtype", [np.int16, np.int64], ids=["int16", "int64"])
def test_weighted_mean_std_matches_np_average(count_dtype):
    rng = np.random.default_rng(13)
    q, n = 30, 7
    vals = rng.standard_normal((q, n)) * 4.0 + 10.0
    counts = np.array([rng.multinomial(N_BOOT, rng.dirichlet(np.ones(n))) for _ in range(q)])
    counts[0] = 0
    counts[0, 3] = N_BOOT  # all weight on one column: zero std
    counts = counts.astype(count_dtype)
    mean, std = extremes.weighted_mean_std(vals, counts, N_BOOT)
    for i in range(q):
        m = np.average(vals[i], weights=counts[i].astype(np.float64))
        assert mean[i] == pytest.approx(m, rel=1e-12)
        assert std[i] == pytest.approx(
            np.sqrt(np.average((vals[i] - m) ** 2, weights=counts[i].astype(np.float64))),
            rel=1e-12,
            abs=1e-12,
        )
    assert mean[0] == vals[0, 3] and std[0] == 0.0

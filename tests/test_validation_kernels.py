"""Tests of rlmetrics._validation_kernels against brute force over the bootstrap draws.

best@k / worst@k come from the subset-sum table of the draws (itself checked against direct
enumeration of the index rows) and must equal the mean / population std of the max (min) over
the 1000 draws; maj@k counts must equal verl's vote replayed draw by draw; the helper kernels
(first-occurrence codes, subset sums, weighted rows) are compared with plain loops.
:func:`kernel_draws` is plain numpy and runs without numba; everything else is skipped when
numba is missing or disabled with ``RLMETRICS_NO_NUMBA``.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from rlmetrics import _validation as V
from rlmetrics import _validation_kernels as VK

N_BOOT, SEED = 1000, 42

needs_numba = pytest.mark.skipif(
    VK.best_worst_kernel() is None, reason="numba not installed or disabled with RLMETRICS_NO_NUMBA"
)


# ----------------------------------------------------------------------------- references
def brute_subset_table(n: int, k: int) -> np.ndarray:
    """Z[A] = number of bootstrap rows whose drawn positions all lie in bit set A."""
    idx = V._indices_cached(n, k, N_BOOT, SEED)
    row_sets = np.array([sum(1 << j for j in set(row)) for row in idx.tolist()], dtype=np.int64)
    sets = np.arange(1 << n, dtype=np.int64)
    return ((row_sets[:, None] & ~sets[None, :]) == 0).sum(axis=0)


def close(got: np.ndarray, want: np.ndarray, values: np.ndarray, **kw) -> None:
    """rtol 1e-12, and an absolute slack of 1e-12 times the values' scale (a zero std comes out
    exactly 0 from the counts, a few ulps of the values from 1000 draws' mean)."""
    scale = max(1.0, float(np.nanmax(np.abs(values), initial=0.0, where=np.isfinite(values))))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * scale, **kw)


def brute_best_worst(values: np.ndarray, k: int) -> np.ndarray:
    """(4, Q): mean and population std over the draws of the max, then of the min, per row."""
    draws = values[:, V._indices_cached(values.shape[1], k, N_BOOT, SEED)]  # (Q, draws, k)
    best, worst = draws.max(axis=2), draws.min(axis=2)
    return np.stack([best.mean(axis=1), best.std(axis=1), worst.mean(axis=1), worst.std(axis=1)])


def brute_majority(pattern: list[int], idx: np.ndarray) -> np.ndarray:
    """verl's vote per draw: the most common prediction, ties to the one drawn first; the count
    goes to the first drawn position holding the winner."""
    counts = np.zeros(len(pattern), dtype=np.int64)
    for draw in idx.tolist():
        preds = [pattern[j] for j in draw]
        tally = Counter(preds)  # insertion order = order of first appearance in the draw
        winner = max(tally, key=tally.__getitem__)
        counts[draw[preds.index(winner)]] += 1
    return counts


def first_positions(codes: np.ndarray) -> np.ndarray:
    return np.array([[row.index(c) for c in row] for row in codes.tolist()], dtype=np.int64).reshape(
        codes.shape
    )


def random_patterns(rng: np.random.Generator, n: int, count: int) -> np.ndarray:
    """Distinct first-occurrence patterns: one prediction, all distinct, and random alphabets."""
    preds = [np.zeros(n, dtype=np.int64), np.arange(n)]
    for _ in range(count):
        preds.append(rng.integers(0, int(rng.integers(1, n + 1)), n))
    patterns, _ = V._unique_rows(first_positions(np.array(preds)))
    return patterns


# ----------------------------------------------------------------------------- best@k / worst@k
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


BW_CASES = [(1, (1, 2, 3)), (3, (1, 2, 3, 4)), (5, (1, 2, 3, 5, 8)), (8, (2, 4, 8, 16))]


@needs_numba
@pytest.mark.parametrize("n", [1, 3, 5, 8, 10], ids=lambda n: f"n{n}")
@pytest.mark.parametrize("k", [1, 2, 5, 12], ids=lambda k: f"k{k}")
def test_subset_table_matches_enumeration(n, k):
    table = V._subset_table(n, k, N_BOOT, SEED)
    np.testing.assert_array_equal(table, brute_subset_table(n, k))
    assert table[-1] == N_BOOT and table[0] == 0


@needs_numba
@pytest.mark.parametrize(("n", "ks"), BW_CASES, ids=[f"n{n}" for n, _ in BW_CASES])
def test_best_worst_tables_match_brute_force(n, ks):
    rng = np.random.default_rng(n)
    values = best_worst_values(rng, n)
    tables = np.stack([V._subset_table(n, k, N_BOOT, SEED) for k in ks])
    got = VK.best_worst_tables(VK.best_worst_kernel(), values, tables, N_BOOT)
    assert got.shape == (len(ks), 4, values.shape[0]) and got.dtype == np.float64
    for t, k in enumerate(ks):
        close(got[t], brute_best_worst(values, k), values, err_msg=f"k={k}")
    # the constant row: every draw gives its value, with no spread
    np.testing.assert_allclose(got[:, [0, 2], 4], 2.5, rtol=1e-15)
    np.testing.assert_allclose(got[:, [1, 3], 4], 0.0, atol=1e-12)


@needs_numba
def test_best_worst_tables_float32_and_noncontiguous_values():
    rng = np.random.default_rng(9)
    wide = rng.standard_normal((6, 10)).astype(np.float32)
    values = wide[:, ::2]  # (6, 5), strided, float32: converted to contiguous float64
    tables = np.stack([V._subset_table(5, 3, N_BOOT, SEED)])
    got = VK.best_worst_tables(VK.best_worst_kernel(), values, tables, N_BOOT)
    want = brute_best_worst(values.astype(np.float64), 3)
    close(got[0], want, values)


@needs_numba
def test_best_worst_tables_threaded_split_equals_serial(monkeypatch):
    rng = np.random.default_rng(2)
    values = rng.standard_normal((50, 6))
    values[::3] = np.round(values[::3])  # ties
    tables = V._stacked_subset_tables(6, (1, 3, 7), N_BOOT, SEED)
    kernel = VK.best_worst_kernel()
    serial = VK.best_worst_tables(kernel, values, tables, N_BOOT)
    monkeypatch.setattr(VK, "_BEST_WORST_THREAD_ROWS", 4)
    monkeypatch.setattr(VK, "N_THREADS", 3)
    threaded = VK.best_worst_tables(kernel, values, tables, N_BOOT)
    np.testing.assert_array_equal(threaded, serial)
    for t, k in enumerate((1, 3, 7)):
        close(serial[t], brute_best_worst(values, k), values)


@needs_numba
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_best_worst_nan_and_inf_rows_match_numpy_path(monkeypatch):
    rng = np.random.default_rng(4)
    n, ks = 6, [1, 2, 4]
    values = rng.standard_normal((7, n))
    # The kernel sorts NaN last like np.argsort(kind="stable"); a NaN anywhere in a row makes all
    # four of its statistics NaN on both paths (0 * NaN in the weighted sums).
    values[1, 2] = np.nan
    values[2, [0, 5]] = np.nan
    values[3] = np.nan
    values[4, 1] = np.inf
    values[5, [0, 3]] = [-np.inf, np.inf]
    with_kernel = V._best_worst_stats(values, ks, N_BOOT, SEED)
    monkeypatch.setattr(VK, "best_worst_kernel", lambda: None)
    without = V._best_worst_stats(values, ks, N_BOOT, SEED)
    finite_rows = [0, 6]
    for k in ks:
        got, want = np.array(with_kernel[k]), np.array(without[k])
        close(got, want, values, equal_nan=True, err_msg=f"k={k}")
        assert np.isnan(got[:, 1:4]).all()  # any NaN in a row: NaN statistics
        close(got[:, finite_rows], brute_best_worst(values[finite_rows], k), values[finite_rows])


# ----------------------------------------------------------------------------- helper kernels
@needs_numba
@pytest.mark.parametrize("dtype", [np.int32, np.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("n", [0, 1, 5, 17], ids=lambda n: f"n{n}")
def test_local_codes_kernel(dtype, n):
    rng = np.random.default_rng(n)
    codes = rng.integers(-3, 4, (40, n)).astype(dtype)
    if n:
        codes[0] = 7  # one code
        codes[1] = np.arange(n)  # all distinct
    got = VK.local_codes_kernel()(codes)
    assert got.shape == (40, n) and got.dtype == np.int64
    np.testing.assert_array_equal(got, first_positions(codes))


@needs_numba
@pytest.mark.parametrize("n_bits", range(11), ids=lambda b: f"bits{b}")
@pytest.mark.parametrize("dtype", [np.int32, np.int64], ids=["int32", "int64"])
def test_subset_sums_kernel(n_bits, dtype):
    rng = np.random.default_rng(n_bits)
    table = rng.integers(-50, 51, 1 << n_bits).astype(dtype)
    sets = np.arange(1 << n_bits)
    inside = (sets[None, :] & ~sets[:, None]) == 0  # inside[A, B]: B is a subset of A
    want = inside.astype(np.int64) @ table.astype(np.int64)
    got = table.copy()
    VK.subset_sums_kernel()(got, n_bits)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)


@needs_numba
@pytest.mark.parametrize("count_dtype", [np.int16, np.int64], ids=["int16", "int64"])
def test_weighted_rows_kernel(count_dtype):
    rng = np.random.default_rng(13)
    q, n, u, p, total = 30, 7, 5, 12, N_BOOT
    vals = rng.standard_normal((q, n)) * 4.0 + 10.0
    counts = np.array([rng.multinomial(total, rng.dirichlet(np.ones(n))) for _ in range(u)])
    counts[0] = 0
    counts[0, 3] = total  # all weight on one column: zero std
    counts = counts.astype(count_dtype)
    inverse = rng.integers(0, u, p)
    rows = rng.integers(0, p, q)
    mean, std = VK.weighted_rows_kernel()(vals, counts, inverse, rows, float(total))
    for i in range(q):
        c = counts[inverse[rows[i]]].astype(np.float64)
        m = np.average(vals[i], weights=c)
        assert mean[i] == pytest.approx(m, rel=1e-12)
        assert std[i] == pytest.approx(
            np.sqrt(np.average((vals[i] - m) ** 2, weights=c)), rel=1e-12, abs=1e-12
        )
    picked = inverse[rows] == 0
    assert picked.any()
    np.testing.assert_allclose(mean[picked], vals[picked, 3], rtol=1e-14)


# ----------------------------------------------------------------------------- maj@k draws
DRAW_CASES = [(3, 3, np.int8), (4, 4, np.int8), (6, 5, np.int16), (5, 12, np.int32), (4, 27, np.int64)]


@pytest.mark.parametrize(
    ("n", "k", "score_type"), DRAW_CASES, ids=[f"n{n}-k{k}-{np.dtype(t).name}" for n, k, t in DRAW_CASES]
)
def test_kernel_draws(n, k, score_type):
    idx, mult, first, weights = V._distinct_draws(n, k, N_BOOT, SEED)
    assert weights.sum() == N_BOOT
    scores, slot_pos, w, single = VK.kernel_draws(k, idx, mult, first, weights)
    # narrowest type holding (k + 1) * 2**k - 1
    assert scores.dtype == score_type
    widths = [np.int8, np.int16, np.int32, np.int64]
    narrower = widths[: widths.index(score_type)]
    assert all(((k + 1) << k) - 1 > np.iinfo(t).max for t in narrower)
    assert ((k + 1) << k) - 1 <= np.iinfo(score_type).max
    assert scores.shape == (n, idx.shape[0])
    for r in range(idx.shape[0]):
        for j in range(n):
            want = int(mult[r, j]) << k
            if first[r, j] < k:
                want += 1 << (k - 1 - int(first[r, j]))
            assert int(scores[j, r]) == want
    assert slot_pos.dtype == np.uint8
    np.testing.assert_array_equal(slot_pos, idx)
    assert w.dtype == np.int64
    np.testing.assert_array_equal(w, weights)
    want_single = np.zeros(n, dtype=np.int64)
    for r in range(idx.shape[0]):
        want_single[idx[r, 0]] += weights[r]
    assert single.dtype == np.int64
    np.testing.assert_array_equal(single, want_single)
    assert single.sum() == N_BOOT
    assert not any(a.flags.writeable for a in (scores, slot_pos, w, single))


def test_kernel_draws_wide_positions_and_weights():
    rng = np.random.default_rng(1)
    n, k, rows = 300, 3, 50
    idx = rng.integers(0, n, (rows, k))
    mult = np.zeros((rows, n), dtype=np.int64)
    first = np.full((rows, n), k, dtype=np.int64)
    for r in range(rows):
        for s in range(k - 1, -1, -1):
            mult[r, idx[r, s]] += 1
            first[r, idx[r, s]] = s
    weights = rng.integers(1, 5, rows)
    scores, slot_pos, _, single = VK.kernel_draws(k, idx, mult, first, weights)
    assert slot_pos.dtype == np.int32  # n > 256
    np.testing.assert_array_equal(slot_pos, idx)
    np.testing.assert_array_equal(single, np.bincount(idx[:, 0], weights=weights, minlength=n))
    # per draw, all positions together: k draws of 2**k plus the first-slot bit of each distinct one
    for r in range(rows):
        distinct_slots = [s for s in range(k) if idx[r, s] not in idx[r, :s]]
        assert int(scores[:, r].sum()) == (k << k) + sum(1 << (k - 1 - s) for s in distinct_slots)


MAJ_CASES = [(4, 3), (5, 4), (6, 7), (3, 12), (5, 20), (4, 47)]


@needs_numba
@pytest.mark.parametrize(("n", "k"), MAJ_CASES, ids=[f"n{n}-k{k}" for n, k in MAJ_CASES])
def test_majority_counts_tables_match_brute_force(n, k):
    rng = np.random.default_rng(100 * n + k)
    patterns = random_patterns(rng, n, 12)
    idx = V._indices_cached(n, k, N_BOOT, SEED)
    got = VK.majority_counts_tables(VK.majority_kernel(), patterns, k, V._kernel_draws(n, k, N_BOOT, SEED))
    assert got.shape == patterns.shape and got.dtype == np.int64
    np.testing.assert_array_equal(got.sum(axis=1), N_BOOT)
    for p, pattern in enumerate(patterns.tolist()):
        np.testing.assert_array_equal(got[p], brute_majority(pattern, idx), err_msg=f"pattern {pattern}")


@needs_numba
def test_majority_counts_tables_scratch_reuse_and_threads(monkeypatch):
    rng = np.random.default_rng(8)
    n = 5
    patterns = random_patterns(rng, n, 30)
    scratch: dict = {}
    kernel = VK.majority_kernel()
    serial = {
        k: VK.majority_counts_tables(kernel, patterns, k, V._kernel_draws(n, k, N_BOOT, SEED), scratch)
        for k in (3, 6)
    }
    assert set(scratch) >= {"single", "rows", "n_codes", "dense"}
    for k in (3, 6):
        idx = V._indices_cached(n, k, N_BOOT, SEED)
        for p in (0, 1, len(patterns) - 1):
            np.testing.assert_array_equal(serial[k][p], brute_majority(patterns[p].tolist(), idx))
    monkeypatch.setattr(VK, "_THREAD_MIN_WORK", 0)
    monkeypatch.setattr(VK, "_PROMPT_BLOCK", 2)
    monkeypatch.setattr(VK, "N_THREADS", 3)
    for k in (3, 6):
        threaded = VK.majority_counts_tables(kernel, patterns, k, V._kernel_draws(n, k, N_BOOT, SEED))
        np.testing.assert_array_equal(threaded, serial[k])


@needs_numba
def test_prepare_patterns_dense_codes():
    rng = np.random.default_rng(21)
    patterns = random_patterns(rng, 6, 20)
    scratch: dict = {}
    VK.prepare_patterns(patterns, scratch)
    n_codes = np.array([len(set(row)) for row in patterns.tolist()])
    np.testing.assert_array_equal(scratch["single"], n_codes == 1)
    np.testing.assert_array_equal(scratch["rows"], np.flatnonzero(n_codes > 1))
    np.testing.assert_array_equal(scratch["n_codes"], n_codes[n_codes > 1])
    for dense, p in zip(scratch["dense"].tolist(), scratch["rows"].tolist()):
        order = list(dict.fromkeys(patterns[p].tolist()))  # predictions by first appearance
        assert dense == [order.index(f) for f in patterns[p].tolist()]
    before = scratch["dense"]
    VK.prepare_patterns(patterns[:1], scratch)  # already filled: kept
    assert scratch["dense"] is before

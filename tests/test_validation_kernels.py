"""Tests of rlmetrics.validation.kernels against brute force over the bootstrap draws.

best@k / worst@k come from the subset-sum table of the draws (itself checked against direct
enumeration of the index rows) and must equal the mean / population std of the max (min) over
the 1000 draws; maj@k counts must equal verl's vote replayed draw by draw; the helper kernels
(first-occurrence codes, subset sums, weighted rows) are compared with plain loops.
Everything is skipped when numba is missing or disabled with ``RLMETRICS_NO_NUMBA``.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from numba_cache import assert_second_process_compiles_nothing
from rlmetrics.validation import bootstrap as V
from rlmetrics.validation import kernels as VK

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
@pytest.mark.parametrize(
    ("n", "ks"), [(1, (1, 2)), (6, (1, 3, 7)), (10, (2, 4, 8, 10))], ids=["n1", "n6", "n10"]
)
def test_stacked_subset_tables_match_enumeration(n, ks):
    stacked = V._stacked_subset_tables(n, ks, N_BOOT, SEED)
    assert stacked.shape == (len(ks), 1 << n) and stacked.dtype == np.int16  # counts <= 1000
    assert not stacked.flags.writeable
    for t, k in enumerate(ks):
        np.testing.assert_array_equal(stacked[t], brute_subset_table(n, k))


@needs_numba
def test_stacked_subset_tables_wide_counts():
    stacked = V._stacked_subset_tables(3, (2,), 40_000, SEED)
    assert stacked.dtype == np.int32
    assert stacked[0, -1] == 40_000  # every draw lies inside the full set


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
    stacked = np.stack([counts, counts[::-1]])  # (T, U, n): one table per k
    inverse = rng.integers(0, u, p)
    rows = rng.integers(0, p, q)
    mean, std = VK.weighted_rows_kernel()(vals, stacked, inverse, rows, float(total))
    assert mean.shape == std.shape == (2, q)
    for t in range(2):
        for i in range(q):
            c = stacked[t, inverse[rows[i]]].astype(np.float64)
            m = np.average(vals[i], weights=c)
            assert mean[t, i] == pytest.approx(m, rel=1e-12)
            assert std[t, i] == pytest.approx(
                np.sqrt(np.average((vals[i] - m) ** 2, weights=c)), rel=1e-12, abs=1e-12
            )
    mean, std = mean[0], std[0]
    picked = inverse[rows] == 0
    assert picked.any()
    np.testing.assert_allclose(mean[picked], vals[picked, 3], rtol=1e-14)


# ----------------------------------------------------------------------------- maj@k draws
def score_table(idx: np.ndarray, n: int, k: int) -> np.ndarray:
    """(n + 1, R): position j's score in draw r, multiplicity * 2**k + 2**(k - 1 - first slot)
    when drawn, and (row n) their sum; a plain loop."""
    scores = np.zeros((n + 1, idx.shape[0]), dtype=object)
    for r, draw in enumerate(idx.tolist()):
        for j in set(draw):
            scores[j, r] = draw.count(j) * 2**k + 2 ** (k - 1 - draw.index(j))
        scores[n, r] = sum(scores[:n, r])
    return scores


STACK_CASES = [
    (3, (3,), (0,)),
    (4, (4, 2), (0, 0)),
    (6, (5, 12), (0, 1)),
    (5, (12, 27, 3), (1, 2, 0)),
    (16, (4, 8, 16), (0, 0, 1)),
]


@needs_numba
@pytest.mark.parametrize(
    ("n", "ks", "kinds"), STACK_CASES, ids=[f"n{n}-k{'-'.join(map(str, ks))}" for n, ks, _ in STACK_CASES]
)
def test_stack_draws_tables(n, ks, kinds):
    draws = [V._fold_draws(n, k, N_BOOT, SEED) for k in ks]
    st = VK.stack_draws(n, ks, draws)
    np.testing.assert_array_equal(st.ks, ks)
    # narrowest of int16 / int32 / int64 holding (k + 1) * 2**k - 1
    np.testing.assert_array_equal(st.kinds, kinds)
    tabs = (st.tab16, st.tab32, st.tab64)
    for t, (k, (idx, weights)) in enumerate(zip(ks, draws)):
        rows = idx.shape[0]
        want_single = np.zeros(n, dtype=np.int64)
        for r in range(rows):
            want_single[idx[r, 0]] += 1 if weights is None else weights[r]
        np.testing.assert_array_equal(st.singles[t], want_single)
        assert want_single.sum() == N_BOOT
        if k <= 2:  # the first slot's counts only
            assert st.rows[t] == 0
            continue
        assert st.rows[t] == rows
        tab = tabs[st.kinds[t]]
        got = tab[:, st.cols[t] : st.cols[t] + rows]
        np.testing.assert_array_equal(got.astype(object), score_table(idx, n, k))
        slots = st.slot_flat[st.slot_at[t] : st.slot_at[t] + rows * k].reshape(rows, k)
        np.testing.assert_array_equal(slots, idx)
        if weights is None:
            assert st.weight_at[t] == -1
            w = np.ones(rows, dtype=np.int64)
        else:
            w = st.weights[st.weight_at[t] : st.weight_at[t] + rows]
            np.testing.assert_array_equal(w, weights)
        assert w.sum() == N_BOOT
    assert st.slot_flat.dtype == np.uint8
    assert not any(a.flags.writeable for a in st)


@needs_numba
def test_stack_draws_wide_positions_and_bad_k():
    rng = np.random.default_rng(1)
    n, k, rows = 300, 3, 50
    idx = rng.integers(0, n, (rows, k))
    weights = rng.integers(1, 5, rows)
    st = VK.stack_draws(n, (k,), [(idx, weights)])
    assert st.slot_flat.dtype == np.int32  # n > 256
    np.testing.assert_array_equal(st.slot_flat.reshape(rows, k), idx)
    np.testing.assert_array_equal(st.singles[0], np.bincount(idx[:, 0], weights=weights, minlength=n))
    np.testing.assert_array_equal(st.tab16[:n].astype(object), score_table(idx, n, k)[:n])
    with pytest.raises(ValueError, match=r"k must be in 1 \.\. 47 .*got 48"):
        VK.stack_draws(n, (48,), [(rng.integers(0, n, (4, 48)), None)])


MAJ_CASES = [(4, (3,)), (5, (4, 2, 1)), (6, (7,)), (3, (12, 5)), (5, (20,)), (4, (47, 3)), (16, (4, 8, 16))]


@needs_numba
@pytest.mark.parametrize(
    ("n", "ks"), MAJ_CASES, ids=[f"n{n}-k{'-'.join(map(str, ks))}" for n, ks in MAJ_CASES]
)
def test_majority_counts_match_brute_force(n, ks):
    rng = np.random.default_rng(100 * n + ks[0])
    patterns = random_patterns(rng, n, 12)
    draws = V._majority_draws(n, ks, N_BOOT, SEED)
    got = VK.majority_counts(VK.majority_kernel(), patterns, draws)
    assert got.shape == (len(ks), *patterns.shape) and got.dtype == np.int16
    np.testing.assert_array_equal(got.sum(axis=2), N_BOOT)
    for t, k in enumerate(ks):
        idx = V._indices_cached(n, k, N_BOOT, SEED)
        for p, pattern in enumerate(patterns.tolist()):
            np.testing.assert_array_equal(got[t, p], brute_majority(pattern, idx), err_msg=f"k={k} {pattern}")


@needs_numba
def test_majority_counts_scratch_reuse_and_threads(monkeypatch):
    rng = np.random.default_rng(8)
    n = 5
    patterns = random_patterns(rng, n, 30)
    scratch: dict = {}
    kernel = VK.majority_kernel()
    draws = V._majority_draws(n, (3, 6), N_BOOT, SEED)
    serial = VK.majority_counts(kernel, patterns, draws, scratch)
    assert set(scratch) >= {"n_codes", "dense"}
    for t, k in enumerate((3, 6)):
        idx = V._indices_cached(n, k, N_BOOT, SEED)
        for p in (0, 1, len(patterns) - 1):
            np.testing.assert_array_equal(serial[t, p], brute_majority(patterns[p].tolist(), idx))
    again = VK.majority_counts(kernel, patterns, draws, scratch)
    np.testing.assert_array_equal(again, serial)
    monkeypatch.setattr(VK, "_THREAD_MIN_WORK", 0)
    monkeypatch.setattr(VK, "_MAJ_CHUNK", 2)
    monkeypatch.setattr(VK, "N_THREADS", 3)
    threaded = VK.majority_counts(kernel, patterns, draws)
    np.testing.assert_array_equal(threaded, serial)


@needs_numba
@pytest.mark.parametrize("split", [0, 1, 3, 8, 15], ids=lambda s: f"front{s}")
def test_majority_job_walkers_share_the_chunks(monkeypatch, split):
    """Chunks taken from the front and from the back cover every pattern exactly as one call does,
    whoever gets there first (including a chunk taken twice)."""
    rng = np.random.default_rng(9)
    n = 6
    patterns = random_patterns(rng, n, 40)
    kernel = VK.majority_kernel()
    draws = V._majority_draws(n, (2, 3, 6), N_BOOT, SEED)
    want = VK.majority_counts(kernel, patterns, draws)
    monkeypatch.setattr(VK, "_MAJ_CHUNK", 3)
    job = VK.MajorityJob(kernel, patterns, draws, {})
    n_chunks = job.claim.shape[0]
    assert n_chunks == -(-patterns.shape[0] // 3)
    # a walker from the front that stopped after ``split`` chunks, then one from the back
    if split < n_chunks:
        job.claim[split] = 1  # pretend another walker holds this chunk: the front one stops there
        front = kernel(*job._args, job.claim, job.chunk, 0, 1, job.out)
        job.claim[split] = 0
    else:
        front = kernel(*job._args, job.claim, job.chunk, 0, 1, job.out)
    assert front == min(split, n_chunks)
    back = job.work(forward=False)
    assert front + back == n_chunks
    assert job.claim.all()
    np.testing.assert_array_equal(job.out, want)
    # a second walker finds nothing left
    assert job.work(forward=True) == 0


@needs_numba
def test_majority_counts_wide_counts():
    """Counts above int16 (more than 32767 bootstrap draws) come out as int64."""
    n, ks, n_boot = 4, (3,), 40_000
    rng = np.random.default_rng(3)
    patterns = random_patterns(rng, n, 5)
    draws = V._majority_draws(n, ks, n_boot, SEED)
    got = VK.majority_counts(VK.majority_kernel(), patterns, draws)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got.sum(axis=2), n_boot)
    idx = V._indices_cached(n, 3, n_boot, SEED)
    np.testing.assert_array_equal(got[0, 1], brute_majority(patterns[1].tolist(), idx))


@needs_numba
def test_prepare_patterns_dense_codes():
    rng = np.random.default_rng(21)
    patterns = random_patterns(rng, 6, 20)
    scratch: dict = {}
    VK.prepare_patterns(patterns, scratch)
    n_codes = np.array([len(set(row)) for row in patterns.tolist()])
    np.testing.assert_array_equal(scratch["n_codes"], n_codes)
    for dense, row in zip(scratch["dense"].tolist(), patterns.tolist()):
        order = list(dict.fromkeys(row))  # predictions by first appearance
        assert dense == [order.index(f) for f in row]
    before = scratch["dense"]
    VK.prepare_patterns(patterns[:1], scratch)  # already filled: kept
    assert scratch["dense"] is before


@needs_numba
@pytest.mark.parametrize("n", [1, 2, 5, 16], ids=lambda n: f"n{n}")
def test_pattern_keys_kernel(n):
    rng = np.random.default_rng(n)
    sizes = rng.integers(1, 20, 40)
    sizes[::3] = n
    starts = np.concatenate([[0], np.cumsum(sizes)])
    codes = rng.integers(0, 3, int(starts[-1]))
    prompts = np.flatnonzero(sizes == n)
    local, keys = VK.pattern_keys_kernel()(codes, starts, prompts, n)
    rows = np.array([codes[starts[p] : starts[p] + n] for p in prompts.tolist()])
    np.testing.assert_array_equal(local, first_positions(rows))
    want = [sum(int(f) << (4 * j) for j, f in enumerate(row)) for row in local.tolist()]
    assert keys.dtype == np.uint64
    assert keys.tolist() == want


@needs_numba
def test_kernels_load_from_numba_cache_in_a_new_process(tmp_path):
    """A second process finds the compiled kernels in numba's on-disk cache: it compiles nothing
    and writes nothing (kernels defined in a closure were keyed by their closure's contents, so
    every process compiled them again and added files to the cache)."""
    script = (
        "import numpy as np\n"
        "from rlmetrics.validation import bootstrap as V, kernels as VK\n"
        "vals = np.arange(12.0).reshape(3, 4)\n"
        "V._best_worst_stats(vals, [2, 4], 50, 1)\n"  # best_worst (+ weighted_mean_std), draw_set_tables
        "pat = np.array([[0, 0, 2, 2], [0, 1, 0, 1]])\n"
        "VK.majority_counts(VK.majority_kernel(), pat, V._majority_draws(4, (2, 3, 4), 50, 1))\n"
        "VK.weighted_rows_kernel()(vals[:2], np.ones((1, 2, 4), np.int16), np.arange(2), np.arange(2), 4.0)\n"
    )
    assert_second_process_compiles_nothing(script, tmp_path / "cache")

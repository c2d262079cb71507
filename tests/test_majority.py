"""rlmetrics.validation.majority: verl's bootstrap maj@k vote counts and vote scores, against
brute force over the bootstrap draws."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from rlmetrics.validation.inputs import unique_rows
from rlmetrics.validation.verl import draws, majority
from validation_refs import N_BOOT, SEED, first_positions


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


def random_patterns(rng: np.random.Generator, n: int, count: int) -> np.ndarray:
    """Distinct first-occurrence patterns: one prediction, all distinct, and random alphabets."""
    preds = [np.zeros(n, dtype=np.int64), np.arange(n)]
    for _ in range(count):
        preds.append(rng.integers(0, int(rng.integers(1, n + 1)), n))
    patterns, _ = unique_rows(first_positions(np.array(preds)))
    return patterns


def score_table(idx: np.ndarray, n: int, k: int) -> np.ndarray:
    """(n, R): position j's score in draw r, multiplicity * 2**k + 2**(k - 1 - first slot) when
    drawn; a plain loop."""
    scores = np.zeros((n, idx.shape[0]), dtype=object)
    for r, draw in enumerate(idx.tolist()):
        for j in set(draw):
            scores[j, r] = draw.count(j) * 2**k + 2 ** (k - 1 - draw.index(j))
    return scores


@pytest.mark.parametrize(("n", "k"), [(3, 3), (6, 12), (5, 27), (16, 16)], ids=str)
def test_vote_scores_match_plain_loop(n, k):
    x_t, slot_pos, weights = majority._scores_table(n, k, N_BOOT, SEED)
    idx, w = draws.fold_draws(n, k, N_BOOT, SEED)
    np.testing.assert_array_equal(x_t.astype(np.int64).astype(object), score_table(idx, n, k))
    np.testing.assert_array_equal(slot_pos.reshape(k, -1).T, idx)
    assert (weights is None) == (w is None)
    assert x_t.dtype == (np.float32 if k <= 19 else np.float64)


MAJ_CASES = [
    (4, (3,)),
    (5, (4, 2, 1)),
    (6, (7,)),
    (3, (12, 5)),
    (5, (20,)),
    (4, (47, 3)),
    (16, (4, 8, 16)),
    (4, (50,)),
]


@pytest.mark.parametrize(
    ("n", "ks"), MAJ_CASES, ids=[f"n{n}-k{'-'.join(map(str, ks))}" for n, ks in MAJ_CASES]
)
def test_majority_counts_match_brute_force(n, ks):
    """Bit scores (k <= 47), per-position scores (k > 47) and the first-slot shortcut (k <= 2)."""
    rng = np.random.default_rng(100 * n + ks[0])
    patterns = random_patterns(rng, n, 12)
    for k in ks:
        got = majority.pattern_counts(patterns, k, N_BOOT, SEED)
        assert got.shape == patterns.shape and got.dtype == np.int16
        np.testing.assert_array_equal(got.sum(axis=1), N_BOOT)
        idx = draws.indices(n, k, N_BOOT, SEED)
        for p, pattern in enumerate(patterns.tolist()):
            np.testing.assert_array_equal(got[p], brute_majority(pattern, idx), err_msg=f"k={k} {pattern}")


def test_majority_counts_of_rows_share_patterns():
    rng = np.random.default_rng(8)
    local = first_positions(rng.integers(0, 3, (50, 6)))
    counts, inverse = majority.majority_counts_distinct(local, 4, N_BOOT, SEED)
    np.testing.assert_array_equal(counts[inverse], majority.majority_counts(local, 4, N_BOOT, SEED))
    idx = draws.indices(6, 4, N_BOOT, SEED)
    for row in (0, 17, 49):
        np.testing.assert_array_equal(counts[inverse[row]], brute_majority(local[row].tolist(), idx))


def test_majority_counts_wide_counts():
    """Counts above int16 (more than 32767 bootstrap draws) come out as int64."""
    n, n_boot = 4, 40_000
    rng = np.random.default_rng(3)
    patterns = random_patterns(rng, n, 5)
    got = majority.pattern_counts(patterns, 3, n_boot, SEED)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got.sum(axis=1), n_boot)
    np.testing.assert_array_equal(
        got[1], brute_majority(patterns[1].tolist(), draws.indices(n, 3, n_boot, SEED))
    )


SLOT_CASES = [(192, 3), (200, 17), (200, 47), (200, 48), (256, 256)]


@pytest.mark.parametrize(("n", "k"), SLOT_CASES, ids=[f"n{n}-k{k}" for n, k in SLOT_CASES])
def test_slot_counts_match_brute_force_and_the_score_products(n, k):
    """From 192 samples the votes are counted from the drawn slots (time growing with k, not
    n**2): the same counts as verl's rule on every draw, and as the bit / position scores."""
    rng = np.random.default_rng(n + k)
    patterns = random_patterns(rng, n, 3)
    got = majority.pattern_counts(patterns, k, N_BOOT, SEED)
    np.testing.assert_array_equal(got.sum(axis=1), N_BOOT)
    idx = draws.indices(n, k, N_BOOT, SEED)
    for p, pattern in enumerate(patterns.tolist()):
        np.testing.assert_array_equal(got[p], brute_majority(pattern, idx), err_msg=f"pattern {p}")
    several = ~(patterns == 0).all(axis=1)
    scores = majority._counts_bits if k <= majority._BITS_MAX_K else majority._counts_positions
    np.testing.assert_array_equal(
        majority._counts_slots(patterns[several], k, N_BOOT, SEED), scores(patterns[several], k, N_BOOT, SEED)
    )


def test_slot_counts_blocks_do_not_change_counts(monkeypatch):
    """Rows split across blocks (a tiny block here) give the counts of one block."""
    rng = np.random.default_rng(4)
    patterns = random_patterns(rng, 200, 4)[1:]
    whole = majority._counts_slots(patterns, 64, N_BOOT, SEED)
    monkeypatch.setattr(majority, "_ROW_BLOCK", 1000)
    np.testing.assert_array_equal(majority._counts_slots(patterns, 64, N_BOOT, SEED), whole)

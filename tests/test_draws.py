"""rlmetrics.validation.draws: verl's bootstrap index matrices from a local generator, the
subset-sum table and the folded draws, against np.random and brute force over the draws."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from rlmetrics.validation import draws
from validation_refs import N_BOOT, SEED


def brute_subset_table(n: int, k: int) -> np.ndarray:
    """Z[A] = number of bootstrap rows whose drawn positions all lie in bit set A."""
    idx = draws.indices(n, k, N_BOOT, SEED)
    row_sets = np.array([sum(1 << j for j in set(row)) for row in idx.tolist()], dtype=np.int64)
    sets = np.arange(1 << n, dtype=np.int64)
    return ((row_sets[:, None] & ~sets[None, :]) == 0).sum(axis=0)


@pytest.mark.parametrize(
    ("n", "ks"), [(1, (1, 3)), (5, (7, 2, 3)), (16, (2, 4, 8, 16)), (300, (3, 1))], ids=str
)
def test_indices_are_verl_draws_in_any_order_and_after_clearing(n, ks):
    """Every k's index matrix is np.random.choice's after np.random.seed, whichever k comes first
    (they share one stream), the global RNG is left alone, and clearing the caches changes nothing."""
    before = np.random.get_state()[1].copy()  # noqa: NPY002 - the global state must stay untouched
    draws.clear_caches()
    got = {k: draws.indices(n, k, 50, 7).copy() for k in ks}
    draws.clear_caches()
    draws.prefetch(n, list(ks[::-1][:1]), 50, 7)
    again = {k: draws.indices(n, k, 50, 7) for k in ks}
    np.testing.assert_array_equal(np.random.get_state()[1], before)  # noqa: NPY002
    for k in ks:
        state = np.random.get_state()  # noqa: NPY002
        try:
            np.random.seed(7)  # noqa: NPY002 - verl's own draws, the reference
            want = np.random.choice(n, size=(50, k), replace=True)  # noqa: NPY002
        finally:
            np.random.set_state(state)  # noqa: NPY002
        np.testing.assert_array_equal(got[k], want)
        np.testing.assert_array_equal(again[k], want)
        assert not again[k].flags.writeable


@pytest.mark.parametrize("n", [1, 3, 5, 8, 10], ids=lambda n: f"n{n}")
@pytest.mark.parametrize("k", [1, 2, 5, 12], ids=lambda k: f"k{k}")
def test_subset_table_matches_enumeration(n, k):
    table = draws.subset_table(n, k, N_BOOT, SEED)
    np.testing.assert_array_equal(table, brute_subset_table(n, k))
    assert table[-1] == N_BOOT and table[0] == 0
    assert not table.flags.writeable


def test_subset_table_wide_counts():
    table = draws.subset_table(3, 2, 40_000, SEED)
    assert table.dtype == np.int32
    assert table[-1] == 40_000  # every draw lies inside the full set


@pytest.mark.parametrize(("n", "k"), [(3, 4), (16, 3), (4, 2), (300, 3)], ids=str)
def test_fold_draws_stand_for_every_draw(n, k):
    """Folded rows with their weights are exactly the multiset of verl's index rows."""
    idx, weights = draws.fold_draws(n, k, N_BOOT, SEED)
    full = draws.indices(n, k, N_BOOT, SEED)
    want = Counter(map(tuple, full.tolist()))
    got = (
        Counter(map(tuple, idx.tolist()))
        if weights is None
        else Counter(dict(zip(map(tuple, idx.tolist()), weights.tolist())))
    )
    assert got == want

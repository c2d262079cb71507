"""rlmetrics.validation.inputs: per-prompt prediction codes and distinct rows, against plain loops
and np.unique."""

from __future__ import annotations

import numpy as np
import pytest

from rlmetrics.validation.inputs import local_codes, unique_rows
from validation_refs import first_positions


@pytest.mark.parametrize("dtype", [np.int32, np.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("n", [0, 1, 5, 17], ids=lambda n: f"n{n}")
def test_local_codes(dtype, n):
    rng = np.random.default_rng(n)
    codes = rng.integers(-3, 4, (40, n)).astype(dtype)
    if n:
        codes[0] = 7  # one code
        codes[1] = np.arange(n)  # all distinct
    got = local_codes(codes)
    assert got.shape == (40, n) and got.dtype == np.int64
    np.testing.assert_array_equal(got, first_positions(codes))


@pytest.mark.parametrize("n", [1, 2, 5, 16, 17, 40], ids=lambda n: f"n{n}")
def test_unique_rows_packed_and_bytes(n):
    """Packed keys (n <= 16) and byte-string keys give np.unique's distinct rows and inverse."""
    rng = np.random.default_rng(n)
    local = first_positions(rng.integers(0, 3, (60, n)))
    local[30:] = local[:30]  # repeated rows
    patterns, inverse = unique_rows(local)
    np.testing.assert_array_equal(patterns[inverse], local)
    assert patterns.shape[0] == np.unique(local, axis=0).shape[0]

"""rlmetrics.validation._args: the argument checks the evaluation statistics share, called directly:
what each returns (values and dtypes written out by hand) and the errors naming the argument."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics.validation._args import (
    check_cluster_codes,
    check_counts,
    check_ks,
    check_level,
    check_scalar,
    check_vector,
)


@pytest.mark.parametrize(
    ("value", "want"),
    [(0.95, 0.95), (np.float32(0.5), 0.5), (np.float64(1e-9), 1e-9)],
    ids=["float", "float32", "tiny"],
)
def test_check_level_accepts(value, want):
    got = check_level(value, "confidence")
    assert got == want and type(got) is float


@pytest.mark.parametrize(
    ("value", "exc", "match"),
    [
        (True, TypeError, r"confidence must be a number in \(0, 1\); got bool True"),
        ("0.9", TypeError, r"confidence must be a number in \(0, 1\); got str '0.9'"),
        (0, ValueError, r"confidence must be in \(0, 1\); got 0.0"),
        (1.0, ValueError, r"confidence must be in \(0, 1\); got 1.0"),
        (math.nan, ValueError, r"confidence must be in \(0, 1\); got nan"),
    ],
    ids=["bool", "str", "zero", "one", "nan"],
)
def test_check_level_refuses(value, exc, match):
    with pytest.raises(exc, match=match):
        check_level(value, "confidence")


def test_check_scalar():
    assert check_scalar(np.int64(3), "margin") == 3.0 and type(check_scalar(np.int64(3), "margin")) is float
    assert check_scalar(0, "margin", minimum=0) == 0.0
    with pytest.raises(ValueError, match=r"margin must be >= 0; got -0.5"):
        check_scalar(-0.5, "margin", minimum=0)
    with pytest.raises(ValueError, match=r"margin must be finite; got inf"):
        check_scalar(math.inf, "margin")
    with pytest.raises(TypeError, match=r"margin must be a number; got NoneType None"):
        check_scalar(None, "margin")


def test_check_vector():
    got = check_vector([True, False, 2], "a")
    assert got.dtype == np.float64 and got.tolist() == [1.0, 0.0, 2.0]
    with pytest.raises(TypeError, match=r"a must hold numbers; got dtype <U1"):
        check_vector(["x"], "a")
    with pytest.raises(ValueError, match=r"a must be 1-D \(one value per prompt\); got shape \(1, 2\)"):
        check_vector([[1, 2]], "a")
    with pytest.raises(ValueError, match=r"a must be finite; found inf"):
        check_vector([1.0, math.inf, math.nan], "a")


def test_check_counts():
    got = check_counts([3.0, 0.0, 8.0], "c")
    assert got.dtype == np.int64 and got.tolist() == [3, 0, 8]
    with pytest.raises(TypeError, match=r"c must hold integers; got dtype bool"):
        check_counts([True, False], "c")
    with pytest.raises(ValueError, match=r"c must hold whole numbers; got 1.5"):
        check_counts([1.0, 1.5], "c")
    with pytest.raises(ValueError, match=r"c must hold whole numbers; got nan"):
        check_counts([math.nan], "c")
    with pytest.raises(ValueError, match=r"c must be 1-D \(one count per prompt\); got shape \(\)"):
        check_counts(4, "c")


@pytest.mark.parametrize(
    ("ks", "exc", "match"),
    [
        ([], ValueError, r"ks must be a non-empty 1-D sequence of k; got shape \(0,\)"),
        ([[1, 2]], ValueError, r"ks must be a non-empty 1-D sequence of k; got shape \(1, 2\)"),
        ([0, 1], ValueError, r"ks must be >= 1; got 0"),
        ([1, 4, 4], ValueError, r"ks must be strictly increasing; got \[1, 4, 4\]"),
        ([1.0, 2.5], ValueError, r"ks must hold whole numbers; got \[1.0, 2.5\]"),
        ([True], TypeError, r"ks must hold integers; got dtype bool"),
    ],
    ids=["empty", "2d", "zero", "repeated", "fraction", "bool"],
)
def test_check_ks_refuses(ks, exc, match):
    with pytest.raises(exc, match=match):
        check_ks(ks)


def test_check_ks_accepts_and_names_its_argument():
    got = check_ks([1.0, 2.0, 16.0])
    assert got.dtype == np.int64 and got.tolist() == [1, 2, 16]
    with pytest.raises(ValueError, match=r"^k_grid must be >= 1"):
        check_ks([-1], "k_grid")


@pytest.mark.parametrize(
    ("clusters", "codes", "g"),
    [
        (["b", "a", "b", "c"], [0, 1, 0, 2], 3),
        (np.array([3.0, 1.0, 3.0, 3.0]), [0, 1, 0, 0], 2),
        ((("s", 1), ("s", 2), ("s", 1), ("t", 1)), [0, 1, 0, 2], 3),
        (iter([7, 7, 7, 7]), [0, 0, 0, 0], 1),
    ],
    ids=["strings", "float-array", "tuples", "iterator"],
)
def test_check_cluster_codes_in_order_of_first_appearance(clusters, codes, g):
    got, n = check_cluster_codes(clusters, 4)
    assert got.dtype == np.int64 and got.tolist() == codes and n == g


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=30))
def test_check_cluster_codes_against_a_plain_loop(labels):
    first: list[int] = []
    for label in labels:
        if label not in first:
            first.append(label)
    got, n = check_cluster_codes(np.array(labels), len(labels))
    assert got.tolist() == [first.index(label) for label in labels] and n == len(first)


@pytest.mark.parametrize(
    ("clusters", "exc", "match"),
    [
        (np.array([1.0, math.nan, 1.0]), ValueError, "clusters must not hold NaN labels"),
        ([1.0, math.nan, 1.0], ValueError, "clusters must not hold NaN labels"),
        (np.zeros((3, 2)), ValueError, r"clusters must be 1-D \(one label per prompt\); got shape \(3, 2\)"),
        ("abc", TypeError, "clusters must be a sequence of labels, one per prompt; got str"),
        (5, TypeError, "clusters must be a sequence of labels, one per prompt; got int"),
        (["a", "b"], ValueError, r"clusters must have one label per prompt \(3\); got 2"),
        (["a", ["b"], "c"], TypeError, "clusters must hold hashable labels; got list at position 1"),
    ],
    ids=["nan-array", "nan-list", "2d", "str", "int", "length", "unhashable"],
)
def test_check_cluster_codes_refuses(clusters, exc, match):
    with pytest.raises(exc, match=match):
        check_cluster_codes(clusters, 3)

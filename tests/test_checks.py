"""rlmetrics._core.checks: the integer check, the undefined-metric warning and the row mean
that gives 0 to an empty row."""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics._core.array import array_namespace
from rlmetrics._core.checks import check_int, row_mean, warn_undefined
from rlmetrics.errors import UndefinedMetricWarning

torch = pytest.importorskip("torch")


# ----------------------------------------------------------------------------- check_int
@pytest.mark.parametrize(
    ("value", "minimum", "want"),
    [
        (3, None, 3),
        (-7, None, -7),
        (0, 0, 0),
        (1, 1, 1),
        (2**40, 1, 2**40),
        (np.int64(5), 1, 5),
        (np.int32(-2), -2, -2),
        (np.uint8(255), 0, 255),
        (np.int16(4), None, 4),
    ],
    ids=[
        "int",
        "negative-int",
        "zero-at-minimum-0",
        "at-minimum",
        "large-int",
        "np-int64",
        "np-int32-at-minimum",
        "np-uint8",
        "np-int16-no-minimum",
    ],
)
def test_check_int_accepts_integers(value, minimum, want):
    got = check_int(value, "k", minimum=minimum)
    assert got == want
    assert type(got) is int


@pytest.mark.parametrize(
    ("value", "minimum", "exc", "match"),
    [
        (True, None, TypeError, r"^k must be an integer; got bool True$"),
        (False, 0, TypeError, r"^k must be an integer >= 0; got bool False$"),
        (np.bool_(True), 1, TypeError, r"^k must be an integer >= 1; got bool "),
        (1.0, None, TypeError, r"^k must be an integer; got float 1\.0$"),
        (2.5, 1, TypeError, r"^k must be an integer >= 1; got float 2\.5$"),
        (np.float64(3.0), 1, TypeError, r"^k must be an integer >= 1; got float64"),
        (float("nan"), None, TypeError, r"^k must be an integer; got float nan$"),
        ("3", 1, TypeError, r"^k must be an integer >= 1; got str '3'$"),
        (None, None, TypeError, r"^k must be an integer; got NoneType None$"),
        (0, 1, ValueError, r"^k must be an integer >= 1; got 0$"),
        (-1, 0, ValueError, r"^k must be an integer >= 0; got -1$"),
        (np.int64(2), 3, ValueError, r"^k must be an integer >= 3; got "),
    ],
    ids=[
        "bool",
        "bool-with-minimum",
        "np-bool",
        "float-integral",
        "float",
        "np-float64",
        "nan",
        "str",
        "none",
        "below-minimum",
        "negative-below-0",
        "np-int-below-minimum",
    ],
)
def test_check_int_refuses(value, minimum, exc, match):
    with pytest.raises(exc, match=match):
        check_int(value, "k", minimum=minimum)


def test_check_int_names_the_argument():
    with pytest.raises(ValueError, match=r"^n_bootstrap must be an integer >= 1; got 0$"):
        check_int(0, "n_bootstrap", minimum=1)


# ----------------------------------------------------------------------------- warn_undefined
@pytest.mark.parametrize(
    "message",
    ["std@1 is undefined for a single sample", "no valid tokens: mean is NaN", "100% [x]"],
    ids=["plain", "colon", "regex-characters"],
)
def test_warn_undefined_returns_nan_and_warns(message):
    with pytest.warns(RuntimeWarning, match=f"^{re.escape(message)}$"):
        got = warn_undefined(message)
    assert isinstance(got, float) and math.isnan(got)


@pytest.mark.parametrize("stacklevel", [None, 2], ids=["first-caller-outside", "explicit-2"])
def test_warn_undefined_points_at_the_caller(stacklevel):
    """Called from this file, both stack levels attribute the warning to this file."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_undefined("undefined here", stacklevel=stacklevel)
    assert len(caught) == 1
    assert caught[0].category is UndefinedMetricWarning and issubclass(caught[0].category, RuntimeWarning)
    assert str(caught[0].message) == "undefined here"
    assert caught[0].filename == __file__


# ----------------------------------------------------------------------------- row_mean
ROW_CASES = [
    ([3.0, 5.0], [2.0, 0.0], [1.5, 0.0]),
    ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]),
    ([-4.0, 9.0, 1.0], [4.0, 3.0, 1.0], [-1.0, 3.0, 1.0]),
    ([7.0], [0.0], [0.0]),
    ([], [], []),
]
ROW_IDS = ["one-empty-row", "all-empty", "no-empty", "single-empty", "no-rows"]


@pytest.mark.parametrize(("total", "count", "want"), ROW_CASES, ids=ROW_IDS)
@pytest.mark.parametrize("count_kind", ["float", "int"], ids=["float-counts", "int-counts"])
def test_row_mean_numpy(total, count, want, count_kind):
    t = np.asarray(total, dtype=np.float64)
    c = np.asarray(count, dtype=np.float64 if count_kind == "float" else np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division-by-zero warning from the empty rows
        got = row_mean(array_namespace(t), t, c)
    assert isinstance(got, np.ndarray) and got.dtype == np.float64
    np.testing.assert_array_equal(got, np.asarray(want, dtype=np.float64))


@pytest.mark.parametrize(("total", "count", "want"), ROW_CASES, ids=ROW_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_row_mean_torch(total, count, want, dtype):
    t = torch.tensor(total, dtype=dtype)
    c = torch.tensor(count, dtype=torch.int64)
    got = row_mean(array_namespace(t), t, c)
    assert isinstance(got, torch.Tensor) and got.dtype == dtype
    assert not torch.isnan(got).any()
    torch.testing.assert_close(got, torch.tensor(want, dtype=dtype), rtol=0, atol=0)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
            st.integers(0, 50),
        ),
        max_size=20,
    ),
    use_torch=st.booleans(),
)
def test_property_row_mean_matches_plain_loop(rows, use_torch):
    want = [total / count if count > 0 else 0.0 for total, count in rows]
    totals = [total for total, _ in rows]
    counts = [count for _, count in rows]
    if use_torch:
        t = torch.tensor(totals, dtype=torch.float64)
        c = torch.tensor(counts, dtype=torch.int64)
        got = row_mean(array_namespace(t), t, c).tolist()
    else:
        t = np.asarray(totals, dtype=np.float64)
        c = np.asarray(counts, dtype=np.int64)
        got = row_mean(array_namespace(t), t, c).tolist()
    assert got == want


def _seeded_calls():
    import rlmetrics as R

    curves = np.array([[0.2, 0.4], [0.5, 0.7], [0.1, 0.3]])
    return {
        "maj_at_k": lambda seed: R.maj_at_k(list("aabbcdefgh"), [1, 1, 0, 0, 1, 0, 0, 0, 0, 0], 5, seed=seed),
        "mean_interval": lambda seed: R.mean_interval([0.0, 1.0, 1.0], seed=seed),
        "mean_interval-bootstrap": lambda seed: R.mean_interval(
            [0.0, 1.0, 1.0], method="bootstrap", seed=seed
        ),
        "compare_curves": lambda seed: R.compare_curves(curves, curves + 0.1, [1, 2], n_boot=50, seed=seed),
        "summarize_validation": lambda seed: R.summarize_validation(
            ["s"] * 4, ["a", "a", "b", "b"], {"acc": [1, 0, 1, 1]}, seed=seed
        ),
    }


SEEDED = sorted(_seeded_calls())
BAD_SEEDS = [
    pytest.param(-1, ValueError, r"seed must be an integer >= 0; got -1", id="negative"),
    pytest.param(
        -(2**70), ValueError, r"seed must be an integer >= 0; got -1180591620717411303424", id="huge-negative"
    ),
    pytest.param(1.5, TypeError, r"seed must be an integer >= 0; got float 1.5", id="float"),
    pytest.param("7", TypeError, r"seed must be an integer >= 0; got str '7'", id="string"),
    pytest.param(True, TypeError, r"seed must be an integer >= 0; got bool True", id="bool"),
    pytest.param(None, TypeError, r"seed must be an integer >= 0; got NoneType", id="none"),
]


@pytest.mark.parametrize(("seed", "error", "match"), BAD_SEEDS)
@pytest.mark.parametrize("call", SEEDED, ids=SEEDED)
def test_every_seeded_function_names_a_bad_seed(call, seed, error, match):
    with pytest.raises(error, match=match):
        _seeded_calls()[call](seed)


@pytest.mark.parametrize("call", SEEDED, ids=SEEDED)
@pytest.mark.parametrize("seed", [0, 2**31, 2**70], ids=["zero", "2**31", "2**70"])
def test_every_seeded_function_takes_any_non_negative_integer(call, seed):
    assert _seeded_calls()[call](seed) is not None

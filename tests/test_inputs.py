"""rlmetrics.validation.inputs: per-prompt prediction codes and distinct rows, against plain loops
and np.unique."""

from __future__ import annotations

import numpy as np
import pytest

from rlmetrics.validation.inputs import group_prompts, local_codes, unique_rows
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


# ----------------------------------------------------------------------------- names of sources and uids
NAME_CLASHES = [
    ([1, 1, "1", "1"], ["u", "u", "v", "v"], r"data_sources holds 1 \(int\) and '1' \(str\): distinct"),
    ([1, True], ["u", "u"], r"data_sources holds 1 \(int\) and True \(bool\): equal as Python values"),
    ([1, 1.0], ["u", "u"], r"data_sources holds 1 \(int\) and 1.0 \(float\): equal"),
    ([float("nan"), float("nan")], ["u", "v"], "each NaN is a key of its own"),
    (["m", "m"], [1, "1"], r"sample_uids holds 1 \(int\) and '1' \(str\) in data source 'm'"),
    (["m", "m"], [0, False], r"sample_uids holds 0 \(int\) and False \(bool\): equal"),
    (["m", "n", "m"], [1, 1, "1"], r"sample_uids holds 1 \(int\) and '1' \(str\) in data source 'm'"),
    (["m", "m"], [0.0, -0.0], r"sample_uids holds 0.0 \(float\) and -0.0 \(float\): equal"),
]


@pytest.mark.parametrize(
    ("sources", "uids", "match"),
    NAME_CLASHES,
    ids=[
        "src-1-'1'",
        "src-1-True",
        "src-1-1.0",
        "src-nans",
        "uid-1-'1'",
        "uid-0-False",
        "uid-pairs",
        "uid-0.0--0.0",
    ],
)
def test_names_that_would_merge_or_collide_are_refused(sources, uids, match):
    """Results are named by str(): values it does not tell apart as grouping does are refused."""
    with pytest.raises(ValueError, match=match):
        group_prompts(sources, uids)


@pytest.mark.parametrize(
    ("sources", "uids", "n_prompts"),
    [
        (["m", "n"], [1, "1"], 2),  # the same printed uid in two sources: two prompts, two names
        ([np.int64(1), 1], ["a", "a"], 1),  # equal and printed alike
        ([np.str_("s"), "s"], [3, 3], 1),
        (["s"] * 3, [1.0, 2.5, 1.0], 2),
        ([0, 1, 0], [5, 5, 6], 3),
    ],
    ids=["uid-per-source", "np-int", "np-str", "floats", "int-sources"],
)
def test_names_that_print_as_they_group_are_kept(sources, uids, n_prompts):
    assert group_prompts(sources, uids).sizes.shape[0] == n_prompts


def test_uid_names_unchecked_on_request():
    p = group_prompts(["m", "m"], [1, "1"], check_uids=False)
    assert p.keys() == [("m", 1), ("m", "1")]
    with pytest.raises(ValueError, match="data_sources holds"):
        group_prompts([1, "1"], ["u", "u"], check_uids=False)


def test_both_entry_points_refuse_sources_that_print_alike():
    """The issue's case: sources 1 and "1" merged by str() lost half the prompts from the report."""
    from rlmetrics.validation.bootstrap import process_validation_metrics
    from rlmetrics.validation.summary import summarize_validation

    args = ([1, 1, "1", "1"], ["u", "u", "v", "v"], {"acc": [1, 0, 1, 1]})
    for fn in (process_validation_metrics, summarize_validation):
        with pytest.raises(ValueError, match=r"data_sources holds 1 \(int\) and '1' \(str\)"):
            fn(*args)
    # uids printing alike are refused by the summary (which names prompts), not by verl's metrics
    uids_alike = (["m"] * 4, [1, 1, "1", "1"], {"acc": [1, 0, 1, 1]})
    with pytest.raises(ValueError, match="sample_uids holds"):
        summarize_validation(*uids_alike)
    assert process_validation_metrics(*uids_alike)["m"]["acc"]["mean@2"] == 0.75

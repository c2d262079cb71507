"""Tests of rlmetrics.validation.comparison.results: the comparison result types, as plain data."""

from __future__ import annotations

import json
import math

import numpy as np

from rlmetrics.validation.comparison import family, results, tables
from rlmetrics.validation.comparison.tables import compare_tables
from rlmetrics.validation.exact.summary import prompt_estimates


def test_the_types_are_the_ones_tables_and_family_export():
    assert tables.TableComparison is results.TableComparison
    assert (family.Family, family.Adjusted) == (results.Family, results.Adjusted)


def _runs():
    rng = np.random.default_rng(0)
    uids = [f"p{i}" for i in range(12) for _ in range(4)]
    a = rng.random((12, 4)) < rng.beta(2, 2, (12, 1))
    b = rng.random((12, 4)) < rng.beta(3, 2, (12, 1))
    run_a = prompt_estimates(["s"] * 48, uids, {"acc": a.ravel().astype(float)})
    run_b = prompt_estimates(["s"] * 48, uids, {"acc": b.ravel().astype(float)})
    return run_a, run_b


def test_as_dict_is_json_data_holding_every_field():
    (cmp,) = compare_tables(*_runs(), n_boot=200, margin=0.1)
    data = cmp.as_dict()
    text = json.dumps(data)  # numbers, lists, strings and None only (a numpy value would raise)
    assert json.dumps(json.loads(text)) == text
    assert (data["source"], data["variable"], data["n_matched"]) == ("s", "acc", 12)
    for name, d in cmp.metrics.items():
        got = data["metrics"][name]
        assert got["diff"] == d.diff or (math.isnan(got["diff"]) and math.isnan(d.diff))
        # each difference names its interval method; the data kept to redo it stays out
        assert got["ci_method"] == d.ci_method == "Newcombe (method 10) on wilson-edge intervals"
        assert not any(key.startswith("_") for key in got)
    assert data["curve"]["ks"] == cmp.curve.ks.tolist() == [1, 2, 3, 4]
    assert data["curve"]["diff"] == cmp.curve.diff.tolist()
    assert data["curve_a"] == {k: np.asarray(v).tolist() for k, v in cmp.curve_a._asdict().items()}
    assert data["family"] == vars(cmp.family) and data["family"]["method"] == "holm"
    assert data["adjusted"] == {name: vars(x) for name, x in cmp.adjusted.items()}
    assert set(data["margins"]) == set(cmp.margins) == set(cmp.metrics)

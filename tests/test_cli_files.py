"""rlmetrics.cli._files: strict JSON, atomic writes that leave nothing behind on failure."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rlmetrics.cli._files import atomic_path, json_safe, write_json


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (float("nan"), None),
        (math.inf, None),
        (np.float32(0.25), 0.25),
        (np.int64(7), 7),
        (np.bool_(True), True),
        ({1: (np.float64(-math.inf), "x")}, {"1": [None, "x"]}),
    ],
    ids=["nan", "inf", "np-float32", "np-int64", "np-bool", "nested"],
)
def test_json_safe(value, expected):
    assert json_safe(value) == expected


def test_write_json_is_strict_and_replaces_the_target(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    write_json(target, {"a": float("nan"), "b": [np.float32(1.5)]})
    assert json.loads(target.read_text()) == {"a": None, "b": [1.5]}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    with pytest.raises(RuntimeError, match="disk full"), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("disk full")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]

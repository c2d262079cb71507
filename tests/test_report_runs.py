"""Tests of rlmetrics.report.runs: runs read into curves (metrics.jsonl, other formats, errors)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from report_runs import VAL_CORE, make_rows, write_run
from rlmetrics import keys as K
from rlmetrics.errors import RunReadWarning
from rlmetrics.report import (
    RunCurves,
    ValidationDumpError,
    load_run,
    write_report,
)
from rlmetrics.report.runs import flat_config

# --- reading runs -------------------------------------------------------------------------------


def test_load_run_series_times_config_and_name(tmp_path):
    rows = make_rows(0)
    p = write_run(tmp_path / "exp1" / "metrics.jsonl", rows, config={"lr": 1e-6, "command": ["train", "-x"]})
    run = load_run(p)
    assert run.name == "exp1" and run.source == "rlmetrics-jsonl"
    steps, values = run.series[K.SCORE_MEAN]
    assert steps.tolist() == list(range(1, 13))
    assert values.tolist() == [r[K.SCORE_MEAN] for r in rows]
    assert run.series[VAL_CORE][0].tolist() == [4, 8, 12]
    assert "timestamp" not in run.series and "step" not in run.series
    assert run.times[1].tolist() == [r["timestamp"] for r in rows]
    assert (run.duration, run.started, run.command) == (33.0, 1003.0, "train -x")
    assert run.config["lr"] == 1e-6
    assert load_run(p.parent).series.keys() == run.series.keys()  # the folder reads the same


def test_a_step_logged_twice_keeps_its_last_value(tmp_path):
    rows = [{"step": 1, "a/x": 1.0}, {"step": 2, "a/x": 2.0}, {"step": 1, "a/x": 5.0}]
    with pytest.warns(RunReadWarning, match=r"1 step logged more than once .* keeping the values logged"):
        run = load_run(write_run(tmp_path / "r.jsonl", rows))
    assert run.series["a/x"][0].tolist() == [1, 2] and run.series["a/x"][1].tolist() == [5.0, 2.0]
    assert run.times is None and run.duration is None


def test_truncated_last_line_is_tolerated(tmp_path):
    p = write_run(tmp_path / "run.jsonl", make_rows(0), truncate='{"step": 13, "critic/sco')
    with pytest.warns(RuntimeWarning, match="truncated"):
        run = load_run(p)
    assert run.series[K.SCORE_MEAN][0][-1] == 12


def test_load_run_errors(tmp_path):
    with pytest.raises(ValueError, match="no such file or directory"):
        load_run(tmp_path / "nope.jsonl")
    with pytest.raises(TypeError, match=r"path must be a str or os\.PathLike; got int"):
        load_run(3)
    p = tmp_path / "cut.jsonl"
    p.write_text('{"step": 1, "a')
    with (
        pytest.warns(RuntimeWarning, match="truncated"),
        pytest.raises(ValueError, match="holds no complete JSON line"),
    ):
        load_run(p)
    p.write_text('{"step": "x", "a/b": 1}\n')
    with pytest.raises(ValueError, match="non-numeric step"):
        load_run(p)


def test_a_validation_dump_is_refused_with_the_command_to_use(tmp_path):
    lines = [
        {"input": f"q{i}", "output": "a", "gts": "a", "score": float(i % 2), "step": 10, "acc": True}
        for i in range(6)
    ]
    p = write_run(tmp_path / "10.jsonl", lines)
    with pytest.raises(
        ValidationDumpError, match=r"validation rollout dump .*rlmetrics validate .*10\.jsonl"
    ):
        load_run(p)
    with pytest.raises(ValueError, match="input, output, gts"):
        write_report([p], tmp_path / "out")
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_other_formats_are_read_through_load_history(tmp_path):
    verl = tmp_path / "verl.jsonl"
    verl.write_text(
        "".join(
            json.dumps({"step": s, "data": {K.ACTOR_ENTROPY: 1.0 / s, K.SCORE_MEAN: None}}) + "\n"
            for s in (1, 2)
        )
    )
    run = load_run(verl)
    assert (run.source, run.name, run.times) == ("verl-jsonl", "verl", None)
    assert run.series[K.ACTOR_ENTROPY][1].tolist() == [1.0, 0.5]
    assert np.isnan(run.series[K.SCORE_MEAN][1]).all()
    trl = tmp_path / "trl-out"
    trl.mkdir()
    history = [{"step": s, "reward": 0.1 * s, "loss": 1.0 / s} for s in (5, 10)]
    (trl / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    run = load_run(trl)
    assert (run.source, run.name) == ("trl-trainer-state", "trl-out")
    assert run.series[K.TRL_REWARD][0].tolist() == [5, 10]


def test_step_range(tmp_path):
    run = load_run(write_run(tmp_path / "r.jsonl", [{"step": 3, "a/x": 1.0}, {"step": 10, "b/y": 2.0}]))
    assert run.step_range == "3-10"
    assert RunCurves("empty", tmp_path).step_range == "none"


def test_flat_config():
    assert flat_config({"b": {"c": 1, "d": {}}, "a": "x"}) == [("a", '"x"'), ("b.c", "1"), ("b.d", "{}")]


_cell = st.one_of(
    st.floats(-10, 10), st.integers(-5, 5), st.just(math.nan), st.booleans(), st.text(max_size=2), st.none()
)


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(
        st.dictionaries(st.sampled_from(["a/x", "a/y", "b/z"]), _cell, min_size=1),
        min_size=1,
        max_size=8,
    ),
    stamped=st.booleans(),
)
def test_load_run_round_trip(tmp_path_factory, rows, stamped):
    """Every int or float value comes back at its step (bools, strings, nulls are left out)."""
    rows = [{"step": i, **({"timestamp": 100.0 + i} if stamped else {}), **r} for i, r in enumerate(rows)]
    p = write_run(tmp_path_factory.mktemp("rt") / "r.jsonl", rows)
    run = load_run(p)

    def kept(v):
        return isinstance(v, int | float) and not isinstance(v, bool)

    want = {k for r in rows for k, v in r.items() if kept(v)} - {"step", "timestamp"}
    assert set(run.series) == want
    for key in want:
        steps, values = run.series[key]
        assert steps.tolist() == [r["step"] for r in rows if kept(r.get(key))]
        np.testing.assert_array_equal(values, [float(r[key]) for r in rows if kept(r.get(key))])
    assert (run.times is None) == (not stamped)

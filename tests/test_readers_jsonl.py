"""JSON-lines runs through the run reader (:mod:`rlmetrics.readers.jsonl`): rlmetrics rows and verl's
file logger, clean and damaged; :func:`read_jsonl`, the line reader the tracker's ``read_jsonl`` shares."""

from __future__ import annotations

import json
import math
import re
import warnings

import numpy as np
import pytest

from rlmetrics.errors import RunReadError, RunReadWarning, ValidationDumpError
from rlmetrics.readers import RLMETRICS_JSONL, VERL_JSONL, read_jsonl, read_run

ROWS = [
    {"step": 1, "timestamp": 100.0, "actor/entropy": 0.5, "critic/score/mean": 0.1},
    {"step": 2, "timestamp": 101.5, "actor/entropy": 0.4, "critic/score/mean": math.nan},
    {"step": 3, "timestamp": 103.0, "actor/entropy": 0.3, "critic/score/mean": 0.3, "note": "text"},
]


def _lines(rows) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def _read(path, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = read_run(path, **kwargs)
    return run, [str(w.message) for w in caught if issubclass(w.category, RunReadWarning)]


def test_rlmetrics_jsonl_series_times_config(tmp_path):
    (tmp_path / "metrics.jsonl").write_bytes(_lines(ROWS))
    (tmp_path / "config.json").write_text('{"lr": 1e-6}')
    run, caught = _read(tmp_path)
    assert (run.format, run.n_steps, run.path, caught) == (RLMETRICS_JSONL, 3, tmp_path / "metrics.jsonl", [])
    steps, values = run.series["critic/score/mean"]
    assert steps.dtype == np.int64 and steps.tolist() == [1, 2, 3]
    np.testing.assert_array_equal(values, [0.1, math.nan, 0.3])
    assert "note" not in run.series and "timestamp" not in run.series and "step" not in run.series
    assert run.times[0].tolist() == [1, 2, 3] and run.times[1].tolist() == [100.0, 101.5, 103.0]
    assert run.config == {"lr": 1e-6}


DAMAGED = [
    ("torn-last-line", _lines(ROWS[:2]) + b'{"step": 3, "actor/ent', [1, 2], "the truncated last line 3"),
    (
        "torn-last-line-then-a-line-break",  # a paste cut inside a line, saved by an editor
        _lines(ROWS[:2]) + b'{"step": 3, "actor/ent\n\n',
        [1, 2],
        "the truncated last line 3",
    ),
    (
        "fragment-in-the-middle",
        _lines(ROWS[:1]) + b'{"step": 9, "a\n' + _lines(ROWS[1:]),
        [1, 2, 3],
        "line 2",
    ),
    ("blank-lines-kept-out", b"\n" + _lines(ROWS[:1]) + b"\n\n" + _lines(ROWS[1:]), [1, 2, 3], None),
]


@pytest.mark.parametrize(("data", "steps", "named"), [d[1:] for d in DAMAGED], ids=[d[0] for d in DAMAGED])
def test_a_damaged_line_costs_that_line_with_a_warning_naming_it(tmp_path, data, steps, named):
    path = tmp_path / "run.jsonl"
    path.write_bytes(data)
    run, caught = _read(path)
    assert run.steps.tolist() == steps
    if named is None:
        assert caught == []
    else:
        (message,) = caught
        assert named in message and message in run.warnings


def test_strict_makes_a_damaged_middle_line_an_error(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_bytes(_lines(ROWS[:1]) + b'{"step": 9, "a\n' + _lines(ROWS[1:]))
    with pytest.raises(
        RunReadError, match=r"run\.jsonl:2: not a JSON object .*; expected one JSON object per line"
    ):
        read_run(path, strict=True)


def test_strict_skips_a_last_line_cut_off_with_a_line_break_after_it(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_bytes(_lines(ROWS[:2]) + b'{"step": 3, "note": "a str\n')
    with pytest.warns(RunReadWarning, match=r"skipping the truncated last line 3"):
        run = read_run(path, strict=True)
    assert run.steps.tolist() == [1, 2]
    # a last line that closes its object but does not read back is damaged, not cut: an error
    path.write_bytes(_lines(ROWS[:2]) + b'{"step": 3, "a": 1 2}\n')
    with pytest.raises(RunReadError, match=r"run\.jsonl:3: not a JSON object"):
        read_run(path, strict=True)


@pytest.mark.parametrize(
    ("data", "error", "match"),
    [
        (b'{"step": 1, "a"', RunReadError, "holds no complete JSON line"),
        (b'{"step": "x", "a/b": 1}\n', RunReadError, r"every row has a non-numeric step \(row 1: 'x'\)"),
        (
            b'{"step": 1, "a": 1}\n[1]\n',
            RunReadError,
            r"run\.jsonl:2: expected a JSON object per line; got list",
        ),
        (b'{"step": 1, "note": "x"}\n', RunReadError, r"\(rlmetrics-jsonl\): no numeric metric"),
        (
            b'{"input": "q", "output": "a", "score": 1.0, "step": 10}\n',
            ValidationDumpError,
            r"validation rollout dump .*input, output.*rlmetrics validate .*run\.jsonl",
        ),
    ],
    ids=["only-line-torn", "every-step-a-string", "not-an-object", "no-numbers", "a-rollout-dump"],
)
def test_bad_jsonl_runs_are_errors_naming_the_file(tmp_path, data, error, match):
    path = tmp_path / "run.jsonl"
    path.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RunReadWarning)
        with pytest.raises(error, match=match):
            read_run(path)


def test_a_step_logged_twice_keeps_the_last_value_and_warns(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_bytes(_lines([{"step": 1, "a": 1.0}, {"step": 2, "a": 2.0}, {"step": 1, "a": 5.0}]))
    run, (message,) = _read(path)
    assert run.series["a"][1].tolist() == [5.0, 2.0] and "1 step logged more than once" in message


def test_an_unreadable_config_is_a_warning(tmp_path):
    (tmp_path / "metrics.jsonl").write_bytes(_lines(ROWS[:1]))
    (tmp_path / "config.json").write_text("{oops")
    run, (message,) = _read(tmp_path / "metrics.jsonl")
    assert run.config == {} and "config.json: config not read" in message


def test_verl_file_logger_nulls_are_nan(tmp_path):
    path = tmp_path / "verl.jsonl"
    records = [{"step": s, "data": {"actor/entropy": 1.0 / s, "critic/vf_loss": None}} for s in (1, 2, 2)]
    path.write_bytes(_lines(records))
    run, caught = _read(path)
    assert (run.format, run.n_steps, caught) == (VERL_JSONL, 2, [])
    assert run.series["actor/entropy"][1].tolist() == [1.0, 0.5]
    assert np.isnan(run.series["critic/vf_loss"][1]).all()


def test_verl_file_logger_a_record_without_data_is_an_error(tmp_path):
    path = tmp_path / "verl.jsonl"
    path.write_bytes(_lines([{"step": 1, "data": {"a": 1.0}}, {"step": 2, "metrics": {}}]))
    with pytest.raises(RunReadError, match=r"record 2 is not verl's .*got keys \['metrics', 'step'\]"):
        read_run(path)


def test_read_jsonl_is_the_trackers_line_reader(tmp_path):
    """Same rows and messages as ``rlmetrics.tracking.read_jsonl`` (which may delegate to it)."""
    from rlmetrics.tracking import read_jsonl as tracking_read_jsonl

    path = tmp_path / "metrics.jsonl"
    path.write_bytes(_lines(ROWS) + b'{"step": 1, "actor/entropy": 9.0}\n{"cut')
    got = {}
    for reader in (read_jsonl, tracking_read_jsonl):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rows = reader(path)
        got[reader] = (json.dumps(rows), [str(w.message) for w in caught])
    assert got[read_jsonl] == got[tracking_read_jsonl]
    assert len(got[read_jsonl][1]) == 2


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"repeated": "first"}, r"repeated must be one of \('last', 'all'\); got 'first'"),
        ({}, "no jsonl file at"),
    ],
    ids=["bad-repeated", "missing-file"],
)
def test_read_jsonl_bad_arguments(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        read_jsonl(tmp_path / "nope.jsonl", **kwargs)


@pytest.mark.parametrize(
    ("bad", "shown"),
    [("null", "None"), ('"x"', "'x'"), ("NaN", "nan"), ("true", "True")],
    ids=["null", "string", "nan", "bool"],
)
def test_a_row_with_a_bad_step_costs_that_row_with_a_warning(tmp_path, bad, shown):
    path = tmp_path / "metrics.jsonl"
    path.write_text(f'{{"step": 1, "a": 1}}\n{{"step": {bad}, "a": 2}}\n{{"step": 3, "a": 3}}\n')
    with pytest.warns(
        RunReadWarning,
        match=rf"skipping 1 row with a step that is not a finite number \(rows 2; e\.g\. {re.escape(shown)}",
    ):
        run = read_run(path)
    steps, values = run.series["a"]
    assert list(steps) == [1, 3] and list(values) == [1.0, 3.0]


@pytest.mark.parametrize(
    ("rows", "steps"),
    [
        (
            [
                {"loss": 0.1, "global_step/max_steps": "2/4389"},
                {"loss": 0.2, "global_step/max_steps": "3/4389"},
            ],
            [2, 3],
        ),
        ([{"loss": 0.1, "global_step/max_steps": "x"}, {"loss": 0.2}], [0, 1]),  # no counter: numbered
        ([{"step": 9, "loss": 0.1, "global_step/max_steps": "2/4389"}], [9]),  # a step of its own wins
    ],
    ids=["ms-swift-counter", "no-counter", "step-wins"],
)
def test_ms_swift_step_counter_gives_the_step(tmp_path, rows, steps):
    path = tmp_path / "logging.jsonl"
    path.write_bytes(_lines(rows))
    run, caught = _read(path)
    assert run.format == RLMETRICS_JSONL and caught == []
    assert run.series["loss"][0].tolist() == steps
    assert "global_step/max_steps" not in run.series


@pytest.mark.parametrize(
    ("text", "tail", "want"),
    [
        pytest.param('{"step": 3}\n{"step": 7}\n', 1 << 20, 7, id="last-complete"),
        pytest.param('{"step": 3}\n{"step": 9}\n{"step": 4}\n', 1 << 20, 9, id="largest-not-last"),
        pytest.param('{"step": 3}\n{"step": 4, "a": 1', 1 << 20, 3, id="cut-last-line"),
        pytest.param('{"step": 3}\nnot json\n{"step": true}\n[1]\n', 1 << 20, 3, id="foreign-lines"),
        pytest.param('{"step": 1, "pad": "' + "x" * 64 + '"}\n{"step": 2}\n', 16, 2, id="window-cuts-first"),
        pytest.param('{"a": 1.0}\n', 1 << 20, None, id="no-step"),
        pytest.param("", 1 << 20, None, id="empty"),
    ],
)
def test_last_step_of_a_run_for_resume(tmp_path, text, tail, want):
    from rlmetrics.readers.jsonl import last_step

    path = tmp_path / "metrics.jsonl"
    path.write_text(text)
    assert last_step(path, tail=tail) == want


def test_last_step_of_no_file_or_a_folder_is_none(tmp_path):
    from rlmetrics.readers.jsonl import last_step

    assert last_step(tmp_path / "missing.jsonl") is None
    assert last_step(tmp_path) is None

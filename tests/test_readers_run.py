"""The one entry point :func:`rlmetrics.readers.read_run`: detection by content, paths, folders, stdin and
streams, the :class:`Run` it returns, its errors."""

from __future__ import annotations

import io
import json
import sys

import numpy as np
import pytest

from rlmetrics.errors import RunReadError, RunReadWarning
from rlmetrics.readers import (
    CSV_EXPORT,
    FORMATS,
    RLMETRICS_JSONL,
    TRL_PRINTED,
    TRL_TRAINER_STATE,
    VERL_CONSOLE,
    VERL_JSONL,
    Run,
    read_run,
)

# one log per format that a stream can hold, each with "reward" at steps 1 and 2
CONTENT = [
    ("rlmetrics-jsonl", b'{"step": 1, "reward": 0.1}\n{"step": 2, "reward": 0.2}\n', RLMETRICS_JSONL),
    (
        "verl-jsonl",
        b'{"step": 1, "data": {"reward": 0.1}}\n{"step": 2, "data": {"reward": 0.2}}\n',
        VERL_JSONL,
    ),
    (
        "trainer-state-pretty",
        b'{\n "log_history": [{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.2}]\n}\n',
        TRL_TRAINER_STATE,
    ),
    (
        "trainer-state-one-line",
        b'{"log_history": [{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.2}]}',
        TRL_TRAINER_STATE,
    ),
    (
        "verl-console",
        b"(TaskRunner pid=1) step:1 - reward:0.1\n(TaskRunner pid=1) step:2 - reward:0.2\n",
        VERL_CONSOLE,
    ),
    ("trl-printed", b"{'loss': 0.5, 'reward': 0.1}\n{'loss': 0.4, 'reward': 0.2}\n", TRL_PRINTED),
    ("trl-table", b"Step | Training Loss | reward\n1 | 0.5 | 0.1\n2 | 0.4 | 0.2\n", TRL_PRINTED),
    ("csv-export", b"Step,run-1 - reward\n1,0.1\n2,0.2\n", CSV_EXPORT),
]


def _check(run: Run, kind: str) -> None:
    assert isinstance(run, Run) and run.format == kind and kind in FORMATS
    assert run.n_steps == 2 and run.steps.tolist() == [1, 2]
    assert run.series["reward"][1].tolist() == [0.1, 0.2]


@pytest.mark.parametrize(("data", "kind"), [c[1:] for c in CONTENT], ids=[c[0] for c in CONTENT])
def test_a_file_is_told_by_content_whatever_its_name(tmp_path, data, kind):
    path = tmp_path / "whatever.log"
    path.write_bytes(data)
    run = read_run(path)
    _check(run, kind)
    assert run.path == path and run.warnings == ()


@pytest.mark.parametrize(("data", "kind"), [c[1:] for c in CONTENT], ids=[c[0] for c in CONTENT])
def test_a_stream_is_told_by_content(data, kind):
    run = read_run(io.BytesIO(data))
    _check(run, kind)
    assert run.path is None
    _check(read_run(io.StringIO(data.decode())), kind)  # a text stream too


def test_dash_reads_standard_input(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(CONTENT[4][1])))
    _check(read_run("-"), VERL_CONSOLE)


def test_a_run_folder_is_searched(tmp_path):
    (tmp_path / "checkpoint-5").mkdir()
    (tmp_path / "checkpoint-10").mkdir()
    history = [{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.2}]
    (tmp_path / "checkpoint-5" / "trainer_state.json").write_text(json.dumps({"log_history": history[:1]}))
    (tmp_path / "checkpoint-10" / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    run = read_run(tmp_path)
    _check(run, TRL_TRAINER_STATE)
    assert run.path == tmp_path / "checkpoint-10" / "trainer_state.json"


def test_run_properties_of_an_empty_run(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1, "note": "x"}\n')
    run = read_run(path, allow_empty=True)
    assert run.series == {} and run.n_steps == 0 and run.steps.dtype == np.int64


@pytest.mark.parametrize(
    ("source", "error", "match"),
    [
        (3, TypeError, r"source must be a path, '-' \(stdin\) or an open file; got int"),
        (io.BytesIO(b""), RunReadError, r"'<stream>': the file is empty"),
        (io.BytesIO(b"\n \n"), RunReadError, "holds only blank lines"),
        (
            io.BytesIO(b"hello\nworld\n"),
            RunReadError,
            "the first line is not JSON .* no text log was recognised",
        ),
        (io.BytesIO(b"[1, 2]\n"), RunReadError, "expected a JSON object per line; the first line is a list"),
    ],
    ids=["not-a-source", "empty-stream", "blank-stream", "plain-text", "json-list"],
)
def test_bad_sources(source, error, match):
    with pytest.raises(error, match=match):
        read_run(source)


def test_a_missing_path_says_what_was_expected(tmp_path):
    with pytest.raises(
        RunReadError, match=r"nope'?: no such file or directory; expected a rlmetrics metrics\.jsonl"
    ):
        read_run(tmp_path / "nope")


def test_the_thin_users_read_through_it(tmp_path):
    from rlmetrics.health.sources import SOURCES, load_history
    from rlmetrics.report import load_run

    path = tmp_path / "run.log"
    path.write_bytes(CONTENT[4][1])
    history, kind = load_history(path)
    curves = load_run(path)
    assert kind == curves.source == VERL_CONSOLE and SOURCES == FORMATS
    assert history["reward"][0].tolist() == curves.series["reward"][0].tolist() == [1, 2]
    assert curves.series["reward"][0].dtype == np.float64  # the report's series are floats


@pytest.mark.parametrize("through", ["read_run", "load_history", "load_run"])
def test_a_warning_points_at_the_callers_line(tmp_path, through):
    from rlmetrics.health.sources import load_history
    from rlmetrics.report import load_run

    path = tmp_path / "run.log"
    path.write_text("step:1 - a:0.5\nstep:2 - a:1e-\nstep:3 - a:0.4\n")
    read = {"read_run": read_run, "load_history": load_history, "load_run": load_run}[through]
    with pytest.warns(
        RunReadWarning, match=r"run\.log: 1 damaged verl console record skipped \(2 read\), at line 2"
    ) as got:
        read(path)
    assert [w.filename for w in got] == [__file__]

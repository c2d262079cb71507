"""The one entry point :func:`rlmetrics.readers.read_run` (rlmetrics.readers._read): streams and stdin
told by content, the sources it refuses, the readers that go through it."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest

from planted_runs import FORMAT_LOGS, check_two_steps
from rlmetrics.errors import RunReadError
from rlmetrics.readers import FORMATS, VERL_CONSOLE, read_run


@pytest.mark.parametrize(("data", "kind"), [c[1:] for c in FORMAT_LOGS], ids=[c[0] for c in FORMAT_LOGS])
def test_a_stream_is_told_by_content(data, kind):
    run = read_run(io.BytesIO(data))
    check_two_steps(run, kind)
    assert run.path is None
    check_two_steps(read_run(io.StringIO(data.decode())), kind)  # a text stream too


def test_dash_reads_standard_input(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(FORMAT_LOGS[4][1])))
    check_two_steps(read_run("-"), VERL_CONSOLE)


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


def test_the_thin_users_read_through_it(tmp_path):
    from rlmetrics.health.sources import SOURCES, load_history
    from rlmetrics.report import load_run

    path = tmp_path / "run.log"
    path.write_bytes(FORMAT_LOGS[4][1])
    history, kind = load_history(path)
    curves = load_run(path)
    assert kind == curves.source == VERL_CONSOLE and SOURCES == FORMATS
    assert history["reward"][0].tolist() == curves.series["reward"][0].tolist() == [1, 2]
    assert curves.series["reward"][0].dtype == np.float64  # the report's series are floats

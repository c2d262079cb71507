"""Tests of rlmetrics.tracking.jsonl: metrics.jsonl written and read back (round trips, torn lines,
fsync, without orjson).
"""

from __future__ import annotations

import json
import math
import sys
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlmetrics.tracking import JsonlBackend, Tracker, read_jsonl
from tracking_doubles import CONFIG, STEPS, log_all

torch = pytest.importorskip("torch")


# --- jsonl -------------------------------------------------------------------------------------


def test_jsonl_round_trip_and_conversion(tmp_path):
    with Tracker("p", "e", config=CONFIG, log_dir=tmp_path) as tr:
        tr.log(
            {
                "np32": np.float32(0.5),
                "np_int": np.int64(7),
                "flag": True,
                "t0": torch.tensor(2.5),
                "t1": torch.tensor([3], dtype=torch.int32),
                "arr1": np.array([[1.25]]),
                "nan": float("nan"),
                "inf": -math.inf,
            },
            step=np.int64(3),
        )
        rows_open = read_jsonl(tr.jsonl_path)  # flushed every step: readable before finish
    assert len(rows_open) == 1
    (row,) = read_jsonl(tr.jsonl_path)
    assert list(row)[:2] == ["step", "timestamp"] and row["step"] == 3 and row["timestamp"] > 1.7e9
    assert {k: row[k] for k in ("np32", "np_int", "flag", "t0", "t1", "arr1", "inf")} == {
        "np32": 0.5,
        "np_int": 7.0,
        "flag": 1.0,
        "t0": 2.5,
        "t1": 3.0,
        "arr1": 1.25,
        "inf": -math.inf,
    }
    assert math.isnan(row["nan"])
    assert json.loads((tmp_path / "p" / "e" / "config.json").read_text()) == CONFIG
    line = tr.jsonl_path.read_text().splitlines()[0]
    assert "NaN" in line and "-Infinity" in line


def test_jsonl_truncated_last_line_and_resume(tmp_path):
    with Tracker("p", "e", log_dir=tmp_path) as tr:
        log_all(tr)
    path = tr.jsonl_path
    full = path.read_bytes()
    path.write_bytes(full[:-20])  # a crash in the middle of the last line
    with pytest.warns(RuntimeWarning, match="truncated last line 3"):
        rows = read_jsonl(path)
    assert [r["step"] for r in rows] == [1, 2]
    # A resumed run appends after the fragment, on a fresh line, after its last complete step.
    with Tracker("p", "e", log_dir=tmp_path, resume=True) as tr:
        assert tr.run_dir == path.parent and tr.renamed_from is None and tr.start_step == 3
        tr.log(STEPS[5], step=5)
    with pytest.warns(RuntimeWarning, match="skipping unreadable line 3"):
        rows = read_jsonl(path)
    assert [r["step"] for r in rows] == [1, 2, 5]
    assert rows[2]["actor/pg_loss"] == 3.0
    with pytest.raises(ValueError, match=r"metrics.jsonl:3: not a JSON object"):
        read_jsonl(path, strict=True)


def test_a_resumed_torn_file_gets_one_fresh_line_and_no_blank_ones(tmp_path):
    with Tracker("p", "e", log_dir=tmp_path) as tr:
        tr.log({"a": 1.0}, step=0)
    tr.jsonl_path.write_bytes(tr.jsonl_path.read_bytes() + b'{"step":1,"a"')  # a crash mid-line
    with Tracker("p", "e", log_dir=tmp_path, resume=True) as tr:
        for step in (2, 3, 4):
            tr.log({"a": float(step)}, step=step)
    lines = tr.jsonl_path.read_bytes().split(b"\n")
    assert lines[1] == b'{"step":1,"a"' and lines[-1] == b""  # the fragment alone; the file ends whole
    assert [json.loads(line)["a"] for line in lines[2:-1]] == [2.0, 3.0, 4.0]  # no blank line between


@pytest.mark.parametrize(
    ("content", "exc", "match"),
    [
        (None, ValueError, "no jsonl file at"),
        (b"[1, 2]\n", ValueError, r":1: expected a JSON object per line; got list"),
    ],
    ids=["missing-file", "not-an-object"],
)
def test_read_jsonl_errors(tmp_path, content, exc, match):
    path = tmp_path / "m.jsonl"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(exc, match=match):
        read_jsonl(path)


def test_jsonl_without_orjson_writes_the_same(tmp_path, monkeypatch):
    """orjson is an optional speed-up: the json fallback gives the same rows."""
    with Tracker("p", "fast", log_dir=tmp_path) as tr:
        log_all(tr)
    monkeypatch.setitem(sys.modules, "orjson", None)
    with Tracker("p", "slow", log_dir=tmp_path) as tr2:
        assert tr2.backends["jsonl"]._orjson is None
        log_all(tr2)

    def strip(rows):
        return [{k: v for k, v in r.items() if k != "timestamp"} for r in rows]

    assert strip(read_jsonl(tr.jsonl_path)) == strip(read_jsonl(tr2.jsonl_path))
    assert strip(read_jsonl(tr.jsonl_path)) == [{"step": s, **m} for s, m in STEPS.items()]


def test_jsonl_fsync(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr("rlmetrics.tracking.jsonl.os.fsync", lambda fd: calls.append(fd))
    with Tracker("p", "e", backends=[JsonlBackend(fsync=True)], log_dir=tmp_path) as tr:
        log_all(tr)
    assert len(calls) == len(STEPS)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.dictionaries(
            st.text(min_size=1, max_size=12).filter(lambda k: k not in ("step", "timestamp")),
            st.floats(allow_nan=False),
            max_size=5,
        ),
        min_size=1,
        max_size=4,
    )
)
def test_jsonl_round_trip_property(tmp_path_factory, steps):
    """Whatever finite floats and keys are logged come back bit for bit."""
    d = tmp_path_factory.mktemp("prop")
    with Tracker("p", "e", log_dir=d) as tr:
        for i, metrics in enumerate(steps):
            tr.log(metrics, step=i)
    rows = read_jsonl(tr.jsonl_path)
    assert [{k: v for k, v in r.items() if k not in ("step", "timestamp")} for r in rows] == steps


def test_read_jsonl_keeps_records_of_one_step_with_different_keys(tmp_path):
    """A summary record beside a step (TRL), or the monitor's last check: kept, no warning."""
    path = tmp_path / "m.jsonl"
    text = (
        '{"step": 4, "a": 1, "epoch": 1}\n{"step": 4, "train_runtime": 9, "epoch": 1}\n{"step": 5, "a": 2}\n'
    )
    path.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = read_jsonl(path)
    assert rows == [json.loads(line) for line in text.splitlines()]
    path.write_text('{"step": 4, "a": 1, "b": 1}\n{"step": 4, "a": 3}\n')
    with pytest.warns(RuntimeWarning, match="1 step logged more than once"):
        assert read_jsonl(path) == [{"step": 4, "b": 1}, {"step": 4, "a": 3}]
    with pytest.raises(ValueError, match=r"repeated must be one of \('last', 'all'\); got 'first'"):
        read_jsonl(path, repeated="first")


def test_load_history_reads_repeated_steps_key_by_key(tmp_path):
    """Our jsonl (warned, last value kept) and verl's nested records (merged under "data")."""
    from rlmetrics.health.sources import load_history

    ours = tmp_path / "metrics.jsonl"
    ours.write_text('{"step": 0, "a": 1}\n{"step": 1, "a": 2}\n{"step": 0, "a": 5}\n')
    with pytest.warns(RuntimeWarning, match="1 step logged more than once"):
        history, _ = load_history(ours)
    assert history["a"][0].tolist() == [0, 1] and history["a"][1].tolist() == [5.0, 2.0]
    verl = tmp_path / "verl.jsonl"  # verl's file logger: a validation record beside a step's record
    verl.write_text('{"step": 3, "data": {"a": 1}}\n{"step": 3, "data": {"val/x": 0.5}}\n')
    history, source = load_history(verl)
    assert (
        source == "verl-jsonl" and history["a"][1].tolist() == [1.0] and history["val/x"][1].tolist() == [0.5]
    )

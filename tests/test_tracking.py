"""Tests of rlmetrics.tracking: round trips through each tool's own reader, fault injection."""

from __future__ import annotations

import hashlib
import io
import json
import math
import subprocess
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlmetrics.tracking import Tracker, mlflow_key, read_jsonl

torch = pytest.importorskip("torch")

STEPS = {
    1: {"critic/score/mean": 0.5, "actor/pg_loss": -0.125, "val-core/gsm8k/acc/mean@8": 0.25},
    2: {"critic/score/mean": 0.75, "actor/pg_loss": 0.0625, "val-core/gsm8k/acc/mean@8": 0.5},
    5: {"critic/score/mean": 1.0, "actor/pg_loss": 3.0, "val-core/gsm8k/acc/mean@8": 0.875},
}
CONFIG = {"trainer": {"total_epochs": 3, "project": "p"}, "actor": {"lr": 1e-6}}


class Recorder:
    """A custom backend that keeps what it was given."""

    name = "recorder"

    def __init__(self) -> None:
        self.rows: list[tuple[int, dict]] = []
        self.finished = 0

    def log(self, metrics, step):
        self.rows.append((step, metrics))

    def finish(self):
        self.finished += 1


class Broken(Recorder):
    """Fails like a full disk on the ``fail_at``-th log call."""

    name = "broken"

    def __init__(self, fail_at: int = 2, fail_finish: bool = False) -> None:
        super().__init__()
        self.fail_at, self.fail_finish, self.calls = fail_at, fail_finish, 0

    def log(self, metrics, step):
        self.calls += 1
        if self.calls >= self.fail_at:
            raise OSError(28, "No space left on device")
        super().log(metrics, step)

    def finish(self):
        if self.fail_finish:
            raise ConnectionError("network down")
        super().finish()


def log_all(tracker: Tracker) -> None:
    for step, metrics in STEPS.items():
        tracker.log(metrics, step=step)


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
    with Tracker("p", "e", log_dir=tmp_path, fsync=True) as tr:
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


# --- conversion, policies, errors --------------------------------------------------------------


@pytest.mark.parametrize(
    ("metrics", "exc", "match"),
    [
        ({"acc": "high"}, TypeError, r"metrics\['acc'\] must be a number.*got str"),
        ({"v": np.zeros(2)}, TypeError, r"metrics\['v'\] must be a number or a one-element array; got shape"),
        ({"v": torch.zeros(2)}, TypeError, r"metrics\['v'\] must be a number or a one-element tensor"),
        ({"c": 1 + 2j}, TypeError, r"metrics\['c'\] must be a number"),
        ({"n": None}, TypeError, r"metrics\['n'\] must be a number.*NoneType"),
        ({"step": 1.0}, ValueError, r"metrics\['step'\]: 'step' is reserved"),
        ({"timestamp": 1.0}, ValueError, r"metrics\['timestamp'\]: 'timestamp' is reserved"),
        ({3: 1.0}, TypeError, "metric keys must be strings; got int"),
        ([1.0], TypeError, "metrics must be a mapping"),
    ],
    ids=[
        "str",
        "array",
        "tensor",
        "complex",
        "none",
        "reserved-step",
        "reserved-timestamp",
        "int-key",
        "list",
    ],
)
def test_bad_values_name_the_key(tmp_path, metrics, exc, match):
    rec = Recorder()
    with Tracker("p", "e", backends=[rec], log_dir=tmp_path) as tr, pytest.raises(exc, match=match):
        tr.log(metrics, step=0)
    assert rec.rows == []


@pytest.mark.parametrize(
    ("step", "exc", "match"),
    [
        (1.5, TypeError, "step must be an integer >= 0; got float 1.5"),
        (True, TypeError, "step must be an integer >= 0; got bool"),
        (-1, ValueError, "step must be an integer >= 0; got -1"),
    ],
    ids=["float", "bool", "negative"],
)
def test_bad_step(tmp_path, step, exc, match):
    with Tracker("p", "e", backends=[Recorder()], log_dir=tmp_path) as tr, pytest.raises(exc, match=match):
        tr.log({"a": 1.0}, step=step)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"backends": "jsonl,nope"}, ValueError, "unknown tracking backend 'nope'; known: console, jsonl"),
        ({"backends": []}, ValueError, "at least one backend"),
        ({"backends": ["jsonl", "jsonl"]}, ValueError, "lists 'jsonl' twice"),
        ({"backends": [object()]}, TypeError, r"needs log\(metrics, step\) and finish\(\)"),
        ({"nonfinite": "ignore"}, ValueError, "nonfinite must be one of"),
        ({"config": 3}, TypeError, "config must be a dict"),
        ({"monitor": object()}, TypeError, r"monitor must have an update\(values, step\) method"),
    ],
    ids=["unknown", "empty", "twice", "bad-object", "nonfinite", "config", "monitor"],
)
def test_bad_constructor_arguments(tmp_path, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        Tracker("p", "e", log_dir=tmp_path, **kwargs)


# --- keys: a record is the unit of failure -------------------------------------------------------


def test_numpy_string_keys_become_str_and_every_step_is_logged(tmp_path):
    rec = Recorder()
    with Tracker("p", "e", backends=[rec, "jsonl"], log_dir=tmp_path) as tr:
        for step in range(4):
            tr.log({np.str_("a"): float(step), "b": 1.0}, step=step)
    assert [type(k) for _, m in rec.rows for k in m] == [str] * 8
    assert [(r["step"], r["a"]) for r in read_jsonl(tr.jsonl_path)] == [(s, float(s)) for s in range(4)]


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"x\ud800": 1.0}, r"metrics\['x\\ud800'\] is dropped for every backend: the key is not valid UTF-8"),
        (
            {"big": 2**2000},
            r"metrics\['big'\] is dropped for every backend: its value, an integer of 2001 bits",
        ),
    ],
    ids=["surrogate-key", "int-beyond-float64"],
)
def test_a_key_no_backend_can_store_is_dropped_from_its_step_alone(tmp_path, bad, match):
    rec = Recorder()
    with Tracker("p", "e", backends=[rec, "jsonl"], log_dir=tmp_path) as tr:
        for step in range(5):
            metrics = {"ok": float(step), **(bad if step == 2 else {})}
            if step == 2:
                with pytest.warns(RuntimeWarning, match="step 2: " + match) as caught:
                    tr.log(metrics, step=step)
                assert caught[0].filename == __file__
            else:
                tr.log(metrics, step=step)
    want = [(s, {"ok": float(s)}) for s in range(5)]
    assert rec.rows == want and tr.lost == {}
    assert [(r["step"], r["ok"]) for r in read_jsonl(tr.jsonl_path)] == [(s, m["ok"]) for s, m in want]
    assert all(set(r) == {"step", "timestamp", "ok"} for r in read_jsonl(tr.jsonl_path))


def test_huge_steps_stay_in_jsonl_and_a_backend_with_max_step_loses_only_those(tmp_path):
    class Int64(Recorder):
        name = "int64"
        max_step = 2**63 - 1

    small = Int64()
    with Tracker("p", "e", backends=["jsonl", small], log_dir=tmp_path) as tr:
        tr.log({"a": 1.0}, step=0)
        with pytest.warns(RuntimeWarning, match=r"'int64' lost the record of step 18446744073709551616"):
            tr.log({"a": 2.0}, step=2**64)
        tr.log({"a": 3.0}, step=1)
    assert [s for s, _ in small.rows] == [0, 1] and tr.lost == {"int64": 1}
    assert [r["step"] for r in read_jsonl(tr.jsonl_path)] == [0, 2**64, 1]  # json holds any integer


# --- run identity ----------------------------------------------------------------------------------


def test_an_existing_run_is_never_appended_to_a_new_name_is_taken(tmp_path):
    """The README loop run twice: two runs, each read back whole."""
    runs = []
    for i in range(3):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with Tracker("my-project", "run-1", log_dir=tmp_path) as tr:
                for step in range(5):
                    tr.log({"loss": float(10 * i + step)}, step=step)
        runs.append((tr, [str(w.message) for w in caught]))
    (first, none), (second, told), (third, _) = runs
    assert first.experiment == "run-1" and first.renamed_from is None and none == []
    assert (second.experiment, second.renamed_from) == ("run-1-2", "run-1")
    assert told == [
        f"run directory {str(first.run_dir)!r} exists: this run is 'run-1-2' ({str(second.run_dir)!r}); "
        "pass resume=True to continue the old one"
    ]
    assert third.run_dir == tmp_path / "my-project" / "run-1-3" and third.start_step == 0
    for i, (tr, _) in enumerate(runs):
        assert [r["loss"] for r in read_jsonl(tr.jsonl_path)] == [10.0 * i + s for s in range(5)]


def test_resume_continues_after_the_last_step_and_warns_on_a_step_logged_again(tmp_path):
    with Tracker("p", "e", config={"lr": 1.0}, log_dir=tmp_path) as tr:
        for step in range(10):
            tr.log({"loss": float(step)}, step=step)
    with pytest.warns(
        RuntimeWarning, match=r"config differs from .*config.json' \(top-level keys \['lr'\]\)"
    ):
        again = Tracker("p", "e", config={"lr": 2.0}, log_dir=tmp_path, resume=True)
    assert again.run_dir == tr.run_dir and again.start_step == 10 and again.renamed_from is None
    with pytest.warns(
        RuntimeWarning, match=r"step 7 is at or before step 9, the last one the resumed run logged"
    ):
        again.log({"loss": 70.0}, step=7)  # resumed from a checkpoint at step 7
    again.log({"loss": 80.0}, step=8)  # warned once
    again.log({"loss": 100.0}, step=10)
    again.finish()
    assert json.loads((tr.run_dir / "config.json").read_text()) == {"lr": 2.0}
    with pytest.warns(RuntimeWarning, match=r"2 steps logged more than once .* e\.g\. step 7: 'loss'"):
        rows = read_jsonl(tr.jsonl_path)
    # in file order: the first run's steps 0-6 and 9, then the resumed run's 7, 8, 10
    assert [(r["step"], r["loss"]) for r in rows] == [(s, float(s)) for s in (*range(7), 9)] + [
        (7, 70.0),
        (8, 80.0),
        (10, 100.0),
    ]
    assert len(read_jsonl(tr.jsonl_path, repeated="all")) == 13
    fresh = Tracker("p", "new", log_dir=tmp_path, resume=True)  # resuming a run that is not there
    fresh.finish()
    assert fresh.start_step == 0 and fresh.run_dir.is_dir()


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


@pytest.mark.parametrize(
    ("project", "experiment", "exc", "match"),
    [
        (
            "../../escape",
            "e",
            ValueError,
            r"project must be a plain name .*'\.\./\.\./escape', which holds a path",
        ),
        ("a/b", "e", ValueError, "project must be a plain name.*holds a path separator"),
        ("p", "..", ValueError, r"experiment must be a plain name.*'\.\.', which is '\.' or '\.\.'"),
        ("p", ".", ValueError, "experiment must be a plain name"),
        ("p", "/tmp/abs", ValueError, "experiment must be a plain name.*holds a path separator"),
        ("p", "a\\b", ValueError, "experiment must be a plain name.*holds a path separator"),
        ("p", "x\0y", ValueError, "experiment must be a plain name.*holds a NUL character"),
        ("p", "x\ud800", ValueError, r"experiment must be a plain name.*not valid UTF-8"),
        ("p", "é" * 101, ValueError, "experiment must be a plain name.*is 202 bytes long"),
        ("", "e", TypeError, "project must be a non-empty str; got ''"),
        ("p", None, TypeError, "experiment must be a non-empty str; got None"),
    ],
    ids=[
        "escape",
        "slash",
        "dotdot",
        "dot",
        "absolute",
        "backslash",
        "nul",
        "surrogate",
        "long",
        "empty",
        "none",
    ],
)
def test_project_and_experiment_are_plain_names(tmp_path, project, experiment, exc, match):
    log_dir = tmp_path / "a" / "b"
    with pytest.raises(exc, match=match):
        Tracker(project, experiment, log_dir=log_dir)
    assert not tmp_path.joinpath("a").exists() and list(tmp_path.iterdir()) == []  # nothing written


def test_the_run_dir_lies_under_log_dir(tmp_path):
    for project, experiment in (("p", "e"), ("..p", "e..f"), ("p q", "é"), (np.str_("np"), "e")):
        with Tracker(project, experiment, log_dir=tmp_path / "logs") as tr:
            tr.log({"a": 1.0}, step=0)
        assert tr.run_dir.resolve().parent.parent == (tmp_path / "logs").resolve()
        assert type(tr.project) is str


def test_colliding_config_keys_are_a_named_error(tmp_path):
    with pytest.raises(
        ValueError, match=r"config: config\['a'\]\['b'\] and config\['a\.b'\] both flatten to 'a\.b'"
    ):
        Tracker("p", "e", config={"a": {"b": 1}, "a.b": 2}, log_dir=tmp_path)
    with pytest.raises(ValueError, match=r"config\[1\] and config\['1'\] both flatten to '1'"):
        Tracker("p", "e", config={1: "x", "1": "y"}, log_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def _without_tensorboard(monkeypatch):
    """tensorboard unimportable, its submodules too (an earlier test may have imported them:
    a cached submodule would still import)."""
    for name in [m for m in sys.modules if m == "tensorboard" or m.startswith("tensorboard.")] + [
        "tensorboard"
    ]:
        monkeypatch.setitem(sys.modules, name, None)


def test_a_failed_construction_leaves_no_run_dir_behind(tmp_path, monkeypatch):
    _without_tensorboard(monkeypatch)
    with pytest.raises(ImportError, match="needs tensorboard"):
        Tracker("p", "e", backends=("jsonl", "tensorboard"), log_dir=tmp_path / "logs")
    assert not (tmp_path / "logs").exists()
    with Tracker("p", "e", log_dir=tmp_path / "logs") as tr:  # the name is still free
        pass
    assert tr.experiment == "e"


def test_resume_must_be_a_bool(tmp_path):
    with pytest.raises(TypeError, match="resume must be a bool; got str 'yes'"):
        Tracker("p", "e", log_dir=tmp_path, resume="yes")


@pytest.mark.parametrize("policy", ["keep", "drop", "error"], ids=["keep", "drop", "error"])
def test_nonfinite_policy_is_the_same_for_every_backend(tmp_path, policy):
    a, b = Recorder(), Recorder()
    metrics = {"ok": 1.0, "bad": float("nan"), "big": float("inf")}
    with Tracker("p", "e", backends=[a, b, "jsonl"], log_dir=tmp_path, nonfinite=policy) as tr:
        if policy == "error":
            with pytest.raises(ValueError, match=r"metrics\['bad'\] is nan; non-finite values are not"):
                tr.log(metrics, step=0)
            return
        tr.log(metrics, step=0)
    (row,) = read_jsonl(tr.jsonl_path)
    for got in (a.rows[0][1], b.rows[0][1], {k: v for k, v in row.items() if k not in ("step", "timestamp")}):
        if policy == "drop":
            assert got == {"ok": 1.0}
        else:
            assert got["ok"] == 1.0 and math.isnan(got["bad"]) and got["big"] == math.inf


class FlakyOnce(Recorder):
    """Fails on the ``fail_at``-th log call only (a full disk that was cleared)."""

    name = "flaky"

    def __init__(self, fail_at: int = 2) -> None:
        super().__init__()
        self.fail_at, self.calls = fail_at, 0

    def log(self, metrics, step):
        self.calls += 1
        if self.calls == self.fail_at:
            raise OSError(28, "No space left on device")
        super().log(metrics, step)


def test_a_failing_record_is_lost_alone_and_the_backend_keeps_logging(tmp_path):
    flaky, rec = FlakyOnce(fail_at=2), Recorder()
    tr = Tracker("p", "e", backends=[flaky, "jsonl", rec], log_dir=tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        log_all(tr)
        tr.finish()
        tr.finish()  # idempotent
    ours = [str(w.message) for w in caught if "tracking backend" in str(w.message)]
    assert ours == [
        "tracking backend 'flaky' lost the record of step 2; it keeps logging: "
        "OSError: [Errno 28] No space left on device"
    ]
    assert all(w.filename == __file__ for w in caught)  # attributed to the caller of log()
    assert tr.lost == {"flaky": 1} and isinstance(tr.failed["flaky"], OSError)
    assert [s for s, _ in flaky.rows] == [1, 5] and flaky.finished == 1
    assert [s for s, _ in rec.rows] == [1, 2, 5] and rec.finished == 1
    assert [r["step"] for r in read_jsonl(tr.jsonl_path)] == [1, 2, 5]
    with pytest.raises(RuntimeError, match="after finish"):
        tr.log({"a": 1.0}, step=9)


def test_a_backend_failing_for_good_is_warned_at_powers_of_two_and_counted(tmp_path):
    broken, rec = Broken(fail_at=1), Recorder()
    tr = Tracker("p", "e", backends=[broken, rec], log_dir=tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(12):
            tr.log({"a": float(step)}, step=step)
        tr.finish()
    lost = [str(w.message) for w in caught if "lost the record" in str(w.message)]
    assert [m.split("step ")[1].split(";")[0] for m in lost] == ["0", "1", "3", "7"]  # losses 1, 2, 4, 8
    assert "8 records lost so far" in lost[-1]
    (summary,) = [str(w.message) for w in caught if "records of this run" in str(w.message)]
    assert summary == (
        "tracking backend 'broken' lost 12 records of this run (steps 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...); "
        "last error: OSError: [Errno 28] No space left on device"
    )
    assert broken.calls == 12 and tr.lost == {"broken": 12}  # still called: never switched off
    assert [s for s, _ in rec.rows] == list(range(12))


class ScriptedMonitor:
    """A monitor (duck-typed like HealthMonitor) answering from a script of step -> findings."""

    def __init__(self, script=None, fail_at=None):
        self.script, self.fail_at, self.seen = script or {}, fail_at, []

    def update(self, values, step):
        if step == self.fail_at:
            raise ZeroDivisionError("rule bug")
        self.seen.append((step, dict(values)))
        return self.script.get(step, [])


def scripted_finding(kind, severity, step):
    from rlmetrics.health.findings import Finding

    return Finding(kind=kind, severity=severity, step=step, metric=("a",), advice=f"try less {kind}")


@pytest.mark.parametrize("policy", ["keep", "drop"], ids=["keep", "drop"])
def test_monitor_findings_are_one_warning_and_one_health_record(tmp_path, policy):
    from rlmetrics import keys as K

    script = {
        2: [scripted_finding("grad_spike", "warning", 1)],
        5: [scripted_finding("nonfinite", "error", 5), scripted_finding("kl_drift", "warning", 3)],
    }
    rec, mon = Recorder(), ScriptedMonitor(script)
    with Tracker("p", "e", backends=[rec, "jsonl"], log_dir=tmp_path, nonfinite=policy, monitor=mon) as tr:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            log_all(tr)
            tr.log({"critic/score/mean": float("nan")}, step=6)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert messages == [
        "rlmetrics health: grad_spike (warning) from step 1: try less grad_spike",
        "rlmetrics health: nonfinite (error) from step 5: try less nonfinite",
        "rlmetrics health: kl_drift (warning) from step 3: try less kl_drift",
    ]
    assert all(w.filename == __file__ for w in caught)  # attributed to the caller of log()
    health = {s: {k: v for k, v in m.items() if k.startswith(K.HEALTH_PREFIX)} for s, m in rec.rows}
    assert health == {
        1: {},
        2: {K.health("grad_spike"): 1.0},
        5: {K.health("nonfinite"): 2.0, K.health("kl_drift"): 1.0},
        6: {},
    }
    assert [r.get(K.health("nonfinite")) for r in read_jsonl(tr.jsonl_path)] == [None, None, 2.0, None]
    # the monitor sees the NaN even when the backends drop it
    assert math.isnan(mon.seen[-1][1]["critic/score/mean"])


def test_finish_runs_the_monitors_last_check_and_logs_it_with_the_last_step(tmp_path):
    from rlmetrics import keys as K

    class CheckedMonitor(ScriptedMonitor):
        def check(self):
            return [scripted_finding("grad_spike", "warning", 4)]

    rec = Recorder()
    tr = Tracker("p", "e", backends=[rec], log_dir=tmp_path, monitor=CheckedMonitor())
    log_all(tr)
    with pytest.warns(
        RuntimeWarning, match=r"rlmetrics health: grad_spike \(warning\) from step 4"
    ) as caught:
        tr.finish()
    assert rec.rows[-1] == (5, {K.health("grad_spike"): 1.0})
    assert all(w.filename == __file__ for w in caught)  # attributed to the caller of finish()


@pytest.mark.parametrize("logged", [False, True], ids=["nothing-logged", "logged"])
def test_a_failing_last_check_warns_and_finish_closes(tmp_path, logged):
    class BadCheck(ScriptedMonitor):
        def check(self):
            raise ZeroDivisionError("rule bug")

    rec = Recorder()
    tr = Tracker("p", "e", backends=[rec], log_dir=tmp_path, monitor=BadCheck())
    if logged:
        log_all(tr)
        with pytest.warns(RuntimeWarning, match=r"failed in check\(\) and is switched off.*rule bug"):
            tr.finish()
    else:
        tr.finish()  # nothing was logged: no last check
    assert rec.finished == 1


def test_failing_monitor_is_switched_off_and_logging_goes_on(tmp_path):
    rec, mon = Recorder(), ScriptedMonitor(fail_at=2)
    tr = Tracker("p", "e", backends=[rec], log_dir=tmp_path, monitor=mon)
    with pytest.warns(
        RuntimeWarning, match=r"health monitor failed in update\(\) and is switched off.*rule bug"
    ):
        log_all(tr)
    tr.finish()
    assert tr.monitor is None
    assert [s for s, _ in rec.rows] == [1, 2, 5] and [s for s, _ in mon.seen] == [1]


def test_a_monitor_returning_no_findings_object_is_switched_off(tmp_path):
    class Odd:
        def update(self, values, step):
            return [object()]

    rec = Recorder()
    with Tracker("p", "e", backends=[rec], log_dir=tmp_path, monitor=Odd()) as tr:
        with pytest.warns(RuntimeWarning, match="AttributeError"):
            tr.log({"a": 1.0}, step=0)
    assert tr.monitor is None and rec.rows == [(0, {"a": 1.0})]


def test_failing_finish_warns_and_others_close(tmp_path):
    broken, rec = Broken(fail_at=99, fail_finish=True), Recorder()
    tr = Tracker("p", "e", backends=[broken, rec], log_dir=tmp_path)
    tr.log({"a": 1.0}, step=0)
    with pytest.warns(RuntimeWarning, match=r"'broken' failed in finish\(\): ConnectionError: network down"):
        tr.finish()
    assert rec.finished == 1


@pytest.mark.parametrize(
    ("backend", "module", "match"),
    [
        ("tensorboard", "tensorboard", r"pip install 'rlmetrics\[tensorboard\]'"),
        ("wandb", "wandb", r"pip install 'rlmetrics\[wandb\]'"),
        ("mlflow", "mlflow", r"pip install 'rlmetrics\[mlflow\]'"),
        ("trackio", "trackio", r"pip install 'rlmetrics\[trackio\]'"),
    ],
    ids=["tensorboard", "wandb", "mlflow", "trackio"],
)
def test_missing_package_import_error(tmp_path, monkeypatch, backend, module, match):
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=match):
        Tracker("p", "e", backends=("jsonl", backend), log_dir=tmp_path)


# --- console -----------------------------------------------------------------------------------


def test_console_is_compact(tmp_path):
    buf = io.StringIO()
    metrics = {f"actor/extra_{i}": float(i) for i in range(80)}
    metrics.update({"critic/score/mean": 0.123456, "timing_s/step": 12.0, "val-core/a/acc": 0.5})
    with Tracker("proj", "exp", backends="console", log_dir=tmp_path, console_file=buf) as tr:
        tr.log(metrics, step=7)
        tr.log({"z": 1.0, "y": 2.5}, step=8)
    lines = buf.getvalue().splitlines()
    assert lines[0] == "proj / exp"
    # The default keys, in DEFAULT_CONSOLE_KEYS order, 4 significant digits, and a count of the rest.
    assert lines[1] == "step 7 | critic/score/mean 0.1235 | val-core/a/acc 0.5 | timing_s/step 12 (+80 more)"
    assert lines[2] == "step 8 | z 1 | y 2.5"  # nothing matches the defaults: the first keys
    buf2 = io.StringIO()
    opts = {"console_file": buf2, "console_keys": ["actor/extra_1?"]}
    with Tracker("p", "e", backends="console", log_dir=tmp_path, **opts) as tr:
        tr.log(metrics, step=1)
    assert buf2.getvalue().splitlines()[1].count("actor/extra_1") == 10


# --- tensorboard -------------------------------------------------------------------------------


def test_tensorboard_round_trip(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with Tracker("p", "e", backends=("tensorboard",), config=CONFIG, log_dir=tmp_path) as tr:
        log_all(tr)
        tr.log({"nan": float("nan")}, step=6)
        # beyond an event's int64 step: that record is lost for TensorBoard, the next one is kept
        with pytest.warns(
            RuntimeWarning,
            match=r"'tensorboard' lost the record of step 9223372036854775808.*"
            r"beyond its step range \(0 to 9223372036854775807\)",
        ):
            tr.log({"critic/score/mean": 9.0}, step=2**63)
        tr.log({np.str_("np-key"): 1.5, "critic/score/mean": 2.0}, step=2**63 - 1)
    assert tr.lost == {"tensorboard": 1}
    acc = EventAccumulator(str(tr.run_dir / "tensorboard"), size_guidance={"tensors": 0, "scalars": 0})
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("np-key")] == [(2**63 - 1, 1.5)]
    assert [e.step for e in acc.Scalars("critic/score/mean")] == [*STEPS, 2**63 - 1]
    for key in STEPS[1]:
        events = acc.Scalars(key)[: len(STEPS)]
        assert [e.step for e in events] == list(STEPS)
        want = np.array([STEPS[s][key] for s in STEPS], dtype=np.float32)  # simple_value is float32
        np.testing.assert_array_equal(np.array([e.value for e in events], dtype=np.float32), want)
    assert math.isnan(acc.Scalars("nan")[0].value)
    (text,) = acc.Tensors("config")
    assert json.loads(text.tensor_proto.string_val[0].decode().strip("`\n")) == CONFIG


# --- wandb (offline) ---------------------------------------------------------------------------


def _read_wandb_records(path: Path) -> list[dict]:
    """Records of a ``.wandb`` file as wandb's own reader prints them (``wandb leet inspect --json``)."""
    out = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_wandb_offline_round_trip(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DISABLE_GIT", "true")
    with Tracker("p", "e", backends=("wandb",), config=CONFIG, log_dir=tmp_path, wandb_mode="offline") as tr:
        log_all(tr)
    (run_file,) = (tmp_path / "p" / "e" / "wandb").glob("offline-run-*/run-*.wandb")
    # wandb's service process writes the file; on a loaded machine its last records can land
    # a moment after ``finish()`` returns: wait (bounded) for the exit record
    deadline = time.monotonic() + 20.0
    records = _read_wandb_records(run_file)
    while not any(r["type"] == "exit" for r in records) and time.monotonic() < deadline:
        time.sleep(0.2)
        records = _read_wandb_records(run_file)
    history: dict[int, dict] = {}
    for rec in records:
        # wandb writes a step as one ``history`` record, or (its service under load) as the
        # ``partial_history`` records the run sent, not yet merged
        kind = rec["type"]
        if kind in ("history", "partial_history"):
            items = dict(rec[kind]["item"])
            step = items.pop("_step", rec[kind].get("step", {}).get("num"))
            values = {k: v for k, v in items.items() if not k.startswith("_")}
            if values:
                history.setdefault(int(step), {}).update(values)
    kinds = Counter(rec["type"] for rec in records)
    assert history == STEPS, f"records in {run_file.name} ({run_file.stat().st_size} bytes): {dict(kinds)}"
    config: dict = {}
    for rec in records:  # the config arrives with the run record (and later config records)
        if rec["type"] in ("run", "config"):
            config.update((rec["run"]["config"] if rec["type"] == "run" else rec["config"]).get("update", {}))
    assert records[-1]["type"] == "exit" and records[-1]["exit"].get("exit_code", 0) == 0
    assert config["trainer"] == CONFIG["trainer"] and config["actor"] == CONFIG["actor"]


# --- mlflow (one test: its import and sqlite set-up are slow) ---------------------------------


# keys MLflow refuses as they are, and the names they get (mlflow_key's documented mapping)
MLFLOW_ODD_KEYS = {
    "a//b": "a/_/b",
    "/lead": "_/lead",
    "trail/": "trail/_",
    "a/../b": "a/__/b",
    "..up": "_.up",
    "": "_",
    "sp ace:colon": "sp ace:colon",
    "what?": "what_",
}


def test_mlflow_key_mapping_is_legal_and_stable():
    pytest.importorskip("mlflow")
    from mlflow.utils.validation import _validate_metric_name, _validate_param_name

    long = "x/" * 200
    for key, name in {**MLFLOW_ODD_KEYS, long: mlflow_key(long)}.items():
        assert mlflow_key(key) == name
        _validate_metric_name(name)  # MLflow's own checks: raise if illegal
        _validate_param_name(name)
        assert len(name) <= 250
    name = mlflow_key(long)
    assert len(name) == 250 and name.startswith("x/x/") and name[241] == "-"
    assert name != mlflow_key(long + "y") and mlflow_key(long + "y")[:241] == name[:241]  # the hash tells


def test_mlflow_round_trip_and_failed_status(tmp_path):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    config = {**CONFIG, "prompt": "x" * 7000}
    with pytest.warns(
        RuntimeWarning, match=r"param 'prompt': its value of 7000 characters is cut to MLflow's 6000"
    ):
        tr = Tracker("p", "e", backends=("mlflow",), config=config, log_dir=tmp_path)
    long_a, long_b = "k" * 300 + "a", "k" * 300 + "b"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        log_all(tr)
        tr.log({"nan": float("nan")}, step=6)
        tr.log({**dict.fromkeys(MLFLOW_ODD_KEYS, 1.0), long_a: 2.0, long_b: 3.0}, step=7)
        tr.log({"what!": 4.0}, step=8)  # maps to 'what_', which 'what?' took
        tr.log({"critic/score/mean": 5.0}, step=2**63)  # beyond MLflow's int64 step
        tr.log({"critic/score/mean": 6.0}, step=9)
        tr.finish()
    messages = [str(w.message) for w in caught]
    assert sum("is over MLflow's 250 characters" in m for m in messages) == 2
    (taken,) = [m for m in messages if "what!" in m]
    assert taken == (
        f"tracking backend 'mlflow', step 8: key 'what!' maps to the MLflow name 'what_' of key 'what?': "
        f"logged as 'what_-{hashlib.sha256(b'what!').hexdigest()[:8]}'"
    )
    assert any("'mlflow' lost the record of step 9223372036854775808" in m for m in messages)
    backend = tr.backends["mlflow"]
    client = MlflowClient(tracking_uri=backend.tracking_uri)
    run = client.get_run(backend.run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "e"
    assert run.data.params == {
        "trainer.total_epochs": "3",
        "trainer.project": "p",
        "actor.lr": "1e-06",
        "prompt": "x" * 6000,
    }
    for key in STEPS[1]:
        hist = client.get_metric_history(backend.run_id, mlflow_key(key))
        want = [(s, STEPS[s][key]) for s in STEPS] + ([(9, 6.0)] if key == "critic/score/mean" else [])
        assert sorted((m.step, m.value) for m in hist) == want
    (nan,) = client.get_metric_history(backend.run_id, "nan")
    assert math.isnan(nan.value)
    for key, name in MLFLOW_ODD_KEYS.items():  # every odd key stored, under its documented name
        assert [(m.step, m.value) for m in client.get_metric_history(backend.run_id, name)] == [(7, 1.0)], key
    for key, value in ((long_a, 2.0), (long_b, 3.0)):
        assert [m.value for m in client.get_metric_history(backend.run_id, mlflow_key(key))] == [value]
    assert mlflow_key(long_a) != mlflow_key(long_b)
    what = [m for m in run.data.metrics if m.startswith("what_-")]
    assert len(what) == 1 and run.data.metrics[what[0]] == 4.0
    # An exception inside the with-block marks the run failed (same store, a second run).
    with pytest.raises(KeyError), Tracker("p", "e2", backends=("mlflow",), log_dir=tmp_path) as tr2:
        raise KeyError("boom")
    assert client.get_run(tr2.backends["mlflow"].run_id).info.status == "FAILED"
    # resume=True continues the same MLflow run; the default takes a new run name
    with Tracker("p", "e", backends=("mlflow",), config=CONFIG, log_dir=tmp_path, resume=True) as tr3:
        tr3.log({"critic/score/mean": 7.0}, step=10)
    assert tr3.backends["mlflow"].run_id == backend.run_id
    hist = client.get_metric_history(backend.run_id, mlflow_key("critic/score/mean"))
    assert sorted(m.step for m in hist)[-2:] == [9, 10]
    assert client.get_run(backend.run_id).info.status == "FINISHED"
    with pytest.warns(RuntimeWarning, match="exists: this run is 'e-2'"):
        tr4 = Tracker("p", "e", backends=("mlflow",), log_dir=tmp_path)
    tr4.finish()
    assert tr4.backends["mlflow"].run_id != backend.run_id
    assert client.get_run(tr4.backends["mlflow"].run_id).info.run_name == "e-2"
    # a name MLflow still refuses (here forced through a broken mapping) drops that key alone
    import rlmetrics.tracking.mlflow as tracking_mlflow

    real = tracking_mlflow.mlflow_key
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tracking_mlflow, "mlflow_key", lambda key: "bad//name" if key == "bad" else real(key))
        with Tracker("p", "e3", backends=("mlflow",), log_dir=tmp_path) as tr5:
            with pytest.warns(
                RuntimeWarning, match=r"'mlflow', step 0: key 'bad' dropped: MLflow refuses it"
            ):
                tr5.log({"good": 1.0, "bad": 2.0, "also/good": 3.0}, step=0)
    assert client.get_run(tr5.backends["mlflow"].run_id).data.metrics == {"good": 1.0, "also/good": 3.0}


# --- trackio (its local SQLite store, read back by trackio's own reader) -----------------------

TRACKIO_SCRIPT = """
import json, math, sys
from rlmetrics.tracking import Tracker
steps = {int(k): v for k, v in json.loads(sys.argv[1]).items()}
config = json.loads(sys.argv[2])
opts = {"auto_log_cpu": False, "auto_log_gpu": False}
with Tracker("p", "e", backends=("trackio", "jsonl"), config=config, log_dir=sys.argv[3],
             trackio_kwargs=opts) as tr:
    for step, metrics in steps.items():
        tr.log(metrics, step=step)
    tr.log({"nan": math.nan, "inf": -math.inf}, step=6)
from trackio import context_vars
from trackio.sqlite_storage import SQLiteStorage
assert context_vars.current_run.get() is None  # finished and no longer trackio's current run
print(json.dumps({"logs": SQLiteStorage.get_logs("p", "e"), "config": SQLiteStorage.get_run_config("p", "e"),
                  "runs": SQLiteStorage.get_runs("p")}, default=str))
"""


def test_trackio_round_trip_through_its_sqlite_reader(tmp_path):
    """A real trackio run in a fresh process (trackio reads ``TRACKIO_DIR`` when imported)."""
    pytest.importorskip("trackio")
    import os
    import subprocess

    env = {**os.environ, "TRACKIO_DIR": str(tmp_path / "trackio"), "TRACKIO_STORAGE_MODE": "sqlite"}
    env.pop("TRACKIO_SPACE_ID", None)
    env.pop("TRACKIO_SERVER_URL", None)
    out = subprocess.run(
        [sys.executable, "-c", TRACKIO_SCRIPT, json.dumps(STEPS), json.dumps(CONFIG), str(tmp_path / "logs")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert data["runs"] == ["e"]
    logs = {row.pop("step"): row for row in data["logs"]}
    for row in logs.values():
        row.pop("timestamp")
    nan_row = logs.pop(6)
    assert logs == STEPS
    assert math.isnan(nan_row["nan"]) and nan_row["inf"] == -math.inf
    assert {k: v for k, v in data["config"].items() if not k.startswith("_")} == CONFIG
    assert (tmp_path / "trackio" / "p.db").is_file()
    assert [r["step"] for r in read_jsonl(tmp_path / "logs" / "p" / "e" / "metrics.jsonl")] == [1, 2, 5, 6]


def test_trackio_failure_is_isolated(tmp_path, monkeypatch):
    """A trackio run that raises while logging is switched off like any backend; jsonl goes on."""
    import types

    class FlakyRun:
        def __init__(self):
            self.logged, self.finished = [], 0

        def log(self, metrics, step=None):
            if step == 2:
                raise OSError(28, "No space left on device")
            self.logged.append((step, metrics))

        def finish(self):
            self.finished += 1

    runs: list[FlakyRun] = []
    inits: list[dict] = []

    def init(**kwargs):
        inits.append(kwargs)
        runs.append(FlakyRun())
        return runs[-1]

    fake = types.ModuleType("trackio")
    fake.__dict__["init"] = init
    monkeypatch.setitem(sys.modules, "trackio", fake)
    tr = Tracker(
        "p", "e", backends="trackio,jsonl", config=CONFIG, log_dir=tmp_path, trackio_kwargs={"group": "g"}
    )
    assert inits == [{"project": "p", "name": "e", "config": CONFIG, "group": "g"}]
    with pytest.warns(
        RuntimeWarning, match=r"'trackio' lost the record of step 2; it keeps logging.*No space"
    ):
        log_all(tr)
    tr.finish()
    (run,) = runs
    assert run.logged == [(1, STEPS[1]), (5, STEPS[5])] and run.finished == 1
    assert isinstance(tr.failed["trackio"], OSError) and tr.lost == {"trackio": 1}
    assert [r["step"] for r in read_jsonl(tr.jsonl_path)] == [1, 2, 5]


def test_resume_continues_the_wandb_and_trackio_runs(tmp_path, monkeypatch):
    """W&B: the run id kept in the run directory; trackio: resume='allow' (its runs are named)."""
    import types

    inits: dict[str, list[dict]] = {"wandb": [], "trackio": []}

    class FakeRun:
        def __init__(self, kwargs):
            self.id = kwargs.get("id", f"id{len(inits['wandb'])}")

        def log(self, metrics, step=None):
            pass

        def finish(self, exit_code=0):
            pass

    for module in ("wandb", "trackio"):
        fake = types.ModuleType(module)

        def init(_module=module, **kwargs):
            inits[_module].append(kwargs)
            return FakeRun(kwargs)

        fake.__dict__["init"] = init
        monkeypatch.setitem(sys.modules, module, fake)
    with Tracker("p", "e", backends="wandb,trackio", log_dir=tmp_path) as tr:
        tr.log({"a": 1.0}, step=0)
    assert (tr.run_dir / "wandb-run-id").read_text() == "id1\n"
    with Tracker("p", "e", backends="wandb,trackio", log_dir=tmp_path, resume=True) as again:
        again.log({"a": 2.0}, step=1)
    assert "id" not in inits["wandb"][0] and "resume" not in inits["trackio"][0]
    assert inits["wandb"][1]["id"] == "id1" and inits["wandb"][1]["resume"] == "allow"
    assert inits["trackio"][1]["resume"] == "allow" and inits["trackio"][1]["name"] == "e"
    with pytest.warns(RuntimeWarning, match="this run is 'e-2'"):
        Tracker("p", "e", backends="wandb,trackio", log_dir=tmp_path).finish()
    assert inits["wandb"][2]["name"] == inits["trackio"][2]["name"] == "e-2" and "id" not in inits["wandb"][2]


def test_check_backends_names_every_missing_package(monkeypatch):
    import importlib.util

    from rlmetrics.tracking import check_backends

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in ("wandb", "mlflow") else real(name, *a)
    )
    check_backends(["jsonl", "console", "tensorboard"])
    with pytest.raises(
        ImportError, match=r"the wandb backend needs wandb: pip install 'rlmetrics\[wandb\]'; the mlflow"
    ):
        check_backends(["jsonl", "wandb", "mlflow"])

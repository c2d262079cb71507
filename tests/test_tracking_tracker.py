"""Tests of rlmetrics.tracking.tracker: the Tracker's fan-out, record-level failures, policies, resume,
the health monitor and the old keywords.
"""

from __future__ import annotations

import io
import json
import math
import re
import sys
import types
import warnings

import numpy as np
import pytest

from rlmetrics.tracking import ConsoleBackend, JsonlBackend, Tracker, read_jsonl
from tracking_doubles import Mine, Recorder, log_all


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
    # attributed to the caller of log(): log_all, in the shared test doubles' file
    assert all(w.filename == log_all.__code__.co_filename for w in caught)
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
    # attributed to the caller of log(): log_all, in the shared test doubles' file
    assert all(w.filename == log_all.__code__.co_filename for w in caught)
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


# --- the tracker's old keywords ----------------------------------------------------------------


def test_the_old_keywords_configure_the_named_backends(tmp_path, fake_wandb):
    out = io.StringIO()
    with pytest.warns(DeprecationWarning) as caught:
        tr = Tracker(
            "p",
            "e",
            backends="jsonl,console,wandb",
            log_dir=tmp_path,
            fsync=True,
            console_keys=("x",),
            console_file=out,
            wandb_mode="disabled",
            wandb_kwargs={"entity": "me"},
        )
    said = sorted(re.match(r"Tracker\((\w+)=", str(w.message)).group(1) for w in caught)  # type: ignore[union-attr]
    assert said == ["console_file", "console_keys", "fsync", "wandb_kwargs", "wandb_mode"]  # one a keyword
    tr.log({"x": 1.0, "y": 2.0}, step=0)
    tr.finish(exit_code=2)
    jsonl, console = tr.backends["jsonl"], tr.backends["console"]
    assert isinstance(jsonl, JsonlBackend) and jsonl.fsync is True
    assert (
        isinstance(console, ConsoleBackend)
        and console.patterns == ("x",)
        and "step 0 | x 1" in out.getvalue()
    )
    (init,) = fake_wandb
    assert init["mode"] == "disabled" and init["entity"] == "me" and init["exit_code"] == 2


@pytest.mark.parametrize(
    ("keyword", "value", "spelling"),
    [
        ("fsync", True, "JsonlBackend(fsync=...)"),
        ("console_keys", ("x",), "ConsoleBackend(keys=...)"),
        ("console_file", io.StringIO(), "ConsoleBackend(file=...)"),
        ("wandb_mode", "disabled", "WandbBackend(mode=...)"),
        ("wandb_kwargs", {"entity": "me"}, "WandbBackend(init_kwargs=...)"),
        ("mlflow_tracking_uri", None, "MlflowBackend(tracking_uri=...)"),
        ("trackio_kwargs", None, "TrackioBackend(init_kwargs=...)"),
    ],
)
def test_each_old_keyword_warns_with_the_new_spelling_and_still_works(tmp_path, keyword, value, spelling):
    backend = {"fsync": "jsonl", "console_keys": "console", "console_file": "console"}.get(keyword)
    names = ["jsonl"] if backend in (None, "jsonl") else ["jsonl", backend]
    if keyword.startswith("wandb"):
        names = ["jsonl"]  # configuring a backend that is not asked for is a no-op, as before
    match = rf"Tracker\({keyword}=\.\.\.\) is deprecated .*backends=\[{re.escape(spelling)}\]"
    with pytest.warns(DeprecationWarning, match=match) as caught:
        tr = Tracker("p", "e", backends=names, log_dir=tmp_path, **{keyword: value})
    assert caught[0].filename == __file__  # it points at the caller's line
    tr.log({"x": 1.0}, step=0)
    tr.finish()
    assert [r["x"] for r in read_jsonl(tr.jsonl_path)] == [1.0]
    if keyword == "fsync":
        assert tr.backends["jsonl"].fsync is True
    if keyword == "console_keys":
        assert tr.backends["console"].patterns == ("x",)


def test_an_unknown_keyword_is_a_type_error(tmp_path):
    with pytest.raises(TypeError, match="Tracker\\(\\) got an unexpected keyword argument 'wandb_mod'"):
        Tracker("p", "e", log_dir=tmp_path, wandb_mod="offline")
    with (
        pytest.raises(ValueError, match=r"mode must be one of"),
        pytest.warns(DeprecationWarning, match=r"Tracker\(wandb_mode=\.\.\.\) is deprecated"),
    ):
        Tracker("p", "e", backends="wandb", log_dir=tmp_path, wandb_mode="offfline")
    assert not (tmp_path / "p").exists()


# --- keeps_records: the caller's dict goes uncopied only to backends that declare they keep nothing --


class Reader(Mine):
    """A backend that declares it only reads its record during log()."""

    name = "reader"
    keeps_records = False


class Monitor:
    def update(self, values, step):
        return []


@pytest.mark.parametrize(
    ("make", "monitor", "borrowed"),
    [
        (lambda: [Reader(), Reader()], None, [True, True]),
        (lambda: [Reader(), Mine()], None, [False, False]),
        (lambda: [Mine(), Reader()], None, [False, False]),
        (lambda: [Reader()], Monitor(), [False]),
    ],
    ids=["only-readers", "reader-then-keeper", "keeper-then-reader", "reader-with-monitor"],
)
def test_the_callers_dict_reaches_backends_uncopied_only_when_none_keeps_it(
    tmp_path, make, monitor, borrowed
):
    backends = make()
    metrics = {"x": 1.0, "y": 2.0}
    with Tracker("p", "e", backends=backends, log_dir=tmp_path, monitor=monitor) as tr:
        tr.log(metrics, step=0)
    assert [b.rows[0][1] is metrics for b in backends] == borrowed
    assert all(b.rows == [(0, {"x": 1.0, "y": 2.0})] for b in backends)
    keepers = [b.rows[0][1] for b in backends if not isinstance(b, Reader)]
    metrics["x"] = 9.0  # what a keeper holds is its own
    assert all(row["x"] == 1.0 for row in keepers)


@pytest.mark.parametrize(
    "metrics",
    [{"x": 1}, {"x": np.float64(1.0)}, types.MappingProxyType({"x": 1.0})],
    ids=["int", "numpy", "mapping"],
)
def test_a_step_that_needs_converting_is_a_new_dict_even_for_readers(tmp_path, metrics):
    reader = Reader()
    with Tracker("p", "e", backends=[reader], log_dir=tmp_path) as tr:
        tr.log(metrics, step=0)
    (row,) = [r for _, r in reader.rows]
    assert row is not metrics and row == {"x": 1.0} and type(row["x"]) is float

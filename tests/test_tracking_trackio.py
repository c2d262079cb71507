"""Tests of rlmetrics.tracking.trackio: its local SQLite store read back by trackio's own reader."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from rlmetrics.tracking import Tracker, TrackioBackend, read_jsonl
from tracking_doubles import CONFIG, STEPS, log_all

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
    backends = [TrackioBackend(init_kwargs={"group": "g"}), "jsonl"]
    tr = Tracker("p", "e", backends=backends, config=CONFIG, log_dir=tmp_path)
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

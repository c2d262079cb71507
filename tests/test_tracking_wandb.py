"""Tests of rlmetrics.tracking.wandb: offline runs read back by wandb's own reader."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import types
from collections import Counter
from pathlib import Path

import pytest

from rlmetrics.tracking import Tracker, WandbBackend
from tracking_doubles import CONFIG, STEPS, log_all

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
    with Tracker("p", "e", backends=[WandbBackend(mode="offline")], config=CONFIG, log_dir=tmp_path) as tr:
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


def test_resume_continues_the_wandb_and_trackio_runs(tmp_path, monkeypatch):
    """W&B: the run id kept in the run directory; trackio: resume='allow' (its runs are named)."""

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


def test_a_configured_wandb_backend_beside_a_name(tmp_path, fake_wandb):
    backend = WandbBackend(project="elsewhere", mode="offline", init_kwargs={"tags": ["grpo"]})
    with Tracker("p", "e", backends=["jsonl", backend], config={"lr": 0.1}, log_dir=tmp_path) as tr:
        tr.log({"x": 1.0}, step=0)
    assert list(tr.backends) == ["jsonl", "wandb"] and tr.backends["wandb"] is backend
    (init,) = fake_wandb
    assert init == {
        "project": "elsewhere",
        "name": "e",
        "dir": str(tr.run_dir),
        "config": {"lr": 0.1},
        "mode": "offline",
        "tags": ["grpo"],
        "exit_code": 0,
    }

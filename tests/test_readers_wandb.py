"""W&B offline runs through the run reader (:mod:`rlmetrics.readers.wandb`): wandb's own reader is
stood in for by a script printing its JSON records, so clean, cut-off and failing runs are all
written here (a real offline run is read in tests/test_sources.py)."""

from __future__ import annotations

import json
import sys

import pytest

from rlmetrics.errors import RunReadError, RunReadWarning
from rlmetrics.readers import WANDB_OFFLINE, read_run
from rlmetrics.readers import wandb as W

RECORDS = [
    {"num": 1, "type": "header", "header": {}},
    {"num": 2, "type": "history", "history": {"item": {"_step": 1, "actor/entropy": 0.5, "loss": "NaN"}}},
    {"num": 3, "type": "history", "history": {"item": {"_step": 2, "actor/entropy": 0.4, "loss": 1.0}}},
]


def _fake_reader(monkeypatch, records, *, stderr="", code=0):
    script = (
        f"import sys; sys.stdout.write({''.join(json.dumps(r) + chr(10) for r in records)!r}); "
        f"sys.stderr.write({stderr!r}); sys.exit({code})"
    )
    monkeypatch.setattr(W, "_wandb_command", lambda p: [sys.executable, "-c", script])


@pytest.fixture
def run_file(tmp_path):
    folder = tmp_path / "wandb" / "offline-run-20250101_000000-abc"
    folder.mkdir(parents=True)
    path = folder / "run-abc.wandb"
    path.write_bytes(b":W&B")
    return path


@pytest.mark.parametrize("where", ["file", "run-folder", "wandb-folder", "its-parent"])
def test_history_records_are_read(monkeypatch, run_file, where):
    _fake_reader(monkeypatch, RECORDS)
    source = {
        "file": run_file,
        "run-folder": run_file.parent,
        "wandb-folder": run_file.parent.parent,
        "its-parent": run_file.parent.parent.parent,
    }[where]
    run = read_run(source)
    assert (run.format, run.n_steps, run.path) == (
        WANDB_OFFLINE,
        2,
        run_file.resolve() if where != "file" else run_file,
    )
    assert run.series["actor/entropy"][1].tolist() == [0.5, 0.4]


def test_a_cut_off_run_file_is_read_with_a_warning(monkeypatch, run_file):
    _fake_reader(monkeypatch, RECORDS, stderr="warning: incomplete record at the end\n")
    with pytest.warns(RunReadWarning, match=r"2 steps read; the file ends in an incomplete record"):
        run = read_run(run_file)
    assert run.n_steps == 2


@pytest.mark.parametrize(
    ("records", "stderr", "code", "match"),
    [
        (RECORDS[:1], "incomplete record\n", 0, "ends in an incomplete record before any history record"),
        (
            [],
            "Error: invalid W&B identifier\n",
            1,
            "wandb could not read the run file: invalid W&B identifier",
        ),
        (
            [],
            "Error: No such command 'leet'.\n",
            2,
            r"has no `wandb leet inspect`: pip install -U 'wandb>=0\.31'",
        ),
        (RECORDS[:1], "", 0, r"\(wandb-offline\): no numeric metric"),
    ],
    ids=["cut-before-history", "not-a-run-file", "old-wandb", "no-history"],
)
def test_unreadable_runs_are_errors(monkeypatch, run_file, records, stderr, code, match):
    _fake_reader(monkeypatch, records, stderr=stderr, code=code)
    with pytest.raises(RunReadError, match=match):
        read_run(run_file)

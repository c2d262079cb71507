"""CSV exports through the run reader (:mod:`rlmetrics.readers.csvlogs`): W&B, TensorBoard and MLflow
layouts, clean and damaged; a damaged row costs that row, with a warning naming its line."""

from __future__ import annotations

import warnings

import pytest

from rlmetrics.errors import RunReadWarning
from rlmetrics.readers import CSV_EXPORT, read_run
from rlmetrics.readers.csvlogs import csv_export_records

CLEAN = [
    ("wandb-panel", "run-1.csv", "Step,run-1 - reward,run-1 - reward__MIN\n1,0.1,0.0\n2,0.2,0.1\n"),
    ("tensorboard-scalar", "run-exp-tag-reward.csv", "Wall time,Step,Value\n1.7e9,1,0.1\n1.7e9,2,0.2\n"),
    ("mlflow-long", "history.csv", "key,value,step,timestamp\nreward,0.1,1,0\nreward,0.2,2,0\n"),
    ("pandas-to-csv", "h.csv", ",step,reward\n0,1,0.1\n1,2,0.2\n"),
]


@pytest.mark.parametrize(("name", "text"), [c[1:] for c in CLEAN], ids=[c[0] for c in CLEAN])
def test_clean_exports(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = read_run(path)
    assert (run.format, run.n_steps) == (CSV_EXPORT, 2)
    assert run.series["reward"][1].tolist() == [0.1, 0.2]


DAMAGED = [
    ("step-not-a-number", "step,reward\n1,0.1\nx,0.5\n3,0.3\n", [1, 3], [3]),
    ("step-not-whole", "step,reward\n1,0.1\n2.5,0.5\n3,0.3\n", [1, 3], [3]),
    ("long-row-cut", "key,value,step\nreward,0.1,1\nreward\nreward,0.3,3\n", [1, 3], [3]),
]


@pytest.mark.parametrize(("text", "steps", "lines"), [d[1:] for d in DAMAGED], ids=[d[0] for d in DAMAGED])
def test_a_damaged_row_costs_that_row(tmp_path, text, steps, lines):
    path = tmp_path / "h.csv"
    path.write_text(text)
    with pytest.warns(
        RunReadWarning, match=rf"h\.csv: 1 damaged CSV record skipped \(2 read\), at line {lines[0]}:"
    ):
        run = read_run(path)
    assert run.steps.tolist() == steps
    assert csv_export_records(text)[1] == lines

"""TensorBoard event files through the run reader (:mod:`rlmetrics.readers.tensorboard`): every scalar
of one log directory, a restarted run's files together, damaged files and a missing package."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from rlmetrics.errors import RunReadError
from rlmetrics.readers import TENSORBOARD, read_run


def _write(run_dir, steps, *, key="actor/entropy"):
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    pytest.importorskip("tensorboard")
    with torch_tb.SummaryWriter(str(run_dir)) as writer:
        for step in steps:
            writer.add_scalar(key, math.nan if step == 3 else 1.0 / step, step)
    return run_dir


def test_every_scalar_of_the_directory(tmp_path):
    _write(tmp_path / "run", range(1, 12_001))  # past TensorBoard's default 10,000 per tag
    run = read_run(tmp_path / "run")
    assert (run.format, run.n_steps) == (TENSORBOARD, 12_000)
    steps, values = run.series["actor/entropy"]
    assert steps[[0, -1]].tolist() == [1, 12_000] and np.isnan(values[2])


def test_an_event_file_and_its_parent_folder(tmp_path):
    run_dir = _write(tmp_path / "logs" / "exp", [1, 2])
    (event,) = run_dir.glob("events.out.tfevents.*")
    assert read_run(event).n_steps == 2
    assert read_run(tmp_path / "logs").path == run_dir


def test_several_runs_below_a_folder_is_an_error_listing_them(tmp_path):
    _write(tmp_path / "a", [1])
    _write(tmp_path / "b", [1])
    with pytest.raises(RunReadError, match=r"holds 2 TensorBoard runs .*'a', 'b'; pass one of them"):
        read_run(tmp_path)


def test_a_cut_off_event_file_keeps_its_whole_events(tmp_path):
    run_dir = _write(tmp_path / "run", [1, 2, 4])
    (event,) = run_dir.glob("events.out.tfevents.*")
    data = event.read_bytes()
    event.write_bytes(data[:-5])  # the last event torn (a run killed while writing)
    assert read_run(event).series["actor/entropy"][0].tolist() == [1, 2]
    event.write_bytes(b"\x00" * 7)  # nothing whole: TensorBoard's reader skips it
    with pytest.raises(RunReadError, match=r"tfevents\.[^ ]* \(tensorboard\): no numeric metric"):
        read_run(event)


def test_without_tensorboard_the_error_names_the_install(tmp_path, monkeypatch):
    path = tmp_path / "events.out.tfevents.1.host"
    path.write_bytes(b"x")
    for name in [m for m in sys.modules if m == "tensorboard" or m.startswith("tensorboard.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    with pytest.raises(ImportError, match=r"pip install 'rlmetrics\[tensorboard\]'"):
        read_run(path)

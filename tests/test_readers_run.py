"""The :class:`rlmetrics.readers.Run` that :func:`~rlmetrics.readers.read_run` returns: its properties on an
empty run, and its warnings pointing at the caller's line."""

from __future__ import annotations

import numpy as np
import pytest

from rlmetrics.errors import RunReadWarning
from rlmetrics.readers import read_run


def test_run_properties_of_an_empty_run(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"step": 1, "note": "x"}\n')
    run = read_run(path, allow_empty=True)
    assert run.series == {} and run.n_steps == 0 and run.steps.dtype == np.int64


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

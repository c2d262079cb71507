"""Tests of rlmetrics.tracking.console."""

from __future__ import annotations

import io

from rlmetrics.tracking import ConsoleBackend, Tracker

# --- console -----------------------------------------------------------------------------------


def test_console_is_compact(tmp_path):
    buf = io.StringIO()
    metrics = {f"actor/extra_{i}": float(i) for i in range(80)}
    metrics.update({"critic/score/mean": 0.123456, "timing_s/step": 12.0, "val-core/a/acc": 0.5})
    with Tracker("proj", "exp", backends=[ConsoleBackend(file=buf)], log_dir=tmp_path) as tr:
        tr.log(metrics, step=7)
        tr.log({"z": 1.0, "y": 2.5}, step=8)
    lines = buf.getvalue().splitlines()
    assert lines[0] == "proj / exp"
    # The default keys, in DEFAULT_CONSOLE_KEYS order, 4 significant digits, and a count of the rest.
    assert lines[1] == "step 7 | critic/score/mean 0.1235 | val-core/a/acc 0.5 | timing_s/step 12 (+80 more)"
    assert lines[2] == "step 8 | z 1 | y 2.5"  # nothing matches the defaults: the first keys
    buf2 = io.StringIO()
    console = ConsoleBackend(file=buf2, keys=["actor/extra_1?"])
    with Tracker("p", "e", backends=[console], log_dir=tmp_path) as tr:
        tr.log(metrics, step=1)
    assert buf2.getvalue().splitlines()[1].count("actor/extra_1") == 10


def test_the_console_backend_prints_the_run_and_its_keys(tmp_path):
    out = io.StringIO()
    with Tracker("proj", "exp", backends=[ConsoleBackend(keys=["b*"], file=out)], log_dir=tmp_path) as tr:
        tr.log({"a": 1.0, "b": 2.5}, step=4)
    assert out.getvalue().splitlines() == ["proj / exp", "step 4 | b 2.5 (+1 more)"]

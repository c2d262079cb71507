"""``rlmetrics watch`` through typer's CliRunner, against runs another process writes while it runs:
new findings shown, --exit-on's exit status, --idle, --once, the webhook, bad options."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from typer.testing import CliRunner

from rlmetrics import keys as K
from rlmetrics.cli.app import app
from rlmetrics.cli.watch import EXIT_FINDING

runner = CliRunner()

WRITER = textwrap.dedent(
    """
    import json, sys, time
    path, fmt = sys.argv[1], sys.argv[2]
    n, nan_at, pause = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    with open(path, "a", buffering=1) as fh:
        for step in range(1, n + 1):
            loss = float("nan") if step == nan_at else 0.1
            if fmt == "verl-console":
                fh.write(f"(TaskRunner pid=7) step:{step} - actor/pg_loss:{loss} - actor/entropy:0.5\\n")
            else:
                fh.write(json.dumps({"step": step, "actor/pg_loss": loss, "actor/entropy": 0.5}) + "\\n")
            time.sleep(pause)
    """
)


@pytest.fixture
def writer(tmp_path):
    """Start a process appending ``n`` steps to ``path``, one every ``pause`` s, a NaN loss at ``nan_at``."""
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    procs = []

    def start(path, *, n=10, nan_at=0, pause=0.2, fmt="jsonl"):
        procs.append(
            subprocess.Popen([sys.executable, str(script), str(path), fmt, str(n), str(nan_at), str(pause)])
        )
        return procs[-1]

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def rows(path, steps, nan_at=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for s in steps:
            loss = float("nan") if s == nan_at else 0.1
            fh.write(
                json.dumps({"step": s, K.ACTOR_PG_LOSS: loss, K.ACTOR_ENTROPY: 0.5, K.SCORE_MEAN: 0.25})
                + "\n"
            )
    return path


@pytest.mark.parametrize("fmt", ["jsonl", "verl-console"], ids=["metrics-jsonl", "verl-console-log"])
def test_a_finding_planted_while_watching_exits_with_the_documented_status(tmp_path, writer, fmt):
    path = tmp_path / ("exp1" if fmt == "jsonl" else "nohup.out")
    if fmt == "jsonl":
        path.mkdir()
        path = path / "metrics.jsonl"
    proc = writer(path, n=14, nan_at=10, pause=0.2, fmt=fmt)  # the NaN ~2 s in
    start = time.monotonic()
    res = runner.invoke(app, ["watch", str(path), "--interval", "0.1", "--exit-on", "error", "--idle", "8"])
    elapsed = time.monotonic() - start
    assert res.exit_code == EXIT_FINDING == 3, res.output
    assert proc.poll() is None or elapsed > 2.5  # it ran while the run was being written
    assert "nonfinite (error) from step 10" in res.output
    assert 1.5 < elapsed < 30.0  # the status says it was the finding, not --idle, that ended it


def test_idle_ends_the_watch_with_status_zero(tmp_path, writer):
    path = tmp_path / "metrics.jsonl"
    proc = writer(path, n=5, pause=0.1)
    start = time.monotonic()
    res = runner.invoke(app, ["watch", str(path), "--interval", "0.1", "--idle", "1", "--exit-on", "error"])
    assert res.exit_code == 0, res.output
    assert proc.wait(timeout=5) == 0
    assert 1.0 < time.monotonic() - start < 15.0  # ended by --idle 1, not by a later event
    assert ": idle at step 5" in res.output
    assert "│ idle   │    5 │" in res.output  # the table at the end


def test_a_run_not_there_yet_is_waited_for(tmp_path, writer):
    path = tmp_path / "later" / "metrics.jsonl"

    def create():
        time.sleep(0.5)
        path.parent.mkdir()
        writer(path, n=4, nan_at=3, pause=0.05)

    threading.Thread(target=create).start()
    res = runner.invoke(
        app, ["watch", str(path.parent), "--interval", "0.1", "--exit-on", "warning", "--idle", "5"]
    )
    assert res.exit_code == EXIT_FINDING, res.output
    assert "later: nonfinite (error) from step 3" in res.output


def test_warning_findings_do_not_trigger_exit_on_error(tmp_path, monkeypatch):
    import rlmetrics.health.rules as rules
    from rlmetrics.health.findings import Diagnosis, Finding

    monkeypatch.setattr(
        rules, "diagnose", lambda h, **kw: Diagnosis((Finding("grad_spike", "warning", 2, ("g",)),))
    )
    path = rows(tmp_path / "metrics.jsonl", range(1, 5))
    res = runner.invoke(app, ["watch", str(path), "--once", "--exit-on", "error"])
    assert res.exit_code == 0, res.output
    assert "grad_spike (warning) from step 2" in res.output
    res = runner.invoke(app, ["watch", str(path), "--once", "--exit-on", "warning"])
    assert res.exit_code == EXIT_FINDING, res.output


@pytest.mark.parametrize(
    ("make", "args", "code", "shown"),
    [
        (lambda d: rows(d / "a" / "metrics.jsonl", range(1, 6)), [], 0, "none"),
        (
            lambda d: rows(d / "a" / "metrics.jsonl", range(1, 6), nan_at=4),
            ["--exit-on", "error"],
            3,
            "nonfinite",
        ),
        (lambda d: rows(d / "a" / "metrics.jsonl", range(1, 6), nan_at=4), [], 0, "1 error"),
        (lambda d: d / "missing", [], 2, "no such file or directory"),
    ],
    ids=["healthy", "error-exit-on", "error-no-gate", "missing"],
)
def test_once(tmp_path, make, args, code, shown):
    path = make(tmp_path)
    res = runner.invoke(app, ["watch", str(path), "--once", *args])
    assert res.exit_code == code, res.output
    assert shown in res.output


def test_a_sweep_in_one_table(tmp_path):
    paths = [
        rows(tmp_path / f"seed{i}" / "metrics.jsonl", range(1, 4 + i), nan_at=3 if i == 1 else None)
        for i in range(3)
    ]
    res = runner.invoke(app, ["watch", *map(str, paths), "--once"])
    assert res.exit_code == 0, res.output
    for i in range(3):
        assert f"seed{i}" in res.output
    assert "3 run(s)" in res.output
    assert "seed1: nonfinite (error) from step 3" in res.output


class Hook:
    def __init__(self, statuses=()):
        self.statuses, self.bodies = list(statuses), []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                hook.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(hook.statuses.pop(0) if hook.statuses else 200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_webhook_gets_each_new_finding_once_with_a_retry(tmp_path, writer):
    hook = Hook([500])
    path = tmp_path / "exp1" / "metrics.jsonl"
    path.parent.mkdir()
    writer(path, n=12, nan_at=4, pause=0.1)
    try:
        res = runner.invoke(
            app, ["watch", str(path), "--interval", "0.1", "--idle", "1", "--webhook", hook.url]
        )
    finally:
        hook.close()
    assert res.exit_code == 0, res.output
    assert len(hook.bodies) == 2  # the 500, then the retry: one finding, posted once
    body = hook.bodies[-1]
    assert body["rlmetrics"]["kind"] == "nonfinite" and body["rlmetrics"]["run"] == "exp1"
    assert "nonfinite (error) from step 4" in body["text"] == body["content"]


def test_a_dead_webhook_does_not_stop_the_watch(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/hook"
    path = rows(tmp_path / "metrics.jsonl", range(1, 6), nan_at=2)
    start = time.monotonic()
    res = runner.invoke(app, ["watch", str(path), "--once", "--exit-on", "error", "--webhook", dead])
    assert res.exit_code == EXIT_FINDING, res.output
    assert "gave up a delivery" in res.output
    assert time.monotonic() - start < 20.0  # 4 tries, 0.5 s then 1 s and 2 s apart: it gave up


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--exit-on", "fatal"], "--exit-on expects error or warning; got 'fatal'"),
        (["--webhook", "hooks.slack.com/x"], "--webhook expects an http:// or https:// URL"),
        (["--threshold", "nokind.x=1"], "unknown kind 'nokind'"),
        (["--signal", "reward"], "--signal expects signal=key"),
    ],
    ids=["exit-on", "webhook", "threshold", "signal"],
)
def test_bad_options_are_usage_errors(tmp_path, args, match):
    path = rows(tmp_path / "metrics.jsonl", range(1, 3))
    res = runner.invoke(app, ["watch", str(path), "--once", *args])
    assert res.exit_code == 2
    assert match in res.output


def test_help_documents_the_exit_status():
    res = runner.invoke(app, ["watch", "--help"])
    assert res.exit_code == 0
    assert "3 a finding" in res.output and "--exit-on" in res.output and "--idle" in res.output


def test_a_run_that_cannot_be_read_ends_the_follow_with_status_2(tmp_path):
    dump = tmp_path / "0.jsonl"
    dump.write_text(json.dumps({"input": "q", "output": "a", "score": 1.0, "step": 0}) + "\n")
    res = runner.invoke(app, ["watch", str(dump), "--interval", "0.1"])
    assert res.exit_code == 2, res.output
    assert "failed" in res.output and "rollout dump" in res.output


def test_on_a_terminal_the_table_is_live(tmp_path, monkeypatch):
    import functools

    import rlmetrics.cli.watch as watch_cli

    monkeypatch.setattr(
        watch_cli, "Console", functools.partial(watch_cli.Console, force_terminal=True, width=100)
    )
    path = rows(tmp_path / "exp1" / "metrics.jsonl", range(1, 6), nan_at=5)
    res = runner.invoke(app, ["watch", str(path), "--interval", "0.1", "--idle", "0.3"])
    assert res.exit_code == 0, res.output
    assert "\x1b[" in res.output  # drawn in place (cursor moves, colours)
    assert "nonfinite" in res.output and "exp1" in res.output

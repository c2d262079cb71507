"""rlmetrics.cli.report: the ``rlmetrics report`` command (outputs, names, errors)."""

from __future__ import annotations

import builtins
import json

import pytest
from typer.testing import CliRunner

from rlmetrics.cli.app import app

runner = CliRunner()


def _run(path, steps=4):
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [
        {"step": s, "critic/score/mean": s / steps, "actor/pg_loss": 1.0 / s} for s in range(1, steps + 1)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_two_named_runs(tmp_path):
    pytest.importorskip("matplotlib")
    a, b = _run(tmp_path / "a" / "metrics.jsonl"), _run(tmp_path / "b" / "metrics.jsonl", steps=3)
    out = tmp_path / "rep"
    result = runner.invoke(app, ["report", str(a), str(b), "-o", str(out), "-n", "A", "-n", "B"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "run A: 2 metrics, steps 1-4" in lines and "run B: 2 metrics, steps 1-3" in lines
    assert f"2 figures in {out}" in lines and f"report: {out / 'report.html'}" in lines
    assert sorted(p.name for p in out.iterdir()) == ["actor.png", "critic.png", "report.html"]


def test_default_output_folder_is_next_to_the_first_run(tmp_path):
    pytest.importorskip("matplotlib")
    a = _run(tmp_path / "a" / "metrics.jsonl")
    result = runner.invoke(app, ["report", str(a)])
    assert result.exit_code == 0, result.output
    assert (a.parent / "report" / "report.html").is_file()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["missing.jsonl"], 2, "no such file: "),
        (["a.jsonl", "-n", "x", "-n", "y"], 1, "names: expected 1 names (one per run); got 2"),
    ],
    ids=["missing-file", "too-many-names"],
)
def test_errors(tmp_path, monkeypatch, args, code, message):
    monkeypatch.chdir(tmp_path)
    _run(tmp_path / "a.jsonl")
    result = runner.invoke(app, ["report", *args])
    assert result.exit_code == code
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_without_matplotlib_it_gives_the_pip_line(tmp_path, monkeypatch):
    run = _run(tmp_path / "metrics.jsonl")
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    result = runner.invoke(app, ["report", str(run), "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "pip install 'rlmetrics[plot]'" in result.output
    assert "Traceback" not in result.output

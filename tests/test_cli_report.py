"""rlmetrics.cli.report: the ``rlmetrics report`` command (outputs, names, --png, errors)."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlmetrics.cli.app import app

runner = CliRunner()


def _run(path, steps=4):
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "step": s,
            "timestamp": 10.0 * s,
            "critic/score/mean": s / steps,
            "actor/pg_loss": 1.0 / s,
            "actor/lr": 1e-6,
        }
        for s in range(1, steps + 1)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _lines(result):
    return [" ".join(line.split()) for line in result.output.splitlines()]


def test_two_named_runs(tmp_path):
    a, b = _run(tmp_path / "a" / "metrics.jsonl"), _run(tmp_path / "b" / "metrics.jsonl", steps=3)
    out = tmp_path / "rep"
    result = runner.invoke(app, ["report", str(a), str(b), "-o", str(out), "-n", "A", "-n", "B"])
    assert result.exit_code == 0, result.output
    lines = _lines(result)
    assert (
        "run A: 3 metrics, steps 1-4, 0 findings" in lines
        and "run B: 3 metrics, steps 1-3, 0 findings" in lines
    )
    assert any(line.startswith("2 panels, 1 constant series listed (") for line in lines)
    assert f"report: {out / 'report.html'}" in lines
    assert sorted(p.name for p in out.iterdir()) == ["report.html"]
    page = (out / "report.html").read_text()
    assert "<b>A</b>" in page and "<b>B</b>" in page


def test_a_console_log_on_standard_input_beside_a_run(tmp_path):
    """``-`` reads a log piped in (verl's console output here), kept as stdin.log with the page."""
    a = _run(tmp_path / "a" / "metrics.jsonl")
    log = "".join(
        f"(TaskRunner pid=1) step:{s} - critic/score/mean:{s / 5} - actor/pg_loss:{1 / s}\n"
        for s in range(1, 6)
    )
    out = tmp_path / "rep"
    result = runner.invoke(app, ["report", str(a), "-", "-o", str(out)], input=log)
    assert result.exit_code == 0, result.output
    lines = _lines(result)
    assert "run a: 3 metrics, steps 1-4, 0 findings" in lines
    assert "run stdin: 2 metrics, steps 1-5, 0 findings" in lines
    assert (out / "stdin.log").read_text() == log
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "stdin.log"]


def test_standard_input_into_an_unwritable_folder_is_named(tmp_path, monkeypatch):
    from rlmetrics.cli import report as cli_report

    monkeypatch.setattr(cli_report, "check_folder", lambda folder, option: None)
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = runner.invoke(app, ["report", "-", "-o", str(blocker / "rep")], input="step:1 - a/x:1\n")
    assert result.exit_code == 1
    assert "cannot keep the log read from standard input as" in " ".join(_lines(result))


def _samples(folder, steps, size):
    rows = [
        {"step": s, "prompt": f"q{s}", "response": "r" * size, "reward": 1.0, "chosen": "max"} for s in steps
    ]
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize(
    ("args", "line", "embedded"),
    [
        pytest.param([], "samples of 4 steps in the page's sample browser", True, id="default"),
        pytest.param(
            ["--max-sample-bytes", "1500"],
            "samples of 2 steps in the page's sample browser (cut to fit --max-sample-bytes)",
            True,
            id="cut",
        ),
        pytest.param(["--max-sample-bytes", "0"], None, False, id="none"),
    ],
)
def test_the_sample_browser_and_its_budget(tmp_path, args, line, embedded):
    a = _run(tmp_path / "a" / "metrics.jsonl")
    _samples(a.parent, [1, 2, 3, 4], size=1000)  # 4 x 1002 bytes; 1500 fit 2 steps at 512 bytes a response
    out = tmp_path / "rep"
    result = runner.invoke(app, ["report", str(a), "-o", str(out), *args])
    assert result.exit_code == 0, result.output
    lines = _lines(result)
    assert (line in lines) if line else not any("sample browser" in x for x in lines)
    assert ('id="rlm-samples"' in (out / "report.html").read_text()) is embedded


def test_a_negative_sample_budget_is_a_usage_error(tmp_path):
    a = _run(tmp_path / "a" / "metrics.jsonl")
    result = runner.invoke(app, ["report", str(a), "--max-sample-bytes", "-1"])
    assert result.exit_code == 2 and "--max-sample-bytes" in result.output


def test_png_and_a_run_folder(tmp_path):
    a = _run(tmp_path / "a" / "metrics.jsonl")
    out = tmp_path / "rep"
    result = runner.invoke(app, ["report", str(a.parent), "-o", str(out), "--png"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["actor.png", "key.png", "report.html"]
    assert f"2 PNG figures in {out}" in _lines(result)


@pytest.mark.parametrize("as_folder", [False, True], ids=["file", "folder"])
def test_default_output_folder_is_next_to_the_first_run(tmp_path, as_folder):
    a = _run(tmp_path / "a" / "metrics.jsonl")
    result = runner.invoke(app, ["report", str(a.parent if as_folder else a)])
    assert result.exit_code == 0, result.output
    assert (a.parent / "report" / "report.html").is_file()


def _dump(path):
    lines = [{"input": f"q{i}", "output": "x", "score": 1.0, "step": 5} for i in range(3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["missing.jsonl"], 2, "no such file or folder: missing.jsonl"),
        (["a.jsonl", "-n", "x", "-n", "y"], 1, "names: expected 1 names (one per run); got 2"),
        (["5.jsonl"], 1, "is a validation rollout dump (one line per generated sample, with input, output)"),
        (["5.jsonl"], 1, "rlmetrics validate 5.jsonl"),
        (["empty"], 1, "error: 'empty': no run in this directory"),
        (["a.jsonl", "-o", "a.jsonl"], 1, "error: --out: a.jsonl is a file, not a folder"),
        (
            ["a.jsonl", "-o", "a.jsonl/rep"],
            1,
            "error: --out: a.jsonl is not a folder, so a.jsonl/rep cannot be created",
        ),
    ],
    ids=[
        "missing-file",
        "too-many-names",
        "validation-dump",
        "validation-dump-hint",
        "folder-without-a-run",
        "out-onto-a-file",
        "out-under-a-file",
    ],
)
def test_errors(tmp_path, monkeypatch, args, code, message):
    monkeypatch.chdir(tmp_path)
    _run(tmp_path / "a.jsonl")
    _dump(tmp_path / "5.jsonl")
    (tmp_path / "empty").mkdir()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    result = runner.invoke(app, ["report", *args])
    assert result.exit_code == code
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written


def test_an_unwritable_output_folder_is_named_before_any_run_is_read(tmp_path, monkeypatch):
    from rlmetrics.cli import _files

    run = _run(tmp_path / "a" / "metrics.jsonl")
    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = _files.os.access
    monkeypatch.setattr(_files.os, "access", lambda p, mode: Path(p) != locked and real_access(p, mode))
    result = runner.invoke(app, ["report", str(run), "-o", str(locked / "rep")])
    assert result.exit_code == 1
    assert " ".join(result.output.split()) == f"error: --out: the folder {locked} is not writable"
    assert list(locked.iterdir()) == []


def test_a_write_that_fails_leaves_no_half_page(tmp_path, monkeypatch):
    run = _run(tmp_path / "a" / "metrics.jsonl")
    out = tmp_path / "rep"
    real_write = Path.write_text

    def disk_full(self, text, *args, **kwargs):
        real_write(self, text[:100], *args, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_full)
    result = runner.invoke(app, ["report", str(run), "-o", str(out)])
    assert result.exit_code == 1
    assert "No space left on device" in result.output and "Traceback" not in result.output
    assert list(out.iterdir()) == []  # neither report.html nor its temporary file


@pytest.mark.parametrize(
    ("module", "args", "message"),
    [
        ("plotly", [], "the interactive report needs plotly"),
        ("matplotlib", ["--png"], "PNG figures need matplotlib"),
    ],
    ids=["plotly", "matplotlib"],
)
def test_a_missing_package_gives_the_pip_line(tmp_path, monkeypatch, module, args, message):
    run = _run(tmp_path / "metrics.jsonl")
    real_import = builtins.__import__

    def without(name, *a, **kw):
        if name == module or name.startswith(module + "."):
            raise ImportError(f"No module named {module!r}")
        return real_import(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", without)
    result = runner.invoke(app, ["report", str(run), "-o", str(tmp_path / "out"), *args])
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    assert message in text and "pip install 'rlmetrics[plot]'" in text
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()  # nothing written before the check


def test_missing_plotly_fails_before_reading(tmp_path, monkeypatch):
    import importlib.util

    from rlmetrics.cli.app import app as cli_app

    (tmp_path / "metrics.jsonl").write_text('{"step": 0, "a": 1.0}\n')
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "plotly" else real(name, *a)
    )
    monkeypatch.setattr("rlmetrics.cli.report.write_report", None)  # reading would fail loudly
    res = CliRunner().invoke(cli_app, ["report", str(tmp_path / "metrics.jsonl")])
    assert res.exit_code == 1 and "the report needs plotly: pip install 'rlmetrics[plot]'" in res.output

"""rlmetrics.cli.app: the typer app's wiring (commands, help, errors, entry point), not the commands."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest
from typer.testing import CliRunner

from rlmetrics.cli import app as _cli_app
from rlmetrics.cli.app import app
from rlmetrics.cli.validate import validate
from rlmetrics.demo.run import demo
from rlmetrics.report import report

COMMANDS = ["validate", "demo", "report"]
runner = CliRunner()


def test_registered_commands_are_the_three_functions():
    registered = {info.name: info.callback for info in app.registered_commands}
    assert registered == {"validate": validate, "demo": demo, "report": report}


@pytest.mark.parametrize("args", [["--help"], []], ids=["help", "no-args"])
def test_top_level_help_lists_every_command(args):
    res = runner.invoke(app, args)
    # no_args_is_help prints the help; click >= 8.2 exits 2 there (a usage error), older click 0.
    assert res.exit_code == 0 if args else res.exit_code in (0, 2), res.output
    assert "Usage: rlmetrics" in res.output
    assert "Metrics for RL fine-tuning of language models" in res.output
    for command in COMMANDS:
        assert command in res.output
    assert "--install-completion" not in res.output  # add_completion=False


@pytest.mark.parametrize("command", COMMANDS, ids=COMMANDS)
def test_each_command_help_exits_zero(command):
    res = runner.invoke(app, [command, "--help"])
    assert res.exit_code == 0, res.output
    assert f"Usage: rlmetrics {command}" in res.output
    assert "--help" in res.output


@pytest.mark.parametrize(
    "args", [["nope"], ["Validate"], ["--no-such-option"]], ids=["unknown", "wrong-case", "option"]
)
def test_unknown_command_or_option_exits_nonzero(args):
    res = runner.invoke(app, args)
    assert res.exit_code != 0
    assert ("No such command" in res.output) or ("No such option" in res.output)
    assert "Traceback" not in res.output


@pytest.mark.parametrize("name", ["missing.jsonl", "missing.parquet"], ids=["jsonl", "parquet"])
def test_validate_missing_file_exits_nonzero_naming_the_file(tmp_path, name):
    path = tmp_path / name
    res = runner.invoke(app, ["validate", str(path)])
    assert res.exit_code != 0
    assert str(path) in res.output
    assert not path.exists()


def test_validate_without_files_is_a_usage_error():
    res = runner.invoke(app, ["validate"])
    assert res.exit_code == 2
    assert "Missing argument" in res.output


def test_main_runs_the_app(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["rlmetrics", "--help"])
    with pytest.raises(SystemExit) as info:
        _cli_app.main()
    assert info.value.code == 0
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert command in out


def test_console_script_points_at_main():
    try:
        scripts = metadata.entry_points(group="console_scripts")
    except Exception:  # pragma: no cover - broken metadata
        pytest.skip("no entry point metadata")
    matches = [ep for ep in scripts if ep.name == "rlmetrics"]
    if not matches:
        pytest.skip("rlmetrics is not installed with its console script")
    assert matches[0].value == "rlmetrics.cli.app:main"
    assert matches[0].load() is _cli_app.main


def test_importing_the_cli_does_not_import_heavy_libraries():
    code = (
        "import sys; import rlmetrics.cli.app; "
        "print(','.join(m for m in ('torch', 'matplotlib', 'pyarrow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == ""

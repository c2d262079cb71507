"""rlmetrics.cli.app: the typer app's wiring (commands, help, errors, entry points), not the commands."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest
from typer.testing import CliRunner

from rlmetrics.cli import app as cli_app
from rlmetrics.cli.app import app
from rlmetrics.cli.compare import compare
from rlmetrics.cli.demo import demo
from rlmetrics.cli.diagnose import diagnose
from rlmetrics.cli.plan import plan
from rlmetrics.cli.report import report
from rlmetrics.cli.seeds import seeds
from rlmetrics.cli.validate import validate
from rlmetrics.cli.watch import watch

COMMANDS = ["validate", "compare", "demo", "report", "diagnose", "watch", "seeds", "plan"]
runner = CliRunner()


def test_registered_commands_are_the_eight_functions():
    registered = {info.name: info.callback for info in app.registered_commands}
    assert registered == {
        "validate": validate,
        "compare": compare,
        "demo": demo,
        "report": report,
        "diagnose": diagnose,
        "watch": watch,
        "seeds": seeds,
        "plan": plan,
    }


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


@pytest.mark.parametrize("command", [[], *([c] for c in COMMANDS)], ids=["top", *COMMANDS])
def test_flags_show_no_type_placeholder(command):
    """A flag takes no value: its help line shows the flag and its text, no ``<bool>``."""
    res = runner.invoke(app, [*command, "--help"])
    assert res.exit_code == 0, res.output
    help_line = next(line for line in res.output.splitlines() if "--help" in line)
    assert "Show this message" in help_line and "<" not in help_line, help_line
    assert "<bool>" not in res.output, res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "No such command"),
        (["Validate"], "No such command"),
        (["--no-such-option"], "No such option"),
    ],
    ids=["unknown", "wrong-case", "option"],
)
def test_unknown_command_or_option_is_a_usage_error(args, message):
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert message in res.output
    assert "Traceback" not in res.output


def test_main_runs_the_app_as_rlmetrics(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["anything", "--help"])
    with pytest.raises(SystemExit) as info:
        cli_app.main()
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "Usage: rlmetrics" in out  # the program name does not depend on argv[0]
    for command in COMMANDS:
        assert command in out


def test_console_script_points_at_main():
    matches = [ep for ep in metadata.entry_points(group="console_scripts") if ep.name == "rlmetrics"]
    if not matches:
        pytest.skip("rlmetrics is not installed with its console script")
    assert matches[0].value == "rlmetrics.cli.app:main"
    assert matches[0].load() is cli_app.main


@pytest.mark.parametrize("command", [[], *([c] for c in COMMANDS)], ids=["top", *COMMANDS])
def test_python_dash_m_rlmetrics(command):
    out = subprocess.run(
        [sys.executable, "-m", "rlmetrics", *command, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert f"Usage: {' '.join(['rlmetrics', *command])}" in out.stdout


def test_the_cli_imports_no_heavy_library():
    heavy = ("torch", "matplotlib", "pyarrow", "numba", "tensorboard", "wandb", "mlflow")
    code = f"import sys, rlmetrics.cli.app; print(','.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == ""


def test_version_flag():
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.startswith("rlmetrics ") and any(c.isdigit() for c in res.output)


@pytest.mark.parametrize(
    ("args", "option"),
    [(["--algo", "rloo"], "--algo"), (["--group-size", "1"], "--group-size"), (["--lr", "-1"], "--lr")],
    ids=["algo", "group-size", "lr"],
)
def test_demo_config_errors_name_the_option(args, option):
    res = runner.invoke(app, ["demo", "--steps", "1", *args])
    assert res.exit_code == 2 and f"Invalid value for {option}" in res.output, res.output

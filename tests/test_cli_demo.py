"""rlmetrics.cli.demo: the ``rlmetrics demo`` command (options, summary, errors)."""

from __future__ import annotations

import json
import shlex
import sys

import pytest
from typer.testing import CliRunner

from rlmetrics.cli.app import app

#: Trains a model: CI runs these once more under a second CPU kernel family (.ci/run).
pytestmark = pytest.mark.trains

runner = CliRunner()
TINY = ["--steps", "2", "--n-prompts", "4", "--group-size", "4", "--val-every", "2", "-q"]


def test_demo_writes_the_run_and_prints_the_summary(tmp_path):
    pytest.importorskip("torch")
    result = runner.invoke(app, ["demo", *TINY, "-o", str(tmp_path), "--experiment", "cli"])
    assert result.exit_code == 0, result.output
    path = tmp_path / "rlmetrics-demo" / "cli" / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert "validation accuracy (mean@8)" in result.output
    assert "critic/score/mean" in result.output
    assert f"next:    rlmetrics report {path} -o {path.parent / 'report'}" in result.output.splitlines()
    # the command line as typed (the defaults left out, the options in the command's order)
    config = json.loads((path.parent / "config.json").read_text())
    want = "rlmetrics demo --steps 2 --out-dir {} --experiment cli --group-size 4 --n-prompts 4 "
    assert config["command"] == want.format(shlex.quote(str(tmp_path))) + "--val-every 2 --quiet"
    assert (path.parent / "samples.jsonl").is_file()


def test_a_second_run_into_the_same_folder_is_a_new_run_and_the_first_is_kept(tmp_path):
    pytest.importorskip("torch")
    args = ["demo", *TINY, "-o", str(tmp_path), "--experiment", "cli"]
    assert runner.invoke(app, args).exit_code == 0
    first = tmp_path / "rlmetrics-demo" / "cli" / "metrics.jsonl"
    before = first.read_bytes()
    result = runner.invoke(app, [*args[:2], "1", *args[3:]])  # --steps 1
    assert result.exit_code == 0, result.output
    assert first.read_bytes() == before
    second = tmp_path / "rlmetrics-demo" / "cli-2" / "metrics.jsonl"
    assert [json.loads(line)["step"] for line in second.read_text().splitlines()] == [0, 1]
    lines = result.output.splitlines()
    assert f"new run: cli-2 ({first.parent} exists and is kept as it was)" in lines
    assert f"metrics: {second}" in lines
    assert "RuntimeWarning" not in result.output


def test_the_options_that_break_a_run_reach_its_config(tmp_path):
    pytest.importorskip("torch")
    args = ["--kl-coef", "0", "--entropy-coef", "0.5", "--max-response-length", "3"]
    args += ["--rollout-temperature", "1.5", "--reward", "acc", "--lr", "0.02", "--max-len", "5"]
    args += ["--n-letters", "6"]
    result = runner.invoke(app, ["demo", *TINY, *args, "-o", str(tmp_path), "--experiment", "broken"])
    assert result.exit_code == 0, result.output
    run = tmp_path / "rlmetrics-demo" / "broken"
    config = json.loads((run / "config.json").read_text())
    expected = {"kl_coef": 0.0, "entropy_coef": 0.5, "max_response_length": 3, "rollout_temperature": 1.5}
    expected |= {"reward": "acc", "lr": 0.02, "max_len": 5, "min_len": 2, "critic_lr": None, "n_letters": 6}
    assert {k: config[k] for k in expected} == expected
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["actor/kl_coef"] == 0.0 and rows[-1]["actor/kl_loss"] > 0  # KL off: measured only
    assert max(r["response_length/max"] for r in rows if "response_length/max" in r) <= 3


def test_the_off_policy_lag_reaches_the_config_and_the_staleness_metrics(tmp_path):
    pytest.importorskip("torch")
    args = ["demo", *TINY, "--off-policy-lag", "1", "-o", str(tmp_path), "--experiment", "lag"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    run = tmp_path / "rlmetrics-demo" / "lag"
    assert json.loads((run / "config.json").read_text())["off_policy_lag"] == 1
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["staleness/lag/max"] for r in rows[1:]] == [0.0, 1.0]  # the queue is full from step 2


def test_a_growing_bounded_queue_reaches_the_config_and_drops(tmp_path):
    pytest.importorskip("torch")
    opts = ["--steps", "5", "--off-policy-lag", "1", "--off-policy-growth", "1", "--max-staleness", "1"]
    args = ["demo", *TINY[2:], *opts, "-o", str(tmp_path), "--experiment", "grow"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    run = tmp_path / "rlmetrics-demo" / "grow"
    config = json.loads((run / "config.json").read_text())
    assert (config["off_policy_growth"], config["max_staleness"]) == (1.0, 1)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    # two rollouts a step from step 2: the lag 0, then held at the bound of 1, and from step 4
    # on the surplus rollout dropped (half of what is generated)
    assert [r["staleness/lag/max"] for r in rows[1:] if "staleness/lag/max" in r] == [0.0, 1.0, 1.0, 1.0, 1.0]
    assert [r["staleness/dropped/share"] for r in rows[1:] if "staleness/lag/max" in r] == [0, 0, 0, 0.5, 0.5]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--group-size", "1"], 2, "group_size must be >= 2"),
        (["--steps", "0"], 2, "steps must be an integer >= 1; got 0"),
        (["--algo", "dpo"], 2, "algo must be 'grpo' or 'ppo'"),
        (["--steps", "1", "--backends", "neptune", "-q"], 2, "unknown backend 'neptune'"),
        (["--kl-coef", "-1"], 2, "kl_coef must be a finite number >= 0"),
        (["--max-response-length", "0"], 2, "max_response_length must be an integer >= 1"),
        (["--rollout-temperature", "0"], 2, "rollout_temperature must be a finite number > 0"),
        (["--reward", "len"], 2, "reward must be 'score' or 'acc'"),
        (["--min-len", "5"], 2, "need 1 <= min_len <= max_len"),
        (["--off-policy-lag", "-1"], 2, "off_policy_lag must be an integer >= 0; got -1"),
        (["--off-policy-growth", "-1"], 2, "off_policy_growth must be a finite number >= 0; got -1.0"),
        (["--off-policy-lag", "2", "--max-staleness", "1"], 2, "max_staleness must be >= off_policy_lag (2)"),
    ],
    ids=[
        "group-size",
        "steps",
        "algo",
        "backend",
        "kl",
        "limit",
        "temperature",
        "reward",
        "lengths",
        "lag",
        "growth",
        "bound",
    ],
)
def test_bad_options_are_usage_errors(tmp_path, args, code, message):
    pytest.importorskip("torch")
    result = runner.invoke(app, ["demo", *args, "-o", str(tmp_path)])
    assert result.exit_code == code
    assert message in " ".join(result.output.replace("│", " ").split())  # the error panel wraps
    assert "Traceback" not in result.output


def test_without_torch_it_prints_the_cpu_install_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    result = runner.invoke(app, ["demo", *TINY, "-o", str(tmp_path)])
    assert result.exit_code == 1
    out = " ".join(result.output.split())
    assert "the demo needs torch" in out
    assert "--index-url https://download.pytorch.org/whl/cpu" in out
    assert not (tmp_path / "rlmetrics-demo").exists()


def test_a_missing_backend_package_fails_before_training(tmp_path, monkeypatch):
    """--backends tensorboard without tensorboard: the install line at once, nothing trained or written."""
    import importlib.util

    pytest.importorskip("torch")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "tensorboard" else real(name, *a)
    )
    monkeypatch.setattr("rlmetrics.demo.run._Run", None)  # building the model would fail loudly
    result = runner.invoke(app, ["demo", "--backends", "tensorboard", "-q", "-o", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert "pip install 'rlmetrics[tensorboard]'" in " ".join(result.output.split())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("afile", "error: --out-dir: afile is a file, not a folder"),
        ("afile/logs", "error: --out-dir: afile is not a folder, so afile/logs cannot be created"),
    ],
    ids=["onto-a-file", "under-a-file"],
)
def test_an_output_folder_that_cannot_be_written_fails_before_training(
    tmp_path, monkeypatch, target, message
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("kept")
    result = runner.invoke(app, ["demo", "--steps", "1", "-o", target])
    assert result.exit_code == 1
    assert message in " ".join(result.output.split()) and "Traceback" not in result.output
    assert "training" not in result.output  # refused before the first step
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
    assert (tmp_path / "afile").read_text() == "kept"


def test_every_option_but_the_run_options_is_a_config_field():
    """The command builds its DemoConfig from its own parameters, by name: none may be dropped."""
    import dataclasses
    import inspect

    from rlmetrics.cli import demo as cli_demo
    from rlmetrics.demo.run import DemoConfig

    params = set(inspect.signature(cli_demo.demo).parameters)
    fields = {f.name for f in dataclasses.fields(DemoConfig)}
    assert params - cli_demo._RUN_OPTIONS <= fields
    assert cli_demo._RUN_OPTIONS <= params
    # The config fields the command leaves at their defaults, on purpose: model shape and
    # optimiser details a demo user has no reason to change. A new field must be decided on here.
    internal = {
        "n_heads",
        "d_model",
        "n_layers",
        "peak_flops",
        "val_prompts",
        "val_samples",
        "grad_clip",
        "mini_batches",
        "clip_ratio",
    }
    assert fields - params == internal


def test_the_command_line_parses_back_to_the_same_options(tmp_path, monkeypatch):
    """command_line(options) run as a command gives those options again (a space in a path too)."""
    from rlmetrics.cli import demo as cli_demo

    seen = []
    monkeypatch.setattr(cli_demo, "_train", lambda console, cfg, **kw: seen.append((cfg, kw)) or 1 / 0)
    out = tmp_path / "my runs"
    args = ["demo", "--steps", "3", "--lr", "0.05", "-o", str(out), "--backends", "jsonl,console", "-q"]
    runner.invoke(app, args)
    cfg, kw = seen[0]
    words = shlex.split(kw["command"])
    assert words[:2] == ["rlmetrics", "demo"]
    runner.invoke(app, words[1:])
    assert seen[1][0] == cfg and seen[1][1] == kw

"""``rlmetrics plan`` through typer's CliRunner: the plan of a pilot dump, --json, options, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from rlmetrics.cli.app import app
from rlmetrics.validation.comparison.plan import pilot_spread, plan_evaluation

runner = CliRunner()


@pytest.fixture
def pilot(tmp_path):
    """120 prompts of U-shaped difficulty, 8 samples each (acc 0/1, score 0/2.5); the raw rates."""
    rng = np.random.default_rng(0)
    rates = rng.beta(0.6, 0.8, 120)
    acc = (rng.random((120, 8)) < rates[:, None]).astype(int)
    path = tmp_path / "pilot.jsonl"
    with path.open("w") as fh:
        for i in range(120):
            for j in range(8):
                row = {"input": f"q{i}", "acc": int(acc[i, j]), "score": 2.5 * float(acc[i, j] + 0.1 * j)}
                fh.write(json.dumps(row) + "\n")
    return path, acc.mean(axis=1)


def test_plan_matches_the_python_api_on_the_raw_rates(pilot, tmp_path):
    path, rates = pilot
    out = tmp_path / "plan.json"
    res = runner.invoke(app, ["plan", str(path), "--mde", "0.02", "--json", str(out)])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "all / acc: detect 0.02 with power 0.8 at 0.05 (pilot: 120 prompts, 8 samples a prompt" in text
    assert "not 0/1 values, skipped" in res.output  # score
    assert "with unlimited samples a prompt:" in res.output
    (got,) = json.loads(out.read_text())["plans"]
    ref = plan_evaluation(pilot_spread(rates, counts=8), mde=0.02)
    assert [(r["n_samples"], r["n_prompts"]) for r in got["rows"]] == [
        (r.n_samples, r.n_prompts) for r in ref.rows
    ]
    assert got["spread"]["var_between"] == pytest.approx(ref.spread.var_between)
    assert got["min_prompts"] == ref.min_prompts and got["paired"] is True and got["variable"] == "acc"


def test_options_reach_the_plan(pilot, tmp_path):
    path, rates = pilot
    out = tmp_path / "plan.json"
    args = ["plan", str(path), "--mde", "0.05", "--unpaired", "--samples", "4", "--samples", "16"]
    res = runner.invoke(
        app, [*args, "--max-prompts", "500", "--power", "0.9", "--value-key", "acc", "--json", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "within 500" in res.output and "skipped" not in res.output
    (got,) = json.loads(out.read_text())["plans"]
    ref = plan_evaluation(
        pilot_spread(rates, counts=8), mde=0.05, paired=False, n_samples=[4, 16], max_prompts=500, power=0.9
    )
    assert [(r["n_prompts"], r["feasible"]) for r in got["rows"]] == [
        (r.n_prompts, r.feasible) for r in ref.rows
    ]
    assert got["correlation"] is None and "unpaired" in got["method"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--mde", "0"], "mde must be > 0"),
        (["--mde", "0.02", "--power", "1.5"], "power must be in (0, 1)"),
        (["--mde", "0.02", "--correlation", "3"], "correlation must be in [-1, 1]"),
        (["--mde", "0.02", "--samples", "0"], "--samples[0] must be an integer >= 1"),
        (["--mde", "0.02", "--value-key", "score"], "no 0/1 variable to plan for"),
    ],
    ids=["mde", "power", "correlation", "samples", "not-binary"],
)
def test_errors_exit_two_with_a_message(pilot, extra, message):
    path, _ = pilot
    res = runner.invoke(app, ["plan", str(path), *extra])
    assert res.exit_code == 2, res.output
    assert message in res.output.replace("\n", "")


def test_mde_is_required(pilot):
    res = runner.invoke(app, ["plan", str(pilot[0])])
    assert res.exit_code == 2 and "--mde" in res.output

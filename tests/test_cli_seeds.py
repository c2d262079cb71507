"""``rlmetrics seeds`` through typer's CliRunner: seeds combined, --vs, --json, folders, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats
from typer.testing import CliRunner

from rlmetrics.cli.app import app
from rlmetrics.validation.comparison.seeds import combine_seeds

runner = CliRunner()
N = 4


def _dump(path, rates, seed, *, skip=()):
    """One seed's evaluation: N samples (acc 0/1) of each prompt q<i>; returns acc as (P, N)."""
    rng = np.random.default_rng(seed)
    acc = (rng.random((len(rates), N)) < np.asarray(rates)[:, None]).astype(int)
    with path.open("w") as fh:
        for i in range(len(rates)):
            if i in skip:
                continue
            for j in range(N):
                fh.write(json.dumps({"input": f"q{i}", "output": "...", "acc": int(acc[i, j])}) + "\n")
    return acc


@pytest.fixture
def configs(tmp_path):
    """Configuration A: three seed folders of per-step dumps; B: three files, better by ~0.1."""
    rng = np.random.default_rng(0)
    base = rng.uniform(0.1, 0.8, 40)
    a_paths, a_acc, b_paths, b_acc = [], [], [], []
    for s in range(3):
        folder = tmp_path / f"a{s}"
        folder.mkdir()
        _dump(folder / "10.jsonl", base * 0.5, 100 + s)  # an earlier step, not read
        a_acc.append(_dump(folder / "20.jsonl", np.clip(base + rng.normal(0, 0.05), 0, 1), s))
        a_paths.append(folder)
        b_paths.append(tmp_path / f"b{s}.jsonl")
        b_acc.append(_dump(b_paths[-1], np.clip(base + 0.1 + rng.normal(0, 0.05), 0, 1), 10 + s))
    return a_paths, np.array(a_acc), b_paths, np.array(b_acc)


def test_seeds_combined_match_the_per_prompt_rates(configs, tmp_path):
    a_paths, a_acc, _, _ = configs
    out = tmp_path / "seeds.json"
    res = runner.invoke(app, ["seeds", *map(str, a_paths), "--k", "1", "--k", "4", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "A: 3 seeds (a0, a1, a2)" in res.output
    assert "all / acc: 3 seeds, 40 prompts (A)" in res.output
    assert "interval (seeds)" in res.output and "seed share" in res.output
    payload = json.loads(out.read_text())
    (table,) = payload["tables"]
    got = table["metrics"]["mean@4"]
    ref = combine_seeds(a_acc.mean(axis=2))  # seeds x prompts rates from the raw samples
    assert got["mean"] == pytest.approx(a_acc.mean())
    for field in ("ci_low", "ci_high", "var_seed", "var_prompt", "var_residual", "se_prompts"):
        assert got[field] == pytest.approx(getattr(ref, field)), field
    assert got["seeds"] == ["a0", "a1", "a2"] and got["n_prompts"] == 40
    # pass@4 of a prompt: 1 if any of its 4 samples is right
    assert table["metrics"]["pass@4"]["mean"] == pytest.approx(a_acc.max(axis=2).mean())
    assert table["comparison"] == {} and payload["b"] == []


def test_vs_compares_configurations_with_seeds_as_the_unit(configs, tmp_path):
    a_paths, a_acc, b_paths, b_acc = configs
    out = tmp_path / "cmp.json"
    args = ["seeds", *map(str, a_paths)]
    for p in b_paths:
        args += ["--vs", str(p)]
    res = runner.invoke(app, [*args, "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "B: 3 seeds (b0, b1, b2)" in res.output and "B - A, seeds as the unit" in res.output
    c = json.loads(out.read_text())["tables"][0]["comparison"]["mean@4"]
    ref = stats.ttest_ind(b_acc.mean(axis=(1, 2)), a_acc.mean(axis=(1, 2)), equal_var=False)
    assert c["p_value"] == pytest.approx(ref.pvalue) and c["diff"] > 0.05
    assert c["method"] == "Welch t over seed means"


def test_prompts_must_match_unless_common(tmp_path):
    rates = np.linspace(0.1, 0.9, 12)
    paths = []
    for s in range(3):
        paths.append(tmp_path / f"s{s}.jsonl")
        _dump(paths[-1], rates, s, skip={5} if s == 2 else ())
    res = runner.invoke(app, ["seeds", *map(str, paths)])
    assert res.exit_code == 2
    assert "has 11 prompts" in res.output and "same prompts" in res.output
    res = runner.invoke(app, ["seeds", *map(str, paths), "--common-prompts"])
    assert res.exit_code == 0, res.output
    assert "3 seeds, 11 prompts" in res.output


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["ONE"], "seeds needs at least two seeds (one evaluation each); got 1"),
        (["ONE", "ONE", "--vs", "ONE"], "--vs needs at least two seeds of configuration B; got 1"),
        (["ONE", "ONE", "--confidence", "2"], "--confidence must be in (0, 1); got 2.0"),
        (["ONE", "MISSING"], "MISSING"),
    ],
    ids=["one-seed", "vs-one", "confidence", "missing"],
)
def test_errors_exit_two_with_a_message(tmp_path, extra, message):
    one = tmp_path / "one.jsonl"
    _dump(one, [0.5, 0.5], 0)
    args = [
        str(one) if a == "ONE" else str(tmp_path / "missing.jsonl") if a == "MISSING" else a for a in extra
    ]
    res = runner.invoke(app, ["seeds", *args])
    assert res.exit_code == 2, res.output
    assert message.replace("MISSING", "missing.jsonl") in res.output.replace("\n", "")

"""``rlmetrics diagnose`` through typer's CliRunner: tables, exit codes, --json, --threshold, bad input."""

from __future__ import annotations

import errno
import json
import os
import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from rlmetrics.cli.app import app
from rlmetrics.cli.diagnose import parse_thresholds, run_name
from rlmetrics.health.findings import Diagnosis, Finding, Skipped

runner = CliRunner()

KNOWN = {"grad_spike": {"factor": 10.0, "window": 20.0}, "nonfinite": {}}


class FakeRules:
    """diagnose() answering by the run's first key: 'err/...' an error, 'warn/...' a warning."""

    KINDS = ("grad_spike", "nonfinite")
    THRESHOLDS = KNOWN

    def __init__(self):
        self.thresholds = []

    def diagnose(self, history, *, thresholds=None, kinds=None, signals=None):
        self.thresholds.append(thresholds)
        first = sorted(history)[0]
        findings = []
        if first.startswith("err/"):
            findings.append(
                Finding("nonfinite", "error", 3, (first,), {"value": float("nan"), "n": 2}, "lower the lr")
            )
        if first.startswith(("err/", "warn/")):
            findings.append(Finding("grad_spike", "warning", 5, (first,), {"ratio": 12.5}, "clip gradients"))
        return Diagnosis(tuple(findings), (Skipped("kl_drift", "no KL metric in the run"),))


@pytest.fixture
def rules(monkeypatch):
    fake = FakeRules()
    module = types.ModuleType("rlmetrics.health.rules")
    module.KINDS, module.THRESHOLDS, module.diagnose = fake.KINDS, fake.THRESHOLDS, fake.diagnose
    monkeypatch.setitem(sys.modules, "rlmetrics.health.rules", module)
    return fake


def jsonl_run(path, key, steps=6):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"step": s, key: float(s)}) + "\n" for s in range(1, steps + 1)))
    return path


def flat(output):
    return " ".join(output.split())


@pytest.mark.parametrize(
    ("key", "code", "shown"),
    [
        ("ok/x", 0, ["no findings"]),
        ("warn/x", 0, ["1 warning(s)", "grad_spike", "ratio=12.5", "clip gradients"]),
        ("err/x", 1, ["1 error(s)", "nonfinite", "value=nan", "lower the lr", "grad_spike"]),
    ],
    ids=["clean", "warning-only", "error"],
)
def test_exit_code_is_one_only_for_an_error(tmp_path, rules, key, code, shown):
    run = jsonl_run(tmp_path / "exp1" / "metrics.jsonl", key)
    res = runner.invoke(app, ["diagnose", str(run)])
    assert res.exit_code == code, res.output
    text = flat(res.output)
    assert text.startswith("exp1 (")
    assert all(s in text for s in shown), text
    assert "skipped kl_drift: no KL metric in the run" in text


SKIPS = (
    Skipped("kl_drift", "needs kl_ref (one of actor/kl_loss, kl); none is logged", not_logged=True),
    Skipped("grad_spike", "run too short: 6 finite points of grad_norm, needs 21"),
    Skipped(
        "critic_failure",
        "needs explained_variance (critic/vf_explained_var); none is logged",
        not_logged=True,
    ),
)


@pytest.mark.parametrize(
    ("flags", "lines"),
    [
        (
            [],
            [
                "not run, their metrics not logged (2): kl_drift, critic_failure "
                "(--show-skipped: what each needs)",
                "skipped grad_spike: run too short: 6 finite points of grad_norm, needs 21",
            ],
        ),
        (
            ["--show-skipped"],
            [f"skipped {s.kind}: {s.why}" for s in SKIPS],
        ),
    ],
    ids=["grouped", "show-skipped"],
)
def test_checks_whose_metrics_are_not_logged_are_named_in_one_line(
    tmp_path, rules, monkeypatch, flags, lines
):
    monkeypatch.setattr(
        sys.modules["rlmetrics.health.rules"], "diagnose", lambda history, **kw: Diagnosis((), SKIPS)
    )
    run = jsonl_run(tmp_path / "exp1" / "metrics.jsonl", "ok/x")
    res = runner.invoke(app, ["diagnose", str(run), *flags], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    shown = [line.strip() for line in res.stdout.splitlines()[1:]]
    assert shown == lines


def test_a_kind_stays_whole_in_a_narrow_terminal(tmp_path, rules, monkeypatch):
    evidence = {"window": [5, 14], "smoothed": 0.8901, "level": 0.8, "error_level": 0.95, "baseline": 0.12}
    long_kind = Finding("advantage_collapse", "error", 5, ("grpo/frac_reward_zero_std",), evidence, "filter")
    monkeypatch.setattr(
        sys.modules["rlmetrics.health.rules"], "diagnose", lambda history, **kw: Diagnosis((long_kind,))
    )
    run = jsonl_run(tmp_path / "exp1" / "metrics.jsonl", "ok/x")
    res = runner.invoke(app, ["diagnose", str(run)], env={"COLUMNS": "60"})
    assert res.exit_code == 1, res.output
    # the table's row, not the advice line under it: not folded as "advantage_c" / "ollapse"
    assert "│ advantage_collapse │" in res.stdout, res.stdout


def test_json_lists_every_run_and_is_written_atomically(tmp_path, rules):
    a = jsonl_run(tmp_path / "a" / "metrics.jsonl", "err/x")
    b = jsonl_run(tmp_path / "b.jsonl", "ok/x")
    out = tmp_path / "out" / "health.json"
    out.parent.mkdir()
    res = runner.invoke(app, ["diagnose", str(a), str(b), "--json", str(out)])
    assert res.exit_code == 1, res.output
    payload = json.loads(out.read_text())
    assert [(r["run"], r["source"], r["kind_of_source"]) for r in payload["runs"]] == [
        ("a", str(a), "rlmetrics-jsonl"),
        ("b", str(b), "rlmetrics-jsonl"),
    ]
    first = payload["runs"][0]["findings"][0]
    assert first == {
        "kind": "nonfinite",
        "severity": "error",
        "step": 3,
        "metric": ["err/x"],
        "evidence": {"value": None, "n": 2},  # NaN as null: strict JSON
        "advice": "lower the lr",
        "category": None,  # the run's own finding, no category folded in
        "categories": [],
    }
    assert payload["runs"][1]["findings"] == []
    assert payload["runs"][1]["skipped"] == [
        {"kind": "kl_drift", "why": "no KL metric in the run", "not_logged": False}
    ]
    assert sorted(p.name for p in out.parent.iterdir()) == ["health.json"]  # no temporary file left


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.jsonl", "no such file or directory"),
        (lambda d: (d / "empty.jsonl", (d / "empty.jsonl").write_text(""))[0], "the file is empty"),
        (lambda d: (d / "logs", (d / "logs").mkdir())[0], "logs"),
        (
            lambda d: (d / "notes.txt", (d / "notes.txt").write_text("hello\n"))[0],
            "the first line is not JSON",
        ),
        (lambda d: (d / "s.jsonl", (d / "s.jsonl").write_text('{"a": "x"}\n'))[0], "no numeric metric"),
    ],
    ids=["missing", "empty-file", "empty-directory", "not-json", "no-numbers"],
)
def test_unreadable_input_is_one_clear_line_and_exit_2(tmp_path, rules, make, message):
    path = make(tmp_path)
    good = jsonl_run(tmp_path / "good" / "metrics.jsonl", "err/x")
    out = tmp_path / "h.json"
    res = runner.invoke(app, ["diagnose", str(path), str(good), "--json", str(out)])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and isinstance(res.exception, SystemExit)
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert message in line
    runs = json.loads(out.read_text())["runs"]
    assert runs[0]["kind_of_source"] is None and message in runs[0]["error"]
    assert runs[1]["findings"]  # the readable run is still diagnosed


def test_thresholds_reach_diagnose(tmp_path, rules):
    run = jsonl_run(tmp_path / "r.jsonl", "ok/x")
    res = runner.invoke(
        app, ["diagnose", str(run), "-t", "grad_spike.factor=20", "--threshold", "grad_spike.window=5"]
    )
    assert res.exit_code == 0, res.output
    assert rules.thresholds == [{"grad_spike": {"factor": 20.0, "window": 5.0}}]


@pytest.mark.parametrize(
    ("item", "match"),
    [
        ("grad_spike.factor", "expects kind.param=value"),
        ("grad_spike=3", "expects kind.param=value"),
        ("nope.factor=3", "unknown kind 'nope'; known: grad_spike, nonfinite"),
        ("grad_spike.size=3", "grad_spike has no parameter 'size'; its parameters: factor, window"),
        ("grad_spike.factor=big", "the value must be a number; got 'big'"),
        ("grad_spike.factor=inf", "the value must be finite"),
    ],
    ids=["no-value", "no-param", "unknown-kind", "unknown-param", "not-a-number", "infinite"],
)
def test_bad_thresholds(tmp_path, rules, item, match):
    with pytest.raises(ValueError, match=match):
        parse_thresholds([item], KNOWN)
    run = jsonl_run(tmp_path / "r.jsonl", "ok/x")
    res = runner.invoke(app, ["diagnose", str(run), "--threshold", item])
    assert res.exit_code == 2 and match.split(";")[0] in flat(res.stderr)
    assert rules.thresholds == []  # nothing diagnosed with a wrong option


def test_json_directory_must_exist(tmp_path, rules):
    run = jsonl_run(tmp_path / "r.jsonl", "ok/x")
    res = runner.invoke(app, ["diagnose", str(run), "--json", str(tmp_path / "no" / "h.json")])
    assert res.exit_code == 2 and "--json: the directory" in flat(res.stderr)


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("logs/proj/exp1/metrics.jsonl", "exp1"),
        ("out/checkpoint-5/trainer_state.json", "checkpoint-5"),
        ("runs/verl.jsonl", "verl"),
        ("tb/run3", "run3"),
    ],
    ids=["rlmetrics", "trl", "verl", "directory"],
)
def test_run_name(path, name):
    from pathlib import Path

    assert run_name(Path(path)) == name


def test_help_has_an_example():
    res = runner.invoke(app, ["diagnose", "--help"])
    assert res.exit_code == 0
    assert "rlmetrics diagnose" in res.output and "--threshold" in res.output and "Exit status" in res.output


# --- with the real rules and readers ------------------------------------------------------------


def real_run(path, *, nan_at=None, steps=80):
    import math

    import numpy as np

    from rlmetrics import keys as K

    rng = np.random.default_rng(0)
    rows = []
    for s in range(steps):
        loss = math.nan if s == nan_at else float(rng.normal(0, 0.01))
        rows.append(
            {
                "step": s,
                K.SCORE_MEAN: 0.5 + 0.002 * s + float(rng.normal(0, 0.02)),
                K.ACTOR_PG_LOSS: loss,
                K.ACTOR_GRAD_NORM: 1.0 + float(rng.normal(0, 0.05)),
                K.ACTOR_ENTROPY: 0.6 + float(rng.normal(0, 0.02)),
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # NaN as the NaN token
    return path


@pytest.mark.parametrize(
    ("nan_at", "code", "shown"),
    [(None, 0, "no findings"), (40, 1, "nonfinite")],
    ids=["healthy", "nan-loss"],
)
def test_real_rules(tmp_path, nan_at, code, shown):
    run = real_run(tmp_path / "exp" / "metrics.jsonl", nan_at=nan_at)
    out = tmp_path / "h.json"
    res = runner.invoke(app, ["diagnose", str(run.parent), "--json", str(out)], env={"COLUMNS": "250"})
    assert res.exit_code == code, res.output
    assert shown in flat(res.stdout)
    (record,) = json.loads(out.read_text())["runs"]
    assert record["run"] == "exp" and record["kind_of_source"] == "rlmetrics-jsonl"
    if nan_at is not None:
        assert [(f["kind"], f["step"]) for f in record["findings"]][:1] == [("nonfinite", 40)]
        assert "nonfinite_points={actor/pg_loss: 1}" in flat(res.stdout)
    assert {s["kind"] for s in record["skipped"]} >= {"critic_failure", "rollout_mismatch"}


def test_real_thresholds_are_checked(tmp_path):
    run = real_run(tmp_path / "r.jsonl")
    res = runner.invoke(app, ["diagnose", str(run), "-t", "grad_spike.nope=1"])
    assert res.exit_code == 2 and "grad_spike has no parameter 'nope'" in flat(res.stderr)
    res = runner.invoke(app, ["diagnose", str(run), "-t", "entropy_collapse.fraction=0.05"])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize(
    "exc",
    [
        KeyError("step"),
        IndexError("list index out of range"),
        RecursionError("too deep"),
        ZeroDivisionError("x"),
    ],
    ids=["key-error", "index-error", "recursion", "zero-division"],
)
def test_any_reader_failure_is_exit_2_never_the_error_finding_code(tmp_path, rules, monkeypatch, exc):
    """Exit 1 says "a run has an error finding": a reader that fails some other way made it
    look like one (a traceback, exit 1). Now that run is unreadable (exit 2) and the others
    are still diagnosed."""
    import rlmetrics.health.sources as sources

    real = sources.load_history
    bad = jsonl_run(tmp_path / "bad" / "metrics.jsonl", "ok/x")

    def load_history(path, *args, **kwargs):
        if Path(path) == bad:
            raise exc
        return real(path, *args, **kwargs)

    monkeypatch.setattr(sources, "load_history", load_history)
    good = jsonl_run(tmp_path / "good" / "metrics.jsonl", "ok/x")
    res = runner.invoke(app, ["diagnose", str(bad), str(good)])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and isinstance(res.exception, SystemExit)
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert f"could not read it ({type(exc).__name__}" in line
    assert "no findings" in res.output  # the good run


@pytest.mark.parametrize("fault", ["replace", "fsync"])
def test_json_that_cannot_be_written_is_exit_2_and_no_file(tmp_path, rules, monkeypatch, fault):
    from rlmetrics.cli import _files

    def enospc(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    run = jsonl_run(tmp_path / "exp" / "metrics.jsonl", "ok/x")
    out = tmp_path / "h.json"
    monkeypatch.setattr(_files.os, fault, enospc)
    res = runner.invoke(app, ["diagnose", str(run), "--json", str(out)])
    assert res.exit_code == 2, res.output
    assert "--json: could not write" in flat(res.output) and "No space left on device" in flat(res.output)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]


def test_json_onto_a_device_or_folder_is_refused(tmp_path, rules):
    run = jsonl_run(tmp_path / "exp" / "metrics.jsonl", "ok/x")
    for target, match in (("/dev/null", "is not a regular file"), (str(tmp_path), "is a folder, not a file")):
        res = runner.invoke(app, ["diagnose", str(run), "--json", target])
        assert res.exit_code == 2 and match in flat(res.output), res.output


def _custom_loop_run(path):
    """A loop of one's own: its reward and KL under names no trainer uses; the KL grows 50x while
    the reward stays flat."""
    import numpy as np

    rng = np.random.default_rng(0)
    rows = [
        {"step": s, "train_reward": 0.3 + float(rng.normal(0, 0.01)), "kl_to_ref": 0.01 * 1.1**s}
        for s in range(1, 61)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_signals_named_on_the_command_line_feed_the_rules(tmp_path):
    run = _custom_loop_run(tmp_path / "loop.jsonl")
    out = tmp_path / "h.json"
    plain = runner.invoke(app, ["diagnose", str(run), "--json", str(out)], env={"COLUMNS": "250"})
    assert plain.exit_code == 0 and "skipped kl_drift" not in plain.stdout
    assert re.search(r"not run, their metrics not logged \(\d+\): [a-z_, ]*\bkl_drift\b", flat(plain.stdout))
    named = runner.invoke(
        app,
        [
            "diagnose",
            str(run),
            "-s",
            "reward=train_reward",
            "--signal",
            "kl_ref=kl_to_ref",
            "--json",
            str(out),
        ],
        env={"COLUMNS": "250"},
    )
    assert named.exit_code == 0, named.output
    (record,) = json.loads(out.read_text())["runs"]
    (drift,) = [f for f in record["findings"] if f["kind"] == "kl_drift"]
    assert drift["metric"] == ["kl_to_ref", "train_reward"]


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("reward", "--signal expects signal=key (e.g. reward=train_reward); got 'reward'"),
        ("rewrad=train_reward", "--signal 'rewrad=train_reward': unknown signal 'rewrad'; known:"),
        ("reward=", "--signal expects signal=key"),
        (
            "reward=no_such_key",
            "signals['reward']: 'no_such_key' is not logged in this run; it logs kl_to_ref",
        ),
    ],
    ids=["no-equals", "unknown-signal", "no-key", "key-not-logged"],
)
def test_bad_signals_are_one_line_and_exit_2(tmp_path, item, message):
    run = _custom_loop_run(tmp_path / "loop.jsonl")
    res = runner.invoke(app, ["diagnose", str(run), "--signal", item], env={"COLUMNS": "250"})
    assert res.exit_code == 2
    assert message in flat(res.output) and "Traceback" not in res.output


def test_a_console_log_piped_in_on_stdin(tmp_path):
    log = "\n".join(
        f"\x1b[36m(TaskRunner pid=7)\x1b[0m step:{s} - actor/pg_loss:{'nan' if s == 3 else 0.1}"
        " - critic/score/mean:0.2"
        for s in range(1, 6)
    )
    out = tmp_path / "h.json"
    res = runner.invoke(app, ["diagnose", "-", "--json", str(out)], input=log + "\n", env={"COLUMNS": "250"})
    assert res.exit_code == 1, res.output  # the NaN loss is an error finding
    assert "stdin (<stdin>, verl-console, 5 steps): 1 error(s)" in flat(res.stdout)
    (record,) = json.loads(out.read_text())["runs"]
    assert record["source"] == "<stdin>" and record["findings"][0]["kind"] == "nonfinite"
    assert record["steps"] == 5
    assert record["findings"][0]["step"] == 3


# --- --fail-on: the gate on chosen kinds -------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "fail_on", "code"),
    [
        ("warn/a", [], 0),  # default gate: a warning passes
        ("warn/a", ["grad_spike"], 1),  # a warning of a gated kind fails
        ("warn/a", ["nonfinite"], 0),  # the gated kind is absent
        ("err/a", ["nonfinite"], 1),
        ("err/a", ["grad_spike,nonfinite"], 1),
        ("err/a", [], 1),  # default gate: an error fails
        ("ok/a", ["grad_spike", "nonfinite"], 0),
    ],
    ids=["warn-default", "warn-gated", "warn-other-kind", "err-gated", "comma-list", "err-default", "clean"],
)
def test_fail_on_exit_codes(tmp_path, rules, key, fail_on, code):
    run = jsonl_run(tmp_path / "r" / "metrics.jsonl", key)
    res = runner.invoke(app, ["diagnose", str(run), *(a for k in fail_on for a in ("--fail-on", k))])
    assert res.exit_code == code, res.output


def test_fail_on_passes_an_error_of_another_kind(tmp_path, rules, monkeypatch):
    """--fail-on replaces the default gate: an error finding of a kind not named does not fail."""
    run = jsonl_run(tmp_path / "r" / "metrics.jsonl", "err/a")

    def only_error(history, **kwargs):
        return Diagnosis((Finding("nonfinite", "error", 3, ("err/a",), {}, "x"),))

    monkeypatch.setattr(sys.modules["rlmetrics.health.rules"], "diagnose", only_error)
    assert runner.invoke(app, ["diagnose", str(run), "--fail-on", "grad_spike"]).exit_code == 0
    assert runner.invoke(app, ["diagnose", str(run)]).exit_code == 1


@pytest.mark.parametrize(
    ("value", "match"),
    [("kl_drift", "unknown kind 'kl_drift'; known: grad_spike, nonfinite"), ("nonfinite,", "an empty kind")],
    ids=["unknown", "empty"],
)
def test_fail_on_bad_kind_is_a_usage_error(tmp_path, rules, value, match):
    run = jsonl_run(tmp_path / "r" / "metrics.jsonl", "err/a")
    res = runner.invoke(app, ["diagnose", str(run), "--fail-on", value])
    assert res.exit_code == 2
    assert match in res.output


def test_fail_on_with_the_real_rules_lists_every_kind(tmp_path):
    from rlmetrics.health.rules import KINDS

    run = jsonl_run(tmp_path / "r" / "metrics.jsonl", "actor/pg_loss")
    res = runner.invoke(app, ["diagnose", str(run), "--fail-on", "nope"])
    assert res.exit_code == 2
    assert all(kind in res.output for kind in KINDS)


def test_parse_kinds_dedupes_and_keeps_order():
    from rlmetrics.cli.diagnose import parse_kinds

    assert parse_kinds([" b , a", "b"], ("a", "b")) == ("b", "a")
    assert parse_kinds([], ("a",)) is None
    with pytest.raises(ValueError, match=r"--fail-on 'c': unknown kind 'c'; known: a, b"):
        parse_kinds(["c"], ("a", "b"))


def test_a_collapse_in_one_source_is_named_in_the_table_advice_and_json(tmp_path):
    """A run logged with group_by='data_source' (planted: gsm8k's entropy collapses, the mean looks
    healthy) through the real rules: the table's ``where`` column, the advice line and --json name
    the category."""
    from planted_runs import healthy_run, plant, to_history
    from rlmetrics import keys as K

    sources = ("gsm8k", "math")
    per_source = {
        s: to_history(
            plant(healthy_run(120, seed=i), "entropy_collapse", 60, seed=i)
            if s == "gsm8k"
            else healthy_run(120, seed=i)
        )
        for i, s in enumerate(sources)
    }
    rows: dict[int, dict] = {}
    for key, (steps, _) in per_source["gsm8k"].items():
        mean = np.mean([per_source[s][key][1] for s in sources], axis=0)
        for j, step in enumerate(steps.tolist()):
            row = rows.setdefault(int(step), {"step": int(step)})
            row[key] = float(mean[j])
            if not key.startswith("val"):
                for s in sources:
                    row[K.category_key(key, "data_source", s)] = float(per_source[s][key][1][j])
    path = tmp_path / "run" / "metrics.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(rows[s], allow_nan=True) + "\n" for s in sorted(rows)))
    out = tmp_path / "d.json"
    res = runner.invoke(app, ["diagnose", str(path), "--json", str(out)], terminal_width=200)
    label = K.category_key("x", "data_source", "gsm8k")[: -len("/x")]
    text = flat(res.output)
    assert "2 categories diagnosed" in text, text
    assert "where" in text and f"entropy_collapse ({label}):" in text, text
    (run,) = json.loads(out.read_text())["runs"]
    assert [(f["kind"], f["category"]) for f in run["findings"]] == [("entropy_collapse", label)]


# --- example samples of the text findings ---------------------------------------------------------

REP_ONSET = 60


def _repetition_run(folder, *, samples=True, every=1, markup=False):
    """A Tracker-style run with a repetition rise planted at REP_ONSET and, with ``samples``, a
    ``samples.jsonl`` every ``every`` steps whose rows loop from the onset on."""
    from planted_runs import plant_columns, text_columns
    from rlmetrics import keys as K

    cols = plant_columns(text_columns(120, seed=1), "repetition_rise", REP_ONSET, seed=1)
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{k: v[i] for k, v in cols.items()} for i in range(len(cols[K.TRACKING_STEP]))]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if samples:
        lines = []
        for step in range(0, 120, every):
            looping = step >= REP_ONSET
            prefix = "[bold]not bold[/bold] " if markup else ""
            texts = [
                ("The answer is 4.", 1.0, "stop"),
                (
                    prefix + "Let me think. " + "and then " * 60 if looping else "First add, then 4.",
                    0.0,
                    "length" if looping else "stop",
                ),
            ]
            lines += [
                json.dumps(
                    {
                        "step": step,
                        "prompt": "2+2=",
                        "response": r,
                        "reward": w,
                        "stop_reason": q,
                        "chosen": "max" if w else "min",
                    }
                )
                for r, w, q in texts
            ]
        (folder / "samples.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def _repetition(out):
    (record,) = json.loads(out.read_text())["runs"]
    (finding,) = [f for f in record["findings"] if f["kind"] == "repetition_rise"]
    return finding


def test_a_text_finding_prints_and_records_its_example_samples(tmp_path):
    run = _repetition_run(tmp_path / "exp")
    out = tmp_path / "h.json"
    res = runner.invoke(app, ["diagnose", str(run), "--json", str(out)], env={"COLUMNS": "250"})
    assert res.exit_code in (0, 1), res.output
    finding = _repetition(out)
    steps = finding["evidence"]["sample_steps"]
    shown = ", ".join(str(steps[k]) for k in ("before", "onset", "worst"))
    assert f"samples at steps {shown} (before/onset/worst); examples:" in res.stdout
    # the looping row, not the correct one, at the onset and worst steps
    assert [e["step"] for e in finding["examples"]] == sorted({steps["onset"], steps["worst"]})
    for e in finding["examples"]:
        assert e["response"].endswith("and then " * 4) and e["stop_reason"] == "length" and e["reward"] == 0.0
    head = f"step {steps['onset']}, reward 0, stop length:"
    line = next(ln for ln in res.stdout.splitlines() if head in ln)
    assert "Let me think." in line and line.rstrip().endswith("and then") and " … " in line
    assert len(line.split(": ", 1)[1]) <= 100


def test_samples_logged_every_few_steps_show_the_nearest_step(tmp_path):
    run = _repetition_run(tmp_path / "exp", every=25)
    out = tmp_path / "h.json"
    runner.invoke(app, ["diagnose", str(run / "metrics.jsonl"), "--json", str(out)], env={"COLUMNS": "250"})
    finding = _repetition(out)
    assert finding["examples"] and all(e["step"] % 25 == 0 for e in finding["examples"])
    assert all(e["stop_reason"] == "length" for e in finding["examples"] if e["step"] >= REP_ONSET)


def test_without_samples_the_steps_are_printed(tmp_path):
    run = _repetition_run(tmp_path / "exp", samples=False)
    out = tmp_path / "h.json"
    res = runner.invoke(app, ["diagnose", str(run), "--json", str(out)], env={"COLUMNS": "250"})
    finding = _repetition(out)
    steps = finding["evidence"]["sample_steps"]
    shown = ", ".join(str(steps[k]) for k in ("before", "onset", "worst"))
    assert f"samples at steps {shown} (no samples.jsonl logged)" in res.stdout
    assert "examples" not in finding


def test_markup_in_a_response_is_printed_literally(tmp_path):
    run = _repetition_run(tmp_path / "exp", markup=True)
    res = runner.invoke(app, ["diagnose", str(run)], env={"COLUMNS": "250"})
    assert "[bold]not bold[/bold] Let me think." in res.stdout


def test_a_verl_experiment_file_finds_its_samples_folder(tmp_path):
    run = _repetition_run(tmp_path / "proj" / "exp")
    (run / "metrics.jsonl").rename(tmp_path / "proj" / "exp.jsonl")  # verl: <project>/<experiment>.jsonl
    out = tmp_path / "h.json"
    res = runner.invoke(app, ["diagnose", str(tmp_path / "proj" / "exp.jsonl"), "--json", str(out)])
    assert "examples:" in res.stdout
    assert all(e["stop_reason"] == "length" for e in _repetition(out)["examples"])

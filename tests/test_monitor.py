"""rlmetrics.health.monitor: the history it keeps, when it diagnoses, each kind reported once."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics import keys as K
from rlmetrics.health import monitor as monitor_module
from rlmetrics.health.findings import Diagnosis, Finding, Skipped, as_history
from rlmetrics.health.monitor import HealthMonitor

X, Y, Z = K.ACTOR_GRAD_NORM, K.ACTOR_ENTROPY, K.SCORE_MEAN
VAL = K.val_metric(K.VAL_CORE_PREFIX, "gsm8k", "acc", "mean@4")  # read through a pattern
FILLER = "actor/filler"  # read by no rule: not kept


class StandIn:
    """A diagnose() that records what it was given and answers from a script."""

    def __init__(self, answer=None):
        self.calls: list[dict] = []
        self.answer = answer or (lambda history: Diagnosis(findings=()))

    def __call__(self, history, *, thresholds=None, signals=None):
        self.calls.append(
            {"n_steps": max((len(s) for s, _ in history.values()), default=0), "thresholds": thresholds}
        )
        return self.answer(history)


def finding(kind, step, severity="warning"):
    return Finding(kind=kind, severity=severity, step=step, metric=(X,), advice=f"fix {kind}")


@pytest.fixture
def stand_in(monkeypatch):
    fake = StandIn()
    monkeypatch.setattr(monitor_module, "_diagnose", fake)
    return fake


def same_history(got, want):
    want = {k: v for k, v in want.items() if k != FILLER}
    assert sorted(got) == sorted(want)
    for key in want:
        np.testing.assert_array_equal(got[key][0], want[key][0], err_msg=key)
        np.testing.assert_array_equal(got[key][1], want[key][1], err_msg=key)


@pytest.mark.parametrize("every", [1, 3, 10], ids=["every-1", "every-3", "every-10"])
def test_diagnoses_every_n_distinct_steps(stand_in, every):
    mon = HealthMonitor(every=every, budget=None)
    for step in range(30):
        mon.update({X: float(step)}, step)
        mon.update({Y: 1.0}, step)  # the same step again: not a new step
    assert [c["n_steps"] for c in stand_in.calls] == list(range(every, 31, every))
    assert mon.n_steps == 30


def test_each_kind_is_reported_once_and_ordered_by_step(stand_in):
    script = {
        2: [finding("grad_spike", 1)],
        4: [finding("grad_spike", 1), finding("nonfinite", 3, "error"), finding("kl_drift", 2)],
        6: [finding("nonfinite", 5, "error"), finding("kl_drift", 2)],
    }
    stand_in.answer = lambda history: Diagnosis(findings=tuple(script.get(len(history[X][0]), [])))
    mon = HealthMonitor(every=2, budget=None)
    returned = [[f.kind for f in mon.update({X: 0.0}, step)] for step in range(6)]
    assert returned == [[], ["grad_spike"], [], ["kl_drift", "nonfinite"], [], []]
    assert [f.kind for f in mon.reported] == ["grad_spike", "kl_drift", "nonfinite"]
    assert mon.last is not None and len(mon.last.findings) == 2


def test_a_kind_named_twice_in_one_diagnosis_is_reported_at_its_first_step(stand_in):
    stand_in.answer = lambda h: Diagnosis(findings=(finding("grad_spike", 7), finding("grad_spike", 3)))
    mon = HealthMonitor(every=1, budget=None)
    assert [(f.kind, f.step) for f in mon.update({X: 1.0}, 0)] == [("grad_spike", 3)]


def test_check_diagnoses_the_pending_steps_and_keeps_the_skipped(stand_in):
    stand_in.answer = lambda h: Diagnosis(findings=(), skipped=(Skipped("kl_drift", "no KL key"),))
    mon = HealthMonitor(every=100, budget=None)
    for step in range(5):
        mon.update({X: 1.0}, step)
    assert stand_in.calls == []
    assert mon.check() == []
    assert stand_in.calls[-1]["n_steps"] == 5 and mon.last.skipped[0].kind == "kl_drift"


def test_thresholds_are_passed_to_every_diagnosis(stand_in):
    mon = HealthMonitor(thresholds={"grad_spike": {"factor": 20.0}}, every=1, budget=None)
    mon.update({X: 1.0}, 0)
    assert stand_in.calls[-1]["thresholds"] == {"grad_spike": {"factor": 20.0}}


@pytest.mark.parametrize(
    ("cost", "gap", "budget", "checked_at"),
    [
        (1.0, 0.5, None, list(range(0, 60))),  # no budget: every due step
        (0.01, 0.5, 0.1, list(range(0, 60))),  # cheap for the time between steps
        (1.0, 0.5, 0.1, [0, 20, 40]),  # 1 s per diagnosis needs 10 s since the last: 20 steps
        (1.0, 0.5, 0.5, [0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56]),
    ],
    ids=["no-budget", "within-budget", "dear-checks-thin-out", "half-budget"],
)
def test_the_budget_spaces_dear_diagnoses(monkeypatch, cost, gap, budget, checked_at):
    now = [0.0]
    monkeypatch.setattr(monitor_module, "_clock", lambda: now[0])
    calls = []

    def dear(history, *, thresholds=None, signals=None):
        calls.append(max((int(s[-1]) for s, _ in history.values()), default=-1))
        now[0] += cost
        return Diagnosis(())

    monkeypatch.setattr(monitor_module, "_diagnose", dear)
    mon = HealthMonitor(every=1, budget=budget)
    for step in range(60):
        mon.update({X: 1.0}, step)
        now[0] += gap
    assert calls == checked_at


rows_strategy = st.lists(
    st.tuples(
        st.integers(0, 12),
        st.dictionaries(
            st.sampled_from([X, Y, Z, VAL, FILLER]),
            st.one_of(st.floats(-1e6, 1e6), st.just(math.nan), st.just(math.inf)),
            max_size=4,
        ),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(rows_strategy, st.integers(1, 7))
def test_history_equals_as_history_of_the_rows(rows, every):
    """Repeated, backward and sparse steps, new keys at any time: the same history as the rows'."""
    mon = HealthMonitor(every=every, budget=None)
    mon_checks = []
    original = monitor_module._diagnose
    monitor_module._diagnose = lambda history, thresholds=None, signals=None: (
        mon_checks.append(dict(history)) or Diagnosis(())
    )
    try:
        for i, (step, metrics) in enumerate(rows):
            mon.update(metrics, step)
            if i % 5 == 4:
                same_history(mon.history(), as_history([{"step": s, **m} for s, m in rows[: i + 1]]))
    finally:
        monitor_module._diagnose = original
    same_history(mon.history(), as_history([{"step": s, **m} for s, m in rows]))


def test_the_table_grows_past_its_first_capacity(stand_in):
    mon = HealthMonitor(every=7, budget=None)
    names = [X, Y, Z, VAL, K.PPO_KL, K.PG_CLIPFRAC, K.ADV_MEAN, K.ACTOR_KL_LOSS, K.PERF_THROUGHPUT, FILLER]
    rows = [{names[i]: float(step * i) for i in range(step % 11)} for step in range(300)]
    for step, row in enumerate(rows):
        mon.update(row, step)
    same_history(mon.history(), as_history([{"step": s, **r} for s, r in enumerate(rows)]))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"every": 0}, ValueError, "every"),
        ({"every": 2.5}, TypeError, "every"),
        ({"thresholds": [("grad_spike", 1.0)]}, TypeError, "thresholds must be a mapping"),
        ({"thresholds": {"nope": {"x": 1.0}}}, ValueError, "nope"),
        ({"budget": 0.0}, ValueError, r"budget must be in \(0, 1\] or None; got 0.0"),
        ({"budget": "5%"}, TypeError, "budget must be a number"),
    ],
    ids=["every-zero", "every-float", "thresholds-list", "unknown-kind", "budget-zero", "budget-text"],
)
def test_bad_constructor_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        HealthMonitor(**kwargs)


@pytest.mark.parametrize(
    ("metrics", "step", "exc", "match"),
    [
        ({X: 1.0}, -1, ValueError, "step"),
        ([(X, 1.0)], 0, TypeError, "metrics must be a mapping"),
        ({X: "high"}, 0, TypeError, r"metrics\['actor/grad_norm'\] at step 0 must be a number; got str"),
    ],
    ids=["negative-step", "not-a-mapping", "text-value"],
)
def test_bad_update_arguments(stand_in, metrics, step, exc, match):
    mon = HealthMonitor(every=1, budget=None)
    with pytest.raises(exc, match=match):
        mon.update(metrics, step)


@pytest.mark.parametrize(
    ("key", "kept"),
    [
        (K.ACTOR_ENTROPY, True),
        (K.TRL_ENTROPY, True),
        (VAL, True),
        (K.ROLLOUT_CORR_CHI2_TOKEN, True),
        (FILLER, False),
        (K.timing_s(K.STAGE_GEN), False),
        (K.NEMO_RL_APPROX_ENTROPY, True),
        ("train/" + K.OPENRLHF_RESPONSE_LENGTH, True),
        (K.ROLLOUT_CORR_TRAINING_PPL, True),
        (K.CRITIC_VF_LOSS, True),
        (K.REWARDS_MEAN, True),
    ],
    ids=[
        "verl-entropy",
        "trl-entropy",
        "val-core-pattern",
        "chi2",
        "filler",
        "timing",
        "nemo-rl-entropy",
        "openrlhf-length-wandb",
        "perplexity",
        "value-loss",
        "reward-mean",
    ],
)
def test_only_the_keys_the_rules_read_are_kept(stand_in, key, kept):
    mon = HealthMonitor(every=1, budget=None)
    mon.update({key: 1.0, FILLER: 2.0}, 0)
    assert list(mon.history()) == ([key] if kept else [])


# --- with the real rules ------------------------------------------------------------------------


def run_rows(steps=120, *, nan_at=None, seed=0):
    """A healthy GRPO-like run (noisy, no trend), with a NaN loss planted at ``nan_at``."""
    rng = np.random.default_rng(seed)
    rows = []
    for step in range(steps):
        row = {
            K.SCORE_MEAN: 0.5 + 0.002 * step + rng.normal(0, 0.02),
            K.ACTOR_PG_LOSS: rng.normal(0, 0.01),
            K.ACTOR_GRAD_NORM: 1.0 + rng.normal(0, 0.05),
            K.ACTOR_ENTROPY: 0.6 + rng.normal(0, 0.02),
            K.RESPONSE_LENGTH_MEAN: 300 + rng.normal(0, 5),
            FILLER: rng.normal(),
        }
        if step == nan_at:
            row[K.ACTOR_PG_LOSS] = math.nan
        rows.append(row)
    return rows


def test_the_live_findings_are_those_of_the_whole_run():
    from rlmetrics.health.rules import diagnose

    rows = run_rows(nan_at=57)
    mon = HealthMonitor(every=10, budget=None)
    live = [(step, f.kind) for step, row in enumerate(rows) for f in mon.update(row, step)]
    live += [(len(rows), f.kind) for f in mon.check()]
    assert (59, "nonfinite") in live  # found at the first check after the NaN (the 60th step)
    offline = diagnose([{"step": s, **r} for s, r in enumerate(rows)])
    assert {f.kind for f in offline.findings} <= {kind for _, kind in live}
    nonfinite = next(f for f in mon.reported if f.kind == "nonfinite")
    assert (nonfinite.severity, nonfinite.step, nonfinite.metric) == ("error", 57, (K.ACTOR_PG_LOSS,))


@pytest.mark.parametrize(
    ("kind", "vocabulary"),
    [("staleness_growth", "prime-rl"), ("staleness_drops", "verl"), ("stop_reason_shift", "rlmetrics")],
    ids=["lag-growth-prime-rl", "evictions-verl", "stop-reasons"],
)
def test_the_staleness_and_text_rules_run_live(kind, vocabulary):
    """The monitor keeps the staleness keys (the peers' names too) and the text statistics, and
    every registered rule runs on them: each found at the first check that can see it."""
    from planted_runs import off_policy_columns, plant_columns, text_columns, to_rows

    run = off_policy_columns(200, seed=0, vocabulary=vocabulary) | text_columns(200, seed=0)
    rows = to_rows(plant_columns(run, kind, 120))
    mon = HealthMonitor(every=10, budget=None)
    live = {f.kind: step for row in rows for step in [row.pop("step")] for f in mon.update(row, step)}
    assert kind in live and live[kind] < 160, mon.last
    assert next(f for f in mon.reported if f.kind == kind).step in range(115, 126)


def test_tracker_with_a_health_monitor(tmp_path):
    from rlmetrics.tracking import Tracker, read_jsonl

    with Tracker("p", "e", log_dir=tmp_path, monitor=HealthMonitor(every=10, budget=None)) as tr:
        with pytest.warns(RuntimeWarning, match=r"rlmetrics health: nonfinite \(error\) from step 57: "):
            for step, row in enumerate(run_rows(nan_at=57)):
                tr.log(row, step=step)
    lines = {r["step"]: r for r in read_jsonl(tr.jsonl_path)}
    flagged = {s: {k: v for k, v in r.items() if k.startswith(K.HEALTH_PREFIX)} for s, r in lines.items()}
    assert {s: h for s, h in flagged.items() if h} == {59: {K.health("nonfinite"): 2.0}}


def test_a_healthy_run_reports_no_error():
    mon = HealthMonitor(every=5, budget=None)
    for step, row in enumerate(run_rows(seed=3)):
        mon.update(row, step)
    mon.check()
    assert [f for f in mon.reported if f.severity == "error"] == []
    assert len(mon.reported) <= 1


def test_signals_named_for_a_loop_of_ones_own_feed_the_live_rules():
    """A loop that logs its loss under its own name: the NaN is found once that key is logged."""
    monitor = HealthMonitor(every=1, budget=None, signals={"loss": "my_loss"})
    assert monitor.update({"other": 1.0}, 0) == []  # the named key not logged yet: no error
    found = monitor.update({"my_loss": float("nan")}, 1)
    assert [f.kind for f in found] == ["nonfinite"] and found[0].evidence["first_key"] == "my_loss"


@pytest.mark.parametrize(
    "signals", [{"rewrad": "x"}, {"reward": 3}], ids=["unknown-signal", "key-not-a-string"]
)
def test_bad_signals_fail_when_the_monitor_is_made(signals):
    with pytest.raises(ValueError, match=r"signals: expected signal -> key"):
        HealthMonitor(signals=signals)


def test_a_nan_in_any_training_loss_is_found_live():
    monitor = HealthMonitor(every=1, budget=None)
    monitor.update({"critic/vf_loss": 0.3}, 0)
    found = monitor.update({"critic/vf_loss": float("inf")}, 1)
    assert [(f.kind, f.step, f.evidence["first_key"]) for f in found] == [("nonfinite", 1, "critic/vf_loss")]


@pytest.mark.parametrize(
    "key",
    [K.OPENRLHF_CRITIC_LOSS, K.TRL_PPO_VALUE_LOSS, K.RETURNS_MEAN, "train/" + K.NEMO_RL_KL_PENALTY],
    ids=["openrlhf-critic-loss", "trl-ppo-value-loss", "returns", "nemo-rl-kl"],
)
def test_a_nan_in_a_value_loss_return_or_kl_is_found_live(key):
    monitor = HealthMonitor(every=1, budget=None)
    monitor.update({key: 0.3}, 0)
    found = monitor.update({key: math.nan}, 1)
    assert [(f.kind, f.step, f.evidence["first_key"]) for f in found] == [("nonfinite", 1, key)]


# --- actions: warn, stop, raise -----------------------------------------------------------------


def scripted(stand_in, script):
    """The stand-in answers the findings of ``script[n_steps]`` (the last ones before)."""

    def answer(history):
        n = len(history[X][0])
        return Diagnosis(findings=tuple(script[max(k for k in script if k <= n)] if n >= min(script) else ()))

    stand_in.answer = answer


NAN_THEN_DRIFT = {
    3: [finding("nonfinite", 2, "error")],
    6: [finding("nonfinite", 2, "error"), finding("kl_drift", 4)],
}


@pytest.mark.parametrize(
    ("actions", "stops_at", "raises_at", "taken"),
    [
        pytest.param(None, None, None, [], id="default-warn"),
        pytest.param({"nonfinite": "warn", "warning": "warn"}, None, None, [], id="all-warn"),
        pytest.param({"error": "stop"}, 2, None, [("stop", "nonfinite")], id="stop-on-error"),
        pytest.param({"nonfinite": "stop"}, 2, None, [("stop", "nonfinite")], id="stop-on-kind"),
        pytest.param({"warning": "stop"}, 5, None, [("stop", "kl_drift")], id="stop-on-warning"),
        pytest.param(
            {"kl_drift": "raise", "error": "stop"},
            2,
            5,
            [("stop", "nonfinite"), ("raise", "kl_drift")],
            id="kind-before-severity",
        ),
        pytest.param({"nonfinite": "raise", "error": "stop"}, 2, 2, [("raise", "nonfinite")], id="raise"),
    ],
)
def test_the_action_policy_per_kind_and_severity(stand_in, actions, stops_at, raises_at, taken):
    from rlmetrics.errors import RunStopped

    scripted(stand_in, NAN_THEN_DRIFT)
    mon = HealthMonitor(every=1, budget=None, actions=actions)
    stopped = raised = None
    for step in range(8):
        try:
            mon.update({X: 1.0}, step)
        except RunStopped as err:
            raised = step if raised is None else raised
            assert err.finding is mon.actions_taken[-1].finding and err.step == step and err.action == "raise"
            assert [f.kind for f in err.findings] == [mon.actions_taken[-1].finding.kind]
        if mon.should_stop and stopped is None:
            stopped = step
    assert (stopped, raised) == (stops_at, raises_at)
    assert [(a.action, a.finding.kind) for a in mon.actions_taken] == taken
    assert mon.stop_reason is (mon.actions_taken[0].finding if taken else None)
    assert [f.kind for f in mon.reported] == ["nonfinite", "kl_drift"]  # reported whatever the action
    assert mon.pop_action_records() == {
        K.health_action(kind): K.HEALTH_ACTION_VALUE[action] for action, kind in taken
    }
    assert mon.pop_action_records() == {}  # handed out once


def test_an_escalated_kind_is_acted_on_when_it_becomes_an_error(stand_in):
    scripted(stand_in, {2: [finding("entropy_collapse", 1)], 5: [finding("entropy_collapse", 1, "error")]})
    mon = HealthMonitor(every=1, budget=None, actions={"error": "stop"})
    for step in range(6):
        mon.update({X: 1.0}, step)
        if mon.should_stop:
            break
    assert step == 4 and mon.stop_reason is not None and mon.stop_reason.severity == "error"
    assert [(f.kind, f.severity) for f in mon.reported] == [("entropy_collapse", "warning")]


def test_a_deferred_raise_stops_and_raises_once_later(stand_in):
    from rlmetrics.errors import RLMetricsError, RunStopped

    scripted(stand_in, NAN_THEN_DRIFT)
    mon = HealthMonitor(every=1, budget=None, actions={"nonfinite": "raise"}, defer_raise=True)
    for step in range(4):
        mon.update({X: 1.0}, step)  # no raise here
    assert mon.should_stop and mon.stop_reason is not None and mon.stop_reason.kind == "nonfinite"
    with pytest.raises(
        RunStopped, match=r"run stopped at step 2 on nonfinite \(error\) from step 2: fix"
    ) as err:
        mon.raise_pending()
    assert isinstance(err.value, RLMetricsError) and not isinstance(err.value, ValueError | RuntimeError)
    mon.raise_pending()  # raised once


def test_a_real_nan_stops_a_loop_of_ones_own():
    mon = HealthMonitor(every=1, budget=None, actions={"nonfinite": "stop"})
    for step, row in enumerate(run_rows(nan_at=57)):
        mon.update(row, step)
        if mon.should_stop:
            break
    assert step == 57 and mon.stop_reason is not None and mon.stop_reason.step == 57


@pytest.mark.parametrize(
    ("actions", "exc", "match"),
    [
        pytest.param(["stop"], TypeError, r"actions must be a mapping kind or severity -> action", id="list"),
        pytest.param(
            {"nan": "stop"},
            ValueError,
            r"actions: unknown key 'nan'; expected a severity \(warning, error\) or a kind \(nonfinite, ",
            id="kind",
        ),
        pytest.param(
            {"nonfinite": "halt"},
            ValueError,
            r"actions\['nonfinite'\] must be one of 'warn', 'stop', 'raise'; got 'halt'",
            id="action",
        ),
        pytest.param({"error": None}, ValueError, r"actions\['error'\] must be one of", id="none"),
    ],
)
def test_a_bad_action_policy_is_refused_when_the_monitor_is_made(actions, exc, match):
    from rlmetrics.health.monitor import ActionPolicy

    with pytest.raises(exc, match=match):
        HealthMonitor(actions=actions)
    with pytest.raises(exc, match=match):
        ActionPolicy(actions)


def test_an_action_policy_object_is_taken_as_is_and_frozen():
    from rlmetrics.health.monitor import ActionPolicy

    policy = ActionPolicy({"error": "stop"})
    assert HealthMonitor(actions=policy).actions is policy
    with pytest.raises(TypeError):
        policy.actions["warning"] = "stop"  # type: ignore[index]
    with pytest.raises(TypeError, match="defer_raise must be True or False"):
        HealthMonitor(defer_raise=1)  # type: ignore[arg-type]


def test_a_loop_with_a_tracker_stops_on_the_monitors_flag(tmp_path):
    from rlmetrics.tracking import Tracker, read_jsonl

    mon = HealthMonitor(every=1, budget=None, actions={"error": "stop"})
    with Tracker("p", "e", log_dir=tmp_path, monitor=mon) as tr:
        with pytest.warns(RuntimeWarning, match=r"rlmetrics health: nonfinite \(error\) from step 57"):
            for step, row in enumerate(run_rows(nan_at=57)):
                tr.log(row, step=step)
                if mon.should_stop:
                    break
    assert step == 57 and tr.monitor is mon and mon.pop_action_records() == {}  # the Tracker took them
    rows = read_jsonl(tr.jsonl_path)
    assert rows[-1]["step"] == 57 and rows[-1][K.health_action("nonfinite")] == 1.0
    assert rows[-1][K.health("nonfinite")] == K.HEALTH_SEVERITY_VALUE["error"]


def test_a_raise_action_leaves_tracker_log_after_the_step_is_written(tmp_path):
    from rlmetrics.errors import RunStopped
    from rlmetrics.tracking import Tracker, read_jsonl

    mon = HealthMonitor(every=1, budget=None, actions={"nonfinite": "raise"})
    tr = Tracker("p", "e", log_dir=tmp_path, monitor=mon)
    with pytest.warns(RuntimeWarning, match=r"rlmetrics health: nonfinite \(error\) from step 57"):
        with pytest.raises(RunStopped, match=r"run stopped at step 57 on nonfinite"):
            for step, row in enumerate(run_rows(nan_at=57)):
                tr.log(row, step=step)
    assert step == 57 and tr.monitor is mon  # not switched off as a failing monitor would be
    tr.log({"after": 1.0}, step=58)  # raised once: the loop may go on logging (e.g. a last save)
    tr.finish()
    rows = read_jsonl(tr.jsonl_path)
    at_57 = next(r for r in rows if r["step"] == 57)
    assert at_57[K.health_action("nonfinite")] == K.HEALTH_ACTION_VALUE["raise"]
    assert at_57[K.health("nonfinite")] == K.HEALTH_SEVERITY_VALUE["error"]
    assert rows[-1]["step"] == 58 and rows[-1]["after"] == 1.0

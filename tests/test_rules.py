"""rlmetrics.health.rules: every planted failure found near its onset, healthy runs left alone."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from planted_runs import (
    KINDS_BY_VOCABULARY,
    OFF_POLICY_KEYS,
    healthy_run,
    off_policy_columns,
    plant,
    plant_columns,
    text_columns,
    to_history,
    to_rows,
)
from rlmetrics import keys as K
from rlmetrics.health import load_history, rules
from rlmetrics.health.findings import ERROR, WARNING
from rlmetrics.health.rules import KINDS, THRESHOLDS, diagnose, resolve_thresholds

N_STEPS, ONSET = 300, 180
#: How far from the planted onset a finding may start: persistence windows (kl_drift compares
#: two 20-point windows) and sparse validation (every 10 steps) place it a few points off.
TOLERANCE = 12
#: Validation is logged every 10 steps: reward_hacking's onset is known to a validation interval.
TOLERANCE_OF = {"reward_hacking": TOLERANCE + 10}

#: The rules of the staleness and text families, whose keys the planted runs do not log.
OFF_POLICY_AND_TEXT_KINDS = (
    "staleness_growth",
    "staleness_cost",
    "staleness_drops",
    "staleness_length_bias",
    "repetition_rise",
    "gibberish_rise",
    "format_failure_rise",
    "stop_reason_shift",
)

PLANTED = [
    (vocabulary, algo, kind) for (vocabulary, algo), kinds in KINDS_BY_VOCABULARY.items() for kind in kinds
]
VOCABULARIES = sorted(KINDS_BY_VOCABULARY)


def summary(diagnosis):
    return [(f.kind, f.severity, f.step) for f in diagnosis.findings]


@pytest.mark.parametrize("seed", [0, 1, 2], ids=lambda s: f"seed{s}")
@pytest.mark.parametrize(("vocabulary", "algo", "kind"), PLANTED, ids=[f"{v}-{a}-{k}" for v, a, k in PLANTED])
def test_planted_kind_is_found_near_its_onset(vocabulary, algo, kind, seed):
    run = plant(healthy_run(N_STEPS, seed=seed, vocabulary=vocabulary, algo=algo), kind, ONSET, seed=seed)
    found = [f for f in diagnose(to_rows(run)).findings if f.kind == kind]
    assert found, f"{kind} not found"
    assert abs(found[0].step - ONSET) <= TOLERANCE_OF.get(kind, TOLERANCE), summary(diagnose(to_rows(run)))
    assert found[0].metric and found[0].advice and found[0].evidence


@pytest.mark.parametrize(("vocabulary", "algo"), VOCABULARIES, ids=[f"{v}-{a}" for v, a in VOCABULARIES])
@pytest.mark.parametrize("onset", [60, 120, 240], ids=lambda o: f"onset{o}")
def test_onset_follows_the_planted_step(vocabulary, algo, onset):
    run = healthy_run(N_STEPS, seed=7, vocabulary=vocabulary, algo=algo)
    for kind in KINDS_BY_VOCABULARY[(vocabulary, algo)]:
        found = [f for f in diagnose(to_rows(plant(run, kind, onset))).findings if f.kind == kind]
        tolerance = TOLERANCE_OF.get(kind, TOLERANCE)
        assert found and abs(found[0].step - onset) <= tolerance, (kind, summary(diagnose(to_rows(run))))


def assert_healthy(diagnosis):
    assert not diagnosis.has_error, summary(diagnosis)
    assert len(diagnosis.findings) <= 1, summary(diagnosis)


@pytest.mark.parametrize(("vocabulary", "algo"), VOCABULARIES, ids=[f"{v}-{a}" for v, a in VOCABULARIES])
@pytest.mark.parametrize("n_steps", [25, 80, 300, 1000], ids=lambda n: f"{n}steps")
def test_healthy_runs_over_seeds_get_no_error_and_at_most_one_warning(vocabulary, algo, n_steps):
    for seed in range(30 if n_steps < 1000 else 8):
        assert_healthy(diagnose(to_rows(healthy_run(n_steps, seed=seed, vocabulary=vocabulary, algo=algo))))


@pytest.mark.parametrize("n_steps", [80, 300, 1000], ids=lambda n: f"{n}steps")
def test_a_run_that_solves_its_task_is_healthy(n_steps):
    """Entropy to ~1.5% of its start and most groups zero-spread, because they are all solved."""
    for seed in range(20 if n_steps < 1000 else 5):
        run = healthy_run(n_steps, seed=seed, solved=True)
        assert_healthy(diagnose(to_rows(run)))
        entropy = run[K.ACTOR_ENTROPY]
        assert np.median(entropy[-10:]) < 0.05 * np.median(entropy[:3])


def test_a_solved_run_without_the_all_solved_share_gets_a_warning_at_most():
    """Without ``grpo/frac_all_solved`` the reward's rise alone keeps the collapse a warning."""
    run = healthy_run(300, seed=0, solved=True)
    del run[K.GRPO_FRAC_ALL_SOLVED]
    (finding,) = diagnose(to_rows(run), kinds=["entropy_collapse"]).findings
    assert finding.severity == WARNING and finding.evidence["reward_rise_sigmas"] > 20


def test_early_truncation_that_ends_is_not_reported():
    run = healthy_run(100, seed=0)
    assert max(run[K.RESPONSE_LENGTH_CLIP_RATIO][:8]) > 0.3  # healthy runs start truncated
    assert diagnose(to_rows(run), kinds=["length_truncation"]).findings == ()
    late = plant(run, "length_truncation", 60)
    (finding,) = diagnose(to_rows(late), kinds=["length_truncation"]).findings
    assert abs(finding.step - 60) <= TOLERANCE and finding.evidence["window"][1] == 99


def test_entropy_collapse_within_the_first_steps_dates_from_them():
    """A learning rate far too high: entropy 2.19 -> 0.63 at step 2 -> 1e-3 by step 10."""
    steps = np.arange(1, 41)
    entropy = np.maximum(2.19 * np.exp(-0.7 * (steps - 1)), 5e-7)
    reward = np.full(40, 0.09) + 0.01 * np.sin(steps)
    (finding,) = diagnose(
        {K.ACTOR_ENTROPY: (steps, entropy), K.SCORE_MEAN: (steps, reward)}, kinds=["entropy_collapse"]
    ).findings
    assert finding.severity == ERROR and finding.step <= 6, finding


def test_advantage_collapse_leaves_all_solved_groups_out():
    steps = np.arange(50)
    zero_std = np.full(50, 0.9)
    h = {K.GRPO_FRAC_REWARD_ZERO_STD: (steps, zero_std)}
    assert diagnose(h, kinds=["advantage_collapse"]).has_error is False
    assert len(diagnose(h, kinds=["advantage_collapse"]).findings) == 1  # TRL: no solved share
    h[K.GRPO_FRAC_ALL_SOLVED] = (steps, np.full(50, 0.7))
    assert diagnose(h, kinds=["advantage_collapse"]).findings == ()
    h[K.GRPO_FRAC_REWARD_ZERO_STD] = (steps, np.ones(50))
    h[K.GRPO_FRAC_ALL_SOLVED] = (steps, np.zeros(50))  # every group all wrong
    (finding,) = diagnose(h, kinds=["advantage_collapse"]).findings
    assert finding.severity == ERROR and set(finding.metric) == {
        K.GRPO_FRAC_REWARD_ZERO_STD,
        K.GRPO_FRAC_ALL_SOLVED,
    }


def test_kl_drift_under_a_reward_that_does_not_move_at_all():
    """A reward exactly 0 at every step has no noise: a zero gain is a stalled reward."""
    steps = np.arange(1, 81)
    h = {
        K.ACTOR_KL_LOSS: (steps, 0.01 * np.exp(steps / 20.0)),
        K.SCORE_MEAN: (steps, np.zeros(80)),
    }
    assert "kl_drift" in {f.kind for f in diagnose(h).findings}


def _jump_then_wander(reward_gain, *, seed, n=60, jump_at=3, level=1.5):
    """KL near 0 for ``jump_at`` steps, then a jump to ``level`` that wanders (no growth after);
    the reward noisy around 0.03 plus a linear gain of ``reward_gain`` over the run."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n + 1)
    kl = np.where(steps <= jump_at, 0.01, level) * np.exp(rng.normal(0, 0.3, n))
    reward = 0.03 + reward_gain * steps / n + rng.normal(0, 0.01, n)
    return {K.ACTOR_KL_LOSS: (steps, kl), K.SCORE_MEAN: (steps, reward)}


@pytest.mark.parametrize("seed", range(5), ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("jump_at", [1, 3, 8], ids=lambda j: f"jump-at-{j}")
def test_kl_drift_a_jump_in_the_first_steps_then_wandering(seed, jump_at):
    """A KL 100x its start with the reward flat is a drift, however early the jump: compared with
    the start of the run, not with the window before (the wandering never doubles)."""
    (finding,) = diagnose(_jump_then_wander(0.0, seed=seed, jump_at=jump_at), kinds=["kl_drift"]).findings
    assert finding.severity == WARNING
    assert finding.evidence["compared_with"] == "the start of the run"
    assert finding.evidence["growth"] > 10


@pytest.mark.parametrize("seed", range(5), ids=lambda s: f"seed{s}")
def test_kl_drift_not_when_the_kl_bought_reward(seed):
    """The same KL with a reward that rose by 0.5 (50 noise sigmas): KL spent on learning."""
    assert not diagnose(_jump_then_wander(0.5, seed=seed), kinds=["kl_drift"]).findings


def test_kl_drift_start_level_is_floored_at_min_kl():
    """A KL that starts at exactly 0 (the policy is the reference) and stays below 10 * min_kl
    is noise, not a drift."""
    h = _jump_then_wander(0.0, seed=0, level=0.05)
    steps, kl = h[K.ACTOR_KL_LOSS]
    h[K.ACTOR_KL_LOSS] = (steps, np.where(steps <= 3, 0.0, kl))
    assert not diagnose(h, kinds=["kl_drift"]).findings
    h[K.ACTOR_KL_LOSS] = (steps, np.where(steps <= 3, 0.0, 3 * kl))  # 0.15: 15x the floor
    assert diagnose(h, kinds=["kl_drift"]).findings


def test_a_gradient_exactly_zero_is_no_learning_signal():
    """Exact-match reward on a task too hard: reward, advantages and gradient exactly 0."""
    steps = np.arange(1, 31)
    zeros = np.zeros(30)
    h = {
        K.ACTOR_GRAD_NORM: (steps, zeros),
        K.SCORE_MEAN: (steps, zeros),
        K.ACTOR_KL_LOSS: (steps, zeros),
        K.ACTOR_ENTROPY: (steps, np.full(30, 2.18)),
        K.GRPO_FRAC_REWARD_ZERO_STD: (steps, np.ones(30)),
        K.GRPO_FRAC_ALL_SOLVED: (steps, zeros),
    }
    d = diagnose(h)
    assert {(f.kind, f.severity) for f in d.findings} == {
        ("no_learning_signal", ERROR),
        ("advantage_collapse", ERROR),
    }, summary(d)


_DEGENERATE = st.one_of(
    st.builds(
        lambda c, n: [c] * n,
        st.sampled_from([0.0, 1.0, -1.0, 1e-30, math.nan, math.inf]),
        st.integers(0, 60),
    ),
    st.lists(
        st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, math.nan])),
        max_size=60,
    ),
)
#: One key per signal (the first candidate, a pattern made concrete), and TRL's forms of a few.
_ANY_KEYS = [
    (c.replace("*", "x", 1).replace("*", "acc") if "*" in c else c)
    for cands in rules.SIGNALS.values()
    for c in cands[:1]
] + [K.TRL_REWARD, K.TRL_ENTROPY, K.TRL_KL]


@pytest.mark.filterwarnings("error::RuntimeWarning")
@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.sampled_from(_ANY_KEYS), _DEGENERATE, max_size=12),
    st.integers(0, 5),
    st.sampled_from([0, 30, 80]),
)
@example({K.GRPO_FRAC_ALL_SOLVED: [1e308], K.GRPO_FRAC_NONE_SOLVED: [1e308]}, 0, 30)  # 1 - a - b overflows
def test_no_rule_raises_on_degenerate_series(series, start, healthy_steps):
    """Constant, all-zero, all-NaN, one-point or wild series, alone or in a healthy run: findings
    or skips, never an exception or a numpy warning."""
    h = to_history(healthy_run(healthy_steps, seed=start)) if healthy_steps else {}
    for key, v in series.items():
        h[key] = (np.arange(start, start + len(v)), np.asarray(v, dtype=np.float64))
    d = diagnose(h)
    json.dumps(d.to_dict(), allow_nan=False)
    assert len(d.findings) + len(d.skipped) <= len(KINDS)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(20, 500),
    st.sampled_from(VOCABULARIES),
    st.floats(0.0, 0.15),
)
def test_extra_noise_raises_no_false_error(seed, n_steps, vocabulary_algo, sigma):
    """Noise robustness: multiplicative noise on the metrics of a healthy run raises no error.

    The rollout/training ratios (``rollout_corr/*``, TRL's ``sampling/*``) keep their own noise:
    they sit near 1 (or 0) and are checked against sourced absolute levels.
    """
    vocabulary, algo = vocabulary_algo
    run = healthy_run(n_steps, seed=seed, vocabulary=vocabulary, algo=algo)
    rng = np.random.default_rng(seed)
    own_noise = (K.ROLLOUT_CORR_PREFIX, K.group(K.TRL_SAMPLING_IS_RATIO_MEAN))
    noisy = {
        key: values
        if key == K.TRACKING_STEP or key.startswith(own_noise)
        else [None if v is None else v * float(np.exp(rng.normal(0.0, sigma))) for v in values]
        for key, values in run.items()
    }
    assert_healthy(diagnose(to_rows(noisy)))


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([p for p in PLANTED if p[2] != "reward_hacking"]))
def test_planted_kinds_survive_any_seed(seed, planted):
    vocabulary, algo, kind = planted
    run = plant(healthy_run(N_STEPS, seed=seed, vocabulary=vocabulary, algo=algo), kind, ONSET, seed=seed)
    assert any(f.kind == kind for f in diagnose(to_history(run)).findings)


def test_rows_and_history_give_the_same_diagnosis():
    run = plant(healthy_run(200, seed=3), "entropy_collapse", 120)
    assert diagnose(to_rows(run)) == diagnose(to_history(run))


def test_findings_are_ordered_by_step_and_json_ready():
    run = plant(plant(healthy_run(N_STEPS, seed=0), "throughput_drop", 200), "entropy_collapse", 100)
    d = diagnose(to_rows(run))
    assert [f.kind for f in d.findings] == ["entropy_collapse", "throughput_drop"]
    assert [f.step for f in d.findings] == sorted(f.step for f in d.findings)
    json.dumps(d.to_dict(), allow_nan=False)


@pytest.mark.parametrize(
    ("kind", "severity"),
    [("nonfinite", ERROR), ("throughput_drop", WARNING), ("critic_failure", ERROR), ("grad_spike", ERROR)],
    ids=["nonfinite", "throughput_drop", "critic_failure", "grad_spike"],
)
def test_severity_of_planted_kinds(kind, severity):
    algo = "ppo" if kind == "critic_failure" else "grpo"
    run = plant(healthy_run(N_STEPS, seed=0, algo=algo), kind, ONSET)
    assert [f.severity for f in diagnose(to_rows(run), kinds=[kind]).findings] == [severity]


# --- thresholds ---------------------------------------------------------------------------------


def test_every_threshold_is_in_the_docstring_table():
    doc = rules.__doc__ or ""
    for kind, params in THRESHOLDS.items():
        assert kind in doc
        for name in params:
            assert name in doc, (kind, name)
    assert "is_mean_low, is_mean_high" in doc and "k, n" in doc
    assert set(KINDS) == set(rules.RULES) == set(rules.ADVICE)


def _table_rows(table: str) -> list[tuple[str, list[str], list[str]]]:
    """The rows of an RST simple table whose first column is filled: (label, names, values)."""
    lines = table.strip().splitlines()
    spans = [(m.start(), m.end()) for m in re.finditer(r"=+", lines[0])]
    rows = []
    for line in lines[3:-1]:
        label, names, values = (line[a:b].strip() for a, b in spans[:3])
        if label:
            rows.append((label, names.split(", "), values.split(", ")))
    return rows


def test_the_docstring_table_is_rendered_from_the_declarations():
    """The table of thresholds is no second copy: the docstring ends with what the declarations
    render, and each declared threshold is in it once, under its kind or its group, with its value."""
    table = rules.threshold_table()
    assert (rules.__doc__ or "").endswith(table)
    listed = [
        (label, name, value)
        for label, names, values in _table_rows(table)
        for name, value in zip(names, values)
    ]
    assert len(listed) == len(set(listed))
    for kind, spec in rules.RULE_SPECS.items():
        for name, declared in spec.declared.items():
            label = f"({declared.group})" if declared.group else kind
            assert (label, name, rules._value_text(declared.value)) in listed, (kind, name)
            assert float(rules._value_text(declared.value)) == pytest.approx(THRESHOLDS[kind][name])
    groups = {f"({t.group})" for spec in rules.RULE_SPECS.values() for t in spec.declared.values() if t.group}
    assert {label for label, _, _ in listed} == set(KINDS) | groups


def test_every_threshold_has_its_source_and_a_shared_one_one_value():
    shared: dict[tuple[str, str], rules.Threshold] = {}
    for kind, spec in rules.RULE_SPECS.items():
        assert set(spec.sources) == set(spec.thresholds) == set(spec.declared), kind
        assert all(len(source) > 10 for source in spec.sources.values()), kind
        for name, declared in spec.declared.items():
            if declared.group:
                assert shared.setdefault((declared.group, name), declared) == declared, (kind, name)


def test_every_rule_reads_the_signals_it_declares(monkeypatch):
    """A rule's ``signals`` are the ones its check resolves, recorded over planted runs of every
    family (each rule reaching its later arms), an empty one and one of every signal flat at 1."""
    from rlmetrics.health.signals import SIGNALS

    read: set[str] = set()
    for name in ("resolve", "resolve_all"):
        real = getattr(rules, name)
        monkeypatch.setattr(
            rules, name, lambda history, signal, real=real: read.add(signal) or real(history, signal)
        )
    runs = [
        to_history(plant(healthy_run(N_STEPS, seed=0, vocabulary=v, algo=a), k, ONSET)) for v, a, k in PLANTED
    ]
    columns = off_policy_columns(N_STEPS, seed=0) | text_columns(
        N_STEPS, seed=0
    )  # rlmetrics' keys: all of them
    runs += [to_history(plant_columns(columns, kind, ONSET)) for kind in OFF_POLICY_AND_TEXT_KINDS]
    runs.append({})
    runs.append({keys[0]: (np.arange(8), np.ones(8)) for keys in SIGNALS.values()})  # every signal, flat at 1
    for kind, spec in rules.RULE_SPECS.items():
        assert set(spec.signals) <= set(SIGNALS), kind
        read.clear()
        for history in runs:
            spec.check(history, THRESHOLDS[kind])
        assert read == set(spec.signals), (kind, read ^ set(spec.signals))


def test_a_rule_runs_with_a_plain_mapping_and_names_its_kind():
    """``RULES[kind](history, params)`` takes any mapping of thresholds; the body reads the kind
    from its :class:`~rlmetrics.health.rules.Params`."""
    skipped = rules.RULES["kl_drift"]({}, dict(THRESHOLDS["kl_drift"]))
    assert skipped is not None and skipped.kind == "kl_drift" and "needs kl_ref" in skipped.why
    p = rules.Params("kl_drift", THRESHOLDS["kl_drift"])
    assert p.kind == "kl_drift" and dict(p) == THRESHOLDS["kl_drift"] and p.get("missing") is None
    with pytest.raises(TypeError):
        p["window"] = 1.0  # type: ignore[index]


def test_overrides_turn_a_rule_on_and_off():
    run = healthy_run(N_STEPS, seed=0)
    # a healthy entropy ends at ~35% of its early level: a 50% threshold calls it a collapse
    strict = diagnose(
        to_rows(run), thresholds={"entropy_collapse": {"fraction": 0.5}}, kinds=["entropy_collapse"]
    )
    assert [f.kind for f in strict.findings] == ["entropy_collapse"]
    broken = to_rows(plant(run, "throughput_drop", ONSET))  # throughput at 35% of its level
    lax = diagnose(broken, thresholds={"throughput_drop": {"fraction": 0.2}}, kinds=["throughput_drop"])
    assert lax.findings == ()
    assert THRESHOLDS["entropy_collapse"]["fraction"] == 0.1  # the defaults are left as they are


@pytest.mark.parametrize(
    ("thresholds", "match"),
    [
        ({"entropy_colapse": {"fraction": 0.2}}, "unknown kind 'entropy_colapse'"),
        ({"entropy_collapse": {"fractoin": 0.2}}, r"\['entropy_collapse'\]: unknown parameter 'fractoin'"),
        ({"entropy_collapse": {"fraction": "0.2"}}, "must be a finite number; got '0.2'"),
        ({"entropy_collapse": {"fraction": math.nan}}, "must be a finite number; got nan"),
        ({"entropy_collapse": 0.2}, "must be a mapping parameter -> value; got float"),
    ],
    ids=["kind", "parameter", "string", "nan", "not-a-mapping"],
)
def test_bad_overrides_are_named(thresholds, match):
    with pytest.raises(ValueError, match=match):
        resolve_thresholds(thresholds)


def test_unknown_kind_to_run_is_named():
    with pytest.raises(ValueError, match=r"kinds: unknown kind\(s\) \['gibberish'\]"):
        diagnose({}, kinds=["gibberish"])


# --- runs a rule cannot judge -------------------------------------------------------------------


def test_missing_signals_skip_with_why():
    d = diagnose({K.ACTOR_ENTROPY: (np.arange(50), np.linspace(1.0, 0.5, 50))})
    skipped = {s.kind: s.why for s in d.skipped}
    assert set(skipped) == set(KINDS) - {"entropy_collapse"}
    assert all(s.not_logged for s in d.skipped)  # each for want of its metrics, and says so
    assert "needs kl_ref" in skipped["kl_drift"] and K.TRL_KL in skipped["kl_drift"]
    lengths = diagnose(
        {K.RESPONSE_LENGTH_MEAN: (np.arange(50), np.full(50, 300.0))}, kinds=["length_collapse"]
    )
    assert "needs reward" in lengths.skipped[0].why and K.TRL_REWARD in lengths.skipped[0].why
    assert "needs response_length" in skipped["entropy_explosion"]
    assert "rollout-correction" in skipped["rollout_mismatch"]


def test_empty_history_skips_every_rule():
    d = diagnose([])
    assert d.findings == () and [s.kind for s in d.skipped] == list(KINDS)
    assert all(s.not_logged for s in d.skipped)


@pytest.mark.parametrize("n_steps", [1, 2, 5], ids=lambda n: f"{n}steps")
def test_short_runs_are_skipped_not_raised(n_steps):
    d = diagnose(to_rows(healthy_run(n_steps, seed=0, algo="ppo")))
    assert d.findings == ()
    short = [s for s in d.skipped if s.why.startswith("run too short")]
    # nonfinite, the two rules with no critic/group signal, and the off-policy and text rules
    assert len(short) >= len(KINDS) - 3 - len(OFF_POLICY_AND_TEXT_KINDS)
    assert all("needs" in s.why for s in short)
    assert not any(s.not_logged for s in short)  # logged, too short: not a metric the run lacks


def test_one_step_with_a_nan_is_still_found():
    d = diagnose([{"step": 0, K.TRL_LOSS: math.nan, K.TRL_REWARD: 0.5}])
    assert summary(d) == [("nonfinite", ERROR, 0)]
    assert d.findings[0].evidence == {"nonfinite_points": {K.TRL_LOSS: 1}, "first_key": K.TRL_LOSS}


# --- NaN handling ---------------------------------------------------------------------------------


def test_nonfinite_reports_the_first_bad_step_over_every_watched_key():
    run = healthy_run(100, seed=0)
    run[K.ACTOR_GRAD_NORM][60] = math.inf
    run[K.ACTOR_KL_LOSS][40] = math.nan
    run[K.ACTOR_ENTROPY][10] = math.nan  # not a watched key
    (finding,) = diagnose(to_rows(run), kinds=["nonfinite"]).findings
    assert finding.step == 40
    assert finding.evidence["first_key"] == K.ACTOR_KL_LOSS
    assert set(finding.metric) == {K.ACTOR_GRAD_NORM, K.ACTOR_KL_LOSS}


@pytest.mark.parametrize("kind", ["entropy_collapse", "grad_spike", "length_explosion", "throughput_drop"])
def test_scattered_nans_neither_crash_nor_hide_a_rule(kind):
    run = plant(healthy_run(N_STEPS, seed=1), kind, ONSET)
    rng = np.random.default_rng(0)
    for key, values in run.items():
        if key != K.TRACKING_STEP:
            for i in rng.choice(N_STEPS, size=15, replace=False):
                if values[i] is not None and i != ONSET:
                    values[i] = math.nan
    found = [f for f in diagnose(to_rows(run)).findings if f.kind == kind]
    assert found and abs(found[0].step - ONSET) <= TOLERANCE
    healthy = healthy_run(N_STEPS, seed=1)
    healthy[K.ACTOR_ENTROPY] = [math.nan if i % 7 == 0 else v for i, v in enumerate(healthy[K.ACTOR_ENTROPY])]
    assert diagnose(to_rows(healthy), kinds=[kind]).findings == ()


def test_every_rule_is_declared_once_with_its_thresholds_and_advice():
    """One declaration per rule: the check, its thresholds and its advice in one place, the kind
    the check's name; the public tables are views of it."""
    assert tuple(rules.RULE_SPECS) == KINDS == tuple(THRESHOLDS) == tuple(rules.ADVICE) == tuple(rules.RULES)
    for kind, spec in rules.RULE_SPECS.items():
        assert spec.kind == kind == spec.check.__name__
        assert dict(spec.thresholds) == THRESHOLDS[kind] and spec.advice == rules.ADVICE[kind]
        assert spec.advice.endswith(".") and len(spec.advice) > 40
    with pytest.raises(TypeError):
        rules.RULE_SPECS["kl_drift"] = rules.RULE_SPECS["nonfinite"]  # read-only


@pytest.mark.parametrize(
    ("key", "found"),
    [
        ("critic/vf_loss", True),
        ("critic/grad_norm", True),
        ("train/policy_loss", True),
        ("actor/entropy_loss", True),
        ("val-core/gsm8k/reward/std@1", False),  # an undefined validation statistic
        ("eval_loss", False),
        ("critic/values/mean", False),
        # value losses, rewards, returns, KLs of verl, TRL's PPO, OpenRLHF and NeMo-RL
        ("loss/value_avg", True),
        ("train/loss/value_avg", True),
        ("critic_loss", True),
        ("train/critic_loss", True),
        ("critic/rewards/mean", True),
        ("critic/returns/mean", True),
        ("objective/scores", True),
        ("objective/rlhf_reward", True),
        ("return", True),
        ("train/kl_penalty", True),
        ("actor/ppo_kl", True),
        ("gen_kl_error", True),
        # undefined by design on a degenerate step, or not a reward at all
        ("rewards/format_reward/mean", False),
        ("train/rewards/format_reward", False),
        # as TensorBoard's CSV downloads name them, "/" written "_"
        ("critic_vf_loss", True),
        ("rewards_mean", True),
        ("rewards_format_reward_mean", False),
        ("train_rewards_format_reward", False),
        ("grpo/frac_reward_zero_std", False),
        ("grpo/reward_std/mean", False),
        ("validation/accuracy", False),
        ("timing_s/reward", False),
    ],
    ids=lambda v: str(v),
)
def test_nonfinite_watches_every_training_loss_and_gradient_norm(key, found):
    steps = np.arange(1, 21)
    values = np.ones(20)
    values[7] = math.nan
    h = {K.SCORE_MEAN: (steps, np.full(20, 0.5)), key: (steps, values)}
    result = diagnose(h, kinds=["nonfinite"]).findings
    assert bool(result) is found
    if found:
        assert result[0].step == 8 and result[0].evidence["first_key"] == key


def _collapsed_at_step_2(key, start, after, *, seed, n=40):
    """A signal at ``start`` for one step, then at ``after`` (noisy): a collapse inside the early
    window, which a frozen baseline of the first points cannot see; the reward flat."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n + 1)
    values = np.where(steps == 1, start, after) * np.exp(rng.normal(0, 0.2, n))
    reward = 0.3 + rng.normal(0, 0.02, n)
    return {key: (steps, values), K.SCORE_MEAN: (steps, reward)}


@pytest.mark.parametrize("seed", range(4), ids=lambda s: f"seed{s}")
@pytest.mark.parametrize(
    ("kind", "key", "start", "after"),
    [
        ("entropy_collapse", K.ACTOR_ENTROPY, 1.0, 0.02),
        ("length_collapse", K.RESPONSE_LENGTH_MEAN, 200.0, 4.0),
        ("length_collapse", K.TRL_COMPLETIONS_MEAN_LENGTH, 53.0, 4.5),
    ],
    ids=["entropy", "length-verl", "length-trl"],
)
def test_a_collapse_within_the_first_steps_is_found(kind, key, start, after, seed):
    h = _collapsed_at_step_2(key, start, after, seed=seed)
    (finding,) = [f for f in diagnose(h, kinds=[kind]).findings]
    assert finding.evidence["baseline"] >= 0.5 * start  # judged from the level before the collapse


@pytest.mark.parametrize("seed", range(4), ids=lambda s: f"seed{s}")
def test_a_length_that_falls_while_the_reward_rises_is_learning_not_collapse(seed):
    """From the limit to a fifth of it in two steps, as a policy learns to stop, with the reward
    rising: not a collapse."""
    h = _collapsed_at_step_2(K.RESPONSE_LENGTH_MEAN, 1024.0, 200.0, seed=seed)
    steps, _ = h[K.SCORE_MEAN]
    h[K.SCORE_MEAN] = (steps, np.linspace(0.1, 0.8, steps.size))
    assert not diagnose(h, kinds=["length_collapse"]).findings


@pytest.mark.parametrize(
    ("kind", "key", "values", "expected"),
    [
        ("length_truncation", K.RESPONSE_LENGTH_CLIP_RATIO, [0.97, 1.0, 0.99], ERROR),
        ("length_truncation", K.TRL_COMPLETIONS_CLIPPED_RATIO, [0.2, 0.5, 0.6], WARNING),
        ("length_truncation", K.TRL_COMPLETIONS_CLIPPED_RATIO, [0.2, 0.97, 1.0], ERROR),
        ("length_truncation", K.RESPONSE_LENGTH_CLIP_RATIO, [0.97, 0.02, 0.99], None),
        ("length_truncation", K.RESPONSE_LENGTH_CLIP_RATIO, [1.0], ERROR),
        ("advantage_collapse", K.TRL_FRAC_REWARD_ZERO_STD, [1.0, 1.0, 0.98, 1.0], ERROR),
        ("advantage_collapse", K.TRL_FRAC_REWARD_ZERO_STD, [0.3, 0.4], None),
        ("length_truncation", K.RESPONSE_LENGTH_CLIP_RATIO, [0.9, 0.9, 0.9, 0.9, 0.9, 0.9], "early"),
    ],
    ids=[
        "all-cut-error",
        "all-above-level-warning",
        "rose-to-near-total-error",
        "one-point-fine",
        "one-step",
        "no-spread",
        "spread",
        "first-steps-of-a-random-policy",
    ],
)
def test_a_run_of_a_few_logged_steps_is_judged_on_every_point(kind, key, values, expected):
    """Under k points no persistence can be judged, yet every point above the level is damning
    (truncation only past the first steps, where a fresh policy has not learnt to stop yet)."""
    steps = np.arange(1, len(values) + 1) * (1 if expected == "early" else 50)  # logged every 50 steps
    expected = None if expected == "early" else expected
    diagnosis = diagnose({key: (steps, np.asarray(values))}, kinds=[kind])
    found = [f for f in diagnosis.findings if f.kind == kind]
    if expected is None:
        assert not found and [s.kind for s in diagnosis.skipped] == [kind]  # still too short to judge
    else:
        (finding,) = found
        assert finding.severity == expected and finding.evidence["every_point_of"] == len(values)


# --- reward gaming from training signals alone ------------------------------------------------


def _saturating(
    *, seed, n=120, top=2.5, rise_until=40, kl_from=None, key=K.TRL_KL, kl_level=0.01, growth=8.0
):
    """A reward (unbounded: a sum of reward functions) that rises to ``top`` by ``rise_until``
    and stays; ``key`` (the KL by default) at ``kl_level``, running away from ``kl_from`` on."""
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=np.float64)
    reward = 0.5 + (top - 0.5) * np.clip(t / rise_until, 0.0, 1.0) + rng.normal(0.0, 0.05, n)
    other = kl_level * np.exp(rng.normal(0.0, 0.1, n))
    if kl_from is not None:
        other *= np.where(t >= kl_from, np.minimum(np.exp((t - kl_from) / 5.0), growth), 1.0)
    return {K.TRL_REWARD: (t.astype(int), reward), key: (t.astype(int), other)}


@pytest.mark.parametrize("seed", range(4), ids=lambda s: f"seed{s}")
@pytest.mark.parametrize(
    ("key", "level"),
    [(K.TRL_KL, 0.02), (K.TRL_COMPLETIONS_MEAN_LENGTH, 300.0), (K.ROLLOUT_CORR_TRAINING_PPL, 1.3)],
    ids=["kl", "length", "perplexity"],
)
def test_reward_gaming_a_saturated_reward_while_a_signal_runs_away(seed, key, level):
    h = _saturating(seed=seed, kl_from=80, key=key, kl_level=level)
    (finding,) = diagnose(h, kinds=["reward_gaming"]).findings
    assert finding.severity == WARNING and abs(finding.step - 80) <= 10, finding
    signal = {K.TRL_KL: "kl_ref", K.TRL_COMPLETIONS_MEAN_LENGTH: "response_length"}.get(key, "perplexity")
    assert finding.evidence["running_away"] == [signal]
    assert finding.evidence["saturated_at"] < 80


@pytest.mark.parametrize("seed", range(4), ids=lambda s: f"seed{s}")
def test_reward_gaming_not_on_a_converged_run_with_a_stable_kl(seed):
    """A run continued past convergence: the reward at its top, a KL well above the floor that stays."""
    assert not diagnose(_saturating(seed=seed, kl_level=0.3), kinds=["reward_gaming"]).findings


@pytest.mark.parametrize("seed", range(4), ids=lambda s: f"seed{s}")
def test_reward_gaming_not_while_the_kl_buys_reward(seed):
    """The KL grows while the reward still rises: the policy moves to gain reward."""
    h = _saturating(seed=seed, n=120, rise_until=119, kl_from=60)
    assert not diagnose(h, kinds=["reward_gaming"]).findings


def test_reward_gaming_leaves_runs_with_validation_to_reward_hacking():
    h = _saturating(seed=0, kl_from=80)
    h[K.TRL_EVAL_REWARD] = (np.arange(0, 120, 10), np.full(12, 0.5))
    (skipped,) = [s for s in diagnose(h, kinds=["reward_gaming"]).skipped]
    assert "validation is logged (eval_reward): reward_hacking judges this run" in skipped.why


def _at_ceiling_then_entropy_collapse(*, seed, n=100, solved=None):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    reward = np.clip(0.96 + rng.normal(0.0, 0.02, n), 0.0, 1.0)
    entropy = 0.8 * np.where(t >= 50, np.maximum(np.exp(-(t - 50) / 4.0), 0.01), 1.0)
    h = {K.SCORE_MEAN: (t, reward), K.ACTOR_ENTROPY: (t, entropy * np.exp(rng.normal(0, 0.05, n)))}
    if solved is not None:
        h[K.GRPO_FRAC_ALL_SOLVED] = (t, np.full(n, solved))
    return h


@pytest.mark.parametrize("seed", range(4), ids=lambda s: f"seed{s}")
def test_reward_gaming_a_reward_at_its_ceiling_while_the_entropy_collapses(seed):
    (finding,) = diagnose(_at_ceiling_then_entropy_collapse(seed=seed), kinds=["reward_gaming"]).findings
    assert finding.severity == WARNING and finding.evidence["running_away"] == ["entropy"]
    assert 45 <= finding.step <= 62


def test_reward_gaming_no_entropy_arm_when_the_groups_are_solved():
    h = _at_ceiling_then_entropy_collapse(seed=0, solved=0.8)
    assert not diagnose(h, kinds=["reward_gaming"]).findings


def test_reward_gaming_two_signals_running_away_is_an_error():
    run = plant(healthy_run(N_STEPS, seed=0), "reward_gaming", ONSET)
    (finding,) = diagnose(to_rows(run), kinds=["reward_gaming"]).findings
    assert finding.severity == ERROR
    assert finding.evidence["running_away"] == ["kl_ref", "response_length"]


def test_kl_drift_not_when_the_kl_doubles_within_the_noise_of_the_reference():
    """The window before is floored at min_kl: 0.003 -> 0.012 nats over a plateau is no drift."""
    rng = np.random.default_rng(0)
    t = np.arange(120)
    kl = np.where(t < 60, 0.003, 0.012) * np.exp(rng.normal(0, 0.1, 120))
    reward = 1.0 + rng.normal(0, 0.05, 120)
    h = {K.TRL_KL: (t, kl), K.TRL_REWARD: (t, reward)}
    assert not diagnose(h, kinds=["kl_drift"]).findings
    (finding,) = diagnose({**h, K.TRL_KL: (t, kl * 10)}, kinds=["kl_drift"]).findings
    assert finding.evidence["compared_with"] == "the window before"


def test_reward_gaming_not_on_the_shipped_demo_even_without_its_validation():
    """The demo solves its task (reward ~0.95, entropy to a few percent): not gaming, with or
    without the validation that would leave it to reward_hacking."""
    read = load_history(Path(__file__).parent / "data" / "demo_shipped.jsonl")
    history = read[0] if isinstance(read, tuple) else read
    training_only = {
        k: v for k, v in history.items() if not k.startswith((K.VAL_CORE_PREFIX, K.VAL_AUX_PREFIX))
    }
    assert not any(k.startswith(K.VAL_CORE_PREFIX) for k in training_only)
    for h in (history, training_only):
        d = diagnose(h)
        assert not d.has_error and len(d.findings) <= 1, summary(d)
        assert "reward_gaming" not in {f.kind for f in d.findings}
    assert "reward_gaming" not in {s.kind for s in diagnose(training_only).skipped}


# --- the detectors of issue 28: advantage drift, zero learning signal, bimodal solve rates, NaN grads --


def with_group_shares(run, seed):
    """A verl GRPO run as the rlmetrics group statistics and verl's data metrics log it: the share
    of groups none solved (the zero-spread groups that are not all solved) and the advantages'
    max and min (GRPO's normalised advantages span about +-2)."""
    rng = np.random.default_rng(seed)
    n = len(run[K.TRACKING_STEP])
    zero, solved = np.array(run[K.GRPO_FRAC_REWARD_ZERO_STD]), np.array(run[K.GRPO_FRAC_ALL_SOLVED])
    run[K.GRPO_FRAC_NONE_SOLVED] = [float(x) for x in np.clip(zero - solved, 0.0, 1.0)]
    run[K.ADV_MAX] = [float(x) for x in 2.0 * np.exp(rng.normal(0, 0.1, n))]
    run[K.ADV_MIN] = [float(x) for x in -2.0 * np.exp(rng.normal(0, 0.1, n))]
    return run


def set_from(run, key, onset, values):
    run[key] = [float(v) if i >= onset else old for i, (old, v) in enumerate(zip(run[key], values))]


@pytest.mark.parametrize("solved", [False, True], ids=["learning", "solved"])
@pytest.mark.parametrize("n_steps", [80, 300], ids=lambda n: f"{n}steps")
def test_healthy_runs_with_group_shares_and_advantage_range_stay_healthy(n_steps, solved):
    new_arms = ("advantage_drift", "no_learning_signal", "advantage_collapse")
    for seed in range(30 if not solved else 20):
        run = with_group_shares(healthy_run(n_steps, seed=seed, solved=solved), seed)
        d = diagnose(to_rows(run))
        assert_healthy(d)
        assert [f for f in d.findings if f.kind in new_arms] == [], summary(d)


@pytest.mark.parametrize(
    ("mean", "with_range", "severity"),
    [(-0.8, False, ERROR), (-0.8, True, WARNING), (1.5, True, ERROR), (0.1, False, None)],
    ids=["unit-scale", "half-range", "half-range-error", "small"],
)
@pytest.mark.parametrize("seed", [0, 1, 2], ids=lambda s: f"seed{s}")
def test_advantage_drift_is_found_near_its_onset(seed, mean, with_range, severity):
    run = healthy_run(N_STEPS, seed=seed)
    if with_range:
        run = with_group_shares(run, seed)
    rng = np.random.default_rng(seed)
    set_from(run, K.ADV_MEAN, ONSET, mean + rng.normal(0, 0.02, N_STEPS))
    found = diagnose(to_rows(run), kinds=["advantage_drift"]).findings
    assert [f.severity for f in found] == ([severity] if severity else [])
    if found:
        assert abs(found[0].step - ONSET) <= TOLERANCE and found[0].evidence["mean"] == pytest.approx(
            mean, abs=0.05
        )
        assert found[0].evidence["scale"] == pytest.approx(2.0 if with_range else 1.0, rel=0.1)


@pytest.mark.parametrize(
    ("plant_it", "severity"),
    [
        pytest.param(
            lambda run: set_from(run, K.GRPO_FRAC_REWARD_ZERO_STD, ONSET, [1.0] * N_STEPS),
            ERROR,
            id="zero-spread",
        ),
        pytest.param(
            lambda run: (
                set_from(run, K.GRPO_FRAC_REWARD_ZERO_STD, ONSET, [1.0] * N_STEPS),
                set_from(run, K.GRPO_FRAC_ALL_SOLVED, ONSET, [0.9] * N_STEPS),
            ),
            WARNING,
            id="zero-spread-solved",
        ),
        pytest.param(
            lambda run: (
                set_from(run, K.ADV_MAX, ONSET, [0.0] * N_STEPS),
                set_from(run, K.ADV_MIN, ONSET, [0.0] * N_STEPS),
            ),
            ERROR,
            id="zero-advantages",
        ),
    ],
)
@pytest.mark.parametrize("seed", [0, 1], ids=lambda s: f"seed{s}")
def test_a_learning_signal_that_stays_at_zero_is_found(seed, plant_it, severity):
    run = with_group_shares(healthy_run(N_STEPS, seed=seed), seed)
    plant_it(run)
    (finding,) = diagnose(to_rows(run), kinds=["no_learning_signal"]).findings
    assert (finding.severity, finding.step) == (severity, ONSET)
    assert finding.evidence["window"] == [ONSET, ONSET + 4] and finding.evidence["consecutive_steps"] == 5


def test_four_zero_spread_steps_in_a_row_are_not_yet_a_lost_signal():
    run = with_group_shares(healthy_run(N_STEPS, seed=0), 0)
    run[K.GRPO_FRAC_REWARD_ZERO_STD][ONSET : ONSET + 4] = [1.0] * 4
    assert diagnose(to_rows(run), kinds=["no_learning_signal"]).findings == ()


@pytest.mark.parametrize("seed", [0, 1, 2], ids=lambda s: f"seed{s}")
def test_a_bimodal_solve_rate_is_an_advantage_collapse_warning(seed):
    """Half the prompts always solved, half never: few groups carry a gradient, none of them unsolved."""
    run = with_group_shares(healthy_run(N_STEPS, seed=seed), seed)
    rng = np.random.default_rng(seed)
    top, bottom = 0.45 + rng.normal(0, 0.02, N_STEPS), 0.5 + rng.normal(0, 0.02, N_STEPS)
    set_from(run, K.GRPO_FRAC_ALL_SOLVED, ONSET, top)
    set_from(run, K.GRPO_FRAC_NONE_SOLVED, ONSET, bottom)
    set_from(run, K.GRPO_FRAC_REWARD_ZERO_STD, ONSET, top + bottom)
    (finding,) = diagnose(to_rows(run), kinds=["advantage_collapse"]).findings
    assert finding.severity == WARNING and abs(finding.step - ONSET) <= 2
    assert finding.evidence["bimodal"] is True and finding.evidence["middle"] < 0.1
    assert finding.metric == (K.GRPO_FRAC_ALL_SOLVED, K.GRPO_FRAC_NONE_SOLVED)


def with_solve_rates(run, onset, probabilities, seed, *, groups=64, size=8):
    """From ``onset`` on, the group statistics of batches whose prompts have the solve
    probabilities ``probabilities(rng, groups)``, as ``compute_group_metrics`` logs them."""
    from rlmetrics.policy.groups import compute_group_metrics

    rng = np.random.default_rng(seed)
    uids = np.repeat(np.arange(groups), size)
    for i in range(onset, len(run[K.TRACKING_STEP])):
        rewards = (rng.random(groups * size) < np.repeat(probabilities(rng, groups), size)).astype(float)
        m = compute_group_metrics(uids, rewards)
        for key in (K.GRPO_FRAC_ALL_SOLVED, K.GRPO_FRAC_NONE_SOLVED, K.GRPO_FRAC_REWARD_ZERO_STD):
            run[key][i] = m[key]
        run.setdefault(K.GRPO_SOLVE_RATE_DIP_PVALUE, [1.0] * len(run[K.TRACKING_STEP]))[i] = m[
            K.GRPO_SOLVE_RATE_DIP_PVALUE
        ]
    return run


def two_modes(rng, groups):
    """40% of the prompts always solved, 40% never, 20% in between (uniform): the middle is
    not empty (the share test misses it), the split is there (the dip test sees it)."""
    ends = groups * 2 // 5
    return rng.permutation(np.r_[np.ones(ends), np.zeros(ends), rng.random(groups - 2 * ends)])


def one_mode(rng, groups):
    """Prompts of every difficulty, most near one half: unimodal."""
    return rng.beta(2.0, 2.0, groups)


@pytest.mark.parametrize("seed", [0, 1, 2], ids=lambda s: f"seed{s}")
def test_the_dip_test_of_the_solve_rates_finds_a_split_the_shares_miss(seed):
    """The rule reads the dip test where the group statistics log it: two modes with a fifth of
    the groups between them (over middle_level, so the share test alone is silent) are found."""
    run = with_solve_rates(with_group_shares(healthy_run(N_STEPS, seed=seed), seed), ONSET, two_modes, seed)
    middle = 1.0 - np.array(run[K.GRPO_FRAC_ALL_SOLVED]) - np.array(run[K.GRPO_FRAC_NONE_SOLVED])
    assert np.median(middle[ONSET:]) > THRESHOLDS["advantage_collapse"]["middle_level"]
    (finding,) = diagnose(to_rows(run), kinds=["advantage_collapse"]).findings
    assert finding.severity == WARNING and abs(finding.step - ONSET) <= 2
    assert finding.evidence["bimodal"] is True and finding.evidence["test"] == "dip"
    assert finding.evidence["dip_pvalue"] < THRESHOLDS["advantage_collapse"]["dip_alpha"]
    assert finding.metric == (K.GRPO_FRAC_ALL_SOLVED, K.GRPO_FRAC_NONE_SOLVED, K.GRPO_SOLVE_RATE_DIP_PVALUE)
    without = {k: v for k, v in run.items() if k != K.GRPO_SOLVE_RATE_DIP_PVALUE}
    assert diagnose(to_rows(without), kinds=["advantage_collapse"]).findings == ()  # shares alone


@pytest.mark.parametrize("seed", [0, 1], ids=lambda s: f"seed{s}")
def test_unimodal_solve_rates_or_modes_off_the_edges_are_not_bimodal(seed):
    run = with_solve_rates(with_group_shares(healthy_run(N_STEPS, seed=seed), seed), ONSET, one_mode, seed)
    assert diagnose(to_rows(run), kinds=["advantage_collapse"]).findings == ()

    def inner_modes(rng, groups):  # two modes at 0.2 and 0.8: split, but not at the edges
        return rng.permutation(np.r_[np.full(groups // 2, 0.2), np.full(groups - groups // 2, 0.8)])

    run = with_solve_rates(with_group_shares(healthy_run(N_STEPS, seed=seed), seed), ONSET, inner_modes, seed)
    assert diagnose(to_rows(run), kinds=["advantage_collapse"]).findings == ()


@pytest.mark.parametrize(
    ("bad_steps", "severity", "repeated_from"),
    [
        ([60], WARNING, None),
        ([60, 64], WARNING, None),
        ([60, 64, 68], ERROR, 68),
        ([60, 75, 90], WARNING, None),
    ],
    ids=["once", "twice", "3-of-10", "3-spread-out"],
)
def test_nonfinite_gradients_alone_are_an_error_once_repeated(bad_steps, severity, repeated_from):
    run = healthy_run(100, seed=0)
    for step in bad_steps:
        run[K.ACTOR_GRAD_NORM][step] = math.inf
    (finding,) = diagnose(to_rows(run), kinds=["nonfinite"]).findings
    assert (finding.severity, finding.step) == (severity, 60)
    assert finding.evidence["gradient_only"] is True and finding.evidence["repeated_from"] == repeated_from
    run[K.ACTOR_PG_LOSS][80] = math.nan  # a loss too: an error at once
    (finding,) = diagnose(to_rows(run), kinds=["nonfinite"]).findings
    assert finding.severity == ERROR and "gradient_only" not in finding.evidence


# --- off-policy staleness and text statistics ------------------------------------------------------

#: How far from the planted step these rules may date a finding: they compare each point with a
#: reference level (the best window so far, the window before) and the planted changes reach
#: their level within 5 steps; staleness_growth dates the break of a fitted flat-then-rising line.
NEW_TOLERANCE = 5
STALENESS_VOCABULARIES = sorted(OFF_POLICY_KEYS)
#: (kind, vocabulary): the staleness kinds in every vocabulary that logs what they read (slime
#: logs no dropped samples; only rlmetrics logs the trained and generated lengths).
PLANTED_NEW = [
    *(("staleness_growth", v) for v in STALENESS_VOCABULARIES),
    *(("staleness_cost", v) for v in STALENESS_VOCABULARIES),
    *(("staleness_drops", v) for v in STALENESS_VOCABULARIES if "dropped" in OFF_POLICY_KEYS[v]),
    ("staleness_length_bias", "rlmetrics"),
    *((kind, "rlmetrics") for kind in OFF_POLICY_AND_TEXT_KINDS if not kind.startswith("staleness")),
]


def async_run(n_steps, *, seed, vocabulary="rlmetrics"):
    """A healthy verl GRPO run with the staleness columns of ``vocabulary`` and the text columns."""
    run = healthy_run(n_steps, seed=seed)
    run.update(off_policy_columns(n_steps, seed=seed, vocabulary=vocabulary))
    run.update(text_columns(n_steps, seed=seed))
    return run


def found_kind(run, kind):
    """The findings of ``kind`` in a run (columns with a step) or a history."""
    history = to_history(run) if K.TRACKING_STEP in run else run
    return [f for f in diagnose(history, kinds=[kind]).findings if f.kind == kind]


@pytest.mark.parametrize("seed", [0, 1, 2], ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("onset", [60, 180, 240], ids=lambda o: f"onset{o}")
@pytest.mark.parametrize(("kind", "vocabulary"), PLANTED_NEW, ids=[f"{k}-{v}" for k, v in PLANTED_NEW])
def test_off_policy_and_text_kinds_are_found_near_their_onset(kind, vocabulary, onset, seed):
    run = plant_columns(async_run(N_STEPS, seed=seed, vocabulary=vocabulary), kind, onset, seed=seed)
    d = diagnose(to_rows(run))
    found = [f for f in d.findings if f.kind == kind]
    assert found, summary(d)
    assert abs(found[0].step - onset) <= NEW_TOLERANCE, summary(d)
    assert found[0].advice and found[0].evidence
    json.dumps(d.to_dict(), allow_nan=False)
    if kind in ("staleness_growth", "staleness_cost"):  # read under the vocabulary's own name
        assert OFF_POLICY_KEYS[vocabulary]["lag"] in found[0].metric
    if kind == "staleness_drops":
        assert found[0].metric == (OFF_POLICY_KEYS[vocabulary]["dropped"],)


@pytest.mark.parametrize("vocabulary", STALENESS_VOCABULARIES)
@pytest.mark.parametrize("n_steps", [25, 80, 300], ids=lambda n: f"{n}steps")
def test_healthy_async_runs_with_text_statistics_stay_healthy(vocabulary, n_steps):
    """Over 10 seeds: a bounded lag with batch noise, random drops, early loops and truncation
    that fade, a format check being learnt: none of the new kinds, and the run healthy."""
    for seed in range(10):
        d = diagnose(to_rows(async_run(n_steps, seed=seed, vocabulary=vocabulary)))
        assert not [f for f in d.findings if f.kind in OFF_POLICY_AND_TEXT_KINDS], (seed, summary(d))
        assert_healthy(d)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(STALENESS_VOCABULARIES), st.floats(0.0, 0.1))
def test_extra_noise_on_the_new_columns_raises_no_finding(seed, vocabulary, sigma):
    rng = np.random.default_rng(seed)
    columns = off_policy_columns(N_STEPS, seed=seed, vocabulary=vocabulary) | text_columns(N_STEPS, seed=seed)
    noisy = {
        key: values
        if key == K.TRACKING_STEP
        else list(np.asarray(values) * np.exp(rng.normal(0, sigma, N_STEPS)))
        for key, values in columns.items()
    }
    assert diagnose(to_history(noisy), kinds=OFF_POLICY_AND_TEXT_KINDS).findings == ()


def _with_lag(values, *, seed):
    run = off_policy_columns(N_STEPS, seed=seed)
    run[K.STALENESS_LAG_MEAN] = list(values)
    return run


_T = np.arange(N_STEPS, dtype=np.float64)


@pytest.mark.parametrize("seed", range(4), ids=lambda s: f"seed{s}")
@pytest.mark.parametrize(
    "lag",
    [
        np.minimum(_T, 8.0),  # rlmetrics demo --off-policy-lag 8: the queue fills, then holds
        np.minimum(2.0 + 0.2 * np.maximum(_T - 100.0, 0.0), 20.0),  # grows, then the bound holds it
        np.full(N_STEPS, 6.0),  # high, but flat
        np.where(_T >= 150, 5.0, 2.0),  # a new bound, once
    ],
    ids=["queue-fills", "grows-to-a-bound", "high-and-flat", "one-jump"],
)
def test_a_bounded_lag_is_no_growth(lag, seed):
    noise = np.random.default_rng(seed).normal(0.0, 0.15, N_STEPS)
    assert found_kind(_with_lag(np.maximum(lag + noise, 0.0), seed=seed), "staleness_growth") == []


@pytest.mark.parametrize("seed", range(4), ids=lambda s: f"seed{s}")
def test_a_slow_growth_of_the_lag_to_the_end_is_found(seed):
    """1/20 of a version a step from step 150: 7.5 versions more by the end, an error past 8."""
    base = np.asarray(off_policy_columns(N_STEPS, seed=seed)[K.STALENESS_LAG_MEAN])
    (finding,) = found_kind(
        _with_lag(base + 0.05 * np.maximum(_T - 150.0, 0.0), seed=seed), "staleness_growth"
    )
    assert abs(finding.step - 150) <= NEW_TOLERANCE
    assert finding.severity == ERROR and finding.evidence["lag_now"] >= 8.0
    assert finding.evidence["growth_per_step"] == pytest.approx(0.05, rel=0.3)


@pytest.mark.parametrize(
    ("lag_rise", "kl_factor", "clip_share", "expected"),
    [
        (0.0, 4.0, None, None),  # the mismatch alone: rollout_mismatch's, not the lag's
        (3.0, 1.0, None, None),  # the lag alone, at no cost
        (3.0, 4.0, None, WARNING),
        (3.0, 4.0, 0.1, ERROR),  # the mismatch and the truncated weights rise with the lag
        (0.5, 4.0, None, None),  # half a version: within the lag's own level
    ],
    ids=["cost-alone", "lag-alone", "together", "two-costs", "half-a-version"],
)
def test_staleness_cost_needs_the_lag_and_a_cost_rising_together(lag_rise, kl_factor, clip_share, expected):
    run = off_policy_columns(N_STEPS, seed=3)
    after = _T >= ONSET
    run[K.STALENESS_LAG_MEAN] = list(np.asarray(run[K.STALENESS_LAG_MEAN]) + lag_rise * after)
    run[K.ROLLOUT_CORR_K3_KL] = list(np.asarray(run[K.ROLLOUT_CORR_K3_KL]) * np.where(after, kl_factor, 1.0))
    if clip_share is not None:
        share = np.asarray(run[K.ROLLOUT_CORR_IS_RATIO_FRACTION_HIGH])
        run[K.ROLLOUT_CORR_IS_RATIO_FRACTION_HIGH] = list(share + clip_share * after)
    found = found_kind(run, "staleness_cost")
    assert [f.severity for f in found] == ([] if expected is None else [expected])
    if found:
        assert abs(found[0].step - ONSET) <= NEW_TOLERANCE
        assert found[0].metric[0] == K.STALENESS_LAG_MEAN
        assert found[0].evidence["rank_correlation"] > 0.5
        assert found[0].evidence["rising_with_lag"] == (
            ["is_clip_share", "mismatch_kl"] if clip_share else ["mismatch_kl"]
        )


@pytest.mark.parametrize("key", [K.VERL_EVICTED_SAMPLES, K.PRIME_RL_OFF_POLICY_DROPPED])
def test_dropped_counts_from_none(key):
    """A peer's count per step, none dropped, then 3 a step: a rise (a count carries no batch size)."""
    counts = np.where(_T >= ONSET, 3.0, 0.0)
    (finding,) = found_kind({key: (np.arange(N_STEPS), counts)}, "staleness_drops")
    assert finding.step == ONSET and finding.evidence["level_before"] == {key: 0.0}
    one_off = np.where(_T == ONSET, 3.0, 0.0)  # one step with drops is no rise
    assert found_kind({key: (np.arange(N_STEPS), one_off)}, "staleness_drops") == []


def test_a_running_total_of_drops_is_read_as_its_increase():
    """verl's fully-async counter of dropped stale samples never resets: flat, then 3 more a step."""
    totals = np.cumsum(np.where(_T >= ONSET, 3.0, 0.0)) + 7.0  # 7 dropped before the window
    key = K.VERL_FULLY_ASYNC_DROPPED_STALE_SAMPLES
    (finding,) = found_kind({key: (np.arange(N_STEPS), totals)}, "staleness_drops")
    assert finding.step == ONSET and finding.evidence["level_before"] == {key: 0.0}
    steady = 7.0 + 2.0 * _T  # 2 a step from the start: a high level, not a rise
    assert found_kind({key: (np.arange(N_STEPS), steady)}, "staleness_drops") == []
    restarted = np.where(_T < ONSET, 2.0 * _T, 2.0 * (_T - ONSET))  # a resumed run's counter restarts
    assert found_kind({key: (np.arange(N_STEPS), restarted)}, "staleness_drops") == []


@pytest.mark.parametrize(
    ("factor", "severity", "shorter"),
    [(0.8, WARNING, True), (1.3, ERROR, False), (1.05, None, None)],
    ids=["trained-shorter", "trained-longer", "within-5pct"],
)
def test_length_bias_both_ways(factor, severity, shorter):
    run = off_policy_columns(N_STEPS, seed=0)
    trained = np.asarray(run[K.STALENESS_TRAINED_LENGTH_MEAN])
    run[K.STALENESS_TRAINED_LENGTH_MEAN] = list(np.where(_T >= ONSET, factor * trained, trained))
    found = found_kind(run, "staleness_length_bias")
    assert [f.severity for f in found] == ([] if severity is None else [severity])
    if found:
        assert found[0].step == ONSET and found[0].evidence["trained_shorter"] is shorter
        assert found[0].metric == (K.STALENESS_TRAINED_LENGTH_MEAN, K.STALENESS_GENERATED_LENGTH_MEAN)


TEXT_KINDS = [k for k in OFF_POLICY_AND_TEXT_KINDS if not k.startswith("staleness")]


@pytest.mark.parametrize("kind", TEXT_KINDS)
def test_text_findings_name_the_steps_of_their_samples(kind):
    """No samples reader yet: a finding names the steps whose sample tables show it."""
    (finding,) = found_kind(plant_columns(text_columns(N_STEPS, seed=1), kind, ONSET, seed=1), kind)
    steps = finding.evidence["sample_steps"]
    window = finding.evidence["window"]
    assert steps["onset"] == finding.step
    assert steps["before"] == finding.step - 1
    assert window[0] <= steps["worst"] <= window[1]


@pytest.mark.parametrize(
    ("kind", "key", "change", "severity"),
    [
        ("repetition_rise", K.TEXT_LOOP_RATIO, 0.15, WARNING),
        ("repetition_rise", K.TEXT_LOOP_RATIO, 0.35, ERROR),  # over 3x the 0.1 threshold
        ("repetition_rise", K.TEXT_LOOP_RATIO, 0.05, None),
        ("gibberish_rise", K.TEXT_COMPRESSION_RATIO_MEAN, 0.08, WARNING),
        ("gibberish_rise", K.TEXT_COMPRESSION_RATIO_MEAN, 0.02, None),
        ("format_failure_rise", K.TEXT_FORMAT_MATCH_RATIO, -0.15, WARNING),
        ("format_failure_rise", K.TEXT_FORMAT_MATCH_RATIO, -0.05, None),
        ("stop_reason_shift", K.TEXT_STOP_REASON_LENGTH, 0.3, WARNING),
        ("stop_reason_shift", K.TEXT_STOP_REASON_LENGTH, 0.1, None),
        ("stop_reason_shift", K.TEXT_STOP_REASON_ERROR, 0.15, WARNING),
        ("stop_reason_shift", K.TEXT_STOP_REASON_ERROR, 0.6, ERROR),  # errors take over
    ],
    ids=[
        "loops-up-0.15",
        "loops-up-0.35",
        "loops-up-0.05",
        "compression-up-0.08",
        "compression-up-0.02",
        "format-down-0.15",
        "format-down-0.05",
        "length-stops-up-0.3",
        "length-stops-up-0.1",
        "error-stops-up-0.15",
        "error-stops-up-0.6",
    ],
)
def test_text_rules_at_their_thresholds(kind, key, change, severity):
    for seed in range(3):
        run = text_columns(N_STEPS, seed=seed)
        x = np.asarray(run[key])
        run[key] = list(np.where(_T >= ONSET, x + change, x))
        found = found_kind(run, kind)
        assert [f.severity for f in found] == ([] if severity is None else [severity]), seed
        if found:
            assert key in found[0].metric and abs(found[0].step - ONSET) <= 1


@pytest.mark.parametrize("seed", range(4), ids=lambda s: f"seed{s}")
def test_a_slow_rise_of_truncation_or_one_bad_batch_is_no_stop_reason_shift(seed):
    run = text_columns(N_STEPS, seed=seed)
    x = np.asarray(run[K.TEXT_STOP_REASON_LENGTH])
    run[K.TEXT_STOP_REASON_LENGTH] = list(x + 0.4 * np.clip((_T - 100.0) / 150.0, 0.0, 1.0))  # a drift
    errors = np.asarray(run[K.TEXT_STOP_REASON_ERROR])
    errors[ONSET] = 0.9  # the engine failed one batch
    run[K.TEXT_STOP_REASON_ERROR] = list(errors)
    assert found_kind(run, "stop_reason_shift") == []


def test_the_new_rules_say_what_they_need():
    lag_only = {K.PRIME_RL_OFF_POLICY_MEAN: (np.arange(50), np.full(50, 2.0))}
    skipped = {s.kind: s.why for s in diagnose(lag_only, kinds=OFF_POLICY_AND_TEXT_KINDS).skipped}
    assert set(skipped) == set(OFF_POLICY_AND_TEXT_KINDS) - {"staleness_growth"}
    assert "needs a mismatch KL" in skipped["staleness_cost"]
    assert K.VERL_EVICTED_SAMPLES in skipped["staleness_drops"]
    assert "needs trained_length" in skipped["staleness_length_bias"]
    assert (
        "needs loop_ratio" in skipped["repetition_rise"] and K.TEXT_LOOP_RATIO in skipped["repetition_rise"]
    )
    assert "stop_length" in skipped["stop_reason_shift"]
    short = diagnose({K.TEXT_LOOP_RATIO: (np.arange(5), np.zeros(5))}, kinds=["repetition_rise"])
    assert short.skipped[0].why.startswith("run too short")


# --- diagnose(cache=): a grown run diagnosed over its new points, the same findings -------------

CACHE_RUNS = [
    ("verl", "grpo", None),
    ("trl", "grpo", None),
    ("verl", "ppo", "critic_failure"),
    *(("verl", "grpo", kind) for kind in KINDS_BY_VOCABULARY["verl", "grpo"]),
    ("trl", "grpo", "advantage_collapse"),
]


CACHE_ASYNC = PLANTED_NEW[::2]


def _grown_diagnoses(history, cuts, **kwargs):
    """The diagnosis of each prefix of ``history`` (the first ``c`` steps), cached and fresh."""
    from rlmetrics.health.smoothing import SeriesCache

    cache = SeriesCache()
    for c in cuts:
        prefix = {k: (s[s < c], v[s < c]) for k, (s, v) in history.items()}
        yield diagnose(prefix, cache=cache, **kwargs), diagnose(prefix, **kwargs)
    assert cache.extended > 0  # the windows of the grown run were computed over its new points


def _cuts(seed, n):
    """A run read as a watch reads it: a first read, then a few steps at a time, one at a time."""
    rng = np.random.default_rng(seed)
    return np.unique(np.concatenate([[n // 3], n // 3 + np.cumsum(rng.integers(1, 12, 40)), [n]]).clip(1, n))


@pytest.mark.parametrize("seed", [0, 1], ids=lambda s: f"seed{s}")
@pytest.mark.parametrize(
    ("vocabulary", "algo", "kind"), CACHE_RUNS, ids=[f"{v}-{a}-{k or 'healthy'}" for v, a, k in CACHE_RUNS]
)
def test_a_cached_diagnosis_of_a_grown_run_equals_a_fresh_one(vocabulary, algo, kind, seed):
    run = healthy_run(N_STEPS, seed=seed, vocabulary=vocabulary, algo=algo)
    if kind is not None:
        run = plant(run, kind, ONSET, seed=seed)
    history = to_history(run)
    kinds_seen = set()
    for cached, fresh in _grown_diagnoses(history, _cuts(seed, N_STEPS)):
        assert cached == fresh
        kinds_seen |= {f.kind for f in fresh.findings}
    assert kind is None or kind in kinds_seen  # the planted failure was among the findings compared


@pytest.mark.parametrize("seed", [0, 1], ids=lambda s: f"seed{s}")
@pytest.mark.parametrize(("kind", "vocabulary"), CACHE_ASYNC, ids=[f"{k}-{v}" for k, v in CACHE_ASYNC])
def test_a_cached_diagnosis_of_a_grown_async_run_equals_a_fresh_one(kind, vocabulary, seed):
    run = plant_columns(async_run(N_STEPS, seed=seed, vocabulary=vocabulary), kind, ONSET, seed=seed)
    history = to_history(run)
    rng = np.random.default_rng(seed)
    for key in list(history)[::5]:  # damaged points here and there
        s, v = history[key]
        v = v.copy()
        v[rng.integers(0, v.size, 3)] = [math.nan, math.inf, 0.0]
        history[key] = (s, v)
    for cached, fresh in _grown_diagnoses(history, _cuts(seed, N_STEPS)):
        assert cached == fresh


# --- a paste of a few steps (issue 23: real runs unseen), logs written here in their formats ---


def _verl_step(step: int, adv_max: float, adv_min: float) -> str:
    return (
        f"(TaskRunner pid=11) step:{step} - actor/pg_loss:0.000 - actor/grad_norm:0.004 - "
        f"critic/score/mean:0.8{step % 10} - critic/advantages/mean:0.000 - "
        f"critic/advantages/max:{adv_max:.3f} - critic/advantages/min:{adv_min:.3f} - "
        "response_length/mean:300.0 - response_length/clip_ratio:0.010 -"
    )


def _diagnosed(tmp_path: Path, text: str, kinds: list[str]):
    path = tmp_path / "pasted.log"
    path.write_text(text)
    with pytest.warns(RuntimeWarning, match="cut off at"):  # each record ends " -": cut
        history, _ = load_history(path)
    return diagnose(history, kinds=kinds)


@pytest.mark.parametrize(
    ("spread", "found"), [(0.0, True), (1.5, False)], ids=["every-advantage-zero", "advantages-spread"]
)
def test_a_few_steps_with_every_advantage_zero_are_no_learning_signal(tmp_path, spread, found):
    text = "\n".join(_verl_step(s, spread, -spread) for s in (40, 43)) + "\n"
    findings = _diagnosed(tmp_path, text, ["no_learning_signal"]).findings
    assert bool(findings) == found
    if found:
        (f,) = findings
        assert (f.severity, f.step, f.metric) == (ERROR, 40, (K.ADV_MAX, K.ADV_MIN))


def test_reward_std_exactly_zero_bounds_the_zero_spread_share(tmp_path):
    # one step, no frac_reward_zero_std logged: the mean group std 0.0 means no group has spread
    one = "{'loss': 0.0, 'grad_norm': 0.7, 'reward': 0.0, 'reward_std': 0.0, 'epoch': 0.05}\n"
    path = tmp_path / "one.log"
    path.write_text(one)
    history, _ = load_history(path)
    (f,) = diagnose(history, kinds=["advantage_collapse"]).findings
    assert f.severity == ERROR and f.evidence["lower_bound_from"] == K.TRL_REWARD_STD
    # a table of eleven steps where two steps have no spread: the bound is 0 elsewhere, no finding
    rows = [
        f"{s} | 0.000000 | {r:.6f} | {sd:.6f}"
        for s, r, sd in zip(
            range(1, 12), [-3, -1, 0, -4, -2, -3, -1, 2, 0, -1, -3], [1.5, 1.7, 0, 1.5, 0] + [1.6] * 6
        )
    ]
    path.write_text("\n".join(["Step | Training Loss | reward | reward_std", "-- | -- | -- | --", *rows]))
    history, _ = load_history(path)
    assert history["reward_std"][0].size == 11
    assert diagnose(history, kinds=["advantage_collapse", "no_learning_signal"]).findings == ()


@pytest.mark.parametrize(
    ("grads", "found"),
    [([0.0, 0.0, 0.0], True), ([6.2, 0.0], False), ([0.0], False)],
    ids=["every-gradient-zero", "one-zero-of-two", "one-point"],
)
def test_a_short_run_whose_every_gradient_is_exactly_zero_made_no_update(grads, found):
    history = {
        "grad_norm": (np.arange(1, len(grads) + 1), np.array(grads)),
        "loss": (np.arange(1, len(grads) + 1), np.zeros(len(grads))),
    }
    findings = diagnose(history, kinds=["no_learning_signal"]).findings
    assert bool(findings) == found
    if found:
        assert findings[0].severity == ERROR and findings[0].evidence["every_point_of"] == len(grads)


# --- a short run judged on its last points; an early collapse dated at its start (issue 23) ---

#: A TRL run logged at 4 steps that failed (a DAPO run of a VLM): the gradient exactly 0 from the
#: second logged step, almost every completion cut at the limit, the entropy from 1.03 to 0.01.
_DAPO_SHORT = [
    (-0.0447, 0.302, 142.7, 0.296875, 1.875, 0.4, 1.0277),
    (-0.0078, 0.0, 253.8, 0.965625, 0.49375, 0.58125, 0.11271),
    (0.0, 0.0, 255.76, 0.9953125, 0.925, 0.58125, 0.008489),
    (0.0, 0.0, 255.61, 0.9953125, 0.9375, 0.55, 0.012476),
]


def _trl_printed_log(rows: list[tuple[float, ...]], total: int = 43) -> str:
    """TRL's printed dicts (no step number), each after tqdm's redraw of its progress bar."""
    lines = []
    for i, (loss, grad, length, clipped, reward, zero_std, entropy) in enumerate(rows, start=1):
        done = 10 * i
        record = {
            "loss": loss,
            "grad_norm": grad,
            "learning_rate": 1e-5 * (1 - done / total),
            "completions/mean_length": length,
            "completions/clipped_ratio": clipped,
            "reward": reward,
            "reward_std": 1.2,
            "frac_reward_zero_std": zero_std,
            "entropy": entropy,
            "epoch": round(done / total, 2),
        }
        lines.append(f" {100 * done // total}%|##        | {done}/{total} [14:12<44:45, 81.39s/it]")
        lines.append(f"                                               {record!r}")
    return "\n".join(lines) + "\n"


def test_a_short_failed_trl_run_is_judged_on_what_its_points_show(tmp_path):
    path = tmp_path / "dapo_short.log"
    path.write_text(_trl_printed_log(_DAPO_SHORT))
    history, fmt = load_history(path)
    assert fmt == "trl-printed" and history[K.TRL_GRAD_NORM][0].size == 4
    findings = {f.kind: f for f in diagnose(history).findings}
    assert {kind: (f.severity, f.step) for kind, f in findings.items()} == {
        "length_truncation": (ERROR, 2),  # near total from the second point, after 0.30
        "no_learning_signal": (ERROR, 2),  # exactly 0 at the last 3 of 4 points
        "entropy_collapse": (ERROR, 3),  # under 5% (then 2%) of the first point at the last 2
    }
    assert findings["no_learning_signal"].evidence["zero_points"] == 3
    assert findings["length_truncation"].evidence["last_points"] == 3
    assert findings["entropy_collapse"].evidence["baseline"] == pytest.approx(1.0277)


@pytest.mark.parametrize(
    ("kind", "key", "values", "expected"),
    [
        ("no_learning_signal", K.TRL_GRAD_NORM, [0.3, 0.0, 0.0, 0.0], ERROR),
        ("no_learning_signal", K.TRL_GRAD_NORM, [0.3, 0.0, 0.0], ERROR),
        ("no_learning_signal", K.TRL_GRAD_NORM, [47.8, 0.0, 404.0, 0.0, 0.0], None),
        ("no_learning_signal", K.TRL_GRAD_NORM, [0.3, 0.2, 0.0], None),
        ("entropy_collapse", K.TRL_ENTROPY, [1.0, 0.11, 0.0085, 0.012], ERROR),
        ("entropy_collapse", K.TRL_ENTROPY, [1.0, 0.04, 0.03], WARNING),
        ("entropy_collapse", K.TRL_ENTROPY, [1.0, 0.6, 0.4, 0.3, 0.25], None),
        ("entropy_collapse", K.TRL_ENTROPY, [1.0, 0.3, 0.2, 0.01], None),
        ("entropy_collapse", K.TRL_ENTROPY, [1.0, 0.01], None),
        ("length_truncation", K.TRL_COMPLETIONS_CLIPPED_RATIO, [0.3, 0.97, 0.995, 0.995], ERROR),
        ("length_truncation", K.TRL_COMPLETIONS_CLIPPED_RATIO, [0.02, 0.95, 0.99], ERROR),
        ("length_truncation", K.TRL_COMPLETIONS_CLIPPED_RATIO, [0.95, 0.97, 0.99], None),
        ("length_truncation", K.TRL_COMPLETIONS_CLIPPED_RATIO, [0.3, 0.1, 0.95], None),
        ("length_truncation", K.TRL_COMPLETIONS_CLIPPED_RATIO, [0.3, 0.6, 0.85, 0.88], None),
    ],
    ids=[
        "grad-zero-last-3-of-4",
        "grad-zero-last-2-of-3",
        "grad-zeros-interleaved",
        "grad-one-zero-at-the-end",
        "entropy-fell-over-99pct",
        "entropy-fell-96pct-warning",
        "entropy-fell-75pct",
        "entropy-one-low-point-at-the-end",
        "entropy-two-points",
        "truncation-rose-to-near-total",
        "truncation-from-2pct-to-near-total",
        "truncation-near-total-from-the-first-point",
        "truncation-near-total-at-the-last-point-only",
        "truncation-high-not-near-total",
    ],
)
def test_a_short_run_is_judged_on_its_last_points(kind, key, values, expected):
    """A run too short for a rule's window (steps only counted, as TRL's printed dicts are): the
    stretch that ends it, 2 points at least and half of them, against an absolute level or its
    first point; the first points of a fresh policy (all truncated) are not judged."""
    steps = np.arange(1, len(values) + 1)
    found = diagnose({key: (steps, np.asarray(values))}, kinds=[kind]).findings
    assert (found[0].severity if found else None) == expected


@pytest.mark.parametrize("seed", range(4), ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("n_steps", [3, 4, 5, 7], ids=lambda n: f"{n}steps")
@pytest.mark.parametrize("vocabulary", ["verl", "trl"])
def test_the_first_steps_of_a_healthy_run_are_left_alone(vocabulary, n_steps, seed):
    """A healthy run's first few steps (entropy falling, truncation high while the policy has not
    learnt to stop, gradients nonzero): nothing to find on their last points."""
    d = diagnose(to_rows(healthy_run(n_steps, seed=seed, vocabulary=vocabulary)))
    assert d.findings == ()


@pytest.mark.parametrize("n_steps", range(8, 21), ids=lambda n: f"{n}steps")
@pytest.mark.parametrize(("vocabulary", "algo"), VOCABULARIES, ids=[f"{v}-{a}" for v, a in VOCABULARIES])
def test_a_healthy_run_cut_within_its_early_truncation_gets_no_error(vocabulary, algo, n_steps):
    """Cut before step 20, while its fresh policy still truncates (0.4-0.8): a warning at most
    (an error downgraded names the early run); the same truncation at step 20 is an error."""
    for seed in range(4):
        d = diagnose(to_rows(healthy_run(n_steps, seed=seed, vocabulary=vocabulary, algo=algo)))
        assert_healthy(d)
    late = np.arange(11, 21)  # ten points, the last at step 20
    (found,) = diagnose(
        {K.RESPONSE_LENGTH_CLIP_RATIO: (late, np.full(10, 0.5))}, kinds=["length_truncation"]
    ).findings
    assert found.severity == ERROR and "early_run" not in found.evidence
    early = late - 2  # the same, the last at step 18
    (found,) = diagnose(
        {K.RESPONSE_LENGTH_CLIP_RATIO: (early, np.full(10, 0.5))}, kinds=["length_truncation"]
    ).findings
    assert found.severity == WARNING and found.evidence["early_run"] is True


@pytest.mark.parametrize("seed", range(4), ids=lambda s: f"seed{s}")
@pytest.mark.parametrize(
    ("key", "start", "after"),
    [(K.RESPONSE_LENGTH_MEAN, 300.0, 8.0), (K.TRL_COMPLETIONS_MEAN_LENGTH, 53.0, 4.5)],
    ids=["verl", "trl"],
)
def test_an_early_length_collapse_is_dated_at_its_start(key, start, after, seed):
    """A length collapse from step 3, the reward flat: confirmed once the reward has its two
    windows (step 20 or so), dated at step 3."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, 41)
    length = np.where(steps < 3, start, after) * np.exp(rng.normal(0, 0.1, steps.size))
    h = {key: (steps, length), K.SCORE_MEAN: (steps, 0.3 + rng.normal(0, 0.02, steps.size))}
    (finding,) = diagnose(h, kinds=["length_collapse"]).findings
    assert finding.step == 3 and finding.evidence["window"][0] == 3
    assert finding.evidence["confirmed_at"] >= 2 * THRESHOLDS["length_collapse"]["n"]


def test_an_early_length_collapse_in_a_printed_trl_log_is_dated_at_its_start(tmp_path):
    rng = np.random.default_rng(0)
    lengths = [53.4, 53.0, *(4.5 * np.exp(rng.normal(0, 0.1, 38)))]
    rows = [(0.01, 0.3, length, 0.0, 2.4 + rng.normal(0, 0.3), 0.6, 0.5) for length in lengths]
    path = tmp_path / "collapse.log"
    path.write_text(_trl_printed_log(rows, total=400))
    history, _ = load_history(path)
    (finding,) = diagnose(history, kinds=["length_collapse"]).findings
    assert finding.step == 3 and finding.evidence["confirmed_at"] > 3

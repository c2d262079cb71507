"""Tests of rlmetrics.report.layout: metrics grouped and folded into panels, key panels, directions."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from report_runs import VAL_CORE, VAL_EXACT, by_source, category_runs, make_run
from rlmetrics import keys as K
from rlmetrics.report import (
    best_direction,
    fold_kind,
    group_metrics,
    plan,
)

# --- layout ------------------------------------------------------------------------------------------


def test_group_metrics_order():
    keys = [
        "perf/mfu",
        "zzz/a",
        "critic/score/mean",
        "loss",
        "val-core/x/acc/mean@4",
        "actor/pg_loss",
        "critic/advantages/max",
        "timing_s/gen",
    ]
    groups = group_metrics(keys)
    assert list(groups) == ["val-core", "critic", "actor", "timing_s", "perf", "zzz", "other"]
    assert groups["critic"] == ["critic/advantages/max", "critic/score/mean"]


_segment = st.sampled_from(["critic", "actor", "val-core", "perf", "grpo", "zzz", "aaa", "training"])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.builds("{}/{}".format, _segment, st.sampled_from(["x", "y/z"])), st.just("loss")))
)
def test_group_metrics_orders_known_groups_then_the_rest(keys):
    groups = group_metrics(keys)
    assert sorted(k for ks in groups.values() for k in ks) == sorted(set(keys))
    assert all(ks == sorted(ks) and all(K.group(k) == g for k in ks) for g, ks in groups.items())
    known = [g for g in groups if g in K.GROUP_ORDER]
    rest = [g for g in groups if g not in K.GROUP_ORDER and g != K.GROUP_OTHER]
    tail = [K.GROUP_OTHER] if K.GROUP_OTHER in groups else []
    assert list(groups) == sorted(known, key=K.GROUP_ORDER.index) + sorted(rest) + tail


@pytest.mark.parametrize(
    ("key", "direction"),
    [
        ("val-core/gsm8k/acc/mean@8", "max"),
        ("val-core/gsm8k/acc/best@8/mean", "max"),
        ("val-aux/gsm8k/score/maj@4/mean", "max"),
        ("val-exact/gsm8k/acc/pass@4", "max"),
        ("val-exact/gsm8k/acc/pass^4", "max"),
        ("val-exact/gsm8k/acc/cover@0.5", "max"),
        ("val-exact/gsm8k/acc/mean@4-8", "max"),
        (K.SCORE_MEAN, "max"),
        (K.REWARDS_MEAN, "max"),
        (K.TRAIN_ACC, "max"),
        (K.PERF_THROUGHPUT, "max"),
        (K.VF_EXPLAINED_VAR, "max"),
        (K.TRL_REWARD, "max"),
        ("train/reward", "max"),
        ("eval_reward", "max"),
        ("rewards/accuracy_reward/mean", "max"),
        ("eval_loss", "min"),
        ("eval/loss", "min"),
        (K.CRITIC_VF_LOSS, "min"),
        # no natural direction: conservative
        (K.ACTOR_PG_LOSS, None),
        (K.TRL_LOSS, None),
        (K.PPO_KL, None),
        (K.ROLLOUT_CORR_KL, None),
        (K.ROLLOUT_CORR_K3_KL, None),
        (K.ACTOR_KL_LOSS, None),
        (K.ACTOR_GRAD_NORM, None),
        (K.ACTOR_KL_COEF, None),
        (K.ACTOR_LR, None),
        (K.PG_CLIPFRAC, None),
        (K.timing_s("gen"), None),
        (K.timing_s("reward"), None),
        (K.ACTOR_REWARD_KL_PENALTY, None),
        (K.SCORE_MAX, None),
        (K.RESPONSE_LENGTH_MEAN, None),
        (K.ADV_MAX, None),
        ("val-aux/gsm8k/acc/std@8", None),
        ("val-core/gsm8k/acc/best@8/std", None),
        ("val-aux/response_length/mean", None),
        ("val-exact/gsm8k/acc/pass@2/ci_low", None),
        (K.TRL_REWARD_STD, None),
        (K.TRL_FRAC_REWARD_ZERO_STD, None),
        ("rewards/accuracy_reward/std", None),
    ],
    ids=lambda v: str(v),
)
def test_best_direction(key, direction):
    assert best_direction(key) == direction


@pytest.mark.parametrize(
    ("values", "kind"),
    [
        ([0.0, 0.0, 0.0], "zero"),
        ([1e-3, 1e-3, 1e-3], "constant"),
        ([math.nan, math.nan], "no finite value"),
        ([math.nan], "no finite value"),
        ([1.0, 2.0, 3.0], "equals the step"),
        ([5.0], None),
        ([1.0, 1.0, 2.0], None),
        ([1.0, 1.0, math.nan], None),  # a NaN among constants is news
        ([0.0, -0.0, 0.0], "zero"),
    ],
    ids=[
        "zero",
        "constant",
        "all-nan",
        "one-nan",
        "step",
        "one-point",
        "changes",
        "constant-then-nan",
        "signed-zero",
    ],
)
def test_fold_kind(values, kind):
    assert fold_kind(np.arange(1.0, len(values) + 1), np.asarray(values)) == kind


def test_key_panels_take_verl_and_trl_names_alike():
    s = np.arange(1.0, 11.0)
    verl = make_run(
        "verl", {K.SCORE_MEAN: (s, s / 10), K.ACTOR_ENTROPY: (s, 1 / s), K.ACTOR_GRAD_NORM: (s, s % 3)}
    )
    trl = make_run("trl", {K.TRL_REWARD: (s, s / 2), K.TRL_ENTROPY: (s, 2 / s), "train/kl": (s, s / 9)})
    p = plan([verl, trl])
    titles = {q.title.split(":")[0]: q for q in p.key_panels}
    assert list(titles) == ["reward", "entropy", "KL to the reference", "gradient norm"]  # KEY_PANELS order
    assert titles["reward"].traces == ((0, K.SCORE_MEAN), (1, K.TRL_REWARD))
    assert titles["KL to the reference"].traces == ((1, "train/kl"),)
    assert p.panel_of[K.TRL_REWARD] == p.panel_of[K.SCORE_MEAN] == titles["reward"].id
    # drawn once: no second panel of a key panel's metric in its group, but it stays in the table
    assert [q.keys for q in p.group_panels.get("actor", [])] == []
    assert p.groups["actor"] == [K.ACTOR_ENTROPY, K.ACTOR_GRAD_NORM]


def test_validation_key_panel_is_the_interval_twin_and_bands_fold():
    s = np.array([10.0, 20.0, 30.0])
    acc = np.array([0.1, 0.4, 0.6])
    runs = [
        make_run(
            "a",
            {
                VAL_CORE: (s, acc),
                VAL_EXACT: (s, acc),
                VAL_EXACT + K.CI_LOW_SUFFIX: (s, acc - 0.1),
                VAL_EXACT + K.CI_HIGH_SUFFIX: (s, acc + 0.1),
                K.ACTOR_KL_COEF: (s, np.full(3, 0.001)),
                K.GLOBAL_STEP: (s, s),
            },
        )
    ]
    p = plan(runs)
    assert [q.title for q in p.key_panels] == [f"validation: {VAL_EXACT}"]
    assert p.panel_of[VAL_CORE] == p.panel_of[VAL_EXACT] == p.key_panels[0].id
    assert p.banded == {VAL_EXACT}
    assert VAL_EXACT + K.CI_LOW_SUFFIX not in p.panel_of and VAL_EXACT + K.CI_LOW_SUFFIX not in p.folded
    assert p.folded == {K.ACTOR_KL_COEF: ["constant"], K.GLOBAL_STEP: ["equals the step"]}
    # a val-core mean that differs from its val-exact twin is drawn as itself
    runs[0].series[VAL_EXACT] = (s, acc + 0.01)
    assert [q.title for q in plan(runs).key_panels] == [f"validation: {VAL_CORE}"]


def test_a_series_constant_in_one_run_only_is_drawn():
    s = np.arange(1.0, 6.0)
    p = plan([make_run("a", {"x/kl_coef": (s, np.ones(5))}), make_run("b", {"x/kl_coef": (s, s * 0.1)})])
    assert p.folded == {} and [q.traces for q in p.panels] == [((0, "x/kl_coef"), (1, "x/kl_coef"))]
    p = plan(
        [make_run("a", {"x/c": (s, np.ones(5))}), make_run("b", {"x/c": (s, np.zeros(5))}), make_run("c", {})]
    )
    assert p.folded == {"x/c": ["constant", "zero", None]} and p.panels == []


def test_panel_ids_are_unique_and_fragment_safe():
    s = np.arange(3.0)
    keys = ["a/b c", "a/b_c", "a/b?c", "a/x"]
    p = plan([make_run("r", {k: (s, s * (i + 2)) for i, k in enumerate(keys)})])
    ids = [q.id for q in p.panels]
    assert len(set(ids)) == len(ids) == 4
    assert all(re.fullmatch(r"panel-[A-Za-z0-9_.-]+", i) for i in ids)


def test_a_metrics_categories_share_one_panel_a_curve_each():
    runs = category_runs()
    p = plan(runs)
    assert p.categories == [
        ("data_source", "aime"),
        ("data_source", "gsm8k"),
        ("data_source", "math/algebra"),
    ]
    panels = p.group_panels["by_data_source"]
    assert [q.title for q in panels] == [
        f"{K.SCORE_MEAN} by data_source (3 categories)",
        f"{K.RESPONSE_LENGTH_MEAN} by data_source (2 categories)",
    ]
    score, length = panels
    # a curve per category and run, categories sorted; aime's constant score is drawn beside the others
    assert score.traces == (
        (0, by_source(K.SCORE_MEAN, "aime")),
        (0, by_source(K.SCORE_MEAN, "gsm8k")),
        (1, by_source(K.SCORE_MEAN, "gsm8k")),
        (0, by_source(K.SCORE_MEAN, "math/algebra")),
    )
    assert score.cats == (0, 1, 1, 2) and length.cats == (0, 1)
    assert [p.categories[c][1] for c in length.cats] == ["aime", "gsm8k"]
    assert score.ylabel == "score mean"
    # every category key points at its metric's panel; the plain key keeps its own (key) panel
    assert {p.panel_of[k] for k in score.keys} == {score.id} and p.panel_of[K.SCORE_MEAN] != score.id
    assert not any(q.cats for q in p.key_panels)
    # constant in every category: folded, each key listed; the table lists every drawn key
    assert p.folded == {by_source(K.ACTOR_LR, c): ["constant", None] for c in ("aime", "gsm8k")}
    assert p.groups["by_data_source"] == sorted(score.keys + length.keys)

"""rlmetrics.health.signals: the verl and TRL vocabularies and how a signal's key is picked."""

from __future__ import annotations

import numpy as np
import pytest

from rlmetrics import keys as K
from rlmetrics.health.signals import SIGNALS, resolve, resolve_all, resolving, with_signals

#: Every string the keys module defines (full keys and TRL's bare names).
KEY_STRINGS = {v for name, v in vars(K).items() if name.isupper() and isinstance(v, str)}


def series(*values: float, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(start, start + len(values)), np.asarray(values, dtype=np.float64)


@pytest.mark.parametrize("signal", sorted(SIGNALS), ids=sorted(SIGNALS))
def test_every_candidate_is_a_keys_constant_or_a_pattern_of_one(signal):
    for candidate in SIGNALS[signal]:
        if "*" in candidate:
            assert candidate.startswith(
                (f"{K.VAL_CORE_PREFIX}/", K.VERL_LEGACY_TEST_SCORE_PREFIX, K.VERL_LEGACY_VAL_PREFIX)
            )
        elif candidate.startswith(("train/", "eval/")):  # a TRL key as TensorBoard/W&B hold it
            bare = candidate.removeprefix("train/")
            assert bare in KEY_STRINGS or candidate.replace("eval/", K.TRL_EVAL_PREFIX, 1) in KEY_STRINGS
        else:
            assert candidate in KEY_STRINGS, f"{signal}: {candidate!r} is not defined in rlmetrics.keys"


@pytest.mark.parametrize(
    ("signal", "verl", "trl"),
    [
        ("reward", K.SCORE_MEAN, K.TRL_REWARD),
        ("entropy", K.ACTOR_ENTROPY, K.TRL_ENTROPY),
        ("kl_ref", K.ACTOR_KL_LOSS, K.TRL_KL),
        ("grad_norm", K.ACTOR_GRAD_NORM, K.TRL_GRAD_NORM),
        ("frac_reward_zero_std", K.GRPO_FRAC_REWARD_ZERO_STD, K.TRL_FRAC_REWARD_ZERO_STD),
        ("response_length", K.RESPONSE_LENGTH_MEAN, K.TRL_COMPLETIONS_MEAN_LENGTH),
        ("length_clip_ratio", K.RESPONSE_LENGTH_CLIP_RATIO, K.TRL_COMPLETIONS_CLIPPED_RATIO),
        ("is_weight_mean", K.ROLLOUT_CORR_IS_MEAN, K.TRL_SAMPLING_IS_RATIO_MEAN),
        ("val_score", K.val_metric(K.VAL_CORE_PREFIX, "gsm8k", "acc", "mean@4"), K.TRL_EVAL_REWARD),
    ],
    ids=lambda v: v if v in SIGNALS else None,
)
def test_verl_key_first_then_trl(signal, verl, trl):
    both = {verl: series(1.0, 2.0), trl: series(5.0)}
    assert resolve(both, signal)[0] == verl
    key, steps, values = resolve({trl: series(5.0, start=3)}, signal)
    assert (key, steps.tolist(), values.tolist()) == (trl, [3], [5.0])


@pytest.mark.parametrize(
    ("signal", "logged"),
    [
        ("reward", "train/reward"),
        ("kl_ref", "train/kl"),
        ("entropy", "train/entropy"),
        ("grad_norm", "train/grad_norm"),
        ("length_clip_ratio", "train/completions/clipped_ratio"),
        ("frac_reward_zero_std", "train/frac_reward_zero_std"),
        ("val_score", "eval/reward"),
    ],
    ids=lambda v: v if v in SIGNALS else None,
)
def test_trl_keys_as_tensorboard_and_wandb_hold_them(signal, logged):
    """transformers' callbacks log ``train/<key>`` and ``eval/<key>`` (``eval_<key>`` in trainer_state)."""
    assert resolve({logged: series(1.0, 2.0)}, signal)[0] == logged


def test_every_trl_candidate_has_its_tensorboard_form():
    trl = {v for name, v in vars(K).items() if name.startswith("TRL_") and isinstance(v, str)}
    for signal, candidates in SIGNALS.items():
        for candidate in trl.intersection(candidates):
            if candidate.startswith(K.TRL_EVAL_PREFIX):
                logged = "eval/" + candidate.removeprefix(K.TRL_EVAL_PREFIX)
            else:
                logged = "train/" + candidate
            assert candidates.index(logged) == candidates.index(candidate) + 1, signal


def test_validation_pattern_prefers_most_points_then_acc():
    acc = K.val_metric(K.VAL_CORE_PREFIX, "math", "acc", "mean@4")
    reward = K.val_metric(K.VAL_CORE_PREFIX, "math", "reward", "mean@4")
    dense = K.val_metric(K.VAL_CORE_PREFIX, "gsm8k", "reward", "mean@1")
    h = {acc: series(0.1, 0.2), reward: series(0.3, 0.4), K.SCORE_MEAN: series(1.0)}
    assert resolve(h, "val_score")[0] == acc
    h[dense] = series(0.1, 0.2, 0.3)
    assert resolve(h, "val_score")[0] == dense
    aux = K.val_metric(K.VAL_AUX_PREFIX, "math", "acc", "mean@4")
    assert resolve({aux: series(1.0)}, "val_score") is None


def test_absent_or_empty_series_resolve_to_none():
    assert resolve({}, "entropy") is None
    assert resolve({K.ACTOR_ENTROPY: series()}, "entropy") is None
    h = {K.ACTOR_ENTROPY: series(), K.TRL_ENTROPY: series(0.5)}
    assert resolve(h, "entropy")[0] == K.TRL_ENTROPY


def test_resolve_all_lists_every_present_candidate_in_order():
    h = {K.TRL_KL: series(1.0), K.ACTOR_REWARD_KL_PENALTY: series(1.0), "unrelated": series(1.0)}
    assert resolve_all(h, "kl_ref") == [K.ACTOR_REWARD_KL_PENALTY, K.TRL_KL]
    assert resolve_all(h, "entropy") == []


@pytest.mark.parametrize("named", [None, {"reward": "custom_reward"}], ids=["candidates", "named"])
def test_resolving_finds_what_resolve_finds_once(named):
    val_a = K.val_metric(K.VAL_CORE_PREFIX, "math", "acc", "mean@4")
    val_b = K.val_metric(K.VAL_CORE_PREFIX, "gsm8k", "reward", "mean@1")
    h = {
        val_a: series(0.1, 0.2),
        val_b: series(0.1, np.nan, 0.3),  # as many finite points: acc first
        K.ACTOR_ENTROPY: series(),
        K.TRL_ENTROPY: series(0.5),
        K.TRL_KL: series(1.0),
        K.ACTOR_REWARD_KL_PENALTY: series(2.0),
        "custom_reward": series(0.4, 0.5),
        K.SCORE_MEAN: series(0.1),
    }
    plain = with_signals(h, named)
    memo = resolving(plain)
    for signal in sorted(SIGNALS):
        for _ in range(2):  # the second answer from what the first found
            got, expected = resolve(memo, signal), resolve(plain, signal)
            assert (got is None) == (expected is None)
            assert got is None or (got.key == expected.key and got.values is expected.values)
            assert resolve_all(memo, signal) == resolve_all(plain, signal)
    assert resolve(memo, "val_score").key == val_a and resolve(memo, "entropy").key == K.TRL_ENTROPY
    assert resolve(memo, "reward").key == ("custom_reward" if named else K.SCORE_MEAN)
    assert resolve(memo, "reward") is resolve(memo, "reward")


@pytest.mark.parametrize("fn", [resolve, resolve_all], ids=["resolve", "resolve_all"])
def test_unknown_signal_is_named(fn):
    with pytest.raises(ValueError, match=r"signal must be one of .*got 'entropie'"):
        fn({}, "entropie")


#: (signal, a key an older or other vocabulary logs it under, where it was seen)
LEGACY = [
    ("entropy", K.VERL_LEGACY_ENTROPY, "verl's 2024 PPO baselines"),
    ("kl_ref", K.VERL_LEGACY_KL, "verl's 2024 PPO baselines (KL in the reward)"),
    ("val_score", "test_score/openai/gsm8k", "verl's 2024 PPO baselines"),
    ("val_score", "val/test_score/openai/gsm8k", "verl 0.2 validation"),
    ("val_score", "val-core/openai/gsm8k/acc/mean_at_4", "verl through MLflow (no @ in its names)"),
    ("response_length", K.TRL_LEGACY_COMPLETION_LENGTH, "TRL < 0.16"),
    ("response_length", "train/completion_length", "TRL < 0.16 through TensorBoard"),
    ("clip_fraction", K.TRL_LEGACY_CLIP_RATIO, "TRL 0.16-0.17"),
    ("clip_fraction", "train/clip_ratio", "TRL 0.16-0.17 through W&B"),
    # OpenRLHF's PPO actor status (printed bare; W&B and TensorBoard add train/)
    ("loss", K.OPENRLHF_POLICY_LOSS, "OpenRLHF ppo_actor"),
    ("kl_ref", "train/kl", "OpenRLHF through W&B"),
    ("reward", "train/reward", "OpenRLHF through W&B"),
    ("response_length", K.OPENRLHF_RESPONSE_LENGTH, "OpenRLHF experience maker"),
    ("response_length", "train/response_length", "OpenRLHF through W&B"),
    ("learning_rate", "train/actor_lr", "OpenRLHF through W&B"),
    ("entropy", K.OPENRLHF_ENTROPY, "OpenRLHF with an entropy coefficient"),
    ("clip_fraction", "train/ppo_clip_ratio", "OpenRLHF through W&B"),
    ("ppo_kl", K.OPENRLHF_PPO_KL, "OpenRLHF ppo_actor"),
    # NeMo-RL's GRPO (logged with prefix="train"; validation under validation/)
    ("kl_ref", "train/kl_penalty", "NeMo-RL"),
    ("entropy", "train/approx_entropy", "NeMo-RL"),
    ("response_length", "train/mean_gen_tokens_per_sample", "NeMo-RL"),
    ("length_clip_ratio", "train/truncation_rate", "NeMo-RL (NeMo-Gym rollouts)"),
    ("ppl_ratio", "train/token_mult_prob_error", "NeMo-RL"),
    ("mismatch_kl", "train/gen_kl_error", "NeMo-RL"),
    ("val_score", K.NEMO_RL_VAL_ACCURACY, "NeMo-RL validation"),
    ("grad_norm", "train/grad_norm", "NeMo-RL"),
    ("staleness_lag", K.NEMO_RL_AVG_TRAJECTORY_AGE, "NeMo-RL async GRPO"),
    ("staleness_lag", "train/avg_trajectory_age", "NeMo-RL async GRPO through W&B"),
    # AReaL's PPO actor (stats_tracker scope ppo_actor/update/version_stats)
    ("staleness_lag", K.AREAL_SAMPLE_STALENESS_THETA_AVG, "AReaL"),
    # TRL's PPOTrainer
    ("loss", K.TRL_PPO_POLICY_LOSS, "TRL PPOTrainer"),
    ("ppo_kl", "train/policy/approxkl_avg", "TRL PPOTrainer through W&B"),
]


@pytest.mark.parametrize(("signal", "key", "where"), LEGACY, ids=[f"{s}-{k}" for s, k, _ in LEGACY])
def test_older_vocabularies_feed_the_signals(signal, key, where):
    found = resolve({key: series(0.5, 0.4), "other/x": series(1.0, 2.0)}, signal)
    assert found is not None and found.key == key, where


def test_verl_keys_win_over_openrlhf_and_nemo_rl_names():
    h = {K.RESPONSE_LENGTH_MEAN: series(300.0), K.OPENRLHF_RESPONSE_LENGTH: series(1.0)}
    assert resolve(h, "response_length").key == K.RESPONSE_LENGTH_MEAN
    h = {K.TRL_ENTROPY: series(0.3), K.NEMO_RL_APPROX_ENTROPY: series(0.9)}
    assert resolve(h, "entropy").key == K.TRL_ENTROPY


def test_an_oldest_token_lag_wins_over_a_token_mean_and_a_newest_token_lag():
    """NeMo-RL's age is the lag of a group's oldest token, as rlmetrics' lag/mean; AReaL's is a
    mean over tokens, verl's trajectory_staleness that of the newest token: read after it."""
    h = {
        K.VERL_TRAJECTORY_STALENESS_MEAN: series(0.5),
        K.AREAL_SAMPLE_STALENESS_THETA_AVG: series(1.0),
        K.NEMO_RL_AVG_TRAJECTORY_AGE: series(2.0),
    }
    assert resolve(h, "staleness_lag").key == K.NEMO_RL_AVG_TRAJECTORY_AGE
    del h[K.NEMO_RL_AVG_TRAJECTORY_AGE]
    assert resolve(h, "staleness_lag").key == K.AREAL_SAMPLE_STALENESS_THETA_AVG


def test_the_current_name_wins_over_an_older_one():
    h = {K.ACTOR_ENTROPY: series(0.3), K.VERL_LEGACY_ENTROPY: series(0.9)}
    assert resolve(h, "entropy").key == K.ACTOR_ENTROPY


def test_a_user_named_signal_is_read_first():
    h = with_signals(
        {K.SCORE_MEAN: series(0.1), "train_reward": series(0.7, 0.8)}, {"reward": "train_reward"}
    )
    found = resolve(h, "reward")
    assert found.key == "train_reward" and found.values.tolist() == [0.7, 0.8]
    assert resolve_all(h, "reward") == ["train_reward"]
    assert resolve(h, "entropy") is None  # the other signals are untouched
    again = with_signals(h, {"entropy": "train_reward"})
    assert resolve(again, "reward").key == resolve(again, "entropy").key == "train_reward"


@pytest.mark.parametrize(
    ("names", "error", "match"),
    [
        ({"rewrad": "x"}, ValueError, r"signals: unknown signal 'rewrad'; known: .*reward"),
        (
            {"reward": "train_reward"},
            ValueError,
            r"signals\['reward'\]: 'train_reward' is not logged in this run; it logs a/x",
        ),
        ({"reward": 3}, ValueError, r"signals\['reward'\]: 3 is not logged"),
        ([("reward", "a/x")], TypeError, r"signals must map a signal to a metric key; got list"),
    ],
    ids=["unknown-signal", "key-not-logged", "key-not-a-string", "not-a-mapping"],
)
def test_with_signals_errors(names, error, match):
    with pytest.raises(error, match=match):
        with_signals({"a/x": series(1.0)}, names)


#: (signal, a key as TensorBoard's CSV download names its tag: each "/" written "_")
FLAT = [
    ("reward", "critic_score_mean"),
    ("entropy", "actor_entropy"),
    ("response_length", "response_length_mean"),
    ("length_clip_ratio", "response_length_clip_ratio"),
    ("kl_ref", "train_kl"),
    ("frac_reward_zero_std", "grpo_frac_reward_zero_std"),
    ("val_score", "val-core_openai_gsm8k_acc_mean@4"),
]


@pytest.mark.parametrize(("signal", "key"), FLAT, ids=[k for _, k in FLAT])
def test_a_key_with_its_slashes_written_as_underscores_feeds_its_signal(signal, key):
    assert resolve({key: series(0.5, 0.4), "other_x": series(1.0, 2.0)}, signal).key == key
    assert resolve_all({key: series(0.5, 0.4)}, signal) == [key]


def test_a_key_as_logged_wins_over_a_slashless_one():
    h = {"actor_entropy": series(0.9), K.TRL_ENTROPY: series(0.3)}
    assert resolve(h, "entropy").key == K.TRL_ENTROPY
    assert resolve_all(h, "entropy") == [K.TRL_ENTROPY, "actor_entropy"]
    h[K.ACTOR_ENTROPY] = series(0.5)
    assert resolve(h, "entropy").key == K.ACTOR_ENTROPY


def test_no_two_signals_share_a_slashless_key():
    """What makes the underscored form unambiguous: each names one signal."""
    owner: dict[str, str] = {}
    for signal, candidates in SIGNALS.items():
        for candidate in candidates:
            assert owner.setdefault(candidate.replace("/", "_"), signal) == signal, candidate

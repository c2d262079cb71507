"""Metric keys, in one place, grouped with slashes as verl names them.

Every metric rlmetrics returns uses a key defined here (or built by a helper here), so that a
dashboard, a test or a user can refer to ``keys.ADV_MEAN`` instead of a string literal.
"""

from __future__ import annotations

# --- data metrics (training.data; verl's compute_data_metrics) -------------------------------
SCORE_MEAN = "critic/score/mean"
SCORE_MAX = "critic/score/max"
SCORE_MIN = "critic/score/min"
REWARDS_MEAN = "critic/rewards/mean"
REWARDS_MAX = "critic/rewards/max"
REWARDS_MIN = "critic/rewards/min"
ADV_MEAN = "critic/advantages/mean"
ADV_MAX = "critic/advantages/max"
ADV_MIN = "critic/advantages/min"
RETURNS_MEAN = "critic/returns/mean"
RETURNS_MAX = "critic/returns/max"
RETURNS_MIN = "critic/returns/min"
VALUES_MEAN = "critic/values/mean"
VALUES_MAX = "critic/values/max"
VALUES_MIN = "critic/values/min"
VF_EXPLAINED_VAR = "critic/vf_explained_var"
RESPONSE_LENGTH_MEAN = "response_length/mean"
RESPONSE_LENGTH_MAX = "response_length/max"
RESPONSE_LENGTH_MIN = "response_length/min"
RESPONSE_LENGTH_CLIP_RATIO = "response_length/clip_ratio"
RESPONSE_LENGTH_NON_ABORTED_MEAN = "response_length_non_aborted/mean"
RESPONSE_LENGTH_NON_ABORTED_MAX = "response_length_non_aborted/max"
RESPONSE_LENGTH_NON_ABORTED_MIN = "response_length_non_aborted/min"
RESPONSE_LENGTH_NON_ABORTED_CLIP_RATIO = "response_length_non_aborted/clip_ratio"
RESPONSE_ABORTED_RATIO = "response/aborted_ratio"
PROMPT_LENGTH_MEAN = "prompt_length/mean"
PROMPT_LENGTH_MAX = "prompt_length/max"
PROMPT_LENGTH_MIN = "prompt_length/min"
PROMPT_LENGTH_CLIP_RATIO = "prompt_length/clip_ratio"
NUM_TURNS_MEAN = "num_turns/mean"
NUM_TURNS_MAX = "num_turns/max"
NUM_TURNS_MIN = "num_turns/min"
TOOL_CALL_COUNTS_MEAN = "tool_call_counts/mean"
TOOL_CALL_COUNTS_MAX = "tool_call_counts/max"
TOOL_CALL_COUNTS_MIN = "tool_call_counts/min"

# --- actor and critic updates (verl's actor and critic workers; the demo logs them) ---------
ACTOR_ENTROPY = "actor/entropy"
ACTOR_PG_LOSS = "actor/pg_loss"
ACTOR_KL_LOSS = "actor/kl_loss"
ACTOR_KL_COEF = "actor/kl_coef"
ACTOR_GRAD_NORM = "actor/grad_norm"
ACTOR_LR = "actor/lr"
CRITIC_VF_LOSS = "critic/vf_loss"
CRITIC_VF_CLIPFRAC = "critic/vf_clipfrac"
CRITIC_VPRED_MEAN = "critic/vpred_mean"
CRITIC_GRAD_NORM = "critic/grad_norm"
GLOBAL_STEP = "training/global_step"
TRAIN_ACC = "actor/train_acc"  # exact-match accuracy of the step's rollouts
#: verl's KL-in-reward penalty (apply_kl_penalty): the batch's KL to the reference and its coefficient.
ACTOR_REWARD_KL_PENALTY = "actor/reward_kl_penalty"
ACTOR_REWARD_KL_PENALTY_COEFF = "actor/reward_kl_penalty_coeff"

# --- PPO update statistics (policy.ppo) -------------------------------------------------------
PPO_PREFIX = "actor/"  # the default prefix= of compute_ppo_update_metrics
PG_CLIPFRAC = "actor/pg_clipfrac"
PPO_KL = "actor/ppo_kl"
PG_CLIPFRAC_LOWER = "actor/pg_clipfrac_lower"  # verl's dual-clip fraction (ratio above clip_ratio_c, A < 0)
PG_CLIPFRAC_LOW = "actor/pg_clipfrac_low"  # clipped at 1 - eps_low, A < 0
PG_CLIPFRAC_HIGH = "actor/pg_clipfrac_high"  # clipped at 1 + eps_high, A > 0
PPO_KL_K3 = "actor/ppo_kl_k3"
PPO_RATIO_MEAN = "actor/ppo_ratio_mean"
PPO_RATIO_MAX = "actor/ppo_ratio_max"
PPO_RATIO_MIN = "actor/ppo_ratio_min"

# --- rollout/training mismatch (policy.mismatch) ----------------------------------------------
ROLLOUT_CORR_PREFIX = "rollout_corr/"
ROLLOUT_CORR_K3_KL = f"{ROLLOUT_CORR_PREFIX}k3_kl"  # E[rho - 1 - log rho], rho = pi_train / pi_rollout
ROLLOUT_CORR_IS_MEAN = f"{ROLLOUT_CORR_PREFIX}rollout_is_mean"
ROLLOUT_CORR_IS_STD = f"{ROLLOUT_CORR_PREFIX}rollout_is_std"
ROLLOUT_CORR_IS_MAX = f"{ROLLOUT_CORR_PREFIX}rollout_is_max"
ROLLOUT_CORR_IS_MIN = f"{ROLLOUT_CORR_PREFIX}rollout_is_min"
ROLLOUT_CORR_IS_RATIO_FRACTION_HIGH = f"{ROLLOUT_CORR_PREFIX}rollout_is_ratio_fraction_high"
ROLLOUT_CORR_IS_RATIO_FRACTION_LOW = f"{ROLLOUT_CORR_PREFIX}rollout_is_ratio_fraction_low"
ROLLOUT_CORR_IS_EFF_SAMPLE_SIZE = f"{ROLLOUT_CORR_PREFIX}rollout_is_eff_sample_size"  # fraction, in (0, 1]
ROLLOUT_CORR_IS_ESS_TOKENS = f"{ROLLOUT_CORR_PREFIX}rollout_is_ess_tokens"  # (sum w)^2 / sum w^2
ROLLOUT_CORR_IS_OOB_RATIO = f"{ROLLOUT_CORR_PREFIX}rollout_is_oob_ratio"  # IcePop: weights zeroed
ROLLOUT_CORR_IS_SEQ_MEAN = f"{ROLLOUT_CORR_PREFIX}rollout_is_seq_mean"
ROLLOUT_CORR_IS_SEQ_STD = f"{ROLLOUT_CORR_PREFIX}rollout_is_seq_std"
ROLLOUT_CORR_IS_SEQ_MAX = f"{ROLLOUT_CORR_PREFIX}rollout_is_seq_max"
ROLLOUT_CORR_IS_SEQ_MIN = f"{ROLLOUT_CORR_PREFIX}rollout_is_seq_min"
ROLLOUT_CORR_IS_SEQ_MAX_DEVIATION = f"{ROLLOUT_CORR_PREFIX}rollout_is_seq_max_deviation"
ROLLOUT_CORR_IS_SEQ_FRACTION_HIGH = f"{ROLLOUT_CORR_PREFIX}rollout_is_seq_fraction_high"
ROLLOUT_CORR_IS_SEQ_FRACTION_LOW = f"{ROLLOUT_CORR_PREFIX}rollout_is_seq_fraction_low"
ROLLOUT_CORR_TRAINING_PPL = f"{ROLLOUT_CORR_PREFIX}training_ppl"
ROLLOUT_CORR_TRAINING_LOG_PPL = f"{ROLLOUT_CORR_PREFIX}training_log_ppl"
ROLLOUT_CORR_ROLLOUT_PPL = f"{ROLLOUT_CORR_PREFIX}rollout_ppl"
ROLLOUT_CORR_ROLLOUT_LOG_PPL = f"{ROLLOUT_CORR_PREFIX}rollout_log_ppl"
ROLLOUT_CORR_KL = f"{ROLLOUT_CORR_PREFIX}kl"  # k1: E[rollout - old]
ROLLOUT_CORR_LOG_PPL_DIFF = f"{ROLLOUT_CORR_PREFIX}log_ppl_diff"
ROLLOUT_CORR_LOG_PPL_ABS_DIFF = f"{ROLLOUT_CORR_PREFIX}log_ppl_abs_diff"
ROLLOUT_CORR_LOG_PPL_DIFF_MAX = f"{ROLLOUT_CORR_PREFIX}log_ppl_diff_max"
ROLLOUT_CORR_LOG_PPL_DIFF_MIN = f"{ROLLOUT_CORR_PREFIX}log_ppl_diff_min"
ROLLOUT_CORR_PPL_RATIO = f"{ROLLOUT_CORR_PREFIX}ppl_ratio"
ROLLOUT_CORR_CHI2_TOKEN = f"{ROLLOUT_CORR_PREFIX}chi2_token"
ROLLOUT_CORR_CHI2_SEQ = f"{ROLLOUT_CORR_PREFIX}chi2_seq"
ROLLOUT_CORR_PROBS_PEARSON_CORR = f"{ROLLOUT_CORR_PREFIX}probs_pearson_corr"

# --- GRPO group statistics (policy.groups) ----------------------------------------------------
GRPO_PREFIX = "grpo/"
GRPO_NUM_GROUPS = f"{GRPO_PREFIX}num_groups"
GRPO_NUM_SAMPLES = f"{GRPO_PREFIX}num_samples"
GRPO_GROUP_SIZE_MEAN = f"{GRPO_PREFIX}group_size/mean"
GRPO_GROUP_SIZE_MAX = f"{GRPO_PREFIX}group_size/max"
GRPO_GROUP_SIZE_MIN = f"{GRPO_PREFIX}group_size/min"
GRPO_NUM_SINGLETON_GROUPS = f"{GRPO_PREFIX}num_singleton_groups"
GRPO_FRAC_REWARD_ZERO_STD = f"{GRPO_PREFIX}frac_reward_zero_std"  # fraction of groups
GRPO_FRAC_SAMPLES_REWARD_ZERO_STD = f"{GRPO_PREFIX}frac_samples_reward_zero_std"  # of samples
GRPO_FRAC_ALL_SOLVED = f"{GRPO_PREFIX}frac_all_solved"
GRPO_FRAC_NONE_SOLVED = f"{GRPO_PREFIX}frac_none_solved"
GRPO_REWARD_STD_MEAN = f"{GRPO_PREFIX}reward_std/mean"

# --- gradient-variance proxies (policy.variance) ----------------------------------------------
VARIANCE_PROXY_PREFIX = "variance_proxy/"  # the default prefix= of compute_variance_proxy_metrics
VARIANCE_PROXY_SIGNAL = "variance_proxy/proxy1_signal_strength"
VARIANCE_PROXY_TOTAL_POWER = "variance_proxy/proxy2_total_power"
VARIANCE_PROXY_NOISE = "variance_proxy/proxy3_pure_noise"
VARIANCE_PROXY_EXPECTED_A_SQUARED = "variance_proxy/expected_a_squared"
VARIANCE_PROXY_EXPECTED_W = "variance_proxy/expected_w"

# --- timing and throughput (training.timing) --------------------------------------------------
TIMING_S_PREFIX = "timing_s/"
TIMING_PER_TOKEN_MS_PREFIX = "timing_per_token_ms/"
PERF_TOTAL_NUM_TOKENS = "perf/total_num_tokens"
PERF_TIME_PER_STEP = "perf/time_per_step"
PERF_THROUGHPUT = "perf/throughput"
PERF_MFU = "perf/mfu"

#: verl's stage names, the keys of ``timing_raw`` (each logged as ``timing_s/{stage}``).
STAGE_GEN = "gen"
STAGE_REWARD = "reward"
STAGE_OLD_LOG_PROB = "old_log_prob"
STAGE_REF = "ref"
STAGE_VALUES = "values"
STAGE_ADV = "adv"
STAGE_UPDATE_CRITIC = "update_critic"
STAGE_UPDATE_ACTOR = "update_actor"
STAGE_TESTING = "testing"
STAGE_STEP = "step"  # the whole step: throughput divides by it
#: Stages whose ``timing_per_token_ms`` verl divides by the response tokens, and by all tokens.
PER_RESPONSE_TOKEN_STAGES = (STAGE_GEN,)
PER_TOKEN_STAGES = (STAGE_REF, STAGE_VALUES, STAGE_ADV, STAGE_UPDATE_CRITIC, STAGE_UPDATE_ACTOR)


def timing_s(stage: str) -> str:
    """Key of a stage's wall time in seconds, e.g. ``timing_s/gen``."""
    return f"{TIMING_S_PREFIX}{stage}"


def timing_per_token_ms(stage: str) -> str:
    """Key of a stage's time per token in milliseconds, e.g. ``timing_per_token_ms/gen``."""
    return f"{TIMING_PER_TOKEN_MS_PREFIX}{stage}"


# --- validation (verl's trainer logger; validation.bootstrap, validation.summary) -------------
VAL_CORE_PREFIX = "val-core"
VAL_AUX_PREFIX = "val-aux"
#: Exact estimators with 95% intervals: ``val-exact/{source}/{var}/{metric}`` and
#: ``.../{metric}/ci_low``, ``.../{metric}/ci_high``.
VAL_EXACT_PREFIX = "val-exact"
CI_LOW_SUFFIX = "/ci_low"
CI_HIGH_SUFFIX = "/ci_high"
VAL_CORE_VARS = ("acc", "reward")  # verl's core variable: acc if the source has it, else reward
VAL_CORE_METRIC_PREFIXES = ("mean", "maj", "best")
#: The estimators logged under ``val-exact`` (``mean@N``, ``pass@k``, ``best@k``, ``maj@k``).
VAL_EXACT_METRIC_PREFIXES = ("mean", "pass", "best", "maj")


def val_metric(section: str, source: str, var: str, metric: str) -> str:
    """Logger key of a validation metric, e.g. ``val-core/gsm8k/acc/mean@4``."""
    return f"{section}/{source}/{var}/{metric}"


def at_k(name: str, k: int) -> str:
    """Name of an estimator over ``k`` samples, e.g. ``mean@4``, ``pass@2``."""
    return f"{name}@{k}"


class ValName:
    """Names inside the validation metrics: the statistics (joined with ``k`` by :func:`at_k`,
    verl's bootstrap ones then with a moment by :func:`val_moment`) and verl's variables."""

    MEAN = "mean"
    STD = "std"
    BEST = "best"
    WORST = "worst"
    MAJ = "maj"
    PASS = "pass"
    ALL_SOLVED = "all_solved"
    NONE_SOLVED = "none_solved"
    #: pass^k (all k samples right, joined by :func:`pass_hat`) and cover@tau (:func:`cover_at`)
    PASS_HAT = "pass^"
    COVER = "cover"
    #: verl's variables: the accuracy (padded by ``expected_acc_counts``), the answers voted on
    #: for maj@k, and the observed accuracies of the padded prompts.
    ACC = "acc"
    PRED = "pred"
    ACC_SUCCESS_ONLY = "acc_success_only"


def pass_hat(k: int) -> str:
    """Name of pass^k, the chance that ``k`` samples are all right, e.g. ``pass^4``."""
    return f"{ValName.PASS_HAT}{k}"


def cover_at(tau: float) -> str:
    """Name of cover@tau, the share of prompts solved at a rate of at least ``tau``, e.g. ``cover@0.5``."""
    return f"{ValName.COVER}@{tau:g}"


def at_k_range(name: str, k_min: int, k_max: int) -> str:
    """Name of an estimator over prompts with ``k_min`` to ``k_max`` samples, e.g. ``mean@4-8``."""
    return f"{name}@{k_min}-{k_max}"


def val_moment(name: str, k: int, moment: str) -> str:
    """Name of verl's bootstrap mean or std of a statistic, e.g. ``best@4/mean``, ``maj@8/std``."""
    return f"{name}@{k}/{moment}"


# --- demo (demo.run) ---------------------------------------------------------------------------
DEMO_VAL_RESPONSE_LENGTH_MEAN = "val-aux/response_length/mean"
DEMO_VAL_EOS_RATIO = "val-aux/eos_ratio"  # fraction of validation answers that end with EOS

# --- TRL's GRPOTrainer (read by diagnose.signals; rlmetrics never logs these) ----------------
#: Names TRL's trainers log (``trl`` 1.16, ``GRPOTrainer._metrics`` and ``Trainer.log``); its
#: evaluation logs the same names with :data:`TRL_EVAL_PREFIX`.
TRL_REWARD = "reward"
TRL_REWARD_STD = "reward_std"
TRL_FRAC_REWARD_ZERO_STD = "frac_reward_zero_std"
TRL_ENTROPY = "entropy"
TRL_KL = "kl"
TRL_LOSS = "loss"
TRL_GRAD_NORM = "grad_norm"
TRL_LEARNING_RATE = "learning_rate"
TRL_NUM_TOKENS = "num_tokens"
TRL_COMPLETIONS_PREFIX = "completions/"
TRL_COMPLETIONS_MEAN_LENGTH = "completions/mean_length"
TRL_COMPLETIONS_CLIPPED_RATIO = "completions/clipped_ratio"
TRL_CLIP_RATIO_REGION_MEAN = "clip_ratio/region_mean"
TRL_SAMPLING_LOGP_DIFFERENCE_MEAN = "sampling/sampling_logp_difference/mean"  # mean |logp_train - logp_vllm|
TRL_SAMPLING_IS_RATIO_MEAN = "sampling/importance_sampling_ratio/mean"
TRL_EVAL_PREFIX = "eval_"
#: The group of each reward function's own mean and std: ``rewards/<function>/mean``
#: (``rewards/<function>`` before 0.17).
TRL_REWARDS_GROUP = "rewards"
TRL_EVAL_REWARD = f"{TRL_EVAL_PREFIX}{TRL_REWARD}"

# --- older vocabularies (read by health.signals; rlmetrics never logs these) -------------------
#: Older verl releases (its published 2024 PPO baselines): the policy entropy under the name of
#: its loss term, the KL-in-reward penalty and its coefficient under ``critic/``, and validation
#: as ``test_score/<source>`` (or ``val/test_score/<source>``).
VERL_LEGACY_ENTROPY = "actor/entropy_loss"
VERL_LEGACY_KL = "critic/kl"
VERL_LEGACY_KL_COEF = "critic/kl_coeff"
VERL_LEGACY_TEST_SCORE_PREFIX = "test_score/"
VERL_LEGACY_VAL_PREFIX = "val/"
#: TRL before 0.16: the mean completion length (now ``completions/mean_length``).
TRL_LEGACY_COMPLETION_LENGTH = "completion_length"
#: TRL 0.16 and 0.17: the share of clipped tokens (now ``clip_ratio/region_mean`` and its
#: ``low_``/``high_`` parts).
TRL_LEGACY_CLIP_RATIO = "clip_ratio"

#: TRL's ``PPOTrainer`` and ``RLOOTrainer`` (0.11 to 0.2x, later ``trl.experimental``): its losses
#: and PPO's own statistics. (Its ``objective/scores``, ``objective/kl``, ``objective/entropy``
#: wait for ``health.textlogs`` to name the ``objective/`` group by a constant.)
TRL_PPO_POLICY_LOSS = "loss/policy_avg"
TRL_PPO_VALUE_LOSS = "loss/value_avg"
TRL_PPO_APPROXKL = "policy/approxkl_avg"
TRL_PPO_CLIPFRAC = "policy/clipfrac_avg"

# --- OpenRLHF (read by health.signals; rlmetrics never logs these) ------------------------------
#: The status dicts of OpenRLHF's PPO actor and critic (``ppo_actor.py``, ``ppo_critic.py``,
#: ``experience_maker.py``), printed bare and logged with ``train/`` to W&B and TensorBoard. Its
#: ``entropy_loss`` is the policy entropy itself (the term an entropy bonus multiplies).
OPENRLHF_POLICY_LOSS = "policy_loss"
OPENRLHF_CRITIC_LOSS = "critic_loss"
OPENRLHF_KL = "kl"
OPENRLHF_PPO_KL = "ppo_kl"
OPENRLHF_REWARD = "reward"
OPENRLHF_RETURN = "return"
OPENRLHF_RESPONSE_LENGTH = "response_length"
OPENRLHF_TOTAL_LENGTH = "total_length"
OPENRLHF_ACTOR_LR = "actor_lr"
OPENRLHF_ENTROPY = "entropy_loss"
OPENRLHF_CLIP_RATIO = "ppo_clip_ratio"
OPENRLHF_VALUES = "values"

# --- NeMo-RL (read by health.signals; rlmetrics never logs these) -------------------------------
#: The training metrics of NeMo-RL's GRPO (``grpo.py`` and ``ClippedPGLossFn``), logged with
#: ``train/`` to W&B, TensorBoard and MLflow; validation under ``validation/``.
#: ``kl_penalty`` is the KL to the reference (the penalty divided by its coefficient),
#: ``approx_entropy`` the policy entropy estimated on the generated tokens,
#: ``token_mult_prob_error`` the training/generation probability error ratio (>= 1, 1 when they agree).
NEMO_RL_LOSS = "loss"
NEMO_RL_REWARD = "reward"
NEMO_RL_GRAD_NORM = "grad_norm"
NEMO_RL_KL_PENALTY = "kl_penalty"
NEMO_RL_APPROX_ENTROPY = "approx_entropy"
NEMO_RL_TOKEN_MULT_PROB_ERROR = "token_mult_prob_error"
NEMO_RL_GEN_KL_ERROR = "gen_kl_error"
NEMO_RL_MEAN_GEN_TOKENS = "mean_gen_tokens_per_sample"
NEMO_RL_TRUNCATION_RATE = "truncation_rate"
NEMO_RL_VAL_ACCURACY = "validation/accuracy"

# --- tracking (tracking) ------------------------------------------------------------------------
#: Fields the jsonl backend writes on every line: reserved, not allowed as metric keys.
TRACKING_STEP = "step"
TRACKING_TIMESTAMP = "timestamp"
TRACKING_FIELDS = (TRACKING_STEP, TRACKING_TIMESTAMP)

# --- health (Tracker(monitor=...), diagnose.monitor) ----------------------------------------------
#: Records of a live health monitor: ``health/<kind>`` is logged once, at the step where the
#: monitor first reports that kind, with the value of its severity in :data:`HEALTH_SEVERITY_VALUE`.
HEALTH_PREFIX = "health/"
#: Value of a ``health/<kind>`` record: 1.0 for a warning, 2.0 for an error (so ``max`` over runs
#: or steps gives the worst severity).
HEALTH_SEVERITY_VALUE = {"warning": 1.0, "error": 2.0}


def health(kind: str) -> str:
    """Key of the record of a health finding, e.g. ``health/entropy_collapse``."""
    return f"{HEALTH_PREFIX}{kind}"


# --- groups (report, dashboards) ----------------------------------------------------------------
#: The group of a key without a slash.
GROUP_OTHER = "other"


def group(key: str) -> str:
    """A key's group, its first path segment (``other`` for a key without a slash).

    >>> group("critic/score/mean"), group("val-core/gsm8k/acc/mean@4"), group("loss")
    ('critic', 'val-core', 'other')
    """
    head, slash, _ = key.partition("/")
    return head if slash else GROUP_OTHER


#: Groups in the order a report shows them (the others follow alphabetically, then ``other``).
GROUP_ORDER = tuple(
    group(key)
    for key in (
        f"{VAL_CORE_PREFIX}/",
        f"{VAL_AUX_PREFIX}/",
        f"{VAL_EXACT_PREFIX}/",
        SCORE_MEAN,
        ACTOR_PG_LOSS,
        RESPONSE_LENGTH_MEAN,
        RESPONSE_LENGTH_NON_ABORTED_MEAN,
        RESPONSE_ABORTED_RATIO,
        PROMPT_LENGTH_MEAN,
        NUM_TURNS_MEAN,
        TOOL_CALL_COUNTS_MEAN,
        GRPO_PREFIX,
        VARIANCE_PROXY_SIGNAL,
        ROLLOUT_CORR_PREFIX,
        TIMING_S_PREFIX,
        TIMING_PER_TOKEN_MS_PREFIX,
        PERF_THROUGHPUT,
        GLOBAL_STEP,
    )
)

# --- TRL integration (integrations.trl) ---------------------------------------------------------
#: Prefix of TRL's own group statistics (``reward``, ``reward_std``, ``frac_reward_zero_std``,
#: ``policy.groups`` with ``definition="trl"``) that ``RLMetricsCallback`` computes exactly over
#: the completions of a logging window; TRL logs the mean of its per-generation values under the
#: bare names. The window's verl-definition statistics go under :data:`GRPO_PREFIX`.
GRPO_TRL_PREFIX = "grpo-trl/"

# --- health actions (HealthMonitor(actions=...)) ---------------------------------------------------
#: Record of an action the live monitor took on a finding (``HealthMonitor(actions=...)``):
#: ``health_action/<kind>`` is logged once, at the step it acted, with the value of the action in
#: :data:`HEALTH_ACTION_VALUE`; the ``health/<kind>`` record of that kind gives the finding.
HEALTH_ACTION_PREFIX = "health_action/"
#: Value of a ``health_action/<kind>`` record: 1.0 the run was told to stop, 2.0 an exception raised.
HEALTH_ACTION_VALUE = {"stop": 1.0, "raise": 2.0}


def health_action(kind: str) -> str:
    """Key of the record of an action on a health finding, e.g. ``health_action/nonfinite``."""
    return f"{HEALTH_ACTION_PREFIX}{kind}"

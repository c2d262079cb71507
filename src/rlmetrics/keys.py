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
#: Hartigan's dip of the groups' solve rates (``c`` of a group's ``n`` samples reach the
#: threshold), each spread over its cell as ``(c + u) / (n + 1)``, ``u`` uniform (seeded): a
#: unimodal histogram of ``c`` gives a unimodal sample (:mod:`rlmetrics._core.dip`).
GRPO_SOLVE_RATE_DIP = f"{GRPO_PREFIX}solve_rate/dip"
#: Its p-value against uniform samples of the same size: small when the solve rates are bimodal.
GRPO_SOLVE_RATE_DIP_PVALUE = f"{GRPO_PREFIX}solve_rate/dip_pvalue"
#: ``at_k(GRPO_PASS, k)``: mean over the groups of at least k samples of their unbiased pass@k
#: (a sample passes when its reward reaches ``solved_threshold``), e.g. ``grpo/pass@4``.
GRPO_PASS = f"{GRPO_PREFIX}pass"

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
#: and PPO's own statistics; its ``objective/`` group holds the reward model's score, the KL to
#: the reference and the entropy.
TRL_PPO_OBJECTIVE_GROUP = "objective"
TRL_PPO_SCORES = f"{TRL_PPO_OBJECTIVE_GROUP}/scores"
TRL_PPO_KL = f"{TRL_PPO_OBJECTIVE_GROUP}/kl"
TRL_PPO_ENTROPY = f"{TRL_PPO_OBJECTIVE_GROUP}/entropy"
TRL_PPO_POLICY_LOSS = "loss/policy_avg"
TRL_PPO_VALUE_LOSS = "loss/value_avg"
TRL_PPO_APPROXKL = "policy/approxkl_avg"
TRL_PPO_CLIPFRAC = "policy/clipfrac_avg"

# --- ms-swift, W&B, transformers step counters (read by readers; rlmetrics never logs these) -------
#: ms-swift's step counter in its printed and JSON-lines logs: a string ``"2/4389"`` (step / steps).
SWIFT_STEP_COUNTER = "global_step/max_steps"
#: The step a W&B run summary prints (``_step``).
WANDB_STEP = "_step"
#: The step a transformers ``log_history`` record and many printed logs hold.
HF_GLOBAL_STEP = "global_step"

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

# --- sample tables (training.samples, Tracker.log_samples, readers.samples) ---------------------
#: The columns of a :class:`~rlmetrics.training.samples.SampleTable`: the fields of each line of
#: ``samples.jsonl``, the columns of its W&B table and of its TensorBoard and MLflow tables.
SAMPLES_STEP = TRACKING_STEP
SAMPLES_PROMPT = "prompt"
SAMPLES_RESPONSE = "response"
SAMPLES_REWARD = "reward"
SAMPLES_LENGTH = "length"
SAMPLES_STOP_REASON = "stop_reason"
SAMPLES_CATEGORY = "category"
SAMPLES_CHOSEN = "chosen"  # why the row was chosen: "max", "min", "median" or "random"
SAMPLES_COLUMNS = (
    SAMPLES_STEP,
    SAMPLES_PROMPT,
    SAMPLES_RESPONSE,
    SAMPLES_REWARD,
    SAMPLES_LENGTH,
    SAMPLES_STOP_REASON,
    SAMPLES_CATEGORY,
    SAMPLES_CHOSEN,
)
#: The name a step's sample table is logged under (W&B key, TensorBoard tag, MLflow artifact folder).
SAMPLES_TABLE = "samples"

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

# --- off-policy / asynchronous staleness (policy.staleness) ---------------------------------------
#: Default prefix of compute_staleness_metrics. ``lag`` is ``current_version - version`` of a
#: sample's oldest token (its worst case); ``lag_newest`` that of its newest token.
STALENESS_PREFIX = "staleness/"
STALENESS_NUM_SAMPLES = f"{STALENESS_PREFIX}num_samples"
STALENESS_LAG_MEAN = f"{STALENESS_PREFIX}lag/mean"
STALENESS_LAG_MAX = f"{STALENESS_PREFIX}lag/max"
STALENESS_LAG_MIN = f"{STALENESS_PREFIX}lag/min"
STALENESS_LAG_NEWEST_MEAN = f"{STALENESS_PREFIX}lag_newest/mean"
STALENESS_LAG_NEWEST_MAX = f"{STALENESS_PREFIX}lag_newest/max"
STALENESS_LAG_NEWEST_MIN = f"{STALENESS_PREFIX}lag_newest/min"
STALENESS_TOKEN_LAG_MEAN = f"{STALENESS_PREFIX}token_lag/mean"  # over response tokens (mask given)
STALENESS_SPANS_MEAN = f"{STALENESS_PREFIX}spans/mean"  # newest - oldest version + 1
STALENESS_SPANS_MAX = f"{STALENESS_PREFIX}spans/max"
STALENESS_SPANS_MIN = f"{STALENESS_PREFIX}spans/min"
STALENESS_MULTI_VERSION_SHARE = f"{STALENESS_PREFIX}multi_version_share"
STALENESS_AGE_IN_FLIGHT_MEAN = f"{STALENESS_PREFIX}age_in_flight_s/mean"  # enqueue - start
STALENESS_AGE_IN_FLIGHT_MAX = f"{STALENESS_PREFIX}age_in_flight_s/max"
STALENESS_AGE_IN_QUEUE_MEAN = f"{STALENESS_PREFIX}age_in_queue_s/mean"  # dequeue - enqueue
STALENESS_AGE_IN_QUEUE_MAX = f"{STALENESS_PREFIX}age_in_queue_s/max"
STALENESS_AGE_MEAN = f"{STALENESS_PREFIX}age_s/mean"  # train_time - enqueue
STALENESS_AGE_MAX = f"{STALENESS_PREFIX}age_s/max"
STALENESS_DROPPED_COUNT = f"{STALENESS_PREFIX}dropped/count"
STALENESS_DROPPED_SHARE = f"{STALENESS_PREFIX}dropped/share"  # dropped / (trained + dropped)
STALENESS_DROPPED_LAG_MEAN = f"{STALENESS_PREFIX}dropped/lag/mean"
STALENESS_DROPPED_LAG_MAX = f"{STALENESS_PREFIX}dropped/lag/max"
STALENESS_DROPPED_LAG_MIN = f"{STALENESS_PREFIX}dropped/lag/min"
STALENESS_TRAINED_LENGTH_MEAN = f"{STALENESS_PREFIX}trained/length_mean"
STALENESS_TRAINED_REWARD_MEAN = f"{STALENESS_PREFIX}trained/reward_mean"
STALENESS_DROPPED_LENGTH_MEAN = f"{STALENESS_PREFIX}dropped/length_mean"
STALENESS_DROPPED_REWARD_MEAN = f"{STALENESS_PREFIX}dropped/reward_mean"
STALENESS_GENERATED_LENGTH_MEAN = f"{STALENESS_PREFIX}generated/length_mean"  # trained + dropped
STALENESS_GENERATED_REWARD_MEAN = f"{STALENESS_PREFIX}generated/reward_mean"
#: Labels of the fixed lag buckets (lags 0, 1, 2, 3-4, 5-8, 9 and more), in order.
STALENESS_LAG_BUCKETS = ("0", "1", "2", "3_4", "5_8", "9_plus")
#: Statistics reported per lag bucket (``share`` always; the others when their inputs are given).
STALENESS_BUCKET_SHARE = "share"
STALENESS_BUCKET_IS_WEIGHT_MEAN = "is_weight_mean"
STALENESS_BUCKET_K3_KL = "k3_kl"
STALENESS_BUCKET_REWARD_MEAN = "reward_mean"
STALENESS_BUCKET_LENGTH_MEAN = "length_mean"
#: Share of the bucket's weights (tokens, or samples for per-sample weights) above the truncation
#: threshold ``rollout_is_threshold`` (verl's ``rollout_is_ratio_fraction_high``, per bucket), and
#: the bucket's largest weight.
STALENESS_BUCKET_IS_WEIGHT_FRACTION_HIGH = "is_weight_fraction_high"
STALENESS_BUCKET_IS_WEIGHT_MAX = "is_weight_max"


def staleness_bucket(bucket: str, stat: str) -> str:
    """Key of a per-lag-bucket statistic, e.g. ``staleness/lag_bucket/3_4/share``."""
    return f"{STALENESS_PREFIX}lag_bucket/{bucket}/{stat}"


#: The names peers chart for the same quantities (``peer_names=`` of compute_staleness_metrics).
#: verl's v1 trainer (``ray_trainer`` off-policy metrics; its current version is ``global_steps - 1``)
#: and its replay buffer's evictions (read by the health rules, never written: see below).
VERL_TRAJECTORY_SPANS_MEAN = "training/off_policy/trajectory_spans/mean"
VERL_TRAJECTORY_SPANS_MAX = "training/off_policy/trajectory_spans/max"
VERL_TRAJECTORY_SPANS_MIN = "training/off_policy/trajectory_spans/min"
VERL_TRAJECTORY_STALENESS_MEAN = "training/off_policy/trajectory_staleness/mean"
VERL_TRAJECTORY_STALENESS_MAX = "training/off_policy/trajectory_staleness/max"
VERL_TRAJECTORY_STALENESS_MIN = "training/off_policy/trajectory_staleness/min"
VERL_TRAJECTORY_STALENESS_WORST_MEAN = "training/off_policy/trajectory_staleness_worst/mean"
VERL_TRAJECTORY_STALENESS_WORST_MAX = "training/off_policy/trajectory_staleness_worst/max"
VERL_TRAJECTORY_STALENESS_WORST_MIN = "training/off_policy/trajectory_staleness_worst/min"
#: verl 0.9.1's replay buffer: the stale prompt *groups* evicted in a step (summed over its polls),
#: and their staleness as the prompt's dispatch age plus one. Neither means rlmetrics' dropped
#: samples or their lag, so compute_staleness_metrics does not write them; diagnose reads the count.
VERL_EVICTED_SAMPLES = "training/off_policy/evicted_samples"
#: verl's fully-async rollouter: the stale samples dropped since the start of the run (a running
#: total, logged as its last value each step).
VERL_FULLY_ASYNC_DROPPED_STALE_SAMPLES = "fully_async/count/dropped_stale_samples"
#: prime-rl's orchestrator (policy steps between a rollout's policy and the trainer's step).
PRIME_RL_OFF_POLICY_MEAN = "off_policy/mean"
PRIME_RL_OFF_POLICY_MAX = "off_policy/max"
PRIME_RL_OFF_POLICY_DROPPED = "off_policy/dropped"
#: slime's fully-async rollout (the lag of a sample's oldest token; samples of several versions).
SLIME_STALENESS_MEAN = "rollout/staleness/mean"
SLIME_STALENESS_MAX = "rollout/staleness/max"
SLIME_STALENESS_MULTI_VERSION_FRAC = "rollout/staleness/multi_version_frac"
#: NeMo-RL's async GRPO (``nemo_rl/algorithms/grpo.py``, from its replay buffer's ``sample``): the
#: trainer's weight version minus the mean generation version of the prompt groups trained on
#: (bare, as in its metrics dict; its loggers add ``train/``).
NEMO_RL_AVG_TRAJECTORY_AGE = "avg_trajectory_age"
#: AReaL's PPO actor (``areal/trainer/ppo/actor.py``, ``_log_version_staleness_stats``): the mean
#: over a micro-batch's response tokens of ``current_version - version``, averaged over the
#: micro-batches of a step (read by the health rules, never written: see policy.staleness).
AREAL_SAMPLE_STALENESS_THETA_AVG = "ppo_actor/update/version_stats/sample_staleness_theta_avg"

# --- text statistics of a step's rollouts (training.text) ---------------------------------------
#: Prefix of the text statistics (``compute_text_metrics(prefix=)`` replaces it). Lengths are in
#: characters for decoded text and in tokens for token ids.
TEXT_PREFIX = "text/"
#: Prefix of the text statistics of a validation's generations (the verl patch files them beside
#: verl's ``val-core/...`` and ``val-aux/...``).
VAL_TEXT_PREFIX = "val-text/"
TEXT_NUM_RESPONSES = f"{TEXT_PREFIX}num_responses"
TEXT_EMPTY_RATIO = f"{TEXT_PREFIX}empty_ratio"
TEXT_LENGTH_MEAN = f"{TEXT_PREFIX}length/mean"
TEXT_LENGTH_MAX = f"{TEXT_PREFIX}length/max"
TEXT_LENGTH_MIN = f"{TEXT_PREFIX}length/min"
TEXT_LOOP_RATIO = f"{TEXT_PREFIX}repetition/loop_ratio"  # share of responses ending in an n-gram loop
TEXT_DISTINCT_NGRAM_MEAN = f"{TEXT_PREFIX}repetition/distinct_ngram/mean"  # mean per-response distinct-n
TEXT_COMPRESSION_RATIO_MEAN = f"{TEXT_PREFIX}compression_ratio/mean"
TEXT_COMPRESSION_RATIO_MAX = f"{TEXT_PREFIX}compression_ratio/max"
TEXT_COMPRESSION_RATIO_MIN = f"{TEXT_PREFIX}compression_ratio/min"
TEXT_NON_WORD_RATIO_MEAN = f"{TEXT_PREFIX}non_word_ratio/mean"  # decoded text only
TEXT_STOP_REASON_STOP = f"{TEXT_PREFIX}stop_reason/stop"  # end of sequence / stop string
TEXT_STOP_REASON_LENGTH = f"{TEXT_PREFIX}stop_reason/length"
TEXT_STOP_REASON_ABORT = f"{TEXT_PREFIX}stop_reason/abort"
TEXT_STOP_REASON_ERROR = f"{TEXT_PREFIX}stop_reason/error"
TEXT_STOP_REASON_TOOL_CALL = f"{TEXT_PREFIX}stop_reason/tool_call"
TEXT_STOP_REASON_OTHER = f"{TEXT_PREFIX}stop_reason/other"
#: The stop-reason rates, in the order of ``training.text.STOP_REASONS``.
TEXT_STOP_REASON_KEYS = (
    TEXT_STOP_REASON_STOP,
    TEXT_STOP_REASON_LENGTH,
    TEXT_STOP_REASON_ABORT,
    TEXT_STOP_REASON_ERROR,
    TEXT_STOP_REASON_TOOL_CALL,
    TEXT_STOP_REASON_OTHER,
)
TEXT_FORMAT_MATCH_RATIO = f"{TEXT_PREFIX}format/match_ratio"
TEXT_THINK_CLOSED_RATIO = f"{TEXT_PREFIX}think/closed_ratio"
TEXT_THINK_SHARE = f"{TEXT_PREFIX}think/share"  # characters / tokens inside the thinking span
TEXT_THINK_LENGTH_MEAN = f"{TEXT_PREFIX}think/length/mean"
TEXT_THINK_LENGTH_MAX = f"{TEXT_PREFIX}think/length/max"
TEXT_ANSWER_LENGTH_MEAN = f"{TEXT_PREFIX}answer/length/mean"
TEXT_ANSWER_LENGTH_MAX = f"{TEXT_PREFIX}answer/length/max"
# --- per-category keys (group_by= of the batch families; the outcome split) -------------------
#: Per-category keys are ``by_<group>/<category token>/<plain key>``, e.g.
#: ``by_data_source/gsm8k/critic/score/mean`` or ``by_outcome/correct/response_length/mean``.
#: No plain key starts with ``by_``, so the two never collide; the category token is the
#: category with every character other than a letter, a digit, ``_``, ``-`` or ``.`` written as
#: ``%XX`` (its UTF-8 bytes in upper-case hex, ``%`` itself included): ``/`` (the separator of
#: W&B sections, TensorBoard and MLflow paths), spaces and ``:`` never reach a tracker raw, and
#: ``math/algebra`` reads ``math%2Falgebra``. Two tokens are reserved (``%`` followed by letters
#: other than hex digits, which escaping never makes): ``%empty`` for the empty category and
#: ``%other`` for :data:`OTHER_CATEGORY`.
CATEGORY_PREFIX = "by_"
#: The category that holds the samples of the categories beyond ``max_categories=``.
OTHER_CATEGORY = "<other>"
#: ``group_by=`` group of the outcome split (``split_by_outcome=``), and its two categories.
OUTCOME_GROUP = "outcome"
OUTCOME_CORRECT = "correct"
OUTCOME_INCORRECT = "incorrect"
_CATEGORY_TOKENS = {"": "%empty", OTHER_CATEGORY: "%other"}
_TOKEN_CATEGORIES = {token: category for category, token in _CATEGORY_TOKENS.items()}


def _check_group_name(group: object) -> str:
    """``group`` if it is a non-empty name of letters, digits, ``_``, ``-`` and ``.`` (a ValueError else)."""
    if not isinstance(group, str):
        raise TypeError(f"group name must be a string; got {type(group).__name__} {group!r}")
    if not group or not all(c.isascii() and (c.isalnum() or c in "_-.") for c in group):
        raise ValueError(
            f"group name must be a non-empty name of ASCII letters, digits, '_', '-' and '.'; got {group!r}"
        )
    return group


def escape_category(category: str) -> str:
    """The key token of ``category`` (see :data:`CATEGORY_PREFIX`); :func:`unescape_category` inverts it.

    >>> escape_category("math/algebra level 1"), escape_category("é")
    ('math%2Falgebra%20level%201', 'é')
    """
    if category in _CATEGORY_TOKENS:
        return _CATEGORY_TOKENS[category]
    out = []
    for c in category:
        if c.isalnum() or c in "_-.":
            out.append(c)
        else:
            out.extend(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass"))
    return "".join(out)


def unescape_category(token: str) -> str:
    """The category of a key token (the inverse of :func:`escape_category`); ValueError if malformed."""
    if token in _TOKEN_CATEGORIES:
        return _TOKEN_CATEGORIES[token]
    raw = bytearray()
    i = 0
    while i < len(token):
        c = token[i]
        if c == "%":
            pair = token[i + 1 : i + 3]
            if len(pair) != 2 or any(h not in "0123456789ABCDEF" for h in pair):
                raise ValueError(
                    f"malformed category token {token!r}: '%' must be followed by two hex digits"
                )
            raw.append(int(pair, 16))
            i += 3
        else:
            raw.extend(c.encode("utf-8", "surrogatepass"))
            i += 1
    return raw.decode("utf-8", "surrogatepass")


def category_prefix(group: str, category: str) -> str:
    """The prefix every key of ``category`` of ``group`` starts with (its label in findings).

    >>> category_prefix("data_source", "openai/gsm8k")
    'by_data_source/openai%2Fgsm8k'
    """
    return f"{CATEGORY_PREFIX}{_check_group_name(group)}/{escape_category(category)}"


def category_key(key: str, group: str, category: str) -> str:
    """The key of metric ``key`` restricted to ``category`` of ``group``.

    >>> category_key("critic/score/mean", "data_source", "openai/gsm8k")
    'by_data_source/openai%2Fgsm8k/critic/score/mean'
    """
    return f"{category_prefix(group, category)}/{key}"


def split_category_key(key: str) -> tuple[str, str, str] | None:
    """``(plain key, group, category)`` of a per-category key; ``None`` for any other key.

    >>> split_category_key("by_outcome/correct/response_length/mean")
    ('response_length/mean', 'outcome', 'correct')
    >>> split_category_key("critic/score/mean") is None
    True
    """
    if not key.startswith(CATEGORY_PREFIX):
        return None
    parts = key[len(CATEGORY_PREFIX) :].split("/", 2)
    if len(parts) != 3 or not parts[2]:
        return None
    group, token, plain = parts
    try:
        _check_group_name(group)
        category = unescape_category(token)
    except ValueError:
        return None
    return plain, group, category


#: The characters MLflow names write a category token's ``%`` as (MLflow refuses ``%``, and its
#: ``_`` would make ``a%2Fb`` and the category ``a_2Fb`` one name): ``:``, or a space where MLflow
#: refuses ``:`` (Windows). Neither is ever in a token raw (:func:`escape_category` escapes both),
#: so the mapping is injective and :func:`key_from_mlflow_name` inverts it.
MLFLOW_PERCENT = (":", " ")


def key_from_mlflow_name(name: str) -> str:
    """The key an MLflow name stands for: a per-category key's token with its ``%`` restored
    (see :data:`MLFLOW_PERCENT`); any other name as it is.

    >>> key_from_mlflow_name("by_data_source/web:2Fqa/critic/score/mean")
    'by_data_source/web%2Fqa/critic/score/mean'
    >>> key_from_mlflow_name("by_data_source/web_2Fqa/critic/score/mean")  # the category web_2Fqa
    'by_data_source/web_2Fqa/critic/score/mean'
    """
    if not name.startswith(CATEGORY_PREFIX):
        return name
    parts = name[len(CATEGORY_PREFIX) :].split("/", 2)
    if len(parts) != 3 or not parts[2] or not any(c in parts[1] for c in MLFLOW_PERCENT):
        return name
    group, token, rest = parts
    for c in MLFLOW_PERCENT:
        token = token.replace(c, "%")
    try:
        _check_group_name(group)
        unescape_category(token)
    except (TypeError, ValueError):
        return name
    return f"{CATEGORY_PREFIX}{group}/{token}/{rest}"


# --- reward components (training.rewards) ---------------------------------------------------------
REWARD_COMPONENTS_PREFIX = "reward_components/"
#: Statistics of each component: mean, unbiased std, extremes, and the share of samples it decides
#: (its weighted contribution has the largest magnitude).
REWARD_COMPONENT_STATS = ("mean", "std", "max", "min", "decides_frac")


def reward_component_key(component: str, stat: str) -> str:
    """Key of a statistic of one reward component, the name escaped as a category.

    >>> reward_component_key("format/strict", "mean")
    'reward_components/format%2Fstrict/mean'
    """
    return f"{REWARD_COMPONENTS_PREFIX}{escape_category(component)}/{stat}"


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

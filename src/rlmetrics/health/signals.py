"""The signals the health rules read, and the keys each is logged under by rlmetrics/verl, TRL,
OpenRLHF and NeMo-RL.

A *signal* is a quantity a rule needs (the policy entropy, the KL to the reference, the mean
response length ...). Trainers log it under different keys: rlmetrics and verl 0.9.1 under
``actor/entropy`` (verl before 0.4 and OpenRLHF under the name of its loss term,
``actor/entropy_loss``, ``entropy_loss``), TRL's ``GRPOTrainer`` under ``entropy``, NeMo-RL
under ``approx_entropy``. :data:`SIGNALS`
lists, for every signal, its candidate keys, rlmetrics/verl first (verl 0.2 to 0.9: the keys
of 0.9 and the older names it renamed), then TRL (0.14 to 1.16: ``completion_length`` before
``completions/mean_length``), OpenRLHF and NeMo-RL; :func:`resolve` picks the first one
the history holds. A candidate may be a shell pattern (``*``), as the validation keys are
(``val-core/<source>/<var>/mean@<n>``): of several keys that match, the one with the most finite
points is taken (``acc`` before ``reward``, then by name, on a tie).

TRL's metrics read from TensorBoard or W&B carry the prefix transformers' logging callbacks
give them (``train/reward``, ``train/kl``; evaluation ``eval/reward`` where
``trainer_state.json`` holds ``eval_reward``); OpenRLHF and NeMo-RL log ``train/<key>`` too:
every such candidate is listed in both forms.

TensorBoard's CSV download of a tag is named after it with each ``/`` written ``_``
(``run-<run>-tag-critic_score_mean.csv``), as some other exports do: a candidate is also
matched in that form (``critic_score_mean`` for ``critic/score/mean``), after every candidate
as logged. No two signals' candidates share that form, so the match is unambiguous.

The off-policy signals (``staleness_lag``, ``dropped_count``) read, after rlmetrics' own
``staleness/`` keys, the peers' names :data:`rlmetrics.policy.staleness.PEER_KEYS` maps to them
(verl's ``training/off_policy/trajectory_staleness_worst/mean``, prime-rl's ``off_policy/mean``,
slime's ``rollout/staleness/mean``, NeMo-RL's ``avg_trajectory_age``), then AReaL's per-token
lag ``ppo_actor/update/version_stats/sample_staleness_theta_avg`` (a mean of its micro-batches'
means, so not written by rlmetrics, but a lag in versions all the same), and the peers' drop
counters as each counts: verl's replay buffer ``evicted_samples`` (prompt groups a step),
prime-rl's ``off_policy/dropped`` (traces a step), verl's fully-async
``fully_async/count/dropped_stale_samples`` (a running total), so a run of those trainers is
judged on what it logs.

Keys not listed are ignored; a signal none of whose keys is present makes the rules that need it
report that they could not run. A run of your own loop names its signals itself:
:func:`with_signals` (``diagnose(..., signals={"reward": "train_reward"})``, ``rlmetrics
diagnose --signal reward=train_reward``) makes a key the one a signal reads, before any candidate.
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Iterator, Mapping

import numpy as np

from rlmetrics import keys as K
from rlmetrics.health.findings import History, Series

__all__ = ["SIGNALS", "resolve", "resolve_all", "resolving", "with_signals"]

#: ``val-core/<source>/<var>/mean@<n>``: verl's validation score of every data source.
_VAL_CORE_MEAN = K.val_metric(K.VAL_CORE_PREFIX, "*", "*", f"{K.ValName.MEAN}@*")

#: The same as verl's MLflow logger logs it: MLflow takes no ``@``, verl writes ``mean_at_<n>``.
_VAL_CORE_MEAN_MLFLOW = K.val_metric(K.VAL_CORE_PREFIX, "*", "*", f"{K.ValName.MEAN}_at_*")

#: Older verl's validation: ``test_score/<source>`` (``val/test_score/<source>`` in its first releases).
_LEGACY_TEST_SCORE = f"{K.VERL_LEGACY_TEST_SCORE_PREFIX}*"
_LEGACY_VAL_TEST_SCORE = f"{K.VERL_LEGACY_VAL_PREFIX}{_LEGACY_TEST_SCORE}"

#: The prefixes transformers' TensorBoard and W&B callbacks put on the Trainer's logged keys
#: (``rewrite_logs``): ``eval_`` becomes ``eval/``, every other key gets ``train/``.
_HF_TRAIN_PREFIX = "train/"
_HF_EVAL_PREFIX = "eval/"

#: Bare keys of trainers whose TensorBoard and W&B loggers add ``train/`` (``eval/`` to an
#: ``eval_`` key): transformers' Trainer (TRL), OpenRLHF (``"train/%s" % k``) and NeMo-RL
#: (``prefix="train"``).
_TRAINER_KEYS = {
    K.TRL_REWARD,
    K.TRL_EVAL_REWARD,
    K.TRL_LOSS,
    K.TRL_GRAD_NORM,
    K.TRL_ENTROPY,
    K.TRL_KL,
    K.TRL_CLIP_RATIO_REGION_MEAN,
    K.TRL_FRAC_REWARD_ZERO_STD,
    K.TRL_REWARD_STD,
    K.TRL_COMPLETIONS_MEAN_LENGTH,
    K.TRL_LEGACY_COMPLETION_LENGTH,
    K.TRL_LEGACY_CLIP_RATIO,
    K.TRL_COMPLETIONS_CLIPPED_RATIO,
    K.TRL_LEARNING_RATE,
    K.TRL_SAMPLING_IS_RATIO_MEAN,
    K.TRL_SAMPLING_LOGP_DIFFERENCE_MEAN,
    K.TRL_PPO_POLICY_LOSS,
    K.TRL_PPO_APPROXKL,
    K.TRL_PPO_CLIPFRAC,
    K.TRL_PPO_SCORES,
    K.TRL_PPO_KL,
    K.TRL_PPO_ENTROPY,
    K.OPENRLHF_POLICY_LOSS,
    K.OPENRLHF_KL,
    K.OPENRLHF_PPO_KL,
    K.OPENRLHF_REWARD,
    K.OPENRLHF_RESPONSE_LENGTH,
    K.OPENRLHF_ACTOR_LR,
    K.OPENRLHF_ENTROPY,
    K.OPENRLHF_CLIP_RATIO,
    K.NEMO_RL_LOSS,
    K.NEMO_RL_REWARD,
    K.NEMO_RL_GRAD_NORM,
    K.NEMO_RL_KL_PENALTY,
    K.NEMO_RL_APPROX_ENTROPY,
    K.NEMO_RL_TOKEN_MULT_PROB_ERROR,
    K.NEMO_RL_GEN_KL_ERROR,
    K.NEMO_RL_MEAN_GEN_TOKENS,
    K.NEMO_RL_TRUNCATION_RATE,
    K.NEMO_RL_AVG_TRAJECTORY_AGE,
}


def _logged_forms(key: str) -> tuple[str, ...]:
    """A trainer's bare key as it prints it and as TensorBoard/W&B hold it."""
    if key not in _TRAINER_KEYS:
        return (key,)
    if key.startswith(K.TRL_EVAL_PREFIX):
        return key, _HF_EVAL_PREFIX + key.removeprefix(K.TRL_EVAL_PREFIX)
    return key, _HF_TRAIN_PREFIX + key


_CANDIDATES: dict[str, tuple[str, ...]] = {
    # reward of the training rollouts (verl: the task score before the KL penalty), then
    # TRL/OpenRLHF/NeMo-RL's reward, TRL PPOTrainer's reward-model score
    "reward": (K.SCORE_MEAN, K.TRL_REWARD, K.TRL_PPO_SCORES),
    # validation score: verl's val-core mean@n (mean_at_n through MLflow; older verl:
    # test_score/<source>), TRL's evaluation
    # reward, NeMo-RL's validation accuracy
    "val_score": (
        _VAL_CORE_MEAN,
        _VAL_CORE_MEAN_MLFLOW,
        _LEGACY_VAL_TEST_SCORE,
        _LEGACY_TEST_SCORE,
        K.TRL_EVAL_REWARD,
        K.NEMO_RL_VAL_ACCURACY,
    ),
    "loss": (K.ACTOR_PG_LOSS, K.TRL_LOSS, K.TRL_PPO_POLICY_LOSS, K.OPENRLHF_POLICY_LOSS),
    "advantage": (K.ADV_MEAN,),
    # the batch's largest and smallest advantage (verl): their spread, and the mean's scale
    "advantage_max": (K.ADV_MAX,),
    "advantage_min": (K.ADV_MIN,),
    "grad_norm": (K.ACTOR_GRAD_NORM, K.TRL_GRAD_NORM),
    # policy entropy (older verl and OpenRLHF log it under the name of its loss term)
    "entropy": (
        K.ACTOR_ENTROPY,
        K.VERL_LEGACY_ENTROPY,
        K.TRL_ENTROPY,
        K.OPENRLHF_ENTROPY,
        K.NEMO_RL_APPROX_ENTROPY,
        K.TRL_PPO_ENTROPY,
    ),
    # KL to the reference policy: verl's KL loss or KL-in-reward penalty (older verl: critic/kl),
    # TRL's and OpenRLHF's kl (beta > 0), NeMo-RL's kl_penalty
    "kl_ref": (
        K.ACTOR_KL_LOSS,
        K.ACTOR_REWARD_KL_PENALTY,
        K.VERL_LEGACY_KL,
        K.TRL_KL,
        K.NEMO_RL_KL_PENALTY,
        K.TRL_PPO_KL,
    ),
    # KL to the policy of the rollouts (the PPO update's own step size)
    "ppo_kl": (K.PPO_KL, K.TRL_PPO_APPROXKL, K.OPENRLHF_PPO_KL),
    "clip_fraction": (
        K.PG_CLIPFRAC,
        K.TRL_CLIP_RATIO_REGION_MEAN,
        K.TRL_LEGACY_CLIP_RATIO,
        K.TRL_PPO_CLIPFRAC,
        K.OPENRLHF_CLIP_RATIO,
    ),
    "frac_reward_zero_std": (K.GRPO_FRAC_REWARD_ZERO_STD, K.TRL_FRAC_REWARD_ZERO_STD),
    # the mean over the prompt groups of their reward standard deviation (TRL's reward_std: of
    # the group stds, or with scale_rewards="batch" the batch's std): 0 only when every group has
    # no reward spread, which bounds frac_reward_zero_std from below where it is not logged
    "reward_std": (K.GRPO_REWARD_STD_MEAN, K.TRL_REWARD_STD),
    "response_length": (
        K.RESPONSE_LENGTH_MEAN,
        K.TRL_COMPLETIONS_MEAN_LENGTH,
        K.TRL_LEGACY_COMPLETION_LENGTH,
        K.OPENRLHF_RESPONSE_LENGTH,
        K.NEMO_RL_MEAN_GEN_TOKENS,
    ),
    "length_clip_ratio": (
        K.RESPONSE_LENGTH_CLIP_RATIO,
        K.TRL_COMPLETIONS_CLIPPED_RATIO,
        K.NEMO_RL_TRUNCATION_RATE,
    ),
    "throughput": (K.PERF_THROUGHPUT,),
    "explained_variance": (K.VF_EXPLAINED_VAR,),
    "learning_rate": (K.ACTOR_LR, K.TRL_LEARNING_RATE, K.OPENRLHF_ACTOR_LR),
    # rollout/training mismatch (verl's rollout_corr/*, TRL's vLLM importance sampling, NeMo-RL's
    # generation KL and probability error)
    "is_weight_mean": (K.ROLLOUT_CORR_IS_MEAN, K.TRL_SAMPLING_IS_RATIO_MEAN),
    "is_weight_std": (K.ROLLOUT_CORR_IS_STD,),
    "is_ess": (K.ROLLOUT_CORR_IS_EFF_SAMPLE_SIZE,),
    "mismatch_kl": (K.ROLLOUT_CORR_KL, K.ROLLOUT_CORR_K3_KL, K.NEMO_RL_GEN_KL_ERROR),
    "chi2_token": (K.ROLLOUT_CORR_CHI2_TOKEN,),
    # training/rollout perplexity ratio (verl), NeMo-RL's token probability error ratio (>= 1);
    # mean |logp_train - logp_rollout| per token (TRL)
    "ppl_ratio": (K.ROLLOUT_CORR_PPL_RATIO, K.NEMO_RL_TOKEN_MULT_PROB_ERROR),
    "logp_abs_diff": (K.TRL_SAMPLING_LOGP_DIFFERENCE_MEAN,),
    # share of groups whose every sample has full marks (rlmetrics; TRL logs none)
    "frac_all_solved": (K.GRPO_FRAC_ALL_SOLVED,),
    # share of groups none of whose samples is solved (rlmetrics; the TRL callback's grpo/ too)
    "frac_none_solved": (K.GRPO_FRAC_NONE_SOLVED,),
    # Hartigan's dip test of the per-group solve rates, its p-value (rlmetrics' group statistics)
    "solve_rate_dip_pvalue": (K.GRPO_SOLVE_RATE_DIP_PVALUE,),
    # perplexity of the training policy on its own rollouts (verl's rollout correction)
    "perplexity": (K.ROLLOUT_CORR_TRAINING_PPL,),
    # share of importance weights cut by truncation (above the upper bound), or zeroed (IcePop)
    "is_clip_share": (K.ROLLOUT_CORR_IS_RATIO_FRACTION_HIGH, K.ROLLOUT_CORR_IS_OOB_RATIO),
    # off-policy lag, in policy versions (policy.staleness and its documented peer names): a
    # sample's oldest token (verl's trajectory_staleness_worst, prime-rl's off_policy, slime's
    # rollout/staleness, NeMo-RL's avg_trajectory_age); then AReaL's mean over tokens and
    # verl's newest-token lag
    "staleness_lag": (
        K.STALENESS_LAG_MEAN,
        K.VERL_TRAJECTORY_STALENESS_WORST_MEAN,
        K.PRIME_RL_OFF_POLICY_MEAN,
        K.SLIME_STALENESS_MEAN,
        K.NEMO_RL_AVG_TRAJECTORY_AGE,
        K.AREAL_SAMPLE_STALENESS_THETA_AVG,
        K.VERL_TRAJECTORY_STALENESS_MEAN,
    ),
    # samples generated and not trained on: their share (rlmetrics), else their count per step
    # (verl's replay buffer counts evicted prompt groups, prime-rl its stale traces), else a
    # running total since the run began (verl's fully-async rollouter)
    "dropped_share": (K.STALENESS_DROPPED_SHARE,),
    "dropped_count": (K.STALENESS_DROPPED_COUNT, K.VERL_EVICTED_SAMPLES, K.PRIME_RL_OFF_POLICY_DROPPED),
    "dropped_total": (K.VERL_FULLY_ASYNC_DROPPED_STALE_SAMPLES,),
    # mean length of the samples trained on, and of all generated (trained + dropped)
    "trained_length": (K.STALENESS_TRAINED_LENGTH_MEAN,),
    "generated_length": (K.STALENESS_GENERATED_LENGTH_MEAN,),
    # text statistics of the rollouts (training.text)
    "loop_ratio": (K.TEXT_LOOP_RATIO,),
    "distinct_ngram": (K.TEXT_DISTINCT_NGRAM_MEAN,),
    "compression_ratio": (K.TEXT_COMPRESSION_RATIO_MEAN,),
    "non_word_ratio": (K.TEXT_NON_WORD_RATIO_MEAN,),
    "format_match": (K.TEXT_FORMAT_MATCH_RATIO,),
    "stop_length": (K.TEXT_STOP_REASON_LENGTH,),
    "stop_error": (K.TEXT_STOP_REASON_ERROR,),
}

#: Canonical signal -> candidate keys, rlmetrics/verl 0.9.1 first, then TRL (1.16), OpenRLHF and
#: NeMo-RL as they print them, each followed by its form in TensorBoard/W&B (``train/``, ``eval/``).
SIGNALS: dict[str, tuple[str, ...]] = {
    signal: tuple(dict.fromkeys(form for key in keys for form in _logged_forms(key)))
    for signal, keys in _CANDIDATES.items()
}

_PATTERN_CHARS = frozenset("*?[")


def _flat(key: str) -> str:
    """``key`` as a TensorBoard CSV download names it: each ``/`` written ``_``."""
    return key.replace("/", "_")


def _candidates(signal: str) -> tuple[str, ...]:
    """The keys :func:`resolve` tries for ``signal``: as logged, then in their ``/``-less form."""
    return _with_flat_forms(SIGNALS[signal])


@functools.lru_cache(maxsize=256)
def _with_flat_forms(logged: tuple[str, ...]) -> tuple[str, ...]:
    return logged + tuple(dict.fromkeys(_flat(c) for c in logged if "/" in c and _flat(c) not in logged))


def _matches(history: History, candidate: str) -> list[str]:
    if not _PATTERN_CHARS & set(candidate):
        return [candidate] if candidate in history else []
    return list(_pattern_matches(tuple(history), candidate))


@functools.lru_cache(maxsize=256)
def _pattern_matches(keys: tuple[str, ...], pattern: str) -> tuple[str, ...]:
    """The keys matching a shell pattern, for a run's key set (the same at every refresh)."""
    return tuple(fnmatch.filter(keys, pattern))


def _preference(history: History, key: str) -> tuple[int, int, str]:
    values = history[key][1]
    is_acc = f"/{K.ValName.ACC}/" in key
    return (-int(np.isfinite(values).sum()), 0 if is_acc else 1, key)


class _Named(Mapping[str, tuple[np.ndarray, np.ndarray]]):
    """A history whose signals the user named (:func:`with_signals`), or that keeps what
    :func:`resolve` and :func:`resolve_all` found in it (:func:`resolving`)."""

    def __init__(self, history: History, names: Mapping[str, str], *, memo: bool = False) -> None:
        self._history, self.names = history, dict(names)
        self.memo: dict[tuple[str, str], object] | None = {} if memo else None

    def __getitem__(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        return self._history[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._history)

    def __len__(self) -> int:
        return len(self._history)


def with_signals(history: History, names: Mapping[str, str] | None) -> History:
    """``history`` with some signals read from keys the user names, before any candidate key.

    Parameters
    ----------
    history : History
        Metric key -> ``(steps, values)``.
    names : Mapping[str, str] or None
        Signal (a key of :data:`SIGNALS`) -> the metric key of this run that holds it.

    Raises
    ------
    ValueError
        An unknown signal, or a key the run does not log (the message lists keys it does).

    Examples
    --------
    >>> import numpy as np
    >>> h = with_signals({"train_reward": (np.arange(2), np.array([0.1, 0.2]))}, {"reward": "train_reward"})
    >>> resolve(h, "reward").key
    'train_reward'
    """
    if not names:
        return history
    if not isinstance(names, Mapping):
        raise TypeError(f"signals must map a signal to a metric key; got {type(names).__name__}")
    for signal, key in names.items():
        if signal not in SIGNALS:
            raise ValueError(f"signals: unknown signal {signal!r}; known: {', '.join(sorted(SIGNALS))}")
        if not isinstance(key, str) or key not in history:
            logged = sorted(history)
            shown = ", ".join(logged[:12]) + (f" ... ({len(logged)} keys)" if len(logged) > 12 else "")
            raise ValueError(
                f"signals[{signal!r}]: {key!r} is not logged in this run; it logs {shown or 'nothing'}"
            )
    if isinstance(history, _Named):
        names = {**history.names, **names}
        history = history._history
    return _Named(history, names)


def resolving(history: History) -> History:
    """``history`` (named signals and all) keeping what :func:`resolve` and :func:`resolve_all`
    find in it, for the many rules of one diagnosis that read the same signals: the history must
    not change while it is read through the result.

    Examples
    --------
    >>> import numpy as np
    >>> h = resolving({"entropy": (np.arange(2), np.array([1.0, 0.9]))})
    >>> resolve(h, "entropy") is resolve(h, "entropy")
    True
    """
    if isinstance(history, _Named):
        return _Named(history._history, history.names, memo=True)
    return _Named(history, {}, memo=True)


def resolve(history: History, signal: str) -> Series | None:
    """The first candidate key of ``signal`` the history holds, with its steps and values.

    Parameters
    ----------
    history : History
        Metric key -> ``(steps, values)``.
    signal : str
        A key of :data:`SIGNALS`.

    Returns
    -------
    Series or None
        ``(key, steps, values)`` (both arrays of shape ``(n,)``), or None when no candidate key
        has a point.

    Examples
    --------
    >>> import numpy as np
    >>> h = {"entropy": (np.arange(3), np.array([1.0, 0.9, 0.8]))}
    >>> key, steps, values = resolve(h, "entropy")
    >>> key, values.tolist()
    ('entropy', [1.0, 0.9, 0.8])
    >>> resolve(h, "throughput") is None
    True
    """
    if signal not in SIGNALS:
        raise ValueError(f"signal must be one of {sorted(SIGNALS)}; got {signal!r}")
    memo = history.memo if isinstance(history, _Named) else None
    if memo is not None and ("one", signal) in memo:
        return memo["one", signal]  # type: ignore[return-value]
    named = history.names.get(signal) if isinstance(history, _Named) else None
    out = None
    for candidate in (named,) if named is not None else _candidates(signal):
        found = [k for k in _matches(history, candidate) if history[k][1].size]
        if found:
            key = found[0] if len(found) == 1 else min(found, key=lambda k: _preference(history, k))
            steps, values = history[key]
            out = Series(key, np.asarray(steps), np.asarray(values, dtype=np.float64))
            break
    if memo is not None:
        memo["one", signal] = out
    return out


def resolve_all(history: History, signal: str) -> list[str]:
    """Every key of the history that is a candidate of ``signal``, in :data:`SIGNALS` order.

    Examples
    --------
    >>> import numpy as np
    >>> h = {"actor/kl_loss": ([0], [0.1]), "kl": ([0], [0.2])}
    >>> resolve_all(h, "kl_ref")
    ['actor/kl_loss', 'kl']
    """
    if signal not in SIGNALS:
        raise ValueError(f"signal must be one of {sorted(SIGNALS)}; got {signal!r}")
    memo = history.memo if isinstance(history, _Named) else None
    if memo is not None and ("all", signal) in memo:
        return list(memo["all", signal])  # type: ignore[call-overload]
    out: list[str] = []
    named = history.names.get(signal) if isinstance(history, _Named) else None
    for candidate in (named,) if named is not None else _candidates(signal):
        out.extend(k for k in sorted(_matches(history, candidate)) if k not in out)
    if memo is not None:
        memo["all", signal] = tuple(out)
    return out

"""Synthetic RL fine-tuning runs for the health checks: healthy ones, and failures planted at a known step.

A run is a dict of columns: ``"step"`` (ints ``0 .. n_steps - 1``) and one list per metric key,
a value per step (``None`` where the metric is not logged at that step, as validation scores are
only every ``val_every`` steps). :func:`to_rows` turns it into the rows ``read_jsonl`` returns,
:func:`to_history` into a :data:`rlmetrics.health.findings.History`. :func:`row` and
:func:`append` write a JSON-lines run line by line, as a run that grows (the watch and tail tests);
:data:`FORMAT_LOGS` holds one two-step log per format a stream can hold (the readers' tests).

The healthy curves follow what real runs show, with noise: the reward rises and saturates, the
entropy falls by ~65% (Cui et al. 2025 report ~70% in the first couple of hundred steps), the
KL to the reference grows slowly, response lengths drift up by ~30%, the gradient norm is
log-normal around a level, and (PPO) the critic's explained variance rises from below 0. As in
``rlmetrics demo``, the first ~10 steps truncate half the responses or more (a random policy
rarely emits EOS) until the policy learns to stop. ``solved=True`` is a run that learns its task
(the shipped demo): the reward rises to ~0.95, most groups end all solved, and the entropy falls
to ~1.5% of its start, rightly, since the solved policy is deterministic.

>>> run = healthy_run(50, seed=0)
>>> len(run["step"]), len(to_rows(run))
(50, 50)
>>> broken = plant(run, "throughput_drop", onset=30)
>>> broken["perf/throughput"][35] < 0.5 * run["perf/throughput"][35]
True
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import numpy as np

from rlmetrics import keys as K
from rlmetrics.readers import (
    CSV_EXPORT,
    FORMATS,
    RLMETRICS_JSONL,
    TRL_PRINTED,
    TRL_TRAINER_STATE,
    VERL_CONSOLE,
    VERL_JSONL,
)
from rlmetrics.readers import (
    Run as ReadRun,
)

__all__ = [
    "BATCH",
    "FORMAT_LOGS",
    "KINDS_BY_VOCABULARY",
    "OFF_POLICY_KEYS",
    "append",
    "check_two_steps",
    "healthy_run",
    "off_policy_columns",
    "plant",
    "plant_columns",
    "row",
    "text_columns",
    "to_history",
    "to_rows",
    "vocabulary_of",
]

Run = dict[str, list[Any]]

#: The kinds :func:`plant` can plant in a run of each vocabulary and algorithm. TRL logs no
#: throughput and no value function (its current trainers are critic-free), so those are absent.
KINDS_BY_VOCABULARY: dict[tuple[str, str], tuple[str, ...]] = {
    ("verl", "grpo"): (
        "nonfinite",
        "advantage_collapse",
        "entropy_collapse",
        "kl_drift",
        "length_truncation",
        "reward_hacking",
        "rollout_mismatch",
        "grad_spike",
        "throughput_drop",
        "entropy_explosion",
        "length_collapse",
        "length_explosion",
        "no_learning_signal",
        "reward_gaming",
    ),
    ("verl", "ppo"): ("critic_failure", "nonfinite", "grad_spike", "entropy_collapse"),
    ("trl", "grpo"): (
        "nonfinite",
        "advantage_collapse",
        "entropy_collapse",
        "kl_drift",
        "length_truncation",
        "reward_hacking",
        "rollout_mismatch",
        "grad_spike",
        "entropy_explosion",
        "length_collapse",
        "length_explosion",
        "no_learning_signal",
        "reward_gaming",
    ),
}

#: Metric names of each vocabulary: role -> key.
_NAMES = {
    "verl": {
        "reward": K.SCORE_MEAN,
        "val": K.val_metric(K.VAL_CORE_PREFIX, "gsm8k", K.ValName.ACC, K.at_k(K.ValName.MEAN, 4)),
        "loss": K.ACTOR_PG_LOSS,
        "grad_norm": K.ACTOR_GRAD_NORM,
        "entropy": K.ACTOR_ENTROPY,
        "kl": K.ACTOR_KL_LOSS,
        "lr": K.ACTOR_LR,
        "frac_zero_std": K.GRPO_FRAC_REWARD_ZERO_STD,
        "length": K.RESPONSE_LENGTH_MEAN,
        "clip": K.RESPONSE_LENGTH_CLIP_RATIO,
        "is_mean": K.ROLLOUT_CORR_IS_MEAN,
        "all_solved": K.GRPO_FRAC_ALL_SOLVED,
    },
    "trl": {
        "reward": K.TRL_REWARD,
        "val": K.TRL_EVAL_REWARD,
        "loss": K.TRL_LOSS,
        "grad_norm": K.TRL_GRAD_NORM,
        "entropy": K.TRL_ENTROPY,
        "kl": K.TRL_KL,
        "lr": K.TRL_LEARNING_RATE,
        "frac_zero_std": K.TRL_FRAC_REWARD_ZERO_STD,
        "length": K.TRL_COMPLETIONS_MEAN_LENGTH,
        "clip": K.TRL_COMPLETIONS_CLIPPED_RATIO,
        "is_mean": K.TRL_SAMPLING_IS_RATIO_MEAN,
    },
}

MAX_LENGTH = 4096


def healthy_run(
    n_steps: int,
    *,
    seed: int,
    vocabulary: str = "verl",
    algo: str = "grpo",
    val_every: int = 10,
    solved: bool = False,
) -> Run:
    """A healthy run of ``n_steps`` logged steps, with realistic noise.

    Parameters
    ----------
    n_steps : int
        Steps logged (one row per step).
    seed : int
        Seed of the run's own ``np.random.default_rng``: levels and noise.
    vocabulary : {"verl", "trl"}
        Key names: rlmetrics/verl 0.9.1 or TRL's ``GRPOTrainer``.
    algo : {"grpo", "ppo"}
        ``"ppo"`` adds a critic (values, explained variance) and drops the group statistics
        (verl only: TRL's current trainers have no critic).
    val_every : int
        Validation score every that many steps (and at step 0).
    solved : bool
        A run that learns its task: reward to ~0.95, most groups all solved, entropy to ~1.5%
        of its start (rlmetrics/verl GRPO only: the all-solved share is rlmetrics's own key).

    Returns
    -------
    dict of str to list
        ``"step"`` and one column per key.
    """
    if (vocabulary, algo) not in KINDS_BY_VOCABULARY:
        raise ValueError(
            f"(vocabulary, algo) must be one of {sorted(KINDS_BY_VOCABULARY)}; got {(vocabulary, algo)!r}"
        )
    if solved and (vocabulary, algo) != ("verl", "grpo"):
        raise ValueError(f"solved=True needs vocabulary='verl', algo='grpo'; got {(vocabulary, algo)!r}")
    rng = np.random.default_rng(seed)
    n = int(n_steps)
    t = np.arange(n, dtype=np.float64)
    names = _NAMES[vocabulary]

    def lognormal(sigma: float) -> np.ndarray:
        return np.exp(rng.normal(0.0, sigma, n))

    tau = max(n / 4.0, 20.0)
    rise = 1.0 - np.exp(-t / tau)
    r0, gain = rng.uniform(0.1, 0.3), rng.uniform(0.3, 0.5)
    floor, entropy_tau = 0.35, 50.0
    if solved:
        r0, floor, entropy_tau = rng.uniform(0.02, 0.1), 0.015, tau / 2.0
        gain = 0.95 - r0
    reward = np.clip(r0 + gain * rise + rng.normal(0.0, 0.03, n), 0.0, 1.0)
    entropy = rng.uniform(0.3, 1.5) * (floor + (1.0 - floor) * np.exp(-t / entropy_tau)) * lognormal(0.05)
    kl = (0.01 * rise + 0.01 * t / max(n, 1) + 1e-4) * lognormal(0.1)
    grad_norm = rng.uniform(0.2, 1.0) * (1.0 - 0.2 * t / max(n, 1)) * lognormal(0.25)
    length = rng.uniform(200.0, 600.0) * (1.0 + 0.3 * t / max(n, 1)) * lognormal(0.05)
    # the first ~10 steps run to the limit until the policy learns to emit EOS
    early = rng.uniform(0.4, 0.8) / (1.0 + np.exp((t - rng.uniform(8.0, 14.0)) / 2.0))
    clip = np.clip(early + rng.normal(0.01, 0.005, n), 0.0, 1.0)

    cols: dict[str, np.ndarray] = {
        names["reward"]: reward,
        names["loss"]: rng.normal(0.0, 0.02, n),
        names["grad_norm"]: grad_norm,
        names["entropy"]: entropy,
        names["kl"]: kl,
        names["lr"]: np.full(n, 1e-6),
        names["length"]: length,
        names["clip"]: clip,
    }
    if algo == "grpo":
        top = 0.9 if solved else 0.5
        zero_std = np.clip(0.3 + (top - 0.3) * rise + rng.normal(0.0, 0.05, n), 0.0, 1.0)
        cols[names["frac_zero_std"]] = zero_std
        if vocabulary == "verl":
            # all-solved groups are some of the zero-spread ones
            share = (0.75 if solved else 0.1) * rise**2
            cols[names["all_solved"]] = np.clip(share + rng.normal(0.0, 0.02, n), 0.0, zero_std)
    if vocabulary == "verl":
        throughput = rng.uniform(1000.0, 4000.0) * lognormal(0.05)
        throughput[:1] *= 0.5  # the first step compiles and warms up
        cols |= {
            K.ADV_MEAN: rng.normal(0.0, 0.01, n),
            K.PPO_KL: 1e-4 * lognormal(0.3),
            K.PG_CLIPFRAC: np.clip(rng.normal(0.002, 0.001, n), 0.0, 1.0),
            K.PERF_THROUGHPUT: throughput,
            K.ROLLOUT_CORR_IS_MEAN: 1.0 + rng.normal(0.0, 0.005, n),
            K.ROLLOUT_CORR_IS_STD: 0.05 * lognormal(0.1),
            K.ROLLOUT_CORR_IS_EFF_SAMPLE_SIZE: np.clip(0.97 + rng.normal(0.0, 0.01, n), 0.0, 1.0),
            K.ROLLOUT_CORR_KL: 1e-3 * lognormal(0.3),
            K.ROLLOUT_CORR_CHI2_TOKEN: 0.01 * lognormal(0.3),
            K.ROLLOUT_CORR_PPL_RATIO: 1.0 + 0.002 * lognormal(0.3),
        }
    else:
        cols |= {
            K.TRL_REWARD_STD: np.clip(0.3 + rng.normal(0.0, 0.02, n), 0.0, None),
            K.TRL_CLIP_RATIO_REGION_MEAN: np.clip(rng.normal(0.002, 0.001, n), 0.0, 1.0),
            K.TRL_SAMPLING_IS_RATIO_MEAN: 1.0 + rng.normal(0.0, 0.005, n),
            K.TRL_SAMPLING_LOGP_DIFFERENCE_MEAN: 0.01 * lognormal(0.2),
            K.TRL_NUM_TOKENS: np.cumsum(length * 64.0),
        }
    if algo == "ppo":
        warm = np.exp(-t / 20.0)
        cols[K.VF_EXPLAINED_VAR] = 0.6 * (1.0 - warm) - 0.2 * warm + rng.normal(0.0, 0.05, n)
        cols[K.VALUES_MEAN] = reward * 0.9 + rng.normal(0.0, 0.02, n)
        cols[K.CRITIC_VF_LOSS] = 0.05 * lognormal(0.2)

    run: Run = {K.TRACKING_STEP: list(range(n))}
    run |= {key: [float(x) for x in values] for key, values in cols.items()}
    val = np.clip(r0 + 0.05 + 0.8 * gain * rise + rng.normal(0.0, 0.015, n), 0.0, 1.0)
    run[names["val"]] = [float(v) if i % val_every == 0 else None for i, v in enumerate(val)]
    return run


def vocabulary_of(run: Run) -> str:
    """``"verl"`` or ``"trl"``: which names the run logs."""
    return "verl" if K.ACTOR_ENTROPY in run else "trl"


def plant(run: Run, kind: str, onset: int, *, seed: int = 0) -> Run:
    """A copy of ``run`` with the failure ``kind`` starting at step ``onset``.

    Parameters
    ----------
    run : dict
        From :func:`healthy_run`.
    kind : str
        A kind of :data:`rlmetrics.health.rules.KINDS` listed for the run's vocabulary and
        algorithm in :data:`KINDS_BY_VOCABULARY`.
    onset : int
        First step of the failure (an index into ``run["step"]``).
    seed : int
        Seed of the noise the failure adds.

    Returns
    -------
    dict
        The broken run; ``run`` is not changed.
    """
    vocabulary = vocabulary_of(run)
    algo = "ppo" if K.VF_EXPLAINED_VAR in run else "grpo"
    if kind not in KINDS_BY_VOCABULARY[(vocabulary, algo)]:
        raise ValueError(f"kind {kind!r} cannot be planted in a {vocabulary} {algo} run")
    n = len(run[K.TRACKING_STEP])
    if not 0 <= onset < n:
        raise ValueError(f"onset must be a step of the run, in [0, {n}); got {onset}")
    out = copy.deepcopy(run)
    names = _NAMES[vocabulary]
    rng = np.random.default_rng(seed)
    after = np.arange(n) >= onset
    dt = np.maximum(np.arange(n) - onset, 0).astype(np.float64)

    def col(role_or_key: str) -> np.ndarray:
        key = names.get(role_or_key, role_or_key)
        return np.array([math.nan if v is None else v for v in out[key]], dtype=np.float64)

    def put(role_or_key: str, values: np.ndarray) -> None:
        key = names.get(role_or_key, role_or_key)
        old = out[key]
        out[key] = [None if o is None else float(v) for o, v in zip(old, values, strict=True)]

    def freeze(role: str) -> None:
        """The value at the onset (plus the same noise) from then on: a flat curve."""
        x = col(role)
        level = np.nanmedian(x[max(onset - 5, 0) : onset + 1])
        noise = x - np.nanmedian(x)
        put(role, np.where(after, level + 0.5 * noise, x))

    if kind == "nonfinite":
        put("loss", np.where(after, math.nan, col("loss")))
        put(
            "grad_norm",
            np.where(np.arange(n) == onset, math.inf, np.where(after, math.nan, col("grad_norm"))),
        )
    elif kind == "advantage_collapse":
        ramp = np.clip(dt / 5.0, 0.0, 1.0) * after
        frac = col("frac_zero_std")
        put("frac_zero_std", np.clip(frac + ramp * (0.97 - frac) + rng.normal(0, 0.01, n) * after, 0, 1))
        if "all_solved" in names and names["all_solved"] in out:
            put("all_solved", col("all_solved") * (1.0 - ramp))  # none solved: every group all wrong
    elif kind == "entropy_collapse":
        put("entropy", col("entropy") * np.maximum(np.exp(-dt / 4.0), 0.01))
    elif kind == "kl_drift":
        put("kl", col("kl") * np.exp(dt / 12.0))
        freeze("reward")
    elif kind == "length_truncation":
        put("clip", np.where(after, np.clip(0.4 + rng.normal(0, 0.03, n), 0, 1), col("clip")))
        put("length", col("length") * np.where(after, 1.3, 1.0))
    elif kind == "reward_hacking":
        put("reward", np.clip(col("reward") + 0.3 * np.clip(dt / 60.0, 0, 1), 0, 1))
        put("val", col("val") - 0.3 * np.clip(dt / 60.0, 0, 1))
    elif kind == "rollout_mismatch":
        put("is_mean", np.where(after, 0.4 + rng.normal(0, 0.03, n), col("is_mean")))
        if vocabulary == "verl":
            put(
                K.ROLLOUT_CORR_KL,
                np.where(after, 0.2 * np.exp(rng.normal(0, 0.2, n)), col(K.ROLLOUT_CORR_KL)),
            )
            put(
                K.ROLLOUT_CORR_IS_EFF_SAMPLE_SIZE,
                np.where(after, 0.2, col(K.ROLLOUT_CORR_IS_EFF_SAMPLE_SIZE)),
            )
        else:
            key = K.TRL_SAMPLING_LOGP_DIFFERENCE_MEAN
            put(key, np.where(after, 0.2 * np.exp(rng.normal(0, 0.2, n)), col(key)))
    elif kind == "grad_spike":
        factor = np.ones(n)
        for offset, size in ((0, 50.0), (7, 30.0), (15, 40.0)):
            if onset + offset < n:
                factor[onset + offset] = size
        put("grad_norm", col("grad_norm") * factor)
    elif kind == "throughput_drop":
        put(K.PERF_THROUGHPUT, col(K.PERF_THROUGHPUT) * np.where(after, 0.35, 1.0))
    elif kind == "entropy_explosion":
        # entropy to 4x its early level and length to 3x within 5 steps: gibberish
        ramp = np.clip(dt / 5.0, 0.0, 1.0) * after
        early = np.nanmedian(col("entropy")[:10])
        gibberish = early * (1.0 + 3.0 * ramp) * np.exp(rng.normal(0, 0.05, n))
        put("entropy", np.where(after, gibberish, col("entropy")))
        put("length", col("length") * (1.0 + 2.0 * ramp))
        put("reward", col("reward") * np.where(after, 0.5, 1.0))
    elif kind == "length_collapse":
        put("length", np.maximum(col("length") * np.exp(-dt / 5.0), 3.0 + rng.uniform(0, 2, n)))
        put("reward", col("reward") * np.where(after, 0.3, 1.0))
    elif kind == "length_explosion":
        grown = np.minimum(col("length") * (1.0 + dt / 4.0), MAX_LENGTH * rng.uniform(0.9, 1.0, n))
        put("length", grown)
        freeze("reward")
    elif kind == "critic_failure":
        put(K.VF_EXPLAINED_VAR, np.where(after, -0.5 + rng.normal(0, 0.1, n), col(K.VF_EXPLAINED_VAR)))
    elif kind == "reward_gaming":
        # the policy finds an exploit: the reward jumps to its ceiling while the KL and the
        # length run away; no validation is logged (it would be reward_hacking's to judge)
        ramp = np.clip((dt + 1.0) / 3.0, 0.0, 1.0) * after
        ceiling = np.clip(0.97 + rng.normal(0, 0.01, n), 0, 1)
        put("reward", np.where(after, col("reward") + ramp * (ceiling - col("reward")), col("reward")))
        put("kl", col("kl") * np.exp(dt / 5.0))
        put("length", col("length") * (1.0 + dt / 10.0))
        out[names["val"]] = [None] * n
    elif kind == "no_learning_signal":
        put("grad_norm", col("grad_norm") * np.where(after, 0.005, 1.0))
        freeze("reward")
    return out


def to_rows(run: Run) -> list[dict[str, Any]]:
    """The rows ``read_jsonl`` would return: one dict per step, without the metrics not logged there."""
    steps = run[K.TRACKING_STEP]
    rows: list[dict[str, Any]] = [{K.TRACKING_STEP: s} for s in steps]
    for key, values in run.items():
        if key == K.TRACKING_STEP:
            continue
        for row, value in zip(rows, values, strict=True):
            if value is not None:
                row[key] = value
    return rows


def to_history(run: Run) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The run as a history: key -> (steps, values) of the steps where the key is logged."""
    steps = np.asarray(run[K.TRACKING_STEP], dtype=np.int64)
    out = {}
    for key, values in run.items():
        if key == K.TRACKING_STEP:
            continue
        logged = np.array([v is not None for v in values])
        out[key] = (steps[logged], np.array([v for v in values if v is not None], dtype=np.float64))
    return out


# --- off-policy staleness and text statistics ------------------------------------------------------

#: The key of the mean lag and of the dropped samples (a share for rlmetrics, a count per step for
#: the peers: the names ``rlmetrics.policy.staleness.PEER_KEYS`` maps) in each vocabulary.
OFF_POLICY_KEYS: dict[str, dict[str, str]] = {
    "rlmetrics": {"lag": K.STALENESS_LAG_MEAN, "dropped": K.STALENESS_DROPPED_SHARE},
    "verl": {"lag": K.VERL_TRAJECTORY_STALENESS_WORST_MEAN, "dropped": K.VERL_EVICTED_SAMPLES},
    "prime-rl": {"lag": K.PRIME_RL_OFF_POLICY_MEAN, "dropped": K.PRIME_RL_OFF_POLICY_DROPPED},
    "slime": {"lag": K.SLIME_STALENESS_MEAN},
}


def _floats(x: Any) -> list[Any]:
    return [float(v) for v in np.asarray(x, dtype=np.float64)]


#: Samples generated per step in :func:`off_policy_columns` and :func:`text_columns`.
BATCH = 256


def off_policy_columns(n_steps: int, *, seed: int, vocabulary: str = "rlmetrics", lag: float = 2.0) -> Run:
    """The staleness columns of a healthy asynchronous run: a bounded queue holds the mean lag at
    ``lag`` (batch noise), 5% of the samples dropped at random (so the trained and generated
    lengths agree), the rollout/training mismatch and the truncated importance-weight share flat.

    >>> cols = off_policy_columns(30, seed=0)
    >>> round(float(np.median(cols[K.STALENESS_LAG_MEAN])), 1)
    2.0
    """
    rng = np.random.default_rng(seed)
    keys = OFF_POLICY_KEYS[vocabulary]
    out: Run = {K.TRACKING_STEP: list(range(n_steps))}
    out[keys["lag"]] = _floats(np.maximum(lag + rng.normal(0.0, 0.15, n_steps), 0.0))
    out[K.ROLLOUT_CORR_K3_KL] = _floats(2e-3 * np.exp(rng.normal(0.0, 0.2, n_steps)))
    out[K.ROLLOUT_CORR_IS_RATIO_FRACTION_HIGH] = _floats(
        rng.binomial(BATCH * 50, 0.01, n_steps) / (BATCH * 50)
    )
    if "dropped" in keys:
        dropped = rng.binomial(BATCH, 0.05, n_steps).astype(np.float64)
        out[keys["dropped"]] = _floats(dropped / BATCH if vocabulary == "rlmetrics" else dropped)
    if vocabulary == "rlmetrics":
        generated = 400.0 * np.exp(rng.normal(0.0, 0.05, n_steps))
        out[K.STALENESS_GENERATED_LENGTH_MEAN] = _floats(generated)
        out[K.STALENESS_TRAINED_LENGTH_MEAN] = _floats(generated * np.exp(rng.normal(0.0, 0.01, n_steps)))
    return out


def text_columns(n_steps: int, *, seed: int) -> Run:
    """The text statistics of a healthy run that learns: its early loops and truncation fade, the
    format check is learnt (0.6 to 0.9 of the answers), responses compress a little better as
    they grow; binomial noise of a batch of :data:`BATCH` responses.

    >>> cols = text_columns(100, seed=0)
    >>> cols[K.TEXT_FORMAT_MATCH_RATIO][-1] > cols[K.TEXT_FORMAT_MATCH_RATIO][0]
    True
    """
    rng = np.random.default_rng(seed)
    t = np.arange(n_steps, dtype=np.float64)
    early = np.exp(-t / 20.0)  # the first ~20 steps of a policy that has not learnt to stop

    def share(p: np.ndarray) -> list[float]:
        return _floats(rng.binomial(BATCH, np.clip(p, 0.0, 1.0)) / BATCH)

    learnt = 1.0 - np.exp(-t / max(n_steps / 4.0, 1.0))
    return {
        K.TRACKING_STEP: list(range(n_steps)),
        K.TEXT_LOOP_RATIO: share(0.02 + 0.2 * early),
        K.TEXT_DISTINCT_NGRAM_MEAN: _floats(0.85 - 0.1 * early + rng.normal(0.0, 0.01, n_steps)),
        K.TEXT_COMPRESSION_RATIO_MEAN: _floats(
            0.58 - 0.03 * t / max(n_steps, 1) + rng.normal(0.0, 0.01, n_steps)
        ),
        K.TEXT_NON_WORD_RATIO_MEAN: share(np.full(n_steps, 0.15)),
        K.TEXT_FORMAT_MATCH_RATIO: share(0.6 + 0.3 * learnt),
        K.TEXT_STOP_REASON_LENGTH: share(0.05 + 0.4 * early),
        K.TEXT_STOP_REASON_ERROR: share(np.full(n_steps, 0.002)),
    }


def plant_columns(run: Run, kind: str, onset: int, *, seed: int = 0) -> Run:
    """``run`` (off-policy or text columns, or a run holding them) with ``kind`` planted from step
    ``onset`` on (index = step).

    >>> cols = plant_columns(off_policy_columns(40, seed=0), "staleness_growth", 20)
    >>> cols[K.STALENESS_LAG_MEAN][39] > cols[K.STALENESS_LAG_MEAN][19] + 3
    True
    """
    rng = np.random.default_rng(seed + 10_000)
    out = copy.deepcopy(run)
    n = len(out[K.TRACKING_STEP])
    after = np.arange(n) >= onset
    ramp = np.clip((np.arange(n) - onset + 1) / 5.0, 0.0, 1.0)  # reaches its level in 5 steps
    lag_key = next((k for k in (v["lag"] for v in OFF_POLICY_KEYS.values()) if k in out), None)
    drop_key = next((k for k in (v.get("dropped") for v in OFF_POLICY_KEYS.values()) if k and k in out), None)

    def change(key: str, f: Any) -> None:
        x = np.asarray(out[key], dtype=np.float64)
        out[key] = _floats(np.where(after, f(x), x))

    if kind == "staleness_growth":  # the queue grows: 0.2 versions more per step
        change(lag_key, lambda x: x + 0.2 * (np.arange(n) - onset))
    elif kind == "staleness_cost":  # a bounded lag 3 versions higher, the mismatch 4x with it
        change(lag_key, lambda x: x + 3.0)
        for key in (K.ROLLOUT_CORR_KL, K.ROLLOUT_CORR_K3_KL):  # whichever the run logs
            if key in out:
                change(key, lambda x: 4.0 * x)
    elif kind == "staleness_drops":  # a quarter more of the samples dropped (counts: 6x)
        share = drop_key == K.STALENESS_DROPPED_SHARE
        change(drop_key, lambda x: x + 0.25 if share else rng.binomial(BATCH, 0.3, n).astype(np.float64))
    elif kind == "staleness_length_bias":  # the long rollouts dropped: trained 20% shorter
        change(K.STALENESS_TRAINED_LENGTH_MEAN, lambda x: 0.8 * x)
    elif kind == "repetition_rise":
        change(K.TEXT_LOOP_RATIO, lambda x: np.clip(x + 0.3 * ramp, 0.0, 1.0))
        change(K.TEXT_DISTINCT_NGRAM_MEAN, lambda x: x - 0.2 * ramp)
    elif kind == "gibberish_rise":
        change(K.TEXT_COMPRESSION_RATIO_MEAN, lambda x: x + 0.1 * ramp)
        change(K.TEXT_NON_WORD_RATIO_MEAN, lambda x: np.clip(x + 0.3 * ramp, 0.0, 1.0))
    elif kind == "format_failure_rise":
        change(K.TEXT_FORMAT_MATCH_RATIO, lambda x: np.clip(x - 0.3 * ramp, 0.0, 1.0))
    elif kind == "stop_reason_shift":  # the length limit takes over at once
        change(K.TEXT_STOP_REASON_LENGTH, lambda x: rng.binomial(BATCH, 0.6, n) / BATCH)
    else:
        raise ValueError(f"cannot plant {kind!r}")
    return out


# --------------------------------------------------------------------------------------------
# a JSON-lines run written as it grows (the watch and tail tests)


def row(step, loss=0.1, **more):
    """One line of a rlmetrics JSON-lines run: the step, a loss and two more signals."""
    return {"step": step, K.ACTOR_PG_LOSS: loss, K.ACTOR_ENTROPY: 0.5, K.SCORE_MEAN: 0.2, **more}


def append(path, *rows, raw=""):
    """Append ``rows`` to the file, one JSON line each, then ``raw`` as is (a line being written)."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in rows) + raw)


# --------------------------------------------------------------------------------------------
# one log per format (the readers' tests)

# one log per format that a stream can hold, each with "reward" at steps 1 and 2
FORMAT_LOGS = [
    ("rlmetrics-jsonl", b'{"step": 1, "reward": 0.1}\n{"step": 2, "reward": 0.2}\n', RLMETRICS_JSONL),
    (
        "verl-jsonl",
        b'{"step": 1, "data": {"reward": 0.1}}\n{"step": 2, "data": {"reward": 0.2}}\n',
        VERL_JSONL,
    ),
    (
        "trainer-state-pretty",
        b'{\n "log_history": [{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.2}]\n}\n',
        TRL_TRAINER_STATE,
    ),
    (
        "trainer-state-one-line",
        b'{"log_history": [{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.2}]}',
        TRL_TRAINER_STATE,
    ),
    (
        "verl-console",
        b"(TaskRunner pid=1) step:1 - reward:0.1\n(TaskRunner pid=1) step:2 - reward:0.2\n",
        VERL_CONSOLE,
    ),
    ("trl-printed", b"{'loss': 0.5, 'reward': 0.1}\n{'loss': 0.4, 'reward': 0.2}\n", TRL_PRINTED),
    ("trl-table", b"Step | Training Loss | reward\n1 | 0.5 | 0.1\n2 | 0.4 | 0.2\n", TRL_PRINTED),
    ("csv-export", b"Step,run-1 - reward\n1,0.1\n2,0.2\n", CSV_EXPORT),
]


def check_two_steps(run: ReadRun, kind: str) -> None:
    """``run`` is one of :data:`FORMAT_LOGS` read: format ``kind``, "reward" 0.1 and 0.2 at steps 1 and 2."""
    assert isinstance(run, ReadRun) and run.format == kind and kind in FORMATS
    assert run.n_steps == 2 and run.steps.tolist() == [1, 2]
    assert run.series["reward"][1].tolist() == [0.1, 0.2]

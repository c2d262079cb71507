"""The demo: train a tiny policy with GRPO (or PPO) on the CPU and log every metric family.

The run is a miniature of a verl training step, on a task whose answers can be checked
(reversing short strings, see :mod:`rlmetrics.demo.task`). Like a real run it starts from a
model that knows the answer's format: a short supervised warm start teaches the fresh policy to
write as many letters as the prompt has and then stop, but not which letters, so reversing is
left to RL. Each step then runs:

1. ``gen``: sample ``group_size`` responses per prompt with the policy in bfloat16 (the
   "inference engine"), keeping the rollout's log-probabilities;
2. ``reward``: score the answers (verifiable reward, placed on the last response token);
3. ``old_log_prob``: recompute log-probabilities in float32 (the "training engine"), with the
   entropy and the sum of squared probabilities from the real logits;
4. ``ref``: log-probabilities under the frozen warm-started policy (the KL loss; with a KL
   coefficient of 0 the KL is still measured and logged, not added to the loss);
5. ``values`` / ``update_critic`` (PPO only): a critic with its own value head;
6. ``adv``: GRPO group-normalised advantages (or GAE for PPO);
7. ``update_actor``: clipped policy-gradient updates over mini-batches.

The batch is kept in verl's layout (``prompts``, ``responses``, ``attention_mask``,
``response_mask``, ``token_level_scores``, ``advantages``, ``old_log_probs``,
``rollout_log_probs``, ``sum_pi_squared`` ...), and every step logs through :class:`Tracker`
the data metrics, stage timings, throughput and MFU, gradient-variance proxies, GRPO group
statistics, PPO update statistics and the rollout/training mismatch; every ``val_every`` steps
a validation with several samples per prompt logs ``val-core/...`` (mean@N, pass@k, maj@k,
best@k with intervals).

Off-policy (``off_policy_lag=N``): stages 1-2 are the generator, stages 3-7 the trainer, joined
by a first-in-first-out queue of rollouts, each with its behaviour log-probabilities and the
policy version that wrote it (the number of actor updates done when it was generated). The
generator runs ``N`` rollouts ahead: before the first update it fills the queue with ``N + 1``
rollouts of version 0, then writes one rollout per step with the current policy, and each step
trains on the oldest. The lag ramps ``0, 1, ..., N`` over the first ``N + 1`` steps and is
``N`` from step ``N + 1`` on; ``old_log_prob`` is recomputed by the current policy, so the
rollout/training mismatch (``rollout_corr/...``) holds the policy's drift over the lag besides
the precision gap. Every step logs the ``staleness/...`` metrics of the batch trained on
(:func:`rlmetrics.compute_staleness_metrics`: per-sample versions, the token importance weights
``exp(old_log_prob - rollout_log_prob)``, rewards and lengths; lag 0 at ``N = 0``). At ``N = 0``
the run draws the same random numbers in the same order as an on-policy run and logs the same
values.

Two options make the queue misbehave as an asynchronous pipeline does, for the health rules
(``staleness_growth``, ``staleness_drops``) to see it on a real run:

* ``off_policy_growth=g`` (> 0): the generator outruns the trainer. From step 2 on it writes
  ``1 + floor(g * (t - 1)) - floor(g * (t - 2))`` rollouts at step ``t`` (``g`` extra a step on
  average) while the trainer takes one, so the queue and the lag grow without bound, by about
  ``g / (1 + g)`` versions a step (a half at ``g = 1``).
* ``max_staleness=S``: a bound on the lag (verl's fully-async staleness threshold, prime-rl's
  async level). The trainer drops the queued rollouts staler than ``S`` before it takes one
  (logged as ``staleness/dropped/...``, with their versions, lengths and rewards; each step
  writes a rollout of lag 0, so one is always left). With ``g > 0`` the lag then stops at ``S``
  and the surplus is dropped instead: ``g / (1 + g)`` of the generated samples (a half at
  ``g = 1``). The dropped rollouts were written by the same policies as the kept ones, so the
  drops do not bias the lengths trained on.

Same seed, same metrics (timings aside): parameters, prompts and samples come from generators
seeded by ``seed``; torch's and numpy's global random states are not used. torch is imported
when a run starts; the ``rlmetrics demo`` command is :mod:`rlmetrics.cli.demo`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlmetrics import keys as K
from rlmetrics._core.checks import check_int, check_seed
from rlmetrics.aggregation import reduce_metrics
from rlmetrics.demo.task import (
    EOS,
    ROLLOUT_DTYPES,
    PolicyConfig,
    ReversalTask,
    _torch,
    generate,
    init_policy,
    resolve_rollout_dtype,
    response_logits,
    warm_start,
)
from rlmetrics.policy.groups import compute_group_metrics
from rlmetrics.policy.logits import entropy_and_sum_pi_squared_from_logits
from rlmetrics.policy.mismatch import compute_rollout_mismatch_metrics
from rlmetrics.policy.ppo import compute_ppo_update_metrics
from rlmetrics.policy.staleness import compute_staleness_metrics
from rlmetrics.policy.variance import compute_variance_proxy_metrics
from rlmetrics.tracking import BACKENDS, Tracker, WandbBackend, check_backends
from rlmetrics.training.data import compute_data_metrics
from rlmetrics.training.samples import SampleTable, select_samples
from rlmetrics.training.text import compute_text_metrics
from rlmetrics.training.timers import timer
from rlmetrics.training.timing import compute_throughput_metrics, compute_timing_metrics
from rlmetrics.validation.exact.summary import summarize_validation
from rlmetrics.validation.verl.bootstrap import flatten_validation_metrics, process_validation_metrics

__all__ = ["SUMMARY_KEYS", "DemoConfig", "DemoResult", "demo_call", "run_demo", "val_acc_key"]

#: Nominal peak FLOP/s of the demo's reference machine (2 x86 cores, AVX-512 FMA, fp32):
#: 2 cores x 64 FLOP/cycle x 2.5 GHz. Only used for ``perf/mfu``; pass ``peak_flops=`` for yours.
CPU_PEAK_FLOPS = 3.2e11

_DATA_SOURCE = "reverse"
#: The n of the text statistics' distinct-n: the demo's answers are 2 to 5 tokens long.
_TEXT_NGRAM = 2
#: The stop reasons of the demo's responses (they end with EOS, or at the length limit).
_STOP, _LENGTH = "stop", "length"

#: The metrics a demo run's summary shows, in this order.
SUMMARY_KEYS = (
    K.SCORE_MEAN,
    K.TRAIN_ACC,
    K.RESPONSE_LENGTH_MEAN,
    K.RESPONSE_LENGTH_CLIP_RATIO,
    K.ACTOR_ENTROPY,
    K.PG_CLIPFRAC,
    K.VARIANCE_PROXY_TOTAL_POWER,
    K.ROLLOUT_CORR_K3_KL,
    K.timing_s(K.STAGE_STEP),
    K.PERF_THROUGHPUT,
    K.PERF_MFU,
)


@dataclass(frozen=True)
class DemoConfig:
    """Settings of a demo run (the defaults learn in well under two minutes on 2 cores).

    Attributes
    ----------
    steps : int
        Training steps.
    seed : int
        Seeds the parameters, the prompts and the samples.
    algo : {"grpo", "ppo"}
        GRPO (group-normalised outcome advantages, no critic) or PPO with a critic and GAE.
    n_prompts, group_size : int
        Prompts per step and responses per prompt (``group_size >= 2``; GRPO needs a group).
    lr : float
        AdamW learning rate of the actor (and of the critic unless ``critic_lr`` is given).
    critic_lr : float or None
        AdamW learning rate of the PPO critic (``None``: ``lr``).
    mini_batches : int
        Policy updates per step; the later ones are off-policy, so clipping shows.
    clip_ratio : float
        PPO clip range ``epsilon``.
    kl_coef : float
        Weight of the ``low_var_kl`` loss to the frozen initial policy. At 0 the KL is measured
        but not penalised: ``actor/kl_loss`` still shows the policy drifting from the reference.
    entropy_coef : float
        Weight of verl's entropy bonus (``loss = pg_loss - entropy_coef * entropy``); 0 is off.
    grad_clip : float
        Gradient-norm clip.
    max_response_length : int or None
        Response-length limit of the rollout and of validation (``None``: the longest answer,
        its ``EOS`` and one spare token, ``max_len + 2``). A limit below ``max_len + 1`` cuts
        answers off, which ``response_length/clip_ratio`` shows.
    rollout_temperature : float
        Sampling temperature of the rollout. The trainer scores at temperature 1, so any other
        value makes the rollout and training policies disagree (``rollout_corr/...``).
    reward : {"score", "acc"}
        ``"score"``: the fraction of answer positions right (dense); ``"acc"``: 1 for an exact
        answer, else 0 (sparse: on a hard task most groups then score all 0).
    val_every, val_prompts, val_samples : int
        Validation period (in steps; also before training and at the end), held-out prompts
        and samples per prompt (the ``N`` of mean@N).
    rollout_dtype : {"auto", "bfloat16", "float32", "bfloat16-weights"}
        Precision of generation. bfloat16 gives a real rollout/training mismatch, but CPUs
        without native bfloat16 emulate it ~28x slower; ``"auto"`` takes bfloat16 where it is
        native and else ``"bfloat16-weights"`` (float32 arithmetic on bfloat16-rounded
        parameters: a mismatch of the same kind at float32 speed). :attr:`rollout_precision`
        is the one used.
    n_letters, min_len, max_len : int
        The task: alphabet size and string lengths.
    d_model, n_layers, n_heads : int
        Size of the policy.
    warm_start_steps : int
        Supervised steps that teach the fresh policy the answer's format (its length, then
        ``EOS``) but not the task, before RL (:func:`rlmetrics.demo.task.warm_start`): the run
        starts, as real ones do, from a model that knows when to stop. 0 starts RL from the
        random initialisation, whose answers mostly run to the length limit for the first
        ~70 steps.
    peak_flops : float
        Peak FLOP/s used for ``perf/mfu``.
    off_policy_lag : int
        Policy versions between a rollout's generation and its training step (>= 0; module
        docstring). 0 is on-policy.
    off_policy_growth : float
        Extra rollouts the generator writes a step beyond the one the trainer takes (>= 0): the
        lag grows by about ``g / (1 + g)`` versions a step (module docstring). 0: a fixed lag.
    max_staleness : int or None
        Queued rollouts staler than this many versions are dropped before the trainer takes one
        (>= ``off_policy_lag``; module docstring). None: nothing is dropped.
    """

    steps: int = 150
    seed: int = 0
    algo: str = "grpo"
    n_prompts: int = 32
    group_size: int = 8
    lr: float = 1e-3
    critic_lr: float | None = None
    mini_batches: int = 2
    clip_ratio: float = 0.2
    kl_coef: float = 0.001
    entropy_coef: float = 0.0
    grad_clip: float = 1.0
    max_response_length: int | None = None
    rollout_temperature: float = 1.0
    reward: str = "score"
    val_every: int = 10
    val_prompts: int = 64
    val_samples: int = 8
    rollout_dtype: str = "auto"
    n_letters: int = 5
    min_len: int = 2
    max_len: int = 4
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    warm_start_steps: int = 100
    peak_flops: float = CPU_PEAK_FLOPS
    off_policy_lag: int = 0
    off_policy_growth: float = 0.0
    max_staleness: int | None = None

    @property
    def rollout_precision(self) -> str:
        """The rollout dtype used: :attr:`rollout_dtype`, with ``"auto"`` resolved for this CPU."""
        return resolve_rollout_dtype(self.rollout_dtype)

    def __post_init__(self) -> None:
        """Check the settings, in this order, so that a bad one fails before a run starts."""
        self._check_sizes()
        self._check_off_policy()
        self._check_task()
        self._check_rates()

    def _check_sizes(self) -> None:
        """The counts and sizes of a step and of the policy, the algorithm and the rollout dtype."""
        positive = (
            "steps",
            "n_prompts",
            "mini_batches",
            "val_every",
            "val_prompts",
            "val_samples",
            "d_model",
            "n_layers",
            "n_heads",
        )
        for name in positive:
            check_int(getattr(self, name), name, minimum=1)
        if self.algo not in ("grpo", "ppo"):
            raise ValueError(f"algo must be 'grpo' or 'ppo'; got {self.algo!r}")
        if check_int(self.group_size, "group_size") < 2:
            raise ValueError(
                f"group_size must be >= 2 (GRPO compares responses within a group); got {self.group_size}"
            )
        if (self.n_prompts * self.group_size) % self.mini_batches:
            raise ValueError(
                f"mini_batches ({self.mini_batches}) must divide n_prompts * group_size "
                f"({self.n_prompts * self.group_size})"
            )
        if self.rollout_dtype != "auto" and self.rollout_dtype not in ROLLOUT_DTYPES:
            choices = ", ".join(ROLLOUT_DTYPES)
            raise ValueError(f"rollout_dtype must be 'auto' or one of {choices}; got {self.rollout_dtype!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must divide d_model ({self.d_model})")
        check_int(self.warm_start_steps, "warm_start_steps", minimum=0)

    def _check_off_policy(self) -> None:
        """The lag of the rollouts, its growth and the staleness bound (which needs the lag)."""
        check_int(self.off_policy_lag, "off_policy_lag", minimum=0)
        growth = self.off_policy_growth
        if isinstance(growth, bool) or not (
            isinstance(growth, int | float) and math.isfinite(growth) and growth >= 0
        ):
            raise ValueError(f"off_policy_growth must be a finite number >= 0; got {growth!r}")
        if self.max_staleness is not None:
            check_int(self.max_staleness, "max_staleness", minimum=0)
            if self.max_staleness < self.off_policy_lag:
                raise ValueError(
                    f"max_staleness must be >= off_policy_lag ({self.off_policy_lag}), or None; "
                    f"got {self.max_staleness}"
                )

    def _check_task(self) -> None:
        """The seed, the response-length limit, the task and its reward."""
        check_seed(self.seed)
        if self.max_response_length is not None:
            check_int(self.max_response_length, "max_response_length", minimum=1)
        # the task's own checks (alphabet size, lengths), before a run starts
        ReversalTask(n_letters=self.n_letters, min_len=self.min_len, max_len=self.max_len)
        if self.reward not in ("score", "acc"):
            raise ValueError(f"reward must be 'score' or 'acc'; got {self.reward!r}")

    def _check_rates(self) -> None:
        """The learning rates, clip ranges, temperature and peak FLOP/s (> 0), the loss weights (>= 0)."""
        if self.critic_lr is not None and not (
            isinstance(self.critic_lr, int | float) and math.isfinite(self.critic_lr) and self.critic_lr > 0
        ):
            raise ValueError(f"critic_lr must be a finite number > 0 or None; got {self.critic_lr!r}")
        for name in ("lr", "clip_ratio", "grad_clip", "rollout_temperature", "peak_flops"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0; got {value!r}")
        for name in ("kl_coef", "entropy_coef"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0; got {value!r}")


@dataclass
class DemoResult:
    """What :func:`run_demo` returns.

    Attributes
    ----------
    jsonl_path : Path
        The run's ``metrics.jsonl``.
    run_dir : Path
        Folder of the run's files (``metrics.jsonl``, ``config.json``, backend folders).
    experiment : str
        The run's name: the one asked for, or ``NAME-2``, ``NAME-3`` ... when a run of that name
        was already in ``out_dir`` (it is left as it was).
    renamed_from : str or None
        The name asked for, when the run took a new one; else None.
    val_steps : list[int]
        Steps at which validation ran (0 is before training).
    val_acc : list[float]
        Validation accuracy (mean over prompts and samples, i.e. mean@N of ``acc``) at those steps.
    last_metrics : dict[str, float]
        Metrics of the last step.
    seconds : float
        Wall time of the run.
    """

    jsonl_path: Path
    run_dir: Path
    val_steps: list[int] = field(default_factory=list)
    val_acc: list[float] = field(default_factory=list)
    last_metrics: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    experiment: str = ""
    renamed_from: str | None = None


# ----------------------------------------------------------------------------------------------
# losses and advantages (torch)
# ----------------------------------------------------------------------------------------------


def _masked_mean(x: Any, mask: Any) -> Any:
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def _grpo_advantages(torch: Any, scores: Any, response_mask: Any, group_size: int) -> Any:
    """verl's GRPO outcome advantage: ``(s - mean_group) / (std_group + 1e-6)`` on every token."""
    s = scores.view(-1, group_size)
    adv = (s - s.mean(dim=1, keepdim=True)) / (s.std(dim=1, keepdim=True) + 1e-6)
    return adv.reshape(-1, 1) * response_mask


def _gae(
    torch: Any, rewards: Any, values: Any, mask: Any, *, gamma: float = 1.0, lam: float = 1.0
) -> tuple[Any, Any]:
    """verl's GAE (``compute_gae_advantage_return``): advantages whitened over the masked tokens
    with the unbiased variance, returns ``= advantages + values`` (before whitening)."""
    _n, r = rewards.shape
    next_values: Any = 0.0
    last: Any = 0.0
    adv_rev = []
    for t in reversed(range(r)):  # loop over the (short) response width, vectorised over samples
        delta = rewards[:, t] + gamma * next_values - values[:, t]
        last_new = delta + gamma * lam * last
        next_values = values[:, t] * mask[:, t] + (1 - mask[:, t]) * next_values
        last = last_new * mask[:, t] + (1 - mask[:, t]) * last
        adv_rev.append(last)
    adv = torch.stack(adv_rev[::-1], dim=1)
    returns = adv + values
    count = mask.sum()
    mean = (adv * mask).sum() / count
    var = (((adv - mean) ** 2) * mask).sum() / count * (count / (count - 1))
    return (adv - mean) * torch.rsqrt(var + 1e-8), returns


def _response_log_probs(torch: Any, logits: Any, responses: Any) -> Any:
    """The log-probability of each response token under ``logits``."""
    return torch.log_softmax(logits, dim=-1).gather(2, responses[..., None]).squeeze(-1)


def _low_var_kl(torch: Any, logp: Any, ref_logp: Any) -> Any:
    """verl's ``low_var_kl`` (k3) estimator of KL(pi || ref), clamped to [-10, 10]."""
    d = (ref_logp - logp).clamp(-20.0, 20.0)
    return (d.exp() - d - 1.0).clamp(-10.0, 10.0)


# ----------------------------------------------------------------------------------------------
# the run
# ----------------------------------------------------------------------------------------------


class _Run:
    """State of one demo run: task, models, optimisers, generators."""

    #: the sample table of the last step (:meth:`step`)
    last_samples: SampleTable

    def __init__(self, config: DemoConfig) -> None:
        torch = _torch()

        self.torch = torch
        self.cfg = config
        self.task = ReversalTask(n_letters=config.n_letters, min_len=config.min_len, max_len=config.max_len)
        self.P = self.task.prompt_width
        self.R = config.max_response_length or self.task.response_width
        self.rollout_precision = config.rollout_precision
        self.pcfg = PolicyConfig(
            vocab_size=self.task.vocab_size,
            # position embeddings for the default width at least, so that a shorter limit
            # draws the same initial parameters
            max_seq_len=self.P + max(self.R, self.task.response_width),
            d_model=config.d_model,
            n_layers=config.n_layers,
            n_heads=config.n_heads,
        )
        init_gen = torch.Generator().manual_seed(config.seed)
        self.actor = init_policy(self.pcfg, generator=init_gen)
        self.warm_start_loss = warm_start(
            self.actor,
            self.task,
            config=self.pcfg,
            steps=config.warm_start_steps,
            rng=np.random.default_rng([config.seed, 2]),
        )
        self.ref = {k: v.detach().clone() for k, v in self.actor.items()}  # the KL's reference
        self.critic = (
            init_policy(self.pcfg, generator=init_gen, value_head=True) if config.algo == "ppo" else None
        )
        self.actor_opt = torch.optim.AdamW(self.actor.values(), lr=config.lr, weight_decay=0.0)
        self.critic_opt = (
            torch.optim.AdamW(self.critic.values(), lr=config.critic_lr or config.lr, weight_decay=0.0)
            if self.critic
            else None
        )
        self.sample_gen = torch.Generator().manual_seed(config.seed + 1)
        self.prompt_rng = np.random.default_rng(config.seed)
        # The validation prompts do not depend on the seed: runs with different seeds compare.
        self.val_strings = self.task.sample(np.random.default_rng(20261129), config.val_prompts)
        # Off-policy: the rollouts generated and not yet trained on, oldest first, and the
        # policy version (actor updates done) of the actor now.
        self.queue: deque[dict[str, Any]] = deque()
        self.version = 0
        self.written = 0  # rollouts the generator has written

    # -- one training step ---------------------------------------------------------------------
    def step(self, step: int) -> dict[str, float]:
        """One training step (stages ``gen`` to ``update_actor``) and its metrics."""
        timing_raw: dict[str, float] = {}
        metrics_lists: dict[str, list[float]] = {}
        with timer(K.STAGE_STEP, timing_raw):
            # the generator keeps off_policy_lag rollouts ahead (N + 1 of version 0 at step 1),
            # and with off_policy_growth > 0 runs further ahead every step
            for _ in range(self._to_write(step)):
                self.written += 1
                self.queue.append(self._generate(self.written, timing_raw))
            dropped = self._drop_stale()
            rollout = self.queue.popleft()
            batch = self._prepare(rollout, timing_raw, metrics_lists)
            if self.critic is not None:
                with timer(K.STAGE_UPDATE_CRITIC, timing_raw):
                    self._update_critic(batch, metrics_lists)
            with timer(K.STAGE_UPDATE_ACTOR, timing_raw):
                self._update_actor(batch, metrics_lists)
        self.last_batch, self.last_timing = batch, timing_raw  # kept for inspection and bench/bench_demo.py
        metrics = self._step_metrics(step, batch, timing_raw, metrics_lists, rollout["acc"])
        metrics.update(self._staleness_metrics(batch, rollout, dropped))
        stops = self._stop_reasons(batch)
        metrics.update(
            compute_text_metrics(
                token_ids=batch["responses"],
                response_mask=batch["response_mask"],
                stop_reasons=stops,
                ngram=_TEXT_NGRAM,
            )
        )
        self.last_samples = self._samples(step, rollout, batch, stops)
        self.version += 1  # the actor of the next step has one more update
        return metrics

    def _to_write(self, step: int) -> int:
        """Rollouts the generator writes at ``step``: ``N + 1`` at the first, then one, plus the
        ones ``off_policy_growth`` puts ahead (``floor(g * (step - 1)) - floor(g * (step - 2))``)."""
        cfg = self.cfg
        if step == 1:
            return cfg.off_policy_lag + 1
        g = cfg.off_policy_growth
        return 1 + math.floor(g * (step - 1)) - math.floor(g * (step - 2))

    def _drop_stale(self) -> list[dict[str, Any]]:
        """The queued rollouts staler than ``max_staleness``, taken off the queue (oldest first).

        The last rollout written has lag 0, so the queue keeps one."""
        bound = self.cfg.max_staleness
        dropped: list[dict[str, Any]] = []
        while bound is not None and self.version - self.queue[0]["version"] > bound:
            dropped.append(self.queue.popleft())
        return dropped

    def _stop_reasons(self, batch: dict[str, Any]) -> list[str]:
        """Why each response of the batch ended: ``"stop"`` (it holds ``EOS``), else ``"length"``."""
        ended = (batch["responses"] == EOS).logical_and(batch["response_mask"].bool()).any(dim=1)
        return [_STOP if e else _LENGTH for e in ended.tolist()]

    def _samples(
        self, step: int, rollout: dict[str, Any], batch: dict[str, Any], stops: list[str]
    ) -> SampleTable:
        """The step's sample table (:func:`rlmetrics.select_samples`): the prompts' letters and the
        decoded answers (up to ``EOS``), the reward, the length in tokens and the stop reason."""
        responses = batch["responses"].numpy()
        lengths = batch["response_mask"].sum(dim=1).numpy()
        answers = []
        for row, n in zip(responses, lengths.tolist()):
            tokens = row[:n].tolist()
            answers.append(self.task.decode(tokens[: tokens.index(EOS)] if EOS in tokens else tokens))
        return select_samples(
            [self.task.decode(s) for s in rollout["strings"]],
            answers,
            batch["token_level_scores"].sum(dim=1).double().numpy(),
            lengths=lengths,
            stop_reasons=stops,
            categories=[_DATA_SOURCE] * len(answers),
            seed=self.cfg.seed,
            step=step,
        )

    def _staleness_metrics(
        self, batch: dict[str, Any], rollout: dict[str, Any], dropped: list[dict[str, Any]]
    ) -> dict[str, float]:
        """``staleness/...`` of the batch trained on: its version against the actor's, and the
        cost; with ``max_staleness``, the rollouts dropped at this step (none: a share of 0)."""
        torch = self.torch
        n = batch["responses"].shape[0]
        versions = torch.full((n,), rollout["version"], dtype=torch.int64)
        drops: dict[str, Any] = {}
        if self.cfg.max_staleness is not None:
            n_dropped = [r["responses"].shape[0] for r in dropped]
            drops = {
                "dropped_versions": torch.tensor(
                    [r["version"] for r, k in zip(dropped, n_dropped) for _ in range(k)], dtype=torch.int64
                ),
                "dropped_lengths": torch.cat(
                    [r["response_mask"].sum(dim=1).float() for r in dropped] or [torch.zeros(0)]
                ),
                "dropped_rewards": torch.cat(
                    [r["token_level_scores"].sum(dim=1) for r in dropped] or [torch.zeros(0)]
                ),
            }
        return compute_staleness_metrics(
            versions,
            current_version=self.version,
            response_mask=batch["response_mask"],
            old_log_probs=batch["old_log_probs"],
            rollout_log_probs=batch["rollout_log_probs"],
            rewards=batch["token_level_scores"].sum(dim=1),
            response_lengths=batch["response_mask"].sum(dim=1),
            **drops,
        )

    def _generate(self, step: int, timing_raw: dict[str, float]) -> dict[str, Any]:
        """The generator, stages ``gen`` and ``reward`` with the actor of now: a queue entry (the
        prompts, the responses with their behaviour log-probs, the scores, the accuracy, the
        version). ``step`` numbers the prompts' uids: the rollouts written so far, this one included
        (the step it is trained at when the generator runs no rollout ahead)."""
        strings, uids, prompts, prompt_mask = self._prompts(step)
        with timer(K.STAGE_GEN, timing_raw):
            responses, response_mask, rollout_log_probs = generate(
                self.actor,
                prompts,
                prompt_mask,
                config=self.pcfg,
                max_response_len=self.R,
                generator=self.sample_gen,
                temperature=self.cfg.rollout_temperature,
                dtype=self.rollout_precision,
            )
        mask = response_mask.float()
        with timer(K.STAGE_REWARD, timing_raw):
            token_level_scores, acc_np = self._scores(strings, responses, mask, response_mask.sum(dim=1))
        return {
            "strings": strings,
            "uids": uids,
            "prompts": prompts,
            "prompt_mask": prompt_mask,
            "responses": responses,
            "response_mask": response_mask,
            "rollout_log_probs": rollout_log_probs,
            "token_level_scores": token_level_scores,
            "acc": acc_np,
            "version": self.version,
        }

    def _prepare(
        self, rollout: dict[str, Any], timing_raw: dict[str, float], metrics_lists: dict[str, list[float]]
    ) -> dict[str, Any]:
        """The trainer, stages ``old_log_prob`` to ``adv`` with the actor of now: the batch, verl's layout."""
        torch = self.torch
        prompts, prompt_mask, responses = rollout["prompts"], rollout["prompt_mask"], rollout["responses"]
        response_mask, token_level_scores = rollout["response_mask"], rollout["token_level_scores"]
        input_ids = torch.cat([prompts, responses], dim=1)
        attention_mask = torch.cat([prompt_mask, response_mask], dim=1)
        mask = response_mask.float()
        token_level_rewards = token_level_scores.clone()

        with timer(K.STAGE_OLD_LOG_PROB, timing_raw), torch.no_grad():
            logits = response_logits(self.actor, input_ids, attention_mask, self.P, config=self.pcfg)
            old_log_probs = _response_log_probs(torch, logits, responses)
            entropy, sum_pi_squared = entropy_and_sum_pi_squared_from_logits(logits)
            old_log_probs = old_log_probs * mask
            metrics_lists[K.ACTOR_ENTROPY] = [float(_masked_mean(entropy, mask))]

        with timer(K.STAGE_REF, timing_raw), torch.no_grad():
            ref_logits = response_logits(self.ref, input_ids, attention_mask, self.P, config=self.pcfg)
            ref_log_prob = _response_log_probs(torch, ref_logits, responses)

        values = self._values(input_ids, attention_mask, mask, timing_raw)
        with timer(K.STAGE_ADV, timing_raw):
            advantages, returns = self._advantages(token_level_rewards, values, mask)

        batch: dict[str, Any] = {
            "prompts": prompts,
            "responses": responses,
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "response_mask": response_mask,
            "token_level_scores": token_level_scores,
            "token_level_rewards": token_level_rewards,
            "advantages": advantages,
            "returns": returns,
            "old_log_probs": old_log_probs,
            "ref_log_prob": ref_log_prob,
            "rollout_log_probs": rollout["rollout_log_probs"],
            "sum_pi_squared": sum_pi_squared,
            "uid": rollout["uids"],
            "meta_info": {"global_token_num": attention_mask.sum(dim=1).tolist()},
        }
        if values is not None:
            batch["values"] = values
        return batch

    def _prompts(self, step: int) -> tuple[list[Any], np.ndarray, Any, Any]:
        """The step's prompts, each repeated ``group_size`` times: strings, uids, tokens, mask."""
        cfg = self.cfg
        strings = self.task.sample(self.prompt_rng, cfg.n_prompts)
        strings = [s for s in strings for _ in range(cfg.group_size)]
        uids = np.repeat(np.arange(cfg.n_prompts) + step * cfg.n_prompts, cfg.group_size).astype(str)
        prompt_np, prompt_mask_np = self.task.encode_prompts(strings)
        return strings, uids, self.torch.from_numpy(prompt_np), self.torch.from_numpy(prompt_mask_np)

    def _scores(self, strings: list[Any], responses: Any, mask: Any, resp_len: Any) -> tuple[Any, np.ndarray]:
        """The verifiable reward on each response's last token, and each response's accuracy."""
        torch = self.torch
        score_np, acc_np, _ = self.task.score(strings, responses.numpy())
        reward_np = score_np if self.cfg.reward == "score" else acc_np.astype(np.float64)
        scores = torch.from_numpy(reward_np).float()
        token_level_scores = torch.zeros_like(mask)
        last = (resp_len - 1).clamp(min=0)
        token_level_scores[torch.arange(len(strings)), last] = scores * (resp_len > 0).float()
        return token_level_scores, acc_np

    def _values(self, input_ids: Any, attention_mask: Any, mask: Any, timing_raw: dict[str, float]) -> Any:
        """The critic's values on the response tokens (stage ``values``); None without a critic."""
        if self.critic is None:
            return None
        with timer(K.STAGE_VALUES, timing_raw), self.torch.no_grad():
            _, values = response_logits(
                self.critic, input_ids, attention_mask, self.P, config=self.pcfg, values=True
            )
            return values * mask

    def _advantages(self, token_level_rewards: Any, values: Any, mask: Any) -> tuple[Any, Any]:
        """GRPO's group-normalised advantages (no critic) or GAE's, and the returns."""
        if values is None:
            advantages = _grpo_advantages(
                self.torch, token_level_rewards.sum(dim=1), mask, self.cfg.group_size
            )
            return advantages, advantages.clone()
        advantages, returns = _gae(self.torch, token_level_rewards, values, mask)
        return advantages * mask, returns * mask

    def _step_metrics(
        self,
        step: int,
        batch: dict[str, Any],
        timing_raw: dict[str, float],
        metrics_lists: dict[str, list[float]],
        acc_np: np.ndarray,
    ) -> dict[str, float]:
        """Every metric family of the step, from its batch, timings and update statistics."""
        metrics: dict[str, float] = {K.GLOBAL_STEP: float(step)}
        metrics.update(reduce_metrics(metrics_lists))
        metrics[K.TRAIN_ACC] = float(acc_np.mean())
        metrics.update(compute_data_metrics(batch, use_critic=self.critic is not None))
        metrics.update(compute_timing_metrics(batch, timing_raw))
        metrics.update(
            compute_throughput_metrics(
                batch,
                timing_raw,
                n_gpus=1,
                flops_per_token=self.pcfg.flops_per_token,
                peak_flops=self.cfg.peak_flops,
            )
        )
        metrics.update(compute_variance_proxy_metrics(batch, gradient_norm=metrics[K.ACTOR_GRAD_NORM]))
        metrics.update(
            compute_rollout_mismatch_metrics(
                batch["old_log_probs"], batch["rollout_log_probs"], batch["response_mask"]
            )
        )
        metrics.update(compute_group_metrics(batch, solved_threshold=1.0))
        return metrics

    def _update_actor(self, batch: dict[str, Any], out: dict[str, list[float]]) -> None:
        torch, cfg = self.torch, self.cfg
        n = batch["responses"].shape[0]
        size = n // cfg.mini_batches
        for mb in range(cfg.mini_batches):
            sl = slice(mb * size, (mb + 1) * size)
            mask = batch["response_mask"][sl].float()
            responses = batch["responses"][sl]
            logits = response_logits(
                self.actor, batch["input_ids"][sl], batch["attention_mask"][sl], self.P, config=self.pcfg
            )
            logp = torch.log_softmax(logits, dim=-1).gather(2, responses[..., None]).squeeze(-1)
            adv = batch["advantages"][sl]
            log_ratio = (logp - batch["old_log_probs"][sl]).clamp(-20.0, 20.0)
            ratio = log_ratio.exp()
            loss1 = -adv * ratio
            loss2 = -adv * ratio.clamp(1.0 - cfg.clip_ratio, 1.0 + cfg.clip_ratio)
            pg_losses = torch.maximum(loss1, loss2)
            pg_loss = _masked_mean(pg_losses, mask)
            loss = pg_loss
            if cfg.entropy_coef > 0:
                entropy = -(torch.softmax(logits, dim=-1) * torch.log_softmax(logits, dim=-1)).sum(dim=-1)
                loss = loss - cfg.entropy_coef * _masked_mean(entropy, mask)
            # measured at every coefficient, penalised only above 0 (so the gradient of a run
            # with the KL off is exactly that of the policy-gradient loss)
            kl = _masked_mean(_low_var_kl(torch, logp, batch["ref_log_prob"][sl]), mask)
            if cfg.kl_coef > 0:
                loss = loss + cfg.kl_coef * kl
            out.setdefault(K.ACTOR_KL_LOSS, []).append(float(kl.detach()))
            out.setdefault(K.ACTOR_KL_COEF, []).append(cfg.kl_coef)
            self.actor_opt.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(list(self.actor.values()), cfg.grad_clip)
            self.actor_opt.step()
            update = compute_ppo_update_metrics(
                logp.detach(), batch["old_log_probs"][sl], adv, mask, clip_ratio=cfg.clip_ratio
            )
            for key, value in update.items():
                out.setdefault(key, []).append(value)
            out.setdefault(K.ACTOR_PG_LOSS, []).append(float(pg_loss.detach()))
            out.setdefault(K.ACTOR_GRAD_NORM, []).append(float(grad_norm))
            out.setdefault(K.ACTOR_LR, []).append(cfg.lr)

    def _update_critic(self, batch: dict[str, Any], out: dict[str, list[float]]) -> None:
        torch, cfg = self.torch, self.cfg
        assert self.critic is not None and self.critic_opt is not None
        n = batch["responses"].shape[0]
        size = n // cfg.mini_batches
        for mb in range(cfg.mini_batches):
            sl = slice(mb * size, (mb + 1) * size)
            mask = batch["response_mask"][sl].float()
            _, vpred = response_logits(
                self.critic,
                batch["input_ids"][sl],
                batch["attention_mask"][sl],
                self.P,
                config=self.pcfg,
                values=True,
            )
            old_v, ret = batch["values"][sl], batch["returns"][sl]
            clipped = old_v + (vpred - old_v).clamp(-0.5, 0.5)
            l1, l2 = (vpred - ret) ** 2, (clipped - ret) ** 2
            vf_loss = 0.5 * _masked_mean(torch.maximum(l1, l2), mask)
            self.critic_opt.zero_grad(set_to_none=True)
            vf_loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(list(self.critic.values()), cfg.grad_clip)
            self.critic_opt.step()
            with torch.no_grad():
                out.setdefault(K.CRITIC_VF_LOSS, []).append(float(vf_loss))
                out.setdefault(K.CRITIC_VF_CLIPFRAC, []).append(float(_masked_mean((l2 > l1).float(), mask)))
                out.setdefault(K.CRITIC_VPRED_MEAN, []).append(float(_masked_mean(vpred, mask)))
                out.setdefault(K.CRITIC_GRAD_NORM, []).append(float(grad_norm))

    # -- validation ----------------------------------------------------------------------------
    def validate(self, step: int) -> tuple[dict[str, float], float]:
        """``val-core/...`` metrics of ``val_samples`` samples per held-out prompt, and the accuracy."""
        torch, cfg = self.torch, self.cfg
        strings = [s for s in self.val_strings for _ in range(cfg.val_samples)]
        prompt_np, prompt_mask_np = self.task.encode_prompts(strings)
        gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
        responses, response_mask, _ = generate(
            self.actor,
            torch.from_numpy(prompt_np),
            torch.from_numpy(prompt_mask_np),
            config=self.pcfg,
            max_response_len=self.R,
            generator=gen,
            temperature=cfg.rollout_temperature,
            dtype=self.rollout_precision,
        )
        score, acc, pred = self.task.score(strings, responses.numpy())
        uids = [str(i) for i in range(len(self.val_strings)) for _ in range(cfg.val_samples)]
        infos = {"score": score.tolist(), K.ValName.ACC: acc.astype(float).tolist(), K.ValName.PRED: pred}
        metrics = _validation_metrics(
            [_DATA_SOURCE] * len(strings), uids, infos, n=cfg.val_samples, seed=cfg.seed
        )
        lengths = response_mask.sum(dim=1).float()
        metrics[K.DEMO_VAL_RESPONSE_LENGTH_MEAN] = float(lengths.mean())
        metrics[K.DEMO_VAL_EOS_RATIO] = float((responses == EOS).any(dim=1).float().mean())
        return metrics, float(acc.mean())


def _validation_metrics(
    data_sources: list[str], uids: list[str], infos: dict[str, list[Any]], *, n: int, seed: int
) -> dict[str, float]:
    """verl's ``val-core/...`` / ``val-aux/...`` keys (bootstrap mean@N, best@k, maj@k), plus the
    exact estimators with 95% intervals as ``val-exact/{source}/{var}/{metric}`` and
    ``.../{metric}/ci_low``, ``.../{metric}/ci_high`` (mean@N, pass@k, best@k, maj@k)."""
    exact = tuple(f"{name}@" for name in K.VAL_EXACT_METRIC_PREFIXES)
    out = flatten_validation_metrics(process_validation_metrics(data_sources, uids, infos, seed=seed))
    summary = summarize_validation(data_sources, uids, infos, seed=seed)
    for src, per_var in summary.items():
        for var, info in per_var.items():
            for name, m in info["metrics"].items():
                if not name.startswith(exact):
                    continue
                base = K.val_metric(K.VAL_EXACT_PREFIX, src, var, name)
                out[base] = float(m["value"])
                out[base + K.CI_LOW_SUFFIX] = float(m["ci_low"])
                out[base + K.CI_HIGH_SUFFIX] = float(m["ci_high"])
    return out


def _default_experiment(config: DemoConfig) -> str:
    return f"{config.algo}_seed{config.seed}"


def val_acc_key(config: DemoConfig) -> str:
    """Key of the demo's validation accuracy (mean@N of ``acc``), e.g. ``val-core/reverse/acc/mean@8``."""
    return K.val_metric(
        K.VAL_CORE_PREFIX, _DATA_SOURCE, K.ValName.ACC, K.at_k(K.ValName.MEAN, config.val_samples)
    )


def demo_call(
    config: DemoConfig,
    *,
    out_dir: str | Path = "rlmetrics_runs",
    backends: Sequence[str] = ("jsonl",),
    project: str = "rlmetrics-demo",
    experiment: str | None = None,
) -> str:
    """The Python call of :func:`run_demo` that runs ``config`` (the settings that differ from
    the defaults), as recorded in a run's ``command``.

    Examples
    --------
    >>> demo_call(DemoConfig(steps=3, lr=0.05), out_dir="runs")
    "run_demo(DemoConfig(steps=3, lr=0.05), out_dir='runs')"
    """
    changed = [
        f"{f.name}={getattr(config, f.name)!r}"
        for f in dataclasses.fields(config)
        if getattr(config, f.name) != f.default
    ]
    args = [f"DemoConfig({', '.join(changed)})"]
    for name, value, default in (
        ("out_dir", str(out_dir), "rlmetrics_runs"),
        ("backends", list(backends), ["jsonl"]),
        ("project", project, "rlmetrics-demo"),
        ("experiment", experiment, None),
    ):
        if value != default:
            args.append(f"{name}={value!r}")
    return f"run_demo({', '.join(args)})"


def run_demo(
    config: DemoConfig | None = None,
    *,
    out_dir: str | Path = "rlmetrics_runs",
    backends: str | Sequence[str] = ("jsonl",),
    project: str = "rlmetrics-demo",
    experiment: str | None = None,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
    tracker_kwargs: dict[str, Any] | None = None,
    command: str | None = None,
) -> DemoResult:
    """Train the demo policy and log every metric family; see the module docstring.

    Every step also logs the text statistics of its responses (``text/...``, from the token ids,
    with their stop reasons: ``EOS`` or the length limit) and a sample table (the prompts'
    letters, the decoded answers, reward, length and stop reason: :meth:`Tracker.log_samples
    <rlmetrics.tracking.Tracker.log_samples>`, ``samples.jsonl`` beside ``metrics.jsonl``).

    Parameters
    ----------
    config : DemoConfig, optional
        Run settings (defaults: :class:`DemoConfig`).
    out_dir : str or Path, keyword-only
        Root of the logs; the run writes ``out_dir/project/experiment/metrics.jsonl`` and
        ``config.json``. An earlier run of that name is never overwritten: this one is then
        ``experiment-2`` (``-3`` ...), with a ``RuntimeWarning`` (:attr:`DemoResult.renamed_from`).
    backends : str or sequence of str, keyword-only
        Tracker backends, e.g. ``"jsonl"`` or ``"jsonl,tensorboard"`` (jsonl is always added:
        the summary and ``rlmetrics report`` read it).
    project, experiment : str, keyword-only
        Names of the run (experiment default: ``{algo}_seed{seed}``).
    on_step : callable, optional, keyword-only
        Called as ``on_step(step, metrics)`` after each logged step (progress display).
    tracker_kwargs : dict, optional, keyword-only
        Extra :class:`Tracker` arguments (``nonfinite``, ``monitor``; the deprecated backend
        keywords ``wandb_mode``, ``mlflow_tracking_uri`` ... still work, with a warning). The
        wandb backend runs offline unless ``wandb_mode`` says otherwise.
    command : str, optional, keyword-only
        What started the run, recorded as the config's ``command`` (the report shows it); default
        the equivalent Python call (:func:`demo_call`). ``rlmetrics demo`` passes its command line.

    Returns
    -------
    DemoResult

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     cfg = DemoConfig(steps=2, n_prompts=4, val_every=2, val_prompts=4, val_samples=2)
    ...     res = run_demo(cfg, out_dir=d)
    ...     n_lines = len(res.jsonl_path.read_text().splitlines())
    >>> res.val_steps, n_lines, "critic/score/mean" in res.last_metrics
    ([0, 2], 3, True)
    """
    cfg = config if config is not None else DemoConfig()
    if not isinstance(cfg, DemoConfig):
        raise TypeError(f"config must be a DemoConfig; got {type(cfg).__name__}")
    names = [b.strip() for b in backends.split(",")] if isinstance(backends, str) else list(backends)
    names = [b for b in names if b]
    for b in names:
        if b not in BACKENDS:
            raise ValueError(f"unknown backend {b!r}; known: {', '.join(BACKENDS)}")
    if "jsonl" not in names:
        names.insert(0, "jsonl")
    check_backends(names)  # a missing package fails here, before the model is built
    if command is None:
        command = demo_call(cfg, out_dir=out_dir, backends=names, project=project, experiment=experiment)
    elif not isinstance(command, str):
        raise TypeError(f"command must be a str or None; got {type(command).__name__}")
    experiment = experiment or _default_experiment(cfg)
    run_dir = Path(out_dir) / project / experiment  # or a suffixed name the Tracker picks
    torch = _torch()

    t0 = time.perf_counter()
    # The matrices are tiny: intra-op threads only add overhead (a lot on a busy machine) and
    # would make the float results depend on the thread count. Restored on exit.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run_demo(
            cfg, names, run_dir, project, experiment, out_dir, on_step, tracker_kwargs, t0, command
        )
    finally:
        torch.set_num_threads(threads)


def _run_demo(
    cfg: DemoConfig,
    names: list[str],
    run_dir: Path,
    project: str,
    experiment: str,
    out_dir: str | Path,
    on_step: Callable[[int, dict[str, float]], None] | None,
    tracker_kwargs: dict[str, Any] | None,
    t0: float,
    command: str,
) -> DemoResult:
    run = _Run(cfg)
    result = DemoResult(jsonl_path=run_dir / "metrics.jsonl", run_dir=run_dir, experiment=experiment)
    config_dict = dataclasses.asdict(cfg) | {
        "rollout_precision": run.rollout_precision,
        "task": "reverse a string",
        "num_params": run.pcfg.num_params,
        "flops_per_token": run.pcfg.flops_per_token,
        "warm_start_loss": run.warm_start_loss,
        "command": command,
    }
    kwargs = dict(tracker_kwargs or {})
    backends: list[Any] = list(names)
    if "wandb" in names:
        if any(key.startswith("wandb_") for key in kwargs):  # the deprecated keywords, as asked
            kwargs.setdefault("wandb_mode", "offline")
        else:  # a demo never uploads unless asked to
            backends[names.index("wandb")] = WandbBackend(mode="offline")
    with Tracker(
        project, experiment, backends=backends, config=config_dict, log_dir=out_dir, **kwargs
    ) as tracker:
        result.jsonl_path, result.run_dir = tracker.jsonl_path, tracker.run_dir
        result.experiment, result.renamed_from = tracker.experiment, tracker.renamed_from
        val_metrics, acc = run.validate(0)
        result.val_steps.append(0)
        result.val_acc.append(acc)
        tracker.log(val_metrics, step=0)
        if on_step is not None:
            on_step(0, val_metrics)
        for step in range(1, cfg.steps + 1):
            metrics = run.step(step)
            if step % cfg.val_every == 0 or step == cfg.steps:
                with timer(K.STAGE_TESTING) as testing:
                    val_metrics, acc = run.validate(step)
                metrics.update(val_metrics)
                metrics[K.timing_s(K.STAGE_TESTING)] = testing.elapsed
                result.val_steps.append(step)
                result.val_acc.append(acc)
            tracker.log(metrics, step=step)
            tracker.log_samples(run.last_samples, step=step)
            result.last_metrics = metrics
            if on_step is not None:
                on_step(step, metrics)
    result.seconds = time.perf_counter() - t0
    return result

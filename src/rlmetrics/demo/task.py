"""The demo's task and policy: reversing short strings with a tiny causal transformer on the CPU.

Everything the demo trains lives here, written functionally (a dict of parameter tensors and
pure functions over it) so that nothing touches torch's global random state: parameters are drawn
from a ``torch.Generator`` and prompts from a ``numpy.random.Generator``.

The task: a prompt ``BOS x_1 ... x_L SEP`` (``L`` between ``min_len`` and ``max_len``, letters
from a small alphabet) is answered by ``x_L ... x_1 EOS``. The reward is verifiable: the score is
the fraction of answer positions right (``1.0`` exactly when the answer is right, a wrong length
costs the missing or extra positions) and the accuracy is the exact match. :func:`warm_start`
teaches a fresh policy the answer's format (its length, then ``EOS``) but not which letters, so
the warm-started policy is right by chance only and what the demo's validation accuracy gains is
learnt by RL.

torch is imported inside the functions that need it (:data:`TORCH_INSTALL` says how to get it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "BOS",
    "EOS",
    "PAD",
    "SEP",
    "TORCH_INSTALL",
    "PolicyConfig",
    "ReversalTask",
    "generate",
    "init_policy",
    "policy_forward",
    "response_logits",
    "warm_start",
]

PAD, BOS, SEP, EOS = 0, 1, 2, 3
_N_SPECIAL = 4


#: How to install the demo's torch: the CPU build, since a plain ``pip install torch`` (or
#: ``pip install 'rlmetrics[demo]'`` alone) pulls a multi-GB CUDA build on Linux.
TORCH_INSTALL = (
    "pip install torch --index-url https://download.pytorch.org/whl/cpu && "
    "pip install 'rlmetrics[demo]' (the CPU build of torch; see the README's Quickstart)"
)


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise ImportError(f"the demo needs torch: {TORCH_INSTALL}") from exc
    return torch


@dataclass(frozen=True)
class ReversalTask:
    """Reverse a string of ``min_len`` to ``max_len`` letters drawn from ``n_letters`` letters.

    Parameters
    ----------
    n_letters : int
        Alphabet size; letters are token ids ``4 .. 4 + n_letters - 1``.
    min_len, max_len : int
        Range of the string lengths (inclusive).

    Examples
    --------
    >>> import numpy as np
    >>> task = ReversalTask(n_letters=3, min_len=2, max_len=3)
    >>> prompts, mask = task.encode_prompts([[4, 5], [6, 5, 4]])
    >>> prompts.tolist(), mask.tolist()
    ([[0, 1, 4, 5, 2], [1, 6, 5, 4, 2]], [[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]])
    >>> responses = np.array([[5, 4, 3, 0, 0], [4, 6, 5, 3, 0]])
    >>> score, acc, pred = task.score([[4, 5], [6, 5, 4]], responses)
    >>> score.round(4).tolist(), acc.tolist(), pred
    ([1.0, 0.3333], [True, False], ['ba', 'acb'])
    >>> score, acc, _ = task.score([[4, 5], [6, 5, 4]], responses[:, :2])  # a limit of 2 tokens
    >>> score.round(4).tolist(), acc.tolist()
    ([1.0, 0.3333], [True, False])
    >>> task.decode([6, 5, 4]), task.vocab_size, task.prompt_width, task.response_width
    ('cba', 7, 5, 5)
    """

    n_letters: int = 5
    min_len: int = 2
    max_len: int = 4

    def __post_init__(self) -> None:
        if not 2 <= self.n_letters <= 26:
            raise ValueError(f"n_letters must be in [2, 26]; got {self.n_letters}")
        if not 1 <= self.min_len <= self.max_len:
            raise ValueError(
                f"need 1 <= min_len <= max_len; got min_len={self.min_len}, max_len={self.max_len}"
            )

    @property
    def vocab_size(self) -> int:
        """Number of token ids (specials and letters)."""
        return _N_SPECIAL + self.n_letters

    @property
    def prompt_width(self) -> int:
        """Width of the left-padded prompt tensor: ``BOS``, the letters and ``SEP``."""
        return self.max_len + 2

    @property
    def response_width(self) -> int:
        """Longest response: the answer, ``EOS`` and one spare token (so a long answer is clipped)."""
        return self.max_len + 2

    def decode(self, tokens: Any) -> str:
        """Letters of a token sequence (specials dropped)."""
        return "".join(chr(ord("a") + int(t) - _N_SPECIAL) for t in tokens if int(t) >= _N_SPECIAL)

    def sample(self, rng: np.random.Generator, n: int) -> list[list[int]]:
        """Draw ``n`` strings (lists of token ids) with ``rng``."""
        lengths = rng.integers(self.min_len, self.max_len + 1, size=n)
        letters = rng.integers(_N_SPECIAL, _N_SPECIAL + self.n_letters, size=(n, self.max_len))
        return [row[:k].tolist() for row, k in zip(letters, lengths)]

    def encode_prompts(self, strings: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Left-padded prompt ids ``(N, prompt_width)`` and their 0/1 attention mask."""
        n, width = len(strings), self.prompt_width
        ids = np.full((n, width), PAD, dtype=np.int64)
        mask = np.zeros((n, width), dtype=np.int64)
        for i, s in enumerate(strings):
            row = [BOS, *s, SEP]
            ids[i, width - len(row) :] = row
            mask[i, width - len(row) :] = 1
        return ids, mask

    def score(self, strings: list[list[int]], responses: Any) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """Score responses against the reversed strings.

        Parameters
        ----------
        strings : list of N lists of token ids
            The prompts' letters.
        responses : array of shape ``(N, R)``
            Generated ids; the answer ends at the first ``EOS`` (or at ``R``).

        Returns
        -------
        score : float64 array ``(N,)``
            Right positions over ``max(len(answer), len(target))``; 1.0 iff exactly right.
        acc : bool array ``(N,)``
            Exact match.
        pred : list of N str
            The decoded answers (for majority voting).
        """
        resp = np.asarray(responses)
        n, width = resp.shape
        is_eos = resp == EOS
        ans_len = np.where(is_eos.any(axis=1), is_eos.argmax(axis=1), width)
        tgt_len = np.array([len(s) for s in strings], dtype=np.int64)
        # as wide as the longest target too: a response limit below it cuts answers short
        target = np.full((n, max(width, int(tgt_len.max(initial=0)))), -1, dtype=np.int64)
        for i, s in enumerate(strings):
            target[i, : len(s)] = s[::-1]
        cols = np.arange(width)[None, :]
        in_answer = cols < ans_len[:, None]
        right = (resp == target[:, :width]) & in_answer
        score = right.sum(axis=1) / np.maximum(ans_len, tgt_len)
        acc = (right.sum(axis=1) == tgt_len) & (ans_len == tgt_len)
        pred = [self.decode(row[:k]) for row, k in zip(resp, ans_len)]
        return score.astype(np.float64), acc, pred


@dataclass(frozen=True)
class PolicyConfig:
    """Size of the tiny causal transformer."""

    vocab_size: int
    max_seq_len: int
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4

    @property
    def num_params(self) -> int:
        """Parameter count of the policy (without a value head)."""
        d, v = self.d_model, self.vocab_size
        per_layer = 4 * d * d + 4 * d + 8 * d * d + 5 * d + 4 * d
        return v * d + self.max_seq_len * d + self.n_layers * per_layer + 2 * d + d * v + v

    @property
    def flops_per_token(self) -> float:
        """Training FLOPs per token (forward and backward): ``6 * num_params`` plus attention."""
        return 6.0 * self.num_params + 12.0 * self.n_layers * self.max_seq_len * self.d_model


def init_policy(config: PolicyConfig, *, generator: Any, value_head: bool = False) -> dict[str, Any]:
    """Fresh parameters (float32 leaf tensors with ``requires_grad``), drawn from ``generator``.

    Parameters
    ----------
    config : PolicyConfig
    generator : torch.Generator
        Source of the random initialisation (the global RNG is not used).
    value_head : bool
        Also make ``v_head`` (``(d_model,)``) for a critic.
    """
    torch = _torch()
    d, v, std = config.d_model, config.vocab_size, 0.02
    out_std = std / math.sqrt(2 * config.n_layers)

    def normal(*shape: int, s: float = std) -> Any:
        return torch.randn(*shape, generator=generator) * s

    p: dict[str, Any] = {
        "tok_emb": normal(v, d),
        "pos_emb": normal(config.max_seq_len, d),
        "ln_f.w": torch.ones(d),
        "ln_f.b": torch.zeros(d),
        "head.w": normal(v, d),
        "head.b": torch.zeros(v),
    }
    for i in range(config.n_layers):
        p[f"h{i}.ln1.w"], p[f"h{i}.ln1.b"] = torch.ones(d), torch.zeros(d)
        p[f"h{i}.qkv.w"], p[f"h{i}.qkv.b"] = normal(3 * d, d), torch.zeros(3 * d)
        p[f"h{i}.proj.w"], p[f"h{i}.proj.b"] = normal(d, d, s=out_std), torch.zeros(d)
        p[f"h{i}.ln2.w"], p[f"h{i}.ln2.b"] = torch.ones(d), torch.zeros(d)
        p[f"h{i}.fc.w"], p[f"h{i}.fc.b"] = normal(4 * d, d), torch.zeros(4 * d)
        p[f"h{i}.out.w"], p[f"h{i}.out.b"] = normal(d, 4 * d, s=out_std), torch.zeros(d)
    if value_head:
        p["v_head.w"], p["v_head.b"] = normal(1, d), torch.zeros(1)
    for t in p.values():
        t.requires_grad_(True)
    return p


def policy_forward(
    params: dict[str, Any], input_ids: Any, attention_mask: Any, *, config: PolicyConfig
) -> tuple[Any, Any]:
    """Logits ``(N, T, vocab)`` and final hidden states ``(N, T, d_model)``.

    Left padding is handled as verl does: position ids are the running count of attended
    tokens, and padded keys are masked (a padded query attends only to itself).
    """
    torch = _torch()
    F = torch.nn.functional
    n, t = input_ids.shape
    d, h = config.d_model, config.n_heads
    mask = attention_mask.bool()
    pos = (attention_mask.long().cumsum(dim=1) - 1).clamp(min=0)
    x = params["tok_emb"][input_ids] + params["pos_emb"][pos]
    causal = torch.ones(t, t, dtype=torch.bool, device=input_ids.device).tril()
    allowed = (causal[None, :, :] & mask[:, None, :]) | torch.eye(
        t, dtype=torch.bool, device=input_ids.device
    )
    allowed = allowed[:, None, :, :]
    for i in range(config.n_layers):
        a = F.layer_norm(x, (d,), params[f"h{i}.ln1.w"], params[f"h{i}.ln1.b"])
        q, k, v = F.linear(a, params[f"h{i}.qkv.w"], params[f"h{i}.qkv.b"]).split(d, dim=-1)
        q, k, v = (z.view(n, t, h, d // h).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        att = att.transpose(1, 2).reshape(n, t, d)
        x = x + F.linear(att, params[f"h{i}.proj.w"], params[f"h{i}.proj.b"])
        m = F.layer_norm(x, (d,), params[f"h{i}.ln2.w"], params[f"h{i}.ln2.b"])
        m = F.gelu(F.linear(m, params[f"h{i}.fc.w"], params[f"h{i}.fc.b"]))
        x = x + F.linear(m, params[f"h{i}.out.w"], params[f"h{i}.out.b"])
    hidden = F.layer_norm(x, (d,), params["ln_f.w"], params["ln_f.b"])
    return F.linear(hidden, params["head.w"], params["head.b"]), hidden


def response_logits(
    params: dict[str, Any],
    input_ids: Any,
    attention_mask: Any,
    prompt_width: int,
    *,
    config: PolicyConfig,
    values: bool = False,
) -> Any:
    """Logits that predict each response token, ``(N, R, vocab)``; with ``values=True`` also
    the value of each response position ``(N, R)`` from ``v_head``."""
    logits, hidden = policy_forward(params, input_ids, attention_mask, config=config)
    r = input_ids.shape[1] - prompt_width
    sl = slice(prompt_width - 1, prompt_width - 1 + r)
    if not values:
        return logits[:, sl, :]
    v = (hidden[:, sl, :] @ params["v_head.w"].T).squeeze(-1) + params["v_head.b"]
    return logits[:, sl, :], v


def warm_start(
    params: dict[str, Any],
    task: ReversalTask,
    *,
    config: PolicyConfig,
    steps: int,
    rng: np.random.Generator,
    batch: int = 128,
    lr: float = 3e-3,
) -> float:
    """Teach the policy the answer's format, not the task: as many letters as the prompt, then ``EOS``.

    The stand-in for the supervised model an RL run starts from. Teacher-forced on random
    letters of the prompt's length followed by ``EOS`` (AdamW), the loss at a letter position
    is the log of the letters' total probability: the policy learns to write letters and where
    to stop, never which letter, so reversing the string is left to RL (a warm-started policy
    is right about as often as chance, ``(1 / n_letters) ** L``). Without it, a random policy
    rarely emits ``EOS`` and most early responses run to the length limit.

    Parameters
    ----------
    params : dict of tensors
        Updated in place.
    task : ReversalTask
    config : PolicyConfig
    steps : int
        Optimiser steps (0 leaves ``params`` as they are).
    rng : numpy.random.Generator
        Source of the prompts and the teacher-forced letters.
    batch : int
        Sequences per step.
    lr : float
        AdamW learning rate.

    Returns
    -------
    float
        The last step's loss: the mean over target tokens of ``-log P(a letter)`` and
        ``-log P(EOS)`` (0 for a policy that has the format; NaN when ``steps`` is 0).
    """
    torch = _torch()
    opt = torch.optim.AdamW(params.values(), lr=lr, weight_decay=0.0)
    width, loss = task.response_width, math.nan
    for _ in range(steps):
        strings = task.sample(rng, batch)
        prompt_ids, prompt_mask = task.encode_prompts(strings)
        target = np.full((batch, width), PAD, dtype=np.int64)
        target_mask = np.zeros((batch, width), dtype=np.int64)
        for i, s in enumerate(strings):
            row = [*rng.integers(_N_SPECIAL, _N_SPECIAL + task.n_letters, size=len(s)).tolist(), EOS]
            target[i, : len(row)], target_mask[i, : len(row)] = row, 1
        ids = torch.from_numpy(np.concatenate([prompt_ids, target], axis=1))
        attention = torch.from_numpy(np.concatenate([prompt_mask, target_mask], axis=1))
        logits = response_logits(params, ids, attention, task.prompt_width, config=config)
        logp_all = torch.log_softmax(logits, dim=-1)
        # a letter position is right for any letter: the letters' total probability is trained,
        # never how it splits between them (the content is left to RL)
        logp_letter = torch.logsumexp(logp_all[..., _N_SPECIAL:], dim=-1)
        tgt = torch.from_numpy(target)
        logp = torch.where(tgt == EOS, logp_all[..., EOS], logp_letter)
        m = torch.from_numpy(target_mask).float()
        nll = -(logp * m).sum() / m.sum()
        opt.zero_grad(set_to_none=True)
        nll.backward()
        opt.step()
        loss = float(nll.detach())
    for p in params.values():
        p.grad = None
    return loss


#: Rollout precisions of :func:`generate`.
ROLLOUT_DTYPES = ("bfloat16", "float32", "bfloat16-weights")


def native_bf16(cpuinfo: str | None = None) -> bool:
    """Whether this CPU computes in bfloat16 natively (else torch emulates it, ~28x slower).

    x86: the ``avx512_bf16`` or ``amx_bf16`` flags; ARM: ``bf16`` among the features (Linux's
    ``/proc/cpuinfo``, or ``hw.optional.arm.FEAT_BF16`` on macOS). Unknown: False.

    Examples
    --------
    >>> native_bf16("flags : fpu avx2 avx512f avx512_bf16"), native_bf16("Features : fp asimd")
    (True, False)
    """
    if cpuinfo is None:
        import platform
        import subprocess

        if platform.system() == "Darwin":
            try:
                out = subprocess.run(
                    ["sysctl", "-n", "hw.optional.arm.FEAT_BF16"], capture_output=True, text=True, timeout=5
                ).stdout
            except (OSError, subprocess.SubprocessError):
                return False
            return out.strip() == "1"
        try:
            with open("/proc/cpuinfo") as fh:
                cpuinfo = fh.read()
        except OSError:
            return False
    flags = set()
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip().lower() in ("flags", "features"):
            flags.update(value.split())
    return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})


def resolve_rollout_dtype(dtype: str) -> str:
    """``"auto"``: bfloat16 where the CPU has it natively, else float32 on bfloat16-rounded weights.

    Examples
    --------
    >>> resolve_rollout_dtype("float32")
    'float32'
    """
    if dtype == "auto":
        return "bfloat16" if native_bf16() else "bfloat16-weights"
    if dtype not in ROLLOUT_DTYPES:
        raise ValueError(f"rollout_dtype must be 'auto' or one of {', '.join(ROLLOUT_DTYPES)}; got {dtype!r}")
    return dtype


def generate(
    params: dict[str, Any],
    prompt_ids: Any,
    prompt_mask: Any,
    *,
    config: PolicyConfig,
    max_response_len: int,
    generator: Any,
    temperature: float = 1.0,
    dtype: str = "float32",
) -> tuple[Any, Any, Any]:
    """Sample responses (the "rollout engine").

    Parameters
    ----------
    params : dict of tensors
    prompt_ids, prompt_mask : int64 tensors ``(N, P)``
        Left-padded prompts.
    max_response_len : int
    generator : torch.Generator
        Source of the samples.
    temperature : float
    dtype : {"float32", "bfloat16", "bfloat16-weights"}
        Precision of the rollout forward passes. ``bfloat16`` (as inference engines run)
        makes the rollout log-probs differ slightly from the trainer's float32 ones;
        ``bfloat16-weights`` computes in float32 with the parameters rounded to bfloat16 (a
        mismatch of the same kind at float32 speed, for CPUs that only emulate bfloat16).

    Returns
    -------
    responses : int64 ``(N, R)``
        Sampled ids, ``PAD`` after the first ``EOS``.
    response_mask : int64 ``(N, R)``
        1 up to and including the ``EOS``.
    rollout_log_probs : float32 ``(N, R)``
        Log-probabilities the rollout assigned to its samples (0 where masked).
    """
    torch = _torch()
    n = prompt_ids.shape[0]
    ids, mask = prompt_ids, prompt_mask
    responses = torch.full((n, max_response_len), PAD, dtype=torch.long)
    resp_mask = torch.zeros((n, max_response_len), dtype=torch.long)
    logps = torch.zeros((n, max_response_len), dtype=torch.float32)
    alive = torch.ones(n, dtype=torch.bool)
    if dtype not in ROLLOUT_DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(ROLLOUT_DTYPES)}; got {dtype!r}")
    if dtype == "bfloat16-weights":
        params = {name: p.to(torch.bfloat16).float() for name, p in params.items()}
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bfloat16")
    with torch.no_grad():
        for t in range(max_response_len):
            with autocast:
                logits, _ = policy_forward(params, ids, mask, config=config)
            last = torch.log_softmax(logits[:, -1, :].float() / temperature, dim=-1)
            tok = torch.multinomial(last.exp(), 1, generator=generator).squeeze(1)
            tok = torch.where(alive, tok, torch.full_like(tok, PAD))
            responses[:, t] = tok
            resp_mask[:, t] = alive.long()
            logps[:, t] = torch.where(alive, last.gather(1, tok[:, None]).squeeze(1), 0.0)
            alive = alive & (tok != EOS)
            ids = torch.cat([ids, tok[:, None]], dim=1)
            mask = torch.cat([mask, resp_mask[:, t : t + 1]], dim=1)
            if not bool(alive.any()):
                break
    return responses, resp_mask, logps

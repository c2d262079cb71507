"""Tests of rlmetrics.demo.task: the reversal task, its verifiable reward and the tiny policy."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics.demo.task import (
    BOS,
    EOS,
    PAD,
    SEP,
    PolicyConfig,
    ReversalTask,
    generate,
    init_policy,
    native_bf16,
    policy_forward,
    resolve_rollout_dtype,
    response_logits,
    warm_start,
)

#: Trains a model: CI runs these once more under a second CPU kernel family (.ci/run).
pytestmark = pytest.mark.trains


def brute_score(string: list[int], response: list[int]) -> tuple[float, bool]:
    """Slow reference: cut at the first EOS, compare position by position."""
    answer = []
    for tok in response:
        if tok == EOS:
            break
        answer.append(tok)
    target = string[::-1]
    right = sum(1 for i, tok in enumerate(answer) if i < len(target) and tok == target[i])
    return right / max(len(answer), len(target)), answer == target


@pytest.mark.parametrize(
    ("string", "response", "score", "acc"),
    [
        ([4, 5, 6], [6, 5, 4, EOS, PAD], 1.0, True),
        ([4, 5, 6], [6, 5, 4, 4, EOS], 0.75, False),  # one extra letter
        ([4, 5, 6], [6, 5, EOS, PAD, PAD], 2 / 3, False),  # one letter short
        ([4, 5], [4, 5, EOS, PAD, PAD], 0.0, False),  # not reversed
        ([4, 5], [5, 4, 5, 4, 5], 0.4, False),  # no EOS: the whole width is the answer
        ([4], [EOS, PAD, PAD, PAD, PAD], 0.0, False),  # empty answer
    ],
    ids=["exact", "extra", "short", "copied", "no-eos", "empty"],
)
def test_score_cases(string, response, score, acc):
    task = ReversalTask(n_letters=3, min_len=1, max_len=3)
    s, a, pred = task.score([string], np.array([response]))
    assert s[0] == pytest.approx(score)
    assert bool(a[0]) is acc
    assert pred[0] == task.decode([t for t in response[: ([*response, EOS]).index(EOS)]])


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_score_matches_brute_force(data):
    task = ReversalTask(n_letters=3, min_len=1, max_len=4)
    n = data.draw(st.integers(1, 6))
    strings = [data.draw(st.lists(st.integers(4, 6), min_size=1, max_size=4)) for _ in range(n)]
    responses = np.array(
        [
            data.draw(st.lists(st.integers(0, 6), min_size=task.response_width, max_size=task.response_width))
            for _ in range(n)
        ]
    )
    score, acc, _ = task.score(strings, responses)
    for i in range(n):
        ref_score, ref_acc = brute_score(strings[i], responses[i].tolist())
        assert score[i] == pytest.approx(ref_score)
        assert bool(acc[i]) == ref_acc
        assert (score[i] == 1.0) == ref_acc  # full marks exactly when right
        assert 0.0 <= score[i] <= 1.0


def test_encode_prompts_left_padded():
    task = ReversalTask(n_letters=4, min_len=1, max_len=3)
    ids, mask = task.encode_prompts([[4], [5, 6, 7]])
    assert ids.tolist() == [[PAD, PAD, BOS, 4, SEP], [BOS, 5, 6, 7, SEP]]
    assert mask.tolist() == [[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]


def test_sample_uses_the_generator_only():
    task = ReversalTask()
    a = task.sample(np.random.default_rng(3), 20)
    b = task.sample(np.random.default_rng(3), 20)
    assert a == b
    assert all(task.min_len <= len(s) <= task.max_len for s in a)
    assert all(4 <= t < 4 + task.n_letters for s in a for t in s)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_letters": 1}, "n_letters"),
        ({"min_len": 3, "max_len": 2}, "min_len <= max_len"),
        ({"min_len": 0}, "1 <="),
    ],
    ids=["alphabet", "lengths", "zero"],
)
def test_task_rejects_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ReversalTask(**kwargs)


def _fresh(task: ReversalTask, seed: int = 0) -> tuple[PolicyConfig, dict]:
    """A small policy for ``task``, freshly initialised from ``seed``."""
    cfg = PolicyConfig(
        vocab_size=task.vocab_size,
        max_seq_len=task.prompt_width + task.response_width,
        d_model=32,
        n_layers=2,
        n_heads=4,
    )
    return cfg, init_policy(cfg, generator=torch.Generator().manual_seed(seed))


def _rollout(task, cfg, params, strings, *, seed=0, dtype="float32"):
    """``generate`` on the encoded ``strings`` at the task's response width, seeded."""
    ids, mask = (torch.from_numpy(x) for x in task.encode_prompts(strings))
    out = generate(
        params,
        ids,
        mask,
        config=cfg,
        max_response_len=task.response_width,
        generator=torch.Generator().manual_seed(seed),
        dtype=dtype,
    )
    return ids, mask, *out


@pytest.fixture(scope="module")
def policy():
    task = ReversalTask(n_letters=4, min_len=1, max_len=3)
    return (task, *_fresh(task))


def test_num_params_counts_the_tensors(policy):
    _, cfg, params = policy
    assert cfg.num_params == sum(p.numel() for p in params.values())
    assert cfg.flops_per_token > 6 * cfg.num_params


def test_init_is_seeded_and_leaves_global_rng_alone(policy):
    _, cfg, params = policy
    state = torch.random.get_rng_state()
    again = init_policy(cfg, generator=torch.Generator().manual_seed(0))
    assert torch.equal(state, torch.random.get_rng_state())
    assert all(torch.equal(params[k], again[k]) for k in params)
    other = init_policy(cfg, generator=torch.Generator().manual_seed(1))
    assert not torch.equal(params["tok_emb"], other["tok_emb"])


def test_left_padding_does_not_change_the_logits(policy):
    """Position ids follow the attention mask, so extra left padding is invisible."""
    _, cfg, params = policy
    seq = torch.tensor([[BOS, 4, 5, SEP, 6]])
    padded = torch.cat([torch.zeros(1, 2, dtype=torch.long), seq], dim=1)
    mask = torch.cat([torch.zeros(1, 2, dtype=torch.long), torch.ones(1, 5, dtype=torch.long)], dim=1)
    with torch.no_grad():
        a, _ = policy_forward(params, seq, torch.ones_like(seq), config=cfg)
        b, _ = policy_forward(params, padded, mask, config=cfg)
    torch.testing.assert_close(a, b[:, 2:], rtol=1e-5, atol=1e-5)


def test_generate_layout_and_log_probs(policy):
    task, cfg, params = policy
    strings = task.sample(np.random.default_rng(0), 16)
    ids, mask, resp, resp_mask, logp = _rollout(task, cfg, params, strings)
    assert resp.shape == resp_mask.shape == logp.shape == (16, task.response_width)
    for row, m in zip(resp.tolist(), resp_mask.tolist()):  # mask: 1 up to and including the first EOS
        n = (row.index(EOS) + 1) if EOS in row else len(row)
        assert m == [1] * n + [0] * (len(row) - n)
        assert all(t == PAD for t in row[n:])
    assert bool((logp[resp_mask == 0] == 0).all())
    assert bool((logp[resp_mask == 1] < 0).all())
    # float32 rollout log-probs equal the training forward's (same numerics, one full pass)
    full_ids, full_mask = torch.cat([ids, resp], 1), torch.cat([mask, resp_mask], 1)
    with torch.no_grad():
        logits = response_logits(params, full_ids, full_mask, task.prompt_width, config=cfg)
    train = torch.log_softmax(logits, -1).gather(2, resp[..., None]).squeeze(-1) * resp_mask
    torch.testing.assert_close(train, logp, rtol=1e-4, atol=1e-4)


def test_warm_start_teaches_the_format_not_the_task():
    """After the warm start the policy writes letters and stops after as many as the prompt
    has (the length limit is rarely hit), while which letter is left untaught: accuracy at
    chance."""
    task = ReversalTask(n_letters=4, min_len=1, max_len=3)
    cfg, params = _fresh(task)
    state = torch.random.get_rng_state()
    loss = warm_start(params, task, config=cfg, steps=150, rng=np.random.default_rng(0))
    assert torch.equal(state, torch.random.get_rng_state())
    assert 0 <= loss < 0.05  # -log P(a letter) and -log P(EOS), both near 0 once learnt
    assert all(p.grad is None for p in params.values())
    strings = task.sample(np.random.default_rng(1), 512)
    _, _, resp, resp_mask, _ = _rollout(task, cfg, params, strings)
    lengths = resp_mask.sum(dim=1).numpy() - 1  # tokens before the EOS
    target = np.array([len(s) for s in strings])
    assert np.mean(lengths == target) > 0.95
    letters = resp[(resp != EOS) & (resp_mask == 1)].numpy()
    assert np.mean(letters >= 4) > 0.95  # letters (ids from 4), not special tokens
    assert np.bincount(letters[letters >= 4] - 4, minlength=4).min() > 0.05 * letters.size  # every letter
    _, acc, _ = task.score(strings, resp.numpy())
    chance = np.mean([0.25 ** len(s) for s in strings])
    assert abs(acc.mean() - chance) < 0.05


def test_warm_start_is_seeded_and_zero_steps_change_nothing():
    task = ReversalTask(n_letters=4, min_len=1, max_len=3)
    cfg, a = _fresh(task)
    _, b = _fresh(task)
    _, c = _fresh(task)
    before = {k: v.detach().clone() for k, v in c.items()}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the demo runs: bitwise equal only with one thread
    try:
        warm_start(a, task, config=cfg, steps=5, rng=np.random.default_rng(3))
        warm_start(b, task, config=cfg, steps=5, rng=np.random.default_rng(3))
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert np.isnan(warm_start(c, task, config=cfg, steps=0, rng=np.random.default_rng(3)))
    assert all(torch.equal(c[k], before[k]) for k in c)


def test_generate_is_reproducible_and_bf16_differs_slightly(policy):
    task, cfg, params = policy
    strings = task.sample(np.random.default_rng(1), 8)

    def run(dtype):
        return _rollout(task, cfg, params, strings, seed=5, dtype=dtype)[2:]

    a, b = run("float32"), run("float32")
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    for dtype in ("bfloat16", "bfloat16-weights"):
        c = run(dtype)
        both = (a[1] == 1) & (c[1] == 1) & (a[0] == c[0])
        diff = (a[2] - c[2])[both].abs()
        assert 0 < float(diff.max()) < 0.1, dtype
    # bfloat16-weights: float32 arithmetic on the rounded parameters, nothing else
    rounded = {name: p.to(torch.bfloat16).float() for name, p in params.items()}
    want = _rollout(task, cfg, rounded, strings, seed=5)[2:]
    assert all(torch.equal(x, y) for x, y in zip(want, run("bfloat16-weights")))


@pytest.mark.parametrize(
    ("cpuinfo", "native"),
    [
        ("processor : 0\nflags : fpu sse avx2 avx512f avx512_bf16 amx_tile\n", True),
        ("flags : fpu sse avx2 amx_bf16\n", True),
        ("flags : fpu sse avx2 avx512f\n", False),
        ("Features : fp asimd evtstrm aes bf16 i8mm\n", True),
        ("Features : fp asimd evtstrm aes\n", False),
        ("", False),
    ],
    ids=["x86-avx512-bf16", "x86-amx", "x86-no-bf16", "arm-bf16", "arm-no-bf16", "unknown"],
)
def test_native_bf16_from_cpuinfo(cpuinfo, native, monkeypatch):
    assert native_bf16(cpuinfo) is native
    monkeypatch.setattr("rlmetrics.demo.task.native_bf16", lambda cpuinfo=None: native)
    assert resolve_rollout_dtype("auto") == ("bfloat16" if native else "bfloat16-weights")


def test_unknown_rollout_dtype_is_named():
    with pytest.raises(ValueError, match="rollout_dtype must be 'auto' or one of bfloat16, float32"):
        resolve_rollout_dtype("float16")


def test_without_torch_the_error_gives_the_cpu_install_line(monkeypatch):
    from rlmetrics.demo import task

    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match=r"the demo needs torch: pip install torch --index-url \S+/whl/cpu"):
        task._torch()

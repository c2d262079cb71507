"""Tests of rlmetrics.policy.groups against a brute-force dictionary reference."""

from __future__ import annotations

import math
import warnings
from collections import defaultdict

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics.policy.groups import compute_group_metrics


def brute(uids, rewards, threshold=1.0, ddof=1) -> dict[str, float]:
    groups: dict = defaultdict(list)
    for u, r in zip(uids, rewards):
        groups[u].append(float(r))
    sizes = [len(v) for v in groups.values()]
    zero = [float(np.std(v)) <= 1e-8 for v in groups.values()]
    stds = [float(np.std(v, ddof=ddof)) for v in groups.values() if len(v) > ddof]
    n = len(groups)
    return {
        "grpo/num_groups": n,
        "grpo/num_samples": len(rewards),
        "grpo/group_size/mean": float(np.mean(sizes)),
        "grpo/group_size/max": max(sizes),
        "grpo/group_size/min": min(sizes),
        "grpo/num_singleton_groups": sum(s == 1 for s in sizes),
        "grpo/frac_reward_zero_std": sum(zero) / n,
        "grpo/frac_samples_reward_zero_std": sum(s for s, z in zip(sizes, zero) if z) / len(rewards),
        "grpo/frac_all_solved": sum(min(v) >= threshold for v in groups.values()) / n,
        "grpo/frac_none_solved": sum(max(v) < threshold for v in groups.values()) / n,
        "grpo/reward_std/mean": float(np.mean(stds)) if stds else math.nan,
    }


def check(ours: dict, ref: dict) -> None:
    assert set(ours) == set(ref)
    for k, v in ref.items():
        assert ours[k] == pytest.approx(v, rel=1e-12, abs=1e-12, nan_ok=True), k


@pytest.mark.parametrize(
    ("uids", "rewards"),
    [
        pytest.param(["a"] * 4 + ["b"] * 4, [1, 1, 1, 1, 0, 1, 0, 0], id="equal-groups"),
        pytest.param(["a", "b", "a", "c", "b", "a"], [0.5, 0.2, 0.5, 1.0, 0.2, 0.5], id="uneven-interleaved"),
        pytest.param([3, 3, 7, 9, 9, 9], [1.0, 0.0, 1.0, 0.0, 0.0, 0.0], id="int-ids-singleton"),
        pytest.param(["x"], [0.3], id="single-sample"),
        pytest.param(["p", "q", "p", "q"], [1e-9, 0.0, 0.0, 2.0], id="tiny-spread"),
    ],
)
def test_brute_force(uids: list, rewards: list) -> None:
    with np.errstate(all="ignore"):
        ref = brute(uids, rewards)
    if math.isnan(ref["grpo/reward_std/mean"]):
        with pytest.warns(RuntimeWarning, match="no group has more than ddof=1"):
            ours = compute_group_metrics(np.array(uids), np.array(rewards))
    else:
        ours = compute_group_metrics(np.array(uids, dtype=object), torch.tensor(rewards, dtype=torch.float32))
        ref = brute(uids, np.float32(rewards))
    check(ours, ref)


def test_batch_inputs_dict_and_dataproto() -> None:
    verl = pytest.importorskip("verl")
    uids = np.array(["a", "a", "b", "b"], dtype=object)
    tok = torch.tensor([[0.0, 1.0], [0.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    ref = brute(list(uids), [1.0, 1.0, 0.0, 1.0])
    check(compute_group_metrics({"uid": uids, "token_level_rewards": tok}), ref)
    dp = verl.DataProto.from_dict(tensors={"token_level_rewards": tok}, non_tensors={"uid": uids})
    check(compute_group_metrics(dp), ref)
    check(compute_group_metrics({"uid": uids, "token_level_rewards": tok.numpy()}), ref)
    # explicit rewards override the batch's
    check(compute_group_metrics(dp, np.zeros(4)), brute(list(uids), [0.0] * 4))


def test_options_threshold_ddof_prefix() -> None:
    uids, r = ["a", "a", "b"], [0.6, 0.9, 0.4]
    m = compute_group_metrics(np.array(uids), np.array(r), solved_threshold=0.5, ddof=0, prefix="g/")
    check({k.replace("g/", "grpo/"): v for k, v in m.items()}, brute(uids, r, threshold=0.5, ddof=0))


@pytest.mark.parametrize(
    ("args", "kwargs", "exc", "match"),
    [
        pytest.param((np.array(["a"]),), {}, TypeError, "rewards is required", id="no-rewards"),
        pytest.param((np.array(["a", "b"]), np.array([1.0])), {}, ValueError, "same length", id="length"),
        pytest.param((np.array([]), np.array([])), {}, ValueError, "empty", id="empty"),
        pytest.param((np.array(["a", "b"]), np.array([1.0, math.nan])), {}, ValueError, "sample 1", id="nan"),
        pytest.param(
            (np.array([["a"]]), np.array([1.0])), {}, ValueError, r"uids must have shape \(B,\)", id="2d-uids"
        ),
        pytest.param(
            (np.array(["a"]), np.array(["x"])), {}, TypeError, "rewards must be numeric", id="str-rw"
        ),
        pytest.param(
            ({"token_level_rewards": np.zeros((2, 2))},),
            {},
            ValueError,
            "no non-tensor 'uid'",
            id="batch-no-uid",
        ),
        pytest.param(
            ({"uid": np.array(["a"], dtype=object)},),
            {},
            ValueError,
            "token_level_rewards",
            id="batch-no-rewards",
        ),
        pytest.param(
            (np.array(["a", 1], dtype=object), np.array([1.0, 2.0])),
            {},
            TypeError,
            "sortable",
            id="mixed-ids",
        ),
        pytest.param(
            (np.array(["a"]), np.array([1.0])),
            {"ddof": -1},
            ValueError,
            "ddof must be an integer >= 0; got -1",
            id="ddof",
        ),
        pytest.param(
            (np.array(["a"]), np.array([1.0])),
            {"ddof": True},
            TypeError,
            "ddof must be an integer",
            id="ddof-bool",
        ),
        pytest.param(
            (np.array(["a"]), np.array([1.0])),
            {"prefix": 1},
            TypeError,
            "prefix must be a string",
            id="prefix",
        ),
        pytest.param(
            (np.array(["a"]), np.array([1.0])),
            {"zero_std_atol": -1.0},
            ValueError,
            "zero_std_atol",
            id="atol",
        ),
    ],
)
def test_errors(args: tuple, kwargs: dict, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        compute_group_metrics(*args, **kwargs)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.sampled_from([0.0, 1.0])), min_size=1, max_size=40))
def test_binary_rewards_properties(samples: list) -> None:
    uids = np.array([u for u, _ in samples])
    rewards = np.array([r for _, r in samples])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all groups of size 1: reward_std/mean is NaN
        m = compute_group_metrics(uids, rewards)
    # With 0/1 rewards a group has zero std exactly when it is all solved or none solved.
    assert m["grpo/frac_all_solved"] + m["grpo/frac_none_solved"] == pytest.approx(
        m["grpo/frac_reward_zero_std"]
    )
    assert 0 <= m["grpo/frac_samples_reward_zero_std"] <= 1
    assert m["grpo/group_size/mean"] * m["grpo/num_groups"] == pytest.approx(len(samples))
    check(m, brute(uids.tolist(), rewards.tolist()))


def test_process_group_needs_initialised_torch_distributed() -> None:
    """process_group= without torch.distributed initialised: a clear error, not a hang."""
    import torch.distributed as dist

    if dist.is_initialized():  # pragma: no cover - the test process never initialises it
        pytest.skip("torch.distributed is initialised in this process")
    with pytest.raises(RuntimeError, match=r"torch\.distributed is not initialised"):
        compute_group_metrics(np.array(["a", "a"]), np.array([1.0, 0.0]), process_group=object())

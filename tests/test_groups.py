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

from rlmetrics._core.dip import dip_pvalue
from rlmetrics.policy.groups import DIP_JITTER_SEED, compute_group_metrics


def brute(uids, rewards, threshold=1.0, ddof=1) -> dict[str, float]:
    groups: dict = defaultdict(list)
    for u, r in zip(uids, rewards):
        groups[u].append(float(r))
    sizes = [len(v) for v in groups.values()]
    zero = [float(np.std(v)) <= 1e-8 for v in groups.values()]
    stds = [float(np.std(v, ddof=ddof)) for v in groups.values() if len(v) > ddof]
    n = len(groups)
    # the dip test of the solve rates, each spread over its cell by the seeded draws (sorted uids)
    cells = [(sum(x >= threshold for x in groups[u]), len(groups[u])) for u in sorted(groups)]
    jitter = np.random.default_rng(DIP_JITTER_SEED).random(n)
    dip_value, dip_p = dip_pvalue([(c + j) / (size + 1) for (c, size), j in zip(cells, jitter)])
    return {
        "grpo/solve_rate/dip": dip_value,
        "grpo/solve_rate/dip_pvalue": dip_p,
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


# --- definition="trl": parity with TRL 1.16's GRPOTrainer ---------------------------------------


def trl_reference(rewards_per_func: torch.Tensor, weights: torch.Tensor, num_generations: int) -> dict:
    """TRL's logged group statistics of one generation batch, from its own source.

    The lines of ``trl/trainer/grpo_trainer.py`` (trl 1.16.0), ``GRPOTrainer.
    _generate_and_score_completions``, default ``multi_objective_aggregation="sum_then_normalize"``
    and ``scale_rewards="group"``: 2759 (unscorable rows), 2763-2764 (weighted sum), 2769-2773
    (the group std, repeated per completion), 2788 (``is_std_zero``), 2826-2830 (the logged
    values); ``nanstd`` is TRL's own (``trl/trainer/utils.py:1021``), imported.
    """
    from trl.trainer.utils import nanstd

    unscorable_mask = torch.isnan(rewards_per_func).all(dim=1)
    rewards = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
    rewards[unscorable_mask] = torch.nan
    if num_generations > 1:
        std_rewards = nanstd(rewards.view(-1, num_generations), dim=1)
        std_rewards = std_rewards.repeat_interleave(num_generations, dim=0)
    else:
        std_rewards = torch.zeros_like(rewards)
    is_std_zero = torch.isclose(std_rewards, torch.zeros_like(std_rewards))
    rewards = (rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
    rewards[unscorable_mask] = torch.nan
    return {
        "reward": torch.nanmean(rewards).item(),
        "reward_std": nanstd(rewards).item(),
        "frac_reward_zero_std": is_std_zero.float().mean().item(),
    }


def combined_rewards(rewards_per_func: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The weighted sum of the reward functions in float64, NaN where every function returned None."""
    out = np.nansum(rewards_per_func * weights, axis=1)
    out[np.isnan(rewards_per_func).all(axis=1)] = np.nan
    return out


def random_trl_batch(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
    """Rewards of 1-8 groups of G completions, 1-2 reward functions: mixed kinds, constant groups, None."""
    g = int(rng.choice([1, 2, 3, 4, 8, 16]))
    n_groups = int(rng.integers(1, 9))
    n_funcs = int(rng.integers(1, 3))
    kind = rng.integers(0, 4, size=(n_groups, 1, n_funcs))
    r = np.where(
        kind == 0,
        rng.integers(0, 2, size=(n_groups, g, n_funcs)),  # pass/fail
        np.where(
            kind == 1,
            rng.choice([0.0, 0.25, 0.5], size=(n_groups, g, n_funcs)),  # dyadic partial credit
            np.where(kind == 2, rng.normal(size=(n_groups, g, n_funcs)), 0.75),  # continuous; constant
        ),
    ).astype(np.float64)
    r[rng.random(r.shape) < 0.15] = np.nan  # a reward function returned None
    weights = rng.choice([1.0, 0.5, 2.0], size=n_funcs)
    return r.reshape(n_groups * g, n_funcs), weights, g


def ours_trl(rewards_per_func: np.ndarray, weights: np.ndarray, g: int) -> dict:
    uids = np.arange(rewards_per_func.shape[0]) // g
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN batches: reward / reward_std undefined
        return compute_group_metrics(uids, combined_rewards(rewards_per_func, weights), definition="trl")


def test_trl_definition_equals_trls_formulas_in_float64_on_random_batches() -> None:
    """TRL's own lines run in float64 give our numbers, NaN where TRL's are NaN.

    ``reward`` and the zero-std count agree exactly; ``reward_std`` to 1e-7: TRL's ``nanstd``
    takes Bessel's factor ``count / (count - 1)`` of two integer tensors, which torch divides
    in its default float32 even when the rewards are float64 (and ``is_std_zero.float().mean()``
    is a float32 mean).
    """
    pytest.importorskip("trl")
    rng = np.random.default_rng(15)
    for _ in range(200):
        rpf, w, g = random_trl_batch(rng)
        ref = trl_reference(torch.tensor(rpf), torch.tensor(w), g)
        got = ours_trl(rpf, w, g)
        assert set(got) == set(ref)
        assert got["reward"] == pytest.approx(ref["reward"], rel=1e-12, abs=1e-12, nan_ok=True), (rpf, g)
        assert got["reward_std"] == pytest.approx(ref["reward_std"], rel=1e-7, nan_ok=True), (rpf, g)
        n = rpf.shape[0]
        assert round(got["frac_reward_zero_std"] * n) == round(ref["frac_reward_zero_std"] * n), (rpf, g)


def test_trl_definition_equals_trl_in_float32_where_float32_is_exact() -> None:
    """TRL computes in float32: reward and reward_std agree to its rounding, and the zero-std
    fraction exactly, on batches whose constant groups hold rewards float32 represents exactly."""
    pytest.importorskip("trl")
    rng = np.random.default_rng(16)
    for _ in range(200):
        rpf, w, g = random_trl_batch(rng)
        ref = trl_reference(torch.tensor(rpf, dtype=torch.float32), torch.tensor(w, dtype=torch.float32), g)
        got = ours_trl(rpf.astype(np.float32).astype(np.float64), w, g)
        n = rpf.shape[0]  # TRL's fraction is a float32 mean: compare the counts
        assert round(got["frac_reward_zero_std"] * n) == round(ref["frac_reward_zero_std"] * n), (rpf, g)
        for key in ("reward", "reward_std"):
            assert got[key] == pytest.approx(ref[key], rel=2e-6, abs=2e-6, nan_ok=True), key


@pytest.mark.parametrize("value", [0.7, 1 / 3], ids=["0.7", "1/3"])
@pytest.mark.parametrize("g", [2, 8, 16], ids=lambda g: f"G{g}")
def test_constant_groups_of_non_dyadic_rewards(value: float, g: int) -> None:
    """A group of G equal rewards of 0.7 (or 1/3) has zero spread: in float64, as here and as
    TRL's formula gives in float64; TRL's float32 arithmetic gives some of these groups a std
    above its 1e-8 tolerance (G=8: 6.4e-8), so TRL alone counts them as having spread."""
    pytest.importorskip("trl")
    from trl.trainer.utils import nanstd

    rpf = np.concatenate([np.full(g, value), np.tile([0.0, 1.0], g // 2)])[:, None]
    w = np.ones(1)
    got = ours_trl(rpf, w, g)
    assert got["frac_reward_zero_std"] == 0.5
    assert trl_reference(torch.tensor(rpf), torch.tensor(w), g)["frac_reward_zero_std"] == 0.5
    std32 = nanstd(torch.full((1, g), value, dtype=torch.float32), dim=1).item()
    ref32 = trl_reference(torch.tensor(rpf, dtype=torch.float32), torch.ones(1), g)
    # TRL (float32) counts the constant group as zero-std exactly when its float32 std is <= 1e-8
    assert ref32["frac_reward_zero_std"] == (0.5 if std32 <= 1e-8 else 0.0)
    if (value, g) == (0.7, 8):
        assert std32 > 1e-8 and ref32["frac_reward_zero_std"] == 0.0  # the disagreement does occur
    assert got["reward"] == pytest.approx(ref32["reward"], rel=1e-6)
    assert got["reward_std"] == pytest.approx(ref32["reward_std"], rel=1e-6)


@pytest.mark.parametrize(
    ("uids", "rewards", "want"),
    [
        pytest.param(
            [0, 0, 1, 1], [1.0, math.nan, 0.0, 1.0], (2 / 3, math.sqrt(1 / 3), 0.0), id="one-scorable-group"
        ),
        pytest.param([0, 1, 2], [0.5, math.nan, 1.0], (0.75, math.sqrt(0.125), 1.0), id="singletons-std-0"),
        pytest.param(
            ["b", "a", "b", "a"], [0.2, 0.3, 0.2, 0.9], (0.4, math.sqrt(0.34 / 3), 0.5), id="uneven-order"
        ),
        pytest.param(
            [0, 0, 0, 1, 1], [1.0, 1.0, 1.0 + 1e-9, 0.0, 1.0], (0.8, math.sqrt(0.2), 0.6), id="within-atol"
        ),
    ],
)
def test_trl_definition_by_hand(uids: list, rewards: list, want: tuple) -> None:
    m = compute_group_metrics(np.array(uids), np.array(rewards), definition="trl")
    assert list(m) == ["reward", "reward_std", "frac_reward_zero_std"]
    assert [m["reward"], m["reward_std"], m["frac_reward_zero_std"]] == pytest.approx(list(want), rel=1e-7)


def test_trl_definition_undefined_values_warn() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = compute_group_metrics(np.array([0, 0]), np.array([math.nan, math.nan]), definition="trl")
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2 and messages[0].startswith("no completion is scorable (every reward is NaN)")
    assert messages[1].startswith("0 scorable completion(s): TRL reward_std needs two")
    assert all(w.filename == __file__ for w in caught)  # attributed to the caller
    assert math.isnan(m["reward"]) and math.isnan(m["reward_std"]) and m["frac_reward_zero_std"] == 0.0
    with pytest.warns(RuntimeWarning, match="1 scorable completion"):
        m = compute_group_metrics(np.array([0, 0]), np.array([0.5, math.nan]), definition="trl")
    assert m["reward"] == 0.5 and math.isnan(m["reward_std"])


def test_trl_definition_prefix_and_torch_input() -> None:
    r = torch.tensor([1.0, 0.0, 0.5, 0.5], dtype=torch.bfloat16)
    m = compute_group_metrics(torch.tensor([0, 0, 1, 1]), r, definition="trl", prefix="grpo-trl/")
    assert m == {
        "grpo-trl/reward": 0.5,
        "grpo-trl/reward_std": pytest.approx(math.sqrt(1 / 6)),
        "grpo-trl/frac_reward_zero_std": 0.5,
    }


def test_trl_definition_gathers_across_ranks(monkeypatch) -> None:
    """process_group=: every rank's (uid, reward) pairs, NaN rewards included, then one computation."""
    shards = [(np.array([0, 0, 1]), np.array([1.0, math.nan, 0.5])), (np.array([1, 2]), np.array([0.5, 0.0]))]

    def fake_gather(payload, group):
        assert payload[0] == "ok" and group == "world"
        return [("ok", payload[1], *s) for s in shards]

    monkeypatch.setattr("rlmetrics.policy.groups.all_gather_objects", fake_gather)
    got = compute_group_metrics(shards[0][0], shards[0][1], definition="trl", process_group="world")
    uids, r = (np.concatenate(x) for x in zip(*shards))
    assert got == compute_group_metrics(uids, r, definition="trl")
    assert got["frac_reward_zero_std"] == pytest.approx(3 / 5)  # group 1 (std 0) and the singleton 2


@pytest.mark.parametrize(
    ("kwargs", "rewards", "exc", "match"),
    [
        pytest.param({"definition": "openrlhf"}, [1.0], ValueError, "definition must be one of", id="name"),
        pytest.param({"definition": "trl", "ddof": 0}, [1.0], ValueError, "ddof must be 1", id="ddof"),
        pytest.param(
            {"definition": "trl"}, [math.inf], ValueError, r"finite or NaN \(unscorable\)", id="inf"
        ),
        pytest.param({}, [math.nan], ValueError, "rewards must be finite; sample 0", id="nan-verl"),
    ],
)
def test_definition_errors(kwargs: dict, rewards: list, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        compute_group_metrics(np.array(["a"] * len(rewards)), np.array(rewards), **kwargs)


# --- training pass rates and categories ---------------------------------------------------------

from math import comb  # noqa: E402

from rlmetrics import keys as K  # noqa: E402
from rlmetrics.errors import RLMetricsWarning, UndefinedMetricWarning  # noqa: E402


def brute_pass_at_k(uids, rewards, k, threshold=1.0) -> float:
    groups: dict = defaultdict(list)
    for u, r in zip(uids, rewards):
        groups[u].append(r >= threshold)
    values = [1 - comb(len(v) - sum(v), k) / comb(len(v), k) for v in groups.values() if len(v) >= k]
    return float(np.mean(values)) if values else math.nan


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 8), min_size=1, max_size=6),
    seed=st.integers(0, 1000),
    ks=st.lists(st.integers(1, 9), min_size=1, max_size=3),
)
def test_property_pass_at_k_equals_the_brute_force_estimator(sizes, seed, ks):
    rng = np.random.default_rng(seed)
    uids = np.repeat(np.arange(len(sizes)), sizes)
    rewards = rng.integers(0, 2, size=uids.shape[0]).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = compute_group_metrics(uids, rewards, pass_k=ks)
    for k in set(ks):
        assert got[K.at_k(K.GRPO_PASS, k)] == pytest.approx(brute_pass_at_k(uids, rewards, k), nan_ok=True)
    assert {k: v for k, v in got.items() if "pass@" not in k} == pytest.approx(
        brute(uids, rewards), nan_ok=True
    )


def test_pass_at_k_of_groups_smaller_than_k_is_nan_with_a_warning():
    with pytest.warns(UndefinedMetricWarning, match="no group has 4 samples: grpo pass@4 is NaN"):
        got = compute_group_metrics(np.array([0, 0, 1]), np.array([1.0, 0.0, 1.0]), pass_k=[1, 4])
    assert math.isnan(got["grpo/pass@4"]) and got["grpo/pass@1"] == pytest.approx(0.75)


SOURCES = np.array(["gsm8k"] * 4 + ["math/algebra"] * 6 + ["gsm8k"] * 2)
UIDS = np.array([0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4])
REWARDS = np.array([1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0])


@pytest.mark.parametrize("given_as", ["labels", "column"])
@pytest.mark.parametrize("definition", ["verl", "trl"])
def test_group_by_each_category_equals_its_groups_alone(given_as, definition):
    kw = {"pass_k": [1, 2]} if definition == "verl" else {}
    if given_as == "labels":
        got = compute_group_metrics(
            UIDS, REWARDS, group_by=SOURCES, group_name="data_source", definition=definition, **kw
        )
    else:
        batch = {"token_level_rewards": REWARDS[:, None], "uid": UIDS, "data_source": SOURCES}
        got = compute_group_metrics(batch, group_by="data_source", definition=definition, **kw)
    assert {k: v for k, v in got.items() if not K.split_category_key(k)} == compute_group_metrics(
        UIDS, REWARDS, definition=definition, **kw
    )
    n_cat = 0
    for cat in ("gsm8k", "math/algebra"):
        rows = SOURCES == cat
        want = compute_group_metrics(UIDS[rows], REWARDS[rows], definition=definition, **kw)
        assert {
            K.split_category_key(k)[0]: v
            for k, v in got.items()
            if K.split_category_key(k) and K.split_category_key(k)[2] == cat
        } == want
        n_cat += len(want)
    assert len(got) == n_cat + len(compute_group_metrics(UIDS, REWARDS, definition=definition, **kw))
    assert got["by_data_source/math%2Falgebra/grpo/frac_none_solved"] == 0.5 if definition == "verl" else True


def test_group_by_gathers_the_labels_across_ranks(monkeypatch):
    shards = [(UIDS[:5], REWARDS[:5], SOURCES[:5]), (UIDS[5:], REWARDS[5:], SOURCES[5:])]

    def fake_gather(payload, group):
        assert payload[0] == "ok" and list(payload[4]) == list(SOURCES[:5])
        return [("ok", payload[1], u, r, s.astype(object)) for u, r, s in shards]

    monkeypatch.setattr("rlmetrics.policy.groups.all_gather_objects", fake_gather)
    got = compute_group_metrics(UIDS[:5], REWARDS[:5], group_by=SOURCES[:5], pass_k=2, process_group="world")
    assert got == compute_group_metrics(UIDS, REWARDS, group_by=SOURCES, pass_k=2)


def test_group_by_folds_categories_beyond_the_limit_with_one_warning():
    labels = np.array(["a", "a", "b", "b", "c", "c", "c", "d", "d", "d", "d", "d"])  # d: the most samples
    with pytest.warns(RLMetricsWarning, match="more than max_categories=2") as caught:
        got = compute_group_metrics(UIDS, REWARDS, group_by=labels, max_categories=2)
    assert len(caught) == 1
    cats = {K.split_category_key(k)[2] for k in got if K.split_category_key(k)}
    assert cats == {"d", K.OTHER_CATEGORY}
    rows = labels != "d"
    other = {k.split("/", 2)[2]: v for k, v in got.items() if "/%other/" in k}
    assert other == compute_group_metrics(UIDS[rows], REWARDS[rows])


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        pytest.param({"pass_k": 0}, ValueError, "pass_k", id="k-zero"),
        pytest.param(
            {"pass_k": [2], "definition": "trl"},
            ValueError,
            "pass_k is reported with definition='verl' only",
            id="trl",
        ),
        pytest.param(
            {"group_by": np.array(["a", "b"] * 6)},
            ValueError,
            "the samples of a group must share one category",
            id="mixed",
        ),
        pytest.param(
            {"group_by": np.array(["a"] * 3)}, ValueError, r"one label per sample \(12\); got 3", id="length"
        ),
        pytest.param(
            {"group_by": "data_source"},
            TypeError,
            "names a batch column; pass a batch",
            id="column-without-batch",
        ),
        pytest.param({"group_name": "x"}, ValueError, "pass group_by= too", id="name-alone"),
        pytest.param(
            {"group_by": SOURCES, "group_name": "a b"}, ValueError, "group name must be", id="bad-name"
        ),
        pytest.param({"group_by": SOURCES, "max_categories": 0}, ValueError, "max_categories", id="limit"),
    ],
)
def test_pass_rate_and_category_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        compute_group_metrics(UIDS, REWARDS, **kwargs)

"""Tests of rlmetrics.policy.mismatch: verl 0.9.1 parity, float64 references, properties, errors."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics import keys as K
from rlmetrics._core.stats import Stats
from rlmetrics.errors import RLMetricsWarning
from rlmetrics.policy.mismatch import (
    compute_rollout_mismatch_metrics,
    parse_is_threshold,
    rollout_mismatch_statistics,
)

rc = pytest.importorskip("verl.trainer.ppo.rollout_corr_helper")


def make(b: int, r: int, *, seed: int, noise: float = 0.4, empty_row: bool = False):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(b, r, generator=g, dtype=torch.float64) * 3
    roll = old + torch.randn(b, r, generator=g, dtype=torch.float64) * noise
    lens = torch.randint(1, r + 1, (b,), generator=g)
    if empty_row and b > 1:
        lens[-1] = 0
    mask = (torch.arange(r)[None, :] < lens[:, None]).long()
    return old, roll, mask


MODES = [
    pytest.param("token", 2.0, id="token-tis-2"),
    pytest.param("token", 1.2, id="token-tis-1.2"),
    pytest.param("token", "0.5_2.0", id="token-icepop"),
    pytest.param("sequence", 2.0, id="sequence-tis"),
    pytest.param("sequence", "0.8_5.0", id="sequence-icepop"),
]


@pytest.mark.parametrize(("mode", "threshold"), MODES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("empty_row", [False, True], ids=["full-rows", "empty-row"])
def test_parity_with_verl(mode: str, threshold: object, dtype: torch.dtype, empty_row: bool) -> None:
    old, roll, mask = make(12, 300, seed=5, empty_row=empty_row)
    _, _, expected = rc.compute_rollout_correction_and_rejection_mask(
        old, roll, mask, rollout_is=mode, rollout_is_threshold=threshold
    )
    ours = compute_rollout_mismatch_metrics(
        old.to(dtype), roll.to(dtype), mask, rollout_is=mode, rollout_is_threshold=threshold
    )
    assert set(expected) <= set(ours)
    assert set(ours) - set(expected) == {
        "rollout_corr/rollout_is_ess_tokens",
        "rollout_corr/probs_pearson_corr",
    }
    tol = 1e-6 if dtype == torch.float64 else 2e-5
    for k, v in expected.items():
        assert ours[k] == pytest.approx(v, rel=tol, abs=tol * 1e-2), k


@pytest.mark.parametrize("as_numpy", [False, True], ids=["torch", "numpy"])
def test_offpolicy_only_matches_verl_and_float64_reference(as_numpy: bool) -> None:
    old, roll, mask = make(7, 50, seed=6)
    expected = rc.compute_rollout_corr_metrics_from_logprobs(old, roll, mask)
    args = (old.numpy(), roll.numpy(), mask.numpy()) if as_numpy else (old, roll, mask)
    ours = compute_rollout_mismatch_metrics(*args, rollout_is=None)
    assert set(ours) == set(expected) | {"rollout_corr/probs_pearson_corr"}
    for k, v in expected.items():
        assert ours[k] == pytest.approx(v, rel=1e-9, abs=1e-12), k
    # Independent float64 loop for a few metrics.
    o, r, m = old.numpy(), roll.numpy(), mask.numpy().astype(bool)
    lr = (o - r)[m]
    assert ours["rollout_corr/k3_kl"] == pytest.approx(np.mean(np.exp(lr) - lr - 1), rel=1e-9)
    ppl = np.mean([np.exp(-o[i][m[i]].mean()) for i in range(o.shape[0])])
    assert ours["rollout_corr/training_ppl"] == pytest.approx(ppl, rel=1e-12)
    corr = np.corrcoef(np.exp(o[m]), np.exp(r[m]))[0, 1]
    assert ours["rollout_corr/probs_pearson_corr"] == pytest.approx(corr, rel=1e-9)


def test_identical_engines() -> None:
    old, _, mask = make(5, 20, seed=7)
    m = compute_rollout_mismatch_metrics(old, old.clone(), mask)
    assert m["rollout_corr/kl"] == 0.0 and m["rollout_corr/k3_kl"] == 0.0
    assert m["rollout_corr/chi2_token"] == pytest.approx(0.0, abs=1e-12)
    assert m["rollout_corr/rollout_is_mean"] == 1.0 and m["rollout_corr/rollout_is_std"] == 0.0
    assert m["rollout_corr/probs_pearson_corr"] == pytest.approx(1.0)
    assert m["rollout_corr/rollout_is_ess_tokens"] == pytest.approx(float(mask.sum()))


def test_bf16_inputs_and_custom_prefix() -> None:
    old, roll, mask = make(4, 30, seed=8)
    m = compute_rollout_mismatch_metrics(old.bfloat16(), roll.bfloat16(), mask.bool(), prefix="mm/")
    ref = compute_rollout_mismatch_metrics(old.bfloat16().double(), roll.bfloat16().double(), mask)
    assert sorted(m) == sorted(k.replace("rollout_corr/", "mm/") for k in ref)
    assert m["mm/kl"] == pytest.approx(ref["rollout_corr/kl"], rel=1e-5, abs=1e-7)


def test_empty_batch_statistics_merge_as_nothing() -> None:
    old, roll, mask = make(5, 12, seed=10)
    for mode in ("token", "sequence", None):
        empty = rollout_mismatch_statistics(old[:0], roll[:0], mask[:0], rollout_is=mode)
        full = rollout_mismatch_statistics(old, roll, mask, rollout_is=mode)
        assert empty.sum_names == full.sum_names and empty.max_names == full.max_names
        assert Stats.merge(empty, full).finalize() == full.finalize()
        with pytest.raises(ValueError, match="response_mask must select at least one token"):
            empty.finalize()


def test_constant_probabilities_warn_pearson_nan() -> None:
    old = torch.full((2, 3), -1.0)
    with pytest.warns(RuntimeWarning, match="Pearson correlation"):
        m = compute_rollout_mismatch_metrics(old, old - 0.1, torch.ones(2, 3))
    assert math.isnan(m["rollout_corr/probs_pearson_corr"])


def test_all_weights_zeroed_by_icepop_gives_nan_ess() -> None:
    old = -torch.arange(6.0).reshape(2, 3) * 0.1
    with pytest.warns(RuntimeWarning, match="effective sample size"):
        m = compute_rollout_mismatch_metrics(old, old - 3.0, torch.ones(2, 3), rollout_is_threshold="0.5_2.0")
    assert math.isnan(m["rollout_corr/rollout_is_eff_sample_size"])
    assert m["rollout_corr/rollout_is_oob_ratio"] == 1.0


OLD, ROLL, MASK = make(3, 4, seed=9)


@pytest.mark.parametrize(
    ("args", "kwargs", "exc", "match"),
    [
        pytest.param(
            (OLD, ROLL, torch.zeros_like(MASK)), {}, ValueError, "select at least one token", id="empty-mask"
        ),
        pytest.param(
            (OLD, ROLL[:, :3], MASK),
            {},
            ValueError,
            "rollout_log_probs and old_log_probs must have",
            id="shape",
        ),
        pytest.param((OLD[0], ROLL[0], MASK[0]), {}, ValueError, r"shape \(B, R\)", id="1d"),
        pytest.param(
            (OLD, ROLL.numpy(), MASK), {}, TypeError, "must all be numpy arrays or all torch", id="mixed"
        ),
        pytest.param((OLD, ROLL, MASK), {"rollout_is": "seq"}, ValueError, "rollout_is must be", id="mode"),
        pytest.param(
            (OLD, ROLL, MASK),
            {"rollout_is_threshold": -1.0},
            ValueError,
            "upper bound",
            id="threshold-negative",
        ),
        pytest.param(
            (OLD, ROLL, MASK),
            {"rollout_is_threshold": "3_2"},
            ValueError,
            "lower bound",
            id="icepop-inverted",
        ),
        pytest.param(
            (OLD, ROLL, MASK),
            {"rollout_is_threshold": "abc"},
            ValueError,
            "must look like",
            id="threshold-text",
        ),
        pytest.param((OLD, ROLL, MASK), {"rollout_is_threshold": True}, TypeError, "got bool", id="bool"),
        pytest.param((torch.full_like(OLD, math.nan), ROLL, MASK), {}, ValueError, "hold NaN", id="nan"),
        pytest.param(
            (OLD, ROLL, None), {}, TypeError, "response_mask must be a numpy .*got NoneType", id="mask-none"
        ),
        pytest.param(
            (OLD.to(torch.complex64), ROLL, MASK), {}, TypeError, "old_log_probs must hold real", id="complex"
        ),
        pytest.param(
            (OLD, ROLL, MASK),
            {"rollout_is_threshold": ("a", 2.0)},
            TypeError,
            r"as a pair must hold two numbers; got \('a', 2.0\)",
            id="pair-of-text",
        ),
        pytest.param(
            (OLD[:, :0], ROLL[:, :0], MASK[:, :0]),
            {},
            ValueError,
            "select at least one token",
            id="zero-width",
        ),
    ],
)
def test_errors(args: tuple, kwargs: dict, exc: type[Exception], match: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(exc, match=match):
            compute_rollout_mismatch_metrics(*args, **kwargs)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(2, (2.0, None), id="int"),
        pytest.param("1.5", (1.5, None), id="str"),
        pytest.param("0.5_2", (2.0, 0.5), id="icepop-str"),
        pytest.param((0.1, 3.0), (3.0, 0.1), id="pair"),
        pytest.param(np.int64(2), (2.0, None), id="numpy-int"),
        pytest.param(np.float32(1.5), (1.5, None), id="numpy-float"),
        pytest.param((np.float64(0.5), np.int32(4)), (4.0, 0.5), id="numpy-pair"),
    ],
)
def test_parse_threshold(spec: object, expected: tuple) -> None:
    assert parse_is_threshold(spec) == expected


@settings(max_examples=30, deadline=None)
@given(
    b=st.integers(2, 6),
    r=st.integers(1, 10),
    noise=st.floats(0.0, 3.0),
    seed=st.integers(0, 10**6),
    mode=st.sampled_from(["token", "sequence"]),
    split=st.integers(1, 5),
)
def test_properties_and_merge(b: int, r: int, noise: float, seed: int, mode: str, split: int) -> None:
    old, roll, mask = make(b, r, seed=seed, noise=noise)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        m = compute_rollout_mismatch_metrics(old, roll, mask, rollout_is=mode)
        n = float(mask.sum())
        assert 1 - 1e-9 <= m["rollout_corr/rollout_is_ess_tokens"] <= n + 1e-9
        assert 0 < m["rollout_corr/rollout_is_eff_sample_size"] <= 1 + 1e-9
        assert m["rollout_corr/k3_kl"] >= 0 and m["rollout_corr/chi2_token"] >= -1
        assert m["rollout_corr/rollout_is_min"] <= m["rollout_corr/rollout_is_max"]
        lo, mid, hi = (m[f"rollout_corr/log_ppl_diff{s}"] for s in ("_min", "", "_max"))
        assert lo <= mid + 1e-12 and mid <= hi + 1e-12
        split = min(split, b)  # the second part may have no rows
        parts = [
            rollout_mismatch_statistics(old[sl], roll[sl], mask[sl], rollout_is=mode)
            for sl in (slice(0, split), slice(split, b))
        ]
        merged = Stats.merge(*parts).finalize()
        for k, v in m.items():
            # Stds come from merged second moments about 1, where IS weights gather: exact to
            # rounding when the mean is 1 however tiny the spread; otherwise the cancellation
            # costs ~sqrt(eps) * |mean - 1| absolute.
            atol = 1e-12
            if k.endswith("_std"):
                atol += 5e-8 * abs(m[k.removesuffix("_std") + "_mean"] - 1.0)
            assert merged[k] == pytest.approx(v, rel=1e-9, abs=atol, nan_ok=True), k


@pytest.mark.parametrize("spread", [1e-4, 1e-6], ids=["spread-1e-4", "spread-1e-6"])
def test_is_std_precise_for_float32_weights_near_one(spread: float) -> None:
    """float32 log-probs whose IS weights sit near 1: the std keeps its precision.

    Moments about 1 avoid the cancellation of E[w^2] - E[w]^2 (float32 row sums of w^2 ~ 1 would
    lose a spread below ~1e-3 entirely).
    """
    rng = np.random.default_rng(7)
    old = (-rng.exponential(1.0, (64, 256))).astype(np.float32)
    roll = (old + rng.normal(0.0, spread, old.shape)).astype(np.float32)
    mask = rng.random(old.shape) < 0.8
    m = compute_rollout_mismatch_metrics(old, roll, mask, rollout_is="token")
    weights = np.exp((old - roll).astype(np.float32)).astype(np.float64)[mask]  # the kernel's float32 weights
    assert m["rollout_corr/rollout_is_std"] == pytest.approx(np.std(weights), rel=1e-3)
    assert m["rollout_corr/rollout_is_mean"] == pytest.approx(np.mean(weights), rel=1e-7)


# --- group_by= ----------------------------------------------------------------------------------------

LABELS = np.array(["gsm8k", "a/b code", "gsm8k", "logic", "a/b code", "gsm8k", "logic", "gsm8k", "x", "x"])
GROUPED_MODES = [*MODES, pytest.param(None, 2.0, id="no-is")]


def _by_category(metrics: dict, group: str = "data_source") -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for key, value in metrics.items():
        split = K.split_category_key(key)
        if split is not None:
            plain, g, category = split
            assert g == group
            out.setdefault(category, {})[plain] = value
    return out


def _same(got: dict, want: dict, rel: float = 1e-9) -> None:
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        assert got[k] == pytest.approx(v, rel=rel, abs=1e-12, nan_ok=True), k


@pytest.mark.parametrize(("mode", "threshold"), GROUPED_MODES)
@pytest.mark.parametrize("as_numpy", [False, True], ids=["torch", "numpy"])
def test_group_by_equals_each_category_alone(mode: str | None, threshold: object, as_numpy: bool) -> None:
    old, roll, mask = make(len(LABELS), 40, seed=3, empty_row=True)  # "x" holds an empty row
    if as_numpy:
        old, roll, mask = old.numpy(), roll.numpy(), mask.numpy()
    kw = {"rollout_is": mode, "rollout_is_threshold": threshold}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        plain = compute_rollout_mismatch_metrics(old, roll, mask, **kw)
        grouped = compute_rollout_mismatch_metrics(
            old, roll, mask, group_by=LABELS.tolist(), group_name="data_source", **kw
        )
        by = _by_category(grouped)
        assert set(by) == set(LABELS)
        for category, metrics in by.items():
            rows = np.flatnonzero(LABELS == category)
            _same(metrics, compute_rollout_mismatch_metrics(old[rows], roll[rows], mask[rows], **kw))
    # the plain keys, bit for bit
    assert {k: v for k, v in grouped.items() if K.split_category_key(k) is None}.keys() == plain.keys()
    for k, v in plain.items():
        assert grouped[k] == v or (math.isnan(v) and math.isnan(grouped[k])), k
    assert "by_data_source/a%2Fb%20code/rollout_corr/k3_kl" in grouped


def test_group_by_with_prefix_and_tensor_labels() -> None:
    old, roll, mask = make(6, 9, seed=4)
    labels = torch.tensor([1, 2, 1, 1, 2, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        m = compute_rollout_mismatch_metrics(old, roll, mask, prefix="train/mm/", group_by=labels)
        alone = compute_rollout_mismatch_metrics(old[labels == 2], roll[labels == 2], mask[labels == 2])
    assert m[K.category_key("train/mm/k3_kl", "group", "2")] == pytest.approx(alone["rollout_corr/k3_kl"])


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    cuts=st.lists(st.integers(0, len(LABELS)), min_size=1, max_size=3),
    mode=st.sampled_from(["token", "sequence"]),
)
def test_group_by_merge_of_parts_equals_the_whole(seed: int, cuts: list[int], mode: str) -> None:
    old, roll, mask = make(len(LABELS), 7, seed=seed, noise=0.3)
    bounds = [0, *sorted(cuts), len(LABELS)]
    kw = {"rollout_is": mode, "group_by": LABELS, "group_name": "data_source"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        whole = compute_rollout_mismatch_metrics(old, roll, mask, **kw)
        parts = [
            rollout_mismatch_statistics(old[a:b], roll[a:b], mask[a:b], **{**kw, "group_by": LABELS[a:b]})
            for a, b in itertools.pairwise(bounds)
        ]
        merged = Stats.merge(*parts).finalize()
    assert sorted(merged) == sorted(whole)
    for k, v in whole.items():
        atol = 1e-12 + (
            5e-8 * abs(whole[k.removesuffix("_std") + "_mean"] - 1.0) if k.endswith("_std") else 0
        )
        assert merged[k] == pytest.approx(v, rel=1e-9, abs=atol, nan_ok=True), k


def test_group_by_folds_the_least_frequent_at_finalize() -> None:
    old, roll, mask = make(len(LABELS), 12, seed=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.warns(RLMetricsWarning, match="more than max_categories=2"):
            m = compute_rollout_mismatch_metrics(
                old, roll, mask, group_by=LABELS, group_name="data_source", max_categories=2
            )
        by = _by_category(m)
        assert set(by) == {"gsm8k", K.OTHER_CATEGORY}
        rest = np.flatnonzero(LABELS != "gsm8k")
        _same(by[K.OTHER_CATEGORY], compute_rollout_mismatch_metrics(old[rest], roll[rest], mask[rest]))


def test_group_by_category_without_tokens_reports_nothing_and_empty_shards_merge() -> None:
    old, roll, mask = make(4, 5, seed=2)
    mask[1] = 0
    labels = ["a", "b", "a", "a"]
    kw = {"group_by": labels, "group_name": "env"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        m = compute_rollout_mismatch_metrics(old, roll, mask, **kw)
        assert set(_by_category(m, "env")) == {"a"}
        empty = rollout_mismatch_statistics(old[:0], roll[:0], mask[:0], group_by=[], group_name="env")
        merged = Stats.merge(empty, rollout_mismatch_statistics(old, roll, mask, **kw)).finalize()
    assert merged == m


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        pytest.param({"group_by": "data_source"}, TypeError, "group_by must be the labels", id="column-name"),
        pytest.param({"group_by": ["a", "b"]}, ValueError, r"one label per sample \(3\); got 2", id="length"),
        pytest.param({"group_by": [["a"], ["b"], ["c"]]}, ValueError, "must be 1-d", id="2d"),
        pytest.param({"group_by": 3}, TypeError, "sequence of labels", id="scalar"),
        pytest.param({"group_by": np.array([1.0, math.nan, 2.0])}, ValueError, "NaN labels", id="nan-label"),
        pytest.param({"group_by": list("abc"), "group_name": "a/b"}, ValueError, "group", id="group-name"),
        pytest.param({"group_name": "env"}, ValueError, "pass group_by= too", id="name-alone"),
        pytest.param(
            {"group_by": list("abc"), "max_categories": 0}, ValueError, "max_categories", id="limit"
        ),
    ],
)
def test_group_by_errors(kwargs: dict, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        compute_rollout_mismatch_metrics(OLD, ROLL, MASK, **kwargs)


def test_group_by_options_must_agree_to_merge() -> None:
    a = rollout_mismatch_statistics(OLD, ROLL, MASK, group_by=list("abc"), group_name="env")
    b = rollout_mismatch_statistics(OLD, ROLL, MASK, group_by=list("abc"), group_name="src")
    with pytest.raises(ValueError, match="group_by"):
        Stats.merge(a, b)

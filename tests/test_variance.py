"""Tests of rlmetrics.policy.variance: verl 0.9.1 parity, float64 loop reference, errors, merging.

Every computation path is tested: numpy row blocks and the fused numba kernel (numpy and CPU
torch inputs), and the whole-array path that accelerator tensors take (run on CPU torch with
the numpy view off).
"""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rlmetrics.policy.variance as variance
from rlmetrics import keys as K
from rlmetrics._core import array as _array
from rlmetrics._core.kernels import variance_rows_kernel
from rlmetrics._core.stats import Stats
from rlmetrics.errors import RLMetricsWarning
from rlmetrics.policy.variance import compute_variance_proxy_metrics, variance_proxy_statistics

verl_mu = pytest.importorskip("verl.trainer.ppo.metric_utils")
from verl import DataProto  # noqa: E402

KEYS = [
    K.VARIANCE_PROXY_SIGNAL,
    K.VARIANCE_PROXY_TOTAL_POWER,
    K.VARIANCE_PROXY_NOISE,
    K.VARIANCE_PROXY_EXPECTED_A_SQUARED,
    K.VARIANCE_PROXY_EXPECTED_W,
]


def make_batch(
    b: int, r: int, *, seed: int, with_is: bool, empty_row: bool = False
) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lens = torch.randint(1, r + 1, (b,), generator=g)
    if empty_row and b > 1:
        lens[1] = 0
    batch = {
        "sum_pi_squared": torch.rand(b, r, generator=g) * 0.9 + 0.05,
        "old_log_probs": -torch.rand(b, r, generator=g) * 4,
        "advantages": torch.randn(b, r, generator=g),
        "response_mask": (torch.arange(r)[None, :] < lens[:, None]).long(),
    }
    if with_is:
        w = torch.rand(b, r, generator=g) * 2.5
        w[0, 0] = 1e-6  # below verl's 1e-10 clamp on rho^2
        batch["rollout_is_weights"] = w
    return batch


def reference(batch: dict[str, torch.Tensor], gradient_norm: float | None) -> dict[str, float]:
    """Slow float64 loop over trajectories, written from verl's formulas."""
    spi, old, adv, mask = (
        batch[k].double().numpy() for k in ("sum_pi_squared", "old_log_probs", "advantages", "response_mask")
    )
    rho = batch["rollout_is_weights"].double().numpy() if "rollout_is_weights" in batch else None
    a2, ws, power = [], [], []
    for i in range(adv.shape[0]):
        idx = np.flatnonzero(mask[i])
        a = adv[i, idx].mean() if idx.size else 0.0
        w_tok = 1 - 2 * np.exp(old[i, idx]) + spi[i, idx]
        if rho is None:
            w = w_tok.sum()
            power.append(a * a * max(w, 0.0))
        else:
            r2 = rho[i, idx] ** 2
            w = (w_tok * r2).sum()
            w_orig = max((w_tok * r2 / np.maximum(r2, 1e-10)).sum(), 0.0)
            rbar = rho[i, idx].mean() if idx.size else 0.0
            power.append(rbar**2 * a * a * w_orig)
        a2.append(a * a)
        ws.append(w)
    n = adv.shape[0]
    p2 = float(np.mean(power))
    p1 = None if gradient_norm is None else gradient_norm**2
    p3 = 0.0 if p1 is None or n == 1 else max(0.0, (p2 - p1) / (n - 1))
    return dict(zip(KEYS, [0.0 if p1 is None else p1, p2, p3, float(np.mean(a2)), float(np.mean(ws))]))


CASES = [
    pytest.param(8, 33, False, None, False, id="on-policy-no-gradnorm"),
    pytest.param(8, 33, False, 0.3, False, id="on-policy-gradnorm"),
    pytest.param(8, 33, True, None, False, id="is-weights-no-gradnorm"),
    pytest.param(8, 33, True, 0.05, True, id="is-weights-gradnorm-empty-row"),
    pytest.param(1, 17, False, 0.3, False, id="batch-size-1"),
    pytest.param(1, 17, True, 2.0, False, id="batch-size-1-is"),
    pytest.param(80, 4000, True, 1.5, True, id="several-cpu-blocks"),
]


needs_kernel = pytest.mark.skipif(
    variance_rows_kernel() is None, reason="numba not installed or disabled with RLMETRICS_NO_NUMBA"
)


def use_path(mp: pytest.MonkeyPatch, path: str) -> None:
    """numpy row blocks, the fused kernel on them, or the accelerator path on CPU torch."""
    mp.setattr(variance, "FUSED_MIN_ELEMENTS", 0 if path == "cpu-fused" else 1 << 62)
    if path == "device-path":
        mp.setattr(_array, "_CPU_TENSORS_AS_NUMPY", False)


@pytest.fixture(params=["cpu-blocks", pytest.param("cpu-fused", marks=needs_kernel), "device-path"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which computation torch inputs take (see :func:`use_path`)."""
    use_path(monkeypatch, str(request.param))
    return str(request.param)


def assert_same_metrics(ours: dict[str, float], expected: dict[str, float], rel: float) -> None:
    assert set(ours) == set(expected) == set(KEYS)
    for k in KEYS:
        if math.isnan(expected[k]):
            assert math.isnan(ours[k]), k
        else:
            assert ours[k] == pytest.approx(expected[k], rel=rel, abs=1e-9), k


@pytest.mark.parametrize(("b", "r", "with_is", "gnorm", "empty_row"), CASES)
def test_parity_with_verl(
    b: int, r: int, with_is: bool, gnorm: float | None, empty_row: bool, path: str
) -> None:
    batch = make_batch(b, r, seed=b * 100 + r, with_is=with_is, empty_row=empty_row)
    expected = verl_mu.compute_variance_proxy_metrics(DataProto.from_dict(tensors=dict(batch)), gnorm)
    ours = compute_variance_proxy_metrics(DataProto.from_dict(tensors=dict(batch)), gnorm)
    assert_same_metrics(ours, expected, rel=1e-6)


def poisoned(batch: dict[str, torch.Tensor], rows: slice, value: float) -> dict[str, torch.Tensor]:
    """``batch`` with ``value`` at every masked-out position of ``rows`` in every float tensor."""
    outside = batch["response_mask"] == 0
    outside[: rows.start or 0] = False
    outside[rows.stop :] = False
    assert outside.any()
    return {k: v if k == "response_mask" else v.masked_fill(outside, value) for k, v in batch.items()}


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("with_is", [False, True], ids=["on-policy", "is-weights"])
def test_non_finite_values_outside_the_mask_are_ignored_like_verl(
    value: float, with_is: bool, path: str
) -> None:
    batch = poisoned(make_batch(7, 30, seed=5, with_is=with_is, empty_row=True), slice(0, 4), value)
    expected = verl_mu.compute_variance_proxy_metrics(DataProto.from_dict(tensors=dict(batch)), 0.2)
    assert all(math.isfinite(v) for v in expected.values())
    ours = compute_variance_proxy_metrics(batch, 0.2)
    assert_same_metrics(ours, expected, rel=1e-6)
    numpy_in = compute_variance_proxy_metrics({k: v.numpy() for k, v in batch.items()}, 0.2)
    assert_same_metrics(numpy_in, expected, rel=1e-6)


@pytest.mark.parametrize("key", ["old_log_probs", "advantages", "rollout_is_weights"])
def test_nan_inside_the_mask_gives_nan_like_verl(key: str, path: str) -> None:
    batch = make_batch(5, 12, seed=6, with_is=True)
    batch[key][2, 0] = math.nan  # position 0 is inside the mask of every row
    expected = verl_mu.compute_variance_proxy_metrics(DataProto.from_dict(tensors=dict(batch)), 0.2)
    assert math.isnan(expected[K.VARIANCE_PROXY_TOTAL_POWER])
    ours = compute_variance_proxy_metrics(batch, 0.2)
    # verl's max(0.0, nan) turns proxy 3 into 0.0; rlmetrics keeps it NaN, as for a NaN norm.
    assert math.isnan(ours.pop(K.VARIANCE_PROXY_NOISE))
    expected[K.VARIANCE_PROXY_NOISE] = math.nan
    assert_same_metrics({**ours, K.VARIANCE_PROXY_NOISE: math.nan}, expected, rel=1e-6)


def test_float64_and_mixed_dtype_inputs_match_the_float64_reference(path: str) -> None:
    batch = make_batch(9, 50, seed=7, with_is=True, empty_row=True)
    expected = reference(batch, 0.4)
    mixed = {
        k: v.double() if k in ("sum_pi_squared", "old_log_probs", "rollout_is_weights") else v
        for k, v in batch.items()
    }
    assert_same_metrics(compute_variance_proxy_metrics(mixed, 0.4), expected, rel=1e-12)


@pytest.mark.parametrize(("b", "r", "with_is", "gnorm", "empty_row"), CASES)
@pytest.mark.parametrize("as_numpy", [False, True], ids=["torch", "numpy"])
def test_float64_reference(
    b: int, r: int, with_is: bool, gnorm: float | None, empty_row: bool, as_numpy: bool
) -> None:
    batch = make_batch(b, r, seed=b + r, with_is=with_is, empty_row=empty_row)
    expected = reference(batch, gnorm)
    inputs = {k: (v.numpy() if as_numpy else v) for k, v in batch.items()}
    ours = compute_variance_proxy_metrics(inputs, gnorm)
    for k in KEYS:
        assert ours[k] == pytest.approx(expected[k], rel=2e-6, abs=1e-9), k


def test_gradient_norm_as_tensor_and_bf16_inputs() -> None:
    batch = make_batch(6, 20, seed=1, with_is=False)
    expected = reference(batch, 0.5)
    ours = compute_variance_proxy_metrics(batch, torch.tensor(0.5))
    assert ours[K.VARIANCE_PROXY_NOISE] == pytest.approx(expected[K.VARIANCE_PROXY_NOISE], rel=1e-6)
    half = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in batch.items()}
    m = compute_variance_proxy_metrics(half, 0.5)
    ref = reference({k: v.float() if v.is_floating_point() else v for k, v in half.items()}, 0.5)
    assert m[K.VARIANCE_PROXY_TOTAL_POWER] == pytest.approx(ref[K.VARIANCE_PROXY_TOTAL_POWER], rel=1e-5)


def test_nan_gradient_norm_propagates() -> None:
    m = compute_variance_proxy_metrics(make_batch(4, 8, seed=2, with_is=False), float("nan"))
    assert math.isnan(m[K.VARIANCE_PROXY_SIGNAL]) and math.isnan(m[K.VARIANCE_PROXY_NOISE])


@pytest.mark.parametrize("missing", ["sum_pi_squared", "old_log_probs", "advantages"])
def test_missing_key_empty_like_verl_or_strict_error(missing: str) -> None:
    batch = make_batch(3, 5, seed=3, with_is=False)
    del batch[missing]
    assert verl_mu.compute_variance_proxy_metrics(DataProto.from_dict(tensors=dict(batch))) == {}
    assert compute_variance_proxy_metrics(batch) == {}
    with pytest.raises(ValueError, match=f"missing the tensor '{missing}'.*strict=True.*tensors present"):
        compute_variance_proxy_metrics(batch, strict=True)


def test_strict_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="strict must be a bool; got str 'yes'"):
        compute_variance_proxy_metrics({}, strict="yes")  # type: ignore[arg-type]


def bad(batch: dict, **changes: object) -> dict:
    out = dict(batch)
    out.update(changes)
    return out


BASE = make_batch(3, 5, seed=4, with_is=False)


@pytest.mark.parametrize(
    ("batch", "gnorm", "exc", "match"),
    [
        pytest.param(
            {k: v for k, v in BASE.items() if k != "response_mask"},
            None,
            ValueError,
            "missing the tensor 'response_mask'",
            id="no-response-mask",
        ),
        pytest.param(
            bad(BASE, sum_pi_squared=torch.zeros(3, 4)),
            None,
            ValueError,
            r"sum_pi_squared'\] and batch\['advantages'\] must have the same shape",
            id="shape",
        ),
        pytest.param(
            bad(BASE, advantages=torch.zeros(3)),
            None,
            ValueError,
            r"must have shape \(B, R\)",
            id="1d-advantages",
        ),
        pytest.param({k: v[:0] for k, v in BASE.items()}, None, ValueError, "batch is empty", id="empty"),
        pytest.param(
            bad(BASE, response_mask=BASE["response_mask"] * 2),
            None,
            ValueError,
            "must hold only 0 and 1",
            id="mask-values",
        ),
        pytest.param(
            bad(BASE, advantages=BASE["advantages"].numpy()),
            None,
            TypeError,
            "must all be numpy arrays or all torch tensors",
            id="mixed-namespaces",
        ),
        pytest.param(BASE, "big", TypeError, "gradient_norm must be a real number", id="gradnorm-str"),
        pytest.param(BASE, torch.ones(2), ValueError, "gradient_norm must be a scalar", id="gradnorm-vector"),
        pytest.param(BASE, True, TypeError, "got bool", id="gradnorm-bool"),
        pytest.param(
            BASE, -0.5, ValueError, r"gradient_norm must be >= 0 \(a norm\); got -0.5", id="gradnorm-negative"
        ),
        pytest.param(
            bad(BASE, response_mask=None),
            None,
            TypeError,
            r"batch\['response_mask'\] must be a numpy array or a torch tensor of numbers; got NoneType",
            id="mask-none",
        ),
        pytest.param(
            bad(BASE, sum_pi_squared=[[0.5] * 5] * 3),
            None,
            TypeError,
            r"batch\['sum_pi_squared'\] must be a numpy array .*got list",
            id="sum-pi-squared-list",
        ),
        pytest.param(
            bad(BASE, advantages=BASE["advantages"].to(torch.complex64)),
            None,
            TypeError,
            r"batch\['advantages'\] must hold real numbers",
            id="complex-advantages",
        ),
    ],
)
def test_errors(batch: dict, gnorm: object, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        compute_variance_proxy_metrics(batch, gnorm)


@settings(max_examples=25, deadline=None)
@given(
    b=st.integers(2, 9),
    r=st.integers(1, 12),
    split=st.integers(1, 8),
    seed=st.integers(0, 10**6),
    with_is=st.booleans(),
)
def test_shards_merge_to_whole_batch(b: int, r: int, split: int, seed: int, with_is: bool) -> None:
    split = min(split, b - 1)
    batch = make_batch(b, r, seed=seed, with_is=with_is)
    whole = compute_variance_proxy_metrics(batch, 0.7)
    parts = [
        variance_proxy_statistics({k: v[sl] for k, v in batch.items()})
        for sl in (slice(0, split), slice(split, b))
    ]
    assert all(p is not None for p in parts)
    merged = Stats.merge(*[p for p in parts if p is not None]).finalize(gradient_norm=0.7)
    for k in KEYS:
        assert merged[k] == pytest.approx(whole[k], rel=1e-9, abs=1e-12)
    assert whole[K.VARIANCE_PROXY_TOTAL_POWER] >= 0 and whole[K.VARIANCE_PROXY_NOISE] >= 0


@settings(max_examples=25, deadline=None)
@given(
    b=st.integers(1, 12),
    r=st.integers(1, 40),
    block=st.integers(1, 300),
    seed=st.integers(0, 10**6),
    with_is=st.booleans(),
)
def test_cpu_row_blocks_do_not_change_the_statistics(
    b: int, r: int, block: int, seed: int, with_is: bool
) -> None:
    batch = {k: v.numpy() for k, v in make_batch(b, r, seed=seed, with_is=with_is).items()}
    whole = compute_variance_proxy_metrics(batch, 0.7)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(variance, "_CPU_BLOCK_ELEMENTS", block)
        blocked = compute_variance_proxy_metrics(batch, 0.7)
    assert_same_metrics(blocked, whole, rel=1e-12)


@needs_kernel
@pytest.mark.parametrize("with_is", [False, True], ids=["on-policy", "is-weights"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("mask_dtype", [torch.int64, torch.bool, torch.int32], ids=["int64", "bool", "int32"])
def test_fused_kernel_and_numpy_blocks_give_the_same_numbers(
    with_is: bool, dtype: torch.dtype, mask_dtype: torch.dtype
) -> None:
    batch = make_batch(40, 700, seed=11, with_is=with_is, empty_row=True)
    batch = {k: v.to(mask_dtype if k == "response_mask" else dtype) for k, v in batch.items()}
    expected = verl_mu.compute_variance_proxy_metrics(DataProto.from_dict(tensors=dict(batch)), 0.3)
    runs = {}
    for path in ("cpu-blocks", "cpu-fused"):
        with pytest.MonkeyPatch.context() as mp:
            use_path(mp, path)
            mp.setattr(variance, "_CPU_BLOCK_ELEMENTS", 7 * 700)  # several blocks, a short last one
            runs[path] = compute_variance_proxy_metrics(batch, 0.3)
    rel = 1e-6 if dtype == torch.float32 else 1e-12
    assert_same_metrics(runs["cpu-fused"], runs["cpu-blocks"], rel=rel)
    assert_same_metrics(runs["cpu-fused"], expected, rel=rel)


@pytest.mark.parametrize(
    "value", [2, -1, 2**40, 0.5], ids=["two", "minus-one", "two-to-40", "half-in-float-mask"]
)
@pytest.mark.parametrize("path", ["cpu-blocks", pytest.param("cpu-fused", marks=needs_kernel)])
def test_bad_mask_value_in_a_later_block_raises(value: float, path: str) -> None:
    batch = {k: v.numpy() for k, v in make_batch(12, 30, seed=12, with_is=True).items()}
    mask = batch["response_mask"].astype(np.float32 if value == 0.5 else np.int64)
    mask[9, 0] = value  # rows of 3: the fourth block
    with pytest.MonkeyPatch.context() as mp:
        use_path(mp, path)
        mp.setattr(variance, "_CPU_BLOCK_ELEMENTS", 90)
        found = re.escape(f"response_mask'] must hold only 0 and 1; found {value:g}")
        with pytest.raises(ValueError, match=found):
            compute_variance_proxy_metrics(dict(batch, response_mask=mask), 0.3)


# --- group_by= ----------------------------------------------------------------------------------------

LABELS = np.array(["gsm8k", "a/b code", "gsm8k", "logic", "a/b code", "gsm8k", "logic", "gsm8k", "x", "x"])
#: The metrics kept per category: means of per-trajectory terms (proxies 1 and 3 need the
#: category's own gradient norm).
CATEGORY_KEYS = [
    K.VARIANCE_PROXY_TOTAL_POWER,
    K.VARIANCE_PROXY_EXPECTED_A_SQUARED,
    K.VARIANCE_PROXY_EXPECTED_W,
]


def rows_of(batch: dict, rows: np.ndarray) -> dict:
    return {k: v[torch.as_tensor(rows)] if torch.is_tensor(v) else v[rows] for k, v in batch.items()}


def by_category(metrics: dict, group: str = "data_source") -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for key, value in metrics.items():
        split = K.split_category_key(key)
        if split is not None:
            plain, g, category = split
            assert g == group
            out.setdefault(category, {})[plain] = value
    return out


def plain_of(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if K.split_category_key(k) is None}


@pytest.mark.parametrize("with_is", [False, True], ids=["on-policy", "is-weights"])
@pytest.mark.parametrize("labels", ["column", "list", "numpy", "torch-codes"])
def test_group_by_equals_each_category_alone(with_is: bool, labels: str, path: str) -> None:
    batch = make_batch(len(LABELS), 23, seed=11, with_is=with_is, empty_row=True)  # row 1: no tokens
    codes = np.unique(LABELS, return_inverse=True)[1]
    given = {
        "column": "data_source",
        "list": LABELS.tolist(),
        "numpy": LABELS,
        "torch-codes": torch.as_tensor(codes),
    }[labels]
    names = LABELS if labels != "torch-codes" else codes.astype(str)
    source = dict(batch, data_source=LABELS.astype(object)) if labels == "column" else batch
    plain = compute_variance_proxy_metrics(batch, 0.4)
    grouped = compute_variance_proxy_metrics(source, 0.4, group_by=given, group_name="data_source")
    # the plain keys, bit for bit (proxies 1 and 3 included)
    assert plain_of(grouped) == plain
    by = by_category(grouped)
    assert set(by) == set(names)
    for category, metrics in by.items():
        alone = compute_variance_proxy_metrics(rows_of(batch, np.flatnonzero(names == category)), 0.4)
        assert sorted(metrics) == sorted(CATEGORY_KEYS)
        for k in CATEGORY_KEYS:
            assert metrics[k] == pytest.approx(alone[k], rel=1e-12, abs=1e-15), (category, k)
    if labels != "torch-codes":
        assert "by_data_source/a%2Fb%20code/variance_proxy/expected_w" in grouped


def test_group_by_column_of_a_dataproto_with_a_prefix() -> None:
    batch = make_batch(len(LABELS), 9, seed=5, with_is=True)
    proto = DataProto.from_dict(tensors=dict(batch), non_tensors={"data_source": LABELS.astype(object)})
    m = compute_variance_proxy_metrics(proto, group_by="data_source", prefix="train/vp/")
    alone = compute_variance_proxy_metrics(rows_of(batch, np.flatnonzero(LABELS == "logic")))
    got = m[K.category_key("train/vp/expected_a_squared", "data_source", "logic")]
    assert got == pytest.approx(alone[K.VARIANCE_PROXY_EXPECTED_A_SQUARED], rel=1e-12)
    per_category = {plain for plain, _, _ in filter(None, map(K.split_category_key, m))}
    assert per_category == {"train/vp/" + k.removeprefix(K.VARIANCE_PROXY_PREFIX) for k in CATEGORY_KEYS}


def test_group_by_nan_stays_in_its_category() -> None:
    batch = make_batch(len(LABELS), 8, seed=6, with_is=False)
    batch["advantages"][3, 0] = math.nan  # row 3: "logic", its first token is always in the mask
    m = compute_variance_proxy_metrics(batch, group_by=LABELS, group_name="data_source")
    by = by_category(m)
    assert math.isnan(by["logic"][K.VARIANCE_PROXY_EXPECTED_A_SQUARED])
    assert math.isnan(m[K.VARIANCE_PROXY_EXPECTED_A_SQUARED])
    assert all(math.isfinite(v) for c, ms in by.items() if c != "logic" for v in ms.values())


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    cuts=st.lists(st.integers(0, len(LABELS)), min_size=1, max_size=3),
    with_is=st.booleans(),
)
def test_group_by_merge_of_parts_equals_the_whole(seed: int, cuts: list[int], with_is: bool) -> None:
    batch = make_batch(len(LABELS), 7, seed=seed, with_is=with_is)
    bounds = [0, *sorted(cuts), len(LABELS)]  # parts see different categories; some are empty
    kw = {"group_name": "data_source"}
    whole = compute_variance_proxy_metrics(batch, 0.7, group_by=LABELS, **kw)
    parts = [
        variance_proxy_statistics({k: v[a:b] for k, v in batch.items()}, group_by=LABELS[a:b], **kw)
        for a, b in itertools.pairwise(bounds)
    ]
    merged = Stats.merge(*[p for p in parts if p is not None]).finalize(gradient_norm=0.7)
    assert sorted(merged) == sorted(whole)
    for k, v in whole.items():
        assert merged[k] == pytest.approx(v, rel=1e-9, abs=1e-12), k


def test_group_by_folds_the_least_frequent_at_finalize() -> None:
    batch = make_batch(len(LABELS), 12, seed=8, with_is=True)
    with pytest.warns(RLMetricsWarning, match="more than max_categories=2"):
        m = compute_variance_proxy_metrics(batch, group_by=LABELS, group_name="data_source", max_categories=2)
    by = by_category(m)
    assert set(by) == {"gsm8k", K.OTHER_CATEGORY}
    rest = compute_variance_proxy_metrics(rows_of(batch, np.flatnonzero(LABELS != "gsm8k")))
    for k in CATEGORY_KEYS:
        assert by[K.OTHER_CATEGORY][k] == pytest.approx(rest[k], rel=1e-12)


def test_group_by_empty_shard_merges_and_missing_inputs_give_nothing() -> None:
    batch = make_batch(4, 5, seed=2, with_is=False)
    kw = {"group_by": ["a", "b", "a", "a"], "group_name": "env"}
    m = compute_variance_proxy_metrics(batch, **kw)
    empty = variance_proxy_statistics({k: v[:0] for k, v in batch.items()}, group_by=[], group_name="env")
    assert empty is not None
    whole = variance_proxy_statistics(batch, **kw)
    assert whole is not None
    assert Stats.merge(empty, whole).finalize() == m
    assert compute_variance_proxy_metrics({"advantages": batch["advantages"]}, **kw) == {}


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        pytest.param({"group_by": "data_source"}, KeyError, "no column 'data_source'", id="no-column"),
        pytest.param({"group_by": ["a", "b"]}, ValueError, r"one label per sample \(3\); got 2", id="length"),
        pytest.param({"group_by": [["a"], ["b"], ["c"]]}, ValueError, "must be 1-d", id="2d"),
        pytest.param({"group_by": 3}, TypeError, "column name or an array of labels", id="scalar"),
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
        compute_variance_proxy_metrics(BASE, **kwargs)


def test_group_by_options_must_agree_to_merge() -> None:
    a = variance_proxy_statistics(BASE, group_by=list("abc"), group_name="env")
    b = variance_proxy_statistics(BASE, group_by=list("abc"), group_name="src")
    assert a is not None and b is not None
    with pytest.raises(ValueError, match="group_by"):
        Stats.merge(a, b)

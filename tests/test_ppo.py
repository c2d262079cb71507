"""Tests of rlmetrics.policy.ppo: verl 0.9.1 parity, loop references, properties, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics import keys as K
from rlmetrics._core.stats import Stats
from rlmetrics.policy.ppo import compute_ppo_update_metrics, ppo_update_statistics

core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")


class _Cfg:
    """Minimal stand-in for verl's ActorConfig as read by compute_policy_loss_vanilla."""

    def __init__(self, low: float, high: float, c: float) -> None:
        self.clip_ratio, self.clip_ratio_low, self.clip_ratio_high = low, low, high
        self.clip_ratio_c = c
        self.global_batch_info: dict = {}

    def get(self, key: str, default: object = None) -> object:
        return getattr(self, key, default)


def make(b: int, r: int, *, seed: int, spread: float = 0.4, empty_row: bool = False):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(b, r, generator=g) * 3
    new = old + torch.randn(b, r, generator=g) * spread
    adv = torch.randn(b, r, generator=g)
    adv[0, :3] = 0.0
    lens = torch.randint(1, r + 1, (b,), generator=g)
    if empty_row and b > 1:
        lens[-1] = 0
    mask = (torch.arange(r)[None, :] < lens[:, None]).long()
    return new, old, adv, mask


@pytest.mark.parametrize(
    ("low", "high", "c", "spread"),
    [
        pytest.param(0.2, 0.2, 3.0, 0.4, id="symmetric"),
        pytest.param(0.2, 0.28, 3.0, 0.4, id="clip-higher"),
        pytest.param(0.1, 0.1, 1.5, 1.5, id="dual-clip-active"),
        pytest.param(0.3, 10.0, 3.0, 0.05, id="wide"),
    ],
)
@pytest.mark.parametrize("empty_row", [False, True], ids=["full", "empty-row"])
def test_parity_with_verl(low: float, high: float, c: float, spread: float, empty_row: bool) -> None:
    new, old, adv, mask = make(10, 60, seed=11, spread=spread, empty_row=empty_row)
    _, expected = core_algos.compute_policy_loss_vanilla(old, new, adv, mask, config=_Cfg(low, high, c))
    ours = compute_ppo_update_metrics(
        new, old, adv, mask, clip_ratio_low=low, clip_ratio_high=high, clip_ratio_c=c
    )
    for k, v in expected.items():
        assert ours[k] == pytest.approx(v, rel=1e-6, abs=1e-8), k
    assert ours["actor/pg_clipfrac_low"] + ours["actor/pg_clipfrac_high"] == pytest.approx(
        ours["actor/pg_clipfrac"], abs=1e-12
    )


def loop_reference(new, old, adv, mask, low, high, seq: bool) -> dict[str, float]:
    n, o, a, m = (x.double().numpy() for x in (new, old, adv, mask))
    rows = []
    for i in range(n.shape[0]):
        idx = np.flatnonzero(m[i])
        if idx.size == 0:
            continue
        r = np.exp(np.clip(n[i, idx] - o[i, idx], -20, 20))
        lo = (a[i, idx] < 0) & (r < 1 - low)
        hi = (a[i, idx] > 0) & (r > 1 + high)
        rows.append({"low": lo, "high": hi, "ratio": r, "k3": r - 1 - np.log(r)})
    if seq:
        agg = {k: float(np.mean([row[k].mean() for row in rows])) for k in rows[0]}
    else:
        agg = {k: float(np.concatenate([row[k] for row in rows]).mean()) for k in rows[0]}
    agg["max"] = float(max(row["ratio"].max() for row in rows))
    agg["min"] = float(min(row["ratio"].min() for row in rows))
    return agg


@pytest.mark.parametrize("aggregation", ["token-mean", "seq-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("as_numpy", [False, True], ids=["torch", "numpy"])
def test_loop_reference(aggregation: str, as_numpy: bool) -> None:
    new, old, adv, mask = make(9, 700, seed=12, empty_row=True)
    args = [x.numpy() for x in (new, old, adv, mask)] if as_numpy else [new, old, adv, mask]
    ours = compute_ppo_update_metrics(*args, clip_ratio=0.15, aggregation=aggregation)
    ref = loop_reference(new, old, adv, mask, 0.15, 0.15, seq=aggregation != "token-mean")
    assert ours["actor/pg_clipfrac_low"] == pytest.approx(ref["low"], rel=1e-9)
    assert ours["actor/pg_clipfrac_high"] == pytest.approx(ref["high"], rel=1e-9)
    assert ours["actor/ppo_ratio_mean"] == pytest.approx(ref["ratio"], rel=1e-6)
    assert ours["actor/ppo_kl_k3"] == pytest.approx(ref["k3"], rel=1e-5)
    assert ours["actor/ppo_ratio_max"] == pytest.approx(ref["max"], rel=1e-6)
    assert ours["actor/ppo_ratio_min"] == pytest.approx(ref["min"], rel=1e-6)


def test_empty_mask_gives_nan_with_warning() -> None:
    new, old, adv, mask = make(2, 5, seed=13)
    with pytest.warns(RuntimeWarning, match="selects no token"):
        m = compute_ppo_update_metrics(new, old, adv, torch.zeros_like(mask))
    assert all(math.isnan(v) for v in m.values())


NEW, OLD, ADV, MASK = make(3, 4, seed=14)


@pytest.mark.parametrize(
    ("args", "kwargs", "exc", "match"),
    [
        pytest.param((NEW, OLD[:, :2], ADV, MASK), {}, ValueError, "old_log_probs and log_probs", id="shape"),
        pytest.param((NEW[0], OLD[0], ADV[0], MASK[0]), {}, ValueError, r"shape \(B, R\)", id="1d"),
        pytest.param((NEW, OLD, ADV.numpy(), MASK), {}, TypeError, "must all be numpy arrays", id="mixed"),
        pytest.param(
            (NEW, OLD, ADV, MASK),
            {"aggregation": "token-sum"},
            ValueError,
            "aggregation must be",
            id="aggregation",
        ),
        pytest.param((NEW, OLD, ADV, MASK), {"clip_ratio_low": 1.0}, ValueError, "clip_ratio_low", id="low"),
        pytest.param(
            (NEW, OLD, ADV, MASK), {"clip_ratio_high": -0.1}, ValueError, "clip_ratio_high", id="high"
        ),
        pytest.param((NEW, OLD, ADV, MASK), {"clip_ratio_c": 1.0}, ValueError, "clip_ratio_c", id="dual"),
        pytest.param((NEW, OLD, ADV, MASK), {"clip_ratio": math.nan}, ValueError, "must be finite", id="nan"),
        pytest.param((NEW, OLD, ADV, MASK * 3), {}, ValueError, "only 0 and 1", id="mask"),
        pytest.param(
            (NEW, OLD, ADV, None),
            {},
            TypeError,
            "response_mask must be a numpy .*got NoneType",
            id="mask-none",
        ),
        pytest.param(
            (NEW, OLD, ADV, "1111"), {}, TypeError, "response_mask must be a numpy .*got str", id="mask-str"
        ),
        pytest.param(
            (NEW, OLD, ADV.to(torch.complex64), MASK),
            {},
            TypeError,
            "advantages must hold real numbers .*complex64",
            id="complex-advantages",
        ),
        pytest.param(
            (NEW.numpy().astype(complex), OLD.numpy(), ADV.numpy(), MASK.numpy()),
            {},
            TypeError,
            "log_probs must hold real numbers .*complex128",
            id="complex-log-probs-numpy",
        ),
        pytest.param(
            (NEW, OLD, ADV, MASK),
            {"clip_ratio": "0.2"},
            TypeError,
            "must be a real number; got str",
            id="clip-str",
        ),
    ],
)
def test_errors(args: tuple, kwargs: dict, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        compute_ppo_update_metrics(*args, **kwargs)


@settings(max_examples=30, deadline=None)
@given(
    b=st.integers(2, 6),
    r=st.integers(1, 9),
    spread=st.floats(0.0, 4.0),
    seed=st.integers(0, 10**6),
    split=st.integers(1, 5),
    aggregation=st.sampled_from(["token-mean", "seq-mean"]),
)
def test_properties_and_merge(b: int, r: int, spread: float, seed: int, split: int, aggregation: str) -> None:
    new, old, adv, mask = make(b, r, seed=seed, spread=spread)
    m = compute_ppo_update_metrics(new, old, adv, mask, aggregation=aggregation)
    assert m["actor/ppo_kl_k3"] >= 0
    assert m["actor/pg_clipfrac_low"] + m["actor/pg_clipfrac_high"] == pytest.approx(m["actor/pg_clipfrac"])
    assert 0 <= m["actor/pg_clipfrac"] <= 1 and 0 <= m["actor/pg_clipfrac_lower"] <= 1
    assert m["actor/ppo_ratio_min"] <= m["actor/ppo_ratio_mean"] * (1 + 1e-6) + 1e-12
    assert m["actor/ppo_ratio_mean"] <= m["actor/ppo_ratio_max"] * (1 + 1e-6) + 1e-12
    split = min(split, b)  # the second part may have no rows
    parts = [
        ppo_update_statistics(new[sl], old[sl], adv[sl], mask[sl])
        for sl in (slice(0, split), slice(split, b))
    ]
    merged = Stats.merge(*parts).finalize(aggregation=aggregation)  # the aggregation chosen late
    for k, v in m.items():
        assert merged[k] == pytest.approx(v, rel=1e-9, abs=1e-12), k


def test_prefix_and_aggregation_option() -> None:
    new, old, adv, mask = make(4, 9, seed=15)
    default = compute_ppo_update_metrics(new, old, adv, mask, aggregation="seq-mean")
    renamed = compute_ppo_update_metrics(new, old, adv, mask, aggregation="seq-mean", prefix="ref/")
    assert renamed == {k.replace("actor/", "ref/"): v for k, v in default.items()}
    stats = ppo_update_statistics(new, old, adv, mask, aggregation="seq-mean")
    assert stats.finalize() == default
    assert stats.finalize(aggregation="token-mean") == compute_ppo_update_metrics(new, old, adv, mask)
    with pytest.raises(ValueError, match="aggregation must be one of"):
        stats.finalize(aggregation="token-sum")
    with pytest.raises(TypeError, match="prefix must be a string"):
        compute_ppo_update_metrics(new, old, adv, mask, prefix=None)  # type: ignore[arg-type]


@pytest.mark.parametrize("as_numpy", [False, True], ids=["torch", "numpy"])
def test_zero_width_responses_select_no_token(as_numpy: bool) -> None:
    """(B, 0) inputs: no token, so NaN with the warning (before: numpy's 'zero-size array' error)."""
    arrays = [x[:, :0] for x in (NEW, OLD, ADV, MASK)]
    if as_numpy:
        arrays = [x.numpy() for x in arrays]
    with pytest.warns(RuntimeWarning, match="selects no token"):
        m = compute_ppo_update_metrics(*arrays)
    assert math.isnan(m["actor/pg_clipfrac"]) and math.isnan(m["actor/ppo_ratio_max"])


def test_empty_batch_statistics_have_the_layout_of_a_full_one() -> None:
    new, old, adv, mask = make(3, 5, seed=16)
    empty = ppo_update_statistics(new[:0], old[:0], adv[:0], mask[:0], clip_ratio=0.3)
    full = ppo_update_statistics(new, old, adv, mask, clip_ratio=0.3)
    assert empty.sum_names == full.sum_names and empty.options == full.options
    assert Stats.merge(empty, full).finalize() == pytest.approx(full.finalize())
    with pytest.warns(RuntimeWarning, match="selects no token"):
        assert math.isnan(empty.finalize()[K.PG_CLIPFRAC])


@st.composite
def ppo_inputs(draw: st.DrawFn) -> dict:
    """Random PPO inputs: 0 rows or width 0 included, dtypes, mask dtypes, NaN/inf at valid tokens,
    bad masks, clip options."""
    b, r = draw(st.integers(0, 5)), draw(st.integers(0, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    old = -rng.exponential(1.0, size=(b, r))
    arrays = {
        "log_probs": old + rng.normal(0.0, draw(st.sampled_from([0.01, 0.3, 3.0])), size=(b, r)),
        "old_log_probs": old,
        "advantages": rng.normal(size=(b, r)),
        "mask": rng.random((b, r)) < 0.7,
    }
    valid = np.argwhere(arrays["mask"])
    for key, i, special in draw(
        st.lists(
            st.tuples(
                st.sampled_from(["log_probs", "old_log_probs", "advantages"]),
                st.integers(0, 99),
                st.sampled_from([math.inf, -math.inf, math.nan]),
            ),
            max_size=2,
        )
    ):
        if valid.size:  # verl's masked means leak a NaN from a masked-out slot; valid slots only
            row, col = valid[i % len(valid)]
            arrays[key][row, col] = special
    low = draw(st.sampled_from([0.1, 0.2, 0.5]))
    mask_dtype = draw(st.sampled_from(["bool", "int64", "float32"]))
    return {
        "mask_dtype": mask_dtype,
        "invalid": b * r > 0 and mask_dtype != "bool" and draw(st.integers(0, 9)) == 0,
        **arrays,
        "dtype": draw(st.sampled_from(["float32", "float64", "bfloat16"])),
        "container": draw(st.sampled_from(["numpy", "torch"])),
        "low": low,
        "high": draw(st.sampled_from([low, 0.28, 1.0])),
        "c": draw(st.sampled_from([1.5, 3.0])),
    }


@settings(max_examples=100, deadline=None)
@given(spec=ppo_inputs())
def test_property_any_input_gives_verls_numbers_or_a_named_error(spec: dict) -> None:
    """Whatever the shapes, dtypes and special values: verl's metrics where verl defines them, NaN
    with the warning where the mask selects no token, a named error for a bad mask."""
    as_torch = spec["container"] == "torch" or spec["dtype"] == "bfloat16"
    tdtype = getattr(torch, spec["dtype"])
    values = [torch.tensor(spec[k]).to(tdtype) for k in ("log_probs", "old_log_probs", "advantages")]
    mask = torch.from_numpy(spec["mask"].astype(spec["mask_dtype"]))
    if spec["invalid"]:
        mask.view(-1)[0] = 2
    if as_torch:
        args = [*values, mask]
    else:
        args = [v.numpy() for v in values] + [mask.numpy()]
    options = {"clip_ratio_low": spec["low"], "clip_ratio_high": spec["high"], "clip_ratio_c": spec["c"]}
    if spec["invalid"]:
        with pytest.raises(ValueError, match="response_mask must hold only 0 and 1"):
            compute_ppo_update_metrics(*args, **options)
        return
    if not spec["mask"].any():
        with pytest.warns(RuntimeWarning, match="response_mask selects no token"):
            ours = compute_ppo_update_metrics(*args, **options)
        assert all(math.isnan(v) for v in ours.values())
        return
    ours = compute_ppo_update_metrics(*args, **options)
    # verl on the same values, upcast to float32/float64 as ours are computed
    work = torch.float64 if spec["dtype"] == "float64" else torch.float32
    new, old, adv = (v.to(work) for v in values)
    cfg = _Cfg(spec["low"], spec["high"], spec["c"])
    _, expected = core_algos.compute_policy_loss_vanilla(old, new, adv, mask.long(), config=cfg)
    for key, want in expected.items():
        assert ours[key] == pytest.approx(want, rel=1e-5, abs=1e-6, nan_ok=True), key
    assert ours["actor/pg_clipfrac_low"] + ours["actor/pg_clipfrac_high"] == pytest.approx(
        ours["actor/pg_clipfrac"], abs=1e-12
    )

"""Tests of rlmetrics._core.stats: packing, merging, host transfer, finalising, and the device path
(one host read, deferred mask checks) of every family built on it."""

from __future__ import annotations

import inspect
import math
import pydoc

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics._core import array as _array
from rlmetrics._core.array import array_namespace
from rlmetrics._core.stats import (
    Stats,
    check_prefix,
    invalid_mask_field,
    metrics_from,
    stand_in_statistics,
    with_prefix,
)


def _echo(sums, maxes, mins, options, **late):
    """A finaliser that returns what it was given (for the tests of the plumbing)."""
    return {"sums": sums, "maxes": maxes, "mins": mins, "options": dict(options), "late": late}


def _pack(n: float, s, hi, lo, *, xp=None, options=None) -> Stats:
    return Stats.pack(
        "demo", {"n": n, "s": s}, {"hi": hi}, {"lo": lo}, finaliser=_echo, options=options, xp=xp
    )


@pytest.mark.parametrize("use_torch", [False, True], ids=["numpy", "torch"])
def test_pack_host_values_and_merge(use_torch: bool) -> None:
    arr = torch.tensor if use_torch else np.asarray
    xp = array_namespace(arr([0.0]))
    a = _pack(2.0, arr(3.5), arr(1.0), arr(-1.0), xp=xp)
    b = _pack(1.0, arr(0.5), arr(4.0), arr(0.0), xp=xp)
    assert a.host_values() == ({"n": 2.0, "s": 3.5}, {"hi": 1.0}, {"lo": -1.0})
    merged = Stats.merge(a, b)
    assert isinstance(merged.sums, torch.Tensor if use_torch else np.ndarray)  # merged where they are
    assert merged.host_values() == ({"n": 3.0, "s": 4.0}, {"hi": 4.0}, {"lo": -1.0})
    assert (a + b).host_values() == merged.host_values()
    assert a.merge().host_values() == a.host_values()


def test_merge_of_numpy_and_torch_parts_goes_through_the_host() -> None:
    a = _pack(1.0, 2.0, 3.0, 4.0)
    b = _pack(
        1.0, torch.tensor(1.0), torch.tensor(5.0), torch.tensor(0.0), xp=array_namespace(torch.zeros(1))
    )
    merged = a.merge(b)
    assert isinstance(merged.sums, np.ndarray)
    assert merged.host_values() == ({"n": 2.0, "s": 3.0}, {"hi": 5.0}, {"lo": 0.0})


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.floats(-1e6, 1e6), min_size=0, max_size=5), min_size=1, max_size=6))
def test_property_merge_equals_one_pass(chunks: list[list[float]]) -> None:
    """Sums, maxima and minima of chunks merge into those of everything (empty chunks included)."""

    def stats(values: list[float]) -> Stats:
        return Stats.pack(
            "demo",
            {"n": float(len(values)), "s": math.fsum(values)},
            {"x": max(values, default=-math.inf)},
            {"x": min(values, default=math.inf)},
            finaliser=_echo,
        )

    every = [v for c in chunks for v in c]
    sums, maxes, mins = Stats.merge(*[stats(c) for c in chunks]).host_values()
    want_sums, want_maxes, want_mins = stats(every).host_values()
    assert sums["n"] == want_sums["n"] and maxes == want_maxes and mins == want_mins
    assert sums["s"] == pytest.approx(want_sums["s"], rel=1e-12, abs=1e-6)


def test_zeroed_and_to_host() -> None:
    t = _pack(
        2.0, torch.tensor(3.0), torch.tensor(1.0), torch.tensor(-1.0), xp=array_namespace(torch.zeros(1))
    )
    z = t.zeroed()
    assert isinstance(z.sums, torch.Tensor)
    assert z.host_values() == ({"n": 0.0, "s": 0.0}, {"hi": -math.inf}, {"lo": math.inf})
    host = t.to_host()
    assert isinstance(host.sums, np.ndarray) and host.host_values() == t.host_values()
    assert (host.kind, host.sum_names, host.finaliser) == (t.kind, t.sum_names, t.finaliser)


@pytest.mark.parametrize(
    ("other", "exc", "match"),
    [
        pytest.param(
            Stats.pack("other", {"n": 1.0, "s": 1.0}, {"hi": 1.0}, {"lo": 1.0}, finaliser=_echo),
            ValueError,
            "cannot merge 'other' statistics with 'demo' statistics",
            id="kind",
        ),
        pytest.param(
            Stats.pack("demo", {"n": 1.0}, {"hi": 1.0}, {"lo": 1.0}, finaliser=_echo),
            ValueError,
            "cannot merge 'demo' statistics with 'demo'",
            id="layout",
        ),
        pytest.param(
            _pack(1.0, 1.0, 1.0, 1.0, options={"t": 2.0, "u": 1}),
            ValueError,
            r"computed with different options: \['t'\]",
            id="options",
        ),
        pytest.param({"n": 1.0}, TypeError, "can merge Stats only with Stats; got dict", id="type"),
    ],
)
def test_merge_errors(other: object, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        _pack(1.0, 1.0, 1.0, 1.0, options={"t": 1.0, "u": 1}).merge(other)  # type: ignore[arg-type]


def test_finalize_passes_host_values_options_and_late_options() -> None:
    out = _pack(2.0, 3.0, 1.0, -1.0, options={"prefix": "p/"}).finalize(gradient_norm=0.5)
    assert out == {
        "sums": {"n": 2.0, "s": 3.0},
        "maxes": {"hi": 1.0},
        "mins": {"lo": -1.0},
        "options": {"prefix": "p/"},
        "late": {"gradient_norm": 0.5},
    }


def test_deferred_mask_check_survives_merging() -> None:
    """The invalid-entry count is summed like any other sum and checked by finalize()."""

    def stats(n_invalid: float) -> Stats:
        sums = {"n": 1.0, invalid_mask_field("batch['m']"): n_invalid}
        return Stats.pack("demo", sums, {}, {}, finaliser=_echo)

    good = Stats.merge(stats(0.0), stats(0.0)).finalize()
    assert good["sums"] == {"n": 2.0}  # the check's entry is not passed on
    with pytest.raises(ValueError, match=r"^batch\['m'\] must hold only 0 and 1; found 2 other entries"):
        Stats.merge(stats(0.0), stats(2.0)).finalize()


def test_stand_in_statistics_has_the_layout_of_the_options() -> None:
    def statistics(x, mask, *, scale):
        assert x.shape == (1, 1) and bool(mask[0, 0]) and float(x[0, 0]) == 0.0
        return Stats.pack(
            "demo", {"n": 1.0, f"s{scale}": 5.0}, {}, {}, finaliser=_echo, options={"scale": scale}
        )

    arrays = {"x": np.zeros((0, 4), np.float32), "mask": np.zeros((0, 4), bool), "w": None}
    empty = stand_in_statistics(lambda x, mask, w, **o: statistics(x, mask, **o), arrays, {"mask"}, scale=3)
    assert empty.host_values() == ({"n": 0.0, "s3": 0.0}, {}, {})
    assert empty.options == {"scale": 3}


def test_prefix_helpers() -> None:
    assert with_prefix({"a/x": 1.0}, "a/", "a/") == {"a/x": 1.0}
    assert with_prefix({"a/x": 1.0}, "a/", "") == {"x": 1.0}
    assert check_prefix("b/") == "b/"
    with pytest.raises(TypeError, match="prefix must be a string; got int 3"):
        check_prefix(3)


# --- the device path (what CUDA tensors take), run on CPU tensors -----------------------------

_HOST_READS = ("item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__")


def _policy_inputs(seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    b, r = 12, 20
    mask = (torch.arange(r)[None, :] < torch.randint(1, r + 1, (b,), generator=g)[:, None]).long()
    old = -torch.rand(b, r, generator=g)
    return {
        "mask": mask,
        "old": old,
        "new": old + 0.05 * torch.randn(b, r, generator=g),
        "roll": old + 0.05 * torch.randn(b, r, generator=g),
        "adv": torch.randn(b, r, generator=g),
        "spi": torch.rand(b, r, generator=g),
    }


def _call(family: str, x: dict, mask: torch.Tensor | None = None) -> dict:
    from rlmetrics import (
        compute_ppo_update_metrics,
        compute_rollout_mismatch_metrics,
        compute_variance_proxy_metrics,
    )

    m = x["mask"] if mask is None else mask
    if family == "mismatch-token":
        return compute_rollout_mismatch_metrics(x["old"], x["roll"], m)
    if family == "mismatch-sequence":
        return compute_rollout_mismatch_metrics(x["old"], x["roll"], m, rollout_is="sequence")
    if family == "ppo":
        return compute_ppo_update_metrics(x["new"], x["old"], x["adv"], m)
    batch = {
        "advantages": x["adv"],
        "response_mask": m,
        "sum_pi_squared": x["spi"],
        "old_log_probs": x["old"],
    }
    return compute_variance_proxy_metrics(batch, gradient_norm=0.5)


FAMILIES = ["mismatch-token", "mismatch-sequence", "ppo", "variance"]


@pytest.mark.parametrize("family", FAMILIES)
def test_device_path_reads_the_host_once(monkeypatch: pytest.MonkeyPatch, family: str) -> None:
    """One host read per call on the device path: masks are checked from the packed sums."""
    x = _policy_inputs()
    expected = _call(family, x)  # the CPU (numpy) path
    monkeypatch.setattr(_array, "_CPU_TENSORS_AS_NUMPY", False)
    calls: list[str] = []
    for name in _HOST_READS:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _name=name, _original=original, **kwargs):  # type: ignore[no-untyped-def]
            calls.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    got = _call(family, x)
    monkeypatch.undo()
    assert sorted(calls) == ["cpu", "numpy"], calls
    assert sorted(got) == sorted(expected)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-5, abs=1e-6, nan_ok=True), key


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("device_path", [False, True], ids=["numpy-path", "device-path"])
def test_invalid_mask_is_named_on_both_paths(
    monkeypatch: pytest.MonkeyPatch, family: str, device_path: bool
) -> None:
    x = _policy_inputs(1)
    if device_path:
        monkeypatch.setattr(_array, "_CPU_TENSORS_AS_NUMPY", False)
    bad = x["mask"].clone()
    bad[0, 0] = 3
    with pytest.raises(ValueError, match=r"response_mask'?\]? must hold only 0 and 1; found "):
        _call(family, x, bad)


@pytest.mark.parametrize("device_path", [False, True], ids=["numpy-path", "device-path"])
def test_mismatch_all_zero_mask_is_an_error_on_both_paths(
    monkeypatch: pytest.MonkeyPatch, device_path: bool
) -> None:
    x = _policy_inputs(2)
    if device_path:
        monkeypatch.setattr(_array, "_CPU_TENSORS_AS_NUMPY", False)
    with pytest.raises(ValueError, match="response_mask must select at least one token"):
        _call("mismatch-token", x, torch.zeros_like(x["mask"]))


# --- Stats.reindexed ---------------------------------------------------------------------------


@pytest.mark.parametrize("use_torch", [False, True], ids=["numpy", "torch"])
def test_reindexed_fills_absent_names_and_drops_the_others(use_torch: bool) -> None:
    arr = torch.tensor if use_torch else np.asarray
    xp = array_namespace(arr([0.0]))
    stats = _pack(2.0, arr(3.5), arr(1.0), arr(-1.0), xp=xp)
    wider = stats.reindexed(["x", "s", "n"], ["hi", "y"], [])
    assert isinstance(wider.sums, torch.Tensor if use_torch else np.ndarray)  # stays where it was
    assert wider.host_values() == ({"x": 0.0, "s": 3.5, "n": 2.0}, {"hi": 1.0, "y": -math.inf}, {})
    assert wider.reindexed(["n", "s"], ["hi"], ["lo"]).host_values() == (
        {"n": 2.0, "s": 3.5},
        {"hi": 1.0},
        {"lo": math.inf},
    )
    assert stats.reindexed(["n", "s"], ["hi"], ["lo"]) is stats  # the same layout: nothing to do
    merged = wider.merge(
        _pack(1.0, arr(1.0), arr(5.0), arr(0.0), xp=xp).reindexed(["x", "s", "n"], ["hi", "y"], [])
    )
    assert merged.host_values()[0] == {"x": 0.0, "s": 4.5, "n": 3.0}


# --- metrics_from: compute_X from X_statistics -------------------------------------------------


def _demo_statistics(x: float, y: float = 1.0, *, scale: float = 2.0) -> Stats | None:
    if isinstance(x, str):
        raise TypeError(f"x must be a number; got {x!r}")
    if x < 0:
        return None
    return Stats.pack("demo", {"n": 1.0, "s": x * y}, {}, {}, finaliser=_echo, options={"scale": scale})


def _make_compute() -> object:
    @metrics_from(_demo_statistics, late=("late",), check_late=lambda late=None: _check_late(late))
    def compute_demo(  # type: ignore[empty-body]
        x: float, y: float = 1.0, late: object = None, *, scale: float = 2.0, process_group: object = None
    ) -> dict[str, float]:
        """The demo metrics."""
        ...

    return compute_demo


def _check_late(late: object) -> None:
    if late == "bad":
        raise ValueError("late must not be 'bad'")


def test_metrics_from_routes_the_arguments() -> None:
    compute = _make_compute()
    assert compute.__name__ == "compute_demo" and compute.__doc__ == "The demo metrics."
    assert str(inspect.signature(compute)) == (
        "(x: 'float', y: 'float' = 1.0, late: 'object' = None, *, scale: 'float' = 2.0, "
        "process_group: 'object' = None) -> 'dict[str, float]'"
    )
    assert "The demo metrics." in pydoc.render_doc(compute, renderer=pydoc.plaintext)
    got = compute(3.0, 2.0, "L", scale=5.0)
    assert (got["sums"], got["options"], got["late"]) == ({"n": 1.0, "s": 6.0}, {"scale": 5.0}, {"late": "L"})
    assert compute(x=1.0, late=7)["late"] == {"late": 7} and compute(1.0)["late"] == {}
    assert compute(-1.0) == {}  # the statistics are None: {}, as verl without the inputs


@pytest.mark.parametrize(
    ("call", "match"),
    [
        pytest.param(
            lambda f: f(), r"compute_demo\(\) missing 1 required positional argument: 'x'", id="missing"
        ),
        pytest.param(
            lambda f: f(1.0, zz=2), r"compute_demo\(\) got an unexpected keyword argument 'zz'", id="kw"
        ),
        pytest.param(
            lambda f: f(1.0, 2.0, 3.0, 4.0), r"compute_demo\(\) takes from 1 to 3 positional", id="many"
        ),
    ],
)
def test_metrics_from_a_wrong_call_is_named_after_the_compute_function(call, match) -> None:
    with pytest.raises(TypeError, match=match):
        call(_make_compute())


def _bad_stub_a(x: float, *, scale: float = 2.0) -> dict[str, float]:  # no process_group
    return {}


def _bad_stub_b(
    x: float, y: float = 2.0, *, scale: float = 2.0, process_group: object = None
) -> dict[str, float]:
    return {}  # y's default differs from the statistics'


def _bad_stub_c(
    x: float, late: object = None, y: float = 1.0, *, scale: float = 2.0, process_group: object = None
) -> dict[str, float]:
    return {}  # a late option before the statistics' positional parameters


@pytest.mark.parametrize(
    ("stub", "late", "match"),
    [
        pytest.param(_bad_stub_a, (), "must end with a keyword-only process_group=None", id="no-group"),
        pytest.param(_bad_stub_b, (), r"must take the parameters of _demo_statistics", id="drift"),
        pytest.param(
            _bad_stub_c, ("late",), "the positional parameters of _demo_statistics come first", id="order"
        ),
    ],
)
def test_metrics_from_refuses_a_signature_that_drifted(stub, late, match) -> None:
    with pytest.raises(TypeError, match=match):
        metrics_from(_demo_statistics, late=late)(stub)


@pytest.fixture
def world1():
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()


def test_metrics_from_with_a_process_group(world1) -> None:
    compute = _make_compute()
    assert compute(3.0, 2.0, "L", process_group=world1) == compute(3.0, 2.0, "L")
    assert compute(-1.0, process_group=world1) == {}
    with pytest.raises(ValueError, match=r"^rank 0: late must not be 'bad'"):  # checked inside the agreement
        compute(3.0, late="bad", process_group=world1)
    with pytest.raises(TypeError, match=r"^rank 0: x must be a number"):
        compute("3", process_group=world1)


@pytest.mark.parametrize(
    ("name", "signature"),
    [
        pytest.param(
            "compute_data_metrics",
            "(batch: 'Any', use_critic: 'bool' = True, *, max_response_length: 'int | None' = None, "
            "max_prompt_length: 'int | None' = None, group_by: 'Any' = None, "
            "group_name: 'str | None' = None, split_by_outcome: 'bool' = False, "
            "score_threshold: 'float | None' = None, "
            "max_categories: 'int' = 64, process_group: 'Any' = None) -> 'dict[str, float]'",
            id="data",
        ),
        pytest.param(
            "compute_ppo_update_metrics",
            "(log_probs: 'Any', old_log_probs: 'Any', advantages: 'Any', response_mask: 'Any', *, "
            "clip_ratio: 'float' = 0.2, clip_ratio_low: 'float | None' = None, clip_ratio_high: "
            "'float | None' = None, clip_ratio_c: 'float' = 3.0, aggregation: 'str' = 'token-mean', "
            "prefix: 'str' = 'actor/', process_group: 'Any' = None) -> 'dict[str, float]'",
            id="ppo",
        ),
        pytest.param(
            "compute_rollout_mismatch_metrics",
            "(old_log_probs: 'Any', rollout_log_probs: 'Any', response_mask: 'Any', *, rollout_is: "
            "'str | None' = 'token', rollout_is_threshold: 'Any' = 2.0, prefix: 'str' = 'rollout_corr/', "
            "group_by: 'Any' = None, group_name: 'str | None' = None, max_categories: 'int' = 64, "
            "process_group: 'Any' = None) -> 'dict[str, float]'",
            id="mismatch",
        ),
        pytest.param(
            "compute_variance_proxy_metrics",
            "(batch: 'Any', gradient_norm: 'Any' = None, *, strict: 'bool' = False, prefix: 'str' = "
            "'variance_proxy/', group_by: 'Any' = None, group_name: 'str | None' = None, "
            "max_categories: 'int' = 64, process_group: 'Any' = None) -> 'dict[str, float]'",
            id="variance",
        ),
    ],
)
def test_every_compute_function_keeps_its_public_signature(name: str, signature: str) -> None:
    """The signatures as they were before metrics_from made these functions."""
    import rlmetrics

    fn = getattr(rlmetrics, name)
    assert str(inspect.signature(fn)) == signature
    assert fn.__name__ == name and fn.__doc__ and fn.__module__.startswith("rlmetrics.")
    assert pydoc.render_doc(fn, renderer=pydoc.plaintext).count(fn.__doc__.splitlines()[0]) == 1

"""Tests of rlmetrics._core.stats: packing, one-copy host transfer, merging, input preparation."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from rlmetrics._core.stats import PolicyStats, cpu_block_rows, pack_stats, prepare_arrays, warn_undefined


@pytest.mark.parametrize("use_torch", [False, True], ids=["numpy", "torch"])
def test_pack_to_host_and_merge(use_torch: bool) -> None:
    xp_arr = torch.tensor if use_torch else np.asarray
    from array_api_compat import array_namespace

    xp = array_namespace(xp_arr([0.0]))
    a = pack_stats("k", {"n": 2.0, "s": xp_arr(3.5)}, {"hi": xp_arr(1.0)}, {"lo": xp_arr(-1.0)}, xp=xp)
    b = pack_stats("k", {"n": 1.0, "s": xp_arr(0.5)}, {"hi": xp_arr(4.0)}, {"lo": xp_arr(0.0)}, xp=xp)
    assert a.to_host() == ({"n": 2.0, "s": 3.5}, {"hi": 1.0}, {"lo": -1.0})
    assert PolicyStats.merge([a, b]).to_host() == ({"n": 3.0, "s": 4.0}, {"hi": 4.0}, {"lo": -1.0})


@pytest.mark.parametrize(
    ("parts", "match"),
    [
        pytest.param([], "at least one", id="empty"),
        pytest.param(
            [pack_stats("a", {"n": 1.0}, {}, {}), pack_stats("b", {"n": 1.0}, {}, {})],
            "cannot merge 'b' statistics with 'a'",
            id="kinds",
        ),
    ],
)
def test_merge_errors(parts: list, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        PolicyStats.merge(parts)


def test_prepare_arrays_views_cpu_tensors_without_copy() -> None:
    t = torch.arange(6.0).reshape(2, 3)
    _xp, (a, b, none), device, on_cpu = prepare_arrays([t, t.bfloat16(), None], ["t", "b", "n"])
    assert isinstance(a, np.ndarray) and on_cpu and device is None and none is None
    a[0, 0] = 42.0
    assert t[0, 0].item() == 42.0  # a view, not a copy
    assert b.dtype == np.float32


@pytest.mark.parametrize(
    ("arrays", "exc", "match"),
    [
        pytest.param([np.zeros(2), torch.zeros(2)], TypeError, "must all be numpy arrays", id="mixed"),
        pytest.param(
            [[1.0, 2.0], np.zeros(2)], TypeError, "x0 must be a numpy array or a torch tensor", id="list"
        ),
    ],
)
def test_prepare_arrays_errors(arrays: list, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        prepare_arrays(arrays, [f"x{i}" for i in range(len(arrays))])


@pytest.mark.parametrize(
    ("n", "width", "on_cpu", "expected"),
    [
        pytest.param(10, 4096, True, 8, id="cpu-wide"),
        pytest.param(10, 10**6, True, 1, id="cpu-very-wide"),
        pytest.param(10, 4096, False, 10, id="accelerator"),
        pytest.param(0, 4096, False, 1, id="accelerator-empty"),
    ],
)
def test_cpu_block_rows(n: int, width: int, on_cpu: bool, expected: int) -> None:
    assert cpu_block_rows(n, width, on_cpu) == expected


def test_warn_undefined() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert math.isnan(warn_undefined("undefined thing"))
    assert (
        caught
        and issubclass(caught[0].category, RuntimeWarning)
        and "undefined thing" in str(caught[0].message)
    )


# --- the device path (what CUDA tensors take), run on CPU tensors -----------------------------

_HOST_READS = ("item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__")


def _device_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make CPU torch tensors take the array-API path that CUDA tensors take."""
    from rlmetrics._core import array as _array
    from rlmetrics.policy import mismatch as _mismatch
    from rlmetrics.policy import ppo as _ppo
    from rlmetrics.policy import variance as _variance

    def keep_tensors(arrays: list, names: list) -> tuple:
        present = [a for a in arrays if a is not None]
        out = [None if a is None else a.detach() for a in arrays]
        return _array.array_namespace(*present), out, present[0].device, False

    for module in (_mismatch, _ppo, _variance):
        monkeypatch.setattr(module, "prepare_arrays", keep_tensors)


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
    _device_path(monkeypatch)
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
        _device_path(monkeypatch)
    bad = x["mask"].clone()
    bad[0, 0] = 3
    with pytest.raises(ValueError, match=r"response_mask'?\]? must hold only 0 and 1"):
        _call(family, x, bad)


@pytest.mark.parametrize("device_path", [False, True], ids=["numpy-path", "device-path"])
def test_mismatch_all_zero_mask_is_an_error_on_both_paths(
    monkeypatch: pytest.MonkeyPatch, device_path: bool
) -> None:
    x = _policy_inputs(2)
    if device_path:
        _device_path(monkeypatch)
    with pytest.raises(ValueError, match="response_mask must select at least one token"):
        _call("mismatch-token", x, torch.zeros_like(x["mask"]))


def test_merge_keeps_the_deferred_mask_check() -> None:
    """Merged statistics of a shard with a bad mask still raise when brought to the host."""
    good = pack_stats("demo", {"n": 2.0, "mask_invalid": 0.0}, {}, {}, options={"mask_name": "m"})
    bad = pack_stats("demo", {"n": 1.0, "mask_invalid": 2.0}, {}, {}, options={"mask_name": "m"})
    assert PolicyStats.merge([good, good]).to_host()[0] == {"n": 4.0}
    with pytest.raises(ValueError, match=r"^m must hold only 0 and 1; found 2 other entries"):
        PolicyStats.merge([good, bad]).to_host()

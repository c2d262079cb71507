"""Tests of rlmetrics._policy_stats: packing, one-copy host transfer, merging, input preparation."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from rlmetrics._policy_stats import PolicyStats, cpu_block_rows, pack_stats, prepare_arrays, warn_undefined


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

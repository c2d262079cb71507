"""compute_timing_metrics / compute_throughput_metrics / compute_mfu: verl parity, MFU, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rlmetrics
from batches import make_batch, to_numpy
from rlmetrics import ACCELERATOR_PEAK_FLOPS, compute_mfu

torch = pytest.importorskip("torch")

TIMINGS = [
    pytest.param(
        {
            "gen": 1.5,
            "ref": 0.25,
            "values": 0.5,
            "adv": 0.01,
            "update_critic": 2.0,
            "update_actor": 3.0,
            "step": 8.0,
            "reward": 0.3,
        },
        id="all-stages",
    ),
    pytest.param({"gen": 0.1}, id="gen-only"),
    pytest.param({"step": 1.0, "testing": 4.0}, id="no-per-token-stage"),
    pytest.param({}, id="empty"),
]


@pytest.mark.parametrize("timing_raw", TIMINGS)
@pytest.mark.parametrize("as_numpy", [False, True], ids=["torch", "numpy"])
def test_timing_parity_with_verl(verl_metric_utils, data_proto, timing_raw, as_numpy):
    tensors, _ = make_batch(12, 6, 9, seed=1)
    ref = verl_metric_utils.compute_timing_metrics(data_proto.from_dict(tensors=dict(tensors)), timing_raw)
    ours = rlmetrics.compute_timing_metrics(to_numpy(tensors) if as_numpy else tensors, timing_raw)
    assert ours.keys() == ref.keys()
    for key, value in ref.items():
        assert ours[key] == pytest.approx(value, rel=1e-12), key


def test_timing_with_no_tokens_reads_zero_like_verl(verl_metric_utils, data_proto):
    tensors, _ = make_batch(3, 2, 4, seed=1)
    tensors["attention_mask"][:] = 0
    ref = verl_metric_utils.compute_timing_metrics(data_proto.from_dict(tensors=dict(tensors)), {"gen": 1.0})
    ours = rlmetrics.compute_timing_metrics(tensors, {"gen": 1.0})
    assert ours == ref == {"timing_s/gen": 1.0, "timing_per_token_ms/gen": 0.0}


@pytest.mark.parametrize("n_gpus", [1, 8])
def test_throughput_parity_with_verl(verl_metric_utils, data_proto, n_gpus):
    tensors, _ = make_batch(5, 3, 4, seed=2)
    meta = {"global_token_num": [17, 3, 40, 11, 9]}
    dp = data_proto.from_dict(tensors=dict(tensors), meta_info=meta)
    ref = verl_metric_utils.compute_throughout_metrics(dp, {"step": 2.5}, n_gpus)
    assert rlmetrics.compute_throughout_metrics(dp, {"step": 2.5}, n_gpus) == pytest.approx(ref, rel=1e-12)
    assert rlmetrics.compute_throughput_metrics({**tensors, "meta_info": meta}, {"step": 2.5}, n_gpus) == (
        pytest.approx(ref, rel=1e-12)
    )


@pytest.mark.parametrize("n_gpus", [4, np.int64(4), 4.0], ids=["int", "numpy-int", "whole-float"])
def test_n_gpus_any_whole_number(n_gpus):
    out = rlmetrics.compute_throughput_metrics(
        {"meta_info": {"global_token_num": [800]}}, {"step": 2.0}, n_gpus
    )
    assert out["perf/throughput"] == 100.0


def test_throughput_counts_the_attention_mask_without_global_token_num():
    tensors, _ = make_batch(6, 4, 5, seed=3)
    expected = float(tensors["attention_mask"].sum())
    out = rlmetrics.compute_throughput_metrics(tensors, {"step": 2.0}, 2)
    assert out["perf/total_num_tokens"] == expected
    assert out["perf/throughput"] == expected / 4.0


def test_mfu_from_params_and_accelerator_name():
    out = rlmetrics.compute_throughput_metrics(
        {"meta_info": {"global_token_num": [50_000, 50_000]}},
        {"step": 1.0},
        8,
        num_params=7e9,
        peak_flops="H100",
    )
    expected = 1e5 * 6 * 7e9 / (1.0 * 8 * ACCELERATOR_PEAK_FLOPS["H100"])
    assert out["perf/mfu"] == pytest.approx(expected, rel=1e-12)
    assert compute_mfu(1e5, 1.0, 8, flops_per_token=42e9, peak_flops=989e12) == pytest.approx(
        expected, rel=1e-12
    )
    assert compute_mfu(1.0, 1.0, 1, flops_per_token=1.0, peak_flops="nvidia h100") == 1 / 989e12


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        pytest.param(
            {"timing_raw": {"gen": 1.0}}, ValueError, r"timing_raw must hold 'step'.*got: gen", id="no-step"
        ),
        pytest.param(
            {"timing_raw": {"step": 0.0}},
            ValueError,
            r"timing_raw\['step'\] must be > 0; got 0.0",
            id="zero-step",
        ),
        pytest.param(
            {"timing_raw": {"step": math.nan}},
            ValueError,
            r"timing_raw\['step'\] must be finite",
            id="nan-step",
        ),
        pytest.param({"n_gpus": 0}, ValueError, r"n_gpus must be an integer >= 1; got 0", id="zero-gpus"),
        pytest.param(
            {"n_gpus": -2}, ValueError, r"n_gpus must be an integer >= 1; got -2", id="negative-gpus"
        ),
        pytest.param(
            {"n_gpus": 1.5}, TypeError, r"n_gpus must be an integer >= 1; got float 1.5", id="fractional-gpus"
        ),
        pytest.param(
            {"n_gpus": True}, TypeError, r"n_gpus must be an integer >= 1; got bool", id="bool-gpus"
        ),
        pytest.param({"n_gpus": "8"}, TypeError, r"n_gpus must be an integer >= 1; got str", id="str-gpus"),
        pytest.param({"num_params": 1e9}, ValueError, r"perf/mfu needs peak_flops=", id="mfu-without-peak"),
        pytest.param(
            {"num_params": 1e9, "peak_flops": "TPU-X9"},
            ValueError,
            r"unknown accelerator 'TPU-X9'; known:",
            id="unknown-accelerator",
        ),
        pytest.param(
            {"peak_flops": 1e15},
            ValueError,
            r"exactly one of flops_per_token= or num_params=",
            id="mfu-without-model",
        ),
    ],
)
def test_throughput_bad_input(kwargs, error, match):
    args = {"batch": {"meta_info": {"global_token_num": [10]}}, "timing_raw": {"step": 1.0}, "n_gpus": 1}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        rlmetrics.compute_throughput_metrics(
            args.pop("batch"), args.pop("timing_raw"), args.pop("n_gpus"), **args
        )


@pytest.mark.parametrize(
    ("timing_raw", "error", "match"),
    [
        pytest.param({"gen": math.inf}, ValueError, r"timing_raw\['gen'\] must be finite; got inf", id="inf"),
        pytest.param({"gen": "fast"}, TypeError, r"timing_raw\['gen'\] must be a real number", id="string"),
        pytest.param([("gen", 1.0)], TypeError, r"timing_raw must be a dict", id="not-a-dict"),
    ],
)
def test_timing_bad_input(timing_raw, error, match):
    tensors, _ = make_batch(2, 2, 2)
    with pytest.raises(error, match=match):
        rlmetrics.compute_timing_metrics(tensors, timing_raw)


def test_timing_needs_lengths_or_the_attention_mask():
    with pytest.raises(ValueError, match=r"missing the tensor 'attention_mask'"):
        rlmetrics.compute_timing_metrics({"responses": np.zeros((2, 3))}, {"gen": 1.0})


_TOKENS = "batch.meta_info\\['global_token_num'\\]"


def _total_tokens(tokens):
    batch = {"meta_info": {"global_token_num": tokens}}
    return rlmetrics.compute_throughput_metrics(batch, {"step": 2.0}, n_gpus=1)["perf/total_num_tokens"]


@pytest.mark.parametrize(
    ("tokens", "error", "match"),
    [
        pytest.param("1000", TypeError, rf"{_TOKENS} must be a real number; got str '1000'", id="a-string"),
        pytest.param(b"1000", TypeError, rf"{_TOKENS} must be a real number; got bytes", id="bytes"),
        pytest.param(
            [10, "20"], TypeError, rf"{_TOKENS}\[1\] must be a real number; got str '20'", id="a-string-entry"
        ),
        pytest.param(
            [10, None], TypeError, rf"{_TOKENS}\[1\] must be a real number; got NoneType", id="none-entry"
        ),
        pytest.param({"a": 1}, TypeError, rf"{_TOKENS} must be a token count or a list", id="dict"),
        pytest.param(-5, ValueError, rf"{_TOKENS} must hold token counts >= 0; entry 0 is -5", id="negative"),
        pytest.param(
            [3, -1], ValueError, rf"{_TOKENS} must hold token counts >= 0; entry 1 is -1", id="negative-entry"
        ),
        pytest.param([3, math.nan], ValueError, rf"{_TOKENS}\[1\] must be finite; got nan", id="nan-entry"),
        pytest.param(np.array([3, -2]), ValueError, r"entry 1 is -2", id="negative-numpy"),
        pytest.param(np.array([1.0, np.inf]), ValueError, r"entry 1 is inf", id="inf-numpy"),
        pytest.param(
            np.array(["1", "2"]), TypeError, rf"{_TOKENS} must hold real numbers", id="string-array"
        ),
    ],
)
def test_token_counts_that_are_not_counts_are_refused(tokens, error, match):
    with pytest.raises(error, match=match):
        _total_tokens(tokens)


@given(
    st.lists(st.integers(min_value=0, max_value=2**40) | st.floats(0, 1e12), max_size=50),
    st.sampled_from(["list", "tuple", "numpy", "torch", "scalar"]),
)
@settings(max_examples=120, deadline=None)
def test_property_any_non_negative_counts_sum_exactly(counts, container):
    if container == "scalar":
        counts = counts[:1] or [0]
        tokens = counts[0]
    elif container == "numpy":
        tokens = np.asarray(counts, dtype=np.float64)
    elif container == "torch":
        tokens = torch.tensor(counts, dtype=torch.float64)
    else:
        tokens = list(counts) if container == "list" else tuple(counts)
    assert _total_tokens(tokens) == math.fsum(float(c) for c in counts)


@given(st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=20).filter(lambda c: min(c) < 0))
@settings(max_examples=60, deadline=None)
def test_property_a_negative_count_anywhere_is_named(counts):
    first = next(i for i, c in enumerate(counts) if c < 0)
    with pytest.raises(ValueError, match=rf"entry {first} is {counts[first]}"):
        _total_tokens(counts)

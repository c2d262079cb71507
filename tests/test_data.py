"""compute_data_metrics: parity with verl 0.9.1, both engines, edge cases, errors, merging."""

from __future__ import annotations

import contextlib
import itertools
import math
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rlmetrics
from batches import assert_close_to_reference, make_batch, to_numpy
from rlmetrics._core import array as _array
from rlmetrics._core import lengths as _lengths
from rlmetrics._core.kernels import token_rows_kernel
from rlmetrics._core.stats import Stats
from rlmetrics.training import data as _data
from rlmetrics.training.data import data_statistics

torch = pytest.importorskip("torch")

#: The fused numba kernel (forced at every size), the array-API path on numpy (CPU tensors
#: viewed as numpy), and the array-API path on torch CPU tensors (the path CUDA tensors take).
ENGINES = ["numba", "numpy", "torch"]


@contextlib.contextmanager
def use_engine(name: str) -> Iterator[None]:
    """Route compute_data_metrics through one engine (see ENGINES)."""
    with pytest.MonkeyPatch.context() as mp:
        if name == "numba":
            if token_rows_kernel() is None:
                pytest.skip("numba not installed or disabled with RLMETRICS_NO_NUMBA")
            mp.setattr(_data, "FUSED_MIN_ELEMENTS", 0)
            mp.setattr(_lengths, "FUSED_MIN_ELEMENTS", 0)
        else:
            mp.setattr(_data, "FUSED_MIN_ELEMENTS", 1 << 62)
            mp.setattr(_lengths, "FUSED_MIN_ELEMENTS", 1 << 62)
        if name == "torch":
            mp.setattr(_array, "_CPU_TENSORS_AS_NUMPY", False)
        yield


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run a test through each engine."""
    with use_engine(request.param):
        yield str(request.param)


def verl_metrics(
    verl_metric_utils: Any, data_proto: Any, tensors: dict, extra: dict, use_critic: bool
) -> dict:
    dp = data_proto.from_dict(tensors=dict(tensors), non_tensors=dict(extra) if extra else None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return verl_metric_utils.compute_data_metrics(dp, use_critic=use_critic)


def summand_scale(tensors: dict) -> dict[str, float]:
    """Magnitude behind each mean, for the float32 error of verl's own summation."""
    mask = tensors["response_mask"].bool()
    scale = {}
    for key, name in (("score", "token_level_scores"), ("rewards", "token_level_rewards")):
        scale[f"critic/{key}/mean"] = float(tensors[name].float().abs().sum(-1).mean())
    for key, name in (("advantages", "advantages"), ("returns", "returns"), ("values", "values")):
        scale[f"critic/{key}/mean"] = float(tensors[name].float()[mask].abs().mean()) if mask.any() else 0.0
    scale["critic/vf_explained_var"] = 1.0
    return scale


def assert_matches_verl(ours: dict, ref: dict, scale: dict[str, float] | None = None) -> None:
    """:func:`assert_close_to_reference`, with infinite reference values matched exactly."""
    assert set(ours) == set(ref), set(ours) ^ set(ref)
    infinite = {k for k, v in ref.items() if np.isinf(float(v))}
    for key in infinite:
        assert ours[key] == float(ref[key]), f"{key}: ours {ours[key]!r} vs verl {float(ref[key])!r}"
    rest = set(ref) - infinite
    assert_close_to_reference({k: ours[k] for k in rest}, {k: ref[k] for k in rest}, scale=scale)


LAYOUTS = [
    pytest.param(b, p, r, mask, id=f"B{b}-P{p}-R{r}-{mask}")
    for (b, p, r), mask in itertools.product(
        [(1, 3, 4), (7, 5, 9), (64, 32, 48), (33, 17, 200)], ["prefix", "holes", "random"]
    )
]


@pytest.mark.parametrize(("batch_size", "prompt_width", "response_width", "mask"), LAYOUTS)
@pytest.mark.parametrize("use_critic", [True, False], ids=["critic", "no-critic"])
def test_parity_with_verl_torch(
    verl_metric_utils, data_proto, engine, batch_size, prompt_width, response_width, mask, use_critic
):
    for seed in range(3):
        tensors, extra = make_batch(
            batch_size,
            prompt_width,
            response_width,
            seed=seed,
            mask=mask,
            non_tensors=seed == 1,
            offset=2.0 * seed,
        )
        ref = verl_metrics(verl_metric_utils, data_proto, tensors, extra, use_critic)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ours = rlmetrics.compute_data_metrics({**tensors, **extra}, use_critic=use_critic)
        assert_close_to_reference(ours, ref, scale=summand_scale(tensors))


@pytest.mark.parametrize("mask_dtype", ["bool", "int32", "int64", "float32"])
@pytest.mark.parametrize("sparse", [True, False], ids=["verifiable-reward", "dense-reward"])
def test_parity_numpy_inputs_and_mask_dtypes(verl_metric_utils, data_proto, engine, mask_dtype, sparse):
    tensors, extra = make_batch(
        40, 16, 64, seed=7, mask_dtype=getattr(torch, mask_dtype), sparse_scores=sparse, non_tensors=True
    )
    ref = verl_metrics(verl_metric_utils, data_proto, tensors, extra, True)
    ours = rlmetrics.compute_data_metrics({**to_numpy(tensors), **extra})
    assert_close_to_reference(ours, ref, scale=summand_scale(tensors))


def test_parity_on_a_verl_dataproto_and_a_tensordict(verl_metric_utils, data_proto):
    tensordict = pytest.importorskip("tensordict")
    tensors, extra = make_batch(16, 8, 12, seed=3, non_tensors=True)
    dp = data_proto.from_dict(tensors=dict(tensors), non_tensors=dict(extra))
    ref = verl_metrics(verl_metric_utils, data_proto, tensors, extra, True)
    assert_close_to_reference(rlmetrics.compute_data_metrics(dp), ref, scale=summand_scale(tensors))
    td = tensordict.TensorDict(dict(tensors), batch_size=[16])
    ref_no_extra = verl_metrics(verl_metric_utils, data_proto, tensors, {}, True)
    assert_close_to_reference(rlmetrics.compute_data_metrics(td), ref_no_extra, scale=summand_scale(tensors))


@pytest.mark.parametrize("sparse", [True, False], ids=["verifiable-reward", "dense-reward"])
def test_large_batch_parity(verl_metric_utils, data_proto, sparse):
    tensors, _ = make_batch(256, 128, 1024, seed=11, sparse_scores=sparse, offset=3.0)
    ref = verl_metrics(verl_metric_utils, data_proto, tensors, {}, True)
    assert_close_to_reference(rlmetrics.compute_data_metrics(tensors), ref, scale=summand_scale(tensors))


def test_bfloat16_inputs_are_computed_in_float32(engine):
    tensors, _ = make_batch(32, 8, 40, seed=5, dtype=torch.bfloat16)
    as_f32 = {k: v.float() if v.dtype == torch.bfloat16 else v for k, v in tensors.items()}
    ours = rlmetrics.compute_data_metrics(tensors)
    ref = rlmetrics.compute_data_metrics(as_f32)
    for key, value in ref.items():
        assert ours[key] == pytest.approx(value, rel=1e-9, abs=1e-9), key


def test_numpy_float16_inputs_and_masks_are_computed_in_float32(engine):
    """numpy float16 values and masks (numba has no float16) give the float32 results."""
    tensors, _ = make_batch(24, 8, 300, seed=6)
    as_f32 = {k: v.numpy() for k, v in tensors.items()}
    as_f16 = {k: (v.astype(np.float16) if v.dtype.kind == "f" else v) for k, v in as_f32.items()}
    as_f16["response_mask"] = as_f32["response_mask"].astype(np.float16)
    as_f16["attention_mask"] = as_f32["attention_mask"].astype(np.float16)
    up = {k: (v.astype(np.float32) if v.dtype == np.float16 else v) for k, v in as_f16.items()}
    ours = rlmetrics.compute_data_metrics(as_f16)
    ref = rlmetrics.compute_data_metrics(up)
    for key, value in ref.items():
        assert ours[key] == pytest.approx(value, rel=1e-9, abs=1e-9, nan_ok=True), key


def test_float64_inputs_keep_float64_precision(engine):
    rng = np.random.default_rng(0)
    tensors, _ = make_batch(20, 6, 30, seed=9)
    batch = {k: v.numpy() for k, v in tensors.items()}
    batch["returns"] = 1e6 + rng.standard_normal((20, 30)) * 1e-3  # cancellation-prone
    batch["values"] = batch["returns"] - rng.standard_normal((20, 30)) * 1e-4
    ours = rlmetrics.compute_data_metrics(batch)
    mask = batch["response_mask"].astype(bool)
    r, v = batch["returns"][mask], batch["values"][mask]
    expected = 1 - np.var(r - v, ddof=1) / (np.var(r, ddof=1) + 1e-5)
    assert ours["critic/vf_explained_var"] == pytest.approx(expected, rel=1e-7)
    assert ours["critic/returns/mean"] == pytest.approx(r.mean(), rel=1e-12)


def test_all_responses_aborted_gives_nan_and_a_warning(verl_metric_utils, data_proto, engine):
    tensors, _ = make_batch(6, 4, 5, seed=1)
    tensors["attention_mask"][:, 4:] = 0
    tensors["response_mask"][:] = 0
    ref = verl_metrics(verl_metric_utils, data_proto, tensors, {}, True)
    with pytest.warns(RuntimeWarning, match="aborted"), pytest.warns(RuntimeWarning, match="all zero"):
        ours = rlmetrics.compute_data_metrics(tensors)
    assert_close_to_reference(ours, ref)
    assert np.isnan(ours["critic/score/mean"]) and np.isnan(ours["critic/vf_explained_var"])
    assert ours["response/aborted_ratio"] == 1.0


def test_some_aborted_samples_are_left_out_of_score_stats(engine):
    tensors, _ = make_batch(4, 3, 4, seed=2, aborted=0.0)
    tensors["attention_mask"][0, 3:] = 0
    tensors["token_level_scores"][0] = 100.0  # would dominate if counted
    ours = rlmetrics.compute_data_metrics(tensors)
    assert ours["response/aborted_ratio"] == 0.25
    assert ours["critic/score/max"] < 100.0
    assert ours["response_length/min"] == 0.0 and ours["response_length_non_aborted/min"] > 0.0


def test_single_valid_token_explained_variance_is_nan_like_torch_var(engine):
    tensors, _ = make_batch(2, 2, 3, seed=0, aborted=0.0)
    tensors["response_mask"][:] = 0
    tensors["response_mask"][0, 0] = 1
    ours = rlmetrics.compute_data_metrics(tensors)
    assert np.isnan(ours["critic/vf_explained_var"])
    assert ours["critic/advantages/mean"] == pytest.approx(float(tensors["advantages"][0, 0]))


def test_configured_limits_count_clipping_below_the_padded_width():
    tensors, _ = make_batch(8, 6, 10, seed=4, aborted=0.0)
    tensors["attention_mask"][:, 6:] = 0
    tensors["attention_mask"][:4, 6:13] = 1  # four responses of length 7 = the configured limit
    tensors["attention_mask"][4:, 6:9] = 1
    default = rlmetrics.compute_data_metrics(tensors)
    configured = rlmetrics.compute_data_metrics(tensors, max_response_length=7, max_prompt_length=6)
    assert default["response_length/clip_ratio"] == 0.0  # verl: never reads a clip under dynamic padding
    assert configured["response_length/clip_ratio"] == 0.5
    assert configured["prompt_length/clip_ratio"] == default["prompt_length/clip_ratio"]


def test_nan_in_masked_out_slots_is_ignored_but_nan_in_valid_slots_propagates(engine):
    tensors, _ = make_batch(6, 3, 8, seed=6, aborted=0.0, mask="prefix")
    mask = tensors["response_mask"].bool()
    tensors["advantages"][~mask] = float("nan")
    clean = rlmetrics.compute_data_metrics(tensors)
    assert np.isfinite(clean["critic/advantages/max"]) and np.isfinite(clean["critic/advantages/mean"])
    row, col = np.argwhere(mask.numpy())[0]
    tensors["advantages"][row, col] = float("nan")
    dirty = rlmetrics.compute_data_metrics(tensors)
    assert np.isnan(dirty["critic/advantages/mean"])
    assert np.isnan(dirty["critic/advantages/max"])


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf - inf in the sums
def test_signed_zero_and_infinite_extremes(engine):
    tensors, _ = make_batch(3, 2, 4, seed=4, aborted=0.0, mask="prefix")
    tensors["response_mask"][:] = 1
    tensors["response_mask"][2, 3] = 0
    tensors["advantages"][:] = -0.0
    tensors["returns"][0, 0], tensors["returns"][1, 1] = float("inf"), float("-inf")
    tensors["returns"][2, 3] = float("nan")  # masked out
    m = rlmetrics.compute_data_metrics(tensors)
    assert m["critic/advantages/max"] == 0.0 and np.signbit(m["critic/advantages/max"])
    assert np.signbit(m["critic/advantages/min"])
    assert m["critic/returns/max"] == np.inf and m["critic/returns/min"] == -np.inf


def test_prompt_and_response_length_keys_take_precedence(verl_metric_utils, data_proto):
    tensors, _ = make_batch(5, 4, 6, seed=8)
    tensors["prompt_length"] = torch.tensor([4.0, 3, 2, 1, 4])
    tensors["response_length"] = torch.tensor([6.0, 0, 2, 1, 3])
    ref = verl_metrics(verl_metric_utils, data_proto, tensors, {}, True)
    assert_close_to_reference(rlmetrics.compute_data_metrics(tensors), ref, scale=summand_scale(tensors))


# --- bad input ---------------------------------------------------------------------------------


def _batch() -> dict[str, Any]:
    return make_batch(4, 3, 5, seed=0)[0]


@pytest.mark.parametrize(
    ("mutate", "error", "match"),
    [
        pytest.param(
            lambda b: b.pop("returns"),
            ValueError,
            r"missing the tensor 'returns'.*present: advantages",
            id="missing-key",
        ),
        pytest.param(
            lambda b: b.pop("values"), ValueError, r"'values' \(use_critic=True\)", id="missing-values"
        ),
        pytest.param(
            lambda b: b.__setitem__("advantages", b["advantages"][:, :4]),
            ValueError,
            r"advantages'\] and batch\['response_mask'\] must have the same shape; got \(4, 4\) and \(4, 5\)",
            id="shape-mismatch",
        ),
        pytest.param(
            lambda b: b["response_mask"].__setitem__((0, 0), 2),
            ValueError,
            r"response_mask'\] must hold only 0 and 1",
            id="mask-not-binary",
        ),
        pytest.param(
            lambda b: b["attention_mask"].__setitem__((0, 0), -1),
            ValueError,
            r"attention_mask'\] must hold only 0 and 1",
            id="attention-not-binary",
        ),
        pytest.param(
            lambda b: b.__setitem__("prompts", b["prompts"][:, :2]),
            ValueError,
            r"attention_mask'\] has 8 columns but prompts \(2\) \+ responses \(5\) make 7",
            id="bad-split",
        ),
        pytest.param(
            lambda b: b.__setitem__("token_level_scores", b["token_level_scores"][:3]),
            ValueError,
            r"token_level_scores'\] must have shape \(B, R\) with B = 4",
            id="rows-mismatch",
        ),
        pytest.param(
            lambda b: b.__setitem__("response_mask", b["response_mask"].to(torch.complex64)),
            TypeError,
            r"response_mask'\] must be a bool or 0/1 integer mask",
            id="mask-dtype",
        ),
    ],
)
def test_bad_input_errors_name_the_argument(engine, mutate, error, match):
    batch = _batch()
    mutate(batch)
    with pytest.raises(error, match=match):
        rlmetrics.compute_data_metrics(batch)


_NOT_AN_ARRAY = r"batch\['response_mask'\] must be a numpy array or a torch tensor of numbers; got "


@pytest.mark.parametrize(
    ("value", "match"),
    [
        pytest.param("1111", _NOT_AN_ARRAY + "str", id="string"),
        pytest.param(None, _NOT_AN_ARRAY + "NoneType", id="none"),
        pytest.param([[1, 1, 0, 0, 0]] * 4, _NOT_AN_ARRAY + r"list \[\[1, 1", id="list-of-lists"),
        pytest.param(
            np.ones((4, 5), dtype=object), _NOT_AN_ARRAY + "ndarray .* dtype object", id="object-array"
        ),
        pytest.param(np.array([["1"] * 5] * 4), _NOT_AN_ARRAY + "ndarray .* dtype <U1", id="string-array"),
    ],
)
def test_a_response_mask_that_is_not_an_array_is_refused_not_rederived(engine, value, match):
    """Before: a mask of the wrong type was skipped and the mask silently re-derived from attention_mask."""
    batch = _batch()
    batch["response_mask"] = value
    with pytest.raises(TypeError, match=match):
        rlmetrics.compute_data_metrics(batch)


def _object_array(items: list) -> np.ndarray:
    """A 1-d object array holding ``items`` (lists stay elements, as in verl's non_tensor_batch)."""
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


_TURNS = r"batch.non_tensor_batch\['__num_turns__'\] must "
_TOOLS = r"batch.non_tensor_batch\['tool_call_counts'\] must "


@pytest.mark.parametrize(
    ("key", "value", "error", "match"),
    [
        pytest.param(
            "__num_turns__",
            np.array([1, 2, 3]),
            ValueError,
            _TURNS + r"hold one entry per sample \(4\); got 3",
            id="turns-too-short",
        ),
        pytest.param(
            "__num_turns__",
            np.array([], dtype=np.int64),
            ValueError,
            _TURNS + r".*\(4\); got 0 entries",
            id="turns-empty",
        ),
        pytest.param(
            "__num_turns__",
            np.arange(8).reshape(4, 2),
            ValueError,
            _TURNS + r"be a 1-d .*shape \(4, 2\) \(nested\)",
            id="turns-2d",
        ),
        pytest.param(
            "__num_turns__",
            np.array(["a", "b", "c", "d"]),
            TypeError,
            _TURNS + "hold numbers",
            id="turns-strings",
        ),
        pytest.param(
            "tool_call_counts",
            [[1, 2], [3], [], [4]],
            TypeError,
            _TOOLS + "be a 1-d .*ragged",
            id="tools-ragged",
        ),
        pytest.param(
            "tool_call_counts",
            np.array([[1], [2], [3], [4]]),
            ValueError,
            _TOOLS + r"be a 1-d .*\(nested\)",
            id="tools-nested",
        ),
        pytest.param(
            "tool_call_counts",
            _object_array([[1], [2, 3], [], [4]]),
            TypeError,
            _TOOLS + "hold numbers",
            id="tools-object-of-lists",
        ),
    ],
)
def test_optional_per_sample_inputs_are_checked(key, value, error, match):
    batch = _batch()
    batch[key] = value
    with pytest.raises(error, match=match):
        rlmetrics.compute_data_metrics(batch)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        pytest.param(
            {"max_response_length": 0},
            ValueError,
            r"max_response_length must be an integer >= 1; got 0",
            id="resp-0",
        ),
        pytest.param(
            {"max_response_length": -5}, ValueError, r"max_response_length .*; got -5", id="resp-negative"
        ),
        pytest.param(
            {"max_response_length": float("nan")},
            TypeError,
            r"max_response_length .*; got float nan",
            id="resp-nan",
        ),
        pytest.param(
            {"max_response_length": 2.5}, TypeError, r"max_response_length .*; got float 2.5", id="resp-float"
        ),
        pytest.param(
            {"max_response_length": "4"}, TypeError, r"max_response_length .*; got str '4'", id="resp-string"
        ),
        pytest.param(
            {"max_prompt_length": 0},
            ValueError,
            r"max_prompt_length must be an integer >= 1; got 0",
            id="prompt-0",
        ),
        pytest.param(
            {"max_prompt_length": True}, TypeError, r"max_prompt_length .*; got bool True", id="prompt-bool"
        ),
        pytest.param(
            {"use_critic": "no"},
            TypeError,
            r"use_critic must be a bool; got str 'no'",
            id="use-critic-string",
        ),
    ],
)
def test_options_are_checked(options, error, match):
    with pytest.raises(error, match=match):
        rlmetrics.compute_data_metrics(_batch(), **options)


def test_integer_limits_of_numpy_types_are_accepted():
    a = rlmetrics.compute_data_metrics(
        _batch(), max_response_length=np.int64(3), max_prompt_length=np.int32(2)
    )
    b = rlmetrics.compute_data_metrics(_batch(), max_response_length=3, max_prompt_length=2)
    assert a == b


@pytest.mark.parametrize(
    "key", ["advantages", "returns", "values", "token_level_scores", "token_level_rewards"]
)
@pytest.mark.parametrize("as_numpy", [False, True], ids=["torch", "numpy"])
def test_complex_tensors_are_refused(engine, key, as_numpy):
    """Casting to float would drop the imaginary part silently (torch does not even warn)."""
    batch = to_numpy(_batch()) if as_numpy else _batch()
    batch[key] = batch[key].astype(np.complex64) if as_numpy else batch[key].to(torch.complex64)
    with pytest.raises(
        TypeError, match=rf"batch\['{key}'\] must hold real numbers .*got dtype (torch\.)?complex64"
    ):
        rlmetrics.compute_data_metrics(batch)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf - inf in the sums
@pytest.mark.parametrize(
    "cells",
    [
        pytest.param({(0, 0): np.inf}, id="plus-inf"),
        pytest.param({(1, 2): -np.inf}, id="minus-inf"),
        pytest.param({(0, 0): np.inf, (3, 4): -np.inf}, id="both"),
        pytest.param({(r, c): np.inf for r in range(4) for c in range(5)}, id="all-plus-inf"),
        pytest.param({(r, c): -np.inf for r in range(4) for c in range(5)}, id="all-minus-inf"),
    ],
)
@pytest.mark.parametrize("key", ["advantages", "returns", "values"])
def test_infinite_token_values_match_verl(verl_metric_utils, data_proto, engine, cells, key):
    """+inf/-inf among the valid tokens: max = inf / min = -inf (and NaN means), as verl gives."""
    tensors, _ = make_batch(4, 3, 5, seed=12, aborted=0.0)
    tensors["response_mask"][:] = 1
    for cell, value in cells.items():
        tensors[key][cell] = value
    ref = verl_metrics(verl_metric_utils, data_proto, tensors, {}, True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ours = rlmetrics.compute_data_metrics(tensors)
        ours_np = rlmetrics.compute_data_metrics(to_numpy(tensors))
    if any(v > 0 for v in cells.values()):
        assert ours[f"critic/{key}/max"] == np.inf
    if any(v < 0 for v in cells.values()):
        assert ours[f"critic/{key}/min"] == -np.inf
    assert_matches_verl(ours, ref, scale=summand_scale(tensors))
    assert_matches_verl(ours_np, ref, scale=summand_scale(tensors))


def test_zero_width_responses_give_nan_metrics_with_warnings(engine):
    """(B, 0) token tensors: every response aborted, no token; NaN with warnings, never a crash.

    (verl's ``attention_mask[:, :-0]`` is empty there, so its prompt lengths are 0: no reference.)
    """
    tensors, _ = make_batch(3, 4, 5, seed=1)
    batch = {k: (v[:, :0] if v.shape[-1] == 5 else v) for k, v in tensors.items()}
    batch["attention_mask"] = tensors["attention_mask"][:, :4]
    with pytest.warns(RuntimeWarning, match="aborted"), pytest.warns(RuntimeWarning, match="all zero"):
        m = rlmetrics.compute_data_metrics(batch)
    assert np.isnan(m["critic/advantages/max"]) and np.isnan(m["critic/score/mean"])
    assert m["response/aborted_ratio"] == 1.0 and m["response_length/max"] == 0.0
    assert m["prompt_length/mean"] == pytest.approx(
        float(tensors["attention_mask"][:, :4].sum(-1).float().mean())
    )


def test_optional_keys_on_part_of_the_merged_batches_are_refused():
    """Merging statistics with and without __num_turns__ would report turns of part of the samples."""
    tensors, extra = make_batch(6, 3, 5, seed=2, non_tensors=True)
    with_turns = data_statistics(_rows(tensors, {"__num_turns__": extra["__num_turns__"]}, slice(0, 3)))
    without = data_statistics(_rows(tensors, {}, slice(3, 6)))
    with pytest.raises(
        ValueError, match=r"'__num_turns__'\] is given for 3 of 6 samples: some merged batches"
    ):
        with_turns.merge(without).finalize()
    empty = data_statistics(_rows(tensors, {}, slice(0, 0)))  # an empty part has no say
    assert "num_turns/mean" in with_turns.merge(empty).finalize()


def test_empty_batch_is_rejected():
    tensors, _ = make_batch(4, 3, 5)
    empty = {k: v[:0] for k, v in tensors.items()}
    with pytest.raises(ValueError, match="batch is empty"):
        rlmetrics.compute_data_metrics(empty)


def test_unsupported_batch_type_is_rejected():
    with pytest.raises(TypeError, match=r"batch must be a verl DataProto.*got list"):
        rlmetrics.compute_data_metrics([1, 2, 3])


# --- sufficient statistics: merging, empty batches, options ------------------------------------


def _rows(tensors: dict, extra: dict, rows: slice) -> dict:
    return {**{k: v[rows] for k, v in tensors.items()}, **{k: v[rows] for k, v in extra.items()}}


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    batch_size=st.integers(1, 14),
    cuts=st.lists(st.integers(0, 14), max_size=3),
    engine_name=st.sampled_from(ENGINES),
    offset=st.sampled_from([0.0, 5.0, -300.0]),
)
def test_property_merged_micro_batches_equal_one_batch(seed, batch_size, cuts, engine_name, offset):
    """Stats of micro-batches (empty ones included) merge into the stats of the whole batch."""
    tensors, extra = make_batch(batch_size, 3, 9, seed=seed, mask="holes", non_tensors=True, offset=offset)
    bounds = sorted({0, batch_size, *(min(c, batch_size) for c in cuts)})
    with use_engine(engine_name), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        whole = data_statistics({**tensors, **extra}).finalize()
        parts = [data_statistics(_rows(tensors, extra, slice(a, b))) for a, b in itertools.pairwise(bounds)]
        merged = Stats.merge(*parts).finalize()
    assert merged.keys() == whole.keys()
    for key, value in whole.items():
        # the between-part term of the second moments costs ~1e-16 * mean**2 / var (Chan)
        tol = 1e-9 if key != "critic/vf_explained_var" else 1e-8
        assert merged[key] == pytest.approx(value, rel=tol, abs=1e-12, nan_ok=True), key


def test_stats_stay_on_the_inputs_namespace_and_merge_there(engine):
    tensors, _ = make_batch(6, 3, 5, seed=2)
    a = data_statistics({k: v[:2] for k, v in tensors.items()})
    b = data_statistics({k: v[2:] for k, v in tensors.items()})
    want = torch.Tensor if engine == "torch" else np.ndarray
    assert isinstance(a.sums, want) and isinstance((a + b).sums, want)
    assert a.kind == "data" and a.sum_names == b.sum_names
    host = a.to_host()
    assert isinstance(host.sums, np.ndarray)
    assert (a + b).finalize() == pytest.approx(host.merge(b.to_host()).finalize(), rel=1e-12)


def test_empty_batch_gives_empty_statistics_and_finalizing_them_alone_raises(engine):
    tensors, extra = make_batch(5, 3, 4, seed=3, non_tensors=True)
    empty = data_statistics({k: v[:0] for k, v in tensors.items()})
    sums, maxes, mins = empty.host_values()
    assert set(sums.values()) == {0.0}
    assert set(maxes.values()) == {-np.inf} and set(mins.values()) == {np.inf}
    whole = data_statistics({**tensors, **extra})
    assert (empty + whole).finalize() == pytest.approx(whole.finalize(), nan_ok=True)
    with pytest.raises(ValueError, match="batch is empty: advantages has 0 rows"):
        empty.finalize()


def test_merge_refuses_statistics_of_other_options_or_kinds():
    tensors, _ = make_batch(4, 3, 5, seed=0)
    with_critic = data_statistics(tensors)
    with pytest.raises(ValueError, match=r"computed with different options: \['use_critic'\]"):
        with_critic.merge(data_statistics(tensors, use_critic=False))
    with pytest.raises(ValueError, match=r"different options: \['max_response_length'\]"):
        with_critic.merge(data_statistics(tensors, max_response_length=3))
    ppo = rlmetrics.ppo_update_statistics(
        np.zeros((1, 2)), np.zeros((1, 2)), np.ones((1, 2)), np.ones((1, 2), dtype=bool)
    )
    with pytest.raises(ValueError, match="cannot merge 'ppo' statistics with 'data' statistics"):
        with_critic.merge(ppo)


def test_small_inputs_do_not_load_the_fused_kernel(monkeypatch):
    """Below FUSED_MIN_ELEMENTS the array-API path runs: numba is not even asked for."""

    def refuse() -> None:
        raise AssertionError("the fused kernel was requested for a small batch")

    monkeypatch.setattr(_data, "token_rows_kernel", refuse)
    monkeypatch.setattr(_lengths, "attention_lengths_kernel", refuse)
    tensors, _ = make_batch(16, 8, 32, seed=1)
    assert tensors["response_mask"].numel() < _data.FUSED_MIN_ELEMENTS
    rlmetrics.compute_data_metrics(to_numpy(tensors))
    rlmetrics.compute_data_metrics(tensors)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    batch_size=st.integers(1, 12),
    width=st.integers(1, 9),
    mask=st.sampled_from(["prefix", "holes", "random"]),
)
def test_property_row_order_does_not_matter_and_the_engines_agree(seed, batch_size, width, mask):
    tensors, _ = make_batch(batch_size, 3, width, seed=seed, mask=mask)
    perm = torch.from_numpy(np.random.default_rng(seed).permutation(batch_size))
    shuffled = {k: v[perm] for k, v in tensors.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        results = {}
        for name in ENGINES:
            with use_engine(name):
                results[name] = rlmetrics.compute_data_metrics(tensors)
        shuffled_result = rlmetrics.compute_data_metrics(shuffled)
    a = results["numpy"]
    for key in a:
        np.testing.assert_allclose(shuffled_result[key], a[key], rtol=1e-9, atol=1e-12, err_msg=key)
        for name in ("numba", "torch"):
            np.testing.assert_allclose(
                results[name][key], a[key], rtol=1e-9, atol=1e-12, err_msg=f"{name}: {key}"
            )


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    batch_size=st.integers(2, 10),
    width=st.integers(2, 8),
    engine_name=st.sampled_from(ENGINES),
)
def test_property_engines_agree_with_a_float64_reference(seed, batch_size, width, engine_name):
    tensors, _ = make_batch(batch_size, 2, width, seed=seed, mask="random", offset=10.0)
    with use_engine(engine_name), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ours = rlmetrics.compute_data_metrics(tensors)
    mask = tensors["response_mask"].bool()
    r = tensors["returns"].double()[mask].numpy()
    v = tensors["values"].double()[mask].numpy()
    a = tensors["advantages"].double()[mask].numpy()
    if a.size == 0:
        assert np.isnan(ours["critic/advantages/mean"])
        return
    assert ours["critic/advantages/mean"] == pytest.approx(a.mean(), rel=1e-12, abs=1e-12)
    assert ours["critic/advantages/max"] == a.max() and ours["critic/advantages/min"] == a.min()
    if a.size > 1:
        expected = 1 - np.var(r - v, ddof=1) / (np.var(r, ddof=1) + 1e-5)
        assert ours["critic/vf_explained_var"] == pytest.approx(expected, rel=1e-9, abs=1e-9)


# --- CUDA (run where a GPU is present) ----------------------------------------------------------

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_cuda_matches_cpu_with_one_host_sync(dtype):
    tensors, extra = make_batch(64, 32, 128, seed=21, mask="holes", dtype=dtype, non_tensors=True)
    on_gpu = {k: v.cuda() for k, v in tensors.items()}
    expected = rlmetrics.compute_data_metrics({**tensors, **extra})
    rlmetrics.compute_data_metrics({**on_gpu, **extra})  # warm-up
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = rlmetrics.compute_data_metrics({**on_gpu, **extra})
    finally:
        torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in caught if "synchroniz" in str(w.message).lower()]
    assert len(syncs) <= 1, [str(w.message) for w in syncs]
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-6, abs=1e-6), key


@cuda
def test_cuda_parity_with_verl(verl_metric_utils, data_proto):
    tensors, _ = make_batch(128, 64, 256, seed=22, offset=1.0)
    on_gpu = {k: v.cuda() for k, v in tensors.items()}
    ref = verl_metrics(verl_metric_utils, data_proto, on_gpu, {}, True)
    assert_close_to_reference(rlmetrics.compute_data_metrics(on_gpu), ref, scale=summand_scale(tensors))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("offset", [2.0, 1e6, -1e6], ids=["above-2", "large", "large-negative"])
def test_extremes_of_offset_values_are_exact(engine, dtype, offset):
    """Exact extremes of values far from 0 (float keys of every magnitude and sign)."""
    tensors, _ = make_batch(9, 3, 300, seed=31, mask="holes", aborted=0.0)
    batch = to_numpy(tensors)
    rng = np.random.default_rng(0)
    for key in ("advantages", "returns", "values"):
        batch[key] = (offset + rng.uniform(0.5, 3.0, size=batch[key].shape)).astype(dtype)
    ours = rlmetrics.compute_data_metrics(batch)
    mask = batch["response_mask"].astype(bool)
    for name, key in (("advantages", "advantages"), ("returns", "returns"), ("values", "values")):
        assert ours[f"critic/{name}/max"] == float(batch[key][mask].max())
        assert ours[f"critic/{name}/min"] == float(batch[key][mask].min())


# Tensor methods that force a device-to-host copy (a host sync on CUDA).
_HOST_READS = ("item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("use_critic", [True, False], ids=["critic", "no-critic"])
def test_array_api_path_reads_the_host_once(monkeypatch, dtype, use_critic):
    """The path CUDA tensors take, run on CPU tensors: one host read per call, no hidden ones.

    Every tensor method that would copy to the host (and synchronise a GPU) is counted; the
    packed statistics come back in one ``.cpu()`` + ``.numpy()``, masks are checked from the
    packed counts (no ``bool(mask.any())``) and nothing calls ``.item()``.
    """
    monkeypatch.setattr(_array, "_CPU_TENSORS_AS_NUMPY", False)
    tensors, extra = make_batch(48, 16, 64, seed=23, mask="holes", dtype=dtype, non_tensors=True)
    expected = rlmetrics.compute_data_metrics({**tensors, **extra}, use_critic=use_critic)
    calls: list[str] = []
    for name in _HOST_READS:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _name=name, _original=original, **kwargs):
            calls.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    got = rlmetrics.compute_data_metrics({**tensors, **extra}, use_critic=use_critic)
    monkeypatch.undo()
    assert sorted(calls) == ["cpu", "numpy"], calls
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-6, abs=1e-6, nan_ok=True), key


# --- property: any batch gives verl's numbers or a named error, never a crash -------------------

_SPECIALS = [math.inf, -math.inf, math.nan]
_TOKEN_KEYS = ["advantages", "returns", "values", "token_level_scores", "token_level_rewards"]


@st.composite
def data_batches(draw: st.DrawFn) -> dict[str, Any]:
    """A random batch (shapes from 0 rows, dtypes, mask dtypes, NaN/inf, aborted rows, bad masks).

    Values are multiples of 1/4 in [-8, 8]: exact in every float dtype and in float32 sums, so
    verl's float32 arithmetic and ours agree to rounding of the variances only.
    """
    b, r, p = draw(st.integers(0, 6)), draw(st.integers(1, 7)), draw(st.integers(1, 4))
    dtype = draw(st.sampled_from(["float32", "float64", "float16", "bfloat16"]))
    container = "torch" if dtype == "bfloat16" else draw(st.sampled_from(["numpy", "torch"]))
    mask_dtype = draw(st.sampled_from(["bool", "int64", "int32", "float32"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    resp_att = rng.random((b, r)) < 0.7
    resp_att[rng.random(b) < 0.2] = False  # aborted rows
    prompt_att = rng.random((b, p)) < 0.8
    response_mask = resp_att & (rng.random((b, r)) < 0.85)
    values = {k: rng.integers(-32, 33, size=(b, r)) / 4.0 for k in _TOKEN_KEYS}
    for key, row, col, special in draw(
        st.lists(
            st.tuples(
                st.sampled_from(_TOKEN_KEYS),
                st.integers(0, 99),
                st.integers(0, 99),
                st.sampled_from(_SPECIALS),
            ),
            max_size=3,
        )
    ):
        if b:
            values[key][row % b, col % r] = special
    invalid = bool(b) and mask_dtype != "bool" and draw(st.integers(0, 9)) == 0
    return {
        "values": values,
        "response_mask": response_mask,
        "attention_mask": np.concatenate([prompt_att, resp_att], axis=1),
        "invalid_mask": invalid,
        "dtype": dtype,
        "container": container,
        "mask_dtype": mask_dtype,
        "turns": rng.integers(1, 5, size=b) if draw(st.booleans()) else None,
        "shape": (b, p, r),
    }


def _build(spec: dict[str, Any], *, reference: bool) -> dict[str, Any]:
    """The batch as rlmetrics sees it, or (``reference``) as torch tensors for verl (float32/64)."""
    b, p, r = spec["shape"]
    as_torch = reference or spec["container"] == "torch"
    dtype = spec["dtype"]
    if reference:
        dtype = "float64" if dtype == "float64" else "float32"
    mask = spec["response_mask"].astype(spec["mask_dtype"])
    if spec["invalid_mask"]:
        mask[0, 0] = 2
    out: dict[str, Any] = {}
    for key, v in spec["values"].items():
        out[key] = torch.tensor(v).to(getattr(torch, dtype)) if as_torch else v.astype(dtype)
    for key, v in (("response_mask", mask), ("attention_mask", spec["attention_mask"].astype(np.int64))):
        out[key] = torch.from_numpy(np.ascontiguousarray(v)) if as_torch else v
    zeros_p, zeros_r = np.zeros((b, p), dtype=np.int64), np.zeros((b, r), dtype=np.int64)
    out["prompts"] = torch.from_numpy(zeros_p) if as_torch else zeros_p
    out["responses"] = torch.from_numpy(zeros_r) if as_torch else zeros_r
    return out


@settings(max_examples=120, deadline=None)
@given(spec=data_batches(), use_critic=st.booleans(), engine_name=st.sampled_from(ENGINES))
def test_property_any_batch_gives_verls_numbers_or_a_named_error(
    verl_metric_utils, data_proto, spec, use_critic, engine_name
):
    ours_batch = _build(spec, reference=False)
    extra = {} if spec["turns"] is None else {"__num_turns__": spec["turns"]}
    b = spec["shape"][0]
    with use_engine(engine_name), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if spec["invalid_mask"]:
            with pytest.raises(ValueError, match=r"batch\['response_mask'\] must hold only 0 and 1"):
                rlmetrics.compute_data_metrics({**ours_batch, **extra}, use_critic=use_critic)
            return
        if b == 0:
            with pytest.raises(ValueError, match="batch is empty: advantages has 0 rows"):
                rlmetrics.compute_data_metrics({**ours_batch, **extra}, use_critic=use_critic)
            return
        ours = rlmetrics.compute_data_metrics({**ours_batch, **extra}, use_critic=use_critic)
    ref_tensors = _build(spec, reference=True)
    ref = verl_metrics(verl_metric_utils, data_proto, ref_tensors, extra, use_critic)
    assert_matches_verl(ours, ref, scale=summand_scale(ref_tensors))


# --- group_by= and the outcome split ------------------------------------------------------------

from rlmetrics import keys as K  # noqa: E402
from rlmetrics._core.categories import is_category_field, parse_field  # noqa: E402
from rlmetrics.errors import RLMetricsWarning  # noqa: E402

SOURCES = np.array(["openai/gsm8k", "math", "openai/gsm8k", "code contests", "math", "é"], dtype=object)


def _grouped_batch(n: int, seed: int, labels: np.ndarray, **kw: Any) -> dict[str, Any]:
    tensors, extra = make_batch(n, 3, 9, seed=seed, mask="holes", non_tensors=True, **kw)
    return {**tensors, **extra, "data_source": labels}


def _subset(batch: dict[str, Any], rows: np.ndarray) -> dict[str, Any]:
    return {k: v[rows] for k, v in batch.items() if k != "data_source"}


def assert_category_equals_subset(got: dict, batch: dict, labels: np.ndarray, group: str, **kw: Any) -> None:
    """Each category's keys equal the plain metrics of its samples alone (brute force)."""
    seen = 0
    for cat in sorted(set(labels.tolist())):
        rows = np.flatnonzero(labels == cat)
        want = rlmetrics.compute_data_metrics(_subset(batch, rows), **kw)
        for key, value in want.items():
            mine = got[K.category_key(key, group, cat)]
            tol = 1e-8 if key == K.VF_EXPLAINED_VAR else 1e-9
            assert mine == pytest.approx(value, rel=tol, abs=1e-12, nan_ok=True), (cat, key)
            seen += 1
    assert len([k for k in got if K.split_category_key(k)]) == seen  # nothing more


@pytest.mark.parametrize("use_critic", [True, False], ids=["critic", "no-critic"])
@pytest.mark.parametrize("given_as", ["column", "array"])
def test_group_by_each_category_equals_its_samples_alone(engine, use_critic, given_as):
    labels = np.resize(SOURCES, 30)
    batch = _grouped_batch(30, 3, labels)
    plain = rlmetrics.compute_data_metrics(_subset(batch, np.arange(30)), use_critic=use_critic)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if given_as == "column":
            got = rlmetrics.compute_data_metrics(batch, use_critic, group_by="data_source")
        else:
            got = rlmetrics.compute_data_metrics(
                _subset(batch, np.arange(30)), use_critic, group_by=labels, group_name="data_source"
            )
        assert_category_equals_subset(got, batch, labels, "data_source", use_critic=use_critic)
    # the plain keys are bit-identical to the ungrouped call
    assert {k: got[k] for k in plain} == pytest.approx(plain, rel=0, abs=0, nan_ok=True)


def test_group_by_on_a_verl_dataproto_reads_the_non_tensor_batch(verl_metric_utils, data_proto):
    batch = _grouped_batch(12, 4, np.resize(SOURCES, 12))
    tensors = {k: v for k, v in batch.items() if isinstance(v, torch.Tensor)}
    non_tensors = {k: np.asarray(v) for k, v in batch.items() if k not in tensors}
    proto = data_proto.from_dict(tensors=tensors, non_tensors=non_tensors)
    got = rlmetrics.compute_data_metrics(proto, group_by="data_source")
    ref = verl_metrics(
        verl_metric_utils,
        data_proto,
        tensors,
        {k: non_tensors[k] for k in ("__num_turns__", "tool_call_counts")},
        True,
    )
    assert_matches_verl({k: got[k] for k in ref}, ref)
    assert_category_equals_subset(got, batch, np.resize(SOURCES, 12), "data_source")


@pytest.mark.parametrize(
    ("kw", "outcome"),
    [
        pytest.param({"split_by_outcome": True}, "acc", id="acc"),
        pytest.param({"score_threshold": 0.5}, "score", id="score-threshold"),
    ],
)
def test_outcome_split_equals_the_correct_and_incorrect_samples_alone(engine, kw, outcome):
    batch = _grouped_batch(24, 5, np.resize(SOURCES, 24), sparse_scores=True)
    score = batch["token_level_scores"].numpy().sum(axis=-1)
    batch["acc"] = score > 0.5 if outcome == "acc" else np.zeros(24)
    correct = score >= 0.5
    labels = np.where(correct, K.OUTCOME_CORRECT, K.OUTCOME_INCORRECT)
    assert 0 < correct.sum() < 24
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = rlmetrics.compute_data_metrics({k: v for k, v in batch.items() if k != "data_source"}, **kw)
        assert_category_equals_subset(
            got, {k: v for k, v in batch.items() if k != "acc"}, labels, K.OUTCOME_GROUP
        )


def test_group_by_and_outcome_split_together():
    labels = np.resize(SOURCES, 18)
    batch = _grouped_batch(18, 6, labels, sparse_scores=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = rlmetrics.compute_data_metrics(batch, group_by="data_source", score_threshold=1.0)
        assert_category_equals_subset(
            {k: v for k, v in got.items() if (K.split_category_key(k) or ("", "", ""))[1] != K.OUTCOME_GROUP},
            batch,
            labels,
            "data_source",
        )
    groups = {K.split_category_key(k)[1:] for k in got if K.split_category_key(k)}
    assert {g for g, _ in groups} == {"data_source", K.OUTCOME_GROUP}


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    cuts=st.lists(st.integers(0, 16), max_size=3),
    n_labels=st.integers(1, 5),
    engine_name=st.sampled_from(ENGINES),
    sorted_labels=st.booleans(),
)
def test_property_merged_parts_with_different_categories_equal_the_whole(
    seed, cuts, n_labels, engine_name, sorted_labels
):
    """Parts with disjoint (sorted labels) or overlapping categories merge into the whole."""
    rng = np.random.default_rng(seed)
    labels = np.asarray([f"s{i}" for i in rng.integers(0, n_labels, size=16)], dtype=object)
    if sorted_labels:
        labels = np.sort(labels)
    batch = _grouped_batch(16, seed, labels, offset=3.0)
    bounds = sorted({0, 16, *cuts})
    with use_engine(engine_name), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        whole = data_statistics(batch, group_by="data_source").finalize()
        parts = [
            data_statistics({k: v[a:b] for k, v in batch.items()}, group_by="data_source")
            for a, b in itertools.pairwise(bounds)
        ]
        merged = Stats.merge(*parts[::-1]).finalize()
    assert merged.keys() == whole.keys()
    for key, value in whole.items():
        tol = 1e-8 if key.endswith(K.VF_EXPLAINED_VAR) else 1e-9
        assert merged[key] == pytest.approx(value, rel=tol, abs=1e-12, nan_ok=True), key


def test_category_limit_folds_the_least_frequent_into_other_with_one_warning():
    labels = np.asarray(["a"] * 6 + ["b"] * 5 + ["c"] * 4 + ["d"] * 3 + ["e"] * 2, dtype=object)
    batch = _grouped_batch(20, 7, labels)
    with pytest.warns(RLMetricsWarning, match=r"more than max_categories=3 categories") as caught:
        got = rlmetrics.compute_data_metrics(batch, group_by="data_source", max_categories=3)
    assert len([w for w in caught if issubclass(w.category, RLMetricsWarning)]) == 1
    folded = np.where(np.isin(labels, ["a", "b"]), labels, K.OTHER_CATEGORY)
    assert_category_equals_subset(got, batch, folded, "data_source")
    assert (
        K.category_key(K.SCORE_MEAN, "data_source", K.OTHER_CATEGORY)
        == "by_data_source/%other/critic/score/mean"
    )


def test_category_limit_applies_again_to_the_union_of_merged_parts():
    labels = np.asarray(["a", "a", "a", "b", "b", "c", "d", "d", "e", "e"], dtype=object)
    batch = _grouped_batch(10, 8, labels)
    parts = [
        data_statistics({k: v[s] for k, v in batch.items()}, group_by="data_source", max_categories=3)
        for s in (slice(0, 5), slice(5, 10))
    ]  # each part has at most 3 categories
    assert (
        len({n for n in (parts[0] + parts[1]).sum_names if n.startswith("\x1e")})
        > 3 * len(_data.SUM_FIELDS) - 8
    )
    with pytest.warns(RLMetricsWarning, match="max_categories=3"):
        got = Stats.merge(*parts).finalize()
    folded = np.where(np.isin(labels, ["a", "b"]), labels, K.OTHER_CATEGORY)
    assert_category_equals_subset(got, batch, folded, "data_source")


def test_category_limit_folds_the_union_when_each_part_is_over_the_limit():
    """The auditor's case: A = 5 a, 2 b, 1 c and B = 6 b with a limit of 2. The union keeps b (8
    samples) and folds a and c; folding each part first would keep a in A and leave 2 of b's
    samples under ``<other>``."""
    labels = np.asarray(["a"] * 5 + ["b"] * 2 + ["c"] + ["b"] * 6, dtype=object)
    batch = _grouped_batch(14, 12, labels)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RLMetricsWarning)  # the statistics fold nothing, warn nothing
        parts = [
            data_statistics({k: v[s] for k, v in batch.items()}, group_by="data_source", max_categories=2)
            for s in (slice(0, 8), slice(8, 14))
        ]
    assert _categories_of(parts[0]) == {"a", "b", "c"}  # every category, exactly
    with pytest.warns(RLMetricsWarning, match="more than max_categories=2") as caught:
        merged = Stats.merge(*parts).finalize()
        flipped = Stats.merge(*parts[::-1]).finalize()
        whole = data_statistics(batch, group_by="data_source", max_categories=2).finalize()
    assert len([w for w in caught if issubclass(w.category, RLMetricsWarning)]) == 3  # one per finalize
    folded = np.where(labels == "b", labels, K.OTHER_CATEGORY)
    assert_category_equals_subset(merged, batch, folded, "data_source")
    for got in (flipped, whole):
        assert got.keys() == merged.keys()
        for key, value in merged.items():
            assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12, nan_ok=True), key


def _categories_of(stats: Stats) -> set[str]:
    """The categories whose entries ``stats`` holds."""
    return {parse_field(n)[1] for n in stats.sum_names if is_category_field(n)}


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_rows=st.integers(1, 20),
    n_labels=st.integers(1, 7),
    n_parts=st.integers(1, 4),
    limit=st.integers(1, 4),
    engine_name=st.sampled_from(ENGINES),
)
def test_property_merged_parts_over_the_category_limit_finalize_to_the_whole(
    seed, n_rows, n_labels, n_parts, limit, engine_name
):
    """Random labels, random parts (each may hold more categories than the limit), merged in a
    random order, finalise to the whole batch's metrics: same keys, same values."""
    rng = np.random.default_rng(seed)
    labels = np.asarray([f"s{i}" for i in rng.integers(0, n_labels, size=n_rows)], dtype=object)
    batch = _grouped_batch(n_rows, seed, labels, offset=3.0)
    rows = rng.permutation(n_rows)
    cuts = sorted(rng.integers(0, n_rows + 1, size=n_parts - 1).tolist())
    with use_engine(engine_name), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", RLMetricsWarning)
        kw: dict[str, Any] = {"group_by": "data_source", "max_categories": limit}
        whole = data_statistics(batch, **kw).finalize()
        parts = [data_statistics({k: v[ix] for k, v in batch.items()}, **kw) for ix in np.split(rows, cuts)]
        merged = Stats.merge(*[parts[i] for i in rng.permutation(len(parts))]).finalize()
    assert merged.keys() == whole.keys()
    kept = {K.split_category_key(k)[2] for k in whole if K.split_category_key(k)}
    assert len(kept) <= limit
    for key, value in whole.items():
        tol = 1e-8 if key.endswith(K.VF_EXPLAINED_VAR) else 1e-9
        assert merged[key] == pytest.approx(value, rel=tol, abs=1e-12, nan_ok=True), key


def test_category_cap_folds_in_the_statistics_with_a_warning_that_merging_is_approximate(monkeypatch):
    from rlmetrics.training import categories as _categories

    monkeypatch.setattr(_categories, "EXACT_CATEGORIES", 3)
    labels = np.asarray(["a"] * 4 + ["b"] * 3 + ["c"] * 2 + ["d", "e"], dtype=object)
    batch = _grouped_batch(11, 13, labels)
    match = r"has 5 categories in one call, more than the 3 whose statistics are kept exactly"
    with pytest.warns(RLMetricsWarning, match=r"group_by 'data_source' " + match):
        stats = data_statistics(batch, group_by="data_source", max_categories=2)
    assert _categories_of(stats) == {"a", "b", K.OTHER_CATEGORY}
    with pytest.warns(RLMetricsWarning, match="more than max_categories=2"):
        got = stats.finalize()
    folded = np.where(labels == "a", labels, K.OTHER_CATEGORY)
    assert_category_equals_subset(got, batch, folded, "data_source")
    with warnings.catch_warnings():  # a larger max_categories raises the cap: nothing folded
        warnings.simplefilter("error", RLMetricsWarning)
        wide = data_statistics(batch, group_by="data_source", max_categories=5)
    assert _categories_of(wide) == set(labels.tolist())


def test_numeric_and_boolean_labels_are_categories_by_their_text():
    batch = _grouped_batch(8, 9, np.resize(SOURCES, 8))
    got = rlmetrics.compute_data_metrics(
        _subset(batch, np.arange(8)), group_by=np.array([1, 2, 1, 2, 1, 2, 3, 3])
    )
    assert {K.split_category_key(k)[2] for k in got if K.split_category_key(k)} == {"1", "2", "3"}
    torch_labels = torch.tensor([True, False] * 4)
    got = rlmetrics.compute_data_metrics(
        _subset(batch, np.arange(8)), group_by=torch_labels, group_name="flag"
    )
    assert {K.split_category_key(k)[1:] for k in got if K.split_category_key(k)} == {
        ("flag", "True"),
        ("flag", "False"),
    }


def test_a_single_category_equals_the_plain_metrics():
    batch = _grouped_batch(9, 10, np.asarray(["x"] * 9, dtype=object))
    got = rlmetrics.compute_data_metrics(batch, group_by="data_source")
    plain = rlmetrics.compute_data_metrics(_subset(batch, np.arange(9)))
    for key, value in plain.items():
        assert got[K.category_key(key, "data_source", "x")] == pytest.approx(value, rel=1e-12, nan_ok=True)


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        pytest.param(
            {"group_by": "missing"}, KeyError, r"group_by: the batch has no column 'missing'", id="no-column"
        ),
        pytest.param(
            {"group_by": 3},
            TypeError,
            r"group_by must be a column name or an array of labels; got int",
            id="type",
        ),
        pytest.param(
            {"group_by": np.zeros(3)},
            ValueError,
            r"group_by must hold one label per sample \(6\); got 3",
            id="length",
        ),
        pytest.param(
            {"group_by": np.zeros((6, 2))},
            ValueError,
            r"group_by must be 1-d, one label per sample",
            id="2-d",
        ),
        pytest.param(
            {"group_by": np.array([0.0, math.nan, 1, 1, 1, 1])},
            ValueError,
            "group_by holds NaN labels",
            id="nan",
        ),
        pytest.param(
            {"group_by": "data_source", "group_name": "a/b"},
            ValueError,
            r"group name must be a non-empty name",
            id="group-name",
        ),
        pytest.param(
            {"group_by": "data_source", "group_name": 5},
            TypeError,
            r"group name must be a string; got int",
            id="group-name-type",
        ),
        pytest.param(
            {"group_by": "data_source", "max_categories": 0},
            ValueError,
            r"max_categories",
            id="max-categories",
        ),
        pytest.param(
            {"split_by_outcome": True},
            KeyError,
            r"split_by_outcome=True reads 'acc' \(or pass score_threshold=\)",
            id="no-acc",
        ),
        pytest.param(
            {"split_by_outcome": "yes"},
            TypeError,
            r"split_by_outcome must be a bool; got str",
            id="split-type",
        ),
        pytest.param(
            {"score_threshold": "0.5"},
            TypeError,
            r"score_threshold must be a real number",
            id="threshold-type",
        ),
        pytest.param(
            {"group_by": "data_source", "group_name": "outcome", "split_by_outcome": True},
            ValueError,
            r"group_name must differ from 'outcome'",
            id="outcome-name",
        ),
    ],
)
def test_grouping_errors_name_the_argument(kw, error, match):
    batch = _grouped_batch(6, 11, SOURCES)
    if kw.get("split_by_outcome") is True and "group_name" in kw:
        batch["acc"] = np.ones(6)
    with pytest.raises(error, match=match):
        rlmetrics.compute_data_metrics(batch, **kw)


def test_grouped_statistics_refuse_to_merge_with_other_grouping_options():
    batch = _grouped_batch(6, 12, SOURCES)
    a = data_statistics(batch, group_by="data_source")
    with pytest.raises(ValueError, match=r"different options: \['max_categories'\]"):
        a.merge(data_statistics(batch, group_by="data_source", max_categories=5))
    with pytest.raises(ValueError, match="cannot merge 'data' statistics"):
        a.merge(data_statistics(batch, group_by="data_source", use_critic=False))

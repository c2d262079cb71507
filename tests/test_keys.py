"""rlmetrics.keys: key constants are unique, slash-grouped like verl's, and match verl's own keys."""

from __future__ import annotations

import re
import warnings
from typing import Any

import pytest

from rlmetrics import keys

#: Every upper-case string constant of the module.
STRING_CONSTANTS = {
    name: value for name, value in vars(keys).items() if name.isupper() and isinstance(value, str)
}
PREFIXES = {name: value for name, value in STRING_CONSTANTS.items() if name.endswith("_PREFIX")}
SUFFIXES = {name: value for name, value in STRING_CONSTANTS.items() if name.endswith("_SUFFIX")}
RESERVED = {name: value for name, value in STRING_CONSTANTS.items() if name.startswith("TRACKING_")}
FULL_KEYS = {
    name: value
    for name, value in STRING_CONSTANTS.items()
    if name not in PREFIXES and name not in SUFFIXES and name not in RESERVED
}

#: The keys verl's compute_data_metrics returns (with a critic, num_turns and tool calls).
DATA_KEY_NAMES = [
    *(
        f"{group}_{stat}"
        for group in ("SCORE", "REWARDS", "ADV", "RETURNS", "VALUES")
        for stat in ("MEAN", "MAX", "MIN")
    ),
    "VF_EXPLAINED_VAR",
    *(f"RESPONSE_LENGTH_{s}" for s in ("MEAN", "MAX", "MIN", "CLIP_RATIO")),
    *(f"RESPONSE_LENGTH_NON_ABORTED_{s}" for s in ("MEAN", "MAX", "MIN", "CLIP_RATIO")),
    "RESPONSE_ABORTED_RATIO",
    *(f"PROMPT_LENGTH_{s}" for s in ("MEAN", "MAX", "MIN", "CLIP_RATIO")),
    *(f"NUM_TURNS_{s}" for s in ("MEAN", "MAX", "MIN")),
    *(f"TOOL_CALL_COUNTS_{s}" for s in ("MEAN", "MAX", "MIN")),
]
DATA_KEYS = {getattr(keys, name) for name in DATA_KEY_NAMES}

SEGMENT = r"[a-z0-9_\-@]+"
KEY_RE = re.compile(rf"^{SEGMENT}(/{SEGMENT})+$")


def test_constants_were_collected():
    assert len(FULL_KEYS) >= 50
    assert {"TIMING_S_PREFIX", "VAL_CORE_PREFIX", "GRPO_PREFIX"} <= set(PREFIXES)
    assert set(SUFFIXES) == {"CI_LOW_SUFFIX", "CI_HIGH_SUFFIX"}
    assert len(DATA_KEYS) == len(DATA_KEY_NAMES) == 35


@pytest.mark.parametrize(("name", "value"), sorted(FULL_KEYS.items()), ids=sorted(FULL_KEYS))
def test_full_keys_are_slash_grouped(name, value):
    assert KEY_RE.match(value), f"{name} = {value!r} is not a lower-case 'group/name' key"


@pytest.mark.parametrize(("name", "value"), sorted(PREFIXES.items()), ids=sorted(PREFIXES))
def test_prefixes_are_one_group(name, value):
    # A prefix is one group: either 'group/' (joined by concatenation) or a bare section name.
    assert re.fullmatch(rf"{SEGMENT}/?", value), f"{name} = {value!r}"


@pytest.mark.parametrize(("name", "value"), sorted(SUFFIXES.items()), ids=sorted(SUFFIXES))
def test_suffixes_start_a_new_group(name, value):
    assert re.fullmatch(rf"/{SEGMENT}", value), f"{name} = {value!r}"


@pytest.mark.parametrize(("name", "value"), sorted(RESERVED.items()), ids=sorted(RESERVED))
def test_reserved_tracking_fields_are_plain_names(name, value):
    assert re.fullmatch(r"[a-z_]+", value)
    assert not any(key.startswith(value + "/") or key == value for key in FULL_KEYS.values())


def test_no_duplicate_values():
    values = list(STRING_CONSTANTS.values())
    duplicates = sorted({v for v in values if values.count(v) > 1})
    assert duplicates == []


def test_no_full_key_hides_behind_a_prefix_family():
    # Full keys never live under a concatenation prefix such as 'timing_s/': those are built.
    slash_prefixes = [p for p in PREFIXES.values() if p.endswith("/")]
    clashes = [(k, p) for k in FULL_KEYS.values() for p in slash_prefixes if k.startswith(p)]
    assert clashes == []


@pytest.mark.parametrize(
    ("name", "values"),
    [("VAL_CORE_VARS", ("acc", "reward")), ("VAL_CORE_METRIC_PREFIXES", ("mean", "maj", "best"))],
    ids=["core-vars", "core-metric-prefixes"],
)
def test_tuple_constants(name, values):
    assert getattr(keys, name) == values


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda: keys.timing_s("gen"), "timing_s/gen"),
        (lambda: keys.timing_s("update_actor"), "timing_s/update_actor"),
        (lambda: keys.timing_per_token_ms("gen"), "timing_per_token_ms/gen"),
        (
            lambda: keys.val_metric(keys.VAL_CORE_PREFIX, "gsm8k", "acc", "mean@4"),
            "val-core/gsm8k/acc/mean@4",
        ),
        (
            lambda: keys.val_metric(keys.VAL_AUX_PREFIX, "math", "reward", "maj@8/std"),
            "val-aux/math/reward/maj@8/std",
        ),
        (
            lambda: keys.val_metric(keys.VAL_EXACT_PREFIX, "gsm8k", "acc", "pass@2") + keys.CI_LOW_SUFFIX,
            "val-exact/gsm8k/acc/pass@2/ci_low",
        ),
    ],
    ids=["timing-gen", "timing-update-actor", "per-token", "val-core", "val-aux", "val-exact-ci"],
)
def test_key_builders(call, expected):
    key = call()
    assert key == expected
    assert KEY_RE.match(key)


# --- parity of the names with verl ------------------------------------------------------------


@pytest.fixture
def verl_utils(request: pytest.FixtureRequest) -> Any:
    pytest.importorskip("verl")
    return request.getfixturevalue("verl_metric_utils")


@pytest.fixture
def verl_dataproto(request: pytest.FixtureRequest) -> Any:
    pytest.importorskip("verl")
    return request.getfixturevalue("data_proto")


def verl_batch(data_proto: Any, *, non_tensors: bool, meta: bool = False) -> Any:
    pytest.importorskip("torch")
    from batches import make_batch

    tensors, extra = make_batch(6, 3, 5, seed=0, non_tensors=non_tensors)
    meta_info = {"global_token_num": [8, 9, 7, 6, 5, 4]} if meta else None
    return data_proto.from_dict(tensors=tensors, non_tensors=extra or None, meta_info=meta_info)


@pytest.mark.parametrize(
    ("use_critic", "non_tensors", "absent"),
    [
        (True, True, set()),
        (False, True, {"VALUES_MEAN", "VALUES_MAX", "VALUES_MIN", "VF_EXPLAINED_VAR"}),
        (
            True,
            False,
            {f"{g}_{s}" for g in ("NUM_TURNS", "TOOL_CALL_COUNTS") for s in ("MEAN", "MAX", "MIN")},
        ),
    ],
    ids=["critic-turns-tools", "no-critic", "no-non-tensors"],
)
def test_data_keys_equal_verl_compute_data_metrics(
    verl_utils, verl_dataproto, use_critic, non_tensors, absent
):
    batch = verl_batch(verl_dataproto, non_tensors=non_tensors)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = verl_utils.compute_data_metrics(batch, use_critic=use_critic)
    assert set(ref) == DATA_KEYS - {getattr(keys, name) for name in absent}


def test_timing_and_throughput_keys_equal_verl(verl_utils, verl_dataproto):
    batch = verl_batch(verl_dataproto, non_tensors=False, meta=True)
    timing_raw = {"gen": 1.5, "ref": 0.5, "update_actor": 2.0, "step": 4.0}
    timing = verl_utils.compute_timing_metrics(batch, timing_raw)
    ours = {keys.timing_s(stage) for stage in timing_raw}
    ours |= {keys.timing_per_token_ms(stage) for stage in ("gen", "ref", "update_actor")}
    assert set(timing) == ours
    throughput = verl_utils.compute_throughout_metrics(batch, timing_raw, n_gpus=2)
    assert set(throughput) == {keys.PERF_TOTAL_NUM_TOKENS, keys.PERF_TIME_PER_STEP, keys.PERF_THROUGHPUT}

"""rlmetrics.keys: well-formed unique keys, builders that compose, the names verl logs, no key
literal anywhere else in the package."""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlmetrics import keys

PACKAGE = Path(keys.__file__).resolve().parent

#: Every upper-case string constant of the module, by kind.
STRINGS = {name: value for name, value in vars(keys).items() if name.isupper() and isinstance(value, str)}
PREFIXES = {name: value for name, value in STRINGS.items() if name.endswith("_PREFIX")}
SUFFIXES = {name: value for name, value in STRINGS.items() if name.endswith("_SUFFIX")}
FULL_KEYS = {
    name: value for name, value in STRINGS.items() if name not in PREFIXES | SUFFIXES and "/" in value
}
NAMES = {name: value for name, value in STRINGS.items() if name not in PREFIXES | SUFFIXES | FULL_KEYS}
STAGES = {name: value for name, value in NAMES.items() if name.startswith("STAGE_")}

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
segments = st.from_regex(r"\A[a-z0-9_\-@]{1,12}\Z")


@pytest.mark.parametrize(("name", "value"), sorted(FULL_KEYS.items()), ids=sorted(FULL_KEYS))
def test_full_keys_are_lower_case_slash_paths(name, value):
    assert KEY_RE.match(value), f"{name} = {value!r} is not a lower-case 'group/name' key"


@pytest.mark.parametrize(("name", "value"), sorted(PREFIXES.items()), ids=sorted(PREFIXES))
def test_prefixes_are_one_group(name, value):
    # 'group/' (joined by concatenation) or a bare section name (joined by val_metric)
    assert re.fullmatch(rf"{SEGMENT}/?", value), f"{name} = {value!r}"


@pytest.mark.parametrize(("name", "value"), sorted(SUFFIXES.items()), ids=sorted(SUFFIXES))
def test_suffixes_start_a_new_segment(name, value):
    assert re.fullmatch(rf"/{SEGMENT}", value), f"{name} = {value!r}"


def test_no_two_constants_name_the_same_key():
    values = [*FULL_KEYS.values(), *PREFIXES.values()]
    assert sorted({v for v in values if values.count(v) > 1}) == []
    stages = list(STAGES.values())
    assert len(set(stages)) == len(stages)


def test_tracking_fields_are_never_a_metric_key():
    for field in keys.TRACKING_FIELDS:
        assert field not in FULL_KEYS.values()
        assert all(keys.group(key) != field for key in FULL_KEYS.values())


def test_group_order_lists_groups_of_known_keys_once():
    known = {keys.group(v) for v in FULL_KEYS.values()} | {keys.group(v + "/") for v in PREFIXES.values()}
    assert len(set(keys.GROUP_ORDER)) == len(keys.GROUP_ORDER)
    assert set(keys.GROUP_ORDER) <= known
    assert keys.GROUP_OTHER not in keys.GROUP_ORDER


@given(segments, segments, segments, segments, st.integers(1, 1024))
def test_builders_compose(section, source, var, name, k):
    assert keys.val_metric(section, source, var, name).split("/") == [section, source, var, name]
    assert keys.at_k(name, k).rsplit("@", 1) == [name, str(k)]
    built = keys.timing_s(name), keys.timing_per_token_ms(name)
    assert [b.split("/") for b in built] == [["timing_s", name], ["timing_per_token_ms", name]]
    assert keys.group(keys.val_metric(section, source, var, name)) == section


@given(st.text(alphabet="ab/-", max_size=8))
def test_group_is_the_first_segment(key):
    assert keys.group(key) == (key.split("/")[0] if "/" in key else keys.GROUP_OTHER)


# --- no key literal outside keys.py -----------------------------------------------------------

#: Groups a literal key would start with: those of the constants (and of the prefixes).
KNOWN_GROUPS = {keys.group(v) for v in FULL_KEYS.values()} | {
    keys.group(v if v.endswith("/") else v + "/") for v in PREFIXES.values()
}
LITERAL_RE = re.compile(r"^([a-z][a-z0-9_\-]*)/[a-z0-9_@/*\-]*$")
MODULES = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if p.name != "keys.py")


def _key_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of the string constants in ``source`` that look like a metric key (docstrings aside)."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            match = LITERAL_RE.match(node.value)
            if match and match.group(1) in KNOWN_GROUPS:
                found.append((node.lineno, node.value))
    return sorted(found)


def test_the_literal_scan_finds_keys_and_fstring_pieces_not_docstrings():
    source = '"""critic/doc"""\nX = "critic/score/mean"\nY = f"val-core/{x}"\nZ = "image/png"\n'
    assert _key_literals(source) == [(2, "critic/score/mean"), (3, "val-core/")]


@pytest.mark.parametrize("module", MODULES, ids=MODULES)
def test_no_metric_key_literal_outside_keys(module):
    found = _key_literals((PACKAGE / module).read_text(encoding="utf-8"))
    assert found == [], f"{module}: use the constants and builders of rlmetrics.keys"


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
    timing_raw = {stage: 1.0 + i for i, stage in enumerate(sorted(STAGES.values()))}
    timing = verl_utils.compute_timing_metrics(batch, timing_raw)
    # verl's per-token stages are exactly the ones keys names
    per_token = {*keys.PER_RESPONSE_TOKEN_STAGES, *keys.PER_TOKEN_STAGES}
    assert set(timing) == {keys.timing_s(s) for s in timing_raw} | {
        keys.timing_per_token_ms(s) for s in per_token
    }
    throughput = verl_utils.compute_throughout_metrics(batch, timing_raw, n_gpus=2)
    assert set(throughput) == {keys.PERF_TOTAL_NUM_TOKENS, keys.PERF_TIME_PER_STEP, keys.PERF_THROUGHPUT}

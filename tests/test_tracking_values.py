"""Tests of rlmetrics.tracking._values: values converted once (the fast path and the checked path),
keys checked, configs flattened.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlmetrics.tracking import Tracker, read_jsonl
from rlmetrics.tracking._values import _convert, _Converter
from tracking_doubles import Recorder

torch = pytest.importorskip("torch")


# --- conversion, policies, errors --------------------------------------------------------------


@pytest.mark.parametrize(
    ("metrics", "exc", "match"),
    [
        ({"acc": "high"}, TypeError, r"metrics\['acc'\] must be a number.*got str"),
        ({"v": np.zeros(2)}, TypeError, r"metrics\['v'\] must be a number or a one-element array; got shape"),
        ({"v": torch.zeros(2)}, TypeError, r"metrics\['v'\] must be a number or a one-element tensor"),
        ({"c": 1 + 2j}, TypeError, r"metrics\['c'\] must be a number"),
        ({"n": None}, TypeError, r"metrics\['n'\] must be a number.*NoneType"),
        ({"step": 1.0}, ValueError, r"metrics\['step'\]: 'step' is reserved"),
        ({"timestamp": 1.0}, ValueError, r"metrics\['timestamp'\]: 'timestamp' is reserved"),
        ({3: 1.0}, TypeError, "metric keys must be strings; got int"),
        ([1.0], TypeError, "metrics must be a mapping"),
    ],
    ids=[
        "str",
        "array",
        "tensor",
        "complex",
        "none",
        "reserved-step",
        "reserved-timestamp",
        "int-key",
        "list",
    ],
)
def test_bad_values_name_the_key(tmp_path, metrics, exc, match):
    rec = Recorder()
    with Tracker("p", "e", backends=[rec], log_dir=tmp_path) as tr, pytest.raises(exc, match=match):
        tr.log(metrics, step=0)
    assert rec.rows == []


# --- keys: a record is the unit of failure -------------------------------------------------------


def test_numpy_string_keys_become_str_and_every_step_is_logged(tmp_path):
    rec = Recorder()
    with Tracker("p", "e", backends=[rec, "jsonl"], log_dir=tmp_path) as tr:
        for step in range(4):
            tr.log({np.str_("a"): float(step), "b": 1.0}, step=step)
    assert [type(k) for _, m in rec.rows for k in m] == [str] * 8
    assert [(r["step"], r["a"]) for r in read_jsonl(tr.jsonl_path)] == [(s, float(s)) for s in range(4)]


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"x\ud800": 1.0}, r"metrics\['x\\ud800'\] is dropped for every backend: the key is not valid UTF-8"),
        (
            {"big": 2**2000},
            r"metrics\['big'\] is dropped for every backend: its value, an integer of 2001 bits",
        ),
    ],
    ids=["surrogate-key", "int-beyond-float64"],
)
def test_a_key_no_backend_can_store_is_dropped_from_its_step_alone(tmp_path, bad, match):
    rec = Recorder()
    with Tracker("p", "e", backends=[rec, "jsonl"], log_dir=tmp_path) as tr:
        for step in range(5):
            metrics = {"ok": float(step), **(bad if step == 2 else {})}
            if step == 2:
                with pytest.warns(RuntimeWarning, match="step 2: " + match) as caught:
                    tr.log(metrics, step=step)
                assert caught[0].filename == __file__
            else:
                tr.log(metrics, step=step)
    want = [(s, {"ok": float(s)}) for s in range(5)]
    assert rec.rows == want and tr.lost == {}
    assert [(r["step"], r["ok"]) for r in read_jsonl(tr.jsonl_path)] == [(s, m["ok"]) for s, m in want]
    assert all(set(r) == {"step", "timestamp", "ok"} for r in read_jsonl(tr.jsonl_path))


def test_colliding_config_keys_are_a_named_error(tmp_path):
    with pytest.raises(
        ValueError, match=r"config: config\['a'\]\['b'\] and config\['a\.b'\] both flatten to 'a\.b'"
    ):
        Tracker("p", "e", config={"a": {"b": 1}, "a.b": 2}, log_dir=tmp_path)
    with pytest.raises(ValueError, match=r"config\[1\] and config\['1'\] both flatten to '1'"):
        Tracker("p", "e", config={1: "x", "1": "y"}, log_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


# --- the converter's fast path gives what the checked path gives -------------------------------


STEPS = {
    "floats": {"a": 0.5, "b": -1.0},
    "numpy-and-python-numbers": {
        "a": np.float32(0.25),
        "b": 3,
        "c": True,
        "d": np.int64(-2),
        "e": np.bool_(False),
    },
    "non-ascii-key": {"größe": 1.0, "a": 2.0},
    "nan-and-inf": {"a": math.nan, "b": -math.inf},
    "empty": {},
}


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "keys-known"])
@pytest.mark.parametrize("metrics", list(STEPS.values()), ids=list(STEPS))
def test_the_fast_path_matches_the_checked_path(metrics, warm):
    convert = _Converter()
    if warm:
        convert(metrics)
    got, dropped = convert(metrics)
    want, want_dropped = _convert(metrics)
    assert dropped == want_dropped == []
    assert list(got) == list(want) and all(type(v) is float for v in got.values())
    assert all(g == w or (math.isnan(g) and math.isnan(w)) for g, w in zip(got.values(), want.values()))
    assert got is not metrics


def test_the_fast_path_keeps_every_refusal_after_the_keys_are_known():
    convert = _Converter()
    convert({"a": 1.0, "b": 2.0})
    with pytest.raises(TypeError, match=r"metrics\['a'\] must be a number .*got str '1.0'"):
        convert({"a": "1.0", "b": 2.0})
    with pytest.raises(ValueError, match=r"metrics\['step'\]: 'step' is reserved"):
        convert({"a": 1.0, "step": 2.0})
    got, dropped = convert({"a": 1.0, "b": 10**400})
    assert got == {"a": 1.0} and dropped == [("b", "its value, an integer of 1329 bits, is beyond a float64")]
    got, dropped = convert({"a": 1.0, "\ud800": 2.0})
    assert got == {"a": 1.0} and "not valid UTF-8" in dropped[0][1]
    with pytest.raises(TypeError, match="metrics must be a mapping of key to number; got list"):
        convert([("a", 1.0)])


class Plain(float):
    """A float subclass that converts as its value."""


class Halved(float):
    """A float subclass whose ``float()`` is not its value: only the checked path calls it."""

    def __float__(self) -> float:
        return float.__float__(self) / 2


class Key(str):
    """A str subclass key."""


#: A step after a warm-up step of plain floats with the keys a, b: the value each key must reach
#: the backends with (``float(value)``, the checked path's conversion, worked out by hand).
FALLBACKS = {
    "float-subclass": ({"a": Plain(0.5), "b": 1.0}, {"a": 0.5, "b": 1.0}),
    "float-subclass-own-float": ({"a": Halved(3.0), "b": 1.0}, {"a": 1.5, "b": 1.0}),
    "numpy-float64": ({"a": np.float64(0.25), "b": 1.0}, {"a": 0.25, "b": 1.0}),
    "numpy-float32": ({"a": np.float32(0.75), "b": 1.0}, {"a": 0.75, "b": 1.0}),
    "bool": ({"a": True, "b": np.bool_(False)}, {"a": 1.0, "b": 0.0}),
    "int": ({"a": 3, "b": np.int32(-2)}, {"a": 3.0, "b": -2.0}),
    "keys-reordered": ({"b": 1.0, "a": 2.0}, {"b": 1.0, "a": 2.0}),
    "key-added": ({"a": 1.0, "b": 2.0, "c": 3.0}, {"a": 1.0, "b": 2.0, "c": 3.0}),
    "str-subclass-key-in-a-new-set": ({Key("c"): 1.0, "a": 2.0}, {"c": 1.0, "a": 2.0}),
}


@pytest.mark.parametrize(("metrics", "want"), list(FALLBACKS.values()), ids=list(FALLBACKS))
def test_a_step_off_the_fast_path_converts_as_the_checked_path(metrics, want):
    convert = _Converter()
    convert({"a": 0.0, "b": 0.0})  # the keys a, b known: the next step with them skips the key checks
    got, dropped = convert(metrics)
    assert dropped == [] and got == want and got == _convert(metrics)[0]
    assert {type(k) for k in got} == {str} and {type(v) for v in got.values()} == {float}


@pytest.mark.parametrize("policy", ["keep", "drop", "error"], ids=["keep", "drop", "error"])
def test_a_nonfinite_value_on_the_fast_path_meets_the_policy(tmp_path, policy):
    with Tracker("p", "e", log_dir=tmp_path, nonfinite=policy) as tr:
        tr.log({"a": 1.0, "b": 2.0}, step=0)  # the keys known: step 1 takes the fast path
        if policy == "error":
            with pytest.raises(ValueError, match=r"metrics\['b'\] is -inf; non-finite values are not"):
                tr.log({"a": 1.0, "b": -math.inf}, step=1)
        else:
            tr.log({"a": math.nan, "b": -math.inf}, step=1)
    rows = read_jsonl(tr.jsonl_path)
    assert [row["step"] for row in rows] == ([0] if policy == "error" else [0, 1])
    if policy == "keep":
        assert math.isnan(rows[1]["a"]) and rows[1]["b"] == -math.inf
        assert b"NaN" in tr.jsonl_path.read_bytes()  # json's spelling, not orjson's null
    elif policy == "drop":
        assert set(rows[1]) == {"step", "timestamp"}

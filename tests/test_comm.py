"""Tests of the agreement step: rlmetrics._core.comm, and agree_statistics / all_reduce_checked.

In a world of one rank (in-process ``HashStore``): digests, messages, the error path and the
options of :func:`agree`. The multi-rank behaviour (one bad rank of three) is in
tests/test_distributed.py.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from rlmetrics._core import stats as _stats_module  # noqa: E402
from rlmetrics._core.comm import agree, describe_disagreement, signature_digest  # noqa: E402
from rlmetrics._core.stats import ANY, Stats, _conflicts, agree_statistics, all_reduce_checked  # noqa: E402


@pytest.fixture
def world1():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param({"x": 1, "y": "a"}, {"y": "a", "x": 1}, id="key-order"),
        pytest.param({"x": (1, 2)}, {"x": [1, 2]}, id="tuple-vs-list"),
        pytest.param({"x": np.float64(0.2)}, {"x": 0.2}, id="numpy-scalar"),
        pytest.param({"x": np.int32(3)}, {"x": 3}, id="numpy-int"),
        pytest.param({"x": math.nan}, {"x": float("nan")}, id="nan"),
        pytest.param({"x": {"b": 1, "a": 2}}, {"x": {"a": 2, "b": 1}}, id="nested-mapping"),
    ],
)
def test_equal_signatures_have_equal_digests(a, b):
    assert signature_digest(a) == signature_digest(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param({"use_critic": True}, {"use_critic": False}, id="bool"),
        pytest.param({"x": 1}, {"x": 1.5}, id="value"),
        pytest.param({"x": 1}, {"y": 1}, id="name"),
        pytest.param({"x": ("a", "b")}, {"x": ("b", "a")}, id="order-of-a-layout"),
        pytest.param({"x": None}, {}, id="absent"),
    ],
)
def test_different_signatures_have_different_digests(a, b):
    assert signature_digest(a) != signature_digest(b)


def test_digest_is_the_same_in_another_process():
    """Not Python's salted hash: another interpreter (another PYTHONHASHSEED) gives the same digest."""
    sig = {"kind": "data", "layout": (("n", "s"), ("hi",), ("lo",)), "use_critic": True}
    code = f"from rlmetrics._core.comm import signature_digest; print(signature_digest({sig!r}))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "123"},
    )
    assert int(out.stdout) == signature_digest(sig)


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=5), st.booleans())))
def test_property_digest_is_a_signed_64_bit_integer_and_order_free(sig):
    d = signature_digest(sig)
    assert -(2**63) <= d < 2**63
    assert signature_digest(dict(reversed(list(sig.items())))) == d


def test_describe_disagreement_names_each_differing_field_and_its_ranks():
    sigs = [
        {"use_critic": True, "limit": 4, "kind": "data"},
        {"use_critic": False, "limit": 4, "kind": "data"},
        {"use_critic": True, "kind": "data", "limit": 5},
    ]
    assert describe_disagreement("the options", sigs) == (
        "ranks disagree on the options: use_critic: ranks 0, 2: True; rank 1: False | "
        "limit: ranks 0, 1: 4; rank 2: 5"
    )
    assert "x: rank 0: 1; rank 1: absent" in describe_disagreement("it", [{"x": 1}, {}])
    long = describe_disagreement("keys", [{"k": tuple(range(100))}, {"k": ()}])
    assert "..." in long and len(long) < 400  # long values are shortened


def test_agree_in_a_world_of_one(world1):
    assert agree({"a": 1}, process_group=world1) is None
    assert agree({"a": 1}, on_mismatch="gather") is None


@pytest.mark.parametrize(
    ("error", "kind", "message"),
    [
        pytest.param(ValueError("bad mask"), ValueError, "rank 0: bad mask", id="value-error"),
        pytest.param(TypeError("not an array"), TypeError, "rank 0: not an array", id="type-error"),
        pytest.param(KeyError("k"), RuntimeError, "rank 0: KeyError: 'k'", id="other-becomes-runtime-error"),
        pytest.param(
            type("MaskError", (ValueError,), {})("sub"),
            ValueError,
            "rank 0: sub",
            id="subclass-keeps-its-base",
        ),
    ],
)
def test_a_rank_error_is_raised_named_and_chained(world1, error, kind, message):
    with pytest.raises(kind) as info:
        agree({"a": 1}, error)
    assert str(info.value) == message
    assert info.value.__cause__ is error  # the bad rank keeps its own traceback


def test_agree_needs_an_initialised_group_and_a_known_mode(world1):
    with pytest.raises(ValueError, match="on_mismatch must be 'raise' or 'gather'; got 'ignore'"):
        agree({}, on_mismatch="ignore")


def test_agree_without_a_group():
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="not initialised"):
        agree({"a": 1})


def _stats(value: float, **options: object) -> Stats:
    def finaliser(s, hi, lo, opts):
        return {"total": s["x"]}

    return Stats.pack("demo", {"x": value}, {}, {}, finaliser=finaliser, options=options)


def test_all_reduce_checked_in_a_world_of_one(world1):
    got = all_reduce_checked(lambda: _stats(2.5, a=1), world1, what="demo")
    assert got is not None and got.finalize() == {"total": 2.5}
    assert all_reduce_checked(lambda: None, world1, what="demo", missing=lambda: "no inputs") is None

    def fails() -> Stats:
        raise ValueError("batch['x'] must hold only 0 and 1")

    with pytest.raises(ValueError, match=r"^rank 0: batch\['x'\] must hold only 0 and 1$"):
        all_reduce_checked(fails, world1, what="demo")


def test_stats_all_reduce_agrees_first(world1):
    stats = _stats(1.0, a=1)
    assert stats.signature() == {"kind": "demo", "layout": (("x",), (), ()), "a": 1}
    assert stats.all_reduce(world1).finalize() == {"total": 1.0}


@pytest.mark.parametrize(
    ("signatures", "conflicting"),
    [
        pytest.param([{"a": 1}, {"a": 1}], [{}, {}], id="equal"),
        pytest.param([{"a": 1, "k": ("t",)}, {"a": 1, "k": ANY}], [{}, {}], id="any-matches"),
        pytest.param([{"k": ANY}, {"k": ANY}], [{}, {}], id="all-any"),
        pytest.param(
            [{"a": 1, "k": ("t",)}, {"a": 1, "k": ANY}, {"a": 1, "k": ()}],
            [{"k": ("t",)}, {"k": ANY}, {"k": ()}],
            id="any-does-not-hide-a-conflict",
        ),
        pytest.param([{"a": 1}, {"a": 2, "b": 0}], [{"a": 1}, {"a": 2, "b": 0}], id="values-and-absent"),
    ],
)
def test_conflicts_ignore_wildcards_only(signatures, conflicting):
    assert _conflicts(signatures) == conflicting


def _gathered(*others: dict):
    """A stand-in for agree(): the signatures differ, this rank's first, then ``others``."""

    def fake(signature, error=None, **kwargs):
        return [dict(signature), *others]

    return fake


@pytest.mark.parametrize(
    ("others", "kwargs", "match"),
    [
        pytest.param(
            [{"missing inputs": "batch lacks 'x'"}],
            {"missing": lambda: ""},
            r"^rank 1: batch lacks 'x'; the other ranks have the inputs of demo",
            id="missing-on-one-rank",
        ),
        pytest.param(
            [{"kind": "demo", "layout": (("x",), (), ()), "a": 2}],
            {},
            r"^ranks disagree on the options of demo: a: rank 0: 1; rank 1: 2$",
            id="options",
        ),
        pytest.param(
            [{"kind": "demo", "layout": (("x",), (), ()), "a": 2}],
            {"topic": "the 'demo' statistics"},
            r"^ranks disagree on the 'demo' statistics: a: rank 0: 1; rank 1: 2$",
            id="topic",
        ),
    ],
)
def test_agree_statistics_default_judge(monkeypatch, world1, others, kwargs, match):
    monkeypatch.setattr(_stats_module, "agree", _gathered(*others))
    with pytest.raises(ValueError, match=match):
        agree_statistics(lambda: _stats(1.0, a=1), world1, what="demo", **kwargs)


def test_agree_statistics_returns_the_judges_verdict(monkeypatch, world1):
    other = {"kind": "demo", "layout": (("y",), (), ()), "a": 1}
    monkeypatch.setattr(_stats_module, "agree", _gathered(other))
    seen: list = []

    def judge(signatures):
        seen.append(signatures)
        return sorted(name for sig in signatures for name in sig["layout"][0])

    stats, verdict = agree_statistics(lambda: _stats(1.0, a=1), world1, what="demo", judge=judge)
    assert verdict == ["x", "y"] and seen[0][1] == other and stats is not None
    monkeypatch.undo()
    assert agree_statistics(lambda: _stats(1.0, a=1), world1, what="demo", judge=judge)[1] is None

"""Tests of rlmetrics.training.timers: stage timers feeding compute_timing_metrics."""

from __future__ import annotations

import sys
import threading
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics import compute_timing_metrics
from rlmetrics.training.timers import Stage, StageTimer, timer


class FakeClock:
    """A deterministic clock that only moves when a test advances ``now``."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = FakeClock()
    monkeypatch.setattr("rlmetrics.training.timers._clock", c)
    return c


def test_accumulates_and_nests(clock):
    timing_raw: dict[str, float] = {}
    with timer("step", timing_raw) as step:
        for dt in (0.5, 1.25):
            with timer("gen", timing_raw) as gen:
                clock.now += dt
            assert gen.elapsed == dt
        with timer("update_actor", timing_raw):
            clock.now += 2.0
        clock.now += 0.25
    assert timing_raw == {"gen": 1.75, "update_actor": 2.0, "step": 4.0}
    assert step.elapsed == 4.0 and isinstance(step, Stage)


def test_reentered_stage_counted_once(clock):
    timing_raw: dict[str, float] = {}

    def recurse(depth: int) -> None:
        with timer("rec", timing_raw) as s:
            clock.now += 1.0
            if depth:
                recurse(depth - 1)
        assert s.counted == (depth == 2)

    recurse(2)
    assert timing_raw == {"rec": 3.0}
    other: dict[str, float] = {}  # the same name in another dict is a different stage
    with timer("rec", timing_raw), timer("rec", other):
        clock.now += 1.0
    assert timing_raw == {"rec": 4.0} and other == {"rec": 1.0}


def test_exception_still_records(clock):
    timing_raw: dict[str, float] = {}
    with pytest.raises(ZeroDivisionError):
        with timer("adv", timing_raw):
            clock.now += 0.5
            _ = 1 / 0
    assert timing_raw == {"adv": 0.5}
    with timer("adv", timing_raw):  # the active-stage record was cleared
        clock.now += 0.5
    assert timing_raw == {"adv": 1.0}


def test_without_dict_the_time_is_on_the_stage(clock):
    with timer("x") as s:
        clock.now += 0.75
    assert (s.name, s.elapsed, s.counted) == ("x", 0.75, True)
    assert repr(s) == "Stage('x', elapsed=0.750000)"


def test_feeds_compute_timing_metrics(clock):
    t = StageTimer()
    with t("step"):
        with t("gen"):
            clock.now += 0.5
        with t("update_actor"):
            clock.now += 1.0
    batch = {"prompt_length": np.array([3, 5]), "response_length": np.array([2, 0])}
    m = compute_timing_metrics(batch, t.pop())
    assert m == {
        "timing_s/step": 1.5,
        "timing_s/gen": 0.5,
        "timing_s/update_actor": 1.0,
        "timing_per_token_ms/gen": 250.0,
        "timing_per_token_ms/update_actor": 100.0,
    }
    assert t.timing_raw == {} and t.counts == {}


def test_stage_timer_counts_and_exception(clock):
    t = StageTimer()
    for _ in range(3):
        with t("gen"):
            clock.now += 1.0
    with pytest.raises(RuntimeError), t("ref"):
        clock.now += 2.0
        raise RuntimeError("boom")
    assert t.counts == {"gen": 3, "ref": 1} and t.timing_raw == {"gen": 3.0, "ref": 2.0}
    assert "gen=3.000s" in repr(t)
    t.reset()
    assert t.timing_raw == {}


def test_threads_keep_separate_active_stages(clock):
    """Re-entrance tracking is per thread: the same stage open in two threads at once counts twice."""
    timing_raw: dict[str, float] = {}
    barrier = threading.Barrier(2)
    counted: list[bool] = []

    def work() -> None:
        with timer("gen", timing_raw) as s:
            barrier.wait()  # both threads are inside the stage here
        counted.append(s.counted)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert counted == [True, True]
    assert timing_raw == {"gen": 0.0}


class _FakeCuda:
    def __init__(self) -> None:
        self.syncs = 0

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return True

    def synchronize(self) -> None:
        self.syncs += 1


def test_sync_cuda_synchronises_before_each_reading(monkeypatch, clock):
    cuda = _FakeCuda()
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    timing_raw: dict[str, float] = {}
    with timer("gen", timing_raw, sync_cuda=True):
        assert cuda.syncs == 1
    assert cuda.syncs == 2
    t = StageTimer(sync_cuda=True)
    with t("ref"), t("values", sync_cuda=False):
        pass
    assert cuda.syncs == 4


def test_sync_cuda_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match=r"pip install 'rlmetrics\[torch\]'"):
        with timer("gen", sync_cuda=True):
            pass


@pytest.mark.parametrize(
    ("name", "timing_raw", "exc", "match"),
    [
        ("", None, TypeError, "name must be a non-empty str"),
        (3, None, TypeError, "name must be a non-empty str.*got 3"),
        ("gen", [1.0], TypeError, "timing_raw must be a dict.*got list"),
    ],
    ids=["empty-name", "int-name", "list-dict"],
)
def test_bad_arguments(name, timing_raw, exc, match):
    with pytest.raises(exc, match=match):
        with timer(name, timing_raw):
            pass


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["gen", "ref", "adv"]), st.integers(0, 1000)), max_size=20))
def test_total_equals_sum_of_blocks(blocks):
    """Per stage, the recorded time is the sum of its blocks' durations (brute force)."""
    clock = FakeClock()
    want: dict[str, float] = {}
    t = StageTimer()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("rlmetrics.training.timers._clock", clock)
        for name, ms in blocks:
            with t(name):
                clock.now += ms / 1000.0
            want[name] = want.get(name, 0.0) + ms / 1000.0
    assert t.timing_raw == pytest.approx(want)
    assert sum(t.counts.values()) == len(blocks)

"""rlmetrics.readers.tail: the lines appended to a JSON-lines run, and the history they extend."""

from __future__ import annotations

import numpy as np
import pytest

from planted_runs import append, row
from rlmetrics import keys as K
from rlmetrics.errors import RunReadWarning
from rlmetrics.readers.tail import HistoryBuffers, complete_size, extend_history, read_tail


def test_tail_reads_complete_lines_and_waits_for_the_one_being_written(tmp_path):
    p = tmp_path / "metrics.jsonl"
    append(p, row(1), row(2), raw='{"step": 3, "actor/pg')
    first = read_tail(p, 0, fmt="rlmetrics-jsonl")
    assert first.n_lines == 2 and first.series[K.ACTOR_PG_LOSS][0].tolist() == [1, 2]
    assert first.offset == complete_size(p) < p.stat().st_size
    append(p, raw='_loss": 0.3}\n')
    second = read_tail(p, first.offset, fmt="rlmetrics-jsonl")
    assert second.n_lines == 1 and second.series[K.ACTOR_PG_LOSS][1].tolist() == [0.3]
    assert read_tail(p, second.offset, fmt="rlmetrics-jsonl") == ({}, None, p.stat().st_size, 0)


def test_tail_keeps_timestamps(tmp_path):
    p = tmp_path / "metrics.jsonl"
    append(p, {"step": 4, "timestamp": 12.5, "a": 1.0})
    tail = read_tail(p, 0, fmt="rlmetrics-jsonl")
    assert tail.times[0].tolist() == [4] and tail.times[1].tolist() == [12.5]
    assert "timestamp" not in tail.series


def test_tail_of_verl_records_reads_null_as_nan(tmp_path):
    p = tmp_path / "exp.jsonl"
    append(p, {"step": 1, "data": {"actor/pg_loss": 0.1}}, {"step": 2, "data": {"actor/pg_loss": None}})
    tail = read_tail(p, 0, fmt="verl-jsonl")
    assert tail.series["actor/pg_loss"][0].tolist() == [1, 2]
    assert np.isnan(tail.series["actor/pg_loss"][1][1])


@pytest.mark.parametrize(
    ("lines", "fmt"),
    [
        ('{"a": 1}\n', "rlmetrics-jsonl"),
        ('{"step": "x", "a": 1}\n', "rlmetrics-jsonl"),
        ('{"step": 1, "a": 1}\n', "verl-jsonl"),
        ("[1, 2]\n", "rlmetrics-jsonl"),
    ],
    ids=["no-step", "step-not-a-number", "not-a-verl-record", "not-an-object"],
)
def test_tail_asks_for_a_whole_read_when_a_record_cannot_stand_alone(tmp_path, lines, fmt):
    p = tmp_path / "m.jsonl"
    p.write_text(lines)
    assert read_tail(p, 0, fmt=fmt) is None


def test_tail_of_a_file_that_shrank_asks_for_a_whole_read(tmp_path):
    p = tmp_path / "metrics.jsonl"
    append(p, row(1))
    assert read_tail(p, p.stat().st_size + 10, fmt="rlmetrics-jsonl") is None


def test_tail_skips_an_unreadable_line_with_a_warning(tmp_path):
    p = tmp_path / "metrics.jsonl"
    append(p, row(1), raw='{"step": 2, "a"\n')
    append(p, row(3))
    with pytest.warns(RunReadWarning, match="skipping an unreadable line after byte 0"):
        tail = read_tail(p, 0, fmt="rlmetrics-jsonl")
    assert tail.series[K.ACTOR_PG_LOSS][0].tolist() == [1, 3]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"offset": -1, "fmt": "rlmetrics-jsonl"}, "offset must be a byte offset"),
        ({"offset": 0, "fmt": "tensorboard"}, "fmt must be one of"),
    ],
    ids=["negative-offset", "other-format"],
)
def test_tail_bad_arguments(tmp_path, kwargs, match):
    p = tmp_path / "metrics.jsonl"
    append(p, row(1))
    with pytest.raises(ValueError, match=match):
        read_tail(p, **kwargs)


def test_complete_size_finds_the_last_line_break_far_back(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_bytes(b'{"step": 1}\n' + b"x" * 200_000)
    assert complete_size(p) == 12
    p.write_bytes(b"no newline")
    assert complete_size(p) == 0


@pytest.mark.parametrize(
    ("new_steps", "new_values", "steps", "values"),
    [
        ([3, 4], [0.3, 0.4], [1, 2, 3, 4], [0.1, 0.2, 0.3, 0.4]),
        ([2, 3], [0.5, 0.3], [1, 2, 3], [0.1, 0.5, 0.3]),
        ([0], [0.9], [0, 1, 2], [0.9, 0.1, 0.2]),
    ],
    ids=["appended", "overlap-keeps-new", "earlier-step"],
)
@pytest.mark.parametrize("grow", [False, True], ids=["copied", "buffers"])
def test_extend_history(new_steps, new_values, steps, values, grow):
    buffers = HistoryBuffers() if grow else None
    old = {"a": (np.array([1, 2]), np.array([0.1, 0.2]))}
    if grow:
        old = buffers.adopt(old)
    out = extend_history(old, {"a": (np.array(new_steps), np.array(new_values))}, buffers=buffers)
    assert out["a"][0].tolist() == steps and out["a"][1].tolist() == values
    assert old["a"][0].tolist() == [1, 2]  # not changed in place


def test_history_buffers_grow_in_place_and_never_write_what_they_handed_out():
    buffers = HistoryBuffers()
    rng = np.random.default_rng(0)
    values = rng.normal(size=3000)
    history = buffers.adopt({"a": (np.arange(100), values[:100]), "b": (np.arange(100), -values[:100])})
    assert history["a"][0] is history["b"][0]  # equal steps: one array for both keys
    states = [history]
    for start, end in zip(range(100, 3000, 7), range(107, 3000, 7)):  # past the buffers' room
        new = {k: (np.arange(start, end), sign * values[start:end]) for k, sign in (("a", 1), ("b", -1))}
        history = extend_history(history, new, buffers=buffers)
        states.append(history)
        assert history["a"][0] is history["b"][0]
        steps, got = history["a"]
        assert not got.flags.writeable and not steps.flags.writeable
    # every state handed out still holds its points (the later appends wrote after them)
    for h in states:
        n = h["a"][0].size
        assert h["a"][0].tolist() == list(range(n)) and h["a"][1].tobytes() == values[:n].tobytes()
    # a state extended twice: the second gets a copy, the first keeps what it got
    base = states[-1]
    one = extend_history(base, {"a": (np.array([5000]), np.array([1.0]))}, buffers=buffers)
    two = extend_history(base, {"a": (np.array([5000]), np.array([2.0]))}, buffers=buffers)
    assert (one["a"][1][-1], two["a"][1][-1]) == (1.0, 2.0)
    assert one["a"][1][:-1].tobytes() == two["a"][1][:-1].tobytes() == base["a"][1].tobytes()
    with pytest.raises(ValueError, match="read-only"):
        one["a"][1][0] = 0.0

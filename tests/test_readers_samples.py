"""Tests of rlmetrics.readers.samples: samples.jsonl read back by step; a damaged line costs that
line alone, a step logged twice keeps its last block; errors."""

from __future__ import annotations

import json
import warnings

import pytest

from rlmetrics.errors import RunReadError, RunReadWarning
from rlmetrics.readers import read_samples as exported
from rlmetrics.readers.samples import SAMPLES_FILE, read_samples
from rlmetrics.training.samples import SampleTable


def row(step=1, **kw):
    base = {"step": step, "prompt": "p", "response": "r", "reward": 0.5, "length": 3, "stop_reason": "stop",
            "category": "math", "chosen": "max"}  # fmt: skip
    return {**base, **kw}


def write(tmp_path, lines) -> None:
    text = "".join((json.dumps(x, ensure_ascii=False) if not isinstance(x, str) else x) + "\n" for x in lines)
    (tmp_path / SAMPLES_FILE).write_text(text, encoding="utf-8")


def test_read_samples_is_exported_by_readers():
    assert exported is read_samples


def test_round_trip_of_hand_written_rows(tmp_path):
    rows = [row(1), row(1, chosen="min", reward=0, length=None, stop_reason=None), row(4, prompt="日本 🙂")]
    write(tmp_path, rows)
    tables = read_samples(tmp_path)
    assert list(tables) == [1, 4]
    assert tables[1] == SampleTable.from_rows([{**rows[0], "reward": 0.5}, {**rows[1], "reward": 0.0}])
    assert tables[1].reward == (0.5, 0.0) and type(tables[1].reward[1]) is float
    assert tables[4].prompt == ("日本 🙂",)


def test_missing_columns_read_as_none(tmp_path):
    write(tmp_path, [{"step": 0, "prompt": "p", "response": "r", "reward": 1, "chosen": "random"}])
    t = read_samples(tmp_path)[0]
    assert t.length == t.stop_reason == t.category == (None,)


DAMAGED = {
    "cut-off": '{"step": 1, "prompt": "p", "resp',
    "not-json": "hello",
    "not-utf8": b"\xff\xfe".decode("latin-1"),
    "list": "[1, 2]",
    "no-step": json.dumps({k: v for k, v in row().items() if k != "step"}),
    "negative-step": json.dumps(row(-1)),
    "bool-step": json.dumps(row(True)),
    "prompt-number": json.dumps(row(prompt=3)),
    "reward-text": json.dumps(row(reward="1")),
    "reward-nan": json.dumps(row(reward=float("nan"))),
    "reward-bool": json.dumps(row(reward=True)),
    "length-fraction": json.dumps(row(length=1.5)),
    "category-number": json.dumps(row(category=1)),
    "chosen-unknown": json.dumps(row(chosen="best")),
}


@pytest.mark.parametrize("bad", list(DAMAGED.values()), ids=list(DAMAGED))
def test_a_damaged_line_costs_that_line(tmp_path, bad):
    path = tmp_path / SAMPLES_FILE
    good = json.dumps(row(2)) + "\n"
    path.write_bytes(
        (good + bad + "\n" + json.dumps(row(3)) + "\n").encode("latin-1" if "\xff" in bad else "utf-8")
    )
    with pytest.warns(RunReadWarning, match=r"1 damaged line\(s\) skipped \(line 2: "):
        tables = read_samples(path)
    assert list(tables) == [2, 3] and all(len(t) == 1 for t in tables.values())


def test_many_damaged_lines_are_named_in_one_warning(tmp_path):
    write(tmp_path, [row(0), *["junk"] * 8])
    with pytest.warns(
        RunReadWarning, match=r"8 damaged line\(s\) skipped .*line 6: .*; and 3 more"
    ) as caught:
        assert list(read_samples(tmp_path)) == [0]
    assert len(caught) == 1


def test_a_step_logged_again_keeps_its_last_block(tmp_path):
    write(tmp_path, [row(1, prompt="old"), row(1, prompt="old2", chosen="min"), row(2), row(1, prompt="new")])
    with pytest.warns(RunReadWarning, match=r"step\(s\) \[1\] were logged more than once"):
        tables = read_samples(tmp_path)
    assert tables[1].prompt == ("new",) and list(tables) == [1, 2]


def test_a_clean_file_reads_without_warnings(tmp_path):
    write(tmp_path, [row(0), row(1)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sorted(read_samples(tmp_path / SAMPLES_FILE)) == [0, 1]


def test_an_empty_run_dir_has_no_samples_and_a_missing_path_is_an_error(tmp_path):
    assert read_samples(tmp_path) == {}
    with pytest.raises(RunReadError, match=r"cannot read the sample tables .*nope"):
        read_samples(tmp_path / "nope")

"""The example samples of a finding (rlmetrics.health.examples)."""

from __future__ import annotations

import random
import string

import pytest

from rlmetrics.health.examples import finding_examples, one_line, sample_steps
from rlmetrics.health.findings import Finding
from rlmetrics.training.samples import SampleTable

LOOP = "First, " + "the sum is the sum is " * 20
NOISE = "".join(random.Random(0).choices(string.ascii_letters + string.digits + "#$%&@!", k=300))


def table(step, rows):
    """A sample table of ``(response, reward, stop_reason)`` rows."""
    n = len(rows)
    return SampleTable(
        step=(step,) * n,
        prompt=("p",) * n,
        response=tuple(r for r, _, _ in rows),
        reward=tuple(w for _, w, _ in rows),
        length=(None,) * n,
        stop_reason=tuple(q for _, _, q in rows),
        category=(None,) * n,
        chosen=("random",) * n,
    )


TABLES = {
    step: table(
        step,
        [
            ("The answer is 4.", 1.0, "stop"),
            (LOOP, 0.5, "length"),
            (NOISE, 0.2, "stop"),
            ("I cannot tell.", 0.0, "eos"),
            ("Engine failed.", 0.1, "Error"),
        ],
    )
    for step in (0, 10, 20, 30)
}


def finding(kind, onset=10, worst=20, **evidence):
    return Finding(
        kind,
        "warning",
        onset,
        (),
        {"sample_steps": {"before": 0, "onset": onset, "worst": worst}, **evidence},
    )


@pytest.mark.parametrize(
    ("kind", "evidence", "response", "stop"),
    [
        ("repetition_rise", {}, LOOP, "length"),
        ("gibberish_rise", {}, NOISE, "stop"),
        ("format_failure_rise", {}, "I cannot tell.", "eos"),  # no pattern logged: the lowest reward
        ("stop_reason_shift", {"shifted": ["stop_length"]}, LOOP, "length"),
        ("stop_reason_shift", {"shifted": ["stop_error"]}, "Engine failed.", "Error"),  # its alias
    ],
)
def test_each_kind_picks_the_rows_that_show_it(kind, evidence, response, stop):
    examples = finding_examples(finding(kind, **evidence), TABLES)
    assert [(e["step"], e["response"], e["stop_reason"]) for e in examples] == [
        (10, response, stop),
        (20, response, stop),
    ]


def test_the_nearest_steps_with_samples_and_the_limit():
    examples = finding_examples(finding("repetition_rise", onset=12, worst=27), TABLES, limit=3)
    assert [e["step"] for e in examples[:2]] == [10, 30]
    # then, none of the others repeating itself, the lowest reward
    assert len(examples) == 3 and examples[2]["response"] == "I cannot tell."


def test_no_tables_no_steps_or_no_fitting_row_give_none():
    assert finding_examples(finding("repetition_rise"), {}) == []
    assert finding_examples(Finding("nonfinite", "error", 3, ()), TABLES) == []
    quiet = {10: table(10, [("Fine.", 1.0, "stop")])}
    assert finding_examples(finding("stop_reason_shift", shifted=["stop_length"]), quiet) == []


def test_sample_steps_keeps_the_named_numbers_in_order():
    f = Finding("x", "warning", 1, (), {"sample_steps": {"worst": 9, "onset": 5.0, "before": True, "n": 2}})
    assert sample_steps(f) == {"onset": 5, "worst": 9}
    assert sample_steps(Finding("x", "warning", 1, ())) == {}


def test_one_line_keeps_the_start_and_the_end():
    text = "Start here.\n\n" + "word " * 100 + "THE END"
    line = one_line(text)
    assert len(line) <= 100 and line.startswith("Start here. word") and line.endswith("word THE END")
    assert one_line("short\ttext") == "short text"

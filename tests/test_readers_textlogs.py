"""Console logs through the run reader (:mod:`rlmetrics.readers.textlogs`): verl's ``step:N - key:value``
records and TRL's printed dicts, clean and damaged; a damaged record costs that record, with one
``RunReadWarning`` naming its line. Every log is written here, in the forms the trainers print."""

from __future__ import annotations

import io
import math
import warnings
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics.errors import RunReadWarning
from rlmetrics.readers import TRL_PRINTED, VERL_CONSOLE, read_run
from rlmetrics.readers import textlogs as T

NAN = math.nan
RAY = "\x1b[36m(TaskRunner pid=222265)\x1b[0m "
REC = [
    "step:1 - actor/entropy:0.452 - critic/score/mean:0.300 - critic/vf_loss:0.25",
    "step:2 - actor/entropy:0.448 - critic/score/mean:0.350 - critic/vf_loss:nan",
    "step:3 - actor/entropy:0.440 - critic/score/mean:0.400 - critic/vf_loss:0.20",
]


def _read(text: str) -> Any:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = read_run(io.BytesIO(text.encode()))
    return run, [w for w in caught if issubclass(w.category, RunReadWarning)]


# --- verl console ----------------------------------------------------------------------------


VERL_LOGS = [
    ("clean", "\n".join(REC), [1, 2, 3], []),
    ("ansi-and-ray-prefixes", "\n".join(RAY + r for r in REC), [1, 2, 3], []),
    (
        "wrapped-with-prefix-repeated",
        "\n".join(RAY + r[i : i + 23] for r in REC for i in range(0, len(r), 23)),
        [1, 2, 3],
        [],
    ),
    (
        "interleaved-other-lines",
        "\n".join(["config: {...}", REC[0], "Training Progress: 33%|###", REC[1], "WARNING x", REC[2]]),
        [1, 2, 3],
        [],
    ),
    ("damaged-middle-line", "\n".join([REC[0], "step:2 - actor/entropy:0.4x - b:1", REC[2]]), [1, 3], [2]),
    (
        "damaged-two-lines",
        "\n".join(["noise", REC[0], "step:2 - a:", "step:9 - b:1e-", REC[2]]),
        [1, 3],
        [3, 4],
    ),
    ("cut-off-last", "\n".join([REC[0], REC[1], REC[2][:-7]]), [1, 2], [3]),
    ("damaged-after-progress-redraw", f"{REC[0]}\nbar 10%\rstep:2 - a:0.1.2\n{REC[2]}", [1, 3], [2]),
]


@pytest.mark.parametrize(
    ("text", "steps", "lines"), [c[1:] for c in VERL_LOGS], ids=[c[0] for c in VERL_LOGS]
)
def test_verl_console_a_damaged_record_costs_that_record(text, steps, lines):
    run, caught = _read(text)
    assert run.format == VERL_CONSOLE and run.n_steps == len(steps)
    assert run.steps.tolist() == steps
    assert run.series["actor/entropy"][0].tolist() == steps
    if not lines:
        assert caught == [] and run.warnings == ()
        return
    (warning,) = caught
    where = f"at line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}:"
    assert f"{len(lines)} damaged verl console record" in str(warning.message)
    assert where in str(warning.message)
    assert run.warnings == (str(warning.message),)


def test_verl_console_values_nan_kept():
    run, _ = _read("\n".join(RAY + r for r in REC))
    assert math.isnan(run.series["critic/vf_loss"][1][1])
    assert run.series["critic/score/mean"][1].tolist() == [0.3, 0.35, 0.4]


def test_many_damaged_lines_are_listed_up_to_ten():
    text = "\n".join([REC[0], *[f"step:{s} - a:0.{s}x" for s in range(2, 16)], REC[2]])
    run, (warning,) = _read(text)
    assert "14 damaged verl console records skipped (2 read), at lines 2, 3, 4" in str(warning.message)
    assert "11 and 4 more" in str(warning.message) and run.n_steps == 2


def test_numbered_lines_count_file_lines():
    assert T.numbered_lines("a\r\nb\rc\n\nd") == [(1, "a"), (2, "b"), (2, "c"), (3, ""), (4, "d")]
    assert [piece for _, piece in T.numbered_lines("a\r\nb\rc\n\nd")] == T.split_lines("a\r\nb\rc\n\nd")


# --- TRL printed ------------------------------------------------------------------------------

D = [
    "{'loss': 0.0123, 'grad_norm': 0.31, 'reward': 0.5, 'epoch': 0.01}",
    "{'loss': 0.0119, 'grad_norm': nan, 'reward': 0.6, 'epoch': 0.02}",
    "{'loss': 0.0101, 'grad_norm': 0.29, 'reward': 0.7, 'epoch': 0.03}",
]
BAR = " 10%|#         | 1/10 [00:01<00:09,  1.00it/s]"

TRL_LOGS = [
    ("clean", "\n".join(D), [1, 2, 3], []),
    ("inside-progress-bars", "\n".join(f"{BAR}\r{d}{BAR}" for d in D), [1, 2, 3], []),
    ("one-dict-over-lines", "\n".join([D[0], D[1][:20], D[1][20:], D[2]]), [1, 2, 3], []),
    ("damaged-dict", "\n".join([D[0], "{'loss': 0.01, 'grad_norm': 0.3.1, 'epoch': 1}", D[2]]), [1, 2], [2]),
    ("cut-off-then-next", "\n".join([D[0], D[1][:25], "", "text", D[2]]), [1, 2], [2]),
]


@pytest.mark.parametrize(("text", "steps", "lines"), [c[1:] for c in TRL_LOGS], ids=[c[0] for c in TRL_LOGS])
def test_trl_printed_a_damaged_dict_costs_that_dict(text, steps, lines):
    run, caught = _read(text)
    assert run.format == TRL_PRINTED and run.steps.tolist() == steps
    if not lines:
        assert caught == []
        return
    (warning,) = caught
    assert f"damaged TRL printed record skipped ({len(steps)} read), at line {lines[0]}:" in str(
        warning.message
    )


def test_records_functions_agree_with_the_parsers():
    text = "\n".join([REC[0], "step:2 - a:", REC[2]])
    assert T.parse_verl_console(text) == (T.verl_console_records(text)[0], 1)
    text = "\n".join([D[0], D[1][:25], D[2]])
    rows, damaged = T.trl_printed_records(text)
    assert T.parse_trl_printed(text) == (rows, 1) and damaged == [2]


# --- properties: the console parser against any wrap, prefix and colour -------------------------

_keys = st.from_regex(r"[a-z][a-z0-9_]{0,6}(/[a-z0-9_@()-]{1,8}){0,2}", fullmatch=True).filter(
    lambda k: "step" not in k
)
_values = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(10**9), 10**9)
_records = st.lists(
    st.tuples(st.integers(0, 10**6), st.dictionaries(_keys, _values, min_size=1, max_size=5)),
    min_size=1,
    max_size=3,
)
_ray = st.builds(
    lambda name, pid, ip, colour: (
        f"\x1b[36m({name}pid={pid}{ip})\x1b[0m " if colour else f"({name}pid={pid}{ip}) "
    ),
    st.sampled_from(["", "TaskRunner ", "WorkerDict ", "main_task "])
    | st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,10} ", fullmatch=True),
    st.integers(1, 10**7),
    st.sampled_from(["", ", ip=10.0.0.2", ", ip=fe80::1"]),
    st.booleans(),
)
_prefix = st.just("") | _ray
_colour = st.sampled_from(["", "\x1b[32m", "\x1b[1;33m", "[36m"])


def _record(step: int, fields: dict[str, float | int]) -> str:
    return " - ".join([f"step:{step}", *(f"{k}:{v!r}" for k, v in fields.items())])


def _pieces(text: str, cuts: list[int]) -> list[str]:
    at = sorted({c % len(text) for c in cuts} - {0})
    return [text[i:j] for i, j in zip([0, *at], [*at, len(text)])]


@settings(max_examples=80, deadline=None)
@given(records=_records, cuts=st.lists(st.integers(0, 10**4), max_size=6), prefix=_prefix, colour=_colour)
def test_verl_console_wrapped_at_any_byte_with_prefixes_and_colours(records, cuts, prefix, colour):
    lines = []
    for step, fields in records:
        for piece in _pieces(_record(step, fields), cuts):
            lines.append(prefix + (f"{colour}{piece}\x1b[0m" if colour else piece))
        lines.append("Training Progress:  50%|#####     | 5/10")
    rows, damaged = T.verl_console_records("\n".join(lines))
    assert damaged == []
    want = [{**{k: float(v) for k, v in fields.items()}, "step": step} for step, fields in records]
    assert len(rows) == len(want), (rows, lines)
    for got, expected in zip(rows, want):
        assert got.keys() == expected.keys()
        assert all(got[k] == v or (math.isnan(v) and math.isnan(got[k])) for k, v in expected.items())


@settings(max_examples=60, deadline=None)
@given(records=_records, bad=st.integers(0, 2), prefix=_prefix)
def test_verl_console_one_damaged_record_costs_only_it(records, bad, prefix):
    bad %= len(records)
    lines = [prefix + _record(step, fields) for step, fields in records]
    lines[bad] += " - broken:1.2.3"  # a field that does not read back
    rows, damaged = T.verl_console_records("\n".join(lines))
    assert damaged == [bad + 1]
    assert [r["step"] for r in rows] == [step for i, (step, _) in enumerate(records) if i != bad]

"""Console logs through the run reader (:mod:`rlmetrics.readers.textlogs`): verl's ``step:N - key:value``
records and TRL's printed dicts, clean and damaged; a damaged record costs that record, with one
``RunReadWarning`` naming its line. Every log is written here, in the forms the trainers print."""

from __future__ import annotations

import io
import math
import subprocess
import sys
import warnings
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics.errors import RunReadWarning
from rlmetrics.health.sources import (
    RLMETRICS_JSONL,
    SOURCES,
    TRL_TRAINER_STATE,
    RunReadError,
    load_history,
)
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
    ("cut-inside-its-first-field", "\n".join([REC[0], REC[1], REC[2][:12]]), [1, 2], [3]),
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
    ("cut-inside-its-first-item-then-next", "\n".join([D[0], D[1][:9], "", "text", D[2]]), [1, 2], [2]),
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


@pytest.mark.parametrize(
    ("text", "series", "what"),
    [
        (  # a paste cut inside a field, the Ray prefix after words of the user's own
            "log: (main_task pid=7) step:40 - actor/pg_loss:nan - actor/grad_norm:nan - critic/sco",
            {"actor/pg_loss": [math.nan], "actor/grad_norm": [math.nan]},
            "verl console",
        ),
        (  # a paste that ends after a separator: every field read, nothing cut in two
            "step:5 - critic/score/mean:0.25 - response_length/clip_ratio:1.0 -",
            {"critic/score/mean": [0.25], "response_length/clip_ratio": [1.0]},
            "verl console",
        ),
        (  # a dict cut inside a key: the items before its last comma
            "{'loss': 0.5, 'reward': 1.0, 'epoch': 0.1}\n{'loss': 0.0, 'grad_norm': 0.0, 'learning_ra\n",
            {"loss": [0.5, 0.0], "reward": [1.0], "grad_norm": [0.0]},
            "TRL printed",
        ),
    ],
    ids=["verl-cut-in-a-field", "verl-cut-after-a-separator", "trl-cut-in-a-key"],
)
def test_a_record_cut_off_at_its_end_is_read_up_to_the_cut(text, series, what):
    run, caught = _read(text)
    assert set(series) <= set(run.series)
    for key, values in series.items():
        got = run.series[key][1].tolist()
        assert len(got) == len(values) and all(
            (math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(got, values)
        ), (key, got)
    (warning,) = caught
    assert f"1 {what} record cut off at its end, read up to the cut" in str(warning.message)


def test_a_pasted_markdown_table_and_an_elided_table_are_read():
    # a notebook's table as GitHub writes it when pasted (two dashes a cell), the last row cut
    pasted = "\n".join(
        [
            "Step | Training Loss | reward | reward_std | kl",
            "-- | -- | -- | -- | --",
            "1 | 0.000000 | -2.500000 | 1.250000 | nan",
            "2 | 0.000100 | -1.000000 | 0.000000 | nan",
            "3 | 0.000100 | 0.5",
        ]
    )
    run, _ = _read(pasted)
    assert run.format == TRL_PRINTED and run.steps.tolist() == [1, 2]
    assert run.series["reward_std"][1].tolist() == [1.25, 0.0]
    assert np_all_nan(run.series["kl"][1])
    # a table written out by hand, rows left out as "..."
    elided = "Step  loss  grad_norm\n1     0     0\n2     0     0\n...\n10    0     0\n"
    run, _ = _read(elided)
    assert run.steps.tolist() == [1, 2, 10] and run.series["grad_norm"][1].tolist() == [0.0] * 3


def np_all_nan(values: Any) -> bool:
    return all(math.isnan(v) for v in values)


def test_records_functions_agree_with_the_parsers():
    text = "\n".join([REC[0], "step:2 - a:", REC[2]])
    assert T.parse_verl_console(text) == (T.verl_console_records(text)[0], 1)
    text = "\n".join([D[0], D[1][:9], D[2]])
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


# --- the parsers, and load_history detecting text logs ----------------------------------------


INF = math.inf
DIM_RAY = "\x1b[2m\x1b[36m(main_task pid=926049)\x1b[0m "


def _same(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> bool:
    """Rows equal, NaN equal to NaN."""
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if g.keys() != w.keys():
            return False
        for k, v in w.items():
            if not (g[k] == v or (isinstance(v, float) and math.isnan(v) and math.isnan(g[k]))):
                return False
    return True


def _wrap(line: str, width: int, prefix: str = "") -> list[str]:
    """``line`` hard-wrapped at ``width`` characters, each piece with ``prefix`` in front."""
    return [prefix + line[i : i + width] for i in range(0, len(line), width)]


# ---------------------------------------------------------------------------------------------
# verl console
# ---------------------------------------------------------------------------------------------

REC1 = "step:1 - actor/entropy:0.452 - critic/score/mean:0.300 - timing_s/gen:1.204"
REC2 = "step:2 - actor/entropy:0.448 - critic/score/mean:0.350 - timing_s/gen:1.187"
ROWS12 = [
    {"actor/entropy": 0.452, "critic/score/mean": 0.3, "timing_s/gen": 1.204, "step": 1},
    {"actor/entropy": 0.448, "critic/score/mean": 0.35, "timing_s/gen": 1.187, "step": 2},
]
CONFIG = [
    "{'actor_rollout_ref': {'actor': {'clip_ratio': 0.2,",
    "                                 'entropy_coeff': 0.001,",
    "                                 'ppo_epochs': 1}}}",
]

VERL_CASES = [
    ("clean", [REC1, REC2], ROWS12, 0),
    ("ray-prefix-coloured", [RAY + REC1, RAY + REC2], ROWS12, 0),
    ("ray-prefix-dim-coloured", [DIM_RAY + REC1, DIM_RAY + REC2], ROWS12, 0),
    ("ray-prefix-with-ip", [f"(WorkerDict pid=1609, ip=10.1.2.3) {REC1}", REC2], ROWS12, 0),
    (
        "esc-lost-in-a-copy",
        [f"[36m(TaskRunner pid=7)[0m {REC1}", f"[36m(TaskRunner pid=7)[0m {REC2}"],
        ROWS12,
        0,
    ),
    ("crlf", [REC1 + "\r", REC2 + "\r"], ROWS12, 0),
    (
        "interleaved-config-warnings-bars",
        [
            *[RAY + c for c in CONFIG],
            "/usr/lib/python3/site-packages/torch/fsdp.py:690: FutureWarning: deprecated",
            "Training Progress:   0%|          | 0/10 [00:00<?, ?it/s]",
            RAY + REC1,
            RAY,
            "Training Progress:  10%|#         | 1/10 [00:11<01:40, 11.1s/it]\r" + RAY + REC2,
            RAY + "list(reward_extra_infos_dict.keys())=[]",
        ],
        ROWS12,
        0,
    ),
    ("progress-bar-before-on-the-line", ["  5%|#  | 1/20 [00:01<00:19] " + REC1, REC2], ROWS12, 0),
    ("logging-prefix", ["2025-01-01 12:00:00,001 INFO " + REC1, "[train] " + REC2], ROWS12, 0),
    (
        "ray-repeated-suffix",
        [RAY + REC1 + "\x1b[32m [repeated 3x across cluster]\x1b[0m", REC2],
        ROWS12,
        0,
    ),
    ("wrap-in-a-key", [REC1[:40], REC1[40:], REC2], ROWS12, 0),
    ("wrap-in-a-number", [REC1[:27], REC1[27:], REC2[:70], REC2[70:]], ROWS12, 0),
    ("wrap-in-step", ["ste", "p:1" + REC1[6:], REC2], ROWS12, 0),
    ("wrap-prefix-repeated", [*_wrap(REC1, 33, RAY), *_wrap(REC2, 33, RAY)], ROWS12, 0),
    ("wrap-width-1", [*_wrap(REC1, 1, RAY), *_wrap(REC2, 1)], ROWS12, 0),
    ("wrap-space-lost", [REC1[:28].rstrip(), REC1[28:].lstrip(), REC2], ROWS12, 0),
    (
        "wrap-with-another-process-between",
        [RAY + REC1[:30], "(WorkerDict pid=9) loading shard 3/4", RAY + REC1[30:], REC2],
        ROWS12,
        0,
    ),
    (
        "nan-inf-ints-exponents",
        ["step:3 - a:nan - b:inf - c:-inf - d:12 - e:1e-05 - f:-2.5E+3 - g:NaN - h:.5"],
        [{"a": NAN, "b": INF, "c": -INF, "d": 12.0, "e": 1e-05, "f": -2500.0, "g": NAN, "h": 0.5, "step": 3}],
        0,
    ),
    (
        "non-numeric-skipped",
        ["step:4 - a:0.1 - ids:[1, 2] - mode:None - name:qwen2 - shape:(3, 4) - b:2"],
        [{"a": 0.1, "b": 2.0, "step": 4}],
        0,
    ),
    (
        "validation-then-training-same-step",
        [
            "step:0 - val-core/openai/gsm8k/acc/mean@1:0.521",
            "step:0 - critic/lr(1e-4):0.100 - actor/pg_loss:-0.003",
        ],
        [
            {"val-core/openai/gsm8k/acc/mean@1": 0.521, "step": 0},
            {"critic/lr(1e-4)": 0.1, "actor/pg_loss": -0.003, "step": 0},
        ],
        0,
    ),
    ("damaged-cut-in-its-first-field", [REC1, REC2[:12]], ROWS12[:1], 1),
    (
        "cut-off-last-read-to-the-cut",
        [REC1, REC2[:-9]],
        [ROWS12[0], {"actor/entropy": 0.448, "critic/score/mean": 0.35, "step": 2}],
        0,
    ),
    ("cut-after-a-separator", [REC1, REC2 + " -"], ROWS12, 0),
    ("damaged-empty-value", [REC1, "step:2 - actor/entropy:", REC2], ROWS12, 1),
    ("damaged-number", ["step:1 - a:0.4x5 - b:1", REC2, "step:3 - c:1e-"], ROWS12[1:], 2),
    ("no-record", ["hello", "step: the first one", "steps 3 of 10"], [], 0),
]


@pytest.mark.parametrize(
    ("lines", "rows", "skipped"), [c[1:] for c in VERL_CASES], ids=[c[0] for c in VERL_CASES]
)
def test_verl_console_records(lines, rows, skipped):
    got, n = T.parse_verl_console("\n".join(lines) + "\n")
    assert _same(got, rows), got
    assert n == skipped
    assert T.is_verl_console("\n".join(lines)) == bool(rows)


# ---------------------------------------------------------------------------------------------
# TRL / transformers printed dicts
# ---------------------------------------------------------------------------------------------

D1 = "{'loss': 0.0123, 'grad_norm': 0.31, 'learning_rate': 1e-06, 'reward': 0.5, 'epoch': 0.01}"
D2 = "{'loss': -0.0045, 'grad_norm': 0.29, 'learning_rate': 2e-06, 'reward': 0.625, 'epoch': 0.02}"
DROWS = [
    {"loss": 0.0123, "grad_norm": 0.31, "learning_rate": 1e-06, "reward": 0.5, "epoch": 0.01, "step": 1},
    {"loss": -0.0045, "grad_norm": 0.29, "learning_rate": 2e-06, "reward": 0.625, "epoch": 0.02, "step": 2},
]
SUMMARY = "{'train_runtime': 3462.78, 'train_samples_per_second': 0.404, 'train_loss': -0.0122, 'epoch': 1.0}"
BAR2 = "\r 23%|##3       | 10/43 [14:12<44:45, 81.39s/it]"

TRL_CASES = [
    ("clean", [D1, D2], DROWS, 0),
    (
        "bare-nan-inf",
        ["{'loss': nan, 'grad_norm': inf, 'reward': -inf, 'kl': NaN, 'epoch': 0.1}"],
        [{"loss": NAN, "grad_norm": INF, "reward": -INF, "kl": NAN, "epoch": 0.1, "step": 1}],
        0,
    ),
    (
        "progress-bars-around",
        [f"{BAR2}\r{' ' * 40}\r{D1}{BAR2}", f"{BAR2}{BAR2}{D2}"],
        DROWS,
        0,
    ),
    ("summary-dict-skipped", [D1, D2, BAR2 + SUMMARY + BAR2], DROWS, 0),
    ("pprint-multi-line", [*D1.replace(", '", ",\n '").split("\n"), D2], DROWS, 0),
    ("wrap-in-a-key-and-a-number", [D1[:20], D1[20:50], D1[50:], *_wrap(D2, 7)], DROWS, 0),
    (
        "step-and-global-step-used",
        ["{'loss': 0.1, 'step': 10}", "{'loss': 0.2, 'global_step': 20}", "{'loss': 0.3}"],
        [{"loss": 0.1, "step": 10}, {"loss": 0.2, "step": 20}, {"loss": 0.3, "step": 21}],
        0,
    ),
    (
        "eval-dict-joins-the-step-before",
        [D1, "{'eval_loss': 0.7, 'eval_runtime': 3.1, 'epoch': 0.01}", D2],
        [DROWS[0], {"eval_loss": 0.7, "eval_runtime": 3.1, "epoch": 0.01, "step": 1}, DROWS[1]],
        0,
    ),
    (
        "numpy-torch-reprs-and-other-values",
        ["{'loss': np.float64(0.25), 'kl': tensor(0.5, device='cuda:0'), 'lr': [1e-06], 'tag': 'a'}"],
        [{"loss": 0.25, "kl": 0.5, "step": 1}],
        0,
    ),
    ("config-dicts-ignored", [*CONFIG, "{'model': 'qwen', 'lr': 1e-05}", D1, D2], DROWS, 0),
    ("damaged-cut-in-its-first-item", [D1, D2[:9], D2], DROWS, 1),
    (
        "cut-off-read-to-the-cut",
        [D1, D2[:40], D2],
        [DROWS[0], {"loss": -0.0045, "grad_norm": 0.29, "step": 2}, {**DROWS[1], "step": 3}],
        0,
    ),
    ("damaged-not-a-literal", [D1, "{'loss': 0.1 'grad_norm': 2}", D2], DROWS, 1),
    (
        "progress-table-pipes",
        [
            "| Step | Training Loss | reward | rewards / correctness |",
            "|---|---|---|---|",
            "| 10 | 0.0 | 0.5 | 0.25 |",
            "| 20 | 0.0012 | 0.75 | nan |",
        ],
        [
            {"loss": 0.0, "reward": 0.5, "rewards/correctness": 0.25, "step": 10},
            {"loss": 0.0012, "reward": 0.75, "rewards/correctness": NAN, "step": 20},
        ],
        0,
    ),
    (
        "progress-table-tabs-no-log",
        ["Step\tTraining Loss\tValidation Loss\treward", "5\tNo log\t0.9\t0.1", "10\t0.25\t0.8\t0.2"],
        [
            {"eval_loss": 0.9, "reward": 0.1, "step": 5},
            {"loss": 0.25, "eval_loss": 0.8, "reward": 0.2, "step": 10},
        ],
        0,
    ),
    (
        "progress-table-spaces",
        ["Step  Training Loss  reward  kl", "1  0.000100  0.4  0.0", "2  0.000200  0.6  1e-05", "done"],
        [
            {"loss": 1e-4, "reward": 0.4, "kl": 0.0, "step": 1},
            {"loss": 2e-4, "reward": 0.6, "kl": 1e-05, "step": 2},
        ],
        0,
    ),
    ("only-the-summary", [SUMMARY], [], 0),
]


@pytest.mark.parametrize(
    ("lines", "rows", "skipped"), [c[1:] for c in TRL_CASES], ids=[c[0] for c in TRL_CASES]
)
def test_trl_printed_dicts(lines, rows, skipped):
    got, n = T.parse_trl_printed("\n".join(lines) + "\n")
    assert _same(got, rows), got
    assert n == skipped
    assert T.is_trl_printed("\n".join(lines)) == bool(rows)


def test_clean_line_and_split_lines():
    assert T.clean_line("\x1b[33m(raylet, ip=1.2.3.4)\x1b[0m x") == ("", "(raylet, ip=1.2.3.4) x")
    assert T.clean_line("(run pid=3) \x1b[1mbold\x1b[0m") == ("(run pid=3)", "bold")
    assert T.split_lines("a\rb\r\nc") == ["a", "b", "c"]


# ---------------------------------------------------------------------------------------------
# Through load_history
# ---------------------------------------------------------------------------------------------

FILES = [
    ("verl-console", "run.log", "\n".join([*CONFIG, *_wrap(REC1, 50, RAY), RAY + REC2]), VERL_CONSOLE),
    ("verl-console-no-suffix", "output", f"{REC1}\n{REC2}\n", VERL_CONSOLE),
    ("trl-printed", "train.txt", f"Loading...\n{BAR2}\r{D1}\n{D2}{BAR2}\n{SUMMARY}\n", TRL_PRINTED),
    ("trl-table", "cell.txt", "Step | Training Loss | reward\n1 | 0.1 | 0.5\n2 | 0.2 | 0.6\n", TRL_PRINTED),
    (
        "trainer-state-renamed",
        "state.txt",
        '{\n  "log_history": [\n    {"loss": 0.1, "step": 1}\n  ]\n}\n',
        TRL_TRAINER_STATE,
    ),
    (
        "jsonl-unchanged",
        "metrics.txt",
        '{"step": 1, "loss": 0.1}\n{"step": 2, "loss": 0.2}\n',
        RLMETRICS_JSONL,
    ),
]


@pytest.mark.parametrize(("name", "text", "kind"), [f[1:] for f in FILES], ids=[f[0] for f in FILES])
def test_load_history_detects_text_logs_by_content(tmp_path, name, text, kind):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        history, source = load_history(path)
    assert source == kind and source in SOURCES
    steps, values = history["loss" if kind != VERL_CONSOLE else "actor/entropy"]
    assert steps.tolist() == ([1] if kind == TRL_TRAINER_STATE else [1, 2])
    assert values.dtype.kind == "f"


def test_load_history_verl_console_values(tmp_path):
    path = tmp_path / "verl.txt"
    path.write_text("\n".join(["noise", *_wrap(REC1, 17, DIM_RAY), "step:2 - actor/entropy:nan"]) + "\n")
    history, source = load_history(path)
    assert source == VERL_CONSOLE
    assert history["actor/entropy"][0].tolist() == [1, 2]
    assert history["actor/entropy"][1][0] == 0.452 and math.isnan(history["actor/entropy"][1][1])
    assert history["timing_s/gen"][1].tolist() == [1.204]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            f"{REC1}\nstep:2 - a:\nstep:3 - b:1e-\n{REC2}\n",
            r"log\.txt: 2 damaged verl console records skipped \(2 read\)",
        ),
        (f"{D1}\n{D2[:9]}\n{D2}\n", r"log\.txt: 1 damaged TRL printed record skipped \(2 read\)"),
    ],
    ids=["verl", "trl"],
)
def test_damaged_records_cost_one_warning(tmp_path, text, match):
    path = tmp_path / "log.txt"
    path.write_text(text)
    with pytest.warns(RuntimeWarning, match=match) as record:
        history, _ = load_history(path)
    assert len([w for w in record if issubclass(w.category, RuntimeWarning)]) == 1
    assert history


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("hello\nworld\n", r"the first line is not JSON .* no text log was recognised .*verl console log"),
        ("step:1 - a:x\nstep:2 - b:[1]\n", r"no text log was recognised in the file; expected .*TRL"),
        (f"{SUMMARY}\n", r"no text log was recognised"),
        ("[1, 2]\n", r"expected a JSON object per line; the first line is a list"),
        ("3\nstep:1 - a:0.5\n", None),
    ],
    ids=["plain-text", "no-numeric-field", "only-summary", "json-not-an-object", "json-number-then-verl"],
)
def test_unrecognised_text_is_a_run_read_error(tmp_path, text, match):
    path = tmp_path / "log.txt"
    path.write_text(text)
    if match is None:  # a first line that is JSON but no object: the text is still looked at
        assert load_history(path)[1] == VERL_CONSOLE
        return
    with pytest.raises(RunReadError, match=match):
        load_history(path)


def test_detection_reads_the_head_only(tmp_path):
    path = tmp_path / "late.txt"
    path.write_text("x" * 100 + "\n" + ("padding line\n" * 50_000) + REC1 + "\n")
    assert T.is_verl_console(path.read_text())
    with pytest.raises(RunReadError, match="no text log was recognised"):
        load_history(path)  # the first record lies past the first 512 KiB


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------

_rows = st.lists(
    st.tuples(st.integers(0, 10**6), st.dictionaries(_keys, _values, min_size=1, max_size=6)),
    min_size=1,
    max_size=4,
)
_prefixes = st.sampled_from(["", "(TaskRunner pid=12) ", RAY, DIM_RAY, "(WorkerDict pid=5, ip=10.0.0.2) "])
_junk = st.sampled_from(
    [
        "",
        "Training Progress:  50%|#####     | 5/10 [00:05<00:05,  1.00it/s]",
        "(WorkerDict pid=77) WARNING: a warning of another process",
        "{'actor': {'lr': 1e-06}}",
        "list(reward_extra_infos_dict.keys())=[]",
    ]
)


def _expected(rows: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [{**{k: float(v) for k, v in fields.items()}, "step": step} for step, fields in rows]


@settings(max_examples=60, deadline=None)
@given(rows=_rows, width=st.integers(1, 150), prefix=_prefixes, junk=_junk, colour=st.booleans())
def test_verl_console_round_trip_wrapped_prefixed_coloured(rows, width, prefix, junk, colour):
    lines: list[str] = []
    for step, fields in rows:
        for piece in _wrap(_record(step, fields), width):
            lines.append(prefix + (f"\x1b[2m{piece}\x1b[0m" if colour else piece))
        lines.append(junk)
    got, skipped = T.parse_verl_console("\n".join(lines))
    assert skipped == 0
    assert _same(got, _expected(rows)), (got, lines)


@settings(max_examples=40, deadline=None)
@given(rows=_rows, width=st.integers(1, 150), bars=st.booleans())
def test_trl_printed_round_trip_wrapped(rows, width, bars):
    lines: list[str] = []
    for _, fields in rows:
        printed = repr({"loss": 0.5, **fields})
        pieces = _wrap(printed, width)
        if bars:
            pieces[0] = BAR2 + "\r" + pieces[0]
            pieces[-1] += BAR2
        lines += pieces
    got, skipped = T.parse_trl_printed("\n".join(lines))
    assert skipped == 0
    want = [
        {**{k: float(v) for k, v in {"loss": 0.5, **fields}.items()}, "step": i}
        for i, (_, fields) in enumerate(rows, 1)
    ]
    assert _same(got, want), (got, lines)


def test_the_old_module_path_is_the_same_module():
    # In a fresh interpreter: pytest's doctest collection imports the shim file as a module of its own,
    # so inside this process the answer depends on which worker collected it.
    code = (
        "import rlmetrics.health.textlogs as old, rlmetrics.readers.textlogs as new\n"
        "from rlmetrics.health.textlogs import parse_trl_printed\n"
        "print(old is new, parse_trl_printed is new.parse_trl_printed)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True"]


# ---------------------------------------------------------------------------------------------
# The bracket scanner, dicts without their braces, ms-swift's step counters
# ---------------------------------------------------------------------------------------------


def _reference_scan(text: str, depth: int = 0) -> tuple[int | None, list[int]]:
    """A character-by-character scan of the literal at ``text[0]``: where it closes (the offset
    after its bracket), and its item boundaries (offsets of the commas at its level)."""
    quote, escaped, commas = "", False, []
    for k, c in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "{[(":
            depth += 1
        elif c in "}])":
            depth -= 1
            if depth == 0:
                return k + 1, commas
        elif c == "," and depth == 1:
            commas.append(k)
    return None, commas


def _offset(lines: list[str], joined_by: str, at: tuple[int, int]) -> int:
    line, col = at
    return sum(len(piece) + len(joined_by) for piece in lines[:line]) + col


@pytest.mark.parametrize(
    ("lines", "joined_by", "closes_at"),
    [
        # a hard wrap after a backslash: it escapes the quote that starts the next piece
        (["{'a\\", "'b': 1}"], "", (1, 7)),
        # lines: the backslash escapes the line break, the quote closes the string, and "b': 1}"
        # opens another that never closes
        (["{'a\\", "'b': 1}"], "\n", None),
        (["{'a\\", "x', 'b': 1}"], "\n", (1, 11)),
        (["{'a': '}\\\\'", ", 'b': (1, 2)}"], "", (1, 14)),
    ],
    ids=["wrap-escape-carried", "lines-escape-taken-by-the-break", "lines-closes", "escaped-backslash"],
)
def test_scan_carries_a_backslash_as_the_lines_are_joined(lines, joined_by, closes_at):
    scan = T._scan(lines, 0, 0, joined_by=joined_by)
    assert scan.end == closes_at
    end, _ = _reference_scan(joined_by.join(lines))
    assert (None if scan.end is None else _offset(lines, joined_by, scan.end)) == end


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(st.text(alphabet="{}[]()'\",\\a ", max_size=12), min_size=1, max_size=5),
    joined_by=st.sampled_from(["", "\n"]),
    depth=st.integers(0, 1),
)
def test_scan_equals_a_character_scan_of_the_joined_text(lines, joined_by, depth):
    scan = T._scan(lines, 0, 0, depth=depth, joined_by=joined_by)
    end, commas = _reference_scan(joined_by.join(lines), depth)
    assert (None if scan.end is None else _offset(lines, joined_by, scan.end)) == end
    assert [_offset(lines, joined_by, c) for c in scan.commas] == commas


BRACELESS = [
    (
        "opening-brace-lost",
        "'loss': -0.0, 'grad_norm': 0.0, 'reward': 0.34, 'percentage': '0.13%'}\n",
        [{"loss": -0.0, "grad_norm": 0.0, "reward": 0.34, "step": 1}],
    ),
    (
        "both-braces-lost",
        "'loss': 0.1, 'reward': 0.5, 'epoch': 0.1\n'loss': 0.2, 'reward': nan, 'epoch': 0.2\n",
        [
            {"loss": 0.1, "reward": 0.5, "epoch": 0.1, "step": 1},
            {"loss": 0.2, "reward": NAN, "epoch": 0.2, "step": 2},
        ],
    ),
    (
        "inside-progress-bars-coloured",
        f"{BAR}\x1b[1m'loss': 0.1, 'reward': 0.5, 'epoch': 0.1\x1b[0m\r 20%|##        | 2/10\n",
        [{"loss": 0.1, "reward": 0.5, "epoch": 0.1, "step": 1}],
    ),
    (
        "opening-lost-hard-wrapped",
        "'loss': 0.1, 'grad_norm': 0.\n3, 'reward': 0.5}\n",
        [{"loss": 0.1, "grad_norm": 0.3, "reward": 0.5, "step": 1}],
    ),
    (  # the items of a damaged dict (and of a pprint) are no dicts of their own
        "damaged-dict-items-not-read",
        "{'loss': 0.01, 'grad_norm': 0.3.1, 'epoch': 1, 'reward': 2}\n{'loss': 0.01,\n 'grad_norm': 0.3.1,\n"
        " 'epoch': 1, 'reward': 2}\n{'loss': 0.2, 'reward': 1}\n",
        [{"loss": 0.2, "reward": 1.0, "step": 1}],
    ),
    ("one-quoted-item-is-text", "note: 'loss': 0.5\n{'loss': 0.2}\n", [{"loss": 0.2, "step": 1}]),
]


@pytest.mark.parametrize(("text", "rows"), [c[1:] for c in BRACELESS], ids=[c[0] for c in BRACELESS])
def test_dicts_without_their_braces_are_read(text, rows):
    got, _, cut = T._trl_records(text)
    assert _same(got, rows), got
    assert cut == []
    assert T.is_trl_printed(text)


@settings(max_examples=40, deadline=None)
@given(rows=_rows, width=st.integers(40, 150), lost=st.sampled_from(["opening", "both"]), bars=st.booleans())
def test_trl_printed_braceless_round_trip(rows, width, lost, bars):
    lines: list[str] = []
    for _, fields in rows:
        printed = repr({"loss": 0.5, **fields})[1:]
        if lost == "both":
            lines.append((BAR2[1:] if bars else "") + printed[:-1])
            continue
        pieces = _wrap(printed, width)
        if bars:
            pieces[0] = BAR2 + "\r" + pieces[0]
            pieces[-1] += BAR2
        lines += pieces
    got, skipped = T.parse_trl_printed("\n".join(lines))
    want = [
        {**{k: float(v) for k, v in {"loss": 0.5, **fields}.items()}, "step": i}
        for i, (_, fields) in enumerate(rows, 1)
    ]
    assert skipped == 0 and _same(got, want), (got, lines)


SWIFT = [
    (
        "counter-in-the-dict",
        "{'loss': 0.1, 'reward': 0.5, 'global_step/max_steps': '2/4389', 'percentage': '0.05%'}\n"
        "{'loss': 0.2, 'reward': 0.6, 'global_step/max_steps': '3/4389'}\n",
        [2, 3],
    ),
    (
        "counter-braceless",
        "'loss': 0.1, 'reward': 0.5, 'global_step/max_steps': '7/4389'}\n",
        [7],
    ),
    (
        "train-bar-before-each",
        "Train:   0%|          | 2/4389 [00:13<8:03:11]\n{'loss': 0.1, 'reward': 0.5}\n"
        "Train:   0%|          | 5/4389 [00:20<8:03:11]\r{'loss': 0.2, 'reward': 0.6}\n",
        [2, 5],
    ),
    (  # a bar that did not move on, and other tools' bars, number after the dict before
        "bar-not-moved-and-other-bars",
        "Train:   0%|          | 4/4389\n{'loss': 0.1}\n{'loss': 0.2}\nProcessed prompts: 100%|####| 64/64\n"
        "{'loss': 0.3}\n",
        [4, 5, 6],
    ),
]


@pytest.mark.parametrize(("text", "steps"), [c[1:] for c in SWIFT], ids=[c[0] for c in SWIFT])
def test_ms_swift_step_counters_give_the_step(text, steps):
    run, caught = _read(text)
    assert run.format == TRL_PRINTED and caught == []
    assert run.series["loss"][0].tolist() == steps
    assert "global_step/max_steps" not in run.series

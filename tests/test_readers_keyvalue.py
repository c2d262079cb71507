"""Printed ``key: value`` summaries through the run reader (:mod:`rlmetrics.readers.keyvalue`): a
record a marked step, else one; clean and damaged (colours, wraps, noise, broken numbers, a cut
end); configs are not runs, and the other formats are still told as before. Every log is written
here, in the forms trainers, custom loops and W&B print."""

from __future__ import annotations

import io
import math
import warnings
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmetrics.errors import RunReadError, RunReadWarning
from rlmetrics.readers import KEY_VALUE, TRL_PRINTED, VERL_CONSOLE, read_run
from rlmetrics.readers import keyvalue as KV

NAN = math.nan
RAY = "\x1b[36m(TaskRunner pid=7)\x1b[0m "
TYPED = (
    "completions/mean_length: 256   completions/clipped_ratio: 1   mean_terminated_length: 0\n"
    "reward: 0   reward_std: 0   frac_reward_zero_std: 1   loss: 0   grad_norm: 0\n"
)
WANDB = (
    "wandb: \nwandb: Run history:\nwandb:   train/loss ▁▃▅█\nwandb:   train/reward ▂▄▆█\nwandb: \n"
    "wandb: Run summary:\nwandb:   train/global_step 100\nwandb:          train/loss 0.0123\n"
    "wandb:        train/reward 0.5\nwandb:            _runtime 123.4\nwandb: \n"
    "wandb: 🚀 View run demo at: https://wandb.ai/x/y\n"
)
HF_METRICS = (
    "***** train metrics *****\n  epoch                    =        3.0\n"
    "  total_flos               =   1234567GF\n  train_loss               =     0.1234\n"
    "  train_runtime            = 0:01:23.45\n"
)


def _read(text: str) -> tuple[Any, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = read_run(io.BytesIO(text.encode()))
    return run, [w for w in caught if issubclass(w.category, RunReadWarning)]


def _series(run: Any) -> dict[str, tuple[list[int], list[float]]]:
    return {k: (s.tolist(), v.tolist()) for k, (s, v) in run.series.items()}


FORMS = [
    (
        "typed-summary-one-record",
        f"```\n{TYPED}```\n",
        {"reward_std": ([1], [0.0]), "frac_reward_zero_std": ([1], [1.0]), "grad_norm": ([1], [0.0])},
    ),
    (
        "pipes-a-key-again-is-the-next-record",
        "reward: 0.53 | kl: 0.01\nreward: 0.55 | kl: 0.02\n",
        {"reward": ([1, 2], [0.53, 0.55]), "kl": ([1, 2], [0.01, 0.02])},
    ),
    (
        "marker-lines-and-blocks",
        "=== Step 10 ===\n  train/reward: 0.5\n  train/kl: 0.01\n\n  train/entropy: 0.9\n=== Step 20 ===\n"
        "  train/reward: 0.6\n",
        {"train/reward": ([10, 20], [0.5, 0.6]), "train/entropy": ([10], [0.9])},
    ),
    (
        "leading-markers-and-equals",
        "Step 1/100 | reward: 0.5 | kl: 0.01\n[Step 2/100] reward: 0.6 kl: 0.02\n"
        "Epoch 1 | Step 3 | reward=0.7, kl=0.03\n",
        {"reward": ([1, 2, 3], [0.5, 0.6, 0.7])},
    ),
    (
        "step-field-and-swift-counter",
        "step: 4, loss: 0.1, reward: 0.2\nglobal_step/max_steps: 6/4389 | loss: 0.3 | reward: 0.4\n",
        {"loss": ([4, 6], [0.1, 0.3])},
    ),
    (
        "wandb-run-summary",
        WANDB,
        {"train/loss": ([100], [0.0123]), "train/reward": ([100], [0.5])},
    ),
    (
        "transformers-train-metrics",
        HF_METRICS,
        {"epoch": ([1], [3.0]), "train_loss": ([1], [0.1234])},
    ),
    (
        "ansi-ray-and-log-prefixes",
        f"{RAY}\x1b[32mreward\x1b[0m: 0.5 | \x1b[33mkl\x1b[0m: nan\n"
        "2024-06-01 10:00:05,123 - trainer - INFO - reward: 0.6 | kl: -inf\n",
        {"reward": ([1, 2], [0.5, 0.6]), "kl": ([1, 2], [NAN, -math.inf])},
    ),
    (
        "wrapped-in-a-key-and-a-number",  # at 42 characters: in "completions/clipped_ratio" and "0.01"
        "completions/mean_length: 256   completions\n/clipped_ratio: 1   reward: 0.53   kl: 0.0\n1\n",
        {"completions/clipped_ratio": ([1], [1.0]), "reward": ([1], [0.53]), "kl": ([1], [0.01])},
    ),
    (
        "interleaved-noise",
        "Loading model...\nStep 1 | reward: 0.5\nSaving checkpoint to /tmp/ck: done\nWARNING: x: y\n"
        "Step 2 | reward: 0.6\n100%|##########| 2/2\n",
        {"reward": ([1, 2], [0.5, 0.6])},
    ),
]


@pytest.mark.parametrize(("text", "want"), [f[1:] for f in FORMS], ids=[f[0] for f in FORMS])
def test_key_value_forms_are_read(text, want):
    run, caught = _read(text)
    assert run.format == KEY_VALUE and caught == []
    got = _series(run)
    for key, (steps, values) in want.items():
        assert got[key][0] == steps, key
        assert all((math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(got[key][1], values)), key
    assert not any(k.startswith("_") or k in KV._STEP_FIELDS for k in got)  # steps and W&B's own: no series


def test_a_broken_number_costs_its_line_with_one_warning():
    text = (
        "Step 1 | reward: 0.5\nStep 2 | reward: 0.3.1\nStep 3 | reward: 0.7 | kl: 1e-\nStep 4 | reward: 0.8\n"
    )
    run, (warning,) = _read(text)
    assert run.series["reward"][0].tolist() == [1, 4]
    assert "2 damaged key-value records skipped (2 read), at lines 2, 3" in str(warning.message)


def test_a_text_cut_inside_its_last_field_is_read_up_to_the_cut():
    run, (warning,) = _read("Step 1 | reward: 0.5 | kl: 0.01\nStep 2 | reward: 0.6 | kl:")
    assert run.series["reward"][1].tolist() == [0.5, 0.6] and run.series["kl"][0].tolist() == [1]
    assert "1 key-value record cut off at its end, read up to the cut" in str(warning.message)


CONFIGS = [
    ("yaml-sections", "trainer:\n  total_epochs: 15\nactor:\n  kl_loss: 0.1\n  entropy: 0.001\nseed: 42\n"),
    (
        "flat-settings",
        "learning_rate: 1e-06\nmax_grad_norm: 1.0\nnum_generations: 8\nbeta: 0.04\nuse_kl_loss: true\n",
    ),
    ("plain-text", "hello\nworld: peace\n"),
    ("verl-without-numbers", "step:1 - a:x\nstep:2 - b:[1]\n"),
]


@pytest.mark.parametrize("text", [c[1] for c in CONFIGS], ids=[c[0] for c in CONFIGS])
def test_a_config_is_not_a_run(text):
    assert KV.parse_key_value(text) == ([], 0)
    with pytest.raises(RunReadError, match="no text log was recognised"):
        read_run(io.BytesIO(text.encode()))


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("step:1 - reward:0.5 - kl:0.01\nstep:2 - reward:0.6 - kl:0.02\n", VERL_CONSOLE),
        ("{'loss': 0.1, 'reward': 0.5}\n{'loss': 0.2, 'reward': 0.6}\n", TRL_PRINTED),
        ("Step | Training Loss | reward\n1 | 0.5 | 0.1\n2 | 0.4 | 0.2\n", TRL_PRINTED),
        ("'loss': 0.1, 'reward': 0.5, 'epoch': 0.1\n'loss': 0.2, 'reward': 0.6, 'epoch': 0.2\n", TRL_PRINTED),
    ],
    ids=["verl-console", "trl-dicts", "trl-table", "trl-braceless"],
)
def test_the_other_text_formats_are_told_first(text, kind):
    run, _ = _read(text)
    assert run.format == kind and run.n_steps == 2


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------

_metric = st.sampled_from(["reward", "kl", "loss", "entropy", "grad_norm", "reward_std"]) | st.from_regex(
    r"(train|eval|rewards)/[a-z][a-z0-9_]{0,8}", fullmatch=True
)
_value = st.floats(allow_nan=True, allow_infinity=True, width=32) | st.integers(-(10**6), 10**6)
_steps = st.lists(
    st.tuples(st.integers(0, 10**5), st.dictionaries(_metric, _value, min_size=1, max_size=5)),
    min_size=1,
    max_size=4,
    unique_by=lambda r: r[0],
).map(lambda rows: sorted(rows))
_sep = st.sampled_from([" | ", "   ", ", ", " - "])
_noise = st.sampled_from(
    ["", "Saving checkpoint to /tmp/x", " 50%|#####     | 5/10 [00:05<00:05]", "INFO done."]
)


@settings(max_examples=60, deadline=None)
@given(
    rows=_steps, sep=_sep, width=st.integers(8, 200), noise=_noise, colour=st.booleans(), ray=st.booleans()
)
def test_round_trip_wrapped_coloured_with_noise(rows, sep, width, noise, colour, ray):
    lines: list[str] = []
    for step, fields in rows:
        line = sep.join([f"Step {step}", *(f"{k}: {v!r}" for k, v in fields.items())])
        for k in range(0, len(line), width):
            piece = line[k : k + width]
            piece = f"\x1b[2m{piece}\x1b[0m" if colour else piece
            lines.append((RAY if ray else "") + piece)
        lines.append(noise)
    got, damaged, cut = KV.key_value_records("\n".join(lines))
    want = [{**{k: float(v) for k, v in fields.items()}, "step": step} for step, fields in rows]
    assert damaged == [] and cut == []
    assert len(got) == len(want), (got, lines)
    for g, w in zip(got, want):
        assert g.keys() == w.keys(), (g, w, lines)
        assert all((math.isnan(g[k]) and math.isnan(w[k])) or g[k] == w[k] for k in w), (g, w)

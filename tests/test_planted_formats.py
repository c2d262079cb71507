"""Planted failures read through every format diagnose accepts: written as their users have them,
read by the public path (``rlmetrics.health.load_history`` then ``diagnose``), found; the
healthy run in the same format is left alone (no error, at most one warning)."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from planted_runs import healthy_run, plant, to_rows
from rlmetrics import keys as K
from rlmetrics.health import diagnose, load_history

N_STEPS, ONSET = 200, 120
RAY = "(TaskRunner pid=222265) "
COLOUR, RESET = "\x1b[36m", "\x1b[0m"
BAR = "Training Progress:  60%|######    | 120/200 [10:00<06:40,  3.33s/it]"


# --- writers: a run (planted_runs' columns) as each format holds it ----------------------------


def _rows(run: dict[str, list[Any]]) -> list[dict[str, Any]]:
    return to_rows(run)


def _train_and_eval(row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A TRL row split as the Trainer logs it: the training dict, and the evaluation dict."""
    train = {k: v for k, v in row.items() if k != K.TRACKING_STEP and not k.startswith(K.TRL_EVAL_PREFIX)}
    evaluation = {k: v for k, v in row.items() if k.startswith(K.TRL_EVAL_PREFIX)}
    return train, evaluation


def write_jsonl(run: dict[str, list[Any]], path: Path) -> Path:
    """rlmetrics' metrics.jsonl: one JSON object a step (NaN as the bare token json writes)."""
    path = path / "metrics.jsonl"
    lines = [json.dumps({**row, K.TRACKING_TIMESTAMP: 1.7e9 + row[K.TRACKING_STEP]}) for row in _rows(run)]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_verl_console(run: dict[str, list[Any]], path: Path) -> Path:
    """verl's console logger through Ray: prefixed, coloured, every 5th record hard-wrapped at
    100 columns (the prefix repeated), progress bars and warnings between records."""
    out = ["(TaskRunner pid=222265) Using LocalLogger is deprecated.", BAR]
    for i, row in enumerate(_rows(run)):
        fields = [f"{k}:{v!r}" for k, v in row.items() if k != K.TRACKING_STEP]
        record = " - ".join([f"step:{row[K.TRACKING_STEP]}", *fields])
        pieces = [record[j : j + 100] for j in range(0, len(record), 100)] if i % 5 == 0 else [record]
        out += [f"{RAY}{COLOUR}{piece}{RESET}" for piece in pieces]
        if i % 7 == 0:
            out += ["(WorkerDict pid=1609, ip=10.0.0.1) WARNING: a warning of another process", BAR]
    path = path / "nohup.out"
    path.write_text("\n".join(out) + "\n")
    return path


def write_trl_printed(run: dict[str, list[Any]], path: Path) -> Path:
    """TRL's printed log dicts (no step number), inside tqdm's redraws; evaluation dicts apart."""
    out = []
    for i, row in enumerate(_rows(run)):
        train, evaluation = _train_and_eval(row)
        out.append(f"\r {i % 100:2d}%|#  | {i}/{N_STEPS} [00:01<00:09]{train!r}\r {i % 100:2d}%|#")
        if evaluation:
            out.append(repr(evaluation))
    path = path / "train.log"
    path.write_text("\n".join(out) + "\n")
    return path


def write_notebook_table(run: dict[str, list[Any]], path: Path) -> Path:
    """A notebook's progress table as copied from the cell: ``Step | Training Loss | ...``,
    ``No log`` where a metric was not logged."""
    names = [k for k in run if k not in (K.TRACKING_STEP, K.TRL_LOSS)]
    header = " | ".join(["Step", "Training Loss", *names])
    lines = ["[200/200 1:02:03, Epoch 1/1]", header, "|".join(["---"] * (len(names) + 2))]
    for i, step in enumerate(run[K.TRACKING_STEP]):
        cells = [run[K.TRL_LOSS][i], *(run[k][i] for k in names)]
        lines.append(" | ".join([str(step), *("No log" if v is None else repr(v) for v in cells)]))
    path = path / "notebook.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_trainer_state(run: dict[str, list[Any]], path: Path) -> Path:
    """transformers' trainer_state.json: its log_history, evaluation entries apart."""
    history: list[dict[str, Any]] = []
    for row in _rows(run):
        train, evaluation = _train_and_eval(row)
        step = row[K.TRACKING_STEP]
        history.append({**train, "epoch": step / N_STEPS, "step": step})
        if evaluation:
            history.append({**evaluation, "epoch": step / N_STEPS, "step": step})
    path = path / "trainer_state.json"
    path.write_text(json.dumps({"global_step": N_STEPS, "log_history": history}, indent=2))
    return path


def write_wandb_csv(run: dict[str, list[Any]], path: Path) -> Path:
    """W&B's "Export as CSV": ``Step``, then ``<run> - <key>`` with its ``__MIN``/``__MAX`` range;
    empty cells where a key was not logged."""
    keys = [k for k in run if k != K.TRACKING_STEP]
    header = ["Step", *(f"grpo-run - {k}{s}" for k in keys for s in ("", "__MIN", "__MAX"))]
    path = path / "wandb_export.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for i, step in enumerate(run[K.TRACKING_STEP]):
            cells = ["" if run[k][i] is None else repr(run[k][i]) for k in keys]
            writer.writerow([step, *(c for c in cells for _ in range(3))])
    return path


#: format -> (writer, the vocabulary its users' runs log)
FORMATS: dict[str, tuple[Callable[[dict[str, list[Any]], Path], Path], str]] = {
    "rlmetrics-jsonl": (write_jsonl, "verl"),
    "verl-console": (write_verl_console, "verl"),
    "trl-printed": (write_trl_printed, "trl"),
    "notebook-table": (write_notebook_table, "trl"),
    "trainer-state": (write_trainer_state, "trl"),
    "wandb-csv": (write_wandb_csv, "verl"),
}


# --- the runs ------------------------------------------------------------------------------------


def _value_loss_key(vocabulary: str) -> str:
    return K.CRITIC_VF_LOSS if vocabulary == "verl" else K.TRL_PPO_VALUE_LOSS


def _run(vocabulary: str, failure: str | None, *, seed: int = 0) -> dict[str, list[Any]]:
    """A healthy GRPO run with a value loss logged, the failure planted at ONSET."""
    run = healthy_run(N_STEPS, seed=seed, vocabulary=vocabulary)
    rng = np.random.default_rng(seed + 100)
    value_loss = [float(x) for x in 0.05 * np.exp(rng.normal(0.0, 0.2, N_STEPS))]
    run[_value_loss_key(vocabulary)] = value_loss
    if failure == "nonfinite":  # a value loss gone NaN, everything else finite
        run[_value_loss_key(vocabulary)] = [math.nan if i >= ONSET else v for i, v in enumerate(value_loss)]
    elif failure is not None:
        run = plant(run, failure, ONSET, seed=seed)
    return run


def _diagnose(path: Path) -> Any:
    read = load_history(path)
    history = read[0] if isinstance(read, tuple) else read
    return diagnose(history)


FAILURES = ["entropy_collapse", "nonfinite", "no_learning_signal", "length_truncation", "reward_gaming"]
CASES = [(fmt, failure) for fmt in FORMATS for failure in FAILURES]


@pytest.mark.parametrize(("fmt", "failure"), CASES, ids=[f"{fmt}-{failure}" for fmt, failure in CASES])
def test_a_planted_failure_is_found_through_the_format(tmp_path, fmt, failure):
    write, vocabulary = FORMATS[fmt]
    d = _diagnose(write(_run(vocabulary, failure), tmp_path))
    found = [f for f in d.findings if f.kind == failure]
    assert found, [(f.kind, f.severity, f.step) for f in d.findings]
    # the printed dicts hold no step: they are numbered from 1, one after the run's own steps
    assert ONSET - 15 <= found[0].step <= ONSET + 15, found[0]
    if failure == "nonfinite":
        assert found[0].evidence["first_key"] == _value_loss_key(vocabulary)


@pytest.mark.parametrize("fmt", list(FORMATS), ids=list(FORMATS))
def test_the_healthy_run_through_the_format_is_left_alone(tmp_path, fmt):
    write, vocabulary = FORMATS[fmt]
    d = _diagnose(write(_run(vocabulary, None), tmp_path))
    summary = [(f.kind, f.severity, f.step) for f in d.findings]
    assert not d.has_error and len(d.findings) <= 1, summary
    assert not {f.kind for f in d.findings} & set(FAILURES), summary


@pytest.mark.parametrize("fmt", list(FORMATS), ids=list(FORMATS))
def test_every_format_reads_back_the_run_it_was_written_from(tmp_path, fmt):
    """The premise of the tests above: the writer and the reader agree on the signals' values."""
    write, vocabulary = FORMATS[fmt]
    run = _run(vocabulary, None)
    read = load_history(write(run, tmp_path))
    history = read[0] if isinstance(read, tuple) else read
    for key in (K.SCORE_MEAN, K.ACTOR_ENTROPY) if vocabulary == "verl" else (K.TRL_REWARD, K.TRL_ENTROPY):
        steps, values = history[key]
        assert len(values) == N_STEPS and np.all(np.diff(steps) == 1)
        np.testing.assert_allclose(values, run[key], rtol=1e-12)

"""Planted failures read through every format diagnose accepts: written as their users have them,
read by the public path (``rlmetrics.health.load_history`` then ``diagnose``), found; the
healthy run in the same format is left alone (no error, at most one warning).

Every format :data:`rlmetrics.readers.FORMATS` reads is written here (the CSV export in its
three layouts: W&B's wide panel, MLflow's long history, TensorBoard's folder of per-tag
downloads), TensorBoard by torch's ``SummaryWriter`` as verl's logger and transformers' callback
use it, the W&B offline run by wandb itself (skipped where tensorboard, torch or wandb is not
installed). A format that renames keys (transformers' ``train/``, verl's MLflow ``mean_at_4``,
TensorBoard's CSV file names' ``_`` for ``/``) is written renamed, as its users have it
(:data:`KEY_AS_WRITTEN`), and must still feed every signal."""

from __future__ import annotations

import csv
import json
import math
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from planted_runs import healthy_run, plant, to_rows
from rlmetrics import keys as K
from rlmetrics import readers as R
from rlmetrics.errors import RunReadError
from rlmetrics.health import diagnose, load_history
from rlmetrics.health.signals import SIGNALS, resolve
from rlmetrics.readers import read_run

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


def write_verl_jsonl(run: dict[str, list[Any]], path: Path) -> Path:
    """verl's ``file`` logger (verl 0.9.1's ``FileLogger``): ``{"step": s, "data": {...}}`` a line,
    written by orjson, which writes NaN and +/-inf as ``null``."""

    def finite_or_null(v: Any) -> Any:
        return None if isinstance(v, float) and not math.isfinite(v) else v

    lines = []
    for row in _rows(run):
        data = {k: finite_or_null(v) for k, v in row.items() if k != K.TRACKING_STEP}
        lines.append(json.dumps({"step": row[K.TRACKING_STEP], "data": data}, allow_nan=False))
    path = path / "grpo_gsm8k.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def _hf_logged(key: str) -> str:
    """A Trainer's key as transformers' TensorBoard / W&B callbacks log it (``rewrite_logs``)."""
    if key.startswith(K.TRL_EVAL_PREFIX):
        return "eval/" + key.removeprefix(K.TRL_EVAL_PREFIX)
    return "train/" + key


def _tensorboard(run: dict[str, list[Any]], path: Path, name: Callable[[str], str]) -> Path:
    from torch.utils.tensorboard import SummaryWriter

    folder = path / "tensorboard_log" / "grpo"
    with SummaryWriter(str(folder)) as writer:
        for row in _rows(run):
            for k, v in row.items():
                if k != K.TRACKING_STEP:
                    writer.add_scalar(name(k), v, row[K.TRACKING_STEP])
    return path  # the project folder: the reader finds the one log directory below it


def write_tensorboard_verl(run: dict[str, list[Any]], path: Path) -> Path:
    """verl's ``tensorboard`` logger: torch's ``SummaryWriter``, ``add_scalar(key, value, step)``."""
    pytest.importorskip("tensorboard")
    pytest.importorskip("torch.utils.tensorboard")
    return _tensorboard(run, path, lambda k: k)


def write_tensorboard_trl(run: dict[str, list[Any]], path: Path) -> Path:
    """transformers' ``TensorBoardCallback`` (TRL's ``report_to="tensorboard"``): the keys as
    ``rewrite_logs`` makes them (``train/reward``, ``eval/reward``), at the global step."""
    pytest.importorskip("tensorboard")
    pytest.importorskip("torch.utils.tensorboard")
    return _tensorboard(run, path, _hf_logged)


def _mlflow_key(key: str) -> str:
    """A key as verl's MLflow logger (``_MlflowLoggingAdapter._sanitize_key``) logs it: MLflow takes
    no ``@`` (``mean@4`` becomes ``mean_at_4``); verl's other keys are valid as they are."""
    return key.replace("@", "_at_")


def write_mlflow_csv(run: dict[str, list[Any]], path: Path) -> Path:
    """An MLflow run's metric history as CSV (``client.get_metric_history`` of each key, written
    out as MLflow's ``Metric`` has it): ``key,value,timestamp,step``, one row per logged point."""
    path = path / "mlflow_metrics.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["key", "value", "timestamp", "step"])
        for key in (k for k in run if k != K.TRACKING_STEP):
            for step, value in zip(run[K.TRACKING_STEP], run[key], strict=True):
                if value is not None:
                    writer.writerow([_mlflow_key(key), repr(value), 1_700_000_000_000 + step, step])
    return path


def _tensorboard_tag_file(key: str) -> str:
    """The name TensorBoard's "download CSV" gives a tag's file: ``run-<run>-tag-<tag>.csv``,
    each ``/`` of the tag written ``_``."""
    return f"run-grpo-tag-{key.replace('/', '_')}.csv"


def write_tensorboard_csv(run: dict[str, list[Any]], path: Path) -> Path:
    """TensorBoard's "download CSV" of each scalar card: ``Wall time,Step,Value``, a file a tag,
    the tag's ``/`` written ``_`` in the file's name; the folder of them is the run."""
    folder = path / "tensorboard_csv"
    folder.mkdir()
    for key in (k for k in run if k != K.TRACKING_STEP):
        with (folder / _tensorboard_tag_file(key)).open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["Wall time", "Step", "Value"])
            for step, value in zip(run[K.TRACKING_STEP], run[key], strict=True):
                if value is not None:
                    writer.writerow([1.7e9 + 3.3 * step, step, repr(value)])
    return folder


def write_key_value(run: dict[str, list[Any]], path: Path) -> Path:
    """A custom loop's printed summaries, a line a step: ``Step 12/200 | reward: 0.53 | kl: 0.01``,
    behind a logging prefix, other lines between them."""
    out = ["2025-06-01 10:00:00,000 - INFO - starting training"]
    for row in _rows(run):
        step = row[K.TRACKING_STEP]
        fields = [f"{k}: {v!r}" for k, v in row.items() if k != K.TRACKING_STEP]
        stamp = f"2025-06-01 10:00:{step % 60:02d},000 - INFO - "
        out.append(f"{stamp}Step {step}/{N_STEPS} | " + " | ".join(fields))
        if step % 50 == 0:
            out.append(f"{stamp}saved a checkpoint at step {step}")
    path = path / "train_output.txt"
    path.write_text("\n".join(out) + "\n")
    return path


def write_wandb_offline(run: dict[str, list[Any]], path: Path) -> Path:
    """A W&B offline run written by wandb itself (verl's ``wandb`` logger: ``wandb.log(data,
    step=step)``); read back with wandb's own reader, as a user's run is."""
    wandb = pytest.importorskip("wandb")
    with pytest.MonkeyPatch.context() as mp:
        for name in ("WANDB_SILENT", "WANDB_DISABLE_GIT"):
            mp.setenv(name, "true")
        mp.setenv("WANDB_MODE", "offline")
        settings = wandb.Settings(silent=True, x_disable_stats=True, x_disable_meta=True)
        logged = wandb.init(project="grpo", name="run", dir=str(path), mode="offline", settings=settings)
        for row in _rows(run):
            logged.log({k: v for k, v in row.items() if k != K.TRACKING_STEP}, step=row[K.TRACKING_STEP])
        logged.finish()
    (run_file,) = path.glob("wandb/offline-run-*/run-*.wandb")
    # wandb's service writes the file; its last records can land a moment after finish() returns
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a record still being written
            try:
                if read_run(run_file).n_steps == N_STEPS:
                    break
            except RunReadError:  # no history record yet
                pass
        time.sleep(0.2)
    return path


#: format -> (writer, the vocabulary its users' runs log)
FORMATS: dict[str, tuple[Callable[[dict[str, list[Any]], Path], Path], str]] = {
    "rlmetrics-jsonl": (write_jsonl, "verl"),
    "verl-console": (write_verl_console, "verl"),
    "trl-printed": (write_trl_printed, "trl"),
    "notebook-table": (write_notebook_table, "trl"),
    "trainer-state": (write_trainer_state, "trl"),
    "wandb-csv": (write_wandb_csv, "verl"),
    "verl-jsonl": (write_verl_jsonl, "verl"),
    "tensorboard-verl": (write_tensorboard_verl, "verl"),
    "tensorboard-trl": (write_tensorboard_trl, "trl"),
    "wandb-offline": (write_wandb_offline, "verl"),
    "mlflow-csv": (write_mlflow_csv, "verl"),
    "tensorboard-csv": (write_tensorboard_csv, "verl"),
    "key-value": (write_key_value, "trl"),
}

#: format -> the format the reader reads it as (:data:`rlmetrics.readers.FORMATS`)
READ_AS = {
    "rlmetrics-jsonl": R.RLMETRICS_JSONL,
    "verl-console": R.VERL_CONSOLE,
    "trl-printed": R.TRL_PRINTED,
    "notebook-table": R.TRL_PRINTED,
    "trainer-state": R.TRL_TRAINER_STATE,
    "wandb-csv": R.CSV_EXPORT,
    "verl-jsonl": R.VERL_JSONL,
    "tensorboard-verl": R.TENSORBOARD,
    "tensorboard-trl": R.TENSORBOARD,
    "wandb-offline": R.WANDB_OFFLINE,
    "mlflow-csv": R.CSV_EXPORT,
    "tensorboard-csv": R.CSV_EXPORT,
    "key-value": R.KEY_VALUE,
}

#: format -> how it names a key the run logged, where it renames keys
KEY_AS_WRITTEN: dict[str, Callable[[str], str]] = {
    "tensorboard-trl": _hf_logged,
    "mlflow-csv": _mlflow_key,
    "tensorboard-csv": lambda k: k.replace("/", "_"),
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


def _as_written(fmt: str, key: str) -> str:
    return KEY_AS_WRITTEN.get(fmt, lambda k: k)(key)


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
        assert found[0].evidence["first_key"] == _as_written(fmt, _value_loss_key(vocabulary))


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
    history, source = load_history(write(run, tmp_path))
    assert source == READ_AS[fmt]
    rtol = 1e-6 if fmt.startswith("tensorboard-") else 1e-12  # event files hold float32
    for key in (K.SCORE_MEAN, K.ACTOR_ENTROPY) if vocabulary == "verl" else (K.TRL_REWARD, K.TRL_ENTROPY):
        steps, values = history[_as_written(fmt, key)]
        assert len(values) == N_STEPS and np.all(np.diff(steps) == 1)
        np.testing.assert_allclose(values, run[key], rtol=rtol)


def test_every_format_the_reader_knows_is_planted_through():
    assert set(READ_AS) == set(FORMATS) and set(READ_AS.values()) == set(R.FORMATS)


@pytest.mark.parametrize("fmt", list(FORMATS), ids=list(FORMATS))
def test_every_format_feeds_the_signals_its_vocabulary_logs(tmp_path, fmt):
    """Renamed keys included (``train/reward``, ``mean_at_4``, ``critic_score_mean``): the rules
    read from the format every signal they read from the same run as rlmetrics writes it."""
    write, vocabulary = FORMATS[fmt]
    run = _run(vocabulary, None)
    read = load_history(write(run, tmp_path))
    history = read[0] if isinstance(read, tuple) else read
    direct = {k: (np.asarray(run[K.TRACKING_STEP]), np.zeros(N_STEPS)) for k in run if k != K.TRACKING_STEP}
    expected = {s for s in SIGNALS if resolve(direct, s) is not None}
    assert {s for s in SIGNALS if resolve(history, s) is not None} >= expected

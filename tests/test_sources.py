"""Tests of rlmetrics.health.sources: each format written by its tool's own writer, read back."""

from __future__ import annotations

import json
import math
import shutil
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from rlmetrics.health.sources import RunReadError, load_history
from rlmetrics.tracking import Tracker, WandbBackend

NAN = math.nan
STEPS = {
    1: {"actor/entropy": 0.5, "actor/pg_loss": -0.125, "critic/score/mean": 0.1},
    2: {"actor/entropy": 0.4375, "actor/pg_loss": NAN, "critic/score/mean": 0.2},
    5: {"actor/entropy": 0.375, "actor/pg_loss": 3.0, "critic/score/mean": 0.3},
}


def expected(steps: dict[int, dict[str, float]], dtype=np.float64) -> dict[str, tuple[list, list]]:
    keys = sorted({k for row in steps.values() for k in row})
    return {
        k: ([s for s in steps if k in steps[s]], [float(dtype(steps[s][k])) for s in steps if k in steps[s]])
        for k in keys
    }


def assert_history(history, want) -> None:
    assert sorted(history) == sorted(want)
    for key, (steps, values) in want.items():
        got_steps, got_values = history[key]
        assert got_steps.dtype == np.int64 and got_values.dtype == np.float64, key
        assert got_steps.tolist() == steps, key
        np.testing.assert_array_equal(got_values, np.asarray(values), err_msg=key)  # NaN == NaN here


def log_all(tracker: Tracker, steps=STEPS) -> None:
    for step, row in steps.items():
        tracker.log(row, step=step)


# --- rlmetrics jsonl ---------------------------------------------------------------------------


def test_rlmetrics_jsonl_file_and_run_dir(tmp_path):
    with Tracker("p", "e", log_dir=tmp_path, config={"lr": 1e-6}) as tr:
        log_all(tr)
    for path in (tr.jsonl_path, tr.run_dir, str(tr.run_dir)):
        history, source = load_history(path)
        assert source == "rlmetrics-jsonl"
        assert_history(history, expected(STEPS))  # the timestamp is not a metric


def test_jsonl_wins_over_other_logs_of_the_same_run(tmp_path):
    pytest.importorskip("tensorboard")
    with Tracker("p", "e", backends=("jsonl", "tensorboard"), log_dir=tmp_path) as tr:
        log_all(tr)
    assert load_history(tr.run_dir)[1] == "rlmetrics-jsonl"
    assert load_history(tr.run_dir / "tensorboard")[1] == "tensorboard"


def test_one_step_run(tmp_path):
    with Tracker("p", "e", log_dir=tmp_path) as tr:
        tr.log({"actor/entropy": 0.25}, step=7)
    history, _ = load_history(tr.jsonl_path)
    assert_history(history, {"actor/entropy": ([7], [0.25])})


def test_truncated_last_line_is_skipped_with_a_warning(tmp_path):
    with Tracker("p", "e", log_dir=tmp_path) as tr:
        log_all(tr)
    with open(tr.jsonl_path, "ab") as fh:
        fh.write(b'{"step": 6, "actor/entr')
    with pytest.warns(RuntimeWarning, match="truncated last line 4"):
        history, _ = load_history(tr.jsonl_path)
    assert_history(history, expected(STEPS))


# --- verl's file logger ------------------------------------------------------------------------


def test_verl_file_logger(tmp_path, monkeypatch):
    tracking = pytest.importorskip("verl.utils.tracking")
    monkeypatch.setenv("VERL_FILE_LOGGER_ROOT", str(tmp_path))
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)
    logger = tracking.FileLogger("proj", "exp")
    rows = {**STEPS, 6: {"actor/entropy": np.float32(0.25), "critic/score/mean": float("inf")}}
    for step, row in rows.items():
        logger.log(row, step)
    logger.finish()
    path = tmp_path / "proj" / "exp.jsonl"
    assert b"null" in path.read_bytes()  # orjson writes NaN and inf as null
    want = expected(rows)
    want["critic/score/mean"][1][-1] = NAN  # null reads back as NaN
    for target in (path, tmp_path / "proj"):
        history, source = load_history(target)
        assert source == "verl-jsonl"
        assert_history(history, want)


def test_verl_tracking_with_file_backend(tmp_path, monkeypatch):
    tracking = pytest.importorskip("verl.utils.tracking")
    path = tmp_path / "run.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    tr = tracking.Tracking(project_name="p", experiment_name="e", default_backend=["file"])
    log = {1: {"response_length/clip_ratio": 0.0}, 2: {"response_length/clip_ratio": 0.75}}
    for step, row in log.items():
        tr.log(data=row, step=step)
    tr.logger["file"].finish()
    history, source = load_history(path)
    assert source == "verl-jsonl"
    assert_history(history, expected(log))


# --- TensorBoard -------------------------------------------------------------------------------


def test_tensorboard_tracker_backend(tmp_path):
    pytest.importorskip("tensorboard")
    with Tracker("p", "e", backends=("tensorboard",), config={"lr": 1e-6}, log_dir=tmp_path) as tr:
        log_all(tr)
    want = expected(STEPS, dtype=np.float32)  # simple_value is a float32
    for path in (tr.run_dir, tr.run_dir / "tensorboard", next((tr.run_dir / "tensorboard").iterdir())):
        history, source = load_history(path)
        assert source == "tensorboard"
        assert_history(history, want)  # the config text is not a scalar


def test_tensorboard_keeps_more_than_10000_scalars_per_tag(tmp_path):
    pytest.importorskip("tensorboard")
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    n = 12_345
    writer = torch_tb.SummaryWriter(str(tmp_path / "tb"))  # what verl's tensorboard logger uses
    for step in range(n):
        writer.add_scalar("actor/entropy", step / 8.0, step)
    writer.add_scalar("timing_s/step", 2.5, 0)
    writer.close()
    history, source = load_history(tmp_path)
    assert source == "tensorboard"
    steps, values = history["actor/entropy"]
    assert steps.tolist() == list(range(n))
    np.testing.assert_array_equal(values, np.arange(n) / 8.0)
    assert history["timing_s/step"][1].tolist() == [2.5]


def test_tensorboard_tensor_scalars(tmp_path):
    """``tf.summary.scalar`` (TF2) writes scalars as tensors of the scalars plugin."""
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2
    from tensorboard.plugins.scalar.summary_v2 import scalar_pb
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path))
    for step, value in ((0, 1.5), (3, 0.25)):
        writer.add_event(event_pb2.Event(step=step, wall_time=1.0, summary=scalar_pb("kl", value)))
    writer.close()
    history, _ = load_history(tmp_path)
    assert_history(history, {"kl": ([0, 3], [1.5, 0.25])})


def test_tensorboard_restarted_run_in_one_directory(tmp_path):
    """Two event files of one directory (a run resumed) are one run."""
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    for steps in (range(0, 3), range(3, 5)):
        writer = torch_tb.SummaryWriter(str(tmp_path), filename_suffix=f".{steps.start}")
        for step in steps:
            writer.add_scalar("reward", float(step), step)
        writer.close()
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 2
    history, _ = load_history(tmp_path)
    assert_history(history, {"reward": ([0, 1, 2, 3, 4], [0.0, 1.0, 2.0, 3.0, 4.0])})


def test_tensorboard_several_runs_is_an_error_listing_them(tmp_path):
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    for name in ("run_a", "run_b"):
        with torch_tb.SummaryWriter(str(tmp_path / "runs" / name)) as writer:
            writer.add_scalar("loss", 1.0, 0)
    with pytest.raises(
        RunReadError, match=r"holds 2 TensorBoard runs .*'runs/run_a', 'runs/run_b'; pass one"
    ):
        load_history(tmp_path)
    assert load_history(tmp_path / "runs" / "run_b")[1] == "tensorboard"


def test_tensorboard_missing_package(tmp_path, monkeypatch):
    (tmp_path / "events.out.tfevents.1.host").write_bytes(b"")
    for name in [m for m in sys.modules if m == "tensorboard" or m.startswith("tensorboard.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    with pytest.raises(ImportError, match=r"pip install 'rlmetrics\[tensorboard\]'"):
        load_history(tmp_path)


# --- TRL / transformers trainer_state.json -----------------------------------------------------

LOG_HISTORY = [
    {"step": 10, "epoch": 0.1, "loss": 0.5, "reward": 0.25, "frac_reward_zero_std": 0.5, "grad_norm": NAN},
    {"step": 20, "epoch": 0.2, "loss": 0.25, "reward": 0.5, "frac_reward_zero_std": 0.25, "grad_norm": 1.5},
    {"step": 20, "epoch": 0.2, "eval_loss": 0.75},
    {"step": 20, "epoch": 0.2, "train_runtime": 12.5, "train_loss": 0.375, "total_flos": 0.0},
]


def write_trainer_state(directory: Path, log_history=LOG_HISTORY) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "trainer_state.json"
    # what transformers' TrainerState.save_to_json writes
    state = {"global_step": 20, "log_history": log_history, "max_steps": 20, "best_metric": None}
    path.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    return path


def test_trainer_state_file_and_output_dir(tmp_path):
    path = write_trainer_state(tmp_path / "out")
    for target in (path, tmp_path / "out"):
        history, source = load_history(target)
        assert source == "trl-trainer-state"
        assert history["reward"][0].tolist() == [10, 20] and history["reward"][1].tolist() == [0.25, 0.5]
        assert math.isnan(history["grad_norm"][1][0]) and history["grad_norm"][1][1] == 1.5
        assert history["eval_loss"][0].tolist() == [20] and history["train_loss"][1].tolist() == [0.375]


def test_trainer_state_of_the_last_checkpoint(tmp_path):
    write_trainer_state(tmp_path / "checkpoint-9", LOG_HISTORY[:1])
    write_trainer_state(tmp_path / "checkpoint-10", LOG_HISTORY)  # 10 > 9, not "10" < "9"
    history, source = load_history(tmp_path)
    assert source == "trl-trainer-state"
    assert history["reward"][0].tolist() == [10, 20]


# --- W&B offline -------------------------------------------------------------------------------


WIDE_STEP = {f"extra/{i}": i / 4.0 for i in range(2500)}
WANDB_STEPS = {**STEPS, 6: {"actor/entropy": 0.25, "text": 1.0}, 7: WIDE_STEP}


@pytest.fixture(scope="module")
def wandb_run(tmp_path_factory):
    """One offline run written by the Tracker's wandb backend (its service is slow to start)."""
    pytest.importorskip("wandb")
    root = tmp_path_factory.mktemp("wandb")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WANDB_SILENT", "true")
        mp.setenv("WANDB_MODE", "offline")
        mp.setenv("WANDB_DISABLE_GIT", "true")
        with Tracker(
            "p", "e", backends=[WandbBackend(mode="offline")], config={"lr": 1e-6}, log_dir=root
        ) as tr:
            log_all(tr)
            tr.log({"actor/entropy": 0.25, "text": 1.0}, step=6)
            tr.log(WIDE_STEP, step=7)  # one record over 32 KiB: chunks across blocks
    (run_file,) = (tr.run_dir / "wandb").glob("offline-run-*/run-*.wandb")
    # wandb's service writes the file; its last records can land a moment after finish() returns
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a record still being written
            try:
                if load_history(run_file)[0]["extra/0"][0][-1] == 7:
                    break
            except (RunReadError, KeyError):  # no history record yet
                pass
        time.sleep(0.2)
    return tr.run_dir, run_file


def test_wandb_offline_run(wandb_run):
    run_dir, run_file = wandb_run
    for target in (run_file, run_file.parent, run_dir / "wandb", run_dir):
        history, source = load_history(target)
        assert source == "wandb-offline", target
        assert_history(history, expected(WANDB_STEPS))  # _step, _runtime, _timestamp are W&B's own


def test_wandb_cut_off_file_keeps_what_was_read(wandb_run, tmp_path):
    _, run_file = wandb_run
    cut = tmp_path / run_file.name
    data = run_file.read_bytes()
    assert len(data) > 2 * 32768
    cut.write_bytes(data[: len(data) - 40])  # the tail: the exit record
    with pytest.warns(RuntimeWarning, match=r"steps read; the file ends in an incomplete record"):
        history, _ = load_history(cut)
    assert history["actor/entropy"][0].tolist()[:3] == [1, 2, 5]


def test_wandb_several_runs_is_an_error(wandb_run, tmp_path):
    _, run_file = wandb_run
    for name in ("offline-run-1-a", "offline-run-2-b"):
        (tmp_path / "wandb" / name).mkdir(parents=True)
        shutil.copy(run_file, tmp_path / "wandb" / name / "run-x.wandb")
    with pytest.raises(RunReadError, match=r"holds 2 W&B runs: .*offline-run-1-a.*; pass one of them"):
        load_history(tmp_path)


def test_wandb_missing_package(tmp_path, monkeypatch):
    path = tmp_path / "run-x.wandb"
    path.write_bytes(b":W&B\xe1\xbe\x00")
    for name in [m for m in sys.modules if m == "wandb" or m.startswith("wandb.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(ImportError, match=r"pip install 'rlmetrics\[wandb\]'"):
        load_history(path)


def test_wandb_records_to_rows():
    """wandb's JSON lines: NaN and +/-inf as W&B's strings, W&B's own keys dropped, other records
    and unparsable lines skipped, the step from ``_step`` or the record's step."""
    from rlmetrics.readers.wandb import _wandb_rows

    lines = [
        '{"num":1,"type":"header","header":{}}',
        '{"num":2,"type":"history","history":{"item":{"_step":3,"_runtime":1.5,"a":"NaN",'
        '"b":"Infinity","c":"-Infinity","d":2,"s":"text"},"step":{"num":3}}}',
        '{"num":3,"type":"partial_history","partial_history":{"item":{"a":1},"step":{"num":4}}}',
        '{"num":4,"type":"history","history":"not a dict"}',
        '{"num":5,"type":"history", cut off',
        '{"num":6,"type":"history","history":{"item":{"_step":9}}}',
    ]
    rows = _wandb_rows(iter(lines))
    assert len(rows) == 2
    first, second = rows
    assert math.isnan(first.pop("a"))
    assert first == {"b": math.inf, "c": -math.inf, "d": 2, "s": "text", "step": 3}
    assert second == {"a": 1, "step": 4}


def test_wandb_without_its_reader_says_which_version(tmp_path, monkeypatch):
    from rlmetrics.readers import wandb as sources

    path = _write(tmp_path / "run-x.wandb", b":W&B\xe1\xbe\x00")
    old_cli = "import sys; sys.stderr.write(\"Error: No such command 'leet'.\\n\"); sys.exit(2)"
    monkeypatch.setattr(sources, "_wandb_command", lambda p: [sys.executable, "-c", old_cli])
    with pytest.raises(RunReadError, match=r"has no `wandb leet inspect`: pip install -U 'wandb>=0\.31'"):
        load_history(path)


# --- bad input ---------------------------------------------------------------------------------


def _events_without_scalars(p: Path) -> Path:
    pytest.importorskip("tensorboard")
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    EventFileWriter(str(p)).close()  # only the file-version event
    return p


BAD = [
    (
        "missing",
        lambda p: p / "nope.jsonl",
        r"nope\.jsonl'?: no such file or directory; expected a rlmetrics",
    ),
    ("empty-file", lambda p: _write(p / "m.jsonl", b""), r"m\.jsonl'?: the file is empty"),
    ("blank-lines", lambda p: _write(p / "m.jsonl", b"\n  \n"), "holds only blank lines"),
    (
        "bad-json-line",
        lambda p: _write(p / "m.jsonl", b'{"step": 1, "a": 1.0}\n{"step": 2, oops}\n{"step": 3, "a": 2.0}\n'),
        r"m\.jsonl:2: not a JSON object",
    ),
    ("binary", lambda p: _write(p / "m.jsonl", b"\x89PNG\r\n\x1a\n\x00\x00"), "the first line is not JSON"),
    ("not-an-object", lambda p: _write(p / "m.jsonl", b"[1, 2]\n"), "expected a JSON object per line"),
    ("no-numeric", lambda p: _write(p / "m.jsonl", b'{"step": 1, "note": "hi"}\n'), "no numeric metric"),
    (
        "verl-no-numeric",
        lambda p: _write(p / "e.jsonl", b'{"step": 1, "data": {}}\n'),
        r"\(verl-jsonl\): no numeric",
    ),
    ("empty-dir", lambda p: p, "no run in this directory .no event files either.; expected"),
    ("dir-of-other-files", lambda p: _write(p / "notes.txt", b"hello").parent, "no run in this directory"),
    (
        "two-jsonl",
        lambda p: _write(_write(p / "a.jsonl", b"{}\n").parent / "b.jsonl", b"{}\n").parent,
        r"holds 2 jsonl files: 'a\.jsonl', 'b\.jsonl'",
    ),
    ("events-no-scalars", _events_without_scalars, r"\(tensorboard\): no numeric metric"),
    (
        "state-not-json",
        lambda p: _write(p / "trainer_state.json", b"{oops"),
        "not JSON .* expected a trainer_state",
    ),
    (
        "state-no-log-history",
        lambda p: _write(p / "trainer_state.json", b'{"global_step": 3}'),
        r"with a 'log_history' list of dicts; got dict with keys \['global_step'\]",
    ),
    (
        "state-empty-log",
        lambda p: _write(p / "trainer_state.json", b'{"log_history": []}'),
        "no numeric metric",
    ),
    (
        "wandb-bad-header",
        lambda p: _write(p / "run-x.wandb", b"not a wandb file"),
        r"wandb could not read the run file: .*invalid W&B identifier",
    ),
    (
        "wandb-too-short",
        lambda p: _write(p / "run-x.wandb", b":W&"),
        "ends in an incomplete record before any history record",
    ),
]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(("make", "match"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_a_run_read_error(tmp_path, make, match):
    if "wandb" in match.lower():
        pytest.importorskip("wandb")
    with pytest.raises(RunReadError, match=match):
        load_history(make(tmp_path))


def test_run_read_error_is_a_value_error_and_path_type_checked(tmp_path):
    assert issubclass(RunReadError, ValueError)
    with pytest.raises(TypeError, match=r"path must be a str or os\.PathLike; got int"):
        load_history(3)  # type: ignore[arg-type]


# --- planted failures through each format ---------------------------------------------------


def _write_tensorboard(run_dir: Path, rows: list[dict], prefix: str = "") -> Path:
    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    with torch_tb.SummaryWriter(str(run_dir)) as writer:
        for row in rows:
            for key, value in row.items():
                if key != "step":
                    writer.add_scalar(prefix + key, value, row["step"])
    return run_dir


def _write_jsonl(log_dir: Path, rows: list[dict]) -> Path:
    with Tracker("p", "e", backends=("jsonl",), log_dir=log_dir) as tr:
        for row in rows:
            tr.log({k: v for k, v in row.items() if k != "step"}, step=row["step"])
    return tr.run_dir


# (vocabulary, format): how the trainer's logger writes it; TRL's TensorBoard keys carry
# transformers' ``train/`` prefix
_FORMATS = {
    ("verl", "jsonl"): lambda d, rows: _write_jsonl(d, rows),
    ("verl", "tensorboard"): lambda d, rows: _write_tensorboard(d, rows),
    ("trl", "tensorboard"): lambda d, rows: _write_tensorboard(d, rows, prefix="train/"),
}


@pytest.mark.parametrize(
    "kind", ["nonfinite", "entropy_collapse", "length_truncation", "advantage_collapse", "grad_spike"]
)
@pytest.mark.parametrize(("vocabulary", "fmt"), list(_FORMATS), ids=["verl-jsonl", "verl-tb", "trl-tb"])
def test_planted_failure_is_found_through_the_format(tmp_path, vocabulary, fmt, kind):
    pytest.importorskip("tensorboard")
    from planted_runs import healthy_run, plant, to_rows
    from rlmetrics.health.rules import diagnose

    onset = 120
    run = plant(healthy_run(200, seed=3, vocabulary=vocabulary), kind, onset, seed=3)
    history, _ = load_history(_FORMATS[(vocabulary, fmt)](tmp_path / "run", to_rows(run)))
    found = {f.kind: f for f in diagnose(history)}
    assert kind in found, f"{kind} not found; found {sorted(found)}"
    assert onset - 2 <= found[kind].step <= onset + 12


@pytest.mark.parametrize(("vocabulary", "fmt"), list(_FORMATS), ids=["verl-jsonl", "verl-tb", "trl-tb"])
def test_healthy_run_through_the_format_has_no_error(tmp_path, vocabulary, fmt):
    pytest.importorskip("tensorboard")
    from planted_runs import healthy_run, to_rows
    from rlmetrics.health.rules import diagnose

    rows = to_rows(healthy_run(200, seed=5, vocabulary=vocabulary))
    history, _ = load_history(_FORMATS[(vocabulary, fmt)](tmp_path / "run", rows))
    diagnosis = diagnose(history)
    assert not diagnosis.has_error and len(diagnosis) <= 1, [f.kind for f in diagnosis]

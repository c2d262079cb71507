"""Tests of Tracker.log_samples: the sample tables through each backend, read back by that
backend's own reader (samples.jsonl by read_samples), and a failure that costs those samples alone."""

from __future__ import annotations

import io
import json
import warnings

import pytest

from rlmetrics import keys as K
from rlmetrics.errors import TrackingWarning
from rlmetrics.readers.samples import SAMPLES_FILE, read_samples
from rlmetrics.tracking import JsonlBackend, Tracker
from rlmetrics.training.samples import TRUNCATION_MARKER, SampleTable, select_samples

PROMPTS = ["What is 1+1?", "Écris «bonjour» | en 日本語", "Loop?\nline two", "x" * 5000, "emoji 🙂🙃"]
RESPONSES = ["2", "こんにちは | `code`", "ha ha ha\nha", "y" * 5000, "🙂" * 3]
REWARDS = [1.0, 0.25, 0.0, 0.5, 0.75]


def table(step: int | None = None, **kw) -> SampleTable:
    options = {"n_random": 2, "max_bytes": 4096, **kw}
    return select_samples(
        PROMPTS,
        RESPONSES,
        REWARDS,
        lengths=[1, 5, 4, 5000, 3],
        stop_reasons=["stop", "stop", "length", "length", None],
        categories=["math", "fr", "loop", "long", None],
        step=step,
        **options,
    )


def with_step(t: SampleTable, step: int) -> SampleTable:
    return SampleTable.from_rows([{**row, K.SAMPLES_STEP: step} for row in t.rows()])


class Recorder:
    """A backend object with log_samples."""

    name = "recorder"

    def __init__(self) -> None:
        self.samples: list[tuple[int, SampleTable]] = []

    def log(self, metrics, step):
        pass

    def log_samples(self, t, step):
        self.samples.append((step, t))

    def finish(self):
        pass


class NoSamples:
    name = "plain"

    def log(self, metrics, step):
        pass

    def finish(self):
        pass


class FailingSamples(Recorder):
    name = "failing"

    def log_samples(self, t, step):
        raise OSError(28, "No space left on device")


# --- jsonl ----------------------------------------------------------------------------------------


def test_jsonl_round_trip_by_step(tmp_path):
    tables = {3: table(), 5: table(seed=1), 9: select_samples([], [], [])}
    with Tracker("p", "e", log_dir=tmp_path) as tr:
        for step, t in tables.items():
            tr.log({"a": float(step)}, step=step)
            tr.log_samples(t, step=step)
    back = read_samples(tr.run_dir)
    # the step column is the step logged; an empty table writes no line
    assert back == {3: with_step(tables[3], 3), 5: with_step(tables[5], 5)}
    assert any(TRUNCATION_MARKER in text for text in back[3].prompt)  # the long texts were cut
    lines = (tr.run_dir / SAMPLES_FILE).read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(tables[3]) + len(tables[5])
    first = json.loads(lines[0])
    assert list(first) == list(K.SAMPLES_COLUMNS) and first["step"] == 3 and first["chosen"] == "max"
    assert "日本語" in "".join(lines)  # written as UTF-8, not escaped
    assert read_samples(tr.run_dir / SAMPLES_FILE) == back


def test_jsonl_keeps_a_lone_surrogate_as_an_escape(tmp_path):
    assert select_samples(["bad \ud800 text"], ["ok"], [1.0]).prompt == ("bad \ufffd text",)
    t = SampleTable.from_rows(
        [{"prompt": "bad \ud800 text", "response": "ok", "reward": 1.0, "chosen": "max"}]
    )
    with Tracker("p", "e", log_dir=tmp_path) as tr:
        tr.log_samples(t, step=0)
    assert read_samples(tr.run_dir)[0].prompt == ("bad \ud800 text",)
    (tr.run_dir / SAMPLES_FILE).read_bytes().decode("utf-8")  # the file stays valid UTF-8


def test_resume_appends_after_a_torn_line(tmp_path):
    with Tracker("p", "e", log_dir=tmp_path) as tr:
        tr.log_samples(table(), step=1)
    path = tr.run_dir / SAMPLES_FILE
    with open(path, "ab") as fh:
        fh.write(b'{"step": 2, "prompt": "cut')  # a crash mid-line
    with Tracker("p", "e", log_dir=tmp_path, resume=True) as tr2:
        tr2.log_samples(table(seed=4), step=2)
    with pytest.warns(RuntimeWarning, match=r"1 damaged line\(s\) skipped \(line \d+: not a JSON line"):
        back = read_samples(tr2.run_dir)
    assert back == {1: with_step(table(), 1), 2: with_step(table(seed=4), 2)}


def test_a_run_without_samples_reads_as_none(tmp_path):
    with Tracker("p", "e", log_dir=tmp_path) as tr:
        tr.log({"a": 1.0}, step=0)
    assert read_samples(tr.run_dir) == {} and not (tr.run_dir / SAMPLES_FILE).exists()


def test_jsonl_fsync_after_each_table(tmp_path, monkeypatch):
    import os

    synced = []
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd))
    with Tracker("p", "e", backends=[JsonlBackend(fsync=True)], log_dir=tmp_path) as tr:
        tr.log_samples(table(), step=0)
        tr.log_samples(table(), step=1)
    assert len(synced) == 2


# --- the fan-out ----------------------------------------------------------------------------------


def test_every_backend_with_the_ability_gets_the_table_with_its_step(tmp_path):
    rec = Recorder()
    with Tracker("p", "e", backends=["jsonl", rec], log_dir=tmp_path) as tr:
        tr.log_samples(table(step=99), step=4)  # the step logged wins over the table's own
    assert rec.samples == [(4, with_step(table(), 4))]
    assert read_samples(tr.run_dir) == {4: with_step(table(), 4)}


def test_a_backend_without_the_ability_is_skipped_with_one_warning(tmp_path):
    with Tracker("p", "e", backends=["jsonl", NoSamples()], log_dir=tmp_path) as tr:
        with pytest.warns(RuntimeWarning, match=r"'plain' has no log_samples\(table, step\)") as caught:
            tr.log_samples(table(), step=0)
            tr.log_samples(table(), step=1)
    assert sum("log_samples" in str(w.message) for w in caught) == 1
    assert sorted(read_samples(tr.run_dir)) == [0, 1] and tr.lost == {}


def test_a_failing_backend_loses_those_samples_alone(tmp_path):
    rec = Recorder()
    lost = pytest.warns(TrackingWarning, match=r"'failing' lost 2 records of this run \(steps 2, 3\)")
    with lost, Tracker("p", "e", backends=[FailingSamples(), "jsonl", rec], log_dir=tmp_path) as tr:
        with pytest.warns(
            RuntimeWarning, match=r"'failing' lost the samples of step 2; it keeps logging: OSError"
        ):
            tr.log_samples(table(), step=2)
        tr.log({"a": 1.0}, step=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tr.log_samples(table(), step=3)
    assert tr.lost == {"failing": 2} and isinstance(tr.failed["failing"], OSError)
    assert [s for s, _ in rec.samples] == [2, 3] and sorted(read_samples(tr.run_dir)) == [2, 3]


def test_a_step_beyond_a_backends_range_is_lost_for_it_alone(tmp_path):
    rec = Recorder()
    rec.max_step = 10  # type: ignore[attr-defined]
    with Tracker("p", "e", backends=["jsonl", rec], log_dir=tmp_path) as tr:
        with pytest.warns(RuntimeWarning, match=r"lost the samples of step 11.*beyond its step range"):
            tr.log_samples(table(), step=11)
    assert rec.samples == [] and sorted(read_samples(tr.run_dir)) == [11]


def test_console_prints_one_line(tmp_path):
    from rlmetrics.tracking import ConsoleBackend

    out = io.StringIO()
    with Tracker("p", "e", backends=[ConsoleBackend(file=out)], log_dir=tmp_path) as tr:
        tr.log_samples(table(), step=7)
    assert out.getvalue().splitlines()[-1] == "step 7 | samples 5 rows reward 0 .. 1"


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (({"prompt": ["a"]}, 0), TypeError, r"table must be a SampleTable.*got dict"),
        ((None, -1), ValueError, r"step must be an integer >= 0"),
        ((None, 1.5), TypeError, r"step must be an integer"),
    ],
    ids=["not-a-table", "negative-step", "float-step"],
)
def test_bad_arguments_log_nothing(tmp_path, args, error, match):
    t, step = args
    with Tracker("p", "e", log_dir=tmp_path) as tr:
        with pytest.raises(error, match=match):
            tr.log_samples(table() if t is None else t, step)
    assert read_samples(tr.run_dir) == {}


def test_log_samples_after_finish_is_an_error(tmp_path):
    tr = Tracker("p", "e", log_dir=tmp_path)
    tr.finish()
    with pytest.raises(RuntimeError, match=r"log_samples called after finish"):
        tr.log_samples(table(), step=0)


# --- TensorBoard (its EventAccumulator and text plugin) ------------------------------------------


def test_tensorboard_table_round_trip(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.text.text_plugin import text_array_to_html
    from tensorboard.util import tensor_util

    tables = {2: table(), 6: table(seed=3)}
    with Tracker("p", "e", backends=("tensorboard",), log_dir=tmp_path) as tr:
        for step, t in tables.items():
            tr.log_samples(t, step=step)
        tr.log_samples(select_samples([], [], []), step=7)  # an empty table writes nothing
    acc = EventAccumulator(str(tr.run_dir / "tensorboard"), size_guidance={"tensors": 0})
    acc.Reload()
    events = acc.Tensors(K.SAMPLES_TABLE)
    assert [e.step for e in events] == [2, 6]
    for event in events:
        cells = tensor_util.make_ndarray(event.tensor_proto)
        assert cells.shape == (len(tables[event.step]) + 1, len(K.SAMPLES_COLUMNS))
        header, *rows = [[c.decode("utf-8") for c in row] for row in cells]
        assert header == list(K.SAMPLES_COLUMNS)
        back = [
            {
                **dict(zip(header, row, strict=True)),
                "step": int(row[0]),
                "reward": float(row[3]),
                "length": int(row[4]) if row[4] else None,
                "stop_reason": row[5] or None,
                "category": row[6] or None,
            }
            for row in rows
        ]
        assert SampleTable.from_rows(back) == with_step(tables[event.step], event.step)
        html = text_array_to_html(
            cells, enable_markdown=True
        )  # what TensorBoard's text plugin shows: one HTML table
        assert html.count("<table>") == 1 and "日本語" in html and html.count("<tr>") == len(rows) + 1


# --- W&B (offline: the table files of the run folder) --------------------------------------------


def test_wandb_offline_tables(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from rlmetrics.tracking import WandbBackend

    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DISABLE_GIT", "true")
    tables = {2: table(), 6: table(seed=3)}
    with Tracker("p", "e", backends=[WandbBackend(mode="offline")], log_dir=tmp_path) as tr:
        for step, t in tables.items():
            tr.log({"a": float(step)}, step=step)
            tr.log_samples(t, step=step)
    (run,) = (tr.run_dir / "wandb").glob("offline-run-*")
    files = sorted((run / "files" / "media" / "table").glob(f"{K.SAMPLES_TABLE}_*.table.json"))
    back = {}
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))  # wandb's table format: columns and rows
        assert data["columns"] == list(K.SAMPLES_COLUMNS)
        t = SampleTable.from_rows([dict(zip(data["columns"], r, strict=True)) for r in data["data"]])
        back[t.step[0]] = t
    assert back == {step: with_step(t, step) for step, t in tables.items()}


# --- MLflow (its client on the sqlite store of log_dir) -------------------------------------------


def _mlflow_tables(client, run_id, dest) -> dict[int, SampleTable]:
    back = {}
    for info in client.list_artifacts(run_id, K.SAMPLES_TABLE):
        data = json.loads(
            open(client.download_artifacts(run_id, info.path, str(dest)), encoding="utf-8").read()
        )
        rows = [dict(zip(data["columns"], r, strict=True)) for r in data["data"]]
        for r in rows:  # pandas holds a column of ints and None as floats
            r["length"] = None if r["length"] is None else int(r["length"])
        back[int(info.path.rsplit("_", 1)[1].removesuffix(".json"))] = SampleTable.from_rows(rows)
    return back


@pytest.mark.parametrize("pandas", [True, False], ids=["log_table", "log_dict"])
def test_mlflow_table_artifacts(tmp_path, monkeypatch, pandas):
    pytest.importorskip("mlflow")
    import sys

    from mlflow.tracking import MlflowClient

    if not pandas:
        monkeypatch.setitem(sys.modules, "pandas", None)  # its import fails: log_dict
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    tables = {2: table(), 12: table(seed=3)}
    with Tracker("p", "e", backends=("mlflow",), log_dir=tmp_path / "logs") as tr:
        for step, t in tables.items():
            tr.log({"a": float(step)}, step=step)
            tr.log_samples(t, step=step)
    backend = tr.backends["mlflow"]
    client = MlflowClient(tracking_uri=backend.tracking_uri)
    (tmp_path / "dl").mkdir()
    assert _mlflow_tables(client, backend.run_id, tmp_path / "dl") == {
        step: with_step(t, step) for step, t in tables.items()
    }
    assert list((tmp_path / "cwd").iterdir()) == []  # nothing in the process's ./mlruns
    assert list((tmp_path / "logs" / "mlartifacts").rglob("step_000000000012.json"))
    if pandas:  # log_table marks them tables for MLflow's UI
        logged = json.loads(client.get_run(backend.run_id).data.tags["mlflow.loggedArtifacts"])
        assert {"path": f"{K.SAMPLES_TABLE}/step_000000000002.json", "type": "table"} in logged


# --- trackio (its SQLite store, read back by its own reader in a fresh process) ------------------

TRACKIO_SCRIPT = """
import json, sys
from rlmetrics.tracking import Tracker
from rlmetrics.training.samples import SampleTable
tables = {int(k): SampleTable.from_rows(v) for k, v in json.loads(sys.argv[1]).items()}
opts = {"auto_log_cpu": False, "auto_log_gpu": False}
with Tracker("p", "e", backends=("trackio",), log_dir=sys.argv[2], trackio_kwargs=opts) as tr:
    for step, t in tables.items():
        tr.log({"a": float(step)}, step=step)
        tr.log_samples(t, step=step)
from trackio.sqlite_storage import SQLiteStorage
print(json.dumps(SQLiteStorage.get_logs("p", "e"), default=str))
"""


def test_trackio_tables_through_its_sqlite_reader(tmp_path):
    pytest.importorskip("trackio")
    import os
    import subprocess
    import sys

    env = {**os.environ, "TRACKIO_DIR": str(tmp_path / "trackio"), "TRACKIO_STORAGE_MODE": "sqlite"}
    env.pop("TRACKIO_SPACE_ID", None)
    env.pop("TRACKIO_SERVER_URL", None)
    tables = {2: table(), 6: table(seed=3)}
    payload = json.dumps({step: t.rows() for step, t in tables.items()})
    out = subprocess.run(
        [sys.executable, "-c", TRACKIO_SCRIPT, payload, str(tmp_path / "logs")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    logs = json.loads(out.stdout.strip().splitlines()[-1])
    back = {
        row["step"]: SampleTable.from_rows(row[K.SAMPLES_TABLE]["_value"])
        for row in logs
        if K.SAMPLES_TABLE in row
    }
    assert back == {step: with_step(t, step) for step, t in tables.items()}


def test_an_object_with_rows_is_taken_as_a_table(tmp_path):
    class Rows:  # e.g. a SampleTable of a reloaded module
        def rows(self):
            return table().rows()

    with Tracker("p", "e", log_dir=tmp_path) as tr:
        tr.log_samples(Rows(), step=1)  # type: ignore[arg-type]
    assert read_samples(tr.run_dir) == {1: with_step(table(), 1)}

"""Tests of rlmetrics.tracking._backend: the backend protocol, the name registry and each backend's
constructor.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rlmetrics.errors import TrackingWarning
from rlmetrics.tracking import (
    Backend,
    ConsoleBackend,
    JsonlBackend,
    MlflowBackend,
    RunInfo,
    TensorBoardBackend,
    Tracker,
    TrackioBackend,
    WandbBackend,
    _backend,
    backend_names,
    read_jsonl,
    register_backend,
)
from rlmetrics.training.samples import select_samples
from tracking_doubles import Mine


class OldMine:
    """A backend written before ``keeps_records`` and ``log_samples`` joined the protocol."""

    name = "old"
    max_step = None

    def __init__(self) -> None:
        self.rows: list[tuple[int, dict]] = []
        self.exit_codes: list[int] = []

    def start(self, run: RunInfo) -> list[str]:
        return ["started"]

    def log(self, metrics, step):
        self.rows.append((step, metrics))
        return ("a tuple note",)

    def finish(self, *, exit_code: int = 0) -> None:
        self.exit_codes.append(exit_code)


@pytest.fixture
def registry(monkeypatch):
    """The registry as it is, restored after the test."""
    monkeypatch.setattr(_backend, "_FACTORIES", dict(_backend._FACTORIES))
    return _backend._FACTORIES


# --- the protocol ------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["instance", "registered-name"])
def test_a_custom_backend_gets_the_run_every_record_and_the_exit_code(tmp_path, registry, how):
    made: list[Mine] = []

    def factory():
        made.append(Mine())
        return made[-1]

    register_backend("mine", factory)
    spec = factory() if how == "instance" else "mine"
    with (
        pytest.raises(KeyError),
        Tracker("p", "e", backends=[spec, "jsonl"], config={"a": {"b": 1}}, log_dir=tmp_path) as tr,
    ):
        tr.log({"x": 1.0}, step=3)
        raise KeyError("the training loop failed")
    (mine,) = made
    assert isinstance(mine, Backend) and tr.backends["mine"] is mine
    assert mine.run == RunInfo(
        "p", "e", tmp_path / "p" / "e", Path(tmp_path), {"a": {"b": 1}}, {"a.b": 1}, False
    )
    assert mine.rows == [(3, {"x": 1.0})] and mine.exit_codes == [1]
    assert [r["x"] for r in read_jsonl(tr.jsonl_path)] == [1.0]


def test_a_backend_of_the_older_protocol_is_completed_with_the_defaults(tmp_path):
    old = OldMine()
    assert not isinstance(old, Backend)  # no keeps_records, no log_samples
    with pytest.warns(TrackingWarning, match=r"tracking backend 'old': started"):
        tr = Tracker("p", "e", backends=[old, "jsonl"], log_dir=tmp_path)
    metrics = {"x": 1.0}
    with pytest.warns(TrackingWarning, match=r"'old', step 0: a tuple note"):
        tr.log(metrics, step=0)
    with pytest.warns(TrackingWarning, match=r"'old' has no log_samples\(table, step\)"):
        tr.log_samples(select_samples(["1+1="], ["2"], [1.0]), step=0)
    tr.finish(exit_code=3)
    assert old.rows == [(0, {"x": 1.0})] and old.rows[0][1] is not metrics  # it may keep its record
    assert old.exit_codes == [3] and tr.lost == {}


def test_notes_of_start_and_log_are_warnings_and_max_step_is_read_once(tmp_path):
    mine = Mine(max_step=5, notes=("param cut",))
    with pytest.warns(TrackingWarning, match=r"tracking backend 'mine': param cut"):
        tr = Tracker("p", "e", backends=[mine], log_dir=tmp_path)
    with pytest.warns(TrackingWarning, match=r"'mine', step 1: a note"):
        tr.log({"noted": 1.0}, step=1)
    with pytest.warns(TrackingWarning, match=r"step 6 is beyond its step range \(0 to 5\)"):
        tr.log({"x": 1.0}, step=6)
    tr.finish()
    assert [step for step, _ in mine.rows] == [1] and tr.lost == {"mine": 1}


def test_two_backends_of_one_name_get_distinct_keys_and_their_own_copies(tmp_path):
    a, b = Mine(), Mine()
    with Tracker("p", "e", backends=[a, b], log_dir=tmp_path) as tr:
        tr.log({"x": 1.0}, step=0)
    assert list(tr.backends) == ["mine", "mine_"]
    assert a.rows == b.rows and a.rows[0][1] is not b.rows[0][1]


def test_a_backend_object_is_started_once(tmp_path):
    backend = JsonlBackend()
    Tracker("p", "e", backends=[backend], log_dir=tmp_path).finish()
    with pytest.raises(RuntimeError, match=r"already writes .*metrics.jsonl'; make one per tracker"):
        Tracker("p", "again", backends=[backend], log_dir=tmp_path)
    assert not (tmp_path / "p" / "again").exists()  # the failed start leaves no run directory


# --- the registry ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "factory", "exc", "match"),
    [
        ("", Mine, ValueError, "name must be a non-empty str without commas or spaces; got ''"),
        ("a,b", Mine, ValueError, "without commas or spaces; got 'a,b'"),
        (3, Mine, ValueError, "name must be a non-empty str"),
        ("mine", "Mine", TypeError, "factory must be callable .*; got str"),
        ("jsonl", Mine, ValueError, "'jsonl' is registered already; pass replace=True"),
    ],
    ids=["empty", "comma", "not-a-str", "factory-not-callable", "taken"],
)
def test_register_backend_errors(registry, name, factory, exc, match):
    with pytest.raises(exc, match=match):
        register_backend(name, factory)


def test_registered_names_are_known_replaceable_and_checked(tmp_path, registry):
    register_backend("mine", Mine)
    assert "mine" in backend_names() and {"jsonl", "wandb"} <= set(backend_names())
    register_backend("mine", lambda: object(), replace=True)
    with pytest.raises(TypeError, match="the factory of backend 'mine' returned an object that needs log"):
        Tracker("p", "e", backends="mine", log_dir=tmp_path)
    with pytest.raises(
        ValueError, match=r"unknown tracking backend 'yours'; known: console, jsonl, mine, mlflow"
    ):
        Tracker("p", "e", backends="yours", log_dir=tmp_path)
    with pytest.raises(ValueError, match="backends lists 'jsonl' twice"):
        Tracker("p", "e", backends="jsonl,console,jsonl", log_dir=tmp_path)
    assert not (tmp_path / "p").exists()  # names are checked before the run is claimed


# --- each backend's constructor ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (lambda: JsonlBackend(fsync="yes"), TypeError, "fsync must be a bool; got str 'yes'"),
        (
            lambda: ConsoleBackend(keys="critic/*"),
            TypeError,
            "keys must be a sequence of str patterns; got str",
        ),
        (
            lambda: ConsoleBackend(keys=["a", 1]),
            TypeError,
            "keys must be a sequence of str patterns; got 1 among",
        ),
        (lambda: ConsoleBackend(file=3), TypeError, r"file must be a text file \(with write\(\)\); got int"),
        (lambda: TensorBoardBackend(folder="a/b"), ValueError, "folder must be a plain name"),
        (lambda: TensorBoardBackend(flush=1), TypeError, "flush must be a bool; got int 1"),
        (lambda: WandbBackend(mode="offfline"), ValueError, r"mode must be one of \('online', 'offline'"),
        (lambda: WandbBackend(project=""), TypeError, "project must be a non-empty str or None; got ''"),
        (lambda: WandbBackend(name=3), TypeError, "name must be a non-empty str or None; got 3"),
        (lambda: WandbBackend(init_kwargs=["tags"]), TypeError, "init_kwargs must be a mapping .*; got list"),
        (lambda: TrackioBackend(init_kwargs={1: 2}), TypeError, "init_kwargs must have str keys .*; got 1"),
        (lambda: TrackioBackend(project=b"p"), TypeError, "project must be a non-empty str or None"),
        (
            lambda: MlflowBackend(tracking_uri=3),
            TypeError,
            "tracking_uri must be a non-empty str or None; got 3",
        ),
    ],
    ids=[
        "jsonl-fsync",
        "console-keys-str",
        "console-keys-item",
        "console-file",
        "tensorboard-folder",
        "tensorboard-flush",
        "wandb-mode",
        "wandb-project",
        "wandb-name",
        "wandb-init-kwargs",
        "trackio-init-kwargs-keys",
        "trackio-project",
        "mlflow-uri",
    ],
)
def test_backend_constructor_errors(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


def test_constructors_import_nothing_heavy(monkeypatch):
    """A backend is configured without its package; the import error comes when the tracker starts it."""
    for module in ("wandb", "mlflow", "trackio", "tensorboard"):
        monkeypatch.setitem(sys.modules, module, None)
    for backend in (WandbBackend(mode="offline"), MlflowBackend(), TrackioBackend(), TensorBoardBackend()):
        assert isinstance(backend, Backend)

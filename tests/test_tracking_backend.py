"""The backend protocol, the name registry, each backend's constructor and the tracker's old keywords."""

from __future__ import annotations

import io
import math
import re
import sys
import types
from pathlib import Path

import numpy as np
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
from rlmetrics.tracking._health import _finding_records
from rlmetrics.tracking._values import _convert, _Converter
from rlmetrics.training.samples import select_samples


class Mine:
    """A backend with the whole protocol, keeping what the tracker asked of it."""

    name = "mine"
    keeps_records = True

    def __init__(self, max_step: int | None = None, notes: tuple[str, ...] = ()) -> None:
        self.samples: list[tuple[int, object]] = []
        self.max_step = max_step
        self.notes = notes
        self.run: RunInfo | None = None
        self.rows: list[tuple[int, dict]] = []
        self.exit_codes: list[int] = []

    def start(self, run: RunInfo) -> list[str]:
        self.run = run
        return list(self.notes)

    def log(self, metrics, step):
        self.rows.append((step, metrics))
        return ["a note"] if "noted" in metrics else None

    def log_samples(self, table, step):
        self.samples.append((step, table))

    def finish(self, *, exit_code: int = 0) -> None:
        self.exit_codes.append(exit_code)


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


@pytest.fixture
def fake_wandb(monkeypatch):
    """A stand-in ``wandb`` module: the ``init`` arguments of each run."""
    inits: list[dict] = []

    class Run:
        id = "abc"

        def log(self, metrics, step=None):
            pass

        def finish(self, exit_code=0):
            inits[-1]["exit_code"] = exit_code

    def init(**kwargs):
        inits.append(kwargs)
        return Run()

    fake = types.ModuleType("wandb")
    fake.__dict__["init"] = init
    monkeypatch.setitem(sys.modules, "wandb", fake)
    return inits


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


def test_a_configured_wandb_backend_beside_a_name(tmp_path, fake_wandb):
    backend = WandbBackend(project="elsewhere", mode="offline", init_kwargs={"tags": ["grpo"]})
    with Tracker("p", "e", backends=["jsonl", backend], config={"lr": 0.1}, log_dir=tmp_path) as tr:
        tr.log({"x": 1.0}, step=0)
    assert list(tr.backends) == ["jsonl", "wandb"] and tr.backends["wandb"] is backend
    (init,) = fake_wandb
    assert init == {
        "project": "elsewhere",
        "name": "e",
        "dir": str(tr.run_dir),
        "config": {"lr": 0.1},
        "mode": "offline",
        "tags": ["grpo"],
        "exit_code": 0,
    }


def test_the_console_backend_prints_the_run_and_its_keys(tmp_path):
    out = io.StringIO()
    with Tracker("proj", "exp", backends=[ConsoleBackend(keys=["b*"], file=out)], log_dir=tmp_path) as tr:
        tr.log({"a": 1.0, "b": 2.5}, step=4)
    assert out.getvalue().splitlines() == ["proj / exp", "step 4 | b 2.5 (+1 more)"]


# --- the tracker's old keywords ----------------------------------------------------------------


def test_the_old_keywords_configure_the_named_backends(tmp_path, fake_wandb):
    out = io.StringIO()
    with pytest.warns(DeprecationWarning, match=r"Tracker\(fsync=\.\.\.\) is deprecated") as caught:
        tr = Tracker(
            "p",
            "e",
            backends="jsonl,console,wandb",
            log_dir=tmp_path,
            fsync=True,
            console_keys=("x",),
            console_file=out,
            wandb_mode="disabled",
            wandb_kwargs={"entity": "me"},
        )
    assert sum(w.category is DeprecationWarning for w in caught) == 5  # one a keyword
    tr.log({"x": 1.0, "y": 2.0}, step=0)
    tr.finish(exit_code=2)
    jsonl, console = tr.backends["jsonl"], tr.backends["console"]
    assert isinstance(jsonl, JsonlBackend) and jsonl.fsync is True
    assert (
        isinstance(console, ConsoleBackend)
        and console.patterns == ("x",)
        and "step 0 | x 1" in out.getvalue()
    )
    (init,) = fake_wandb
    assert init["mode"] == "disabled" and init["entity"] == "me" and init["exit_code"] == 2


@pytest.mark.parametrize(
    ("keyword", "value", "spelling"),
    [
        ("fsync", True, "JsonlBackend(fsync=...)"),
        ("console_keys", ("x",), "ConsoleBackend(keys=...)"),
        ("console_file", io.StringIO(), "ConsoleBackend(file=...)"),
        ("wandb_mode", "disabled", "WandbBackend(mode=...)"),
        ("wandb_kwargs", {"entity": "me"}, "WandbBackend(init_kwargs=...)"),
        ("mlflow_tracking_uri", None, "MlflowBackend(tracking_uri=...)"),
        ("trackio_kwargs", None, "TrackioBackend(init_kwargs=...)"),
    ],
)
def test_each_old_keyword_warns_with_the_new_spelling_and_still_works(tmp_path, keyword, value, spelling):
    backend = {"fsync": "jsonl", "console_keys": "console", "console_file": "console"}.get(keyword)
    names = ["jsonl"] if backend in (None, "jsonl") else ["jsonl", backend]
    if keyword.startswith("wandb"):
        names = ["jsonl"]  # configuring a backend that is not asked for is a no-op, as before
    match = rf"Tracker\({keyword}=\.\.\.\) is deprecated .*backends=\[{re.escape(spelling)}\]"
    with pytest.warns(DeprecationWarning, match=match) as caught:
        tr = Tracker("p", "e", backends=names, log_dir=tmp_path, **{keyword: value})
    assert caught[0].filename == __file__  # it points at the caller's line
    tr.log({"x": 1.0}, step=0)
    tr.finish()
    assert [r["x"] for r in read_jsonl(tr.jsonl_path)] == [1.0]
    if keyword == "fsync":
        assert tr.backends["jsonl"].fsync is True
    if keyword == "console_keys":
        assert tr.backends["console"].patterns == ("x",)


def test_an_unknown_keyword_is_a_type_error(tmp_path):
    with pytest.raises(TypeError, match="Tracker\\(\\) got an unexpected keyword argument 'wandb_mod'"):
        Tracker("p", "e", log_dir=tmp_path, wandb_mod="offline")
    with pytest.raises(ValueError, match=r"mode must be one of"):
        Tracker("p", "e", backends="wandb", log_dir=tmp_path, wandb_mode="offfline")
    assert not (tmp_path / "p").exists()


# --- the converter's fast path gives what the checked path gives -------------------------------


STEPS = {
    "floats": {"a": 0.5, "b": -1.0},
    "numpy-and-python-numbers": {
        "a": np.float32(0.25),
        "b": 3,
        "c": True,
        "d": np.int64(-2),
        "e": np.bool_(False),
    },
    "non-ascii-key": {"größe": 1.0, "a": 2.0},
    "nan-and-inf": {"a": math.nan, "b": -math.inf},
    "empty": {},
}


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "keys-known"])
@pytest.mark.parametrize("metrics", list(STEPS.values()), ids=list(STEPS))
def test_the_fast_path_matches_the_checked_path(metrics, warm):
    convert = _Converter()
    if warm:
        convert(metrics)
    got, dropped = convert(metrics)
    want, want_dropped = _convert(metrics)
    assert dropped == want_dropped == []
    assert list(got) == list(want) and all(type(v) is float for v in got.values())
    assert all(g == w or (math.isnan(g) and math.isnan(w)) for g, w in zip(got.values(), want.values()))
    assert got is not metrics


def test_the_fast_path_keeps_every_refusal_after_the_keys_are_known():
    convert = _Converter()
    convert({"a": 1.0, "b": 2.0})
    with pytest.raises(TypeError, match=r"metrics\['a'\] must be a number .*got str '1.0'"):
        convert({"a": "1.0", "b": 2.0})
    with pytest.raises(ValueError, match=r"metrics\['step'\]: 'step' is reserved"):
        convert({"a": 1.0, "step": 2.0})
    got, dropped = convert({"a": 1.0, "b": 10**400})
    assert got == {"a": 1.0} and dropped == [("b", "its value, an integer of 1329 bits, is beyond a float64")]
    got, dropped = convert({"a": 1.0, "\ud800": 2.0})
    assert got == {"a": 1.0} and "not valid UTF-8" in dropped[0][1]
    with pytest.raises(TypeError, match="metrics must be a mapping of key to number; got list"):
        convert([("a", 1.0)])


class Plain(float):
    """A float subclass that converts as its value."""


class Halved(float):
    """A float subclass whose ``float()`` is not its value: only the checked path calls it."""

    def __float__(self) -> float:
        return float.__float__(self) / 2


class Key(str):
    """A str subclass key."""


#: A step after a warm-up step of plain floats with the keys a, b: the value each key must reach
#: the backends with (``float(value)``, the checked path's conversion, worked out by hand).
FALLBACKS = {
    "float-subclass": ({"a": Plain(0.5), "b": 1.0}, {"a": 0.5, "b": 1.0}),
    "float-subclass-own-float": ({"a": Halved(3.0), "b": 1.0}, {"a": 1.5, "b": 1.0}),
    "numpy-float64": ({"a": np.float64(0.25), "b": 1.0}, {"a": 0.25, "b": 1.0}),
    "numpy-float32": ({"a": np.float32(0.75), "b": 1.0}, {"a": 0.75, "b": 1.0}),
    "bool": ({"a": True, "b": np.bool_(False)}, {"a": 1.0, "b": 0.0}),
    "int": ({"a": 3, "b": np.int32(-2)}, {"a": 3.0, "b": -2.0}),
    "keys-reordered": ({"b": 1.0, "a": 2.0}, {"b": 1.0, "a": 2.0}),
    "key-added": ({"a": 1.0, "b": 2.0, "c": 3.0}, {"a": 1.0, "b": 2.0, "c": 3.0}),
    "str-subclass-key-in-a-new-set": ({Key("c"): 1.0, "a": 2.0}, {"c": 1.0, "a": 2.0}),
}


@pytest.mark.parametrize(("metrics", "want"), list(FALLBACKS.values()), ids=list(FALLBACKS))
def test_a_step_off_the_fast_path_converts_as_the_checked_path(metrics, want):
    convert = _Converter()
    convert({"a": 0.0, "b": 0.0})  # the keys a, b known: the next step with them skips the key checks
    got, dropped = convert(metrics)
    assert dropped == [] and got == want and got == _convert(metrics)[0]
    assert {type(k) for k in got} == {str} and {type(v) for v in got.values()} == {float}


@pytest.mark.parametrize("policy", ["keep", "drop", "error"], ids=["keep", "drop", "error"])
def test_a_nonfinite_value_on_the_fast_path_meets_the_policy(tmp_path, policy):
    with Tracker("p", "e", log_dir=tmp_path, nonfinite=policy) as tr:
        tr.log({"a": 1.0, "b": 2.0}, step=0)  # the keys known: step 1 takes the fast path
        if policy == "error":
            with pytest.raises(ValueError, match=r"metrics\['b'\] is -inf; non-finite values are not"):
                tr.log({"a": 1.0, "b": -math.inf}, step=1)
        else:
            tr.log({"a": math.nan, "b": -math.inf}, step=1)
    rows = read_jsonl(tr.jsonl_path)
    assert [row["step"] for row in rows] == ([0] if policy == "error" else [0, 1])
    if policy == "keep":
        assert math.isnan(rows[1]["a"]) and rows[1]["b"] == -math.inf
        assert b"NaN" in tr.jsonl_path.read_bytes()  # json's spelling, not orjson's null
    elif policy == "drop":
        assert set(rows[1]) == {"step", "timestamp"}


# --- health records ----------------------------------------------------------------------------


def test_finding_records_value_each_severity():
    finding = types.SimpleNamespace
    records, messages = _finding_records(
        [
            finding(kind="entropy_collapse", severity="warning", step=3, advice="raise it"),
            finding(kind="nonfinite", severity="odd", step=4, advice="look"),
        ]
    )
    assert records == {"health/entropy_collapse": 1.0, "health/nonfinite": 2.0}
    assert messages[0] == "rlmetrics health: entropy_collapse (warning) from step 3: raise it"
    assert _finding_records(None) == ({}, [])


# --- keeps_records: the caller's dict goes uncopied only to backends that declare they keep nothing --


class Reader(Mine):
    """A backend that declares it only reads its record during log()."""

    name = "reader"
    keeps_records = False


class Monitor:
    def update(self, values, step):
        return []


@pytest.mark.parametrize(
    ("make", "monitor", "borrowed"),
    [
        (lambda: [Reader(), Reader()], None, [True, True]),
        (lambda: [Reader(), Mine()], None, [False, False]),
        (lambda: [Mine(), Reader()], None, [False, False]),
        (lambda: [Reader()], Monitor(), [False]),
    ],
    ids=["only-readers", "reader-then-keeper", "keeper-then-reader", "reader-with-monitor"],
)
def test_the_callers_dict_reaches_backends_uncopied_only_when_none_keeps_it(
    tmp_path, make, monitor, borrowed
):
    backends = make()
    metrics = {"x": 1.0, "y": 2.0}
    with Tracker("p", "e", backends=backends, log_dir=tmp_path, monitor=monitor) as tr:
        tr.log(metrics, step=0)
    assert [b.rows[0][1] is metrics for b in backends] == borrowed
    assert all(b.rows == [(0, {"x": 1.0, "y": 2.0})] for b in backends)
    keepers = [b.rows[0][1] for b in backends if not isinstance(b, Reader)]
    metrics["x"] = 9.0  # what a keeper holds is its own
    assert all(row["x"] == 1.0 for row in keepers)


@pytest.mark.parametrize(
    "metrics",
    [{"x": 1}, {"x": np.float64(1.0)}, types.MappingProxyType({"x": 1.0})],
    ids=["int", "numpy", "mapping"],
)
def test_a_step_that_needs_converting_is_a_new_dict_even_for_readers(tmp_path, metrics):
    reader = Reader()
    with Tracker("p", "e", backends=[reader], log_dir=tmp_path) as tr:
        tr.log(metrics, step=0)
    (row,) = [r for _, r in reader.rows]
    assert row is not metrics and row == {"x": 1.0} and type(row["x"]) is float

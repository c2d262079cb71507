"""Tests of rlmetrics.tracking._files: the run directory claimed (names, new names, nothing left behind)."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

from rlmetrics.tracking import Tracker, read_jsonl

# --- run identity ----------------------------------------------------------------------------------


def test_an_existing_run_is_never_appended_to_a_new_name_is_taken(tmp_path):
    """The README loop run twice: two runs, each read back whole."""
    runs = []
    for i in range(3):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with Tracker("my-project", "run-1", log_dir=tmp_path) as tr:
                for step in range(5):
                    tr.log({"loss": float(10 * i + step)}, step=step)
        runs.append((tr, [str(w.message) for w in caught]))
    (first, none), (second, told), (third, _) = runs
    assert first.experiment == "run-1" and first.renamed_from is None and none == []
    assert (second.experiment, second.renamed_from) == ("run-1-2", "run-1")
    assert told == [
        f"run directory {str(first.run_dir)!r} exists: this run is 'run-1-2' ({str(second.run_dir)!r}); "
        "pass resume=True to continue the old one"
    ]
    assert third.run_dir == tmp_path / "my-project" / "run-1-3" and third.start_step == 0
    for i, (tr, _) in enumerate(runs):
        assert [r["loss"] for r in read_jsonl(tr.jsonl_path)] == [10.0 * i + s for s in range(5)]


@pytest.mark.parametrize(
    ("project", "experiment", "exc", "match"),
    [
        (
            "../../escape",
            "e",
            ValueError,
            r"project must be a plain name .*'\.\./\.\./escape', which holds a path",
        ),
        ("a/b", "e", ValueError, "project must be a plain name.*holds a path separator"),
        ("p", "..", ValueError, r"experiment must be a plain name.*'\.\.', which is '\.' or '\.\.'"),
        ("p", ".", ValueError, "experiment must be a plain name"),
        ("p", "/tmp/abs", ValueError, "experiment must be a plain name.*holds a path separator"),
        ("p", "a\\b", ValueError, "experiment must be a plain name.*holds a path separator"),
        ("p", "x\0y", ValueError, "experiment must be a plain name.*holds a NUL character"),
        ("p", "x\ud800", ValueError, r"experiment must be a plain name.*not valid UTF-8"),
        ("p", "é" * 101, ValueError, "experiment must be a plain name.*is 202 bytes long"),
        ("", "e", TypeError, "project must be a non-empty str; got ''"),
        ("p", None, TypeError, "experiment must be a non-empty str; got None"),
    ],
    ids=[
        "escape",
        "slash",
        "dotdot",
        "dot",
        "absolute",
        "backslash",
        "nul",
        "surrogate",
        "long",
        "empty",
        "none",
    ],
)
def test_project_and_experiment_are_plain_names(tmp_path, project, experiment, exc, match):
    log_dir = tmp_path / "a" / "b"
    with pytest.raises(exc, match=match):
        Tracker(project, experiment, log_dir=log_dir)
    assert not tmp_path.joinpath("a").exists() and list(tmp_path.iterdir()) == []  # nothing written


def test_the_run_dir_lies_under_log_dir(tmp_path):
    for project, experiment in (("p", "e"), ("..p", "e..f"), ("p q", "é"), (np.str_("np"), "e")):
        with Tracker(project, experiment, log_dir=tmp_path / "logs") as tr:
            tr.log({"a": 1.0}, step=0)
        assert tr.run_dir.resolve().parent.parent == (tmp_path / "logs").resolve()
        assert type(tr.project) is str


def _without_tensorboard(monkeypatch):
    """tensorboard unimportable, its submodules too (an earlier test may have imported them:
    a cached submodule would still import)."""
    for name in [m for m in sys.modules if m == "tensorboard" or m.startswith("tensorboard.")] + [
        "tensorboard"
    ]:
        monkeypatch.setitem(sys.modules, name, None)


def test_a_failed_construction_leaves_no_run_dir_behind(tmp_path, monkeypatch):
    _without_tensorboard(monkeypatch)
    with pytest.raises(ImportError, match="needs tensorboard"):
        Tracker("p", "e", backends=("jsonl", "tensorboard"), log_dir=tmp_path / "logs")
    assert not (tmp_path / "logs").exists()
    with Tracker("p", "e", log_dir=tmp_path / "logs") as tr:  # the name is still free
        pass
    assert tr.experiment == "e"

"""rlmetrics.cli._files: strict JSON, atomic writes that leave nothing behind on failure."""

from __future__ import annotations

import errno
import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest

from rlmetrics.cli import _files
from rlmetrics.cli._files import atomic_path, check_target, json_safe, write_json


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (float("nan"), None),
        (math.inf, None),
        (np.float32(0.25), 0.25),
        (np.int64(7), 7),
        (np.bool_(True), True),
        ({1: (np.float64(-math.inf), "x")}, {"1": [None, "x"]}),
    ],
    ids=["nan", "inf", "np-float32", "np-int64", "np-bool", "nested"],
)
def test_json_safe(value, expected):
    assert json_safe(value) == expected


def test_write_json_is_strict_and_replaces_the_target(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    write_json(target, {"a": float("nan"), "b": [np.float32(1.5)]})
    assert json.loads(target.read_text()) == {"a": None, "b": [1.5]}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    with pytest.raises(RuntimeError, match="disk full"), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("disk full")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("fault", ["fsync", "replace"])
def test_write_json_errors_of_the_disk_leave_nothing(tmp_path, monkeypatch, fault):
    """A full disk can surface at the sync (delayed writes) or at the rename: an OSError, the old
    file intact and no temporary file."""
    target = tmp_path / "out.json"
    target.write_text("old")
    monkeypatch.setattr(_files.os, fault, _enospc)
    with pytest.raises(OSError, match="No space left on device"):
        write_json(target, {"a": 1})
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_write_json_payload_not_json_writes_nothing(tmp_path):
    with pytest.raises(TypeError, match="not JSON serializable"):
        write_json(tmp_path / "out.json", {"a": object()})
    assert list(tmp_path.iterdir()) == []


def test_write_json_syncs_before_renaming(tmp_path, monkeypatch):
    events: list[str] = []
    fsync, replace = os.fsync, os.replace
    monkeypatch.setattr(_files.os, "fsync", lambda fd: (events.append("fsync"), fsync(fd))[1])
    monkeypatch.setattr(_files.os, "replace", lambda a, b: (events.append("replace"), replace(a, b))[1])
    write_json(tmp_path / "out.json", [1])
    assert events == ["fsync", "replace"]


def test_atomic_path_refuses_targets_that_are_not_files(tmp_path):
    with pytest.raises(OSError, match="is not a regular file"), atomic_path(tmp_path):
        pass
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda d: d / "missing" / "out.json", "the directory .*missing does not exist"),
        (lambda d: d, "is a folder, not a file"),
        (lambda d: Path("/dev/null"), r"/dev/null is not a regular file \(a device or a pipe\)"),
        (lambda d: d / "out.json", None),
        (lambda d: (d / "old.json", (d / "old.json").write_text("x"))[0], None),
    ],
    ids=["no-dir", "folder", "device", "new-file", "existing-file"],
)
def test_check_target(tmp_path, make, match):
    problem = check_target(make(tmp_path), "--json")
    if match is None:
        assert problem is None
    else:
        assert problem is not None and re.search(match, problem) and problem.startswith("--json: ")

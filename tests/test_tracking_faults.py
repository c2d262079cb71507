"""Fault tests of rlmetrics.tracking: bad keys, a full disk, a read-only directory, processes killed
mid-write (SIGKILL, many times) and two processes appending to one run."""

from __future__ import annotations

import errno
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rlmetrics.tracking import Tracker, read_jsonl

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fork, SIGKILL and /dev/full are POSIX")


def rows_of(path: Path, *, allowed: str | None = None) -> list[dict]:
    """read_jsonl's rows; any warning other than one matching ``allowed`` fails the test."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = read_jsonl(path)
    unexpected = [str(w.message) for w in caught if allowed is None or allowed not in str(w.message)]
    assert not unexpected, unexpected
    return rows


# --- bad keys and values: loud, or dropped alone; never the rest of the run ----------------------


@pytest.mark.parametrize(
    ("key", "match"),
    [
        (3, "metric keys must be strings; got int 3"),
        (("a",), r"metric keys must be strings; got tuple \('a',\)"),
        (None, "metric keys must be strings; got NoneType None"),
        (b"a", "metric keys must be strings; got bytes b'a'"),
    ],
    ids=["int", "tuple", "none", "bytes"],
)
def test_a_key_of_the_wrong_type_is_a_named_error_and_later_steps_are_logged(tmp_path, key, match):
    with Tracker("p", "e", log_dir=tmp_path) as tr:
        tr.log({"a": 0.0}, step=0)
        with pytest.raises(TypeError, match=match):
            tr.log({key: 1.0, "a": 1.0}, step=1)
        tr.log({"a": 2.0}, step=2)
    assert [r["step"] for r in rows_of(tr.jsonl_path)] == [0, 2]


def test_a_very_long_key_round_trips(tmp_path):
    key = "k/" * 50_000
    with Tracker("p", "e", log_dir=tmp_path) as tr:
        tr.log({key: 1.5, "a": 1.0}, step=0)
        tr.log({"a": 2.0}, step=1)
    rows = rows_of(tr.jsonl_path)
    assert rows[0][key] == 1.5 and [r["step"] for r in rows] == [0, 1]


# Keys from every Unicode category, surrogates included, and numpy strings; values of every kind
# the tracker takes, ints beyond a float64 included.
KEYS = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=()), min_size=0, max_size=8),
    st.text(max_size=6).map(np.str_),
).filter(lambda k: k not in ("step", "timestamp"))
VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(2**1100), max_value=2**1100),
    st.booleans(),
    st.floats(width=32).map(np.float32),
    st.integers(-(2**63), 2**63 - 1).map(np.int64),
)


def _storable(key: str, value) -> bool:
    try:
        key.encode("utf-8")
        float(value)
    except (UnicodeEncodeError, OverflowError):
        return False
    return True


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.dictionaries(KEYS, VALUES, max_size=5), min_size=1, max_size=4))
@example([{np.str_("\x00"): 0.0}])  # numpy's str() of it is '' though it holds one character
def test_any_keys_and_values_every_step_logged_and_exactly_the_storable_keys(tmp_path_factory, steps):
    """A step is never lost; a key is dropped (with a warning) only if no backend can store it."""
    d = tmp_path_factory.mktemp("keys")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Tracker("p", "e", log_dir=d) as tr:
            for i, metrics in enumerate(steps):
                tr.log(metrics, step=i)
    # a key's characters as the tracker stores them: numpy's str() of np.str_("\x00") drops the NUL
    n_bad = sum(not _storable(str.__str__(k), v) for m in steps for k, v in m.items())
    assert sum("is dropped for every backend" in str(w.message) for w in caught) == n_bad
    assert tr.lost == {}
    rows = read_jsonl(tr.jsonl_path)
    assert [r["step"] for r in rows] == list(range(len(steps)))
    for row, metrics in zip(rows, steps):
        want = {str.__str__(k): float(v) for k, v in metrics.items() if _storable(str.__str__(k), v)}
        got = {k: v for k, v in row.items() if k not in ("step", "timestamp")}
        assert got.keys() == want.keys()
        for k, v in want.items():
            assert got[k] == v or (math.isnan(got[k]) and math.isnan(v)), k


# --- a full disk --------------------------------------------------------------------------------


class FailingFile:
    """Stands in for the jsonl backend's file: the ``fail_at``-th write fails with ENOSPC,
    after writing ``partial`` bytes of its line (a disk that filled mid-line)."""

    def __init__(self, fh, fail_at: int, partial: int = 0) -> None:
        self.fh, self.fail_at, self.partial, self.calls = fh, fail_at, partial, 0

    def write(self, data) -> int:
        self.calls += 1
        if self.calls == self.fail_at:
            if self.partial:
                self.partial, self.fail_at = 0, self.fail_at + 1  # the retry of the rest fails
                return self.fh.write(bytes(data)[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.fh.write(data)

    def __getattr__(self, name):
        return getattr(self.fh, name)


@pytest.mark.parametrize("partial", [0, 1], ids=["nothing-written", "half-a-line-written"])
def test_a_full_disk_loses_that_record_alone(tmp_path, partial):
    tr = Tracker("p", "e", log_dir=tmp_path)
    backend = tr.backends["jsonl"]
    backend._fh = FailingFile(backend._fh, fail_at=3, partial=partial)
    with pytest.warns(RuntimeWarning, match=r"'jsonl' lost the record of step 2; it keeps logging: OSError"):
        for step in range(6):
            tr.log({"a": float(step)}, step=step)
    tr.finish()
    assert tr.lost == {"jsonl": 1}
    # a half-written line is a fragment on a line of its own: skipped, the next record intact
    rows = rows_of(tr.jsonl_path, allowed="skipping unreadable line 3" if partial else None)
    assert [(r["step"], r["a"]) for r in rows] == [(s, float(s)) for s in (0, 1, 3, 4, 5)]


def test_a_disk_that_stays_full_never_stops_training(tmp_path):
    """``metrics.jsonl`` on /dev/full: every write fails with ENOSPC."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    run_dir = tmp_path / "p" / "e"
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.jsonl").symlink_to("/dev/full")
    rec: list[int] = []

    class Recorder:
        def log(self, metrics, step):
            rec.append(step)

        def finish(self):
            pass

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Tracker("p", "e", backends=["jsonl", Recorder()], log_dir=tmp_path, resume=True) as tr:
            for step in range(20):
                tr.log({"a": float(step)}, step=step)
    lost = [str(w.message) for w in caught if "lost the record" in str(w.message)]
    assert len(lost) == 5 and all("No space left on device" in m for m in lost)  # losses 1, 2, 4, 8, 16
    assert any("'jsonl' lost 20 records of this run" in str(w.message) for w in caught)
    assert tr.lost == {"jsonl": 20} and rec == list(range(20))


# --- a directory that cannot be written ---------------------------------------------------------


def test_a_read_only_log_dir_is_a_clear_error_at_construction(tmp_path, monkeypatch):
    def refuse(path, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(os, "mkdir", refuse)
    with pytest.raises(
        OSError, match=r"Errno 30\] cannot create the project folder under log_dir \(Read-only"
    ):
        Tracker("p", "e", log_dir=tmp_path / "logs")
    monkeypatch.undo()
    (tmp_path / "logs" / "p").mkdir(parents=True)
    monkeypatch.setattr(os, "mkdir", refuse)
    with pytest.raises(
        OSError,
        match=r"cannot create the run directory \(Read-only file system\); pass a log_dir you can write",
    ):
        Tracker("p", "e", log_dir=tmp_path / "logs")


def test_a_run_dir_whose_files_cannot_be_opened_is_a_clear_error(tmp_path, monkeypatch):
    import builtins

    import rlmetrics.tracking.jsonl as tracking

    def refuse(path, mode="r", *args, **kwargs):
        if "a" in mode or "w" in mode:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return builtins.open(path, mode, *args, **kwargs)

    monkeypatch.setattr(tracking, "open", refuse, raising=False)
    with pytest.raises(PermissionError, match=r"cannot write the run's metrics.jsonl \(Permission denied\)"):
        Tracker("p", "e", log_dir=tmp_path)
    assert not (tmp_path / "p" / "e").exists()  # the failed run leaves no directory behind


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes through chmod")
def test_a_read_only_directory_for_real(tmp_path):
    (tmp_path / "ro").mkdir(mode=0o555)
    try:
        with pytest.raises(PermissionError, match="cannot create the project folder under log_dir"):
            Tracker("p", "e", log_dir=tmp_path / "ro")
    finally:
        (tmp_path / "ro").chmod(0o755)


# --- processes killed mid-write, and two processes on one run -----------------------------------

# A process that imports rlmetrics once, then forks one logging child per request, so that each
# trial costs a fork (milliseconds) instead of an interpreter start.
ZYGOTE = r"""
import json, os, sys
from rlmetrics.tracking import Tracker

def child(spec):
    tr = Tracker("p", "e", log_dir=spec["dir"], resume=spec["resume"], fsync=spec["fsync"])
    prog = os.open(spec["progress"], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.write(prog, b"start\n")
    w, wide = spec["writer"], spec["wide"]
    big = {f"{w}/k{i}": float(i) for i in range(wide)}
    for step in range(spec["steps"]):
        metrics = {f"{w}/a": float(step)}
        if step % 7 == 3:
            metrics.update(big)
        tr.log(metrics, step=step)
        os.write(prog, b"%d\n" % step)
    tr.finish()

for line in sys.stdin:
    spec = json.loads(line)
    if spec.get("reap"):
        _, status = os.waitpid(spec["reap"], 0)
        print(json.dumps({"signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                          "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None}), flush=True)
        continue
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            child(spec)
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        os._exit(code)
    print(json.dumps({"pid": pid}), flush=True)
"""


class Zygote:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.children: list[int] = []

    def ask(self, spec: dict) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(spec) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, "the zygote died"
        return json.loads(answer)

    def start(self, **spec) -> int:
        pid = self.ask(spec)["pid"]
        self.children.append(pid)
        return pid

    def reap(self, pid: int) -> dict:
        self.children.remove(pid)
        return self.ask({"reap": pid})

    def close(self) -> None:
        for pid in self.children:  # a failed test: no child left running
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture
def zygote():
    z = Zygote()
    yield z
    z.close()


def wait_for(path: Path, text: bytes, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and text in path.read_bytes()):
        assert time.monotonic() < deadline, f"no {text!r} in {path}"
        time.sleep(0.001)


KILLS = 30


def test_a_process_killed_at_any_point_loses_at_most_the_record_being_written(tmp_path, zygote):
    """SIGKILL at random points (a fifth of them during start-up): every step whose log() returned
    reads back, in order, with its values; at most one more (the one being written) is there."""
    rng = random.Random(17)
    outcomes = {"during start-up": 0, "while logging": 0}
    torn = 0
    for trial in range(KILLS):
        d = tmp_path / f"t{trial}"
        d.mkdir()
        prog = d / "progress"
        early = trial % 5 == 0
        spec = {"dir": str(d), "progress": str(prog), "resume": False, "fsync": trial % 3 == 0}
        pid = zygote.start(**spec, writer="w", wide=300, steps=50_000)
        if early:
            time.sleep(rng.uniform(0, 0.004))
        else:
            wait_for(prog, b"start\n")
            time.sleep(rng.uniform(0, 0.02))
        os.kill(pid, signal.SIGKILL)
        status = zygote.reap(pid)
        assert status["signal"] == signal.SIGKILL, status  # killed, not finished or crashed
        done = [int(x) for x in prog.read_text().split()[1:]] if prog.exists() else []
        path = d / "p" / "e" / "metrics.jsonl"
        if not path.exists():
            assert done == []
            outcomes["during start-up"] += 1
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rows = read_jsonl(path)
        assert all("truncated last line" in str(w.message) for w in caught), [str(w.message) for w in caught]
        torn += len(caught)
        steps = [r["step"] for r in rows]
        assert steps == list(range(len(steps))), f"trial {trial}: a gap or a repeat"
        assert len(done) <= len(steps) <= len(done) + 1, (
            f"trial {trial}: {len(done)} logged, {len(steps)} read"
        )
        for row in rows:
            assert row["w/a"] == float(row["step"])
            if row["step"] % 7 == 3:
                assert len(row) == 2 + 1 + 300 and row["w/k299"] == 299.0
        outcomes["during start-up" if not done else "while logging"] += 1
        path.unlink()  # keep the disk use of the campaign small
    assert sum(outcomes.values()) == KILLS and outcomes["while logging"] >= KILLS // 2, outcomes


def test_two_processes_appending_to_one_run_lose_nothing(tmp_path, zygote):
    """Both resume=True: O_APPEND writes of whole lines, long ones (30 kB) among them, never mix."""
    n = 1500
    pids = [
        zygote.start(
            dir=str(tmp_path),
            progress=str(tmp_path / f"prog-{w}"),
            resume=True,
            fsync=False,
            writer=w,
            wide=2000,
            steps=n,
        )
        for w in "ab"
    ]
    for pid in pids:
        assert zygote.reap(pid) == {"signal": None, "code": 0}
    lines = (tmp_path / "p" / "e" / "metrics.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b""
    # A writer that starts while the other is mid-write can see the file end inside that line (the
    # size grows page by page) and start on a fresh line, as after a crash: at most one blank line
    # per start, which readers skip.
    assert sum(not line for line in lines[:-1]) <= 2
    rows = [json.loads(line) for line in lines[:-1] if line]  # every line whole: json.loads raises otherwise
    for w in "ab":
        mine = [r for r in rows if f"{w}/a" in r]
        assert [r["step"] for r in mine] == list(range(n))
        assert all(r[f"{w}/a"] == r["step"] for r in mine)
        assert all(len(r) == 2003 for r in mine if r["step"] % 7 == 3)
    assert len(rows) == 2 * n
    assert len(rows_of(tmp_path / "p" / "e" / "metrics.jsonl")) == 2 * n  # read_jsonl: no warning

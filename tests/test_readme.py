"""README.md stays true: its quickstart code runs, its commands are the ones CI runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
CI = Path(__file__).resolve().parents[1] / ".ci" / "run"


def _block_after(marker: str, lang: str) -> str:
    text = README.read_text()
    match = re.search(re.escape(marker) + r"\s*```" + lang + r"\n(.*?)```", text, re.S)
    assert match, f"README.md has no ```{lang} block after {marker!r}"
    return match.group(1)


def test_readme_has_the_demo_and_test_commands():
    demo = _block_after("<!-- ci:demo -->", "bash")
    test = _block_after("<!-- ci:test -->", "bash")
    assert "rlmetrics demo" in demo and "torch==2.13.0" in demo
    assert "pytest" in test and "torch==2.13.0" in test
    assert "ci:test" in CI.read_text(), ".ci/run must read the test command from README.md"


def test_readme_quickstart_code_runs():
    pytest.importorskip("torch")
    code = _block_after("## Compute metrics on a batch", "python")
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    metrics = namespace["metrics"]
    assert "critic/vf_explained_var" in metrics and "perf/mfu" in metrics
    assert 0.0 < metrics["perf/mfu"] < 1.0


def test_readme_lists_the_keys_of_every_signal():
    """The table of which keys feed which signal is the one the rules read."""
    from rlmetrics.health.signals import _CANDIDATES

    text = README.read_text()
    table = text.split("<!-- signals:table -->\n", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    listed = {row.split("|")[1].strip(" `"): re.findall(r"`([^`]+)`", row.split("|")[2]) for row in table}
    assert listed == {signal: list(keys) for signal, keys in _CANDIDATES.items()}


def test_readme_async_loop_code_runs_and_reads_the_lag():
    """The three statements of a custom async loop, run as written: the rollout stamped with the
    trainer's version, the queued batch's lag against it (brute force), the version counted."""
    import time

    import numpy as np

    from rlmetrics import compute_staleness_metrics
    from rlmetrics import keys as K

    code = _block_after("<!-- readme:async-loop -->", "python")
    rng = np.random.default_rng(0)
    version, width = 7, 5
    versions = np.array([7, 6, 6, 3, 0])  # the queued batch: lags 0, 1, 1, 4, 7
    lengths = rng.integers(1, width + 1, size=versions.size)
    batch = {
        "policy_versions": versions,
        "response_mask": (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64),
        "scores": rng.random(versions.size),
        "enqueue_time": time.time() - rng.random(versions.size) * 60.0,
    }
    rollout = {"responses": np.zeros((3, width), dtype=np.int64)}
    namespace = {
        "np": np,
        "time": time,
        "compute_staleness_metrics": compute_staleness_metrics,
        "rollout": rollout,
        "batch": batch,
        "version": version,
        "dropped": np.array([1, 0]),  # dropped at lags 6 and 7
        "metrics": {},
    }
    exec(compile(code, "README.md", "exec"), namespace)
    m = namespace["metrics"]
    lags = version - versions
    assert rollout["policy_versions"].tolist() == [version] * 3
    assert namespace["version"] == version + 1
    assert m[K.STALENESS_LAG_MEAN] == pytest.approx(lags.mean(), rel=1e-12)
    assert m[K.STALENESS_LAG_MAX] == lags.max() and m[K.STALENESS_LAG_MIN] == lags.min()
    assert m[K.staleness_bucket("3_4", K.STALENESS_BUCKET_SHARE)] == pytest.approx(0.2)
    assert m[K.STALENESS_DROPPED_COUNT] == 2 and m[K.STALENESS_DROPPED_SHARE] == pytest.approx(2 / 7)
    assert m[K.STALENESS_DROPPED_LAG_MEAN] == pytest.approx(6.5)
    assert m[K.STALENESS_TRAINED_REWARD_MEAN] == pytest.approx(batch["scores"].mean(), rel=1e-12)
    assert 0.0 <= m[K.STALENESS_AGE_MEAN] <= 60.0 + 5.0
    assert m[K.VERL_TRAJECTORY_STALENESS_WORST_MEAN] == m[K.SLIME_STALENESS_MEAN] == m[K.STALENESS_LAG_MEAN]


# ----------------------------------------------------------------------------- the scheduler recipes
FAKE_TRAINING = """
import json, sys
from pathlib import Path

run, total = Path(sys.argv[1]), int(sys.argv[2])
crashes = {int(s) for s in sys.argv[3].split(",") if s}  # a crash after the step (0: before any)
nan_at = int(sys.argv[4])
checkpoint, tries = run / "checkpoint", run / "tries.log"
start = int(checkpoint.read_text()) + 1 if checkpoint.exists() else 1
first = not tries.exists()
with open(tries, "a") as fh:
    fh.write(f"{start}\\n")
if first and 0 in crashes:
    sys.exit(137)
with open(run / "metrics.jsonl", "a") as fh:
    for step in range(start, total + 1):
        loss = float("nan") if step == nan_at else 0.1
        fh.write(json.dumps({"step": step, "actor/pg_loss": loss, "actor/entropy": 0.5}) + "\\n")
        fh.flush()
        if step == nan_at:
            sys.exit(1)  # its live monitor's "raise": an uncaught RunStopped
        checkpoint.write_text(str(step))
        if step in crashes:
            sys.exit(137)  # killed (out of memory, a node lost)
"""
CRASH = 137


@pytest.fixture
def job(tmp_path):
    """Runs a README recipe (bash) on a fake training run in ``tmp_path/run`` with ``rlmetrics``
    (this tree's) and the fakes of ``srun`` / ``scontrol`` on the PATH."""
    import os
    import shutil
    import subprocess
    import sys

    import rlmetrics

    if shutil.which("bash") is None:
        pytest.skip("no bash")
    bin_dir, run = tmp_path / "bin", tmp_path / "run"
    bin_dir.mkdir()
    run.mkdir()
    (tmp_path / "train.py").write_text(FAKE_TRAINING)
    fakes = {
        "rlmetrics": f'exec {sys.executable} -m rlmetrics "$@"',
        "srun": 'exec "$@"',
        "scontrol": f'echo "$@" >> {tmp_path / "scontrol.log"}',
    }
    for name, body in fakes.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    src = str(Path(rlmetrics.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p),
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }

    def start(marker: str, *, total: int = 6, crashes: str = "", nan_at: int = 0, **extra: str) -> Any:
        script = tmp_path / "recipe.sh"
        script.write_text(_block_after(marker, "bash"))
        command = [sys.executable, str(tmp_path / "train.py"), str(run), str(total), crashes, str(nan_at)]
        out = subprocess.run(
            ["bash", str(script), str(run), *command],
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=120,
        )
        out.starts = [int(s) for s in (run / "tries.log").read_text().split()]  # type: ignore[attr-defined]
        return out

    return start


def _statuses(marker: str) -> dict[str, int]:
    """The exit statuses a recipe names, ``error_finding=1; stopped=3``."""
    return {
        k: int(v) for k, v in re.findall(r"\b(error_finding|stopped)=(\d+)", _block_after(marker, "bash"))
    }


@pytest.mark.parametrize("marker", ["<!-- recipe:retry -->", "<!-- recipe:slurm -->"], ids=["shell", "slurm"])
def test_the_recipes_name_the_exit_statuses_of_the_code(marker):
    from rlmetrics.cli.diagnose import EXIT_ERROR
    from rlmetrics.cli.watch import EXIT_FINDING

    assert _statuses(marker) == {"error_finding": EXIT_ERROR, "stopped": EXIT_FINDING}


@pytest.mark.parametrize(
    ("crashes", "nan_at", "starts", "status"),
    [
        pytest.param("3", 0, [1, 4], 0, id="a-crash-resumed"),
        pytest.param("0", 0, [1, 1], 0, id="a-crash-before-any-step-resumed"),
        pytest.param("2,3,4", 0, [1, 3, 4], CRASH, id="three-crashes-give-up"),
        pytest.param("", 3, [1], "stopped", id="a-finding-stops-for-good"),
        pytest.param("2", 4, [1, 3], "stopped", id="a-crash-then-a-finding"),
    ],
)
def test_the_retry_recipe_retries_a_crash_and_stops_on_a_finding(job, crashes, nan_at, starts, status):
    from rlmetrics.cli.watch import EXIT_FINDING

    out = job("<!-- recipe:retry -->", crashes=crashes, nan_at=nan_at)
    assert out.returncode == (EXIT_FINDING if status == "stopped" else status), out.stderr
    assert out.starts == starts  # each try resumed from the checkpoint of the last
    retried = re.findall(r"try (\d) exited (\d+) with no finding", out.stderr)
    assert [int(t) for t, _ in retried] == list(range(1, len(starts) + (status == CRASH)))
    assert ("on a finding; not retried" in out.stderr) == (status == "stopped")
    if status == "stopped":
        assert re.search(rf"│ nonfinite\s*│ error\s*│\s*{nan_at} │", out.stdout), (
            out.stdout
        )  # diagnose's table


@pytest.mark.parametrize(
    ("crashes", "nan_at", "requeues", "status"),
    [
        pytest.param("3", 0, 1, 0, id="a-crash-requeued"),
        pytest.param("1,2,3,4", 0, 3, CRASH, id="requeued-three-times-then-given-up"),
        pytest.param("", 3, 0, "stopped", id="a-finding-not-requeued"),
    ],
)
def test_the_slurm_recipe_requeues_a_crash_and_not_a_finding(
    job, tmp_path, crashes, nan_at, requeues, status
):
    from rlmetrics.cli.watch import EXIT_FINDING

    log = tmp_path / "scontrol.log"
    for restart in range(10):  # Slurm's loop: the job runs again while it requeued itself
        before = log.read_text() if log.exists() else ""
        out = job(
            "<!-- recipe:slurm -->",
            crashes=crashes,
            nan_at=nan_at,
            SLURM_JOB_ID="42",
            SLURM_RESTART_COUNT=str(restart),
        )
        if (log.read_text() if log.exists() else "") == before:
            break
    assert out.returncode == (EXIT_FINDING if status == "stopped" else status), out.stderr
    assert (log.read_text().splitlines() if log.exists() else []) == ["requeue 42"] * requeues
    assert len(out.starts) == requeues + 1
    assert ("on a finding; not requeued" in out.stderr) == (status == "stopped")

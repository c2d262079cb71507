"""README.md stays true: its quickstart code runs, its commands are the ones CI runs."""

from __future__ import annotations

import re
from pathlib import Path

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

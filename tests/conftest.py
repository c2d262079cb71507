"""Shared fixtures: verl 0.9.1 as the parity reference; a stand-in wandb module; diagnose() scripted
for the report tests; Hypothesis settings."""

from __future__ import annotations

import logging
import os
import sys
import types
import warnings
from typing import Any

import pytest
from hypothesis import settings

# The suite draws the same Hypothesis examples on every run (a CI result is reproducible, and a
# failure is one rerun away); HYPOTHESIS_PROFILE=explore draws new ones, to hunt for more.
settings.register_profile("reproducible", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "reproducible"))


@pytest.fixture(autouse=True)
def _cpu_without_native_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    """RLMETRICS_TEST_NO_NATIVE_BF16=1: the demo's ``rollout_dtype="auto"`` takes the path of a CPU
    without native bfloat16 (float32 on bf16-rounded weights), as on a machine without AVX-512."""
    if os.environ.get("RLMETRICS_TEST_NO_NATIVE_BF16") != "1":
        return
    from rlmetrics.demo import task

    real = task.native_bf16
    monkeypatch.setattr(task, "native_bf16", lambda cpuinfo=None: False if cpuinfo is None else real(cpuinfo))


@pytest.fixture(scope="session")
def verl_metric_utils() -> Any:
    """verl 0.9.1's metric_utils (the parity reference); its warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from verl.trainer.ppo import metric_utils
    logging.getLogger("verl").setLevel(logging.ERROR)
    logging.getLogger(metric_utils.__name__).setLevel(logging.ERROR)
    return metric_utils


@pytest.fixture(scope="session")
def data_proto() -> Any:
    from verl import DataProto

    return DataProto


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


@pytest.fixture
def scripted_diagnose(monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's diagnose() with findings chosen by the run's name (tests/report_runs.py)."""
    from report_runs import script_diagnose

    script_diagnose(monkeypatch)

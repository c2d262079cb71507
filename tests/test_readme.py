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

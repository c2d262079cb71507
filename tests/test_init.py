"""The package root: a light ``import rlmetrics``, every public name reachable, the lazy ones too."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import rlmetrics

HEAVY = (
    "typer",
    "rich",
    "click",
    "torch",
    "matplotlib",
    "pyarrow",
    "scipy",
    "numba",
    "tensorboard",
    "wandb",
    "mlflow",
)
LAZY = {
    "DemoConfig": "rlmetrics.demo.run",
    "DemoResult": "rlmetrics.demo.run",
    "run_demo": "rlmetrics.demo.run",
    "load_run": "rlmetrics.report",
    "write_report": "rlmetrics.report",
}


def _fresh(code: str) -> dict:
    """Run ``code`` after ``import rlmetrics`` in a new interpreter; it prints one JSON value."""
    out = subprocess.run(
        [sys.executable, "-c", "import json, sys, rlmetrics\n" + code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(out.stdout)


def test_import_loads_no_heavy_module():
    loaded = _fresh(f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    assert loaded == []


def test_lazy_names_are_not_imported_until_used():
    state = _fresh(
        f"mods = sorted(set({LAZY!r}.values()))\n"
        "before = [m for m in mods if m in sys.modules]\n"
        f"names = [n for n in {list(LAZY)!r} if getattr(rlmetrics, n) is not None]\n"
        "print(json.dumps({'before': before, 'after': [m for m in mods if m in sys.modules], 'names': names,"
        f" 'heavy': [m for m in {HEAVY!r} if m in sys.modules]}}))"
    )
    assert state["before"] == []
    assert state["after"] == sorted(set(LAZY.values()))
    assert state["names"] == list(LAZY)
    assert state["heavy"] == []  # the demo and the report need torch and matplotlib only when they run


@pytest.mark.parametrize(("name", "module"), sorted(LAZY.items()), ids=sorted(LAZY))
def test_lazy_name_is_the_module_attribute(name, module):
    import importlib

    assert getattr(rlmetrics, name) is getattr(importlib.import_module(module), name)
    assert name in dir(rlmetrics) and name in rlmetrics.__all__


def test_every_public_name_resolves_and_all_is_sorted():
    assert rlmetrics.__all__ == sorted(rlmetrics.__all__)
    missing = [name for name in rlmetrics.__all__ if not hasattr(rlmetrics, name)]
    assert missing == []
    namespace: dict = {}
    exec("from rlmetrics import *", namespace)
    assert set(rlmetrics.__all__) <= set(namespace)


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="module 'rlmetrics' has no attribute 'no_such_name'"):
        _ = rlmetrics.no_such_name


def test_the_version_is_the_one_pyproject_declares():
    import re
    from pathlib import Path

    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    declared = re.search(r'^version = "([^"]+)"$', pyproject, flags=re.MULTILINE)
    assert declared is not None and rlmetrics.__version__ == declared.group(1)

"""Helper for the tests of numba's on-disk cache (shared by the kernels' test files)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def assert_second_process_compiles_nothing(script: str, cache_dir: Path) -> None:
    """Run ``script`` in two fresh processes on one numba cache: the first fills it, the second
    must find every kernel there and write nothing."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir)}
    env.pop("RLMETRICS_NO_NUMBA", None)

    def files() -> dict[str, int]:
        return {str(p): p.stat().st_mtime_ns for p in cache_dir.rglob("*") if p.is_file()}

    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=600)
    first = files()
    assert any(name.endswith(".nbc") for name in first), "the first process cached nothing"
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=600)
    assert files() == first, "the second process compiled again (new or rewritten cache files)"

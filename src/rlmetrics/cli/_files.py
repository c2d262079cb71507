"""Output files of the commands: JSON with NaN as null, written atomically (never half a file)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["atomic_path", "json_safe", "write_json"]


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """A temporary path next to ``target``, renamed onto it only if the block succeeds."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=target.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; give it a normal file's mode
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def json_safe(obj: Any) -> Any:
    """``obj`` with numpy scalars as Python numbers and NaN/inf as ``None`` (strict JSON).

    Examples
    --------
    >>> import numpy as np
    >>> json_safe({"a": [np.float32(0.5), float("nan")], 1: np.int64(3)})
    {'a': [0.5, None], '1': 3}
    """
    if isinstance(obj, Mapping):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item) and not isinstance(obj, str | bytes):  # numpy scalars
        obj = obj.item()
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    return obj


def write_json(target: Path, payload: Any) -> None:
    """``payload`` as indented strict JSON at ``target``, atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(json.dumps(json_safe(payload), indent=2, allow_nan=False) + "\n")

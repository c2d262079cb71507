"""Output files of the commands: JSON with NaN as null, written atomically (never half a file).

A file is written to a temporary name beside its target, flushed to the disk (``fsync``: a full
disk or a failing device shows up here, not later), and only then renamed onto the target. Any
failure removes the temporary file and leaves the target as it was; the command reports it and
exits non-zero. Targets that are not regular files (a folder, ``/dev/full``, a pipe) are refused
before anything is written: renaming onto them would replace them.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["atomic_path", "check_folder", "check_target", "json_safe", "write_json"]


def check_target(target: Path, option: str) -> str | None:
    """Why ``target`` cannot receive an output of ``option``, or None when it can.

    Examples
    --------
    >>> check_target(Path("/no/such/folder/out.json"), "--json")
    '--json: the directory /no/such/folder does not exist'
    >>> check_target(Path("/"), "--json")
    '--json: / is a folder, not a file'
    """
    parent = target.parent
    if not parent.is_dir():
        return f"{option}: the directory {parent} does not exist"
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as err:
        return f"{option}: cannot write {target} ({err.strerror or err})"
    if mode is not None and stat.S_ISDIR(mode):
        return f"{option}: {target} is a folder, not a file"
    if mode is not None and not stat.S_ISREG(mode):
        return f"{option}: {target} is not a regular file (a device or a pipe); give a file path"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{option}: the directory {parent} is not writable"
    return None


def check_folder(folder: Path, option: str) -> str | None:
    """Why ``folder`` cannot be created or written into for ``option``, or None when it can.

    Checked before any work: a command that trains or reads for minutes must not fail at its
    last step because its output folder is a file or read-only.

    Examples
    --------
    >>> check_folder(Path("/"), "--out") is None or "not writable" in check_folder(Path("/"), "--out")
    True
    >>> check_folder(Path("/dev/null/report"), "--out")
    '--out: /dev/null is not a folder, so /dev/null/report cannot be created'
    """
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        if existing == folder:
            return f"{option}: {folder} is a file, not a folder"
        return f"{option}: {existing} is not a folder, so {folder} cannot be created"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{option}: the folder {existing} is not writable"
    return None


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """A temporary path next to ``target``, synced and renamed onto it only if the block succeeds.

    Raises
    ------
    OSError
        ``target`` exists and is not a regular file, or the write, the sync or the rename
        failed (the temporary file is removed; ``target`` is untouched).
    """
    if target.exists() and not target.is_file():
        raise OSError(f"{target} is not a regular file")
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=target.suffix)
    os.close(fd)
    try:
        yield Path(tmp)
        _fsync(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; give it a normal file's mode
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _fsync(path: str) -> None:
    """Flush a written file to the disk (errors of delayed writes, e.g. a full disk, surface here)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
    """``payload`` as indented strict JSON at ``target``, atomically.

    The text is built before the file is opened, so a payload that cannot be written as JSON
    leaves nothing behind either.

    Raises
    ------
    OSError
        As :func:`atomic_path` (a full disk, a read-only folder, a target that is not a file).
    """
    text = json.dumps(json_safe(payload), indent=2, allow_nan=False) + "\n"
    with atomic_path(target) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()

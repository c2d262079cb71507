"""Run names and run folders: names checked, files written atomically, the last step logged."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any


def _write_atomic(path: Path, text: str) -> None:
    """Write ``path`` through a temporary file and a rename: a reader sees the old or the new text."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _unwritable(path: Path, err: OSError, what: str) -> OSError:
    """A clear error for a run directory that cannot be created or written."""
    reason = err.strerror or str(err)
    return type(err)(
        err.errno or errno.EACCES,
        f"cannot {what} ({reason}); pass a log_dir you can write to",
        str(path),
    )


def _name_problem(value: str) -> str | None:
    if value in (".", ".."):
        return "is '.' or '..'"
    seps = {"/", "\\", os.sep} | ({os.altsep} if os.altsep else set())
    if any(sep in value for sep in seps):
        return "holds a path separator"
    if "\0" in value:
        return "holds a NUL character"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid UTF-8 (a lone surrogate)"
    if size > 200:
        return f"is {size} bytes long (at most 200: a folder name, with room for a suffix)"
    return None


def _check_name(value: Any, arg: str) -> str:
    """``value`` as a plain folder name, or an error naming ``arg``."""
    if not isinstance(value, str) or not value:
        raise TypeError(f"{arg} must be a non-empty str; got {value!r}")
    value = str.__str__(value)
    problem = _name_problem(value)
    if problem is not None:
        raise ValueError(
            f"{arg} must be a plain name (it is a folder under log_dir: no path separators, "
            f"'.', '..' or NUL); got {value!r}, which {problem}"
        )
    return value


def _claim_run(log_dir: Path, project: str, experiment: str, *, resume: bool) -> tuple[str, Path, list[Path]]:
    """The run's name and directory, created here (``os.mkdir`` is atomic: one process wins a
    name), and the folders created, deepest first (for :func:`_remove_created`).

    A taken name gets the first free suffix ``-2``, ``-3`` ...; with ``resume`` it is the run.
    """
    project_dir = log_dir / project
    missing = [d for d in (project_dir, log_dir, *log_dir.parents) if not d.exists()]
    try:
        project_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _unwritable(project_dir, err, "create the project folder under log_dir") from None
    name, n = experiment, 1
    while True:
        path = project_dir / name
        try:
            os.mkdir(path)
        except FileExistsError:
            if resume and path.is_dir():
                return name, path, missing
            n += 1
            name = f"{experiment}-{n}"
            continue
        except OSError as err:
            _remove_created(missing, None)
            raise _unwritable(path, err, "create the run directory") from None
        return name, path, [path, *missing]


def _remove_created(created: list[Path], run_dir: Path | None) -> None:
    """Remove the run directory ``run_dir`` (when it is the first of ``created``: a new run, nothing
    logged yet) and the other folders of ``created``, if empty."""
    import shutil

    for i, path in enumerate(created):
        try:
            if i == 0 and path == run_dir:
                shutil.rmtree(path)
            else:
                path.rmdir()
        except OSError:  # not empty, or already gone
            pass

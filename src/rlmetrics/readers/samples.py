"""Sample tables read back: a run's ``samples.jsonl`` (:meth:`Tracker.log_samples
<rlmetrics.tracking.Tracker.log_samples>`) as one :class:`~rlmetrics.training.samples.SampleTable`
per step.

Each line of ``samples.jsonl`` is one row, ``{"step": 3, "prompt": ..., "response": ...,
"reward": 1.0, "length": 120, "stop_reason": "stop", "category": "gsm8k", "chosen": "max"}``
(:data:`rlmetrics.keys.SAMPLES_COLUMNS`). A damaged line (cut off, not JSON, a field of the wrong
type) costs that line alone, with a :class:`~rlmetrics.errors.RunReadWarning` naming it. A step
whose rows come in two blocks apart (logged again, as after a resume) keeps its last block, with a
warning.

The table type comes from :mod:`rlmetrics.training.samples`, imported when a file is read: this
module itself imports only :mod:`rlmetrics.keys` and :mod:`rlmetrics.errors`.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlmetrics import keys as K
from rlmetrics.errors import RunReadError, RunReadWarning

if TYPE_CHECKING:
    from rlmetrics.training.samples import SampleTable

__all__ = ["SAMPLES_FILE", "read_samples", "samples_beside"]

#: The file of a run's sample tables, beside ``metrics.jsonl``.
SAMPLES_FILE = "samples.jsonl"

#: The file of a run's metrics, as a Tracker writes it.
_METRICS_FILE = "metrics.jsonl"

_TEXTS = (K.SAMPLES_PROMPT, K.SAMPLES_RESPONSE)
_LABELS = (K.SAMPLES_STOP_REASON, K.SAMPLES_CATEGORY)


def samples_beside(run: str | os.PathLike[str]) -> Path | None:
    """The ``samples.jsonl`` that goes with a run's metrics, or None when it has none.

    A Tracker's run folder (or its ``metrics.jsonl``) keeps it in the same folder; verl's file
    logger writes ``<project>/<experiment>.jsonl`` and the verl patch its samples to
    ``<project>/<experiment>/samples.jsonl`` (the same name without ``.jsonl``).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     (Path(d) / "exp").mkdir()
    ...     _ = (Path(d) / "exp" / "samples.jsonl").write_text("")
    ...     _ = (Path(d) / "exp.jsonl").write_text("")
    ...     found = samples_beside(Path(d) / "exp.jsonl")
    ...     found == Path(d) / "exp" / SAMPLES_FILE, samples_beside(Path(d) / "other.jsonl")
    (True, None)
    """
    path = Path(run)
    if path.is_dir():
        folder = path
    elif path.name == _METRICS_FILE:
        folder = path.parent
    elif path.suffix == ".jsonl":
        folder = path.with_suffix("")
    else:
        return None
    found = folder / SAMPLES_FILE
    return found if found.is_file() else None


def _row(record: Any, chosen_values: tuple[str, ...]) -> tuple[int, dict[str, Any]] | str:
    """``(step, row)`` of one parsed line, or why it is damaged."""
    if not isinstance(record, dict):
        return f"not a JSON object ({type(record).__name__})"
    step = record.get(K.SAMPLES_STEP)
    if type(step) is not int or step < 0:
        return f"{K.SAMPLES_STEP} is not an integer >= 0 ({step!r:.40})"
    for name in _TEXTS:
        if not isinstance(record.get(name), str):
            return f"{name} is not a string"
    reward = record.get(K.SAMPLES_REWARD)
    if isinstance(reward, bool) or not isinstance(reward, int | float) or not math.isfinite(reward):
        return f"{K.SAMPLES_REWARD} is not a finite number ({reward!r:.40})"
    length = record.get(K.SAMPLES_LENGTH)
    if length is not None and (type(length) is not int or length < 0):
        return f"{K.SAMPLES_LENGTH} is not an integer >= 0 or null ({length!r:.40})"
    for name in _LABELS:
        if record.get(name) is not None and not isinstance(record[name], str):
            return f"{name} is not a string or null"
    if record.get(K.SAMPLES_CHOSEN) not in chosen_values:
        return f"{K.SAMPLES_CHOSEN} is not one of {chosen_values} ({record.get(K.SAMPLES_CHOSEN)!r:.40})"
    row = {name: record.get(name) for name in K.SAMPLES_COLUMNS}
    row[K.SAMPLES_REWARD] = float(reward)
    return step, row


def _lines_note(lines: list[tuple[int, str]]) -> str:
    shown = "; ".join(f"line {n}: {why}" for n, why in lines[:5])
    return shown + (f"; and {len(lines) - 5} more" if len(lines) > 5 else "")


def read_samples(source: str | os.PathLike[str]) -> dict[int, SampleTable]:
    """The sample tables of a run, by step.

    Parameters
    ----------
    source : str or Path
        A run directory (``log_dir/project/experiment``, read: its ``samples.jsonl``) or a
        ``samples.jsonl`` file.

    Returns
    -------
    dict[int, SampleTable]
        One table per step, in step order, its rows in the order written. Empty when the run
        directory has no ``samples.jsonl`` (no samples were logged).

    Raises
    ------
    RunReadError
        ``source`` does not exist or cannot be read.

    Warns
    -----
    RunReadWarning
        Lines skipped (damaged), or a step logged twice (its last block kept).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = (Path(d) / "samples.jsonl").write_text(
    ...         '{"step": 2, "prompt": "1+1=", "response": "2", "reward": 1.0, "chosen": "max"}\\n')
    ...     tables = read_samples(d)
    >>> tables[2].response, tables[2].length
    (('2',), (None,))
    """
    from rlmetrics.training.samples import CHOSEN_VALUES, SampleTable

    path = Path(source)
    if path.is_dir():
        path = path / SAMPLES_FILE
        if not path.exists():
            return {}
    try:
        data = path.read_bytes()
    except OSError as err:
        raise RunReadError(f"cannot read the sample tables {str(path)!r}: {err.strerror or err}") from None
    damaged: list[tuple[int, str]] = []
    blocks: dict[int, list[list[dict[str, Any]]]] = {}
    last_step: int | None = None
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError as err:  # not UTF-8 or not JSON (a cut-off line among them)
            damaged.append((number, f"not a JSON line ({type(err).__name__})"))
            continue
        parsed = _row(record, CHOSEN_VALUES)
        if isinstance(parsed, str):
            damaged.append((number, parsed))
            continue
        step, row = parsed
        if step != last_step or step not in blocks:
            blocks.setdefault(step, []).append([])
        blocks[step][-1].append(row)
        last_step = step
    if damaged:
        warnings.warn(
            f"{str(path)!r}: {len(damaged)} damaged line(s) skipped ({_lines_note(damaged)})",
            RunReadWarning,
            stacklevel=2,
        )
    again = sorted(step for step, runs in blocks.items() if len(runs) > 1)
    if again:
        warnings.warn(
            f"{str(path)!r}: the samples of step(s) {again[:10]} were logged more than once; "
            "the last logged are kept",
            RunReadWarning,
            stacklevel=2,
        )
    return {step: SampleTable.from_rows(blocks[step][-1]) for step in sorted(blocks)}

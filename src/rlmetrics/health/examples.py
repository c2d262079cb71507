"""Example samples of a finding: the rows of a run's sample tables that show it.

The text rules (:mod:`~rlmetrics.health.rules`) name the steps whose samples show a finding
(``sample_steps`` in its evidence: ``before``, ``onset``, ``worst``); :func:`finding_examples`
picks, from the tables :func:`rlmetrics.readers.read_samples` reads, a few rows of the onset and
worst steps (or the nearest steps with samples, when the tables are logged every few steps), the
rows that show the finding first:

* ``repetition_rise``: the most repetitive rows: those ending in a loop
  (:func:`~rlmetrics.training.text.ends_in_loop` over :func:`~rlmetrics.training.text.text_units`,
  with the text statistics' defaults), then the fewest distinct 4-grams;
* ``gibberish_rise``: the rows compressing worst (the compression ratio of the text statistics;
  texts under 64 bytes, whose ratio DEFLATE's overhead inflates, after the others);
* ``stop_reason_shift``: only rows stopped for the reason that took over (``length``, ``error``;
  the aliases the stop-reason shares count), the lowest reward first;
* any other kind (``format_failure_rise``: the format pattern is not logged with the samples):
  the lowest reward first.

:func:`one_line` shortens a response for a terminal: its start and its end (where a loop shows).
"""

from __future__ import annotations

import bisect
import re
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rlmetrics.training.text import (
    COMPRESSION_LEVEL,
    DEFAULT_LOOP_MAX_PERIOD,
    DEFAULT_LOOP_REPEATS,
    DEFAULT_NGRAM,
    ends_in_loop,
    text_units,
)

if TYPE_CHECKING:
    from rlmetrics.training.samples import SampleTable

    from .findings import Finding

__all__ = ["MAX_EXAMPLES", "finding_examples", "one_line", "sample_steps", "why"]

#: Rows a finding shows by default.
MAX_EXAMPLES = 2
#: ``stop_reason_shift``'s signals -> the stop reason they count.
_SHIFTED_REASON = {"stop_length": "length", "stop_error": "error"}
#: Bytes a text needs for its compression ratio to rank it (shorter ones rank after).
_MIN_COMPRESSED = 64
_SPACE = re.compile(r"\s+")


def sample_steps(finding: Finding) -> dict[str, int]:
    """The steps a finding's evidence names for its samples (``before``, ``onset``, ``worst``, in
    that order), empty when it names none.

    Examples
    --------
    >>> from rlmetrics.health.findings import Finding
    >>> f = Finding("repetition_rise", "warning", 20, (), {"sample_steps": {"worst": 24, "onset": 20}})
    >>> sample_steps(f)
    {'onset': 20, 'worst': 24}
    """
    named = finding.evidence.get("sample_steps")
    if not isinstance(named, Mapping):
        return {}
    out = {}
    for label in ("before", "onset", "worst"):
        value = named.get(label)
        if isinstance(value, int | float) and not isinstance(value, bool) and value == value:
            out[label] = int(value)
    return out


def _nearest(steps: list[int], step: int) -> int:
    """The step of ``steps`` (increasing, non-empty) nearest ``step``, the later on a tie."""
    i = bisect.bisect_left(steps, step)
    around = steps[max(i - 1, 0) : i + 1]
    return min(around, key=lambda s: (abs(s - step), -s))


def _stop(reason: str | None) -> str | None:
    from rlmetrics.training.text import stop_category  # the categories the stop-reason shares count by

    return stop_category(reason)


def _repetitive(text: str) -> tuple[float, ...]:
    """Sort key, most repetitive first: ends in a loop, then the share of distinct n-grams."""
    units = text_units(text)
    if not units:
        return (1.0, 1.0)
    loop = ends_in_loop(units, DEFAULT_LOOP_REPEATS, DEFAULT_LOOP_MAX_PERIOD)
    grams = len(units) - DEFAULT_NGRAM + 1
    distinct = len(set(zip(*(units[k:] for k in range(DEFAULT_NGRAM))))) / grams if grams > 0 else 1.0
    return (0.0 if loop else 1.0, distinct)


def _compression(text: str) -> tuple[float, ...]:
    """Sort key, compressing worst first (raw DEFLATE size over size, as the text statistics); texts
    under :data:`_MIN_COMPRESSED` bytes after the others (DEFLATE's overhead inflates their ratio)."""
    data = text.encode("utf-8")
    if not data:
        return (1.0, 0.0)
    packer = zlib.compressobj(COMPRESSION_LEVEL, zlib.DEFLATED, -15)
    ratio = (len(packer.compress(data)) + len(packer.flush())) / len(data)
    return (0.0 if len(data) >= _MIN_COMPRESSED else 1.0, -ratio)


def _ranking(finding: Finding) -> tuple[Callable[[str], tuple[float, ...]] | None, set[str] | None]:
    """The kind's sort key of a response (None: by reward alone) and the stop reasons it keeps."""
    if finding.kind == "repetition_rise":
        return _repetitive, None
    if finding.kind == "gibberish_rise":
        return _compression, None
    if finding.kind == "stop_reason_shift":
        shifted = finding.evidence.get("shifted")
        names = shifted if isinstance(shifted, list | tuple) else ()
        reasons = {_SHIFTED_REASON[n] for n in names if n in _SHIFTED_REASON}
        return None, reasons or set(_SHIFTED_REASON.values())
    return None, None


def finding_examples(
    finding: Finding, tables: Mapping[int, SampleTable], *, limit: int = MAX_EXAMPLES
) -> list[dict[str, Any]]:
    """The sample rows that show a finding best, at its onset and worst steps.

    Parameters
    ----------
    finding : Finding
        A finding whose evidence names ``sample_steps`` (the text rules'); another gives ``[]``.
    tables : mapping of int to SampleTable
        A run's sample tables by step, as :func:`rlmetrics.readers.read_samples` returns them.
    limit : int
        The most rows returned.

    Returns
    -------
    list of dict
        ``{"step", "row", "reward", "stop_reason", "response", "why"}`` per row (``row`` its
        index in the step's table, the response whole, as logged, ``why`` a few words from
        :func:`why`), the best first, as the module docstring ranks them; ties go to the earlier
        step and row. Empty when there are no tables or no row fits (``stop_reason_shift``
        with no row stopped for the new reason).

    Examples
    --------
    >>> from rlmetrics.health.findings import Finding
    >>> from rlmetrics.training.samples import SampleTable
    >>> t = SampleTable(step=(20, 20), prompt=("p", "p"), response=("It is 4.", "so so " * 30),
    ...                 reward=(1.0, 0.0), length=(None, None), stop_reason=("stop", "length"),
    ...                 category=(None, None), chosen=("max", "min"))
    >>> f = Finding("repetition_rise", "warning", 20, (), {"sample_steps": {"onset": 20, "worst": 20}})
    >>> [(e["step"], e["stop_reason"]) for e in finding_examples(f, {20: t}, limit=1)]
    [(20, 'length')]
    """
    named = sample_steps(finding)
    logged = sorted(tables)
    if not logged or not named:
        return []
    wanted = [named[label] for label in ("onset", "worst") if label in named] or list(named.values())
    steps = sorted({_nearest(logged, s) for s in wanted})
    key, reasons = _ranking(finding)
    rows: list[tuple[tuple[float, ...], dict[str, Any]]] = []
    for step in steps:
        for i, table in enumerate(_rows(tables[step])):
            if reasons is not None and _stop(table["stop_reason"]) not in reasons:
                continue
            rank = (*(key(table["response"]) if key else ()), table["reward"], step, i)
            rows.append((rank, {"step": step, "row": i, **table}))
    rows.sort(key=lambda r: r[0])
    return [row | {"why": why(finding.kind, row)} for _, row in rows[: max(limit, 0)]]


def why(kind: str, row: Mapping[str, Any]) -> str:
    """A few words on why a row shows a finding of ``kind`` (the measure :func:`finding_examples`
    ranks it by), for a report or a terminal.

    Examples
    --------
    >>> why("repetition_rise", {"response": "so " * 40, "reward": 0.0, "stop_reason": "length"})
    'caught in a loop'
    >>> why("stop_reason_shift", {"response": "...", "reward": 0.0, "stop_reason": "max_tokens_hit"})
    'stopped: max_tokens_hit'
    >>> why("format_failure_rise", {"response": "I think 4", "reward": 0.0, "stop_reason": None})
    'lowest reward (0)'
    """
    response, reward = row["response"], float(row["reward"])
    if kind == "repetition_rise":
        loop, distinct = _repetitive(response)
        return "caught in a loop" if loop == 0.0 else f"{distinct:.0%} distinct {DEFAULT_NGRAM}-grams"
    if kind == "gibberish_rise":
        short, ratio = _compression(response)
        return f"compresses poorly: ratio {abs(ratio):.2f}" + (" (short text)" if short else "")
    if kind == "stop_reason_shift":
        stop = row["stop_reason"]
        return {"length": "cut by the length limit", "error": "stopped by an error"}.get(
            str(_stop(stop)), f"stopped: {stop}"
        )
    return f"lowest reward ({reward:.3g})"


def _rows(table: SampleTable) -> Iterable[dict[str, Any]]:
    for reward, stop_reason, response in zip(table.reward, table.stop_reason, table.response, strict=True):
        yield {"reward": float(reward), "stop_reason": stop_reason, "response": response}


def one_line(text: str, width: int = 100) -> str:
    """``text`` on one line (whitespace runs as one space) of at most ``width`` characters: when
    longer, its start and its end (where a loop shows) around ``" … "``.

    Examples
    --------
    >>> one_line("The answer\\n is 4.")
    'The answer is 4.'
    >>> one_line("a " * 20 + "b " * 20, width=21)
    'a a a a a … b b b b b'
    >>> one_line("It loops: " + "and then " * 20, width=30)
    'It loops: and … then and then'
    """
    flat = _SPACE.sub(" ", text).strip()
    if len(flat) <= width:
        return flat
    room = max(width - 3, 2)
    head = room - room // 2
    start = len(flat) - (room - head)
    if flat[start - 1] != " ":  # cut in a word: from the next word's start, when one is near
        space = flat.find(" ", start, start + 16)
        start = space if space > 0 else start
    return flat[:head].rstrip() + " … " + flat[start:].lstrip()

"""The sample browser's data: each run's sample tables (``samples.jsonl``), embedded in the page
compactly and under a byte budget.

A run's tables (:func:`rlmetrics.readers.read_samples`, kept in :attr:`RunCurves.samples
<rlmetrics.report.runs.RunCurves.samples>`) go into the page as one JSON object (its own
``<script type="application/json" id="rlm-samples">``, parsed by the page when the browser is
first used), column by column:

``runs``
    one entry per run with samples: ``r`` the run's index in the page, ``s`` the steps kept
    (increasing), ``o`` the offsets of each step's rows (``len(s) + 1``), and per row ``p`` the
    prompt (an index into ``prompts``: a prompt repeated at many steps is written once), ``x``
    the response, ``w`` the reward, ``n`` the length (null: not given), ``q`` the stop reason and
    ``c`` the category (indices into ``labels``, -1: none), ``h`` why the row was chosen (an
    index into ``chosen``).
``prompts``, ``labels``, ``chosen``
    the string tables.
``examples``
    per finding with example rows (:func:`rlmetrics.health.examples.finding_examples`, at the
    steps kept), keyed ``"run:finding"`` (the run's index in the page, the finding's in its
    diagnosis): ``[row, why]`` per example row, the best first, ``row`` an index into its run
    entry's rows and ``why`` a few words on what it shows.
``note``
    what the budget cut, or null.

The budget counts the UTF-8 bytes of the texts embedded (each distinct prompt once, every
response). When the texts are larger, each longer than a common cap is cut to it (ending with
:data:`~rlmetrics.training.samples.TRUNCATION_MARKER`; the largest cap that fits, so short texts
stay whole); when even :data:`MIN_TEXT_BYTES` a text would not fit, texts are cut to that and
steps are left out, evenly over each run, but the steps the findings point at (their onset and
``sample_steps``, or the nearest step with samples) are kept. The page says what was cut.

The text is escaped for the ``<script>`` element it sits in (``</`` and ``<!--`` cannot end or
alter it) and the page's script writes it into the DOM as text only, never as markup.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rlmetrics.training.samples import CHOSEN_VALUES, TRUNCATION_MARKER

if TYPE_CHECKING:
    from rlmetrics.health.findings import Diagnosis, Finding
    from rlmetrics.training.samples import SampleTable

    from .runs import RunCurves

__all__ = [
    "MAX_SAMPLE_BYTES",
    "MIN_TEXT_BYTES",
    "EmbeddedSamples",
    "embed_samples",
    "finding_sample_steps",
    "nearest_step",
    "samples_json",
]

#: The most bytes of sample text (UTF-8) a page embeds by default.
MAX_SAMPLE_BYTES = 8_000_000
#: The fewest bytes a cut text keeps (the marker included) before whole steps are left out.
MIN_TEXT_BYTES = 512
_MARKER_BYTES = len(TRUNCATION_MARKER.encode("utf-8"))


@dataclass
class EmbeddedSamples:
    """The samples of a page, as embedded.

    Attributes
    ----------
    data : dict or None
        The JSON object of the module docstring; None when no run has samples.
    steps : list of tuple of int
        Per run (in the page's order), the steps kept (empty for a run without samples).
    total_steps : list of int
        Per run, the steps with samples read.
    text_bytes : int
        UTF-8 bytes of every text read (each distinct prompt once).
    kept_bytes : int
        UTF-8 bytes of the texts embedded.
    cap : int or None
        The bytes each text was cut to at most (None: no text cut).
    """

    data: dict[str, Any] | None
    steps: list[tuple[int, ...]] = field(default_factory=list)
    total_steps: list[int] = field(default_factory=list)
    text_bytes: int = 0
    kept_bytes: int = 0
    cap: int | None = None

    @property
    def cut(self) -> bool:
        """Whether texts were cut or steps left out to fit the budget."""
        return self.cap is not None or sum(map(len, self.steps)) < sum(self.total_steps)

    def note(self, max_bytes: int) -> str | None:
        """A sentence saying what the budget cut (None when nothing was)."""
        if not self.cut:
            return None
        parts = []
        if self.cap is not None:
            parts.append(f"texts longer than {self.cap:,} bytes cut (ending with {TRUNCATION_MARKER})")
        kept, total = sum(map(len, self.steps)), sum(self.total_steps)
        if kept < total:
            parts.append(f"{kept:,} of {total:,} steps kept, evenly, with every step a finding points at")
        return (
            f"samples cut to fit the page's budget of {max_bytes:,} bytes of text "
            f"({self.text_bytes:,} read, {self.kept_bytes:,} embedded): " + "; ".join(parts) + "."
        )


def nearest_step(steps: Sequence[int], step: float) -> int | None:
    """The step of ``steps`` (increasing) nearest ``step``, the earlier on a tie; None if empty.

    Examples
    --------
    >>> nearest_step([2, 4, 10], 7), nearest_step([2, 4, 10], 3), nearest_step([], 3)
    (4, 2, None)
    """
    if not steps:
        return None
    i = bisect.bisect_left(steps, step)
    if i == 0:
        return int(steps[0])
    if i == len(steps):
        return int(steps[-1])
    before, after = steps[i - 1], steps[i]
    return int(before if step - before <= after - step else after)


def finding_sample_steps(finding: Finding) -> dict[str, int]:
    """The steps whose samples a finding points at: ``{"onset": step}``, with the text rules'
    ``sample_steps`` (``before``, ``onset``, ``worst``) where its evidence names them."""
    out = {"onset": int(finding.step)}
    named = finding.evidence.get("sample_steps")
    if isinstance(named, Mapping):
        for label in ("before", "onset", "worst"):
            value = named.get(label)
            if isinstance(value, int | float) and not isinstance(value, bool) and np.isfinite(value):
                out[label] = int(value)
    return {label: out[label] for label in ("before", "onset", "worst") if label in out}


def _clean(text: str) -> str:
    """``text`` as valid UTF-8 (a lone surrogate read back from JSON becomes U+FFFD)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def _cut(text: str, cap: int | None) -> str:
    if cap is None:
        return text
    raw = text.encode("utf-8")
    if len(raw) <= cap:
        return text
    return raw[: max(cap - _MARKER_BYTES, 0)].decode("utf-8", errors="ignore") + TRUNCATION_MARKER


def _cost(sizes: np.ndarray, cap: int) -> int:
    return int(np.minimum(sizes, cap).sum())


def _largest_cap(sizes: np.ndarray, budget: int) -> int:
    """The largest ``c`` with ``sum(min(sizes, c)) <= budget``."""
    lo, hi = 0, int(sizes.max(initial=0))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _cost(sizes, mid) <= budget:
            lo = mid
        else:
            hi = mid
    return lo


class _Texts:
    """The texts of every run's rows, sized once: distinct prompts and each response."""

    def __init__(self, tables: list[dict[int, SampleTable]]) -> None:
        self.prompt_ids: dict[str, int] = {}
        prompt_sizes: list[int] = []
        self.rows: list[dict[int, tuple[np.ndarray, np.ndarray]]] = []  # run -> step -> (prompt ids, sizes)
        for run in tables:
            by_step = {}
            for step, table in run.items():
                ids, sizes = [], []
                for prompt, response in zip(table.prompt, table.response, strict=True):
                    prompt = _clean(prompt)
                    if prompt not in self.prompt_ids:
                        self.prompt_ids[prompt] = len(prompt_sizes)
                        prompt_sizes.append(len(prompt.encode("utf-8")))
                    ids.append(self.prompt_ids[prompt])
                    sizes.append(len(_clean(response).encode("utf-8")))
                by_step[step] = (np.asarray(ids, dtype=np.int64), np.asarray(sizes, dtype=np.int64))
            self.rows.append(by_step)
        self.prompt_sizes = np.asarray(prompt_sizes, dtype=np.int64)

    def sizes(self, kept: Sequence[Sequence[int]]) -> np.ndarray:
        """The sizes of the texts of the steps ``kept`` of each run (each distinct prompt once)."""
        prompts: list[np.ndarray] = []
        responses: list[np.ndarray] = []
        for by_step, steps in zip(self.rows, kept, strict=True):
            for step in steps:
                ids, sizes = by_step[step]
                prompts.append(ids)
                responses.append(sizes)
        used = np.unique(np.concatenate(prompts)) if prompts else np.zeros(0, dtype=np.int64)
        return np.concatenate([self.prompt_sizes[used], *responses])


def _evenly(steps: Sequence[int], m: int, keep: set[int]) -> list[int]:
    """``m`` of ``steps`` spread evenly (the first and last among them), with ``keep`` added."""
    n = len(steps)
    picked = set() if m <= 0 else {steps[int(i)] for i in np.round(np.linspace(0, n - 1, min(m, n)))}
    return sorted(picked | (keep & set(steps)))


def _fit(
    texts: _Texts, all_steps: list[list[int]], keep: list[set[int]], budget: int
) -> tuple[list, int | None]:
    """The steps kept per run and the text cap that fit ``budget``."""
    sizes = texts.sizes(all_steps)
    if int(sizes.sum()) <= budget:
        return all_steps, None
    cap = _largest_cap(sizes, budget)
    if cap >= MIN_TEXT_BYTES:
        return all_steps, cap
    top = max(map(len, all_steps))
    lo, hi = 0, top  # lo fits (or is 0: the kept steps alone), hi does not

    def kept(k: int) -> list[list[int]]:
        return [_evenly(steps, round(k * len(steps) / top), want) for steps, want in zip(all_steps, keep)]

    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _cost(texts.sizes(kept(mid)), MIN_TEXT_BYTES) <= budget:
            lo = mid
        else:
            hi = mid
    return kept(lo), MIN_TEXT_BYTES


def embed_samples(
    runs: Sequence[RunCurves], diagnoses: Sequence[Diagnosis], *, max_bytes: int = MAX_SAMPLE_BYTES
) -> EmbeddedSamples:
    """The sample tables of ``runs``, cut to ``max_bytes`` bytes of text, as the page embeds them.

    Parameters
    ----------
    runs : sequence of RunCurves
        The page's runs; those with no :attr:`~rlmetrics.report.runs.RunCurves.samples` get no entry.
    diagnoses : sequence of Diagnosis
        Their diagnoses, in the same order: the steps the findings point at are kept.
    max_bytes : int, keyword-only
        The most UTF-8 bytes of text embedded (prompts and responses; >= 0); 0 embeds none
        (the page gets no sample browser).

    Returns
    -------
    EmbeddedSamples

    Examples
    --------
    >>> from rlmetrics.report.runs import RunCurves
    >>> from rlmetrics.training.samples import select_samples
    >>> tables = {s: select_samples(["q"], ["r" * 900], [1.0], step=s) for s in (1, 2)}
    >>> run = RunCurves("a", ".", samples=tables)
    >>> e = embed_samples([run], [None], max_bytes=1200)  # 1 + 2 x 900 bytes: cut to 599 each
    >>> e.steps, e.cap, len(e.data["runs"][0]["x"][0].encode())
    ([(1, 2)], 599, 599)
    >>> embed_samples([run], [None], max_bytes=1000).steps  # not even 512 bytes each: one step left
    [(1,)]
    """
    texts = _Texts([run.samples for run in runs])
    all_steps = [sorted(run.samples) for run in runs]
    keep: list[set[int]] = []
    for steps, diagnosis in zip(all_steps, diagnoses, strict=True):
        wanted: set[int] = set()
        for f in diagnosis.findings if diagnosis is not None else ():
            for step in finding_sample_steps(f).values():
                near = nearest_step(steps, step)
                if near is not None:
                    wanted.add(near)
        keep.append(wanted)
    text_bytes = int(texts.sizes(all_steps).sum()) if any(all_steps) else 0
    kept: list[list[int]]
    cap: int | None
    if max_bytes <= 0:
        kept, cap = [[] for _ in all_steps], None
    else:
        kept, cap = _fit(texts, all_steps, keep, max_bytes) if text_bytes else (all_steps, None)
    out = EmbeddedSamples(None, [tuple(s) for s in kept], [len(s) for s in all_steps], text_bytes)
    out.cap = cap
    if not any(kept):
        return out
    out.kept_bytes = _cost(texts.sizes(kept), cap) if cap is not None else int(texts.sizes(kept).sum())
    prompts: dict[str, int] = {}
    labels: dict[str, int] = {}
    entries = []
    for r, (run, steps) in enumerate(zip(runs, kept, strict=True)):
        if not steps:
            continue
        entry: dict[str, Any] = {k: [] for k in "pxwnqch"} | {"r": r, "s": list(steps), "o": [0]}
        for step in steps:
            table = run.samples[step]
            for i in range(len(table)):
                prompt = _cut(_clean(table.prompt[i]), cap)
                entry["p"].append(prompts.setdefault(prompt, len(prompts)))
                entry["x"].append(_cut(_clean(table.response[i]), cap))
                entry["w"].append(float(table.reward[i]))
                entry["n"].append(table.length[i])
                for key, value in (("q", table.stop_reason[i]), ("c", table.category[i])):
                    entry[key].append(-1 if value is None else labels.setdefault(_clean(value), len(labels)))
                entry["h"].append(CHOSEN_VALUES.index(table.chosen[i]))
            entry["o"].append(len(entry["x"]))
        entries.append(entry)
    out.data = {
        "runs": entries,
        "prompts": list(prompts),
        "labels": list(labels),
        "chosen": list(CHOSEN_VALUES),
        "note": out.note(max_bytes),
        "examples": _examples(runs, diagnoses, entries),
    }
    return out


def _examples(
    runs: Sequence[RunCurves], diagnoses: Sequence[Diagnosis], entries: list[dict[str, Any]]
) -> dict[str, list[list[Any]]]:
    """The page data's ``examples`` (module docstring): each finding's example rows, as ``[row
    index in the entry, why]``, picked among the steps its links open (the kept steps nearest
    those it names, the earlier on a tie), so the rows are at the steps the links show."""
    from rlmetrics.health.examples import finding_examples

    out: dict[str, list[list[Any]]] = {}
    for entry in entries:
        r = entry["r"]
        diagnosis = diagnoses[r]
        first_row = dict(zip(entry["s"], entry["o"]))  # step -> its first row in the entry
        for j, f in enumerate(diagnosis.findings if diagnosis is not None else ()):
            linked = {nearest_step(entry["s"], step) for step in finding_sample_steps(f).values()}
            tables = {step: runs[r].samples[step] for step in linked if step is not None}
            rows = [[first_row[e["step"]] + e["row"], e["why"]] for e in finding_examples(f, tables)]
            if rows:
                out[f"{r}:{j}"] = rows
    return out


def samples_json(data: Mapping[str, Any]) -> str:
    """``data`` as JSON safe inside a ``<script>`` element: UTF-8 text, with ``</`` and ``<!--``
    escaped (inside JSON strings, where alone ``<`` can be), so no model output can close the
    element or open a comment in it.

    Examples
    --------
    >>> samples_json({"x": ["</script><script>alert(1)</script>", "<!--"]})
    '{"x":["<\\\\/script><script>alert(1)<\\\\/script>","<\\\\u0021--"]}'
    """
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.replace("<!--", "<\\u0021--").replace("</", "<\\/")

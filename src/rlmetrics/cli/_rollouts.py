"""From rollout dump columns to the inputs of the validation statistics, for ``validate`` and ``compare``.

A dump's columns (:mod:`rlmetrics.readers.dumps`) become data sources, prompt ids, the value
variables, predictions and clusters: prompts by ``--uid-key`` (else by ``input``), sources by
``--source-key`` (else one source named ``all``), values by ``--value-key`` (else every numeric
key that is not text or an id). Only those columns are read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer

from rlmetrics.readers.dumps import DumpError, _Coded, find_dumps, load_rollouts, schema_keys

__all__ = ["KeyOptions", "RolloutInputs", "Run", "inputs_of", "keys_to_read", "load_run", "read_keys"]

# The options both commands read rollouts with (one text for one idea).
UidKey = Annotated[
    str,
    typer.Option(
        "--uid-key", help="Key of the prompt id; if absent from the files, prompts are grouped by 'input'."
    ),
]
SourceKey = Annotated[
    str, typer.Option("--source-key", help="Key of the data source; if absent, one source named 'all'.")
]
ValueKeys = Annotated[
    list[str] | None,
    typer.Option("--value-key", help="A value key to use (repeatable); default: every numeric key."),
]
PredKey = Annotated[str, typer.Option("--pred-key", help="Key of the predicted answer voted on for maj@k.")]
ClusterKey = Annotated[
    str | None,
    typer.Option(
        "--cluster-key", help="Key of a cluster of prompts (e.g. a shared passage): clustered errors."
    ),
]
Ks = Annotated[
    list[int] | None,
    typer.Option("--k", "-k", help="A k for the @k metrics (repeatable).", show_default="1, 2, 4, ... N"),
]
Confidence = Annotated[float, typer.Option("--confidence", help="Level of the intervals.")]
Step = Annotated[
    int | None,
    typer.Option("--step", help="For folders of per-step dumps: the step to read (default: the last)."),
]

_TEXT_KEYS = frozenset({"input", "output", "gts", "step"})


class KeyOptions(NamedTuple):
    """Which columns hold what (the commands' ``--*-key`` options)."""

    uid_key: str = "uid"
    source_key: str = "data_source"
    value_keys: Sequence[str] | None = None
    pred_key: str = "pred"
    cluster_key: str | None = None


class RolloutInputs(NamedTuple):
    """Per-sample inputs of :func:`~rlmetrics.validation.summary.summarize_validation`."""

    sources: list[Any]
    uids: Any
    infos: dict[str, Any]
    clusters: Any
    n_rows: int


def keys_to_read(kinds: dict[str, str], opts: KeyOptions) -> list[str]:
    """The columns to read, given the keys of the files and their kinds (:func:`schema_keys`).

    Raises
    ------
    DumpError
        A named key that is absent or of the wrong kind, or no numeric value key.
    """
    present = ", ".join(sorted(kinds))
    if opts.uid_key in kinds:
        wanted = [opts.uid_key]
    elif opts.uid_key == "uid" and "input" in kinds:
        wanted = ["input"]
    else:
        raise DumpError(
            f"the prompt id key {opts.uid_key!r} is not in the files (nor 'input'); keys present: {present}"
        )
    if opts.source_key in kinds:
        wanted.append(opts.source_key)
    elif opts.source_key != "data_source":
        raise DumpError(
            f"the data source key {opts.source_key!r} is not in the files; keys present: {present}"
        )
    if opts.cluster_key is not None:
        if opts.cluster_key not in kinds:
            raise DumpError(
                f"the cluster key {opts.cluster_key!r} is not in the files; keys present: {present}"
            )
        wanted.append(opts.cluster_key)
    wanted.extend(_value_keys(kinds, opts, present))
    if opts.pred_key in kinds:
        wanted.append(opts.pred_key)
    return list(dict.fromkeys(wanted))


def _value_keys(kinds: dict[str, str], opts: KeyOptions, present: str) -> list[str]:
    if opts.value_keys:
        for key in opts.value_keys:
            if key not in kinds:
                raise DumpError(f"value key {key!r} is not in the files; keys present: {present}")
            if kinds[key] not in ("number", "null"):
                raise DumpError(f"value key {key!r} must hold numbers or bools; it holds {kinds[key]} values")
        return list(opts.value_keys)
    exclude = {opts.uid_key, opts.source_key, opts.pred_key, opts.cluster_key} | _TEXT_KEYS
    # a key mixing numbers with other values is read too, so the reader names the line at fault
    chosen = [key for key, kind in kinds.items() if key not in exclude and kind in ("number", "mixed")]
    if not chosen:
        raise DumpError(f"no numeric value key found (e.g. 'score', 'acc'); keys present: {present}")
    return chosen


def read_keys(files: Sequence[Path], opts: KeyOptions) -> list[str]:
    """:func:`keys_to_read` of ``files`` from their schemas; a file without rows is named."""
    kinds: dict[str, str] = {}
    for path in files:
        one = schema_keys([path])
        if not one:
            raise DumpError(f"{path}: no rows")
        for key, kind in one.items():
            kinds[key] = (
                kind
                if kinds.get(key) in (None, "null", kind)
                else ("mixed" if kind != "null" else kinds[key])
            )
    return keys_to_read(kinds, opts)


def _values(col: Any) -> Any:
    return col.tolist() if isinstance(col, _Coded) else col


def inputs_of(columns: dict[str, Any], n_rows: int, opts: KeyOptions) -> RolloutInputs:
    """The summary's inputs from columns read with :func:`keys_to_read`'s keys.

    Prompts are keyed by their uid *values*: a coded column's codes number the values in the
    order one run's files list them, so two runs (``compare``) would pair different prompts under
    one code. The values are the column's own string objects, repeated, so grouping them costs no
    more than grouping the codes. Predictions stay codes (votes are counted within one run).
    """
    uid_col = columns[opts.uid_key] if opts.uid_key in columns else columns["input"]
    uids = _values(uid_col)
    src_col = columns.get(opts.source_key)
    sources = ["all"] * n_rows if src_col is None else _values(src_col)
    infos: dict[str, Any] = {}
    for key, col in columns.items():
        if key in (opts.uid_key, opts.source_key, opts.cluster_key, "input"):
            continue
        infos[key] = col.codes if key == opts.pred_key and isinstance(col, _Coded) else _values(col)
    clusters = None if opts.cluster_key is None else _values(columns[opts.cluster_key])
    return RolloutInputs(sources, uids, infos, clusters, n_rows)


@dataclass
class Run:
    """One argument of ``compare``: rollouts (a dump, or one step of a folder) or a saved summary."""

    name: str
    path: Path
    #: the step read, for a folder of per-step dumps
    step: int | None
    #: how many steps the folder holds (1 for a file)
    n_steps: int
    files: list[Path]
    inputs: RolloutInputs | None = None
    #: ``rlmetrics validate --json`` summary (no per-prompt data)
    summary: dict[str, Any] | None = None


def _summary_json(path: Path) -> dict[str, Any] | None:
    """A ``rlmetrics validate --json`` file (one ``summary``, or per-step ``steps``), or None for a dump.

    A dump's first line is a whole JSON object; the summary is one indented object over many
    lines, so the first line alone does not parse.
    """
    if path.suffix.lower() != ".json":
        return None
    with path.open("rb") as fh:
        first = fh.readline()
    try:
        json.loads(first)
        return None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        pass
    try:
        payload = json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        return None  # not a summary: read as a dump, whose reader names the line at fault
    if isinstance(payload, dict) and "n_samples" in payload and ("summary" in payload or "steps" in payload):
        return payload
    return None


def load_run(path: Path, opts: KeyOptions, *, step: int | None = None, name: str | None = None) -> Run:
    """Read one run: a dump file, a folder of dumps, or a ``validate --json`` summary.

    A folder of per-step dumps (verl's ``<step>.jsonl``) gives its last step, or ``step``; other
    folders are read whole.
    """
    label = name or (path.stem if path.is_file() else path.resolve().name)
    if path.is_file():
        payload = _summary_json(path)
        if payload is not None and "steps" in payload:
            steps_of = {entry["step"]: entry["summary"] for entry in payload["steps"]}
            chosen = step if step is not None else max(steps_of)
            if chosen not in steps_of:
                raise DumpError(
                    f"{path}: no summary of step {step}; steps present: {', '.join(map(str, steps_of))}"
                )
            return Run(label, path, chosen, len(steps_of), [path], summary=steps_of[chosen])
        if payload is not None:
            return Run(label, path, None, 1, [path], summary=payload["summary"])
    dumps = find_dumps(path)
    steps = sorted({d.step for d in dumps if d.step is not None})
    chosen = step if step is not None else (steps[-1] if steps else None)
    if step is not None and step not in steps:
        shown = ", ".join(map(str, steps[-10:])) or "none"
        raise DumpError(f"{path}: no dump of step {step}; steps present: {shown}")
    files = [d.path for d in dumps if d.step == chosen] if chosen is not None else [d.path for d in dumps]
    columns, n_rows = load_rollouts(files, keys=read_keys(files, opts))
    return Run(label, path, chosen, max(len(steps), 1), files, inputs=inputs_of(columns, n_rows, opts))

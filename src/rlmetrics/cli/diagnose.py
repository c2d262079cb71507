"""``rlmetrics diagnose``: the known failure modes of RL fine-tuning, found in saved runs.

The library functions are :func:`rlmetrics.health.sources.load_history` (any run format, told by
content, through :func:`rlmetrics.readers.read_run`; a log piped in is read as a stream) and
:func:`rlmetrics.health.rules.diagnose`. Exit
status: 0 when no run has an ``error`` finding, 1 when one has (a CI gate on a run), 2 when a run
could not be read or an option is wrong. ``--fail-on KIND,...`` sets the gate to those kinds:
exit 1 when a finding of one of them appears, whatever its severity (and an error finding of
another kind no longer fails).

Under a finding that names the steps whose samples show it (the text rules' ``sample_steps``)
those steps are printed, and when the run logged sample tables (its ``samples.jsonl``,
:func:`rlmetrics.readers.samples_beside`) the rows that show it best
(:func:`rlmetrics.health.examples.finding_examples`), each on one line; ``--json`` gives them as
the finding's ``examples`` (``[{step, row, reward, stop_reason, response, why}]``, the response
whole, ``row`` its index in the step's table, ``why`` a few words on what it shows; the key is
absent when the run has no sample tables).
"""

from __future__ import annotations

import io
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer
from rich.console import Console
from rich.markup import escape

from rlmetrics.cli._files import check_target, write_json

__all__ = [
    "EPILOG",
    "EXIT_BAD_INPUT",
    "EXIT_ERROR",
    "diagnose",
    "parse_kinds",
    "parse_signals",
    "parse_thresholds",
    "run_name",
]

_SEVERITY_STYLE = {"warning": "yellow", "error": "bold red"}
#: Exit status when a run has an ``error`` finding (with ``--fail-on``: a finding of those kinds).
EXIT_ERROR = 1
#: Exit status when a run cannot be read or an option is wrong.
EXIT_BAD_INPUT = 2
_EXIT_ERROR, _EXIT_BAD_INPUT = EXIT_ERROR, EXIT_BAD_INPUT

EPILOG = """\
Examples:

  rlmetrics diagnose rlmetrics_logs/proj/exp1 runs/verl_exp.jsonl

  rlmetrics diagnose tb_logs/run3 --json health.json --threshold entropy_collapse.fraction=0.05

  rlmetrics diagnose my_loop/metrics.jsonl --signal reward=train_reward --signal entropy=ent

  ssh node1 cat nohup.out | rlmetrics diagnose -

  rlmetrics diagnose runs/exp1 --fail-on nonfinite,reward_hacking   # a CI gate on two kinds

Exit status: 0 no error finding, 1 an error finding in some run (with --fail-on: a finding of one
of those kinds, any severity), 2 unreadable input or a bad option.
"""


#: The run argument that reads the log from standard input.
STDIN = "-"
_STDIN_NAME = "<stdin>"


def run_name(path: Path) -> str:
    """Label of a run: its folder for a ``metrics.jsonl`` or ``trainer_state.json``, else its name.

    Examples
    --------
    >>> run_name(Path("logs/proj/exp1/metrics.jsonl")), run_name(Path("tb/run3")), run_name(Path("a.jsonl"))
    ('exp1', 'run3', 'a')
    """
    if path.is_file() or path.suffix:
        if path.name in ("metrics.jsonl", "trainer_state.json") and path.parent.name:
            return path.parent.name
        return path.stem
    return path.resolve().name if path.name in ("", ".", "..") else path.name


def parse_signals(items: list[str]) -> dict[str, str] | None:
    """``--signal signal=key`` options as ``{signal: key}`` (None when none is given).

    >>> parse_signals(["reward=train_reward"])
    {'reward': 'train_reward'}
    """
    from rlmetrics.health.signals import SIGNALS

    out: dict[str, str] = {}
    for item in items:
        name, sep, key = item.partition("=")
        name, key = name.strip(), key.strip()
        if not sep or not name or not key:
            raise ValueError(f"--signal expects signal=key (e.g. reward=train_reward); got {item!r}")
        if name not in SIGNALS:
            raise ValueError(
                f"--signal {item!r}: unknown signal {name!r}; known: {', '.join(sorted(SIGNALS))}"
            )
        out[name] = key
    return out or None


def parse_kinds(items: list[str], known: tuple[str, ...] | list[str]) -> tuple[str, ...] | None:
    """``--fail-on`` values (comma-separated, repeatable) as the kinds they name (None when none).

    Raises
    ------
    ValueError
        An empty item or an unknown kind; the message lists the known kinds.

    Examples
    --------
    >>> parse_kinds(["nonfinite,grad_spike", "nonfinite"], ("nonfinite", "grad_spike", "kl_drift"))
    ('nonfinite', 'grad_spike')
    """
    out: list[str] = []
    for item in items:
        for kind in item.split(","):
            kind = kind.strip()
            if kind not in known:
                what = f"unknown kind {kind!r}" if kind else "an empty kind"
                raise ValueError(f"--fail-on {item!r}: {what}; known: {', '.join(known)}")
            if kind not in out:
                out.append(kind)
    return tuple(out) or None


def parse_thresholds(
    items: list[str], known: Mapping[str, Mapping[str, float]]
) -> dict[str, dict[str, float]]:
    """``["kind.param=value", ...]`` as ``{kind: {param: value}}``, checked against ``known``.

    Raises
    ------
    ValueError
        A malformed item, an unknown kind or parameter, or a value that is not a finite number.

    Examples
    --------
    >>> parse_thresholds(["grad_spike.factor=20"], {"grad_spike": {"factor": 10.0, "window": 20}})
    {'grad_spike': {'factor': 20.0}}
    """
    out: dict[str, dict[str, float]] = {}
    for item in items:
        name, eq, raw = item.partition("=")
        kind, dot, param = name.strip().partition(".")
        if not (eq and dot and kind and param and raw.strip()):
            raise ValueError(
                f"--threshold expects kind.param=value (e.g. grad_spike.factor=20); got {item!r}"
            )
        if kind not in known:
            raise ValueError(
                f"--threshold {item!r}: unknown kind {kind!r}; known: {', '.join(sorted(known))}"
            )
        if param not in known[kind]:
            params = ", ".join(sorted(known[kind])) or "none"
            raise ValueError(
                f"--threshold {item!r}: {kind} has no parameter {param!r}; its parameters: {params}"
            )
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(
                f"--threshold {item!r}: the value must be a number; got {raw.strip()!r}"
            ) from None
        if not math.isfinite(value):
            raise ValueError(f"--threshold {item!r}: the value must be finite; got {raw.strip()!r}")
        out.setdefault(kind, {})[param] = value
    return out


def _print_run(
    console: Console,
    name: str,
    source: str,
    kind: str,
    steps: int,
    diagnosis: Any,
    examples: list[list[dict[str, Any]]] | None = None,
    *,
    show_skipped: bool = False,
) -> None:
    from rich.table import Table

    n_err = sum(f.severity == "error" for f in diagnosis.findings)
    n_warn = len(diagnosis.findings) - n_err
    n_cat = len(diagnosis.categories)
    cats = f", {n_cat} categor{'y' if n_cat == 1 else 'ies'} diagnosed" if n_cat else ""
    read = f"{escape(kind)}, {steps} step{'' if steps == 1 else 's'}"
    head = f"[bold]{escape(name)}[/bold] [dim]({escape(source)}, {read}{cats})[/dim]: "
    if not diagnosis.findings:
        console.print(head + "[green]no findings[/green]", soft_wrap=True)
    else:
        console.print(head + f"{n_err} error(s), {n_warn} warning(s)", soft_wrap=True)
        table = Table(show_lines=False)
        # the category column where a finding is a category's or names some (a run logged with group_by=)
        where = any(f.category is not None or f.categories for f in diagnosis.findings)
        columns = ("kind", "severity", "step", *(("where",) if where else ()), "metric", "evidence")
        for column in columns:
            table.add_column(
                column,
                justify="right" if column == "step" else "left",
                overflow="fold",
                no_wrap=column in _NO_WRAP,  # a kind's name whole, in a narrow terminal too
            )
        for f in diagnosis.findings:
            style = _SEVERITY_STYLE.get(f.severity, "")
            table.add_row(
                escape(f.kind),
                f"[{style}]{escape(f.severity)}[/{style}]" if style else escape(f.severity),
                str(f.step),
                *((escape(f.where),) if where else ()),
                escape(", ".join(f.metric)),
                escape(f.evidence_text()),
            )
        console.print(table)
        # the advice under the table, one line a finding: a sixth column would be too narrow to read
        for i, f in enumerate(diagnosis.findings):
            at = f" [dim]({escape(f.category)})[/dim]" if f.category is not None else ""
            console.print(f"  [bold]{escape(f.kind)}[/bold]{at}: {escape(f.advice)}", soft_wrap=True)
            _print_examples(console, f, None if examples is None else examples[i])
    _print_skipped(console, diagnosis.skipped, show_skipped)


#: Columns of the findings table kept on one line (short values; names that must not break).
_NO_WRAP = frozenset({"kind", "severity", "step"})


def _print_skipped(console: Console, skipped: Sequence[Any], show_all: bool) -> None:
    """The checks that could not run: those whose metrics the run does not log in one line (most
    runs log the metrics of one trainer only), each other one with its reason; every reason with
    ``show_all``."""
    absent = [] if show_all else [s.kind for s in skipped if s.not_logged]
    if absent:
        console.print(
            f"[dim]  not run, their metrics not logged ({len(absent)}): {escape(', '.join(absent))} "
            "(--show-skipped: what each needs)[/dim]",
            soft_wrap=True,
        )
    for s in skipped:
        if show_all or not s.not_logged:
            console.print(f"[dim]  skipped {escape(s.kind)}: {escape(s.why)}[/dim]", soft_wrap=True)


def _print_examples(console: Console, finding: Any, examples: list[dict[str, Any]] | None) -> None:
    """Under a finding that names ``sample_steps``: those steps, and the example rows (None: the
    run has no sample tables)."""
    from rlmetrics.health.examples import one_line, sample_steps

    named = sample_steps(finding)
    if not named:
        return
    at = ", ".join(str(s) for s in dict.fromkeys(named.values()))
    if examples is None:
        console.print(f"    [dim]samples at steps {at} (no samples.jsonl logged)[/dim]", soft_wrap=True)
        return
    labels = "/".join(named)
    if not examples:
        console.print(
            f"    [dim]samples at steps {at} ({labels}): no row logged there shows it[/dim]", soft_wrap=True
        )
        return
    console.print(f"    [dim]samples at steps {at} ({labels}); examples:[/dim]", soft_wrap=True)
    for e in examples:
        stop = "-" if e["stop_reason"] is None else escape(e["stop_reason"])
        head = f"step {e['step']}, reward {e['reward']:.4g}, stop {stop}"
        console.print(f"      [dim]{head}:[/dim] {escape(one_line(e['response']))}", soft_wrap=True)


def _run_examples(err: Console, path: Path | None, diagnosis: Any) -> list[list[dict[str, Any]]] | None:
    """Per finding, the sample rows that show it (:func:`rlmetrics.health.examples.finding_examples`);
    None when the run has no ``samples.jsonl`` (or it cannot be read: one line on stderr)."""
    from rlmetrics.health.examples import finding_examples, sample_steps
    from rlmetrics.readers import read_samples, samples_beside

    if path is None or not any(sample_steps(f) for f in diagnosis.findings):
        return None
    found = samples_beside(path)
    if found is None:
        return None
    try:
        tables = read_samples(found)
    except (ValueError, OSError) as exc:  # RunReadError is a ValueError
        err.print(f"[yellow]warning:[/yellow] {escape(str(found))}: {escape(str(exc))}", soft_wrap=True)
        return None
    return [finding_examples(f, tables) for f in diagnosis.findings]


def diagnose(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="Runs: a rlmetrics metrics.jsonl or run folder, a verl file-logger .jsonl, a TensorBoard "
            "log directory, a trainer_state.json (TRL), a W&B offline run, or a console log (verl's, "
            "TRL's printed dicts); - reads one from standard input.",
            show_default=False,
        ),
    ],
    json_out: Annotated[
        Path | None,
        typer.Option("--json", help="Also write the findings of every run as JSON to this file."),
    ] = None,
    threshold: Annotated[
        list[str] | None,
        typer.Option(
            "--threshold",
            "-t",
            help="Override a threshold, kind.param=value (repeatable), e.g. grad_spike.factor=20.",
        ),
    ] = None,
    signal: Annotated[
        list[str] | None,
        typer.Option(
            "--signal",
            "-s",
            help="Read a signal from a key of your own, signal=key (repeatable), e.g. reward=train_reward.",
        ),
    ] = None,
    fail_on: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-on",
            metavar="KIND[,KIND...]",
            help="Exit 1 when a finding of one of these kinds appears, whatever its severity (instead of "
            "on any error finding); comma-separated or repeated, e.g. nonfinite,reward_hacking.",
        ),
    ] = None,
    show_skipped: Annotated[
        bool,
        typer.Option(
            "--show-skipped",
            help="List every check that could not run with its reason, those whose metrics the run "
            "does not log too (by default named in one line).",
        ),
    ] = False,
) -> None:
    """Find the known failure modes of RL fine-tuning in runs: what, from which step, the evidence.

    Prints a table per run (kind, severity, onset step, metric, evidence, advice) and the checks
    that could not run. Exit status 0 when no run has an error finding, 1 when one has (with
    --fail-on: a finding of one of those kinds), 2 when a run cannot be read or an option is wrong.
    """
    out = Console(highlight=False)
    err = Console(stderr=True, highlight=False)
    options = _options(err, threshold or [], signal or [], json_out, fail_on or [], show_skipped)
    stdin = _Stdin()
    records: list[dict[str, Any]] = []
    for i, path in enumerate(runs):
        if i:
            out.print()
        records.append(_diagnose_run(out, err, path, options, stdin))
    if json_out is not None:
        try:
            write_json(json_out, {"runs": records})
        except OSError as exc:
            _fail(err, f"--json: could not write {json_out}: {exc.strerror or exc}")
        err.print(f"wrote {escape(str(json_out))}", soft_wrap=True)
    code = max((_exit_code(r, options.fail_on) for r in records), default=0)
    if code:
        raise typer.Exit(code=code)


class _Options(NamedTuple):
    """The options of one ``diagnose`` call, checked."""

    thresholds: dict[str, dict[str, float]] | None
    signals: dict[str, str] | None
    fail_on: tuple[str, ...] | None = None  # the kinds that fail the run (None: any error finding)
    show_skipped: bool = False  # every skipped check with its reason


def _fail(err: Console, message: str) -> None:
    err.print(f"[bold red]error:[/bold red] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code=_EXIT_BAD_INPUT)


def _options(
    err: Console,
    threshold: list[str],
    signal: list[str],
    json_out: Path | None,
    fail_on: list[str],
    show_skipped: bool = False,
) -> _Options:
    """The checked options; a bad one is one line on stderr and exit 2."""
    from rlmetrics.health.rules import KINDS, THRESHOLDS

    try:
        options = _Options(
            parse_thresholds(threshold, THRESHOLDS) or None,
            parse_signals(signal),
            parse_kinds(fail_on, KINDS),
            show_skipped,
        )
    except ValueError as exc:
        _fail(err, str(exc))
    problem = None if json_out is None else check_target(json_out, "--json")
    if problem is not None:
        _fail(err, problem)
    return options


class _Stdin:
    """Standard input, read once: every ``-`` among the runs reads the same log."""

    def __init__(self) -> None:
        self.data: bytes | None = None

    def stream(self) -> io.BytesIO:
        if self.data is None:  # a log piped in (`tail -f nohup.out | ...` ends at EOF)
            self.data = sys.stdin.buffer.read()
        stream = io.BytesIO(self.data)
        stream.name = _STDIN_NAME  # type: ignore[misc]
        return stream


def _diagnose_run(out: Console, err: Console, path: Path, options: _Options, stdin: _Stdin) -> dict[str, Any]:
    """Read and diagnose one run, print it, and return its JSON record."""
    from rlmetrics.health import sources
    from rlmetrics.health.rules import diagnose as run_diagnose

    piped = str(path) == STDIN
    name = "stdin" if piped else run_name(path)
    source = _STDIN_NAME if piped else str(path)
    try:
        history, kind = sources.load_history(stdin.stream() if piped else path)
        diagnosis = run_diagnose(history, thresholds=options.thresholds, signals=options.signals)
    except Exception as exc:
        # RunReadError is a ValueError; a reader's ImportError names the pip install line.
        # Anything else a reader raises still makes this run unreadable (exit 2), never exit 1,
        # which says that a run has an error finding.
        shown = (
            str(exc)
            if isinstance(exc, ValueError | TypeError | ImportError | OSError)
            else f"could not read it ({type(exc).__name__}: {exc})"
        )
        err.print(f"[bold red]error:[/bold red] {escape(name)}: {escape(shown)}", soft_wrap=True)
        return {
            "run": name,
            "source": source,
            "kind_of_source": None,
            "error": shown,
            "findings": [],
            "skipped": [],
        }
    steps = _count_steps(history)
    examples = _run_examples(err, None if piped else path, diagnosis)
    _print_run(out, name, source, kind, steps, diagnosis, examples, show_skipped=options.show_skipped)
    record = {"run": name, "source": source, "kind_of_source": kind, "steps": steps, **diagnosis.to_dict()}
    for finding, rows in zip(record["findings"], examples or (), strict=False):
        if "sample_steps" in finding["evidence"]:
            finding["examples"] = rows
    return record


def _count_steps(history: Mapping[str, tuple[Any, Any]]) -> int:
    """The number of distinct steps at which any metric of the run was read."""
    import numpy as np

    if not history:
        return 0
    return int(np.unique(np.concatenate([np.asarray(steps) for steps, _ in history.values()])).size)


def _exit_code(record: dict[str, Any], fail_on: tuple[str, ...] | None = None) -> int:
    if "error" in record:
        return _EXIT_BAD_INPUT
    if fail_on is not None:
        return _EXIT_ERROR if any(f["kind"] in fail_on for f in record["findings"]) else 0
    return _EXIT_ERROR if any(f["severity"] == "error" for f in record["findings"]) else 0

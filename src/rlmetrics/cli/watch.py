"""``rlmetrics watch``: follow growing runs, show their key signals and findings, alert, gate.

The library is :class:`rlmetrics.health.watch.Watcher` (the refresh) and
:class:`rlmetrics.health.webhook.Outbox` (the deliveries); this module is the loop (a plain loop
with ``sleep``, no thread) and the view: a live table on a terminal (rich ``Live``), and, on a
pipe or a log file, one line per new finding and the table at the end.
"""

from __future__ import annotations

import math
import time
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from rlmetrics.cli.diagnose import parse_signals, parse_thresholds, run_name

__all__ = ["EPILOG", "EXIT_BAD_INPUT", "EXIT_FINDING", "watch"]

#: Exit status when a finding at or above ``--exit-on`` appears.
EXIT_FINDING = 3
#: Exit status for a bad option or a run that cannot be read.
EXIT_BAD_INPUT = 2
_EXIT_BAD_INPUT = EXIT_BAD_INPUT
_EXIT_INTERRUPTED = 130
_SEVERITY_STYLE = {"warning": "yellow", "error": "bold red"}
_STATUS_STYLE = {
    "waiting": "dim",
    "following": "green",
    "finished": "cyan",
    "failed": "bold red",
    "idle": "dim",
}
_SIGNAL_HEADS = {"reward": "reward", "kl_ref": "KL", "entropy": "entropy", "response_length": "length"}
_FLUSH_SECONDS = 5.0  # at the end, how long webhook deliveries still due may take
_PROBLEM_WIDTH = 160  # characters of a waiting or failed run's problem shown in the table
_CATCH_UP_SLEEP = 0.05  # between polls while runs wait for the budget
_REDRAW_SECONDS = 1.0  # the live table is drawn at most this often (a draw of 100 runs: ~0.2 s)

EPILOG = """\
Examples:

  rlmetrics watch rlmetrics_logs/proj/exp1 --exit-on error --idle 600

  rlmetrics watch nohup.out --webhook https://hooks.slack.com/services/T000/B000/XXXX

  rlmetrics watch sweep/*/metrics.jsonl --interval 10

  rlmetrics watch tb_logs/run3 --once --exit-on warning

Exit status: 0 every run finished or went idle (or --once found nothing to exit on), 3 a finding
at or above --exit-on appeared, 2 a bad option or a run that cannot be read (with --once: one
not there yet too), 130 interrupted.
"""


def watch(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="Runs to follow, as diagnose reads them: a metrics.jsonl or run folder, a verl .jsonl, a "
            "console log being written (nohup.out), a TensorBoard log directory, ... A run not there yet "
            "is waited for.",
            show_default=False,
        ),
    ],
    interval: Annotated[float, typer.Option("--interval", help="Seconds between refreshes.", min=0.0)] = 5.0,
    idle: Annotated[
        float | None,
        typer.Option("--idle", help="End a run after this many seconds without a new step.", min=0.0),
    ] = None,
    once: Annotated[bool, typer.Option("--once", help="Read and diagnose once, print, and exit.")] = False,
    exit_on: Annotated[
        str | None,
        typer.Option(
            "--exit-on",
            metavar="error|warning",
            help="Exit with status 3 when a finding of this severity or above appears.",
        ),
    ] = None,
    webhook: Annotated[
        list[str] | None,
        typer.Option(
            "--webhook", help="POST each new finding as JSON to this URL (Slack, Discord, generic)."
        ),
    ] = None,
    budget: Annotated[
        float, typer.Option("--budget", help="Seconds of reading per refresh; the rest waits.", min=0.0)
    ] = 1.0,
    threshold: Annotated[
        list[str] | None,
        typer.Option("--threshold", "-t", help="Override a threshold, kind.param=value (repeatable)."),
    ] = None,
    signal: Annotated[
        list[str] | None,
        typer.Option("--signal", "-s", help="Read a signal from a key of your own, signal=key (repeatable)."),
    ] = None,
) -> None:
    """Follow growing runs: their last step, key signals and findings, live; alert and gate on findings.

    Re-reads a run when its files change (a JSON-lines run only its new lines), re-diagnoses it,
    and reports each new finding once (a line, and a POST to every --webhook). Ends when every
    run has finished (its log marks the end) or been idle --idle seconds (status 0), or when a
    finding at or above --exit-on appears (status 3).
    """
    from rlmetrics.health.watch import Watcher
    from rlmetrics.health.webhook import Outbox

    out = Console(highlight=False)
    err = Console(stderr=True, highlight=False)
    if exit_on is not None and exit_on not in _SEVERITY_STYLE:
        _fail(err, f"--exit-on expects error or warning; got {exit_on!r}")
    urls = _check_urls(err, webhook or [])
    options = _options(err, threshold or [], signal or [])
    watcher = Watcher(runs, names=[run_name(p) for p in runs], thresholds=options[0], signals=options[1])
    loop = _Loop(watcher, Outbox(), urls, out, err, exit_on)
    try:
        code = loop.once(budget=None) if once else loop.follow(interval=interval, idle=idle, budget=budget)
    except KeyboardInterrupt:
        code = _EXIT_INTERRUPTED
    loop.finish()
    if code:
        raise typer.Exit(code=code)


def _fail(err: Console, message: str) -> None:
    err.print(f"[bold red]error:[/bold red] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code=_EXIT_BAD_INPUT)


def _check_urls(err: Console, urls: list[str]) -> list[str]:
    for url in urls:
        if not url.startswith(("http://", "https://")):
            _fail(err, f"--webhook expects an http:// or https:// URL; got {url!r}")
    return urls


def _options(err: Console, threshold: list[str], signal: list[str]) -> tuple[Any, Any]:
    from rlmetrics.health.rules import THRESHOLDS

    try:
        return parse_thresholds(threshold, THRESHOLDS) or None, parse_signals(signal)
    except ValueError as exc:
        _fail(err, str(exc))
    raise AssertionError("unreachable")  # pragma: no cover


class _Loop:
    """The watch loop: poll, report what is new, draw, sleep."""

    def __init__(
        self, watcher: Any, outbox: Any, urls: list[str], out: Console, err: Console, exit_on: str | None
    ) -> None:
        self.watcher, self.outbox, self.urls = watcher, outbox, urls
        self.out, self.err, self.exit_on = out, err, exit_on
        self.live: Any = None
        self.triggered = False
        self._warned: set[str] = set()
        self._ended: set[int] = set()
        self.printed = False
        self._drawn = -math.inf  # when the live table was last drawn

    def once(self, *, budget: float | None) -> int:
        self.step(budget=budget)
        self.out.print(self.table())
        self.printed = True
        if self.triggered:
            return EXIT_FINDING
        failed = [r for r in self.watcher.runs if r.status in ("waiting", "failed")]
        for run in failed:
            self.err.print(
                f"[bold red]error:[/bold red] {escape(run.name)}: {escape(run.problem or '')}", soft_wrap=True
            )
        return _EXIT_BAD_INPUT if failed else 0

    def follow(self, *, interval: float, idle: float | None, budget: float) -> int:
        if self.out.is_terminal:
            from rich.live import Live

            # auto_refresh=False: rich would redraw from a thread of its own
            self.live = Live(self.table(), console=self.out, auto_refresh=False, transient=False)
            self.live.start()
        while True:
            started = time.monotonic()
            self.step(budget=budget)
            if self.triggered:
                return EXIT_FINDING
            if idle is not None:
                self.watcher.expire(idle)
                self.note_ended()
            if self.watcher.ended():  # a run that could not be read: as diagnose, status 2
                return _EXIT_BAD_INPUT if any(r.status == "failed" for r in self.watcher.runs) else 0
            pause = _CATCH_UP_SLEEP if self.watcher.pending else interval
            time.sleep(max(0.0, pause - (time.monotonic() - started)))

    def step(self, *, budget: float | None) -> None:
        """One refresh: poll, report the new findings and ended runs, deliver, redraw."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            new = self.watcher.poll(budget=budget)
            for item in new:
                self.report(item.run, item.finding)
            self.outbox.deliver_due(budget=self.outbox.timeout)
        self.warn([str(w.message) for w in caught] + [m for r in self.watcher.runs for m in r.warnings])
        self.note_ended()
        if self.live is not None and time.monotonic() - self._drawn >= _REDRAW_SECONDS:
            self.live.update(self.table(), refresh=True)
            self._drawn = time.monotonic()

    def note_ended(self) -> None:
        """A line for each run that ended since the last one."""
        for i, run in enumerate(self.watcher.runs):
            if run.ended and i not in self._ended:
                self._ended.add(i)
                why = f" ({escape(_short(run.problem))})" if run.problem else ""
                self.say(f"{escape(run.name)}: {run.status} at step {run.last_step}{why}")

    def report(self, run: Any, finding: Any) -> None:
        from rlmetrics.health.watch import at_least
        from rlmetrics.health.webhook import finding_payload, finding_text

        style = _SEVERITY_STYLE.get(finding.severity, "")
        self.say(f"[{style}]{escape(finding_text(finding, run=run.name))}[/{style}]")
        payload = finding_payload(finding, run=run.name, source=str(run.source))
        for url in self.urls:
            self.outbox.put(url, payload)
        if self.exit_on is not None and at_least(finding, self.exit_on):
            self.triggered = True

    def say(self, markup: str) -> None:
        """A line above the live table (or in the log)."""
        (self.live.console if self.live is not None else self.out).print(markup, soft_wrap=True)

    def warn(self, messages: list[str]) -> None:
        for text in messages:
            if text not in self._warned:
                self._warned.add(text)
                self.err.print(f"[yellow]warning:[/yellow] {escape(text)}", soft_wrap=True)

    def table(self) -> Any:
        return _table(self.watcher, self.outbox, bool(self.urls))

    def finish(self) -> None:
        """Deliver what is still due (bounded), stop the live view, print the table when there was none."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.outbox.flush(deadline=self.outbox.clock() + _FLUSH_SECONDS)
        self.warn([str(w.message) for w in caught])
        if self.live is not None:
            self.live.update(self.table(), refresh=True)
            self.live.stop()
        elif not self.printed:
            self.out.print(self.table())


def _table(watcher: Any, outbox: Any, webhooks: bool) -> Any:
    """The view: a row per run (status and seconds since its last step, key signals, findings count),
    then a line per finding and per run waiting or failed."""
    from rich.console import Group
    from rich.table import Table

    from rlmetrics.health.watch import KEY_SIGNALS

    table = Table(show_lines=False, show_edge=False)
    for column in ("run", "status", "step", *(_SIGNAL_HEADS[s] for s in KEY_SIGNALS), "findings"):
        left = column in ("run", "status", "findings")
        table.add_column(
            column, justify="left" if left else "right", overflow="fold", no_wrap=column != "run"
        )
    now = watcher.clock()
    lines: list[str] = []
    for run in watcher.runs:
        values = run.values
        style = _STATUS_STYLE.get(run.status, "")
        table.add_row(
            escape(run.name),
            f"[{style}]{escape(_status(run, now))}[/{style}]",
            "-" if run.last_step is None else str(run.last_step),
            *("-" if values[s] is None else f"{values[s]:.4g}" for s in KEY_SIGNALS),
            _count_cell(run),
        )
        lines.extend(_detail_lines(run))
    caption = f"{len(watcher.runs)} run(s)"
    if watcher.pending:
        caption += f", {watcher.pending} waiting for the next refresh"
    if webhooks:
        caption += f"; webhook: {outbox.sent} sent, {len(outbox)} due, {outbox.failed} given up"
    table.caption = caption
    return Group(table, *lines) if lines else table


def _status(run: Any, now: float) -> str:
    """The status word; a followed run's with the seconds since its last new step."""
    return f"live {run.idle_for(now):.0f}s" if run.status == "following" else str(run.status)


def _count_cell(run: Any) -> str:
    if run.diagnosis is None:
        return "-"
    n_err = sum(f.severity == "error" for f in run.diagnosis.findings)
    n_warn = len(run.diagnosis.findings) - n_err
    if not n_err and not n_warn:
        return "[green]none[/green]"
    parts = ([f"[bold red]{n_err} error[/bold red]"] if n_err else []) + (
        [f"[yellow]{n_warn} warning[/yellow]"] if n_warn else []
    )
    return ", ".join(parts)


def _detail_lines(run: Any) -> list[str]:
    """The findings of ``run`` (kind, severity, onset, evidence), or why it is waiting or failed."""
    name = f"[bold]{escape(run.name)}[/bold]"
    if run.problem and run.status in ("waiting", "failed"):
        return [f"{name}: [dim]{escape(_short(run.problem))}[/dim]"]
    out = []
    for f in run.diagnosis.findings if run.diagnosis is not None else ():
        style = _SEVERITY_STYLE.get(f.severity, "")
        out.append(
            f"{name}: [{style}]{escape(f.kind)}[/{style}] ({escape(f.severity)}) from step {f.step}: "
            f"{escape(f.evidence_text())}"
        )
    return out


def _short(problem: str) -> str:
    """A reader's message without the list of formats it expected (no room for it in the view)."""
    text = problem.split("; expected ", 1)[0]
    return text if len(text) <= _PROBLEM_WIDTH else text[: _PROBLEM_WIDTH - 3] + "..."

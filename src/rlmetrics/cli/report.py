"""``rlmetrics report``: draw runs into one interactive, self-contained HTML page (the library
function is :func:`rlmetrics.report.write_report`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from rlmetrics.cli._files import check_folder
from rlmetrics.report import MAX_SAMPLE_BYTES, ReportResult, write_report

__all__ = ["report"]

STDIN = "-"  # a run read from standard input
STDIN_LOG = "stdin.log"  # where it is kept, in the output folder


def report(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="Runs: metrics.jsonl files or their folders (also verl .jsonl, TensorBoard log dirs, "
            "trainer_state.json, W&B offline runs, console logs); several are overlaid. - reads a log "
            "from standard input (kept as stdin.log in the output folder).",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Output folder (default: report/ next to the first run)."),
    ] = None,
    name: Annotated[
        list[str] | None,
        typer.Option("--name", "-n", help="Label of a run; repeat once per run.", show_default=False),
    ] = None,
    title: Annotated[str, typer.Option(help="Title of the page.")] = "rlmetrics report",
    png: Annotated[
        bool, typer.Option("--png", help="Also write a PNG per section, for papers (matplotlib).")
    ] = False,
    max_sample_bytes: Annotated[
        int,
        typer.Option(
            "--max-sample-bytes",
            min=0,
            help="The most bytes of sample text (samples.jsonl) the page embeds; longer texts are cut, "
            "then steps left out (0: no sample browser).",
        ),
    ] = MAX_SAMPLE_BYTES,
) -> None:
    """Draw runs into report.html: findings, key panels, every metric by group; hover, zoom, smoothing."""
    console = Console()
    _check_runs(runs)
    _check_packages(console, png=png)  # before any run is read
    first = runs[0]
    out_dir = out if out is not None else (first if first.is_dir() else first.parent) / "report"
    if problem := check_folder(out_dir, "--out"):
        _fail(console, problem)
    if any(str(p) == STDIN for p in runs):
        runs = _with_stdin_kept(console, runs, out_dir)
    try:
        result = write_report(
            runs, out_dir, names=name or None, title=title, png=png, max_sample_bytes=max_sample_bytes
        )
    except (ValueError, ImportError) as err:
        _fail(console, str(err))
    except OSError as err:  # the disk filled, or the folder changed under us
        _fail(console, f"cannot write the report into {out_dir}: {err}")
    _print_summary(console, result, out_dir)


def _fail(console: Console, message: str) -> NoReturn:
    """Print ``message`` as the command's error and exit with status 1."""
    console.print(f"[red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code=1)


def _with_stdin_kept(console: Console, runs: list[Path], out_dir: Path) -> list[Path]:
    """The runs with ``-`` replaced by the log read from standard input, kept as ``stdin.log`` in
    the output folder (the page can be drawn again from it; every ``-`` is that one log)."""
    import sys

    kept = out_dir / STDIN_LOG
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(sys.stdin.buffer.read())
    except OSError as err:
        _fail(console, f"cannot keep the log read from standard input as {kept}: {err.strerror or err}")
    return [kept if str(p) == STDIN else p for p in runs]


def _check_runs(runs: list[Path]) -> None:
    """Every run given exists, or a usage error naming the missing ones."""
    missing = [str(p) for p in runs if str(p) != STDIN and not p.exists()]
    if missing:
        raise typer.BadParameter(f"no such file or folder: {', '.join(missing)}", param_hint="RUNS")


def _check_packages(console: Console, *, png: bool) -> None:
    """plotly (and matplotlib for ``--png``) are installed, or the command exits saying so."""
    import importlib.util

    needed = ["plotly"] + (["matplotlib"] if png else [])
    absent = [pkg for pkg in needed if importlib.util.find_spec(pkg) is None]
    if absent:
        _fail(console, f"the report needs {', '.join(absent)}: pip install 'rlmetrics[plot]'")


def _print_summary(console: Console, result: ReportResult, out_dir: Path) -> None:
    """A line per run (metrics, steps, findings), the panels, the PNGs and the page's path."""
    for run, diagnosis in zip(result.runs, result.diagnoses):
        found = len(diagnosis.findings)
        console.print(
            f"run [bold]{escape(run.name)}[/]: {len(run.series)} metrics, steps {run.step_range}, "
            f"{found} finding{'' if found == 1 else 's'}",
            soft_wrap=True,
        )
    folded = len(result.plan.folded)
    console.print(
        f"{len(result.plan.panels)} panels, {folded} constant series listed ({result.seconds:.1f} s)",
        soft_wrap=True,
    )
    if result.samples is not None and result.samples.data is not None:
        kept = sum(map(len, result.samples.steps))
        cut = " (cut to fit --max-sample-bytes)" if result.samples.cut else ""
        console.print(f"samples of {kept} steps in the page's sample browser{cut}", soft_wrap=True)
    if result.png_paths:
        console.print(f"{len(result.png_paths)} PNG figures in {escape(str(out_dir))}", soft_wrap=True)
    console.print(f"report: {escape(str(result.html_path))}", soft_wrap=True)

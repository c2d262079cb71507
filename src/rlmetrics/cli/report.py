"""``rlmetrics report``: draw the curves of JSONL runs (the library function is
:func:`rlmetrics.report.write_report`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from rlmetrics.report import write_report

__all__ = ["report"]


def report(
    runs: Annotated[
        list[Path], typer.Argument(help="One or more metrics.jsonl files (compared on shared axes).")
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Output folder (default: report/ next to the first run)."),
    ] = None,
    name: Annotated[
        list[str] | None, typer.Option("--name", "-n", help="Label of a run; repeat once per run.")
    ] = None,
    title: Annotated[str, typer.Option(help="Title of the HTML page.")] = "rlmetrics report",
) -> None:
    """Draw the curves of JSONL runs: one PNG per metric group and a self-contained report.html."""
    console = Console()
    missing = [str(p) for p in runs if not p.is_file()]
    if missing:
        raise typer.BadParameter(f"no such file: {', '.join(missing)}", param_hint="RUNS")
    out_dir = out if out is not None else runs[0].parent / "report"
    try:
        result = write_report(runs, out_dir, names=name or None, title=title)
    except (ValueError, ImportError) as err:
        console.print(f"[red]error:[/] {escape(str(err))}")
        raise typer.Exit(code=1) from None
    for run in result.runs:
        console.print(f"run [bold]{escape(run.name)}[/]: {len(run.series)} metrics, steps {run.step_range}")
    console.print(f"{len(result.png_paths)} figures in {escape(str(out_dir))}", soft_wrap=True)
    console.print(f"report: {escape(str(result.html_path))}", soft_wrap=True)

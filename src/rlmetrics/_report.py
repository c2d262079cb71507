"""Placeholder for the ``rlmetrics report``command (being written)."""

from __future__ import annotations

import typer


def report() -> None:
    """Not available yet."""
    typer.echo("rlmetrics report is not available yet", err=True)
    raise typer.Exit(code=2)

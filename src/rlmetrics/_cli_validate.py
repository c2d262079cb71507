"""Placeholder for the ``rlmetrics validate``command (being written)."""

from __future__ import annotations

import typer


def validate() -> None:
    """Not available yet."""
    typer.echo("rlmetrics validate is not available yet", err=True)
    raise typer.Exit(code=2)

"""Placeholder for the ``rlmetrics demo``command (being written)."""

from __future__ import annotations

import typer


def demo() -> None:
    """Not available yet."""
    typer.echo("rlmetrics demo is not available yet", err=True)
    raise typer.Exit(code=2)

"""``graphprof compare`` and ``graphprof hardware`` (being written)."""

from __future__ import annotations

import typer


def compare_command() -> None:
    """Compare models side by side."""
    typer.echo("graphprof compare: not available yet", err=True)
    raise typer.Exit(1)


def hardware_command() -> None:
    """List the hardware presets."""
    typer.echo("graphprof hardware: not available yet", err=True)
    raise typer.Exit(1)

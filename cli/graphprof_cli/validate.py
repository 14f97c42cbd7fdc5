"""``graphprof validate``: cross-check graphprof's counts against fvcore or torch (being written)."""

from __future__ import annotations

import typer


def validate_command() -> None:
    """Cross-check counts against fvcore's FlopCountAnalysis."""
    typer.echo("graphprof validate: not available yet", err=True)
    raise typer.Exit(1)

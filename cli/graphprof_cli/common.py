"""What every graphprof command shares: the console, the error-to-exit-code mapping, option helpers.

Nothing here imports torch or the library at import time, so ``graphprof --help`` and ``--version``
answer at once; the library is imported when a command runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup

from graphprof.errors import EXIT_INTERNAL, EXIT_INTERRUPTED
from graphprof_cli.process import settle_heap

__all__ = ["console", "fail", "honour_min_width", "run_guarded", "flag", "request_from", "PIPE_WIDTH", "Command", "Group"]

#: Width of the report when stdout is not a terminal and neither ``--width`` nor ``COLUMNS`` says one:
#: wide enough for every column of the reports; narrower widths fold cells, never cut them.
PIPE_WIDTH = 160
#: The narrowest report (``--width``'s minimum; a smaller ``COLUMNS`` is ignored).
MIN_WIDTH = 40
T = TypeVar("T")


def console(width: int | None = None, *, stderr: bool = False) -> Console:
    """The console for a report (on stderr with ``stderr``): ``width`` (``--width``), else ``COLUMNS``,
    else the terminal's, else :data:`PIPE_WIDTH` for a file or a pipe."""
    if width is None:
        columns = os.environ.get("COLUMNS", "")
        if columns.isdigit() and int(columns) >= MIN_WIDTH:  # narrower than --width allows: not honoured
            width = int(columns)
        elif not (sys.stderr if stderr else sys.stdout).isatty():
            width = PIPE_WIDTH
    return Console(width=width, stderr=stderr)


def honour_min_width() -> None:
    """A ``COLUMNS`` narrower than :data:`MIN_WIDTH` is dropped from this process's environment (the CLI's own):
    ``--help``, rendered by Typer from ``COLUMNS``, then keeps the floor the reports keep (:func:`console`)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) < MIN_WIDTH:
        del os.environ["COLUMNS"]


def fail(message: str, code: int) -> None:
    """One line on stderr, then exit with ``code``."""
    typer.echo(f"graphprof: error: {message}", err=True)
    raise typer.Exit(code)


def run_guarded(fn: Callable[[], T], debug: bool = False) -> T:
    """Call ``fn``; map library errors (and bugs) to one line on stderr and an exit code."""
    from graphprof.errors import GraphprofError

    settle_heap()  # the imports are done: out of every collection's walk from here (graphprof_cli.process)
    try:
        return fn()
    except typer.Exit:
        raise
    except GraphprofError as exc:
        if debug:
            raise
        fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        fail("interrupted", EXIT_INTERRUPTED)
    except Exception as exc:  # a bug in graphprof, not the user's mistake
        if debug:
            raise
        fail(f"internal error: {type(exc).__name__}: {exc} (run again with --debug for the traceback)", EXIT_INTERNAL)
    raise AssertionError("unreachable")


def flag(*names: str, help: str) -> Any:  # noqa: A002 - Typer's own keyword
    """A boolean option shown as a flag (``--list``), not as ``--list <bool>``."""
    return typer.Option(*names, help=help, metavar="")


class _HelpShownAsFlag:
    """``-h, --help`` shown as a flag too: Typer gives click's own help option a ``<bool>`` type column."""

    def get_help_option(self, ctx: click.Context) -> click.Option | None:
        option: click.Option | None = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.metavar = ""
        return option


class Group(_HelpShownAsFlag, TyperGroup):
    """The ``graphprof`` group (``typer.Typer(cls=Group)``)."""


class Command(_HelpShownAsFlag, TyperCommand):
    """A ``graphprof`` subcommand (``app.command(cls=Command)``)."""


R = TypeVar("R")


def request_from(cls: type[R], params: dict[str, Any]) -> R:
    """A command's frozen request (a dataclass) from Click's parsed parameters (``ctx.params``), by name.

    A field typed with an enum gets the enum's member whether Click handed over the member or its string
    (which it does, or not, depending on the Typer and Click versions installed)."""
    import dataclasses
    import enum
    import typing

    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # cls is a dataclass
        if f.name not in params:
            continue
        value = params[f.name]
        kinds = [t for t in (hints[f.name], *typing.get_args(hints[f.name])) if isinstance(t, type) and issubclass(t, enum.Enum)]
        values[f.name] = kinds[0](value) if kinds and value is not None else value
    return cls(**values)

"""``--output``, ``--html``, ``--graph`` and ``--plot`` of every command: checked before the work, written after.

:func:`plan` checks a result's ``--output`` (format, folder) before any model is built and fixes its path
against the starting folder; :func:`emit` writes the result through the library's one sink
(:func:`graphprof.render.sink.write_result`), or to standard output for ``-`` and ``/dev/stdout``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphprof_cli.common import run_guarded

if TYPE_CHECKING:
    from rich.console import Console

    from graphprof.render.sink import OutputTarget

__all__ = ["absolute", "distinct", "emit", "page", "plan"]


def plan(kind: str, output: Path | str | None, fmt: Any = None, redact: bool = False) -> OutputTarget | None:
    """The :class:`graphprof.render.sink.OutputTarget` of ``--output`` for a result of ``kind`` (``None``
    without one); a bad format or path is an :class:`~graphprof.errors.OutputError` now, not after the work."""
    if output is None:
        return None
    from graphprof.render.sink import plan_output

    return plan_output(output, kind, getattr(fmt, "value", fmt), redact)


def absolute(path: Path | None) -> Path | None:
    """``path`` fixed against the current folder (``-`` and descriptors kept), before a model can ``os.chdir``."""
    from graphprof.base.atomic import absolute_output

    return None if path is None else absolute_output(path)


def distinct(paths: Mapping[str, Sequence[Any] | Any]) -> None:
    """Refuse two options naming one file (exit 2), before any work (:func:`graphprof.render.sink.check_distinct`)."""
    from graphprof.render.sink import check_distinct

    check_distinct(paths)


def emit(result: Any, target: OutputTarget | None, console: Console, debug: bool = False) -> None:
    """Write ``result`` to ``target`` (from :func:`plan`): standard output for ``-`` and ``/dev/stdout`` (the
    report went to standard error), else the file, atomically, and say so on the console."""
    if target is None:
        return
    from graphprof.render.sink import render_result, write_result

    if target.to_stdout:  # the shell's own stdout: appended to a `>> log`, never replaced
        text = run_guarded(lambda: render_result(result, target.fmt, target.redact), debug)
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    run_guarded(lambda: write_result(result, target), debug)
    console.print(f"wrote {target.shown}", highlight=False, markup=False)


def page(text: str, redact: bool) -> str:
    """An HTML page's text, with the host left out under ``--redact`` (:mod:`graphprof.base.redact`)."""
    if not redact:
        return text
    from graphprof.base.redact import redact_text

    return redact_text(text, html=True)

"""``graphprof trace FILE``: the layer summary of a saved trace, as ``@capture_model`` prints it per forward.

Parses, calls :func:`graphprof.measure.trace.read_model_trace`, renders with
:func:`graphprof.render.tracesummary.render_trace_summary`; a file that is missing or not a trace is one
line on stderr and exit code 2.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from graphprof_cli.common import flag, run_guarded

#: ``MyModel_forward_003.json`` -> ``MyModel``: the name the decorator wrote the file under.
_TRACE_NAME = re.compile(r"^(?P<name>.+)_forward_\d+$")


def model_name_of(path: Path) -> str:
    """The model name in a trace file's name (``MyModel_forward_001.json`` -> ``MyModel``), else its stem."""
    match = _TRACE_NAME.match(path.stem)
    return match.group("name") if match else path.stem


def trace_command(
    file: Annotated[Path, typer.Argument(help="A Chrome trace written by @capture_model or --measure --trace.", show_default=False)],
    name: Annotated[str | None, typer.Option("--name", help="Model name in the title (default: from the file name).")] = None,
    debug: Annotated[bool, flag("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Summarise a saved trace per layer: calls, total and average self time, input shape."""
    from graphprof.measure.trace import read_model_trace
    from graphprof.render.tracesummary import render_trace_summary

    analysis = run_guarded(lambda: read_model_trace(file, name or model_name_of(file)), debug)
    typer.echo(render_trace_summary(analysis))

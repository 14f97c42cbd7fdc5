"""The bodies of ``graphprof compare`` and ``graphprof hardware`` (their options are parsed in ``main.py``).

``compare`` profiles each model in turn; a model that fails becomes a row with its one-line error and
the others still run. The exit code is 0 when every model was profiled, else the first failure's code.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console


def run_compare(
    models: Sequence[str],
    *,
    console: Console,
    hardware: str | None = None,
    peak_tflops: float | None = None,
    bandwidth_gbs: float | None = None,
    output: Path | None = None,
    fmt: str | None = None,
    debug: bool = False,
    profile_options: Mapping[str, Any] | None = None,
    html: Path | None = None,
    redact: bool = False,
) -> int:
    """Profile ``models``, print them side by side, write ``output`` if given; return the exit code.

    Each failed model's one-line error goes to stderr (``graphprof: error: MODEL: ...``); with
    ``output`` ``-`` the file goes to stdout and the table to stderr.
    """
    import graphprof
    from graphprof.base.options import parse_shape
    from graphprof.devices.hardware import resolve_hardware
    from graphprof.errors import EXIT_INTERNAL, GraphprofError, one_line
    from graphprof.profile import iter_compare
    from graphprof.render import ModelFailure, comparison_rows, render_comparison
    from graphprof_cli.output import absolute, distinct, plan

    device = resolve_hardware(hardware, peak_tflops=peak_tflops, bandwidth_gbs=bandwidth_gbs)
    parse_shape((profile_options or {}).get("input_shape"))
    distinct({"--output": output, "--html": html})
    target = plan("compare", output, fmt, redact)
    html = absolute(html)  # before a model's factory can os.chdir
    if html is not None:
        from graphprof_cli.profile_run import check_html_path

        check_html_path(html)
    if target is not None and target.to_stdout:
        console = Console(stderr=True, width=console.width)
    entries: list[graphprof.Profile | ModelFailure] = []
    with console.status(f"profiling {len(models)} models ...", spinner="dots"):
        for outcome in iter_compare(models, **dict(profile_options or {})):
            if outcome.profile is not None:
                entries.append(outcome.profile)
            elif isinstance(outcome.error, GraphprofError):
                if debug:
                    raise outcome.error
                entries.append(ModelFailure(outcome.spec, one_line(str(outcome.error), None), outcome.error.exit_code))
            else:  # a bug in graphprof on this model: reported in its row, the others still run
                if debug and outcome.error is not None:
                    raise outcome.error
                error = outcome.error
                entries.append(
                    ModelFailure(outcome.spec, f"internal error: {type(error).__name__}: {one_line(str(error), None)}", EXIT_INTERNAL)
                )
    rows = comparison_rows(entries, device)
    console.print(render_comparison(rows, device, show_errors=False))
    for row in rows:
        if row.error is not None:
            prefix = "" if row.error.startswith(row.model) else f"{row.model}: "
            print(f"graphprof: error: {prefix}{row.error}", file=sys.stderr)
    _write(rows, device, console, target, html, redact)
    failures = [entry for entry in entries if isinstance(entry, ModelFailure)]
    return failures[0].exit_code if failures else 0


def _write(rows: Any, device: Any, console: Console, target: Any, html: Path | None, redact: bool = False) -> None:
    """The comparison's file (``-``: standard output) and its HTML page, when asked for."""
    from graphprof.base.atomic import write_atomic
    from graphprof.render.sink import ComparisonResult
    from graphprof_cli.output import emit, page

    emit(ComparisonResult(tuple(rows), device), target, console)
    if html is not None:
        from graphprof.render.html import render_compare_html

        write_atomic(html, page(render_compare_html(rows), redact))
        console.print(f"wrote {html}")


def show_hardware(console: Console, name: str | None = None) -> None:
    """Print every device preset, or one (``name``) with a ridge point per precision."""
    from graphprof.devices.hardware import get_hardware, list_hardware
    from graphprof.render.hardware import render_hardware

    presets = list_hardware() if name is None else (get_hardware(name),)
    console.print(render_hardware(presets, detail=name is not None))

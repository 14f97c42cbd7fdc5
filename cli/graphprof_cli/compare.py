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

INTERNAL_ERROR_EXIT = 70


def _one_line(text: str) -> str:
    return " ".join(text.split())


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
) -> int:
    """Profile ``models``, print them side by side, write ``output`` if given; return the exit code.

    Each failed model's one-line error goes to stderr (``graphprof: error: MODEL: ...``); with
    ``output`` ``-`` the file goes to stdout and the table to stderr.
    """
    import graphprof
    from graphprof.errors import GraphprofError
    from graphprof.hardware import resolve_hardware
    from graphprof.render import (
        STDOUT,
        ModelFailure,
        check_output,
        comparison_rows,
        render_comparison,
        render_comparison_csv,
        render_comparison_json,
        write_atomic,
    )

    device = resolve_hardware(hardware, peak_tflops=peak_tflops, bandwidth_gbs=bandwidth_gbs)
    graphprof.parse_shape((profile_options or {}).get("input_shape"))
    chosen = check_output(output, fmt) if output is not None else None
    to_stdout = output is not None and str(output) == STDOUT
    if to_stdout:
        console = Console(stderr=True, width=console.width)
    entries: list[graphprof.Profile | ModelFailure] = []
    for name in models:
        try:
            with console.status(f"profiling {name} ...", spinner="dots"):
                entries.append(graphprof.profile_model(name, **dict(profile_options or {})))
        except GraphprofError as exc:
            if debug:
                raise
            entries.append(ModelFailure(name, _one_line(str(exc)), exc.exit_code))
        except Exception as exc:  # a bug in graphprof on this model: report it and go on with the others
            if debug:
                raise
            entries.append(
                ModelFailure(name, f"internal error: {type(exc).__name__}: {_one_line(str(exc))}", INTERNAL_ERROR_EXIT)
            )
    rows = comparison_rows(entries, device)
    console.print(render_comparison(rows, device, show_errors=False))
    for row in rows:
        if row.error is not None:
            prefix = "" if row.error.startswith(row.model) else f"{row.model}: "
            print(f"graphprof: error: {prefix}{row.error}", file=sys.stderr)
    if output is not None:
        text = render_comparison_json(rows, device) if chosen == "json" else render_comparison_csv(rows)
        if to_stdout:
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            write_atomic(output, text)
            console.print(f"wrote {output}")
    failures = [entry for entry in entries if isinstance(entry, ModelFailure)]
    return failures[0].exit_code if failures else 0


def show_hardware(console: Console, name: str | None = None) -> None:
    """Print every device preset, or one (``name``) with a ridge point per precision."""
    from graphprof.hardware import get_hardware, list_hardware
    from graphprof.render.table import render_hardware

    presets = list_hardware() if name is None else (get_hardware(name),)
    console.print(render_hardware(presets, detail=name is not None))

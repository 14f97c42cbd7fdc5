"""``graphprof validate``: cross-check graphprof's counts against fvcore (or torch's FlopCounterMode).

Parses options, calls :mod:`graphprof.crosscheck`, renders; nothing is computed here. Exit code 0 when
every model agrees within ``--tolerance`` once the explained differences are accounted for,
:data:`DISAGREE_EXIT` when one differs or fails; library errors map to their codes (``run_guarded``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from graphprof.base.choices import Reference
from graphprof.errors import EXIT_DISAGREE as DISAGREE_EXIT
from graphprof_cli.common import flag
from graphprof_cli.options import DebugOption, FormatOption, RedactOption, file_path

DEFAULT_TOLERANCE = 1.0  # graphprof.crosscheck.DEFAULT_TOLERANCE; the library is imported only when the command runs


def validate_command(
    model: Annotated[list[str] | None, typer.Option("--model", "-m", help="A model to check (repeatable; a comma list works too).")] = None,
    models: Annotated[str | None, typer.Option("--models", help="Comma-separated models: resnet18,resnet50,mobilenet_v2.")] = None,
    all_: Annotated[bool, flag("--all", help="Every model graphprof lists (graphprof --list); with --family, every model of it.")] = False,
    family: Annotated[str | None, typer.Option("--family", help="Every model of a family: classification, yolo, hf, detection...")] = None,
    against: Annotated[
        Reference,
        typer.Option("--against", help="fvcore: FlopCountAnalysis (1 flop per MAC); torch: FlopCounterMode (contractions, 2 per MAC)."),
    ] = Reference.FVCORE,
    tolerance: Annotated[
        float, typer.Option("--tolerance", min=0.0, help="Percent of the reference's count allowed after the explained differences.")
    ] = DEFAULT_TOLERANCE,
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="Check models in this many parallel processes.")] = 1,
    input_shape: Annotated[
        str | None, typer.Option("--input-shape", help="Input shape for every model: 1 3 224 224 or 1,3,224,224.")
    ] = None,
    batch_size: Annotated[int | None, typer.Option("--batch-size", "-b", help="Override the batch dimension.")] = None,
    verbose: Annotated[bool, flag("--verbose", "-v", help="Also show each model's per-op comparison.")] = False,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", parser=file_path, metavar="<path>", help="Also write the comparison to a .json or .csv file."),
    ] = None,
    fmt: FormatOption = None,
    redact: RedactOption = False,
    debug: DebugOption = False,
    seed_labels: Annotated[
        bool, typer.Option("--seed-labels", help="Seed 002's labels (its fvcore script passes this).", hidden=True)
    ] = False,
) -> None:
    """Cross-check graphprof against fvcore's FlopCountAnalysis (or --against torch), model by model."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from graphprof.crosscheck import CrossCheck, iter_crosschecks, select_models
    from graphprof.render.crosscheck import render_comparison, render_details
    from graphprof.render.sink import CrossCheckResult
    from graphprof_cli.common import console as _console
    from graphprof_cli.common import run_guarded
    from graphprof_cli.output import emit, plan

    names = run_guarded(lambda: select_models([*(model or []), *([models] if models else [])], family=family, all_models=all_), debug)
    target = run_guarded(lambda: plan("validate", output, fmt, redact), debug)  # a bad path fails now, not after the checks
    console = _console(stderr=target is not None and target.to_stdout)
    results: list[CrossCheck | None] = [None] * len(names)

    def work() -> None:
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
            task = progress.add_task(f"checking against {against.value}", total=len(names))

            def started(name: str) -> None:
                if jobs == 1:
                    progress.update(task, description=f"{against.value}: {name}")

            for index, result in iter_crosschecks(
                names, against=against.value, jobs=jobs, input_shape=input_shape, batch_size=batch_size, on_start=started
            ):
                results[index] = result
                progress.update(task, advance=1, description=f"{against.value}: {result.model} {result.status(tolerance).value}")

    run_guarded(work, debug)
    done = [r for r in results if r is not None]
    labels = None
    if seed_labels:
        from graphprof.compat.seed002 import COMPARISON_LABELS as labels
    console.print(render_comparison(done, tolerance=tolerance, labels=labels))
    if verbose:
        for result in done:
            console.print(render_details(result))
    emit(CrossCheckResult(tuple(done), tolerance), target, console, debug)
    if not all(r.agrees(tolerance) for r in done):
        raise typer.Exit(DISAGREE_EXIT)

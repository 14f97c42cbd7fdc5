"""``graphprof partition``: split a model across devices; parses options, calls one library function, renders.

graphprof partition --model hf:llama-3-8b --devices orin-agx:2,rtx4090:1 --dtype float16
graphprof partition --model resnet50 --devices cpu:2 --objective throughput --run
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from graphprof.base.choices import Objective
from graphprof_cli.common import flag
from graphprof_cli.options import InputShapeOption, RedactOption, file_path


def partition_command(
    model: Annotated[str, typer.Option("--model", "-m", help="The model: resnet50, vit_b_16, hf:llama, hf:llama-3-8b.")],
    devices: Annotated[
        str,
        typer.Option(
            "--devices", "-d", help="Devices: orin-agx:2,rtx4090:1 (presets), cpu:3 (this machine), KIND:N@GB, NAME=TFLOPS/GBPS:N@GB."
        ),
    ],
    objective: Annotated[
        Objective, typer.Option("--objective", help="latency: one request; throughput: pipelined micro-batches.")
    ] = Objective.LATENCY,
    link: Annotated[
        list[str] | None,
        typer.Option(
            "--link",
            metavar="LINK",
            help="Links: GBPS or GBPS/MS for every pair (default 1/1: 1 GB/s, 1 ms), A~B=GBPS/MS for one pair of kinds. Repeatable.",
        ),
    ] = None,
    batch_size: Annotated[int | None, typer.Option("--batch-size", "-b", help="Micro-batch size the costs are for.")] = None,
    input_shape: InputShapeOption = None,
    dtype: Annotated[str | None, typer.Option("--dtype", help="Count as this dtype: float32, float16, bfloat16.")] = None,
    kv_len: Annotated[
        int | None, typer.Option("--kv-len", help="KV cache positions per sample (default: the input length; 0: none).")
    ] = None,
    threads: Annotated[int, typer.Option("--threads", help="Threads per cpu process (measuring and --run).")] = 1,
    run: Annotated[bool, flag("--run", help="Run the plan (and the equal-layer split) on local gloo processes, one per stage.")] = False,
    micro_batches: Annotated[int, typer.Option("--micro-batches", help="Micro-batches per step of --run.")] = 4,
    iters: Annotated[int, typer.Option("--iters", help="Timed steps of --run.")] = 5,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", parser=file_path, metavar="<path>", help="Also write the plan (and runs) as JSON.")
    ] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="Draw the stages along the model: partition.png (.svg, .pdf).")] = None,
    redact: RedactOption = False,
    debug: Annotated[bool, flag("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Split a model across devices (exact dynamic program over its costed module graph); --run proves it."""
    from graphprof.base.atomic import check_path, write_atomic
    from graphprof.errors import OutputError
    from graphprof.partition.report import partition_report
    from graphprof.render.partition import render_plan, render_plan_plot, render_runs
    from graphprof.render.plots import PLOT_FORMATS, require_matplotlib
    from graphprof_cli.common import console as make_console
    from graphprof_cli.common import run_guarded
    from graphprof_cli.output import absolute, distinct, emit, plan

    def checked() -> tuple[Any, Path | None]:  # before any work: the picture's kind, both paths, made absolute
        distinct({"--output": output, "--plot": plot})
        if plot is not None:
            require_matplotlib()
            if plot.suffix.lstrip(".").lower() not in PLOT_FORMATS:
                raise OutputError(f"cannot draw {str(plot)!r}: the picture's file must end in {', '.join('.' + f for f in PLOT_FORMATS)}")
            check_path(plot)
        return plan("partition", output, redact=redact), absolute(plot)

    target, drawn = run_guarded(checked, debug)
    console = make_console(stderr=target is not None and target.to_stdout)

    def work() -> Any:
        with console.status(f"planning {model} on {devices} ...", spinner="dots"):
            return partition_report(
                model, devices, objective=objective, links=link or (), batch_size=batch_size, dtype=dtype,
                kv_len=kv_len, threads=threads, run=run, micro_batches=micro_batches, run_iters=iters,
                **({} if input_shape is None else {"input_shape": input_shape}),
            )  # fmt: skip

    report = run_guarded(work, debug)
    console.print(render_plan(report.plan))
    if report.runs:
        console.print(render_runs(report.runs))
    emit(report, target, console, debug)
    if drawn is not None:
        fmt = drawn.suffix.lstrip(".").lower()
        run_guarded(lambda: write_atomic(drawn, render_plan_plot(report.plan, fmt=fmt)), debug)
        console.print(f"wrote {plot}")

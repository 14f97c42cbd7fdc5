"""``graphprof``: parse options, call the library, render, map errors to exit codes.

Nothing here computes anything: every option maps onto an argument of :func:`graphprof.profile_model`,
:func:`graphprof.hardware.resolve_hardware`, :func:`graphprof.roofline.classify` or a renderer. Errors
of the :class:`graphprof.GraphprofError` family become one line on stderr and their exit code; anything
else is a bug and says so (``--debug`` shows the traceback).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from graphprof.capture import Capture

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    help="graphprof: what a PyTorch model costs (params, MACs, FLOPs, bytes, shapes) per layer, on a dry run.",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)

INTERNAL_ERROR_EXIT = 70
#: Width used when stdout is not a terminal (pipes, files, tests): the report is laid out for it.
PIPE_WIDTH = 100
T = TypeVar("T")


class ModeChoice(str, Enum):
    eval = "eval"
    train = "train"


class FormatChoice(str, Enum):
    json = "json"
    csv = "csv"


# ---- options shared by the profiling command and `compare` -------------------------------------------
InputShapeOption = Annotated[str | None, typer.Option("--input-shape", help="Input shape: 1 3 384 384 or 1,3,384,384.")]
BatchSizeOption = Annotated[int | None, typer.Option("--batch-size", "-b", help="Override the batch dimension.")]
DtypeOption = Annotated[str | None, typer.Option("--dtype", help="Count as this dtype: float32, float16, bfloat16.")]
ModeOption = Annotated[ModeChoice, typer.Option("--mode", help="eval: inference; train: forward + backward.")]
CaptureOption = Annotated[
    Capture,
    typer.Option("--capture", help="Graph capture: auto (fx, then eager), fx, dynamo or eager."),
]
HardwareOption = Annotated[
    str | None, typer.Option("--hardware", help="Device preset for the roofline (see `graphprof hardware`).")
]
PeakOption = Annotated[
    float | None, typer.Option("--peak-tflops", help="Custom device: peak TFLOP/s (or override the preset's).")
]
BandwidthOption = Annotated[
    float | None,
    typer.Option("--bandwidth-gbs", help="Custom device: memory bandwidth in GB/s (or override the preset's)."),
]
OutputOption = Annotated[Path | None, typer.Option("--output", "-o", help="Also write a .json or .csv file.")]
FormatOption = Annotated[
    FormatChoice | None, typer.Option("--format", help="Format of --output (default: from its suffix).")
]
DebugOption = Annotated[bool, typer.Option("--debug", help="Show tracebacks.")]


def _console() -> Console:
    return Console(width=None if sys.stdout.isatty() else PIPE_WIDTH)


def _fail(message: str, code: int) -> None:
    typer.echo(f"graphprof: error: {message}", err=True)
    raise typer.Exit(code)


def run_guarded(fn: Callable[[], T], debug: bool = False) -> T:
    """Call ``fn``; map library errors (and bugs) to one line on stderr and an exit code."""
    from graphprof.errors import GraphprofError

    try:
        return fn()
    except typer.Exit:
        raise
    except GraphprofError as exc:
        if debug:
            raise
        _fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except Exception as exc:  # a bug in graphprof, not the user's mistake
        if debug:
            raise
        _fail(
            f"internal error: {type(exc).__name__}: {exc} (run again with --debug for the traceback)",
            INTERNAL_ERROR_EXIT,
        )
    raise AssertionError("unreachable")


def _list_models(filter_text: str | None) -> None:
    from graphprof.models import list_models

    infos = run_guarded(lambda: list_models(filter_text))
    table = Table(
        title=f"{len(infos)} models" + (f" matching {filter_text!r}" if filter_text else ""), title_justify="left"
    )
    table.add_column("Model", no_wrap=True)
    table.add_column("Family")
    table.add_column("Default input")
    for info in infos:
        table.add_row(info.name, info.family, info.default_input)
    _console().print(table)


@app.callback(invoke_without_command=True)
def profile(
    ctx: typer.Context,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="torchvision name, YOLO yaml/.pt, hf:llama, or package.module:factory."),
    ] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the available models and exit.")] = False,
    filter_: Annotated[
        str | None, typer.Option("--filter", help="With --list: only models whose name or family contains this.")
    ] = None,
    input_shape: InputShapeOption = None,
    batch_size: BatchSizeOption = None,
    dtype: DtypeOption = None,
    mode: ModeOption = ModeChoice.eval,
    capture: CaptureOption = Capture.AUTO,
    proposals: Annotated[
        int | None,
        typer.Option("--proposals", min=1, help="Two-stage detectors: proposals per image (default: the model's maximum)."),
    ] = None,
    showshape: Annotated[bool, typer.Option("--showshape", help="Show output shapes.")] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Unfold the whole tree; add per-layer and aten-op tables.")
    ] = False,
    depth: Annotated[
        int | None, typer.Option("--depth", min=0, help="Fold the module tree at this depth (default: what fits).")
    ] = None,
    top: Annotated[int, typer.Option("--top", min=0, help="List this many layers by FLOPs (0: none).")] = 10,
    hardware: HardwareOption = None,
    peak_tflops: PeakOption = None,
    bandwidth_gbs: BandwidthOption = None,
    output: OutputOption = None,
    fmt: FormatOption = None,
    plot: Annotated[
        list[str] | None,
        typer.Option(
            "--plot", help="Write a chart: roofline.png, layers.png, or KIND=PATH (repeatable; needs matplotlib)."
        ),
    ] = None,
    debug: DebugOption = False,
) -> None:
    """Profile a model: graphprof --model resnet18 [--hardware h100] [--output p.json] [--plot roofline.png]."""
    if ctx.invoked_subcommand is not None:
        return
    if list_:
        _list_models(filter_)
        return
    if model is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)

    import graphprof
    from graphprof.hardware import resolve_hardware
    from graphprof.render import output_format, parse_plot_spec, render_report, write_output, write_plot
    from graphprof.render.plots import require_matplotlib
    from graphprof.roofline import classify

    console = _console()

    def work() -> Any:
        # Everything that can be checked without the model is checked first, so a typo costs no profiling.
        device = resolve_hardware(hardware, peak_tflops=peak_tflops, bandwidth_gbs=bandwidth_gbs)
        if output is not None:
            output_format(output, fmt.value if fmt else None)
        for spec in plot or []:
            parse_plot_spec(spec)
        if plot:
            require_matplotlib()
        with console.status(f"profiling {model} ...", spinner="dots"):
            result = graphprof.profile_model(
                model,
                input_shape=input_shape,
                batch_size=batch_size,
                dtype=dtype,
                mode=mode.value,
                methods=capture.methods,
                proposals=proposals,
            )
        return result, classify(result, device)

    result, roofline = run_guarded(work, debug)
    console.print(render_report(result, roofline, show_shapes=showshape, verbose=verbose, depth=depth, top=top))
    if output is not None:
        run_guarded(lambda: write_output(result, output, fmt.value if fmt else None, roofline), debug)
        console.print(f"wrote {output}")
    for spec in plot or []:
        path = run_guarded(lambda spec=spec: write_plot(result, spec, roofline), debug)
        console.print(f"wrote {path}")


@app.command("list")
def list_command(
    filter_: Annotated[str | None, typer.Option("--filter", help="Substring of name or family.")] = None,
) -> None:
    """List the available models (same as --list)."""
    _list_models(filter_)


@app.command("compare")
def compare_command(
    models: Annotated[list[str], typer.Argument(help="Two or more models, named as for --model.")],
    input_shape: InputShapeOption = None,
    batch_size: BatchSizeOption = None,
    dtype: DtypeOption = None,
    mode: ModeOption = ModeChoice.eval,
    capture: CaptureOption = Capture.AUTO,
    hardware: HardwareOption = None,
    peak_tflops: PeakOption = None,
    bandwidth_gbs: BandwidthOption = None,
    output: OutputOption = None,
    fmt: FormatOption = None,
    debug: DebugOption = False,
) -> None:
    """Compare models side by side: graphprof compare resnet50 efficientnet_b0 [--hardware l4]."""
    from graphprof_cli.compare import run_compare

    code = run_guarded(
        lambda: run_compare(
            models,
            console=_console(),
            hardware=hardware,
            peak_tflops=peak_tflops,
            bandwidth_gbs=bandwidth_gbs,
            output=output,
            fmt=fmt.value if fmt else None,
            debug=debug,
            profile_options={
                "input_shape": input_shape,
                "batch_size": batch_size,
                "dtype": dtype,
                "mode": mode.value,
                "methods": capture.methods,
            },
        ),
        debug,
    )
    if code:
        raise typer.Exit(code)


@app.command("hardware")
def hardware_command(
    name: Annotated[str | None, typer.Argument(help="Show one preset in full (default: list them all).")] = None,
) -> None:
    """List the device presets for --hardware: peak TFLOP/s per dtype, bandwidth, ridge point, source."""
    from graphprof_cli.compare import show_hardware

    run_guarded(lambda: show_hardware(_console(), name))


def _register_commands() -> None:
    """Subcommands that live in their own modules (their heavy imports stay inside them)."""
    from graphprof_cli.validate import validate_command

    app.command("validate")(validate_command)


_register_commands()


def join_input_shape(argv: Sequence[str]) -> list[str]:
    """Let ``--input-shape 1 3 384 384`` through Click, which takes one value per option.

    The integers (or comma lists) that follow ``--input-shape`` are joined into one comma list.
    """
    out: list[str] = []
    i = 0
    argv = list(argv)
    while i < len(argv):
        arg = argv[i]
        if arg == "--input-shape":
            parts = []
            i += 1
            while i < len(argv) and argv[i].replace(",", "").replace("x", "").isdigit():
                parts.append(argv[i])
                i += 1
            out.append(arg)
            if parts:
                out.append(",".join(parts))
            continue
        out.append(arg)
        i += 1
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    args = join_input_shape(sys.argv[1:] if argv is None else argv)
    app(args=args, prog_name="graphprof")


if __name__ == "__main__":
    main()

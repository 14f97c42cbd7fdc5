"""``graphprof``: parse options, call the library, render, map errors to exit codes.

Nothing here computes anything: every option maps onto an argument of :func:`graphprof.profile_model`,
:func:`graphprof.hardware.resolve_hardware`, :func:`graphprof.roofline.classify` or a renderer. Errors
of the :class:`graphprof.GraphprofError` family become one line on stderr and their exit code; anything
else is a bug and says so (``--debug`` shows the traceback).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from graphprof import __version__
from graphprof.errors import EXIT_CODES
from graphprof_cli.common import Command, Group, flag, run_guarded
from graphprof_cli.common import console as _make_console

app = typer.Typer(
    cls=Group,
    add_completion=False,
    no_args_is_help=False,
    help="graphprof: what a PyTorch model costs (params, MACs, FLOPs, bytes, shapes) per layer, on a dry run.",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    epilog="Exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES.items()),
)


class ModeChoice(str, Enum):
    eval = "eval"
    train = "train"


class CaptureChoice(str, Enum):
    """The values of :class:`graphprof.Capture` (kept here so that ``--help`` imports no torch)."""

    auto = "auto"
    fx = "fx"
    dynamo = "dynamo"
    eager = "eager"

    @property
    def methods(self) -> tuple[str, ...] | None:
        from graphprof.capture import Capture

        return Capture(self.value).methods


class FormatChoice(str, Enum):
    json = "json"
    csv = "csv"


# ---- options shared by the profiling command and `compare` -------------------------------------------
InputShapeOption = Annotated[str | None, typer.Option("--input-shape", help="Input shape: 1 3 384 384 or 1,3,384,384.")]
BatchSizeOption = Annotated[int | None, typer.Option("--batch-size", "-b", help="Override the batch dimension.")]
DtypeOption = Annotated[str | None, typer.Option("--dtype", help="Count as this dtype: float32, float16, bfloat16.")]
ModeOption = Annotated[ModeChoice, typer.Option("--mode", help="eval: inference; train: forward + backward.")]
CaptureOption = Annotated[
    CaptureChoice,
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
OutputOption = Annotated[
    Path | None, typer.Option("--output", "-o", help="Also write a .json or .csv file; - writes it to stdout.")
]
AllowUnsafeOption = Annotated[
    bool,
    flag(
        "--allow-unsafe-load",
        help="Let a model file run code as it loads: unpickle a .pt/.pth with weights_only=False (any Python it "
        "names runs) and let ultralytics eval a YOLO yaml's activation/layer fields. Only for files you trust.",
    ),
]
FormatOption = Annotated[
    FormatChoice | None, typer.Option("--format", help="Format of --output (default: from its suffix).")
]
DebugOption = Annotated[bool, flag("--debug", help="Show tracebacks.")]
WidthOption = Annotated[
    int | None,
    typer.Option("--width", min=40, help="Report width in columns (default: the terminal's, else COLUMNS, else 160)."),
]


def _console(width: int | None = None, *, stderr: bool = False) -> Any:
    return _make_console(width, stderr=stderr)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"graphprof {__version__}")
        raise typer.Exit(0)


def _list_models(filter_text: str | None) -> None:
    from rich.table import Table

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
        typer.Option("--model", "-m", help="torchvision name, YOLO yaml/.pt, hf:llama, timm:NAME, or package.module:factory."),
    ] = None,
    list_: Annotated[bool, flag("--list", help="List the available models and exit.")] = False,
    filter_: Annotated[
        str | None, typer.Option("--filter", help="With --list: only models whose name or family contains this.")
    ] = None,
    input_shape: InputShapeOption = None,
    batch_size: BatchSizeOption = None,
    dtype: DtypeOption = None,
    mode: ModeOption = ModeChoice.eval,
    capture: CaptureOption = CaptureChoice.auto,
    proposals: Annotated[
        int | None,
        typer.Option("--proposals", min=1, help="Two-stage detectors: proposals per image (default: the model's maximum)."),
    ] = None,
    showshape: Annotated[bool, flag("--showshape", help="Show output shapes.")] = False,
    verbose: Annotated[bool, flag("--verbose", "-v", help="Unfold the whole tree; add per-layer and aten-op tables.")] = False,
    depth: Annotated[
        int | None, typer.Option("--depth", min=0, help="Fold the module tree at this depth (default: what fits).")
    ] = None,
    top: Annotated[int, typer.Option("--top", min=0, help="List this many layers by FLOPs (0: none).")] = 10,
    hardware: HardwareOption = None,
    peak_tflops: PeakOption = None,
    bandwidth_gbs: BandwidthOption = None,
    output: OutputOption = None,
    fmt: FormatOption = None,
    allow_unsafe_load: AllowUnsafeOption = False,
    plot: Annotated[
        list[str] | None,
        typer.Option(
            "--plot", help="Write a chart: roofline.png, layers.png, or KIND=PATH (repeatable; needs matplotlib)."
        ),
    ] = None,
    width: WidthOption = None,
    measure: Annotated[bool, flag("--measure", help="Also run the model for real: times, memory, per-layer measured vs estimated.")] = False,
    device: Annotated[str | None, typer.Option("--device", help="With --measure: cpu or cuda (default: cuda when present).")] = None,
    iters: Annotated[int, typer.Option("--iters", help="With --measure: at most this many timed iterations (stops early once stable).")] = 50,
    warmup: Annotated[int, typer.Option("--warmup", help="With --measure: warm-up iterations, reported apart.")] = 5,
    trace: Annotated[Path | None, typer.Option("--trace", help="With --measure: write a Chrome trace per profiled forward into this directory.")] = None,
    optimizer: Annotated[str, typer.Option("--optimizer", help="With --measure --mode train: sgd or adamw.")] = "sgd",
    graph: Annotated[
        Path | None,
        typer.Option("--graph", help="Write the module/op graphs: .json, .dot, .svg, .png (Graphviz) or .txt."),
    ] = None,
    debug: DebugOption = False,
    version: Annotated[
        bool, typer.Option("--version", help="Show graphprof's version and exit.", metavar="", is_eager=True, callback=_version)
    ] = False,
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
    from graphprof.render import (
        STDOUT,
        check_output,
        parse_plot_spec,
        render_output,
        render_report,
        write_output,
        write_plot,
    )
    from graphprof.render.plots import require_matplotlib
    from graphprof.roofline import classify

    to_stdout = output is not None and str(output) == STDOUT
    console = _console(width, stderr=to_stdout)  # with --output -, stdout carries the file alone
    chosen: list[str] = []

    def work() -> Any:
        # Everything that can be checked without the model is checked first, so a typo costs no profiling.
        device_hw = resolve_hardware(hardware, peak_tflops=peak_tflops, bandwidth_gbs=bandwidth_gbs)
        graphprof.parse_shape(input_shape)
        if output is not None:
            chosen.append(check_output(output, fmt.value if fmt else None))
        for spec in plot or []:
            parse_plot_spec(spec)
        if plot:
            require_matplotlib()
        if graph is not None:
            from graphprof_cli.graphs import check_graph_path

            check_graph_path(graph)
        measuring = None
        if measure:  # measurement options and the device are checked before anything is built
            from graphprof_cli.measure import check_measure_options

            measuring = check_measure_options(device=device, iters=iters, warmup=warmup, optimizer=optimizer)
        # the target the costs are for: the device measured, else the hardware preset's kind
        target = "cuda" if measuring is not None and measuring.type == "cuda" else (device_hw.target if device_hw is not None else None)
        with console.status(f"profiling {model} ...", spinner="dots"):
            prepared = graphprof.prepare(
                model,
                input_shape=input_shape,
                batch_size=batch_size,
                dtype=dtype,
                mode=mode.value,
                methods=capture.methods,
                allow_unsafe_load=allow_unsafe_load,
                target=target,
                proposals=proposals,
            )
            result = prepared.profile()
        if measuring is not None:
            from graphprof_cli.measure import run_measure

            with console.status(f"measuring {model} on {measuring} ...", spinner="dots"):
                result, device_hw = run_measure(
                    prepared, result, hardware=device_hw, device=measuring, iters=iters, warmup=warmup, trace=trace, optimizer=optimizer
                )  # fmt: skip
        return prepared, result, classify(result, device_hw)

    prepared, result, roofline = run_guarded(work, debug)
    console.print(render_report(result, roofline, show_shapes=showshape, verbose=verbose, depth=depth, top=top))
    if result.measurement is not None:
        from graphprof.render.measured import render_measured

        console.print(render_measured(result, roofline))
    if to_stdout:
        sys.stdout.write(run_guarded(lambda: render_output(result, chosen[0], roofline), debug))
        sys.stdout.flush()
    elif output is not None:
        run_guarded(lambda: write_output(result, output, fmt.value if fmt else None, roofline), debug)
        console.print(f"wrote {output}")
    for spec in plot or []:
        path = run_guarded(lambda spec=spec: write_plot(result, spec, roofline), debug)
        console.print(f"wrote {path}")
    if graph is not None:
        from graphprof_cli.graphs import write_model_graph

        for path in run_guarded(lambda: write_model_graph(prepared, graph, depth=depth, hardware=roofline.hardware, measurement=result.measurement), debug):
            console.print(f"wrote {path}")


@app.command("list", cls=Command)
def list_command(
    filter_: Annotated[str | None, typer.Option("--filter", help="Substring of name or family.")] = None,
) -> None:
    """List the available models (same as --list)."""
    _list_models(filter_)


@app.command("compare", cls=Command)
def compare_command(
    models: Annotated[list[str], typer.Argument(help="Two or more models, named as for --model.")],
    input_shape: InputShapeOption = None,
    batch_size: BatchSizeOption = None,
    dtype: DtypeOption = None,
    mode: ModeOption = ModeChoice.eval,
    capture: CaptureOption = CaptureChoice.auto,
    hardware: HardwareOption = None,
    peak_tflops: PeakOption = None,
    bandwidth_gbs: BandwidthOption = None,
    output: OutputOption = None,
    fmt: FormatOption = None,
    width: WidthOption = None,
    allow_unsafe_load: AllowUnsafeOption = False,
    debug: DebugOption = False,
) -> None:
    """Compare models side by side: graphprof compare resnet50 efficientnet_b0 [--hardware l4]."""
    from graphprof_cli.compare import run_compare

    code = run_guarded(
        lambda: run_compare(
            models,
            console=_console(width),
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
                "allow_unsafe_load": allow_unsafe_load,
            },
        ),
        debug,
    )
    if code:
        raise typer.Exit(code)


@app.command("hardware", cls=Command)
def hardware_command(
    name: Annotated[str | None, typer.Argument(help="Show one preset in full (default: list them all).")] = None,
) -> None:
    """List the device presets for --hardware: peak TFLOP/s per dtype, bandwidth, ridge point, source."""
    from graphprof_cli.compare import show_hardware

    run_guarded(lambda: show_hardware(_console(), name))


def _register_commands() -> None:
    """Subcommands that live in their own modules (their heavy imports stay inside them)."""
    from graphprof_cli.calibrate import calibrate_command
    from graphprof_cli.sweep import sweep_command
    from graphprof_cli.trace import trace_command
    from graphprof_cli.validate import validate_command

    app.command("validate", cls=Command)(validate_command)
    app.command("sweep", cls=Command)(sweep_command)
    app.command("calibrate", cls=Command)(calibrate_command)
    app.command("trace", cls=Command)(trace_command)


_register_commands()


#: A token that starts like a number (``3``, ``-1``, ``1e12``, ``1,3,64,x64``): part of an --input-shape.
_SHAPE_TOKEN = re.compile(r"^[+-]?\d[\w.,+-]*$")
_SUBCOMMANDS = frozenset({"list", "compare", "hardware", "validate"})


def _is_option(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not _SHAPE_TOKEN.match(token)


def join_input_shape(argv: Sequence[str]) -> list[str]:
    """Let ``--input-shape 1 3 384 384`` through Click, which takes one value per option.

    The tokens that follow ``--input-shape`` up to the next option are joined into one comma list, so
    that a wrong one (``-1``, ``a``, ``1e12``) reaches :func:`graphprof.parse_shape`, whose error names
    the flag. After a subcommand whose arguments are positional (``compare a b``), only the first token
    and those that start like a number are taken.
    """
    out: list[str] = []
    i = 0
    argv = list(argv)
    while i < len(argv):
        arg = argv[i]
        if arg == "--input-shape":
            greedy = not any(token in _SUBCOMMANDS for token in out)
            parts: list[str] = []
            i += 1
            while i < len(argv) and not _is_option(argv[i]):
                if parts and not greedy and not _SHAPE_TOKEN.match(argv[i]):
                    break
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
    # torch.profiler's C++ side (Kineto) writes "profiler_start" and, with no GPU, "ERROR ...
    # gpuGetDeviceCount failed" lines to stderr on every profiled forward of --measure and --trace;
    # graphprof reports its own errors, so the CLI (its own process, not the library) quiets them
    # unless the user set a level. Read by Kineto when the first profiler starts.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    args = join_input_shape(sys.argv[1:] if argv is None else argv)
    app(args=args, prog_name="graphprof")


if __name__ == "__main__":
    main()

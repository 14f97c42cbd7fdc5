"""``graphprof``: parse options, call the library, render, map errors to exit codes.

Nothing here computes anything: every option maps onto an argument of :func:`graphprof.profile_model`,
:func:`graphprof.devices.hardware.resolve_hardware`, :func:`graphprof.cost.roofline.classify` or a renderer. Errors
of the :class:`graphprof.GraphprofError` family become one line on stderr and their exit code; anything
else is a bug and says so (``--debug`` shows the traceback).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from graphprof import __version__
from graphprof.base.atomic import sweep_pending
from graphprof.base.choices import Capture, Mode, Optimizer, WarmUp
from graphprof.base.collector import defer_full_collections
from graphprof.errors import EXIT_CODES
from graphprof_cli import options as opt
from graphprof_cli.common import Command, Group, flag, honour_min_width, run_guarded
from graphprof_cli.common import console as _make_console
from graphprof_cli.graph_options import AvgDegreeOption, EdgesOption, NodesOption, graph_estimate_command
from graphprof_cli.process import end_process

app = typer.Typer(
    cls=Group,
    add_completion=False,
    no_args_is_help=False,
    help="graphprof: what a PyTorch model costs (params, MACs, FLOPs, bytes, shapes) per layer, on a dry run.",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    epilog="Exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES.items()),
)


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
    table = Table(title=f"{len(infos)} models" + (f" matching {filter_text!r}" if filter_text else ""), title_justify="left")
    table.add_column("Model", no_wrap=True)
    table.add_column("Family")
    table.add_column("Default input")
    for info in infos:
        table.add_row(info.name, info.family, info.default_input)
    _console().print(table)


@app.callback(invoke_without_command=True)
def profile(
    ctx: typer.Context,
    model: opt.ModelOption = None,
    list_: Annotated[bool, flag("--list", help="List the available models and exit.")] = False,
    filter_: Annotated[str | None, typer.Option("--filter", help="With --list: only models whose name or family contains this.")] = None,
    input_shape: opt.InputShapeOption = None,
    batch_size: opt.BatchSizeOption = None,
    dtype: opt.DtypeOption = None,
    mode: opt.ModeOption = Mode.EVAL,
    capture: opt.CaptureOption = Capture.AUTO,
    proposals: Annotated[
        int | None, typer.Option("--proposals", min=1, help="Two-stage detectors: proposals per image (default: the model's maximum).")
    ] = None,
    showshape: Annotated[bool, flag("--showshape", help="Show output shapes.")] = False,
    verbose: Annotated[bool, flag("--verbose", "-v", help="Unfold the whole tree; add per-layer and aten-op tables.")] = False,
    depth: Annotated[int | None, typer.Option("--depth", min=0, help="Fold the module tree at this depth (default: what fits).")] = None,
    top: Annotated[int, typer.Option("--top", min=0, help="List this many layers by FLOPs (0: none).")] = 10,
    hardware: opt.HardwareOption = None,
    peak_tflops: opt.PeakOption = None,
    bandwidth_gbs: opt.BandwidthOption = None,
    output: opt.OutputOption = None,
    fmt: opt.FormatOption = None,
    allow_unsafe_load: opt.AllowUnsafeOption = False,
    plot: Annotated[
        list[str] | None,
        typer.Option("--plot", help="Write a chart: roofline.png, layers.png, or KIND=PATH (repeatable; needs matplotlib)."),
    ] = None,
    width: opt.WidthOption = None,
    measure: opt.MeasureOption = False,
    device: opt.DeviceOption = None,
    iters: opt.IterationsOption = 50,
    warmup: opt.WarmupOption = 5,
    trace: Annotated[
        Path | None, typer.Option("--trace", help="With --measure: write a Chrome trace per profiled forward into this directory.")
    ] = None,
    no_learn: Annotated[
        bool, flag("--no-learn", help="With --measure against --hardware local: do not add this run's op times to the local calibration.")
    ] = False,
    optimizer: opt.OptimizerOption = Optimizer.ADAMW,
    graph: Annotated[
        Path | None,
        typer.Option(
            "--graph",
            help="Write the graphs: .json or .txt (module and operator graphs); .dot, .svg, .png (Graphviz): the module graph drawn.",
        ),
    ] = None,
    fvcore: Annotated[
        bool, flag("--fvcore", help="Also count with fvcore's FlopCountAnalysis and print the cross-check (as `graphprof validate`) first.")
    ] = False,
    html_path: opt.HtmlOption = None,
    nodes: NodesOption = None,
    avg_degree: AvgDegreeOption = None,
    edges: EdgesOption = None,
    redact: opt.RedactOption = False,
    warm_up: opt.WarmUpOption = WarmUp.AUTO,
    export_onnx: opt.ExportOnnxOption = None,
    debug: opt.DebugOption = False,
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
    from dataclasses import replace

    from graphprof_cli.graph_options import graph_spec
    from graphprof_cli.profile_run import run_profile
    from graphprof_cli.request import ProfileRequest

    req = ProfileRequest.from_params(ctx.params)
    spec = run_guarded(lambda: graph_spec(req.model, req.nodes, req.avg_degree, req.edges), req.debug)
    run_profile(replace(req, model=spec or req.model))


app.command("graph-estimate", cls=Command)(graph_estimate_command)


@app.command("list", cls=Command)
def list_command(filter_: Annotated[str | None, typer.Option("--filter", help="Substring of name or family.")] = None) -> None:
    """List the available models (same as --list)."""
    _list_models(filter_)


@app.command("compare", cls=Command)
def compare_command(
    models: Annotated[list[str], typer.Argument(help="Two or more models, named as for --model.")],
    input_shape: opt.InputShapeOption = None,
    batch_size: opt.BatchSizeOption = None,
    dtype: opt.DtypeOption = None,
    mode: opt.ModeOption = Mode.EVAL,
    capture: opt.CaptureOption = Capture.AUTO,
    hardware: opt.HardwareOption = None,
    peak_tflops: opt.PeakOption = None,
    bandwidth_gbs: opt.BandwidthOption = None,
    output: opt.OutputOption = None,
    fmt: opt.FormatOption = None,
    width: opt.WidthOption = None,
    allow_unsafe_load: opt.AllowUnsafeOption = False,
    html_path: opt.HtmlOption = None,
    redact: opt.RedactOption = False,
    debug: opt.DebugOption = False,
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
            html=html_path,
            redact=redact,
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
def hardware_command(name: Annotated[str | None, typer.Argument(help="Show one preset in full (default: list them all).")] = None) -> None:
    """List the device presets for --hardware: peak TFLOP/s per dtype, bandwidth, ridge point, source."""
    from graphprof_cli.compare import show_hardware

    run_guarded(lambda: show_hardware(_console(), name))


def _register_commands() -> None:
    """Subcommands that live in their own modules (their heavy imports stay inside them)."""
    from graphprof_cli.calibrate import calibrate_command
    from graphprof_cli.fits import fits_command
    from graphprof_cli.generate import generate_command
    from graphprof_cli.partition import partition_command
    from graphprof_cli.shard import shard_command
    from graphprof_cli.sweep import sweep_command
    from graphprof_cli.trace import trace_command
    from graphprof_cli.validate import validate_command

    app.command("validate", cls=Command)(validate_command)
    app.command("sweep", cls=Command)(sweep_command)
    app.command("calibrate", cls=Command)(calibrate_command)
    app.command("partition", cls=Command)(partition_command)
    app.command("trace", cls=Command)(trace_command)
    app.command("generate", cls=Command)(generate_command)
    app.command("shard", cls=Command)(shard_command)
    app.command("fits", cls=Command)(fits_command)


_register_commands()


#: A token that starts like a number (``3``, ``-1``, ``1e12``, ``1,3,64,x64``): part of an --input-shape.
_SHAPE_TOKEN = re.compile(r"^[+-]?\d[\w.,+-]*$")


def _positional_commands() -> frozenset[str]:
    """The subcommands that take positional arguments (``compare A B``, ``shard fsdp:4``, ``validate``), read
    from the commands themselves: after one, ``--input-shape`` takes only tokens that start like a number."""
    commands = getattr(typer.main.get_command(app), "commands", {})
    return frozenset(name for name, command in commands.items() if any(p.param_type_name == "argument" for p in command.params))


def _is_option(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not _SHAPE_TOKEN.match(token)


def join_input_shape(argv: Sequence[str]) -> list[str]:
    """Let ``--input-shape 1 3 384 384`` through Click, which takes one value per option.

    The tokens that follow ``--input-shape`` up to the next option are joined into one comma list, so
    that a wrong one (``-1``, ``a``, ``1e12``) reaches :func:`graphprof.base.options.parse_shape`, whose error names
    the flag. After a subcommand whose arguments are positional (``compare a b``), only the first token
    and those that start like a number are taken.
    """
    out: list[str] = []
    i = 0
    argv = list(argv)
    positional = _positional_commands() if "--input-shape" in argv else frozenset()
    while i < len(argv):
        arg = argv[i]
        if arg == "--input-shape":
            greedy = not any(token in positional for token in out)
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


#: Options of the main command that became commands of their own: the option -> the command, and how.
MOVED_OPTIONS = {
    "--generate": "generate", "--prompt-len": "generate", "--new-tokens": "generate", "--kv-dtype": "generate",
    "--cache": "generate", "--shard": "shard", "--fits": "fits", "--memory-budget": "fits",
}  # fmt: skip
_HOW = {
    "generate": "graphprof generate --model M [--prompt-len 1024] [--new-tokens 256] (see graphprof generate --help)",
    "shard": "graphprof shard --model M fsdp:64 (a training step; see graphprof shard --help)",
    "fits": "graphprof fits --model M [--hardware h100] [--memory-budget 40GB] (see graphprof fits --help)",
}


#: Options of the main command renamed so that one name means one thing: the old spelling -> the new.
#: ``--warm-up always`` (the capture's warm-up) sat beside ``--warmup N`` (measured warm-up iterations).
RENAMED_OPTIONS = {"--warm-up": "--capture-warmup"}


def moved_option(argv: Sequence[str]) -> str | None:
    """The one-line pointer for a main-command option that became a command of its own (``--generate``,
    ``--shard``) or was renamed (``--warm-up``), or ``None``. Only the main command is checked: a
    subcommand's own options are its own."""
    if argv and not argv[0].startswith("-"):
        return None  # a subcommand: `graphprof generate --cache dynamic` is that command's option
    for token in argv:
        option = token.split("=", 1)[0]
        if option in RENAMED_OPTIONS:
            return f"{option} is now {RENAMED_OPTIONS[option]} (the one real forward before the capture: always, auto or never)"
        if option in MOVED_OPTIONS:
            command = MOVED_OPTIONS[option]
            return f"{option} is now part of a command of its own: {_HOW[command]}"
    return None


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    # torch.profiler's C++ side (Kineto) writes "profiler_start" and, with no GPU, "ERROR ...
    # gpuGetDeviceCount failed" lines to stderr on every profiled forward of --measure and --trace;
    # graphprof reports its own errors, so the CLI (its own process, not the library) quiets them
    # unless the user set a level. Read by Kineto when the first profiler starts.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    for stream in (sys.stdout, sys.stderr):  # a name the terminal's encoding cannot show is escaped, not a crash
        reconfigure = getattr(stream, "reconfigure", None)
        if callable(reconfigure):
            reconfigure(errors="backslashreplace")
    honour_min_width()  # --help too: a COLUMNS under the reports' floor is not honoured
    sweep_pending()  # a killed writer's temporary files, wherever it wrote (graphprof.base.atomic)
    args = join_input_shape(sys.argv[1:] if argv is None else argv)
    moved = moved_option(args)
    if moved is not None:
        typer.echo(f"graphprof: error: {moved}", err=True)
        raise SystemExit(2)
    app(args=args, prog_name="graphprof")


def run() -> None:
    """The ``graphprof`` console script: :func:`main` in a process of its own, which ends as soon as the
    command is done (:func:`graphprof_cli.process.end_process`: output flushed, ``atexit`` handlers run, no
    interpreter teardown). Python's full collections wait until the first library call
    (:func:`graphprof.base.collector.defer_full_collections`)."""
    defer_full_collections()
    try:
        main()
    except SystemExit as exc:
        end_process(exc.code)
    end_process(0)


if __name__ == "__main__":
    run()

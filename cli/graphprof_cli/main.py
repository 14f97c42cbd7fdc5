"""``graphprof``: parse options, call the library, render, map errors to exit codes.

Nothing here computes anything: every option maps onto an argument of :func:`graphprof.profile_model`
or of a renderer. Errors of the :class:`graphprof.GraphprofError` family become one line on stderr and
their exit code; anything else is a bug and says so (``--debug`` shows the traceback).
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

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    help="graphprof: what a PyTorch model costs (params, MACs, FLOPs, bytes, shapes) per layer, on a dry run.",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)

INTERNAL_ERROR_EXIT = 70
T = TypeVar("T")


class ModeChoice(str, Enum):
    eval = "eval"
    train = "train"


class FormatChoice(str, Enum):
    json = "json"
    csv = "csv"


def _console() -> Console:
    return Console(width=None if sys.stdout.isatty() else 120)


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
        _fail(f"internal error: {type(exc).__name__}: {exc} (run again with --debug for the traceback)", INTERNAL_ERROR_EXIT)
    raise AssertionError("unreachable")


def _list_models(filter_text: str | None) -> None:
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
    model: Annotated[str | None, typer.Option("--model", "-m", help="torchvision name, YOLO yaml/.pt, hf:llama, or package.module:factory.")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the available models and exit.")] = False,
    filter_: Annotated[str | None, typer.Option("--filter", help="With --list: only models whose name or family contains this.")] = None,
    input_shape: Annotated[str | None, typer.Option("--input-shape", help="Input shape: 1 3 384 384 or 1,3,384,384.")] = None,
    batch_size: Annotated[int | None, typer.Option("--batch-size", "-b", help="Override the batch dimension.")] = None,
    dtype: Annotated[str | None, typer.Option("--dtype", help="Count as this dtype: float32, float16, bfloat16.")] = None,
    mode: Annotated[ModeChoice, typer.Option("--mode", help="eval: inference; train: forward + backward.")] = ModeChoice.eval,
    showshape: Annotated[bool, typer.Option("--showshape", help="Show output shapes.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show every graph node, zero-cost ones too.")] = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Also write the profile to a .json or .csv file.")] = None,
    fmt: Annotated[FormatChoice | None, typer.Option("--format", help="Format of --output (default: from its suffix).")] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    """Profile a model: graphprof --model resnet18."""
    if ctx.invoked_subcommand is not None:
        return
    if list_:
        _list_models(filter_)
        return
    if model is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)

    import graphprof
    from graphprof.render import render_report, write_output

    console = _console()

    def work() -> Any:
        with console.status(f"profiling {model} ...", spinner="dots"):
            profile = graphprof.profile_model(
                model, input_shape=input_shape, batch_size=batch_size, dtype=dtype, mode=mode.value
            )
        if output is not None:
            write_output(profile, output, fmt.value if fmt else None)
        return profile

    result = run_guarded(work, debug)
    console.print(render_report(result, show_shapes=showshape, verbose=verbose))
    if output is not None:
        console.print(f"wrote {output}")


@app.command("list")
def list_command(filter_: Annotated[str | None, typer.Option("--filter", help="Substring of name or family.")] = None) -> None:
    """List the available models (same as --list)."""
    _list_models(filter_)


def _register_commands() -> None:
    """Subcommands that live in their own modules (their heavy imports stay inside them)."""
    from graphprof_cli.compare import compare_command, hardware_command
    from graphprof_cli.validate import validate_command

    app.command("compare")(compare_command)
    app.command("hardware")(hardware_command)
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

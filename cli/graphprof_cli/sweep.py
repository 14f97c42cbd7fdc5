"""``graphprof sweep``: profile one model along one axis; parses options, calls :func:`graphprof.sweep`, renders.

Exactly one of ``--batch``, ``--resolution``, ``--seq-len``, ``--layers`` or ``--set key=v1,v2`` names
the axis; its values are a comma list or a range (``1:256:x2``, ``128:512:+128``). Bad values, an axis
the model lacks and a factory without the keyword are one line on stderr (exit 2) before any work.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from graphprof.base.choices import Mode, SweepAxis
from graphprof_cli import options as opt
from graphprof_cli.common import console as make_console
from graphprof_cli.common import run_guarded
from graphprof_cli.graph_options import AvgDegreeOption, EdgesOption, NodesOption, is_graph_model, run_graph_sweep


def _axis(
    batch: str | None, resolution: str | None, seq_len: str | None, layers: str | None, set_: str | None
) -> tuple[SweepAxis, str, str | None]:
    """``(axis, values text, factory keyword)`` from the one axis option given."""
    from graphprof.errors import InvalidInputError

    options = (
        (SweepAxis.BATCH, batch),
        (SweepAxis.RESOLUTION, resolution),
        (SweepAxis.SEQ_LEN, seq_len),
        (SweepAxis.LAYERS, layers),
        (SweepAxis.SET, set_),
    )
    given = [(axis, text) for axis, text in options if text is not None]
    if len(given) != 1:
        named = ", ".join(f"--{n}" for n, _ in given) or "none"
        raise InvalidInputError(f"give exactly one axis: --batch, --resolution, --seq-len, --layers or --set (got {named})")
    axis, text = given[0]
    if axis is not SweepAxis.SET:
        return axis, text, None
    key, sep, values = text.partition("=")
    if not sep or not key.strip():
        raise InvalidInputError(f"--set takes key=v1,v2,... (a keyword of the factory), got {text!r}")
    return axis, values, key.strip()


def _graph_sweep_takes(given: dict[str, Any]) -> None:
    """Refuse an option a graph sweep (``--nodes``, a ``pyg:`` model) would ignore, rather than ignore it."""
    from graphprof.errors import InvalidInputError

    ignored = [option for option, value in given.items() if value is not None]
    if ignored:
        raise InvalidInputError(f"a graph sweep (--nodes or --layers of a pyg: model, eval mode, JSON) does not take {', '.join(ignored)}")


def sweep_command(
    model: Annotated[str, typer.Option("--model", "-m", help="The model: resnet50, hf:llama, yolov8n, pkg.mod:factory.")],
    batch: Annotated[str | None, typer.Option("--batch", help="Batch sizes: 1,2,4 or 1:256:x2.")] = None,
    resolution: Annotated[str | None, typer.Option("--resolution", help="Image sides (H = W): 224,320,448 (images and video).")] = None,
    seq_len: Annotated[str | None, typer.Option("--seq-len", help="Sequence lengths: 128:8192:x2 (transformers).")] = None,
    layers: Annotated[
        str | None, typer.Option("--layers", help="Depths: 2,4,8,16 (hf: num_hidden_layers; a factory's num_layers).")
    ] = None,
    set_: Annotated[str | None, typer.Option("--set", help="A factory keyword and its values: width=32,64,128.")] = None,
    measure: opt.MeasureOption = False,
    device: opt.DeviceOption = None,
    hardware: opt.HardwareOption = None,
    input_shape: opt.InputShapeOption = None,
    batch_size: opt.BatchSizeOption = None,
    dtype: opt.DtypeOption = None,
    mode: opt.ModeOption = Mode.EVAL,
    plot: Annotated[Path | None, typer.Option("--plot", help="Draw the metrics against the axis (log-log): sweep.png.")] = None,
    output: opt.OutputOption = None,
    fmt: opt.FormatOption = None,
    nodes: NodesOption = None,
    avg_degree: AvgDegreeOption = None,
    edges: EdgesOption = None,
    html_path: opt.HtmlOption = None,
    redact: opt.RedactOption = False,
    debug: opt.DebugOption = False,
) -> None:
    """Profile one model along one axis, with growth fits: graphprof sweep --model resnet50 --batch 1:128:x2."""
    if nodes is not None or is_graph_model(model):  # graph models: per-component counts and fits
        given = {"--batch": batch, "--resolution": resolution, "--seq-len": seq_len, "--set": set_, "--input-shape": input_shape,
                 "--batch-size": batch_size, "--dtype": dtype, "--mode": None if mode == Mode.EVAL else mode, "--plot": plot,
                 "--html": html_path, "--format": fmt, "--device": device}  # fmt: skip
        run_guarded(lambda: _graph_sweep_takes(given), debug)
        run_graph_sweep(
            model,
            nodes=nodes,
            layers=layers,
            avg_degree=avg_degree,
            edges=edges,
            measure=measure,
            output=output,
            debug=debug,
            redact=redact,
        )
        return

    from graphprof.render.sweep import check_sweep_plot
    from graphprof.scaling import check_sweep, parse_values
    from graphprof_cli.output import absolute, distinct, plan

    def checked() -> tuple[str, list[float], str | None, Any]:
        axis, text, key = _axis(batch, resolution, seq_len, layers, set_)
        values = parse_values(text, f"--{axis}")
        check_sweep(model, axis, values, key)  # an axis the model lacks fails here, before the progress bar
        distinct({"--output": output, "--plot": plot, "--html": html_path})
        target = plan("sweep", output, fmt, redact)  # a bad path fails now, not after the sweep
        if plot is not None:
            check_sweep_plot(plot)  # its suffix, matplotlib, a writable folder: before the sweep, not after
        if html_path is not None:
            from graphprof_cli.profile_run import check_html_path

            check_html_path(html_path)
        return axis, values, key, target

    axis, values, key, target = run_guarded(checked, debug)
    options = {
        "key": key, "measure": measure, "device": device, "hardware": hardware, "input_shape": input_shape,
        "batch_size": batch_size, "dtype": dtype, "mode": mode.value,
    }  # fmt: skip
    show = functools.partial(_show, target=target, plot=absolute(plot), html=absolute(html_path), debug=debug, redact=redact)
    show(run_guarded(lambda: _run_sweep(model, axis, values, options, show), debug))


def _run_sweep(model: str, axis: str, values: list[float], options: dict[str, Any], show: Callable[[Any], None]) -> Any:
    """The sweep with a progress bar on stderr; the points already done are shown before an error ends it."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from graphprof.errors import GraphprofError
    from graphprof.scaling import sweep

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    try:
        with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
            task = progress.add_task(f"preparing {model}", total=len(values))

            def on_point(index: int, value: float, row: object) -> None:
                if row is None:
                    progress.update(task, description=f"{options['key'] or axis} {value}")
                else:
                    progress.update(task, advance=1)

            return sweep(model, axis, values, on_point=on_point, **options)
    except GraphprofError as exc:
        partial = getattr(exc, "partial", None)
        if partial is not None and partial.rows:
            show(partial)
        raise


def _show(result: Any, *, target: Any, plot: Path | None, html: Path | None, debug: bool, redact: bool = False) -> None:
    """The sweep's table, then its file (``-``: standard output, the table on standard error) and chart."""
    from graphprof.render.sweep import render_sweep, write_sweep_plot
    from graphprof_cli.output import emit, page

    console = make_console(stderr=target is not None and target.to_stdout)
    console.print(render_sweep(result))
    emit(result, target, console, debug)
    if plot is not None:
        run_guarded(lambda: write_sweep_plot(result, plot), debug)
        console.print(f"wrote {plot}")
    if html is not None:
        from graphprof.base.atomic import write_atomic
        from graphprof.render.html import render_sweep_html

        run_guarded(lambda: write_atomic(html, page(render_sweep_html(result), redact)), debug)
        console.print(f"wrote {html}")

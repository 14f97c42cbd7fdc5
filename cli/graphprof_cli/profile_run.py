"""``graphprof --model X``: the main command's work, from its parsed options (:class:`ProfileRequest`).

Checks every option that needs no model first (a typo costs no profiling), then calls the library once
(:func:`graphprof.prepare` and ``.profile()``; ``.measure()`` with ``--measure``), then renders.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from graphprof_cli.common import console as make_console
from graphprof_cli.common import run_guarded
from graphprof_cli.request import ProfileRequest

if TYPE_CHECKING:
    import torch
    from rich.console import Console

    from graphprof.cost.result import Profile
    from graphprof.devices.hardware import Hardware
    from graphprof.graph.model import Graph
    from graphprof.prepared import PreparedModel
    from graphprof.render.sink import OutputTarget

__all__ = ["run_profile", "check_html_path"]


@dataclasses.dataclass(frozen=True)
class _Checked:
    """What the options say before any model is built: the hardware of the estimate, the device to measure
    on (``None`` without ``--measure``) and where ``--output`` goes."""

    hardware: Hardware | None
    measuring: torch.device | None
    output: OutputTarget | None


def _resolved(req: ProfileRequest) -> ProfileRequest:
    """Every path fixed against the starting folder, before a model's factory can ``os.chdir``; two options
    naming one file are refused (exit 2)."""
    from graphprof.render import parse_plot_spec
    from graphprof_cli.output import absolute, distinct

    plots = tuple(f"{kind}={absolute(path)}" for kind, path in (parse_plot_spec(spec) for spec in req.plot))
    graph = absolute(req.graph)
    if graph is not None:
        from graphprof.graph.export import text_paths

        graphs = text_paths(graph) if graph.suffix.lower() == ".txt" else [graph]
    onnx = absolute(req.export_onnx)
    distinct({"--output": req.output, "--html": req.html, "--graph": graphs if graph is not None else None,
              "--plot": [p.partition("=")[2] for p in plots],
              "--export-onnx": [onnx, onnx.with_name(onnx.name + ".data")] if onnx is not None else None})  # fmt: skip
    return dataclasses.replace(req, plot=plots, graph=graph, html=absolute(req.html), trace=absolute(req.trace), export_onnx=onnx)


def _check(req: ProfileRequest) -> _Checked:
    """Everything that can be checked without the model."""
    from graphprof.base.options import parse_shape
    from graphprof.devices.hardware import resolve_hardware
    from graphprof.render.plots import require_matplotlib
    from graphprof_cli.output import plan

    device_hw = resolve_hardware(req.hardware, peak_tflops=req.peak_tflops, bandwidth_gbs=req.bandwidth_gbs)
    parse_shape(req.input_shape)
    target = plan("profile", req.output, req.fmt, req.redact)
    if req.plot:
        from graphprof.render.plots import check_plot

        require_matplotlib()
        for spec in req.plot:
            check_plot(spec)
    if req.trace is not None:  # every file the run writes is checked now, not after the report
        from graphprof.base.atomic import check_folder

        check_folder(req.trace)
    if req.graph is not None:
        from graphprof_cli.graphs import check_graph_path

        check_graph_path(req.graph)
    if req.html is not None:
        check_html_path(req.html)
    if req.export_onnx is not None:
        from graphprof.graph.onnx_export import check_onnx_path, require_onnx

        check_onnx_path(req.export_onnx)
        require_onnx()
    measuring = None
    if not req.measure:  # a bad measurement option is an error even when --measure is not given
        from graphprof.measure.timing import check_runs

        check_runs(req.iters, req.warmup)
    if req.measure:  # measurement options and the device are checked before anything is built
        from graphprof_cli.measure import check_measure_options

        measuring = check_measure_options(device=req.device, iters=req.iters, warmup=req.warmup)
    return _Checked(device_hw, measuring, target)


def _dry_run(req: ProfileRequest, console: Console, checked: _Checked) -> tuple[PreparedModel, Profile]:
    """The prepared model and its profile: the run that validated the capture (no second dry run)."""
    import graphprof

    device_hw, measuring = checked.hardware, checked.measuring
    # the target the costs are for: the device measured, else the hardware preset's kind
    target = "cuda" if measuring is not None and measuring.type == "cuda" else (device_hw.target if device_hw is not None else None)
    with console.status(f"profiling {req.model} ...", spinner="dots"):
        prepared = graphprof.prepare(
            req.model, input_shape=req.input_shape, batch_size=req.batch_size, dtype=req.dtype, mode=req.mode.value,
            methods=req.capture.methods, allow_unsafe_load=req.allow_unsafe_load, target=target, proposals=req.proposals,
            warm_up=req.warm_up, device="cpu" if req.export_onnx is not None else None,  # ONNX needs the weights
        )  # fmt: skip
        result = prepared.profile()
    return prepared, result


def _measured(
    req: ProfileRequest, console: Console, prepared: PreparedModel, result: Profile, device_hw: Hardware | None, measuring: torch.device
) -> tuple[Profile, Hardware | None]:
    """The real run beside the dry run; when it fails, the dry run's report is shown before the error."""
    from graphprof.cost.roofline import with_roofline
    from graphprof.errors import GraphprofError
    from graphprof.render import render_report
    from graphprof_cli.measure import run_measure

    try:
        with console.status(f"measuring {req.model} on {measuring} ...", spinner="dots"):
            return run_measure(
                prepared, result, hardware=device_hw, device=measuring, iters=req.iters, warmup=req.warmup,
                trace=req.trace, optimizer=req.optimizer.value, redact=req.redact, model_name=req.model,
            )  # fmt: skip
    except GraphprofError:
        console.print(
            render_report(with_roofline(result, device_hw), show_shapes=req.showshape, verbose=req.verbose, depth=req.depth, top=req.top)
        )
        raise


def _crosschecked(req: ProfileRequest, console: Console, result: Profile) -> Profile:
    """fvcore's ``FlopCountAnalysis`` on the same model and input (``graphprof validate``'s own cross-check,
    :func:`graphprof.crosscheck.crosscheck_model`), printed before the tables and kept in the profile."""
    import dataclasses

    from graphprof.crosscheck import DEFAULT_TOLERANCE, crosscheck_model
    from graphprof.render.crosscheck import render_comparison, render_details

    with console.status(f"cross-checking {req.model} against fvcore ...", spinner="dots"):
        check = crosscheck_model(req.model, against="fvcore", input_shape=req.input_shape, batch_size=req.batch_size)
    console.print(render_comparison([check], tolerance=DEFAULT_TOLERANCE))
    console.print(render_details(check))
    return dataclasses.replace(result, crosscheck=check)


def run_profile(req: ProfileRequest) -> None:
    """Profile (and measure), render the report, write what was asked for."""
    from graphprof.cost.roofline import with_roofline
    from graphprof.render import render_report

    req = run_guarded(lambda: _resolved(req), req.debug)
    console = make_console(req.width, stderr=req.to_stdout)  # with --output -, stdout carries the file alone
    checked = run_guarded(lambda: _check(req), req.debug)
    prepared, result = run_guarded(lambda: _dry_run(req, console, checked), req.debug)
    device_hw, measuring = checked.hardware, checked.measuring
    if measuring is not None:
        result, device_hw = run_guarded(lambda: _measured(req, console, prepared, result, device_hw, measuring), req.debug)
    if req.fvcore:
        result = run_guarded(lambda: _crosschecked(req, console, result), req.debug)
    result = with_roofline(result, device_hw)  # classified once: every renderer below reads result.roofline
    console.print(render_report(result, show_shapes=req.showshape, verbose=req.verbose, depth=req.depth, top=req.top))
    if result.measurement is not None:
        from graphprof.render.measured import render_measured

        console.print(render_measured(result))
        _learn(req, console, result, device_hw)
    _write(req, console, prepared, result, checked.output)
    if req.export_onnx is not None:
        _export_onnx(req, console, prepared, result)


def _export_onnx(req: ProfileRequest, console: Console, prepared: PreparedModel, result: Profile) -> None:
    """``--export-onnx``: the model through torch.onnx, its op counts checked against the profile shown."""
    from graphprof.render.onnx_check import render_onnx_check

    path = req.export_onnx
    assert path is not None
    with console.status(f"exporting {req.model} to ONNX ...", spinner="dots"):
        export = run_guarded(lambda: prepared.export_onnx(path, result), req.debug)
    console.print(render_onnx_check(export), highlight=False, markup=False)


def _learn(req: ProfileRequest, console: Console, result: Profile, device_hw: Hardware | None) -> None:
    """After the report (whose prediction did not see this run): the run's op times join the local calibration."""
    if not req.learn or device_hw is None or device_hw.name != "local":
        return
    measured = result.measurement
    if measured is not None and measured.noisy:
        console.print(
            f"not learned: this run's forward varied by {measured.forward_cv:.0%} (noisy); a quiet run teaches the calibration",
            highlight=False,
        )
        return
    from graphprof.calibrate.learn import learn_from_run

    learned = run_guarded(lambda: learn_from_run(result, device_hw), req.debug)
    if learned:
        console.print(f"learned {learned} measured op records into the local calibration (--no-learn to skip)", highlight=False)


def check_html_path(path: Path) -> None:
    """Before any work: the page's folder exists and is writable, and plotly (embedded in it) is installed."""
    from graphprof.base.atomic import check_path
    from graphprof.render.html import _plotly_js

    check_path(path)  # the same checks as for any output file
    _plotly_js()


def _graphs(req: ProfileRequest, prepared: PreparedModel, result: Profile) -> tuple[Graph, Graph | None]:
    """The module and operator graphs for ``--html`` and ``--graph`` together: one more dry run (after the
    report is shown), with the measured times added."""
    hardware = result.roofline.hardware if result.roofline is not None else None
    return prepared.graph(hardware=hardware, detail=req.graph is not None, measurement=result.measurement)


def _write_html(req: ProfileRequest, console: Console, graph: Graph, result: Profile) -> None:
    from graphprof.base.atomic import write_atomic
    from graphprof.render.html import render_profile_html
    from graphprof_cli.output import page

    path = req.html
    assert path is not None
    run_guarded(lambda: write_atomic(path, page(render_profile_html(result, graph=graph), req.redact)), req.debug)
    console.print(f"wrote {path}")


def _write(req: ProfileRequest, console: Console, prepared: PreparedModel, result: Profile, target: OutputTarget | None) -> None:
    from graphprof.render import write_plot
    from graphprof_cli.output import emit

    emit(result, target, console, req.debug)
    for spec in req.plot:
        path = run_guarded(partial(write_plot, result, spec), req.debug)
        console.print(f"wrote {path}")
    graphs = run_guarded(lambda: _graphs(req, prepared, result), req.debug) if req.html or req.graph else None
    if req.html is not None and graphs is not None:
        _write_html(req, console, graphs[0], result)
    if req.graph is not None and graphs is not None:
        from graphprof.graph import write_graph
        from graphprof.graph.export import text_paths

        graph = req.graph
        existed = {p for p in (text_paths(graph) if graph.suffix.lower() == ".txt" else [graph]) if p.exists()}
        from graphprof.base.redact import redact_text

        redact = redact_text if req.redact else None
        for path in run_guarded(lambda: write_graph(graphs[0], graph, detail=graphs[1], depth=req.depth, redact=redact), req.debug):
            console.print(f"wrote {path}" + (" (replacing the file that was there)" if path in existed else ""))

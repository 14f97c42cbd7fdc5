"""``graphprof fits --model X [--hardware h100] [--memory-budget 40GB] [--output plan.json]``: will one
training step fit, and what to recompute if it does not (its own command; parsing only).

The work is :func:`graphprof.training.plan_memory`; the output :func:`graphprof.render.plan.render_memory_plan`,
and ``--output`` the plan as JSON (kind ``fits``, :mod:`graphprof.schemas`). The sharded step per rank is
``graphprof shard --model X fsdp:64 --fits``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import typer

from graphprof.base.choices import Optimizer
from graphprof_cli import options as opt
from graphprof_cli.common import console as make_console
from graphprof_cli.common import request_from, run_guarded
from graphprof_cli.request import CommonOptions

__all__ = ["FitsRequest", "fits_command", "run_fits"]


@dataclass(frozen=True)
class FitsRequest(CommonOptions):
    """Every option of ``graphprof fits``, as parsed (names as the options', without dashes)."""

    model: str
    optimizer: Optimizer = Optimizer.ADAMW
    memory_budget: str | None = None


def fits_command(
    ctx: typer.Context,
    model: opt.ModelRequired,
    input_shape: opt.InputShapeOption = None,
    batch_size: opt.BatchSizeOption = None,
    dtype: opt.DtypeOption = None,
    hardware: opt.HardwareOption = None,
    peak_tflops: opt.PeakOption = None,
    bandwidth_gbs: opt.BandwidthOption = None,
    optimizer: Annotated[
        Optimizer, typer.Option("--optimizer", help="The optimizer whose state the step holds (as `graphprof shard --fits`).")
    ] = Optimizer.ADAMW,
    memory_budget: opt.MemoryBudgetOption = None,
    output: opt.OutputOption = None,
    width: opt.WidthOption = None,
    redact: opt.RedactOption = False,
    debug: opt.DebugOption = False,
) -> None:
    """Will a training step fit --hardware: each phase's peak by what holds it and where (a dry run)."""
    run_fits(request_from(FitsRequest, ctx.params))


def fits_options(req: FitsRequest) -> dict[str, Any]:
    """The keywords of :func:`graphprof.training.plan_memory` from the command's options, checked before
    anything is built (a bad budget or hardware: one line, exit 2)."""
    from graphprof.devices.hardware import resolve_hardware
    from graphprof.training import parse_memory

    budget = None if req.memory_budget is None else parse_memory(req.memory_budget)
    hardware = resolve_hardware(req.hardware, peak_tflops=req.peak_tflops, bandwidth_gbs=req.bandwidth_gbs)
    return {
        "optimizer": req.optimizer, "hardware": hardware, "dtype": req.dtype, "memory_budget": budget,
        "batch_size": req.batch_size, "input_shape": req.input_shape,
    }  # fmt: skip


def run_fits(req: FitsRequest) -> None:
    """Check the options (``--output`` too), simulate the step, print the plan, write ``--output``."""
    from graphprof.render.plan import render_memory_plan
    from graphprof.training import plan_memory
    from graphprof_cli.output import emit, plan

    options = run_guarded(lambda: fits_options(req), req.debug)
    target = run_guarded(lambda: plan("fits", req.output, redact=req.redact), req.debug)
    console = make_console(req.width, stderr=target is not None and target.to_stdout)
    with console.status(f"planning a training step of {req.model} ...", spinner="dots"):
        result = run_guarded(lambda: plan_memory(req.model, **options), req.debug)
    console.print(render_memory_plan(result))
    emit(result, target, console, req.debug)

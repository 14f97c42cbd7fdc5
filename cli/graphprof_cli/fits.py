"""``graphprof --model X --mode train --fits [--memory-budget 40GB] [--output plan.json]``: plan a training
step (parsing only).

The work is :func:`graphprof.plan.plan_memory`; the output :func:`graphprof.render.plan.render_memory_plan`,
and ``--output`` the plan as JSON (kind ``fits``, :mod:`graphprof.schemas`).
"""

from __future__ import annotations

from typing import Any

from graphprof_cli.common import console as make_console
from graphprof_cli.common import run_guarded
from graphprof_cli.request import ProfileRequest

__all__ = ["run_fits", "fits_options"]


def fits_options(req: ProfileRequest) -> dict[str, Any]:
    """The keywords of :func:`graphprof.plan.plan_memory` from the main command's options; a plan needs
    ``--mode train`` (one line, exit 2, before anything is built)."""
    from graphprof.base.choices import Mode
    from graphprof.devices.hardware import resolve_hardware
    from graphprof.errors import InvalidInputError
    from graphprof.plan import parse_memory

    if req.mode is not Mode.TRAIN:
        raise InvalidInputError("--fits and --memory-budget plan a training step: add --mode train")
    budget = None if req.memory_budget is None else parse_memory(req.memory_budget)
    return {
        "optimizer": req.optimizer, "hardware": resolve_hardware(req.hardware, peak_tflops=req.peak_tflops, bandwidth_gbs=req.bandwidth_gbs),
        "dtype": req.dtype, "memory_budget": budget, "batch_size": req.batch_size, "input_shape": req.input_shape,
    }  # fmt: skip


def run_fits(req: ProfileRequest) -> None:
    """Check the options (``--output`` too), simulate the step, print the plan, write ``--output``."""
    from graphprof.plan import plan_memory
    from graphprof.render.plan import render_memory_plan
    from graphprof_cli.output import emit, plan

    options = run_guarded(lambda: fits_options(req), req.debug)
    target = run_guarded(lambda: plan("fits", req.output, req.fmt, req.redact), req.debug)
    console = make_console(req.width, stderr=target is not None and target.to_stdout)
    with console.status(f"planning a training step of {req.model} ...", spinner="dots"):
        result = run_guarded(lambda: plan_memory(req.model, **options), req.debug)
    console.print(render_memory_plan(result))
    emit(result, target, console, req.debug)

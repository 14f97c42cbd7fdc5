"""``graphprof --model X --mode train --shard fsdp:64``: one rank of a sharded training step, on a dry run."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from graphprof_cli.common import run_guarded
from graphprof_cli.request import ProfileRequest

__all__ = ["ShardOption", "run_shard"]

ShardOption = Annotated[
    str | None,
    typer.Option(
        "--shard",
        help="With --mode train: shard the training step as STRATEGY:RANKS (fsdp:64: FSDP2 over 64 ranks of a fake "
        "process group) and print one rank's memory, FLOPs and collective bytes beside the analytic figures.",
    ),
]


def run_shard(req: ProfileRequest) -> None:
    """Check the options, run the sharded step, print the per-rank table, write ``--output`` as JSON."""
    from graphprof.devices.hardware import resolve_hardware
    from graphprof.render.shard import render_sharded
    from graphprof.sharding import parse_shard, shard_profile
    from graphprof_cli.common import console as make_console
    from graphprof_cli.output import emit, plan

    def checked() -> tuple[Any, Any, Any]:  # before any model is built
        spec = parse_shard(req.shard or "")
        if req.mode.value != "train":
            from graphprof.errors import InvalidInputError

            raise InvalidInputError("--shard profiles a training step: add --mode train")
        hardware = resolve_hardware(req.hardware, peak_tflops=req.peak_tflops, bandwidth_gbs=req.bandwidth_gbs)
        return spec, hardware, plan("shard", req.output, redact=req.redact)

    spec, hardware, target = run_guarded(checked, req.debug)
    console = make_console(req.width, stderr=target is not None and target.to_stdout)
    options = {"batch_size": req.batch_size, "input_shape": req.input_shape, "dtype": req.dtype}
    with console.status(f"sharding {req.model} as {spec} ...", spinner="dots"):
        result = run_guarded(lambda: shard_profile(req.model, spec, hardware=hardware, **options), req.debug)
    console.print(render_sharded(result))
    emit(result, target, console, req.debug)

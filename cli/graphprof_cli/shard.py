"""``graphprof shard --model X fsdp:64`` (``tp:8``, ``fsdp:8,tp:8``): one rank of a sharded training step, on a dry run (its own command).

Parsing only: the work is :func:`graphprof.sharding.shard_profile`; the output is
:func:`graphprof.render.shard.render_sharded`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from graphprof.base.choices import ActivationCheckpoint, AdamWImpl, Optimizer
from graphprof_cli import options as opt
from graphprof_cli.common import flag, request_from, run_guarded
from graphprof_cli.request import CommonOptions

if TYPE_CHECKING:
    from graphprof.devices.hardware import Hardware
    from graphprof.render.sink import OutputTarget
    from graphprof.sharding import ShardSpec

__all__ = ["ShardRequest", "shard_command", "run_shard"]


def _run_fits(req: ShardRequest) -> None:
    """``--fits``: the step planned per rank (:func:`graphprof.training.plan_memory` with ``shard=`` and
    ``--checkpoint``); ``--output``: the plan as JSON (kind ``fits``)."""
    from graphprof.render.plan import render_memory_plan
    from graphprof.training import plan_memory
    from graphprof_cli.common import console as make_console
    from graphprof_cli.output import emit

    if req.spec.strip().lower() == "fsdp:auto":
        _run_ranks(req)
        return
    spec, hardware, target = run_guarded(lambda: _checked(req, "fits"), req.debug)
    console = make_console(req.width, stderr=target is not None and target.to_stdout)
    options = {
        "batch_size": req.batch_size,
        "input_shape": req.input_shape,
        "dtype": req.dtype,
        "optimizer": req.optimizer,
        "memory_budget": req.memory_budget,
        "checkpoint": str(req.checkpoint),
    }
    with console.status(f"planning {req.model} as {spec} ...", spinner="dots"):
        plan = run_guarded(lambda: plan_memory(req.model, shard=spec, hardware=hardware, **options), req.debug)
    console.print(render_memory_plan(plan))
    emit(plan, target, console, req.debug)


@dataclass(frozen=True)
class ShardRequest(CommonOptions):
    """Every option of ``graphprof shard``, as parsed (names as the options', without dashes)."""

    model: str
    spec: str
    fits: bool = False
    optimizer: str = "adamw"
    memory_budget: str | None = None
    seq_len: str | None = None
    grad_accum: int = 1
    checkpoint: str = "none"
    gpus_per_node: int = 8
    compile: bool = False
    adamw: str = "fused"


def shard_command(
    ctx: typer.Context,
    spec: Annotated[
        str,
        typer.Argument(
            metavar="STRATEGY:RANKS",
            help="How the training step is sharded, on a fake process group: fsdp:64 is FSDP2 over 64 ranks, "
            "tp:8 tensor parallelism (DTensor) over 8, fsdp:8,tp:8 both over 64, fsdp:1 one GPU unsharded; "
            "with --fits, fsdp:auto finds the fewest FSDP ranks that fit --hardware.",
        ),
    ],
    model: opt.ModelRequired,
    input_shape: opt.InputShapeOption = None,
    batch_size: opt.BatchSizeOption = None,
    dtype: opt.DtypeOption = None,
    hardware: opt.HardwareOption = None,
    peak_tflops: opt.PeakOption = None,
    bandwidth_gbs: opt.BandwidthOption = None,
    output: opt.OutputOption = None,
    width: opt.WidthOption = None,
    redact: opt.RedactOption = False,
    fits: Annotated[
        bool, flag("--fits", help="Plan the step instead: each phase's peak per rank by what holds it, against --hardware.")
    ] = False,
    optimizer: Annotated[
        Optimizer, typer.Option("--optimizer", help="With --fits: the optimizer whose state each rank holds.")
    ] = Optimizer.ADAMW,
    memory_budget: opt.MemoryBudgetOption = None,
    seq_len: Annotated[str | None, typer.Option("--seq-len", help="Tokens per sequence (the batch from --batch-size).")] = None,
    grad_accum: Annotated[int, typer.Option("--grad-accum", help="Micro-batches per optimizer step (the step time).")] = 1,
    checkpoint: Annotated[
        ActivationCheckpoint,
        typer.Option(
            "--checkpoint",
            help="Activation checkpointing of each block, priced as recomputation: none, selective (torchtitan's per-op policy) or full.",
        ),
    ] = ActivationCheckpoint.NONE,
    gpus_per_node: Annotated[
        int, typer.Option("--gpus-per-node", help="GPUs in a node: which collectives cross the network (the step time).")
    ] = 8,
    compile: Annotated[  # noqa: A002 - the option's name
        bool, flag("--compile", help="Price the step as torch.compile runs it: element-wise chains fused, CUDA graphs.")
    ] = False,
    adamw: Annotated[
        AdamWImpl,
        typer.Option(
            "--adamw",
            help="AdamW's implementation (the step time): fused (torchtitan's default) or foreach (torch.optim.AdamW's own default).",
        ),
    ] = AdamWImpl.FUSED,
    debug: opt.DebugOption = False,
) -> None:
    """One rank of a sharded training step: its memory, FLOPs and collective bytes beside the analytic figures,
    and with --hardware its time, tokens/s per GPU and MFU."""
    req = request_from(ShardRequest, ctx.params)
    if req.fits or req.memory_budget is not None:
        _run_fits(req)
        return
    run_shard(req)


def _checked(req: ShardRequest, kind: str = "shard") -> tuple[ShardSpec, Hardware | None, OutputTarget | None]:
    """Before any model is built: the sharding, the hardware and the output (a result of ``kind``)."""
    from graphprof.devices.hardware import resolve_hardware
    from graphprof.sharding import parse_shard
    from graphprof_cli.output import plan

    spec = parse_shard(req.spec)
    hardware = resolve_hardware(req.hardware, peak_tflops=req.peak_tflops, bandwidth_gbs=req.bandwidth_gbs)
    return spec, hardware, plan(kind, req.output, redact=req.redact)


def _run_ranks(req: ShardRequest) -> None:
    """``fsdp:auto --fits``: the smallest world size that fits ``--hardware`` (:func:`graphprof.training.plan_ranks`)."""
    from graphprof.devices.hardware import resolve_hardware
    from graphprof.errors import InvalidInputError
    from graphprof.render.plan import render_ranks_plan
    from graphprof.training import plan_ranks
    from graphprof_cli.common import console as make_console
    from graphprof_cli.output import emit, plan

    def check() -> tuple[Hardware, OutputTarget | None]:
        hardware = resolve_hardware(req.hardware, peak_tflops=req.peak_tflops, bandwidth_gbs=req.bandwidth_gbs)
        if hardware is None:
            raise InvalidInputError("fsdp:auto finds the ranks a device needs: give --hardware")
        return hardware, plan("fits-ranks", req.output, redact=req.redact)

    hardware, target = run_guarded(check, req.debug)
    console = make_console(req.width, stderr=target is not None and target.to_stdout)
    options = {"batch_size": req.batch_size, "input_shape": req.input_shape, "dtype": req.dtype, "optimizer": req.optimizer}
    with console.status(f"finding how many ranks {req.model} needs ...", spinner="dots"):
        ranks = run_guarded(lambda: plan_ranks(req.model, hardware, **options), req.debug)
    console.print(render_ranks_plan(ranks))
    emit(ranks, target, console, req.debug)


def _seq_len(text: str | None) -> int | None:
    """``--seq-len`` here is one length (``sweep --seq-len`` takes a list, so the option is text in both)."""
    from graphprof.errors import InvalidInputError

    if text is None:
        return None
    if not text.strip().isdigit():
        raise InvalidInputError(f"--seq-len takes one whole number for shard, got {text!r} (a list of lengths is graphprof sweep's)")
    return int(text)


def run_shard(req: ShardRequest) -> None:
    """Check the options, run the sharded step, print the per-rank table, write ``--output`` as JSON."""
    from graphprof.render.shard import render_sharded
    from graphprof.sharding import StepOptions, shard_profile
    from graphprof_cli.common import console as make_console
    from graphprof_cli.output import emit

    spec, hardware, target = run_guarded(lambda: _checked(req), req.debug)
    console = make_console(req.width, stderr=target is not None and target.to_stdout)
    options = {"batch_size": req.batch_size, "input_shape": req.input_shape, "dtype": req.dtype}
    timing = StepOptions(grad_accum=req.grad_accum, checkpoint=str(req.checkpoint), gpus_per_node=req.gpus_per_node, compiled=req.compile,
                         adamw=str(req.adamw))  # fmt: skip
    with console.status(f"sharding {req.model} as {spec} ...", spinner="dots"):
        result = run_guarded(
            lambda: shard_profile(req.model, spec, hardware=hardware, timing=timing, seq_len=_seq_len(req.seq_len), **options), req.debug
        )
    console.print(render_sharded(result))
    emit(result, target, console, req.debug)

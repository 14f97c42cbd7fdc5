"""``shard_profile``: one sharded training step, counted per rank, beside the analytic figures."""

from __future__ import annotations

from typing import Any

from torch import nn

from graphprof.base.choices import Mode
from graphprof.base.inputs import describe_inputs, format_inputs
from graphprof.cost.result import OpRecord
from graphprof.devices.hardware import Hardware, get_hardware
from graphprof.errors import InvalidInputError
from graphprof.sharding.result import RankFigures, ShardedProfile
from graphprof.sharding.run import StepRecord, fake_world, run_sharded_step
from graphprof.sharding.spec import ShardSpec, check_layout, parse_shard

__all__ = ["shard_profile"]

#: AdamW keeps two moments per parameter (``exp_avg``, ``exp_avg_sq``), in the parameter's dtype.
ADAMW_MOMENTS = 2


def _collectives(records: list[OpRecord]) -> dict[str, tuple[int, int]]:
    """``kind -> (bytes, calls)``: the all-gathers' gathered tensors, the reduce-scatters' full inputs."""
    out = {"all_gather": (0, 0), "reduce_scatter": (0, 0)}
    for r in records:
        if r.op.endswith("_allgather_base_"):
            b, n = out["all_gather"]
            out["all_gather"] = (b + r.cost.bytes_written, n + 1)
        elif r.op.endswith("_reduce_scatter_base_"):
            b, n = out["reduce_scatter"]
            out["reduce_scatter"] = (b + r.cost.bytes_read, n + 1)
    return out


def _compute_flops(records: list[OpRecord]) -> int:
    """FLOPs of the step's computation: every counted op but the collectives (a reduce-scatter's adds are
    communication, not the model's arithmetic)."""
    return sum(r.cost.flops for r in records if not r.op.startswith("c10d."))


def _rank(step: StepRecord) -> RankFigures:
    coll = _collectives(step.records)
    return RankFigures(
        flops=_compute_flops(step.records), param_bytes=step.shard_bytes, grad_bytes=step.shard_bytes,
        optimizer_bytes=ADAMW_MOMENTS * step.shard_bytes, activation_bytes=step.saved_bytes,
        unsharded_bytes=2 * max(step.unit_bytes, default=0),
        all_gather_bytes=coll["all_gather"][0], reduce_scatter_bytes=coll["reduce_scatter"][0],
        all_gather_calls=coll["all_gather"][1], reduce_scatter_calls=coll["reduce_scatter"][1],
    )  # fmt: skip


def _analytic(param_bytes: int, unit_bytes: list[int], world: int, flops: int, activations: int) -> RankFigures:
    """The textbook figures: every parameter byte over ``world`` ranks; each unit gathered once forward and
    once backward (the root's own parameters, not resharded after forward, once); every gradient
    reduce-scattered once; the unsharded model's FLOPs and saved activations at the same per-rank batch."""
    shard = param_bytes / world
    root = param_bytes - sum(unit_bytes)
    return RankFigures(
        flops=flops, param_bytes=round(shard), grad_bytes=round(shard), optimizer_bytes=round(ADAMW_MOMENTS * shard),
        activation_bytes=activations, unsharded_bytes=2 * max(unit_bytes, default=0),
        all_gather_bytes=2 * sum(unit_bytes) + root, reduce_scatter_bytes=param_bytes,
        all_gather_calls=2 * len(unit_bytes) + (1 if root else 0), reduce_scatter_calls=len(unit_bytes) + (1 if root else 0),
    )  # fmt: skip


def shard_profile(
    model_or_name: nn.Module | str,
    shard: str | ShardSpec,
    *,
    hardware: Hardware | str | None = None,
    **options: Any,
) -> ShardedProfile:
    """One training step of ``model_or_name`` sharded as ``shard`` (``"fsdp:64"``), per rank.

    ``options`` are :func:`graphprof.prepare`'s (``batch_size``, ``input_shape``, ``dtype``: the per-rank
    micro-batch and the parameters' dtype). ``hardware`` (a preset name or record) says whether the
    rank's estimate fits its memory.

    >>> p = shard_profile("hf:llama-3-8b", "fsdp:64", dtype="bfloat16")     # doctest: +SKIP
    >>> p.rank.param_bytes, p.analytic.param_bytes, p.rank.all_gather_bytes   # doctest: +SKIP
    """
    from graphprof.prepared import prepare

    spec = parse_shard(shard) if isinstance(shard, str) else shard
    device = get_hardware(hardware) if isinstance(hardware, str) else hardware
    if Mode.parse(options.get("mode", Mode.TRAIN)) is not Mode.TRAIN:
        raise InvalidInputError("sharding profiles a training step: use mode='train'")
    prepared = prepare(model_or_name, **{**options, "mode": "train"})
    check_layout(spec, sum(1 for _ in prepared.model.parameters()), prepared.name)  # before the step, not after minutes
    plain = prepared.profile()  # the unsharded step at the same per-rank batch
    call = prepared.resolve(prepared.spec())
    args, kwargs, run_dtype = call.args, call.kwargs, call.dtype
    with fake_world(spec.world) as mesh:
        step = run_sharded_step(prepared.model, args, kwargs, mesh, run_dtype)
    param_bytes = plain.param_bytes
    return ShardedProfile(
        model_name=prepared.name, strategy=spec.strategy, world=spec.world, dtype=plain.dtype,
        inputs=format_inputs(describe_inputs(args, kwargs, run_dtype)), units=len(step.unit_bytes),
        total_params=plain.total_params, rank=_rank(step),
        analytic=_analytic(param_bytes, step.unit_bytes, spec.world, plain.total_flops, plain.saved_activation_bytes),
        device=device.label if device is not None else None,
        device_memory_bytes=device.memory_bytes if device is not None else None,
        notes=_notes(spec, plain.dtype),
    )  # fmt: skip


def _notes(spec: ShardSpec, dtype: str) -> tuple[str, ...]:
    return (
        f"FSDP2 fully_shard over {spec.world} ranks of a fake process group: rank 0's step, counted on a dry run",
        f"optimizer: AdamW, {ADAMW_MOMENTS} moments per parameter in {dtype}; its step's arithmetic is not counted",
        "peak estimate = parameter, gradient and optimizer shards + saved activations + two gathered units",
        "reference: parameters / N, every unit gathered forward and backward (the root once), every gradient "
        "reduce-scattered once; FLOPs and activations: the unsharded step at the same per-rank batch "
        "(its activations read from the autograd graph at each layer's exit, the sharded step's as each is saved)",
    )



"""``shard_profile``: one sharded training step, counted per rank, beside the analytic figures."""

from __future__ import annotations

from typing import Any

from torch import nn

from graphprof.base.choices import Mode
from graphprof.base.inputs import describe_inputs, format_inputs
from graphprof.base.options import parse_shape
from graphprof.cost.result import OpRecord
from graphprof.devices.hardware import Hardware, get_hardware
from graphprof.errors import InvalidInputError
from graphprof.sharding.checkpoint import unit_names
from graphprof.sharding.result import RankFigures, ShardedProfile
from graphprof.sharding.run import StepRecord, run_sharded_step
from graphprof.sharding.spec import ShardSpec, check_layout, parse_shard
from graphprof.sharding.step_result import StepOptions, StepTime
from graphprof.sharding.steptime import price_step
from graphprof.sharding.tp_plan import TensorPlan
from graphprof.sharding.wraps import fake_world, sharding_wraps

__all__ = ["shard_profile"]

#: AdamW keeps two moments per parameter (``exp_avg``, ``exp_avg_sq``), in the parameter's dtype.
ADAMW_MOMENTS = 2

#: Collective kind -> the op names that do it and whether its bytes are the tensor read (the full
#: input of a reduction) or written (the gathered output).
_COLLECTIVES = {
    "all_gather": (("c10d._allgather_base_", "_c10d_functional.all_gather_into_tensor"), "written"),
    "reduce_scatter": (("c10d._reduce_scatter_base_", "_c10d_functional.reduce_scatter_tensor"), "read"),
    "all_reduce": (("c10d.allreduce_", "_c10d_functional.all_reduce"), "read"),
}


def _collectives(records: list[OpRecord]) -> dict[str, tuple[int, int]]:
    """``kind -> (bytes, calls)``: the all-gathers' gathered tensors, the reductions' full inputs."""
    out = dict.fromkeys(_COLLECTIVES, (0, 0))
    for r in records:
        for kind, (ops, side) in _COLLECTIVES.items():
            if r.op in ops:
                b, n = out[kind]
                out[kind] = (b + (r.cost.bytes_written if side == "written" else r.cost.bytes_read), n + 1)
    return out


def _compute_flops(records: list[OpRecord]) -> int:
    """FLOPs of the step's computation: every counted op but the collectives (a reduce-scatter's adds are
    communication, not the model's arithmetic)."""
    return sum(r.cost.flops for r in records if "c10d" not in r.op.partition(".")[0])


def _rank(step: StepRecord) -> RankFigures:
    coll = _collectives(step.records)
    return RankFigures(
        flops=_compute_flops(step.records), param_bytes=step.shard_bytes, grad_bytes=step.shard_bytes,
        optimizer_bytes=ADAMW_MOMENTS * step.shard_bytes, activation_bytes=step.saved_bytes,
        unsharded_bytes=2 * max(step.unit_bytes, default=0),
        all_gather_bytes=coll["all_gather"][0], reduce_scatter_bytes=coll["reduce_scatter"][0],
        all_gather_calls=coll["all_gather"][1], reduce_scatter_calls=coll["reduce_scatter"][1],
        all_reduce_bytes=coll["all_reduce"][0], all_reduce_calls=coll["all_reduce"][1],
    )  # fmt: skip


def _analytic(spec: ShardSpec, param_bytes: int, step: StepRecord, flops: int, activations: int) -> RankFigures:
    """The textbook figures. Tensor parallelism: each planned weight (and column-wise bias) over ``tp``
    ranks, an all-reduce of every row-wise layer's output in the forward and of every column-wise
    layer's input gradient in the backward, FLOPs and activations of the unsharded step split evenly.
    FSDP, on what tensor parallelism leaves a rank: every byte over ``fsdp`` ranks; each unit gathered once
    forward and once backward (the root's own parameters, not resharded after forward, once); every
    gradient reduce-scattered once."""
    plan, units = step.plan, step.unit_bytes
    local = param_bytes - plan.sharded_bytes() + plan.sharded_bytes() / spec.tp  # what TP leaves a rank
    shard = local / spec.fsdp
    fsdp = spec.fsdp > 1
    root = round(local) - sum(units) if fsdp else 0
    forward = [p.output_bytes for p in plan.layers if p.style == "rowwise"]
    backward = [p.input_bytes for p in plan.layers if p.style == "colwise" and p.input_needs_grad]
    return RankFigures(
        flops=round(flops / spec.tp), param_bytes=round(shard), grad_bytes=round(shard),
        optimizer_bytes=round(ADAMW_MOMENTS * shard), activation_bytes=round(activations / spec.tp),
        unsharded_bytes=2 * max(units, default=0),
        all_gather_bytes=2 * sum(units) + root, reduce_scatter_bytes=round(local) if fsdp else 0,
        all_gather_calls=2 * len(units) + (1 if root else 0), reduce_scatter_calls=len(units) + (1 if root else 0),
        all_reduce_bytes=sum(forward) + sum(backward), all_reduce_calls=len(forward) + len(backward),
    )  # fmt: skip


def _with_seq_len(options: dict[str, Any], seq_len: int | None) -> dict[str, Any]:
    """``seq_len`` folded into ``input_shape`` as ``(batch, seq_len)`` (the batch from ``batch_size``, else the
    given shape's first dimension, else 1)."""
    if seq_len is None:
        return options
    if seq_len < 1:
        raise InvalidInputError(f"--seq-len must be at least 1, got {seq_len}")
    shape = parse_shape(options.get("input_shape"))
    batch = options.get("batch_size") or (shape[0] if shape else 1)
    return {**{k: v for k, v in options.items() if k != "batch_size"}, "input_shape": (batch, seq_len)}


def _step_time(step: StepRecord, spec: ShardSpec, device: Hardware | None, plain: Any, blocks: list[str],
               options: StepOptions | bool | None) -> StepTime | None:  # fmt: skip
    """The step priced on ``device`` (:func:`~graphprof.sharding.steptime.price_step`): with options given, or by
    default where the device is a preset with published links; ``False``: never."""
    if device is None or options is False or (options is None and device.links is None):
        return None
    return price_step(step, spec, device, plain, blocks, options if isinstance(options, StepOptions) else StepOptions())


def shard_profile(
    model_or_name: nn.Module | str,
    shard: str | ShardSpec,
    *,
    hardware: Hardware | str | None = None,
    timing: StepOptions | bool | None = None,
    seq_len: int | None = None,
    **options: Any,
) -> ShardedProfile:
    """One training step of ``model_or_name`` sharded as ``shard`` (``"fsdp:64"``, ``"tp:8"``,
    ``"fsdp:8,tp:8"``), per rank.

    ``options`` are :func:`graphprof.prepare`'s (``batch_size``, ``input_shape``, ``dtype``: the per-rank
    micro-batch and the parameters' dtype); ``seq_len`` sets the sequence of ``input_shape``. ``hardware`` (a
    preset name or record) says whether the rank's estimate fits its memory and prices the step's time
    (:mod:`graphprof.sharding.steptime`; ``timing``: its :class:`StepOptions`, ``False`` not to price it).

    >>> p = shard_profile("hf:llama-3-8b", "fsdp:64", dtype="bfloat16")     # doctest: +SKIP
    >>> p.rank.param_bytes, p.analytic.param_bytes, p.rank.all_gather_bytes   # doctest: +SKIP
    """
    from graphprof.prepared import prepare

    spec = parse_shard(shard) if isinstance(shard, str) else shard
    device = get_hardware(hardware) if isinstance(hardware, str) else hardware
    if Mode.parse(options.get("mode", Mode.TRAIN)) is not Mode.TRAIN:
        raise InvalidInputError("sharding profiles a training step: use mode='train'")
    prepared = prepare(model_or_name, **{**_with_seq_len(options, seq_len), "mode": "train"})
    check_layout(spec, sum(1 for _ in prepared.model.parameters()), prepared.name)  # before the step, not after minutes
    call = prepared.resolve(prepared.spec())
    args, kwargs, run_dtype = call.args, call.kwargs, call.dtype
    with fake_world(spec) as meshes:  # first: a model tensor parallelism has no plan for is refused before the reference
        step = run_sharded_step(prepared.model, args, kwargs, sharding_wraps(spec, meshes, args, kwargs, prepared.name), run_dtype)
    plain = prepared.profile()  # the unsharded step at the same per-rank batch
    blocks = unit_names(prepared.model)  # what checkpointing recomputes, as the memory plan checkpoints it
    return ShardedProfile(
        model_name=prepared.name, strategy=spec.strategy, world=spec.world, dtype=plain.dtype,
        inputs=format_inputs(describe_inputs(args, kwargs, run_dtype)), units=len(step.unit_bytes),
        total_params=plain.total_params, rank=_rank(step),
        analytic=_analytic(spec, plain.param_bytes, step, plain.total_flops, plain.saved_activation_bytes),
        device=device.label if device is not None else None,
        device_memory_bytes=device.memory_bytes if device is not None else None,
        notes=_notes(spec, plain.dtype, step.plan), shard=str(spec), colwise=step.plan.names("colwise"),
        rowwise=step.plan.names("rowwise"), step=_step_time(step, spec, device, plain, blocks, timing),
    )  # fmt: skip


def _notes(spec: ShardSpec, dtype: str, plan: TensorPlan) -> tuple[str, ...]:
    notes = [f"{spec}: rank 0's step on a fake process group of {spec.world} ranks, counted on a dry run"]
    if spec.tp > 1:
        notes += [
            f"tensor parallelism over {spec.tp} ranks (DTensor's ColwiseParallel / RowwiseParallel), the plan read from "
            f"the model's data flow: {plan.describe()}; every other module replicated",
            "reference with tensor parallelism: planned weights (and column-wise biases) / tp; an all-reduce of each "
            "row-wise layer's output (forward) and each column-wise layer's input gradient (backward); FLOPs and "
            "activations of the unsharded step split evenly (the ideal: what exceeds it is replicated work: norms, "
            "embeddings, the head)",
        ]
    if spec.fsdp > 1:
        notes += [
            f"FSDP2 fully_shard over {spec.fsdp} ranks" + (" (the mesh's dp dimension, after tensor parallelism)" if spec.tp > 1 else ""),
            "reference with FSDP: parameters / N, every unit gathered forward and backward (the root once), every "
            "gradient reduce-scattered once; FLOPs and activations: the unsharded step at the same per-rank batch "
            "(its activations read from the autograd graph at each layer's exit, the sharded step's as each is saved)",
        ]
    return (
        *notes,
        f"optimizer: AdamW, {ADAMW_MOMENTS} moments per parameter in {dtype}; its step's arithmetic is not counted",
        "peak estimate = parameter, gradient and optimizer shards + saved activations" + (" + two gathered units" if spec.fsdp > 1 else ""),
    )

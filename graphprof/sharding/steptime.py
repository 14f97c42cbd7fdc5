"""How long one rank's training step takes on a GPU one does not have: its calls priced, then timed.

:func:`price_step` reads the sharded dry run (:func:`graphprof.sharding.run.run_sharded_step`: every call
rank 0 makes, in order, the collectives included, each with the module it ran in) and prices it:

* **kernels** by the device's kernel table (:func:`graphprof.devices.predict.kernel_seconds`, never below
  the roofline; a preset without a measured table borrows the H100's efficiencies,
  :func:`graphprof.devices.derived.kernel_table`). *Eager*: every call is a kernel with the table's host
  cost per launch (a view costs the host only). *Compiled* (``torch.compile``): each maximal run of
  consecutive element-wise, norm and reduction calls is one fused kernel (Inductor's fusion; matrix
  products and attention stay library calls) that reads what its first call reads plus what later calls
  read besides their predecessor's output, and writes what its last call writes; CUDA graphs: no host cost;
* **collectives** by :func:`graphprof.devices.links.collective_seconds`: FSDP's all-gathers and
  reduce-scatters over the ``dp`` group, tensor parallelism's over the ``tp`` group, on the preset's links;
* **recomputation**: before the first backward kernel of each checkpointed block, its forward's kernels
  again (``full``), or those torchtitan's per-op policy does not save (``selective``: every kernel but
  attention and every other matrix product);
* **mixed precision** as FSDP2 runs it under torchtitan's defaults (``MixedPrecisionPolicy(param_dtype=bf16,
  reduce_dtype=float32)``, the sharded parameters kept in float32): each reduce-scatter moves its gradients
  in ``reduce_dtype`` (twice the bf16 bytes), and the optimizer's shard is ``master_dtype`` (:class:`StepOptions`);
* **the optimizer**: AdamW's step on the shard, one fused pass: reads the parameter, gradient and two
  moments, writes the parameter and moments (7 x the shard's bytes in ``master_dtype``), at the table's
  streaming rate.

:mod:`graphprof.sharding.timeline` then plays the step (overlap of FSDP's prefetch, host stalls). With
``grad_accum`` micro-batches the micro-step repeats (FSDP2 reduce-scatters every micro-batch by default)
and the optimizer runs once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from graphprof.base.choices import ActivationCheckpoint, AdamWImpl, OpStatus, Phase
from graphprof.base.options import parse_dtype
from graphprof.cost.fusion import fold_alongside, fold_chains
from graphprof.cost.result import OpRecord
from graphprof.cost.tokens import ATTENTION_OPS, MODEL_FLOP_OPS
from graphprof.devices.derived import kernel_table
from graphprof.devices.hardware import Hardware
from graphprof.devices.links import Group, Links, collective_seconds, group_layout
from graphprof.devices.predict import host_seconds, kernel_seconds, op_class
from graphprof.devices.table import Calibration
from graphprof.errors import InvalidInputError
from graphprof.sharding.physics import physics_note, step_physics
from graphprof.sharding.run import StepRecord
from graphprof.sharding.spec import ShardSpec
from graphprof.sharding.step_result import StepOptions, StepTime, TimeBreakdown
from graphprof.sharding.timeline import BLOCKING, GATHER, KERNEL, SCATTER, Item, simulate

__all__ = ["price_step", "step_items", "with_recompute", "ADAMW_PASSES", "Z80"]

#: AdamW's step, passes over the shard per parameter element (each an element of the master dtype read or
#: written). ``fused``: one kernel reads parameter, gradient and two moments and writes parameter and moments
#: (4 + 3). ``foreach`` (torch.optim.AdamW's default on CUDA, not capturable): weight decay ``_foreach_mul_``
#: (2), ``_foreach_lerp_`` of the first moment (3), ``_foreach_mul_`` and ``_foreach_addcmul_`` of the second
#: (2 + 3), ``_foreach_sqrt`` (2), ``_foreach_div_`` and ``_foreach_add_`` of the denominator (2 + 2),
#: ``_foreach_addcdiv_`` into the parameter (4): 20.
ADAMW_PASSES = {AdamWImpl.FUSED: 7, AdamWImpl.FOREACH: 20}
#: The z-score of the 90% quantile of a normal (an 80% interval is +-1.2816 sigma); a median absolute error is 0.6745 sigma.
Z80, MEDIAN_ABS_Z = 1.2815515655446004, 0.6744897501960817
_NETWORK = {"c10d._allgather_base_": (GATHER, "all_gather"), "c10d._reduce_scatter_base_": (SCATTER, "reduce_scatter"),
            "c10d.allreduce_": (SCATTER, "all_reduce")}  # fmt: skip
_TENSOR_PARALLEL = {"_c10d_functional.all_reduce": "all_reduce", "_c10d_functional.all_gather_into_tensor": "all_gather",
                    "_c10d_functional.reduce_scatter_tensor": "reduce_scatter"}  # fmt: skip
_FREE = frozenset({"_c10d_functional.wait_tensor"})
_COPY_OUT = "fsdp.split_with_sizes_copy"


@dataclass(frozen=True)
class _Pricing:
    """What prices a call: the device, its kernel table, the dtype, the links and the two groups."""

    hardware: Hardware
    table: Calibration
    dtype: str
    links: Links | None
    dp: Group
    tp: Group
    compiled: bool
    reduce_scale: float = 1.0

    def comm(self, kind: str, nbytes: float, group: Group) -> float:
        if group.ranks <= 1:
            return 0.0
        if self.links is None:
            raise InvalidInputError(
                f"{self.hardware.name}: no published links between its GPUs; a sharded step's communication cannot be priced"
            )
        return collective_seconds(kind, nbytes, group, self.links, self.hardware.name)


class _Blocks:
    """The checkpointable block a module path belongs to (the longest block path that prefixes it)."""

    def __init__(self, blocks: Sequence[str]) -> None:
        self.index = {name: i for i, name in enumerate(blocks)}
        self.cache: dict[str | None, int] = {None: -1}

    def of(self, module: str | None) -> int:
        if module not in self.cache:
            assert module is not None
            parts = module.split(".")
            found = -1
            for n in range(len(parts), 0, -1):
                found = self.index.get(".".join(parts[:n]), -1)
                if found >= 0:
                    break
            self.cache[module] = found
        return self.cache[module]


def _collective(r: OpRecord, p: _Pricing, block: int) -> Item | None:
    """FSDP's collectives over the ``dp`` group (on the network), tensor parallelism's over ``tp`` (blocking);
    bytes: the gathered tensor of an all-gather, the full input of a reduction."""
    if r.op in _FREE:
        return None
    backward = r.phase is not Phase.FORWARD
    if r.op in _NETWORK:
        kind, name = _NETWORK[r.op]
        nbytes = r.cost.bytes_written if name == "all_gather" else r.cost.bytes_read * p.reduce_scale
        return Item(kind, p.comm(name, nbytes, p.dp), block=block, backward=backward, op=r.op)
    name = _TENSOR_PARALLEL[r.op]
    nbytes = r.cost.bytes_written if name == "all_gather" else r.cost.bytes_read
    return Item(BLOCKING, p.comm(name, nbytes, p.tp), block=block, backward=backward, op=r.op)


def _kernel(r: OpRecord, p: _Pricing, block: int) -> Item | None:
    backward = r.phase is not Phase.FORWARD
    host = 0.0 if p.compiled else host_seconds(r, p.table)
    if r.status is OpStatus.ZERO_COST or not (r.op.startswith("aten.") or r.op.startswith("fsdp.")):
        return None if p.compiled or host == 0.0 else Item(KERNEL, 0.0, host, "view", block=block, backward=backward, op=r.op)
    seconds = kernel_seconds(r, p.dtype, p.hardware, p.table)
    klass = op_class(r.op, r.input_shapes)
    flops = float(r.cost.flops) * float(r.work_fraction)
    return Item(KERNEL, seconds, host, klass, flops, block, backward, consumes=r.op == _COPY_OUT, op=r.op)


def step_items(step: StepRecord, p: _Pricing, blocks: Sequence[str]) -> list[Item]:
    """The dry run's calls as timeline items, in order (compiled: element-wise chains fused, :func:`~graphprof.cost.fusion.fold_chains`)."""
    where = _Blocks(blocks)
    modules = step.modules or [None] * len(step.records)
    records = fold_chains(step.records) if p.compiled else step.records
    if p.compiled:
        modules = fold_alongside(step.records, modules)
    items = []
    for r, module in zip(records, modules, strict=True):
        block = where.of(module)
        is_comm = r.op in _NETWORK or r.op in _TENSOR_PARALLEL or r.op in _FREE
        item = _collective(r, p, block) if is_comm else _kernel(r, p, block)
        if item is not None:
            items.append(item)
    return items


def _replayed(forward: Sequence[Item], policy: ActivationCheckpoint) -> list[Item]:
    """What a block's recomputation runs: every kernel and tensor-parallel collective (``full``), or those
    torchtitan's selective policy does not save: attention's output and every other ``mm`` (the first,
    third, ...) are saved; its all-reduces are not in the policy's list, so they run again."""
    out, mms = [], 0
    for item in forward:
        if item.kind == BLOCKING:
            out.append(replace(item, recompute=True, backward=True))
            continue
        if item.kind != KERNEL or item.seconds <= 0.0 or item.consumes:
            continue
        if policy is ActivationCheckpoint.SELECTIVE:
            if item.klass == "attention":
                continue
            if item.op == "aten.mm":
                mms += 1
                if mms % 2 == 1:
                    continue
        out.append(replace(item, recompute=True, backward=True))
    return out


def with_recompute(items: Sequence[Item], policy: ActivationCheckpoint) -> list[Item]:
    """``items`` with each block's recomputation placed before the block's first backward kernel."""
    if policy is ActivationCheckpoint.NONE:
        return list(items)
    forward: dict[int, list[Item]] = {}
    for item in items:
        if not item.backward and item.block >= 0:
            forward.setdefault(item.block, []).append(item)
    out: list[Item] = []
    done: set[int] = set()
    for item in items:
        if item.backward and item.kind == KERNEL and item.block >= 0 and item.block not in done and not item.consumes:
            done.add(item.block)
            out.extend(_replayed(forward.get(item.block, []), policy))
        out.append(item)
    return out


def _class_scales(table: Calibration, sign: float) -> dict[str, float]:
    """Per op class, the factor of the 80% interval's end: ``exp(sign x 1.2816 x median|error| / 0.6745)``
    from the table's held-in per-class median error (errors normal, one per class: every kernel of a class
    errs the same way)."""
    accuracy = table.accuracy or {}
    per_class = accuracy.get("per_class_median_abs_error", {}) or {}
    default = float(accuracy.get("median_abs_error", 0.1) or 0.1)
    classes = {*per_class, "matmul", "attention", "elementwise", "norm", "reduction", "gather", "conv", "pooling"}
    return {k: math.exp(sign * Z80 * float(per_class.get(k, default)) / MEDIAN_ABS_Z) for k in classes}


def _dtype_scale(dtype: str | None, run: str) -> float:
    """Bytes of an element in ``dtype`` over those in the compute dtype ``run`` (``None``: the same)."""
    wanted, compute = parse_dtype(dtype), parse_dtype(run)
    return 1.0 if wanted is None or compute is None else wanted.itemsize / compute.itemsize


def _optimizer_seconds(p: _Pricing, shard_bytes: float, implementation: AdamWImpl) -> float:
    rate = p.table.rates_for(p.dtype, "elementwise")
    return p.table.memory_seconds(ADAMW_PASSES[implementation] * shard_bytes, p.hardware.bandwidth) / rate.memory_fraction


def _model_flops(plain: Any) -> tuple[float, float, int] | None:
    """Model FLOPs per token of the unsharded step's forward x 3 (causal, and attention over the full
    square) and its tokens (:mod:`graphprof.cost.tokens`); ``None`` for a model without token inputs."""
    per_token = plain.per_token
    if per_token is None:
        return None
    full = 0.0
    for _, op in plain.iter_ops():
        if op.phase is Phase.FORWARD and (op.op in MODEL_FLOP_OPS or op.op in ATTENTION_OPS):
            full += 2.0 * op.cost.macs
    return per_token.model_train, 3.0 * full / per_token.tokens, per_token.tokens


def _pricing(spec: ShardSpec, hardware: Hardware, dtype: str, options: StepOptions) -> tuple[_Pricing, str | None]:
    table, note = kernel_table(hardware)
    dp, tp = group_layout(spec.fsdp, spec.tp, options.gpus_per_node)
    reduce_scale = _dtype_scale(options.reduce_dtype, dtype)
    return _Pricing(hardware, table, dtype, hardware.links, dp, tp, options.compiled, reduce_scale), note


def price_step(step: StepRecord, spec: ShardSpec, hardware: Hardware, plain: Any, blocks: Sequence[str], options: StepOptions) -> StepTime:
    """The step time of rank 0 of ``step`` on ``hardware`` (see the module docstring). ``plain``: the unsharded
    profile at the same per-rank batch (its model FLOPs per token); ``blocks``: the checkpointable blocks'
    module paths (FSDP's units)."""
    if options.grad_accum < 1:
        raise InvalidInputError(f"--grad-accum must be at least 1, got {options.grad_accum}")
    policy = ActivationCheckpoint.parse(options.checkpoint)
    p, derived_note = _pricing(spec, hardware, plain.dtype, options)
    items = with_recompute(step_items(step, p, blocks), policy)
    overlap = p.table.overlap
    mid, low, high = (simulate(items, overlap, s) for s in (None, _class_scales(p.table, -1.0), _class_scales(p.table, 1.0)))
    optimizer = _optimizer_seconds(p, step.shard_bytes * _dtype_scale(options.master_dtype, plain.dtype), AdamWImpl.parse(options.adamw))
    ga = options.grad_accum
    extra = step_physics(items, mid, hardware)
    breakdown = TimeBreakdown(ga * mid.compute_s, ga * mid.recompute_s, ga * mid.communication_s, optimizer, ga * mid.host_s,
                              ga * extra.attention_backward_s, ga * extra.sm_contention_s, ga * extra.sustained_clock_s)  # fmt: skip
    time_s = breakdown.total_s
    peak = hardware.peak_flops(plain.dtype)
    model = _model_flops(plain)
    tokens: dict[str, float | None] = dict.fromkeys(("tokens_per_step", "tokens_per_s_per_gpu", "model_flops_per_token",
                                                     "model_flops_per_token_full", "mfu", "mfu_full_square"))  # fmt: skip
    if model is not None:
        per_token, per_token_full, count = model
        step_tokens = count * ga / spec.tp
        rate = step_tokens / time_s
        tokens = {"tokens_per_step": step_tokens, "tokens_per_s_per_gpu": rate, "model_flops_per_token": per_token,
                  "model_flops_per_token_full": per_token_full, "mfu": per_token * rate / peak, "mfu_full_square": per_token_full * rate / peak}  # fmt: skip
    return StepTime(
        device=hardware.label, regime="compiled" if options.compiled else "eager", checkpoint=policy.value, grad_accum=ga,
        gpus_per_node=options.gpus_per_node, time_s=time_s, low_s=ga * (low.total_s + extra.total_s) + optimizer, high_s=ga * (high.total_s + extra.total_s) + optimizer,
        hfu=ga * mid.flops / time_s / peak, breakdown=breakdown, communication_total_s=ga * mid.collectives_s,
        kernels=ga * mid.kernels, kernel_model=p.table.source, notes=_notes(p, policy, options, derived_note), **tokens,
        adamw=options.adamw, master_dtype=options.master_dtype, master_scale=_dtype_scale(options.master_dtype, plain.dtype),
    )  # fmt: skip


def _notes(p: _Pricing, policy: ActivationCheckpoint, options: StepOptions, derived: str | None) -> tuple[str, ...]:
    links = p.links
    where = (
        "none published" if links is None else links.intra.label + ("" if links.inter is None else f"; between nodes {links.inter.label}")
    )
    notes = [
        f"step time of rank 0, {'compiled (element-wise chains fused, CUDA graphs: no launch cost)' if p.compiled else 'eager (a host launch per kernel)'}; "
        f"FSDP group {p.dp.ranks} ranks over {p.dp.nodes} node(s), tensor-parallel group {p.tp.ranks} over {p.tp.nodes}, "
        f"{options.gpus_per_node} GPUs a node; links: {where}",
        "collectives: NCCL's ring (and, for all-reduce across nodes, tree) cost at the datasheet bandwidth, no efficiency "
        "fitted; FSDP prefetch hides each all-gather under the previous unit's compute, tensor-parallel all-reduces block",
        f"mixed precision: gradients reduce-scattered in {options.reduce_dtype or p.dtype}, parameters and AdamW's moments "
        f"kept in {options.master_dtype or p.dtype} (torchtitan's FSDP2 defaults: float32 for both); AdamW {options.adamw}, "
        f"{ADAMW_PASSES[AdamWImpl.parse(options.adamw)]} passes over the shard",
        "interval: 80%, from the kernel table's per-class median error (each class errs as one); communication taken as exact",
        "MFU: model FLOPs (causal attention as the triangle, train = 3 x forward) x tokens/s / dense bf16 peak; "
        "mfu_full_square counts attention over the full square, as many published MFUs do; HFU: the FLOPs the kernels execute, recomputation included",
    ]
    if policy is not ActivationCheckpoint.NONE:
        notes.append(f"activation checkpointing '{policy.value}' priced as recomputation; the activation bytes above are without it")
    notes.append(physics_note(p.hardware))
    if derived is not None:
        notes.append(derived)
    return tuple(notes)

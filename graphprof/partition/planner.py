"""``partition``: split a model across devices from its costed module graph. One call, one :class:`Plan`.

The passes, each graphprof's own: :func:`graphprof.prepare` (on the meta device for a catalogue model, so
Llama-3-70B allocates nothing), ``.profile()``, ``.measure()`` when a device is the local CPU and no local
calibration of the stages' thread count predicts it, ``.graph()``
for the module graph with every edge; then units and cut bytes (:mod:`~graphprof.partition.units`), a
cost table (:mod:`~graphprof.partition.costs`), the exact program (:mod:`~graphprof.partition.solver`).

>>> import graphprof.partition as gp
>>> plan = gp.partition("resnet18", "rtx4090:1,jetson-orin:1", objective="throughput")
>>> [s.kind for s in plan.stages], plan.stages[0].first
(['rtx4090', 'jetson-orin'], 'conv1')
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from graphprof.base.choices import Objective
from graphprof.base.limits import require_count
from graphprof.devices.hardware import Hardware, read_local_hardware
from graphprof.devices.local import stale_reasons
from graphprof.errors import InvalidInputError
from graphprof.partition.costs import CostTable, measured_seconds, preset_seconds, shared_weights, table, unit_records
from graphprof.partition.devices import Device, Links, as_devices, kinds_of, parse_links
from graphprof.partition.plan import Plan, Stage, equal_layers, equal_params, make_stages
from graphprof.partition.solver import Problem, holds_copy, solve
from graphprof.partition.units import assign_nodes, choose_units, cut_bytes
from graphprof.prepared import PreparedModel, prepare

__all__ = ["partition", "plan_prepared", "prepare_and_plan", "prepare_for", "as_links", "problem_of", "cost_table"]


def problem_of(costs: CostTable, devices: Sequence[Device], links: Links) -> Problem:
    """The solver's plain-number problem for a cost table on these devices and links."""
    kinds = kinds_of(devices)
    first = {k: next(d for d in devices if d.kind == k) for k in kinds}
    return Problem(
        seconds=tuple(costs.seconds[k] for k in kinds),
        weight_bytes=tuple(u.weight_bytes + u.kv_bytes for u in costs.units),
        activation_bytes=tuple(u.activation_bytes for u in costs.units),
        cut_bytes=costs.cut_bytes,
        memory=tuple(first[k].memory_bytes for k in kinds),
        count=tuple(sum(1 for d in devices if d.kind == k) for k in kinds),
        bandwidth=tuple(tuple(links.between(a, b)[0] for b in kinds) for a in kinds),
        latency=tuple(tuple(links.between(a, b)[1] for b in kinds) for a in kinds),
        shared=tuple((w.units, w.weight_bytes) for w in costs.shared),
    )


def _kv_shape(prepared: PreparedModel, kv_len: int | None) -> tuple[int, int] | None:
    """``(batch, positions)`` of the KV cache: the first input's batch and length (or ``kv_len``)."""
    if kv_len == 0 or not any(n.rsplit(".", 1)[-1] in ("k_proj", "v_proj") for n, _ in prepared.model.named_modules()):
        return None
    first = next((t for t in torch.utils._pytree.tree_leaves((prepared.args, prepared.kwargs)) if isinstance(t, torch.Tensor)), None)
    if first is None or first.dim() < 2:
        return None
    return int(first.shape[0]), int(kv_len if kv_len is not None else first.shape[1])


def _measure(prepared: PreparedModel, threads: int, iters: int) -> Any:
    """The local CPU's measurement with ``threads`` intra-op threads (what each pipeline process gets)."""
    require_count(threads, "threads per process", high=os.cpu_count() or 1)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return prepared.measure(device="cpu", iters=iters, warmup=2, layer_runs=3, breakdown=False)
    finally:
        torch.set_num_threads(before)


def _local_predictor(stored: Hardware | None, threads: int) -> tuple[Hardware | None, str]:
    """``stored`` (the ``local`` preset as its file holds it, :func:`graphprof.devices.hardware.read_local_hardware`)
    when ``graphprof calibrate`` measured this CPU, with this torch, at ``threads`` threads (what each stage's
    process runs with: :func:`graphprof.devices.local.stale_reasons`), else ``None``; and a line saying why
    the times are measured instead."""
    if stored is None:
        return None, "cpu stage times measured: no local calibration (`graphprof calibrate --threads N` predicts them)"
    device = stored.measured or {}
    if device.get("threads") != threads:
        return None, (f"cpu stage times measured: the local calibration is of {device.get('threads')} thread(s), each stage "
                      f"runs {threads} (`graphprof calibrate --threads {threads}` predicts them)")  # fmt: skip
    stale = stale_reasons(device, threads)
    if stale:
        return (None, f"cpu stage times measured: the local calibration is stale ({'; '.join(stale)}); run `graphprof calibrate` again")
    return stored, ""


def cost_table(
    prepared: PreparedModel,
    devices: Sequence[Device],
    *,
    kv_len: int | None = None,
    threads: int = 1,
    iters: int = 10,
    stored: Hardware | None = None,
) -> tuple[CostTable, Any]:
    """The per-unit cost table of ``prepared`` on every kind of ``devices``, and the profile it came from.

    A ``cpu`` device's times are predicted by the local calibration ``stored`` (read by the caller:
    :func:`graphprof.devices.hardware.read_local_hardware`) when it was measured with the stages' thread
    count, else measured here (the table's source says which, and why)."""
    profile = prepared.profile()
    local = any(d.local for d in devices)
    predictor, why = _local_predictor(stored, threads) if local else (None, "")
    measurement = _measure(prepared, threads, iters) if local and predictor is None else None
    graph, _ = prepared.graph(detail=False, measurement=measurement)
    nodes = assign_nodes(graph, choose_units(prepared.model))
    units = unit_records(graph, nodes, prepared.model, profile, _kv_shape(prepared, kv_len))
    seconds, sources = {}, {}
    for kind in kinds_of(devices):
        device = next(d for d in devices if d.kind == kind)
        if device.hardware is None and predictor is not None:
            seconds[kind], _ = preset_seconds(profile, graph, nodes, predictor)
            sources[kind] = f"{kind}: predicted by the local calibration ({threads} thread(s), the plain forward's ops in place)"
        elif device.hardware is None and measurement is not None:
            seconds[kind], sources[kind] = measured_seconds(graph, nodes, measurement.forward.mean / 1e3)
            sources[kind] += f"; {why}"
        elif device.hardware is not None:
            seconds[kind], sources[kind] = preset_seconds(profile, graph, nodes, device.hardware)
    return table(units, cut_bytes(graph, nodes), seconds, sources, shared_weights(prepared.model, nodes, profile)), profile


def plan_prepared(
    prepared: PreparedModel,
    devices: str | Sequence[Device],
    *,
    objective: Objective | str = Objective.LATENCY,
    links: Links | None = None,
    kv_len: int | None = None,
    threads: int = 1,
    iters: int = 10,
) -> Plan:
    """The plan for a model already prepared (see :func:`partition`)."""
    objective = Objective.parse(objective)
    devs = as_devices(devices)
    if not devs:
        raise InvalidInputError("no devices given (e.g. --devices orin-agx:2,rtx4090:1 or cpu:2)")
    links = links or Links()
    stored = read_local_hardware() if any(d.local for d in devs) else None  # the one read of the local calibration
    costs, profile = cost_table(prepared, devs, kv_len=kv_len, threads=threads, iters=iters, stored=stored)
    kinds = kinds_of(devs)
    problem = problem_of(costs, devs, links)
    start = time.perf_counter()
    solution = solve(problem, objective, names=[u.name for u in costs.units], kinds=kinds)
    solve_seconds = time.perf_counter() - start
    batch = profile.inputs[0].shape[0] if profile.inputs and profile.inputs[0].shape else 1
    notes = [f"times: {costs.time_source[k]}" for k in kinds]
    if any(u.kv_bytes for u in costs.units):
        notes.append("memory includes each attention layer's KV cache for the input's batch and length (kv_len)")
    notes += _cores_note(devs, threads)
    stages = make_stages(problem, costs, devs, solution, kinds)
    notes += _shared_notes(costs, stages)
    return Plan(
        model_name=prepared.name, objective=objective, dtype=profile.dtype,
        inputs=", ".join(f"{i.name}{list(i.shape)}" for i in profile.inputs), micro_batch=batch, devices=devs,
        links=links, table=costs, stages=stages,
        baselines=(equal_layers(problem, costs, devs, kinds), equal_params(problem, costs, devs, kinds)),
        solve_seconds=solve_seconds, notes=tuple(notes),
    )  # fmt: skip


def prepare_for(
    model_or_name: nn.Module | str,
    devices: Sequence[Device],
    *,
    weights: bool = False,
    batch_size: int | None = None,
    dtype: str | torch.dtype | None = None,
    **prepare_options: Any,
) -> PreparedModel:
    """Prepare the model for planning: on the meta device for a catalogue model unless a ``cpu`` device
    (measured here) or ``weights`` (a run) needs its weights."""
    if isinstance(model_or_name, str) and (weights or any(d.local for d in devices)):
        prepare_options.setdefault("device", "cpu")
    return prepare(model_or_name, batch_size=batch_size, dtype=dtype, **prepare_options)


def as_links(links: Links | str | Sequence[str] | None, devices: Sequence[Device]) -> Links:
    """A :class:`Links` from ``--link`` items (or one of them), checked against the device kinds."""
    if isinstance(links, Links):
        return links
    items = [links] if isinstance(links, str) else list(links or ())
    return parse_links(items, kinds_of(devices))


def partition(
    model_or_name: nn.Module | str,
    devices: str | Sequence[Device],
    *,
    objective: Objective | str = Objective.LATENCY,
    links: Links | str | Sequence[str] | None = None,
    batch_size: int | None = None,
    dtype: str | torch.dtype | None = None,
    kv_len: int | None = None,
    threads: int = 1,
    iters: int = 10,
    **prepare_options: Any,
) -> Plan:
    """Split ``model_or_name`` across ``devices`` (a spec such as ``"orin-agx:2,rtx4090:1"`` or ``"cpu:3"``).

    ``objective`` is ``"latency"`` (one request) or ``"throughput"`` (pipelined micro-batches of
    ``batch_size``); ``links`` a :class:`Links` or ``--link`` items (``"1"``: 1 GB/s between every pair).
    A ``cpu`` device measures this machine with ``threads`` threads (``iters`` timed forwards), which
    needs the model's weights: a named model is then built on the CPU, else on the meta device.
    """
    return prepare_and_plan(model_or_name, devices, objective=objective, links=links, kv_len=kv_len, threads=threads, iters=iters,
                            batch_size=batch_size, dtype=dtype, **prepare_options)[1]  # fmt: skip


def prepare_and_plan(
    model_or_name: nn.Module | str, devices: str | Sequence[Device], *, weights: bool = False, objective: Objective | str = Objective.LATENCY,
    links: Links | str | Sequence[str] | None = None, kv_len: int | None = None, threads: int = 1, iters: int = 10, **prepare_options: Any,
) -> tuple[PreparedModel, Plan]:  # fmt: skip
    """:func:`partition` keeping the prepared model, built with its weights where ``weights`` asks (a run of
    the plan needs them)."""
    devs = as_devices(devices)
    prepared = prepare_for(model_or_name, devs, weights=weights, **prepare_options)
    return prepared, plan_prepared(
        prepared, devs, objective=objective, links=as_links(links, devs), kv_len=kv_len, threads=threads, iters=iters
    )


def _cores_note(devices: Sequence[Device], threads: int) -> list[str]:
    """A note when the ``cpu`` devices (one process each, ``threads`` threads) want more cores than this
    machine has: each stage's time was measured alone, and run together they would share the cores."""
    local = sum(d.local for d in devices)
    cores = os.cpu_count() or 1
    if local * threads <= cores:
        return []
    return [
        f"{local} cpu devices x {threads} thread(s) ask for {local * threads} cores and this machine has {cores}: "
        "each stage's time is measured alone, so a plan using more stages than cores would not run as fast (--run refuses it)"
    ]


def _shared_notes(costs: CostTable, stages: Sequence[Stage]) -> list[str]:
    """One line per tied weight: the stage that counts it, and the later stages that keep a copy of their own."""
    notes = []
    for weight in costs.shared:
        tied = f"tied weights: {' is '.join(weight.names)} ({weight.params:,} parameters)"
        first = next(s.index for s in stages if s.start <= weight.units[0] < s.end)
        copies = [str(s.index) for s in stages if holds_copy(weight.units, s.start, s.end)]
        if not copies:
            notes.append(f"{tied}: held once, by stage {first}")
            continue
        which = f"stage {copies[0]} keeps a copy" if len(copies) == 1 else f"stages {', '.join(copies)} keep a copy each"
        notes.append(f"{tied}: held by stage {first}, and {which} as torch.distributed.pipelining builds the stages")
    return notes

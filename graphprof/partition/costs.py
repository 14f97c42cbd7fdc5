"""Per-unit cost table: time on each device kind, memory, and bytes at each cut, from graphprof's own figures.

Nothing here derives a cost by hand; each figure comes from a graphprof pass over one prepared model:

* **time on a preset** (``rtx4090``, ``h100``, ...): the roofline of the profile on that device,
  :func:`graphprof.cost.roofline.classify`; a layer's *predicted* time where the preset has a calibration
  table, else its roofline lower bound ``max(flops / peak, bytes / bandwidth)`` (optimistic: no launch
  cost). The source is named per kind in the table and the plan;
* **time on the local CPU** (``cpu``): the module graph's measured node times
  (:meth:`graphprof.PreparedModel.measure` then :func:`graphprof.graph.measured.with_measured_times`),
  each unit's share of the layers' sum applied to the measured plain forward, so the units sum to the
  measured forward (the model's own Python between layers is spread in proportion);
* **weights**: the module graph's parameters per node (each parameter counted at its first user) at the
  profile's dtype, plus the unit's buffers; a parameter several units hold (tied weights: GPT-2's
  ``lm_head.weight`` is ``transformer.wte.weight``) is listed once more as a :class:`SharedWeight`, by the
  units whose modules hold it, since ``torch.distributed.pipelining`` gives each stage using it a copy
  (:func:`graphprof.partition.solver.holds_copy`);
* **activations**: the largest tensor traffic of one node of the unit (its incoming and outgoing edges'
  bytes), an estimate of the working set a stage needs beside what it receives and sends;
* **KV cache** (models with ``k_proj``/``v_proj`` projections, as LLaMA, Mistral, Qwen):
  ``batch x kv_len x (k_proj.out_features + v_proj.out_features) x itemsize`` per attention module;
* **bytes at each cut**: :func:`graphprof.partition.units.cut_bytes` from the graph's edges.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from graphprof.base.record import Record
from graphprof.base.tied import tied_groups
from graphprof.cost.result import Profile
from graphprof.cost.roofline import classify
from graphprof.devices.hardware import Hardware
from graphprof.graph.model import Graph
from graphprof.partition.units import UnitNodes, unit_of

__all__ = [
    "Unit", "SharedWeight", "CostTable", "unit_records", "shared_weights", "preset_seconds", "measured_seconds", "kv_cache_bytes",
]  # fmt: skip


@dataclass(frozen=True)
class Unit(Record):
    """One unit (a module a stage can begin at) and what it holds; bytes are integers."""

    name: str
    nodes: int
    params: int
    weight_bytes: int
    activation_bytes: int
    kv_bytes: int
    flops: int


@dataclass(frozen=True)
class SharedWeight:
    """One parameter several units hold (tied), under ``names`` (one per unit, in ``units``' order).

    ``units`` ascend; the first one's ``weight_bytes`` already count it. A stage using it that does not
    hold that first unit keeps a copy of its own, of ``params`` (``weight_bytes``) more.
    """

    names: tuple[str, ...]
    units: tuple[int, ...]
    params: int
    weight_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {"names": list(self.names), "units": list(self.units), "params": self.params, "weight_bytes": self.weight_bytes}


@dataclass(frozen=True)
class CostTable:
    """Units in execution order, seconds per unit on each device kind, and bytes at each cut.

    ``cut_bytes[c]`` is the cut before unit ``c`` (``cut_bytes[0]`` and ``cut_bytes[-1]`` are 0);
    ``seconds[kind][u]`` one micro-batch through unit ``u``; ``time_source[kind]`` says where it came from;
    ``shared`` the parameters several units hold.
    """

    units: tuple[Unit, ...]
    cut_bytes: tuple[int, ...]
    seconds: Mapping[str, tuple[float, ...]]
    time_source: Mapping[str, str]
    shared: tuple[SharedWeight, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "units": [u.to_dict() for u in self.units],
            "cut_bytes": list(self.cut_bytes),
            "seconds": {k: list(v) for k, v in self.seconds.items()},
            "time_source": dict(self.time_source),
            "shared_weights": [w.to_dict() for w in self.shared],
        }


def kv_cache_bytes(module: nn.Module, batch: int, kv_len: int, itemsize: int) -> int:
    """KV cache a module's attention layers keep: keys and values of ``kv_len`` positions per sample."""
    width = sum(
        m.out_features for name, m in module.named_modules() if isinstance(m, nn.Linear) and name.rsplit(".", 1)[-1] in ("k_proj", "v_proj")
    )
    return batch * kv_len * width * itemsize


def _bytes_per_param(profile: Profile) -> float:
    return profile.param_bytes / profile.total_params if profile.total_params else 0.0


def shared_weights(model: nn.Module, nodes: UnitNodes, profile: Profile) -> tuple[SharedWeight, ...]:
    """Each parameter the modules of two units or more hold (:func:`graphprof.base.tied.tied_groups`).

    A unit holds a name when the name's module lies in it; a name outside every unit the run reached (T5's
    ``shared``, whose encoder and decoder call it as their ``embed_tokens``) holds nothing. A tied weight
    read by a function outside its module (``F.linear(h, wte.weight)`` in the root's forward) is missed.
    """
    index = {name: u for u, name in enumerate(nodes.units)}
    known, found = set(index), []
    for group in tied_groups(model):
        held: dict[int, str] = {}
        for name in group:
            unit = unit_of(name.rpartition(".")[0], known)
            if unit is not None:
                held.setdefault(index[unit], name)
        if len(held) > 1:
            units = tuple(sorted(held))
            params = model.get_parameter(group[0]).numel()
            found.append(SharedWeight(tuple(held[u] for u in units), units, params, round(params * _bytes_per_param(profile))))
    return tuple(found)


def unit_records(graph: Graph, nodes: UnitNodes, model: nn.Module, profile: Profile, kv: tuple[int, int] | None) -> tuple[Unit, ...]:
    """One :class:`Unit` per unit; ``kv`` is ``(batch, kv_len)`` for a model with a KV cache, else ``None``."""
    per_param = _bytes_per_param(profile)
    itemsize = max(1, round(per_param))
    params: dict[int, int] = defaultdict(int)
    flops: dict[int, int] = defaultdict(int)
    count: dict[int, int] = defaultdict(int)
    traffic: dict[int, int] = defaultdict(int)
    for edge in graph.edges:
        traffic[edge.src] += edge.bytes
        traffic[edge.dst] += edge.bytes
    activation: dict[int, int] = defaultdict(int)
    for node in graph.nodes:
        u = nodes.node_unit[node.id]
        if u < 0:
            continue
        params[u] += node.params
        flops[u] += node.flops
        count[u] += 1
        activation[u] = max(activation[u], traffic[node.id])
    units = []
    for u, name in enumerate(nodes.units):
        module = model.get_submodule(name)
        buffers = sum(b.numel() * b.element_size() for b in module.buffers())
        kv_bytes = kv_cache_bytes(module, kv[0], kv[1], itemsize) if kv is not None else 0
        units.append(Unit(name, count[u], params[u], round(params[u] * per_param) + buffers, activation[u], kv_bytes, flops[u]))
    return tuple(units)


def _by_unit(graph: Graph, nodes: UnitNodes, per_node: Mapping[int, float]) -> list[float]:
    totals = [0.0] * len(nodes.units)
    for node in graph.nodes:
        u = nodes.node_unit[node.id]
        if u >= 0:
            totals[u] += per_node.get(node.id, 0.0)
    return totals


def preset_seconds(profile: Profile, graph: Graph, nodes: UnitNodes, hardware: Hardware) -> tuple[tuple[float, ...], str]:
    """Seconds per unit on ``hardware`` (predicted where it has a calibration table, else the roofline
    lower bound) and the name of that source."""
    roofline = classify(profile, hardware)
    by_name = {n.name: n.id for n in graph.nodes}
    calibrated = roofline.calibration is not None
    per_node = {
        by_name[layer.name]: (layer.predicted_seconds if calibrated else layer.seconds) or 0.0
        for layer in roofline.layers
        if layer.name in by_name
    }
    source = f"{hardware.name}: predicted (calibrated)" if calibrated else f"{hardware.name}: roofline lower bound"
    return tuple(_by_unit(graph, nodes, per_node)), source


def measured_seconds(graph: Graph, nodes: UnitNodes, forward_seconds: float) -> tuple[tuple[float, ...], str]:
    """Seconds per unit from a graph carrying measured node times, scaled to sum to ``forward_seconds``."""
    per_node = {n.id: (n.measured_ms or 0.0) / 1e3 for n in graph.nodes}
    totals = _by_unit(graph, nodes, per_node)
    whole = sum(totals)
    scale = forward_seconds / whole if whole > 0 else 0.0
    return tuple(t * scale for t in totals), "measured on this machine (layer shares of the measured forward)"


def table(
    units: Sequence[Unit],
    cuts: Sequence[int],
    seconds: Mapping[str, tuple[float, ...]],
    sources: Mapping[str, str],
    shared: Sequence[SharedWeight] = (),
) -> CostTable:
    """A :class:`CostTable` from its parts (kinds in the given order)."""
    return CostTable(tuple(units), tuple(cuts), dict(seconds), dict(sources), tuple(shared))

"""The units a plan cuts between, and the bytes that cross each cut, from the module graph.

A *unit* is a module that a pipeline stage begins at: ``torch.distributed.pipelining`` splits a model
*before* a named submodule's call (``SplitPoint.BEGINNING``), so every cut point is the start of one.
:func:`choose_units` walks the module tree from the root and opens (replaces by its children)

* the root itself, every ``nn.Sequential`` / ``nn.ModuleList`` / ``nn.ModuleDict``, and
* any module holding more than half of the model's parameters (a transformer's ``model``, a ViT's
  ``encoder``),

so ResNet-50 becomes ``conv1, bn1, relu, maxpool, layer1.0 .. layer4.2, avgpool, fc`` and a LLaMA
``model.embed_tokens, model.rotary_emb, model.layers.0 .. N, model.norm, lm_head``.

Every node of the module graph then belongs to the unit whose path prefixes its module; a node outside
every unit (a function run by an opened module, such as ResNet's ``flatten`` or LLaMA's mask ops) runs,
once the model is split, in the stage of the unit before it, and is counted there (before the first
unit: in the first).

**Bytes crossing a cut.** A tensor produced in unit ``a`` (graph inputs: before unit 0) and read last in
unit ``b`` crosses every cut between them, ``a+1 .. b``: it is sent to the next stage, and on from there
when a later stage reads it, as the pipeline's stages pass it along. Residual edges and values read by
every layer (LLaMA's rotary ``cos``/``sin`` and its mask) count this way. A tensor is one producer node
and one shape and dtype; consumers reading the same tensor count it once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch import nn

from graphprof.graph.model import Graph

__all__ = ["UnitNodes", "choose_units", "unit_of", "assign_nodes", "cut_bytes"]

_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)


def choose_units(model: nn.Module, *, share: float = 0.5) -> list[str]:
    """Module paths of the units, in registration order (the graph gives execution order)."""
    total = sum(p.numel() for p in model.parameters()) or 1

    def opened(path: str, module: nn.Module) -> bool:
        if not any(True for _ in module.children()):
            return False
        if path == "" or isinstance(module, _CONTAINERS):
            return True
        return sum(p.numel() for p in module.parameters()) > share * total

    units: list[str] = []
    stack: list[tuple[str, nn.Module]] = [("", model)]
    while stack:
        path, module = stack.pop()
        if opened(path, module):
            children = [(f"{path}.{name}" if path else name, child) for name, child in module.named_children()]
            stack.extend(reversed(children))
        else:
            units.append(path)
    return units


@dataclass(frozen=True)
class UnitNodes:
    """Units in execution order, and for each module-graph node id the index of its unit (-1: an input)."""

    units: tuple[str, ...]
    node_unit: dict[int, int]


def unit_of(path: str, units: set[str]) -> str | None:
    """The unit a module path lies in (the longest of ``units`` prefixing it), or ``None``. A model with no
    children is one unit, the root (``""``), which every path lies in."""
    while path:
        if path in units:
            return path
        path = path.rpartition(".")[0]
    return "" if "" in units else None


def assign_nodes(graph: Graph, units: Sequence[str]) -> UnitNodes:
    """Each graph node's unit; units ordered by their first node, units the run never reached dropped."""
    known = set(units)
    owner: dict[int, str | None] = {}
    order: dict[str, None] = {}
    for node in graph.nodes:
        if node.kind == "input":
            continue
        unit = unit_of(node.module or node.name, known)
        owner[node.id] = unit
        if unit is not None:
            order.setdefault(unit)
    index = {u: i for i, u in enumerate(order)}
    node_unit: dict[int, int] = {}
    current = 0  # nodes before the first unit's run in the first stage
    for node in graph.nodes:
        unit = owner.get(node.id)
        if node.kind == "input":
            node_unit[node.id] = -1
            continue
        if unit is not None:
            current = index[unit]
        node_unit[node.id] = current
    return UnitNodes(tuple(order), node_unit)


def cut_bytes(graph: Graph, nodes: UnitNodes) -> list[int]:
    """Bytes crossing each cut: entry ``c`` (1 .. units-1) is the cut before unit ``c``; 0 and L are 0."""
    n = len(nodes.units)
    last_reader: dict[tuple[int, tuple[int, ...], str], tuple[int, int]] = {}
    for edge in graph.edges:
        key = (edge.src, edge.shape, edge.dtype)
        reader = nodes.node_unit[edge.dst]
        previous = last_reader.get(key)
        if previous is None or reader > previous[0]:
            last_reader[key] = (reader, edge.bytes)
    diff = [0] * (n + 2)
    for (src, _, _), (reader, nbytes) in last_reader.items():
        first_cut = nodes.node_unit[src] + 1
        if reader >= first_cut:
            diff[max(first_cut, 1)] += nbytes
            diff[reader + 1] -= nbytes
    crossing, running = [0] * (n + 1), 0
    for c in range(1, n):
        running += diff[c]
        crossing[c] = running
    return crossing

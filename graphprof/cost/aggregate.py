"""Roll layer costs up the module tree: ``layer1.0.conv1`` -> ``layer1.0`` -> ``layer1`` -> model.

A row belongs to the module path it was attributed to and to every ancestor of it; the model itself
is the path ``""``. A module's cost is the exact sum of the rows beneath it, so the root's cost equals
the profile's total.
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn

from graphprof.cost.result import LayerRow, ModuleRow
from graphprof.formulas import Cost
from graphprof.run.params import packed_tensors

__all__ = ["aggregate_modules", "ancestors"]


def ancestors(path: str | None) -> list[str]:
    """``"layer1.0.conv1"`` -> ``["", "layer1", "layer1.0", "layer1.0.conv1"]``."""
    if not path:
        return [""]
    parts = path.split(".")
    return [""] + [".".join(parts[: i + 1]) for i in range(len(parts))]


def aggregate_modules(rows: Iterable[LayerRow], model: nn.Module) -> list[ModuleRow]:
    """Module rows in the model's own order (``named_modules``), each with its subtree's cost.

    Paths a row names that the model does not have (a name the capture could not map back) are kept,
    after the model's modules, so no cost is lost.
    """
    forward: dict[str, Cost] = {}
    backward: dict[str, Cost] = {}
    nodes: dict[str, int] = {}
    for row in rows:
        for path in ancestors(row.module):
            forward[path] = forward.get(path, Cost()) + row.forward
            backward[path] = backward.get(path, Cost()) + row.backward
            nodes[path] = nodes.get(path, 0) + 1
    modules = dict(model.named_modules(remove_duplicate=False))
    order = [p for p in modules if p in nodes] + [p for p in nodes if p not in modules]
    params = subtree_parameters(modules)
    out: list[ModuleRow] = []
    for path in order:
        module = modules.get(path)
        out.append(
            ModuleRow(
                path=path,
                type=type(module).__name__ if module is not None else "?",
                depth=0 if path == "" else path.count(".") + 1,
                params=params.get(path, 0),
                forward=forward[path],
                backward=backward[path],
                nodes=nodes[path],
            )
        )
    return out


def subtree_parameters(modules: dict[str, nn.Module]) -> dict[str, int]:
    """:func:`graphprof.run.params.count_parameters` of every module in ``modules`` (``named_modules`` with
    duplicates), from one walk instead of one per module: each tensor a module holds itself (its parameters
    and packed quantized weights) counts once in the module and in each ancestor, however many paths reach
    it. ``tests/test_aggregate.py`` holds it to ``count_parameters`` on shared and quantized modules."""
    held: dict[str, dict[int, int]] = {path: {} for path in modules}
    for path, module in modules.items():
        own = [p for p in module._parameters.values() if p is not None] + packed_tensors(module)
        for above in ancestors(path):
            if above in held:
                held[above].update((id(t), t.numel()) for t in own)
    return {path: sum(counts.values()) for path, counts in held.items()}

"""Which linear layers tensor parallelism splits, and how: a plan read from the model's data flow.

Megatron's layout pairs linear layers: the first of a pair is split by columns (each rank computes a
slice of its outputs: attention's q/k/v, an MLP's up and gate projections), the second by rows (each rank
reduces its slice of inputs to a partial sum, all-reduced: attention's output projection, an MLP's down
projection); what runs between them (the attention per head, the activation) works on each rank's slice.

The plan is read from one forward of the step's copy, not from layer names: every ``nn.Linear``'s input is
followed back through the autograd graph to the linear layers that feed it (its *sources*), within the
block it belongs to (a decoder layer: :func:`~graphprof.sharding.wraps.shard_units`), so a linear's
*depth* is 0 when no other linear of its block feeds it and one more than its deepest source otherwise.
A block whose linear layers alternate (depths 0, 1, 2, 3, ...: even ones feed odd ones, and the last is
odd) is split column-wise at even depths and row-wise at odd ones; in a LLaMA block q/k/v are at depth 0,
the output projection at 1, gate and up at 2, down at 3, which is the plan HF's ``base_model_tp_plan``
writes by hand. Other linear layers (an LM head, a classifier) and every other module stay replicated.
Where no block has such a chain, the model itself is tried as one block (a plain ``Linear, GELU,
Linear``). A model where neither is found is refused.

What runs between a pair must work per slice (attention per head, element-wise functions), as in every
transformer; a layer norm between them would be computed on a slice, which the plan cannot see.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from graphprof.errors import InvalidInputError

__all__ = ["PlannedLinear", "TensorPlan", "derive_tp_plan", "check_tp_plan"]


@dataclass(frozen=True)
class PlannedLinear:
    """One linear layer of the plan, as the forward met it: its name, its split (``colwise`` or
    ``rowwise``), its parameters' bytes, and the bytes of its input and output in that forward
    (``input_needs_grad``: whether the backward computes the input's gradient, which a column-wise layer
    then all-reduces)."""

    name: str
    style: str
    weight_bytes: int
    bias_bytes: int
    input_bytes: int
    output_bytes: int
    input_needs_grad: bool
    features: int


@dataclass(frozen=True)
class TensorPlan:
    """The linear layers split column- and row-wise, in the order the forward runs them."""

    layers: tuple[PlannedLinear, ...]

    def names(self, style: str) -> tuple[str, ...]:
        return tuple(p.name for p in self.layers if p.style == style)

    def sharded_bytes(self) -> int:
        """Parameter bytes the plan splits: every planned weight, and the column-wise layers' biases
        (a row-wise layer's bias is added once, after the all-reduce, and stays whole)."""
        return sum(p.weight_bytes + (p.bias_bytes if p.style == "colwise" else 0) for p in self.layers)

    def describe(self) -> str:
        """``colwise: q_proj x2, k_proj x2; rowwise: o_proj x2``: the layers by their last names (by the
        name with every index a ``*`` where the last is an index: ``blocks.*.0 x3``)."""
        parts = []
        for style in ("colwise", "rowwise"):
            counts: dict[str, int] = {}
            for name in self.names(style):
                leaf = name.rpartition(".")[2]
                if leaf.isdigit():
                    leaf = ".".join("*" if part.isdigit() else part for part in name.split("."))[:-1] + leaf
                counts[leaf] = counts.get(leaf, 0) + 1
            listed = ", ".join(f"{leaf} x{n}" if n > 1 else leaf for leaf, n in counts.items())
            parts.append(f"{style}: {listed}")
        return "; ".join(parts)


class _Flow:
    """What one forward shows: each linear's input (its autograd node) and output node, by block."""

    def __init__(self, model: nn.Module, blocks: list[nn.Module]) -> None:
        self.linears: dict[nn.Module, str] = {m: n for n, m in model.named_modules() if isinstance(m, nn.Linear)}
        self.block_of = {lin: i for i, b in enumerate(blocks) for lin in b.modules() if lin in self.linears}
        self.inputs: dict[nn.Module, torch.Tensor] = {}
        self.outputs: dict[Any, nn.Module] = {}
        self.order: list[nn.Module] = []
        self.stops: set[Any] = set()
        self.blocks = blocks

    def hooks(self) -> list[Any]:
        handles = []
        for lin in self.linears:
            handles.append(lin.register_forward_hook(self._seen))
        for block in self.blocks:
            handles.append(block.register_forward_pre_hook(self._entered, with_kwargs=True))
        return handles

    def _entered(self, _module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        given = [*args, *kwargs.values()]
        self.stops.update(a.grad_fn for a in given if isinstance(a, torch.Tensor) and a.grad_fn is not None)

    def _seen(self, module: nn.Module, args: tuple[Any, ...], out: Any) -> None:
        if module not in self.inputs and isinstance(out, torch.Tensor):
            self.inputs[module] = args[0]
            self.order.append(module)
            self.outputs[out.grad_fn] = module

    def sources(self, lin: nn.Module) -> set[nn.Module]:
        """The linear layers of ``lin``'s block whose outputs reach its input without passing another linear."""
        found: set[nn.Module] = set()
        start = self.inputs[lin].grad_fn
        stack, seen = [start], {start}
        while stack:
            node = stack.pop()
            if node is None or node in self.stops:
                continue
            owner = self.outputs.get(node)
            if owner is not None:
                if self.block_of.get(owner) == self.block_of.get(lin):
                    found.add(owner)
                continue
            for child, _ in node.next_functions:
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
        return found


def _alternating(members: list[nn.Module], flow: _Flow) -> dict[nn.Module, str] | None:
    """``colwise``/``rowwise`` per linear of one block, or ``None`` where its linears do not alternate."""
    sources = {lin: flow.sources(lin) for lin in members}
    depth: dict[nn.Module, int] = {}
    for lin in members:  # forward order: every source was met before
        depth[lin] = 1 + max((depth[s] for s in sources[lin]), default=-1)
    fed = {s for found in sources.values() for s in found}
    deepest = max(depth.values(), default=-1)
    if deepest < 1 or deepest % 2 == 0 or any(d % 2 == 0 and lin not in fed for lin, d in depth.items()):
        return None
    if any(depth[s] % 2 == depth[lin] % 2 for lin in members for s in sources[lin]):
        return None  # a slice would meet a whole tensor: not a chain of pairs
    return {lin: "colwise" if d % 2 == 0 else "rowwise" for lin, d in depth.items()}


def _planned(lin: nn.Module, name: str, style: str, flow: _Flow) -> PlannedLinear:
    assert isinstance(lin, nn.Linear)
    x = flow.inputs[lin]
    size = lin.weight.element_size()
    out_numel = x.numel() // lin.in_features * lin.out_features
    return PlannedLinear(
        name=name, style=style, weight_bytes=lin.weight.numel() * size,
        bias_bytes=0 if lin.bias is None else lin.bias.numel() * size, input_bytes=x.numel() * x.element_size(),
        output_bytes=out_numel * x.element_size(), input_needs_grad=x.requires_grad,
        features=lin.out_features if style == "colwise" else lin.in_features,
    )  # fmt: skip


def _plan_blocks(flow: _Flow) -> TensorPlan:
    styles: dict[nn.Module, str] = {}
    for i in range(len(flow.blocks)):
        members = [lin for lin in flow.order if flow.block_of.get(lin) == i]
        styles.update(_alternating(members, flow) or {})
    layers = [_planned(lin, flow.linears[lin], styles[lin], flow) for lin in flow.order if lin in styles]
    return TensorPlan(tuple(layers))


def _forward(model: nn.Module, blocks: list[nn.Module], args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Flow:
    flow = _Flow(model, blocks)
    handles = flow.hooks()
    try:
        with torch.enable_grad():
            model(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    return flow


def derive_tp_plan(model: nn.Module, blocks: Iterable[nn.Module], args: tuple[Any, ...], kwargs: dict[str, Any]) -> TensorPlan:
    """The plan of ``model`` (the step's copy, on FakeTensors) from one forward on ``args``/``kwargs``; see
    the module docstring. ``blocks``: the model's repeated blocks; the model itself is tried where none
    of them has an alternating chain."""
    plan = _plan_blocks(_forward(model, list(blocks), args, kwargs))
    if not plan.layers:
        plan = _plan_blocks(_forward(model, [model], args, kwargs))
    return plan


def check_tp_plan(plan: TensorPlan, tp: int, model: str) -> None:
    """Refuse (one line) a model with no plan, or a layer whose split dimension ``tp`` does not divide."""
    if not plan.layers:
        raise InvalidInputError(
            f"tensor parallelism: no plan applies to {model}: no block of it has linear layers that feed one "
            "another in pairs (a transformer's attention and MLP, Linear-activation-Linear)"
        )
    for p in plan.layers:
        if p.features % tp:
            side = "outputs" if p.style == "colwise" else "inputs"
            raise InvalidInputError(f"tensor parallelism tp:{tp}: {p.name}'s {p.features} {side} ({p.style}) do not split over {tp} ranks")

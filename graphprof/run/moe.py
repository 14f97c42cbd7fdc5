"""Mixture-of-experts layers in the dry run: grouped products on FakeTensors, and what the counts mean.

``aten._grouped_mm`` is how transformers (Mixtral, Qwen2-MoE, DeepSeek-V3...) run their experts by
default. Its meta kernel accepts only bfloat16 / float16 operands, so a float32 model's dry run fails on
it although the real CPU kernel runs float32. :func:`grouped_mm_any_dtype` gives the dry run the
output's shape by running the meta kernel in bfloat16 and handing back a tensor of the operands' own
dtype; the call recorded and counted is the original float32 one.

**Routing.** A grouped product sends each routed row (a token's copy for one of its ``top_k`` experts)
through exactly one expert's matrix, so its MACs are ``rows x K x N`` whichever experts the router
picks: the count of the active experts needs no routing decision (the router runs on fake values; no
balance has to be assumed). :func:`moe_note` states this, and the figure with every expert on every
token beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor

__all__ = ["GROUPED_MM", "grouped_mm_any_dtype", "moe_note"]

aten = torch.ops.aten
#: the grouped products :func:`grouped_mm_any_dtype` stands in for (the run loop checks membership itself, per op)
GROUPED_MM = frozenset({aten._grouped_mm.default})


def grouped_mm_any_dtype(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``func(*args, **kwargs)``; for a float32 ``_grouped_mm`` on FakeTensors (whose meta kernel refuses
    float32), the same shapes from a bfloat16 call, returned in the operands' dtype."""
    if func not in GROUPED_MM or not _needs_low_precision(args[0]):
        return func(*args, **kwargs)
    dtype = args[0].dtype
    low = [_bf16(a) for a in args]
    extra = {k: _bf16(v) for k, v in kwargs.items() if k != "out_dtype"}
    return func(*low, **extra).to(dtype)


def _needs_low_precision(t: Any) -> bool:
    fake = isinstance(t, FakeTensor) or (isinstance(t, torch.Tensor) and t.is_meta)
    return fake and t.dtype in (torch.float32, torch.float64)


def _bf16(value: Any) -> Any:
    return value.to(torch.bfloat16) if isinstance(value, torch.Tensor) and value.is_floating_point() else value


def _top_k(model: nn.Module) -> int | None:
    config = getattr(model, "config", None)
    for name in ("num_experts_per_tok", "moe_topk", "top_k"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    for module in model.modules():
        value = getattr(module, "top_k", None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def moe_note(rows: Sequence[Any], model: nn.Module) -> str | None:
    """A note on the grouped (expert) products of ``rows`` (LayerRows), or ``None`` when there are none."""
    active = 0
    experts = set()
    calls = 0
    for row in rows:
        for op in row.ops:
            if op.op != "aten._grouped_mm" or op.phase != "forward" or len(op.input_shapes) < 2:
                continue
            weight = op.input_shapes[1]
            if len(weight) != 3 or len(op.input_shapes[0]) != 2:
                continue  # batched 3-D products: no routing involved
            calls += 1
            active += op.cost.macs
            experts.add(weight[0])
    if not calls:
        return None
    top_k = _top_k(model)
    note = (
        f"mixture of experts: {calls} grouped expert products, {active:,} MACs for the active experts "
        f"(each token through its {top_k or 'top-k'} routed experts; the count does not depend on which "
        "experts the router picks, so no routing balance is assumed)"
    )
    if top_k and len(experts) == 1:
        (num_experts,) = experts
        note += f"; with all {num_experts} experts on every token: {active * num_experts // top_k:,} MACs"
    return note

"""Element-wise ops: arithmetic, comparisons, special functions, activations, selects, dropout.

Each costs its table rate (:data:`~graphprof.formulas.rates.PER_ELEMENT_FLOPS`) per output element, so
a broadcast ``add`` of a (64,) bias onto a (8, 64) tensor is 512 FLOPs. In-place variants (``add_``,
``relu_``, ``__iand__``) share the formula of their functional op.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._ops import OpOverloadPacket

from graphprof.formulas.common import elementwise, first, flops_of
from graphprof.formulas.cost import Cost, TensorMeta
from graphprof.formulas.rates import ONE_OP_NAMES, SPECIAL_FUNCTION_NAMES
from graphprof.formulas.registry import register

aten = torch.ops.aten


def with_inplace(name: str) -> list[OpOverloadPacket]:
    """The packet ``aten.<name>`` and, where aten has one, its in-place twin (``add_``, ``__iand__``)."""
    inplace = f"__i{name[2:]}" if name.startswith("__") else f"{name}_"
    packets = [getattr(aten, name)]
    twin = getattr(aten, inplace, None)
    if isinstance(twin, OpOverloadPacket):
        packets.append(twin)
    return packets


# Ops whose rate is the table row of the same name.
_SAME_NAME = (
    *ONE_OP_NAMES,
    *SPECIAL_FUNCTION_NAMES,
    "floor_divide", "remainder", "fmod", "hypot", "polar", "xlogy", "logit", "addcmul", "addcdiv", "lerp",
    "nan_to_num", "where", "masked_fill", "tril", "triu", "clamp_min", "clamp_max",
    "relu", "threshold", "hardtanh", "leaky_relu", "_prelu_kernel", "celu", "sigmoid", "silu", "hardsigmoid",
    "hardswish", "mish", "softplus", "log_sigmoid_forward", "glu", "native_dropout",
)  # fmt: skip

for _name in _SAME_NAME:
    register(*with_inplace(_name))(elementwise(_name))


@register(*with_inplace("clamp"))
def clamp_cost(self: TensorMeta, min: Any = None, max: Any = None, *, out: Any, **_: Any) -> Cost:
    # one max() for a lower bound, one min() for an upper bound
    bounds = (min is not None) + (max is not None)
    return Cost(flops=bounds * flops_of("clamp", n_output=first(out).numel))


@register(*with_inplace("gelu"))
def gelu_cost(self: TensorMeta, *, approximate: str = "none", out: Any, **_: Any) -> Cost:
    return Cost(flops=flops_of("gelu_tanh" if approximate == "tanh" else "gelu", n_output=first(out).numel))


@register(*with_inplace("elu"))
def elu_cost(self: TensorMeta, alpha: Any = 1, scale: Any = 1, input_scale: Any = 1, *, out: Any, **_: Any) -> Cost:
    # selu and celu reach aten.elu with scale / input_scale: one more multiply for each that is not 1
    n = first(out).numel
    extra = (scale != 1) + (input_scale != 1)
    return Cost(flops=flops_of("elu", n_output=n) + extra * n)


@register(aten.bernoulli)
def bernoulli_cost(self: TensorMeta, p: Any = None, *args: Any, out: Any, **_: Any) -> Cost:
    result = first(out)
    flops = flops_of("bernoulli", n_output=result.numel)
    if p is None:
        return Cost(flops=flops)  # bernoulli(probabilities): reads self, the generic byte rule
    # bernoulli(self, p: float): self gives only the shape; nothing is read
    return Cost(flops=flops, bytes_written=result.nbytes)


@register(aten.bernoulli_)
def bernoulli_inplace_cost(self: TensorMeta, p: Any = None, *args: Any, out: Any, **_: Any) -> Cost:
    # fills self with draws: reads only a tensor p, never self's old values
    result = first(out)
    read = p.addressed_nbytes if isinstance(p, TensorMeta) else 0
    return Cost(flops=flops_of("bernoulli", n_output=result.numel), bytes_read=read, bytes_written=result.nbytes)

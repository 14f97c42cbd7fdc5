"""graphprof's per-op records under another counter's convention, and that counter's blind spots.

Two reference counters, two conventions:

* **fvcore** (``FlopCountAnalysis``) counts on the TorchScript trace (``aten::linear``, ``aten::_convolution``,
  ``aten::batch_norm``...). Its "flop" is one multiply-accumulate for contractions; for a few other ops
  it has its own per-element counts; every other op is ignored (``_IGNORED_OPS``) or reported as
  unsupported and counted as zero.
* **torch** (``torch.utils.flop_counter.FlopCounterMode``) counts at dispatch, as graphprof does:
  contractions only (convolution, mm, addmm, bmm, baddbmm, the scaled-dot-product kernels it knows),
  2 FLOPs per MAC.

graphprof records ops at dispatch (``aten.addmm`` where the trace has ``aten::linear``, ``aten.bmm``
where it has ``aten::matmul`` or ``aten::einsum``), so the comparison is made per *group* of ops that
both levels agree on:

==================== ========================================== ================================= ==================
group                graphprof op (dispatch)                    fvcore op (TorchScript)           fvcore's count
==================== ========================================== ================================= ==================
conv                 convolution and its backend kernels        _convolution                      MACs
matmul               mm, addmm, bmm and every other contraction linear, matmul, mm, bmm, addmm,   MACs
                     (baddbmm, mv, dot, attention kernels,      einsum
                     _native_multi_head_attention...)
batch_norm           native_batch_norm, _native_batch_norm_*    batch_norm, instance_norm         eval: 2 / elem (1
                     (instance norm runs as batch norm)                                           without affine);
                                                                                                  training: 5 (4)
group_norm           native_group_norm                          group_norm                        5 / elem (4)
layer_norm           native_layer_norm; the two norms of        layer_norm                        5 / elem (4)
                     _transformer_encoder_layer_fwd
upsample_nearest2d   upsample_nearest2d                         upsample_nearest2d                1 / output elem
upsample_bilinear2d  upsample_bilinear2d                        upsample_bilinear2d               4 / output elem
adaptive_avg_pool2d  _adaptive_avg_pool2d; mean inside an       adaptive_avg_pool2d               1 / input elem
                     AdaptiveAvgPool2d (a 1x1 output is a mean)
grid_sampler         grid_sampler_2d / _3d                      grid_sampler                      4 / output elem
==================== ========================================== ================================= ==================

Every other graphprof op is outside fvcore's convention (element-wise ops, pooling, softmax...: fvcore
counts them as zero) and contributes nothing to the comparison. Under the torch convention every
contraction counts ``2 x MACs`` in ``conv`` or ``matmul`` and nothing else counts.

**Left out** (:data:`LEFT_OUT`): ops the reference *sees* but has no formula for, so it counts them as
zero although they contract: ``aten::scaled_dot_product_attention`` and ``aten::_convolution_mode``
(a convolution with ``padding="same"``) in fvcore's trace, ``_scaled_dot_product_flash_attention_for_cpu``
or ``_native_multi_head_attention`` for ``FlopCounterMode``. The reference runs with a probe on each of
them that measures, from the shapes the reference itself recorded, what it would have counted; the
probes' figures are kept apart from the reference's own count and explain the difference by name.

Example::

    >>> FVCORE.reference_group("linear"), FVCORE.reference_group("instance_norm")
    ('matmul', 'batch_norm')
    >>> LEFT_OUT["baddbmm"].counts([(2, 3, 5), (2, 3, 4), (2, 4, 5)], [(2, 3, 5)], FVCORE)   # 2 * 3 * 4 * 5
    {'matmul': 120}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from graphprof.cost.result import LayerRow, OpRecord
from graphprof.formulas import PER_ELEMENT_FLOPS

__all__ = [
    "CONV",
    "MATMUL",
    "GROUP_ORDER",
    "CONV_OPS",
    "Convention",
    "FVCORE",
    "TORCH",
    "CONVENTIONS",
    "LeftOut",
    "LEFT_OUT",
    "FVCORE_LEFT_OUT",
    "TORCH_LEFT_OUT",
]

Shape = tuple[int, ...]
Counts = dict[str, int]

CONV: Final = "conv"
MATMUL: Final = "matmul"

#: Display order of the groups; a group not listed here sorts after them.
GROUP_ORDER: Final[tuple[str, ...]] = (
    CONV, MATMUL, "batch_norm", "group_norm", "layer_norm", "upsample_nearest2d", "upsample_bilinear2d",
    "adaptive_avg_pool2d", "grid_sampler",
)  # fmt: skip

#: Convolutions at dispatch (and above it, for graphs captured there); graphprof's MACs of each.
CONV_OPS: Final[frozenset[str]] = frozenset(
    f"aten.{name}"
    for name in (
        "convolution", "_convolution", "convolution_overrideable", "conv1d", "conv2d", "conv3d",
        "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "mkldnn_convolution",
        "_slow_conv2d_forward", "slow_conv3d_forward", "_conv_depthwise2d", "slow_conv_dilated2d",
        "slow_conv_dilated3d", "slow_conv_transpose2d", "slow_conv_transpose3d", "cudnn_convolution",
        "cudnn_convolution_transpose", "_convolution_mode",
    )
)  # fmt: skip

_BATCH_NORM_TRAINING_OPS = frozenset({"aten._batch_norm_with_update", "aten._batch_norm_with_update_functional", "aten.instance_norm"})
_BATCH_NORM_INFERENCE_OPS = frozenset({"aten._native_batch_norm_legit_no_training", "aten._batch_norm_no_update"})
_BATCH_NORM_OPS = _BATCH_NORM_TRAINING_OPS | _BATCH_NORM_INFERENCE_OPS | {
    "aten.native_batch_norm", "aten._native_batch_norm_legit", "aten._native_batch_norm_legit_functional",
    "aten.batch_norm", "aten.cudnn_batch_norm", "aten.miopen_batch_norm",
}  # fmt: skip

#: Row types (module class or function name) whose ``aten.mean`` is an adaptive average pool to 1x1:
#: ``adaptive_avg_pool2d`` dispatches a 1x1 output as ``mean(dim=(-1, -2), keepdim=True)``.
ADAPTIVE_AVG_POOL_TYPES: Final[frozenset[str]] = frozenset({"AdaptiveAvgPool2d", "adaptive_avg_pool2d"})


def _numel(shape: Sequence[int] | None) -> int:
    return 0 if shape is None else math.prod(shape)


# --------------------------------------------------------------------------------------------------
# graphprof's records under fvcore's convention: one rule per op, each returning {group: count}.

Rule = Callable[[OpRecord], Counts]


def _contraction(group: str) -> Rule:
    def rule(record: OpRecord) -> Counts:
        return {group: record.cost.macs}

    return rule


def _per_output(group: str, rate: int) -> Rule:
    def rule(record: OpRecord) -> Counts:
        return {group: rate * _numel(record.output_shapes[0] if record.output_shapes else None)}

    return rule


def _per_input(group: str, rate: int) -> Rule:
    def rule(record: OpRecord) -> Counts:
        return {group: rate * _numel(record.input_shapes[0] if record.input_shapes else None)}

    return rule


def _batch_norm_training(record: OpRecord) -> bool:
    """The aten-level ``training`` flag (batch statistics), which is also what fvcore's trace records.

    The record keeps tensor shapes, not flags: ops named for one mode say it; for the others it is read
    back from graphprof's own count, whose per-element rate differs between the two modes.
    """
    if record.op in _BATCH_NORM_TRAINING_OPS:
        return True
    if record.op in _BATCH_NORM_INFERENCE_OPS:
        return False
    n = _numel(record.input_shapes[0])
    return record.cost.flops == PER_ELEMENT_FLOPS["batch_norm_training"].per_input * n != 0


def _batch_norm(record: OpRecord) -> Counts:
    # fvcore batchnorm_flop_jit: eval 2 / elem with weight (1 without); training 5 / elem (4 without).
    # Tensors (input, weight?, bias?, running_mean?, running_var?): in eval the running stats are always
    # there, so 3 tensors mean no affine; in training 3 tensors are read as (input, weight, bias), the
    # usual case (affine, no running stats: instance norm, track_running_stats=False).
    training = _batch_norm_training(record)
    tensors = len(record.input_shapes)
    affine = tensors >= 4 or (tensors == 3 and training)
    rate = (5 if affine else 4) if training else (2 if affine else 1)
    return {"batch_norm": rate * _numel(record.input_shapes[0])}


def _affine_norm(group: str) -> Rule:
    # fvcore norm_flop_counter: 5 / elem with a weight, 4 without; the tensors are (input, weight?, bias?)
    def rule(record: OpRecord) -> Counts:
        affine = len(record.input_shapes) >= 2
        return {group: (5 if affine else 4) * _numel(record.input_shapes[0])}

    return rule


def _encoder_layer(record: OpRecord) -> Counts:
    # nn.TransformerEncoderLayer's fused inference path; fvcore's trace holds the unfused layer: its
    # linear / attention products (graphprof's MACs) and two affine layer norms of the input's size
    return {MATMUL: record.cost.macs, "layer_norm": 2 * 5 * _numel(record.input_shapes[0])}


_FVCORE_RULES: Final[Mapping[str, Rule]] = MappingProxyType({
    **dict.fromkeys(CONV_OPS, _contraction(CONV)),
    "aten._transformer_encoder_layer_fwd": _encoder_layer,
    **dict.fromkeys(_BATCH_NORM_OPS, _batch_norm),
    **dict.fromkeys(("aten.native_layer_norm", "aten.layer_norm"), _affine_norm("layer_norm")),
    **dict.fromkeys(("aten.native_group_norm", "aten.group_norm"), _affine_norm("group_norm")),
    "aten.upsample_nearest2d": _per_output("upsample_nearest2d", 1),
    "aten.upsample_bilinear2d": _per_output("upsample_bilinear2d", 4),
    **dict.fromkeys(("aten._adaptive_avg_pool2d", "aten.adaptive_avg_pool2d"), _per_input("adaptive_avg_pool2d", 1)),
    **dict.fromkeys(
        ("aten.grid_sampler", "aten.grid_sampler_2d", "aten.grid_sampler_3d", "aten.cudnn_grid_sampler"),
        _per_output("grid_sampler", 4),
    ),
})  # fmt: skip
"""graphprof op -> its count under fvcore's convention. Any other op that contracts (graphprof MACs > 0)
counts its MACs in ``matmul``; any other op counts nothing."""


def _fvcore_counts(row: LayerRow, record: OpRecord) -> Counts:
    rule = _FVCORE_RULES.get(record.op)
    if rule is not None:
        return rule(record)
    if record.op == "aten.mean" and row.type in ADAPTIVE_AVG_POOL_TYPES:
        return _per_input("adaptive_avg_pool2d", 1)(record)
    if record.cost.macs:
        return {MATMUL: record.cost.macs}
    return {}


_FVCORE_KEY_GROUPS: Final[Mapping[str, str]] = MappingProxyType({
    "conv": CONV,
    **dict.fromkeys(("linear", "matmul", "mm", "bmm", "addmm", "einsum"), MATMUL),
    "instance_norm": "batch_norm",
})  # fmt: skip


def _fvcore_group(key: str) -> str:
    # by_operator() keys: "conv" for aten::_convolution, otherwise the op's name without "aten::"
    return _FVCORE_KEY_GROUPS.get(key, key)


# --------------------------------------------------------------------------------------------------
# Under torch's convention: contractions only, 2 FLOPs per MAC.


def _group_of_contraction(op: str) -> str:
    return CONV if op in CONV_OPS else MATMUL


def _torch_counts(row: LayerRow, record: OpRecord) -> Counts:
    if record.cost.macs:
        return {_group_of_contraction(record.op): 2 * record.cost.macs}
    return {}


def _torch_group(key: str) -> str:
    # FlopCounterMode's keys are dispatch op packets, named like graphprof's ("aten.convolution")
    return _group_of_contraction(key)


@dataclass(frozen=True)
class Convention:
    """How one reference counts: graphprof's records mapped onto it, and its own keys onto the same groups."""

    reference: str
    unit: str
    per_mac: int
    elementwise: bool
    graphprof_counts: Callable[[LayerRow, OpRecord], Counts]
    reference_group: Callable[[str], str]


FVCORE: Final = Convention(
    reference="fvcore",
    unit="fvcore flops (1 per MAC)",
    per_mac=1,
    elementwise=True,
    graphprof_counts=_fvcore_counts,
    reference_group=_fvcore_group,
)
TORCH: Final = Convention(
    reference="torch",
    unit="FLOPs (contractions only, 2 per MAC)",
    per_mac=2,
    elementwise=False,
    graphprof_counts=_torch_counts,
    reference_group=_torch_group,
)
CONVENTIONS: Final[Mapping[str, Convention]] = MappingProxyType({"fvcore": FVCORE, "torch": TORCH})


# --------------------------------------------------------------------------------------------------
# Left out: contractions a reference sees but has no formula for. Each probe is arithmetic on the
# shapes the reference recorded (None for an argument that is not a tensor), in MACs per group.


def _sdpa_macs(s: Sequence[Shape | None], out: Sequence[Shape]) -> int:
    # Q K^T and softmax(.) V per query head: (batch x heads x L) rows, S keys, E + Ev per pair
    q, k, v = s[0], s[1], s[2]
    assert q is not None and k is not None and v is not None
    return _numel(q[:-1]) * k[-2] * (q[-1] + v[-1])


def _mha_macs(s: Sequence[Shape | None], out: Sequence[Shape]) -> int:
    # (query, key, value, embed_dim, num_heads, ...): q / k / v / out projections (D x D each) and both
    # products, summed over heads (heads x D / heads = D)
    q, k = s[0], s[1]
    assert q is not None and k is not None
    d, batch, lq, lk = q[-1], _numel(q[:-2]), q[-2], k[-2]
    return batch * (2 * lq + 2 * lk) * d * d + 2 * batch * lq * lk * d


def _encoder_layer_macs(s: Sequence[Shape | None], out: Sequence[Shape]) -> int:
    # self-attention, then the feed-forward's two products; ffn_weight_1 (hidden x D) is argument 14
    src, ffn_weight_1 = s[0], s[14]
    assert src is not None and ffn_weight_1 is not None
    return _mha_macs([src, src], out) + 2 * _numel(src[:-1]) * src[-1] * ffn_weight_1[0]


def _conv_mode_macs(s: Sequence[Shape | None], out: Sequence[Shape]) -> int:
    # (input, weight, bias, stride, padding: str, dilation, groups): output elements x C_in / groups x kernel
    weight = s[1]
    assert weight is not None
    return _numel(out[0]) * _numel(weight[1:])


def _batched_product(s: Sequence[Shape | None], out: Sequence[Shape]) -> int:
    # (self, batch1, batch2): b x m x k x n
    b1, b2 = s[1], s[2]
    assert b1 is not None and b2 is not None
    return _numel(b1) * b2[-1]


def _product(first: int) -> Callable[[Sequence[Shape | None], Sequence[Shape]], int]:
    # (mat1, mat2) at ``first`` and ``first + 1``: m x k x n (mat2 a vector: n = 1)
    def macs(s: Sequence[Shape | None], out: Sequence[Shape]) -> int:
        a, b = s[first], s[first + 1]
        assert a is not None and b is not None
        return _numel(a) * (b[-1] if len(b) > 1 else 1)

    return macs


def _dot_macs(s: Sequence[Shape | None], out: Sequence[Shape]) -> int:
    return _numel(s[0])


def _affine_grid_macs(s: Sequence[Shape | None], out: Sequence[Shape]) -> int:
    # each output coordinate is a row of theta (2 x 3 or 3 x 4) times a homogeneous base point
    theta = s[0]
    assert theta is not None
    return _numel(out[0]) * theta[-1]


@dataclass(frozen=True)
class LeftOut:
    """A contraction a reference has no formula for, and what it would count: MACs per group."""

    op: str
    macs: Callable[[Sequence[Shape | None], Sequence[Shape]], int]
    group: str = MATMUL
    extra: Callable[[Sequence[Shape | None], Sequence[Shape]], Counts] | None = None

    def counts(self, shapes: Sequence[Shape | None], out_shapes: Sequence[Shape], convention: Convention) -> Counts:
        """What ``convention`` would count: its FLOPs per MAC, plus the per-element work where it counts some."""
        result = {self.group: convention.per_mac * self.macs(shapes, out_shapes)}
        if self.extra is not None and convention.elementwise:
            for group, value in self.extra(shapes, out_shapes).items():
                result[group] = result.get(group, 0) + value
        return result


def _encoder_layer_norms(s: Sequence[Shape | None], out: Sequence[Shape]) -> Counts:
    # fvcore would have seen the unfused layer's two affine layer norms: 5 / elem each
    return {"layer_norm": 2 * 5 * _numel(s[0])}


LEFT_OUT: Final[Mapping[str, LeftOut]] = MappingProxyType({
    probe.op: probe
    for probe in (
        LeftOut("scaled_dot_product_attention", _sdpa_macs),
        LeftOut("_scaled_dot_product_flash_attention_for_cpu", _sdpa_macs),
        LeftOut("_scaled_dot_product_fused_attention_overrideable", _sdpa_macs),
        LeftOut("_native_multi_head_attention", _mha_macs),
        LeftOut("_transformer_encoder_layer_fwd", _encoder_layer_macs, extra=_encoder_layer_norms),
        LeftOut("_convolution_mode", _conv_mode_macs, group=CONV),
        LeftOut("baddbmm", _batched_product),
        LeftOut("addbmm", _batched_product),
        LeftOut("_addmm_activation", _product(1)),
        LeftOut("mv", _product(0)),
        LeftOut("addmv", _product(1)),
        LeftOut("_int_mm", _product(0)),
        LeftOut("dot", _dot_macs),
        LeftOut("vdot", _dot_macs),
        LeftOut("affine_grid_generator", _affine_grid_macs),
    )
})  # fmt: skip
"""Op name (no namespace) -> probe, for every contraction a reference may see and not count."""

#: The TorchScript ops fvcore 0.1.5 has no handle for that contract (probed as ``aten::<name>``).
FVCORE_LEFT_OUT: Final[tuple[str, ...]] = (
    "scaled_dot_product_attention", "_native_multi_head_attention", "_transformer_encoder_layer_fwd",
    "_convolution_mode", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot", "affine_grid_generator",
)  # fmt: skip

#: The dispatch ops FlopCounterMode may see that contract; each is probed only where the installed
#: torch has no formula for it (and cannot decompose it), so a torch that learns one keeps its own.
TORCH_LEFT_OUT: Final[tuple[str, ...]] = (
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_fused_attention_overrideable",
    "_native_multi_head_attention", "_transformer_encoder_layer_fwd", "_addmm_activation", "addbmm", "mv",
    "addmv", "_int_mm", "dot", "vdot", "affine_grid_generator",
)  # fmt: skip

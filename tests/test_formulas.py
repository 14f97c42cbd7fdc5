"""Cost formulas checked three ways: hand-derived numbers, relations, and independent references.

Every call is captured through real dispatch (a tiny TorchDispatchMode under FakeTensorMode, so nothing is
computed) and costed with :func:`graphprof.formulas.op_cost`, exactly as the counting pass does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

import graphprof
from graphprof.base.choices import OpStatus
from graphprof.errors import FormulaRegistryError
from graphprof.formulas import FORMULAS, PER_ELEMENT_FLOPS, ZERO, ZERO_COST_OPS, Cost, TensorMeta, op_cost, op_status, register
from graphprof.formulas import registry as registry_module

aten = torch.ops.aten


class _Capture(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[torch._ops.OpOverload, Cost | None]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.calls.append((func, op_cost(func, args, kwargs, out)))
        return out


def capture(fn: Callable[[], Any]) -> list[tuple[torch._ops.OpOverload, Cost | None]]:
    """Run ``fn`` on fake CPU tensors; return each aten call with its cost."""
    with FakeTensorMode(allow_non_fake_inputs=True):
        recorder = _Capture()
        with recorder:
            fn()
    return recorder.calls


def cost_of(packet: torch._ops.OpOverloadPacket, fn: Callable[[], Any]) -> Cost:
    """The cost of the single call of ``packet`` that ``fn`` makes."""
    costs = [cost for func, cost in capture(fn) if func.overloadpacket is packet]
    assert len(costs) == 1, f"expected one call of {packet}, got {len(costs)}"
    assert costs[0] is not None
    return costs[0]


def total(fn: Callable[[], Any]) -> Cost:
    """The summed cost of every call ``fn`` makes; fails if any op is unsupported."""
    calls = capture(fn)
    unsupported = [str(func) for func, cost in calls if cost is None]
    assert not unsupported, unsupported
    return sum(cost for _, cost in calls)


def t(*shape: int, dtype: torch.dtype = torch.float32, grad: bool = False) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, requires_grad=grad)


# ---- the cost record ---------------------------------------------------------------------------------


def test_cost_adds_sums_and_derives() -> None:
    a = Cost(macs=1, flops=2, bytes_read=3, bytes_written=4)
    b = Cost(macs=10, flops=20, bytes_read=30, bytes_written=40)
    assert a + b == Cost(11, 22, 33, 44)
    assert sum([a, b]) == Cost(11, 22, 33, 44)  # 0 + a + b
    assert sum([], ZERO) == ZERO
    assert (a + b).bytes_moved == 77  # 33 + 44
    assert Cost(flops=70, bytes_read=3, bytes_written=4).arithmetic_intensity == 10.0  # 70 / 7
    assert Cost(flops=5).arithmetic_intensity is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.macs = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        a + 1  # type: ignore[operator]


def test_tensor_meta() -> None:
    meta = TensorMeta((2, 3, 4), torch.float16)
    assert (meta.numel, meta.ndim, meta.itemsize, meta.nbytes) == (24, 3, 2, 48)
    assert TensorMeta((), torch.int64).numel == 1


# ---- convolution -------------------------------------------------------------------------------------


def test_conv2d() -> None:
    # out (2, 4, 8, 8) = 512 elements, each 3 * 3 * 3 = 27 MACs: 512 * 27 = 13824
    cost = cost_of(aten.convolution, lambda: F.conv2d(t(2, 3, 8, 8), t(4, 3, 3, 3), padding=1))
    assert (cost.macs, cost.flops) == (13824, 27648)
    # bytes: input 2*3*8*8*4 = 1536 + weight 4*3*3*3*4 = 432; output 512 * 4 = 2048
    assert (cost.bytes_read, cost.bytes_written) == (1968, 2048)


def test_conv_bias_adds_flops_not_macs() -> None:
    cost = cost_of(aten.convolution, lambda: F.conv2d(t(2, 3, 8, 8), t(4, 3, 3, 3), t(4), padding=1))
    assert (cost.macs, cost.flops) == (13824, 27648 + 512)  # + one add per output element


def test_conv1d() -> None:
    # out (2, 6, 8) = 96, each 4 * 3 = 12 MACs: 1152
    assert cost_of(aten.convolution, lambda: F.conv1d(t(2, 4, 10), t(6, 4, 3))).macs == 1152


def test_conv3d_with_stride() -> None:
    # D = (4 - 2) / 2 + 1 = 2, H = W = 6 - 3 + 1 = 4: out (1, 3, 2, 4, 4) = 96, each 2 * 2 * 3 * 3 = 36: 3456
    cost = cost_of(aten.convolution, lambda: F.conv3d(t(1, 2, 4, 6, 6), t(3, 2, 2, 3, 3), stride=(2, 1, 1)))
    assert cost.macs == 3456


def test_conv_stride_padding_dilation() -> None:
    # H = floor((10 + 2*2 - 2*(3 - 1) - 1) / 2) + 1 = 5: out (1, 5, 5, 5) = 125, each 3 * 3 * 3 = 27: 3375
    fn = lambda: F.conv2d(t(1, 3, 10, 10), t(5, 3, 3, 3), stride=2, padding=2, dilation=2)  # noqa: E731
    assert cost_of(aten.convolution, fn).macs == 3375


def test_grouped_and_depthwise_conv() -> None:
    # groups 4: out (1, 12, 6, 6) = 432, each 8 / 4 = 2 channels * 9 = 18: 7776
    grouped = cost_of(aten.convolution, lambda: F.conv2d(t(1, 8, 6, 6), t(12, 2, 3, 3), padding=1, groups=4))
    assert grouped.macs == 7776
    # depthwise: out (1, 8, 6, 6) = 288, each 1 channel * 9 = 9: 2592
    depthwise = cost_of(aten.convolution, lambda: F.conv2d(t(1, 8, 6, 6), t(8, 1, 3, 3), padding=1, groups=8))
    assert depthwise.macs == 2592


def test_transposed_conv() -> None:
    # every input element (1*4*5*5 = 100) meets C_out/groups * 3*3 weights: 100 * 3 * 9 = 2700;
    # H_out = (5 - 1) * 2 - 2 * 1 + (3 - 1) + 1 + 1 = 10: output_padding only adds bias-only rows
    fn = lambda: F.conv_transpose2d(t(1, 4, 5, 5), t(4, 3, 3, 3), stride=2, padding=1, output_padding=1)  # noqa: E731
    assert cost_of(aten.convolution, fn).macs == 2700


def test_grouped_transposed_conv_with_bias() -> None:
    # groups 2: weight (4, 2, 3, 3), C_out = 4: 100 * 2 * 9 = 1800 MACs; out (1, 4, 10, 10) = 400 bias adds
    fn = lambda: F.conv_transpose2d(  # noqa: E731
        t(1, 4, 5, 5), t(4, 2, 3, 3), t(4), stride=2, padding=1, output_padding=1, groups=2
    )
    cost = cost_of(aten.convolution, fn)
    assert (cost.macs, cost.flops) == (1800, 2 * 1800 + 400)


def test_conv_backward_is_twice_forward() -> None:
    forward = 13824  # test_conv2d
    x, w = t(2, 3, 8, 8, grad=True), t(4, 3, 3, 3, grad=True)
    cost = cost_of(aten.convolution_backward, lambda: torch.autograd.grad(F.conv2d(x, w, padding=1).sum(), [x, w]))
    assert cost.macs == 2 * forward  # grad_input + grad_weight


def test_conv_backward_respects_output_mask() -> None:
    x, w, b = t(2, 3, 8, 8), t(4, 3, 3, 3, grad=True), t(4, grad=True)
    # the input needs no gradient: grad_weight only (13824 MACs) + grad_bias (512 adds of grad_output)
    fn = lambda: torch.autograd.grad(F.conv2d(x, w, b, padding=1).sum(), [w, b])  # noqa: E731
    cost = cost_of(aten.convolution_backward, fn)
    assert (cost.macs, cost.flops) == (13824, 2 * 13824 + 512)


def test_linear_backward_is_twice_forward() -> None:
    # forward 8 * 16 * 4 = 512 MACs; backward: grad_input mm and grad_weight mm, 512 each
    x, w = t(8, 16, grad=True), t(4, 16, grad=True)
    calls = capture(lambda: torch.autograd.grad(F.linear(x, w).sum(), [x, w]))
    assert sum(cost.macs for func, cost in calls if func.overloadpacket is aten.mm) == 512 * 3


# ---- matrix products ----------------------------------------------------------------------------------


def test_mm_addmm_bmm_baddbmm() -> None:
    # 4 * 6 * 5 = 120
    assert cost_of(aten.mm, lambda: t(4, 6) @ t(6, 5)) == Cost(120, 240, (24 + 30) * 4, 20 * 4)
    # + bias add on the (4, 5) output: 240 + 20 = 260
    addmm = cost_of(aten.addmm, lambda: torch.addmm(t(5), t(4, 6), t(6, 5)))
    assert (addmm.macs, addmm.flops) == (120, 260)
    # 3 * 4 * 6 * 5 = 360
    assert cost_of(aten.bmm, lambda: torch.bmm(t(3, 4, 6), t(3, 6, 5))).macs == 360
    # 360 MACs, + 3 * 4 * 5 = 60 adds
    baddbmm = cost_of(aten.baddbmm, lambda: torch.baddbmm(t(3, 4, 5), t(3, 4, 6), t(3, 6, 5)))
    assert (baddbmm.macs, baddbmm.flops) == (360, 780)
    # alpha and beta other than 1 add a multiply each per output element: 240 + 3 * 20 = 300
    scaled = cost_of(aten.addmm, lambda: torch.addmm(t(5), t(4, 6), t(6, 5), beta=0.5, alpha=2.0))
    assert scaled.flops == 300


def test_matmul_broadcasts_batched_operands() -> None:
    # (2, 1, 3, 4) @ (5, 4, 6) -> (2, 5, 3, 6): 180 outputs x 4 = 720 (expand + bmm at dispatch)
    cost = total(lambda: t(2, 1, 3, 4) @ t(5, 4, 6))
    assert cost.macs == 720
    assert (total(lambda: t(3, 4) @ t(4)).macs, total(lambda: t(4) @ t(4)).macs) == (12, 4)  # mv, dot


def test_einsum() -> None:
    # bij,bjk->bik: 2 * 3 * 4 * 5 = 120
    assert total(lambda: torch.einsum("bij,bjk->bik", t(2, 3, 4), t(2, 4, 5))).macs == 120
    # attention scores bhqd,bhkd->bhqk: 2 * 3 * 4 * 6 * 5 = 720
    assert total(lambda: torch.einsum("bhqd,bhkd->bhqk", t(2, 3, 4, 5), t(2, 3, 6, 5))).macs == 720


def test_linear() -> None:
    # (2, 3, 4) x (6, 4)^T: 2 * 3 * 4 * 6 = 144 MACs; bias on 2 * 3 * 6 = 36 outputs
    cost = total(lambda: F.linear(t(2, 3, 4), t(6, 4), t(6)))
    assert (cost.macs, cost.flops) == (144, 2 * 144 + 36)
    assert total(lambda: F.linear(t(2, 3, 4), t(6, 4))).flops == 288  # no bias


def test_composite_ops_have_formulas_for_captured_graphs() -> None:
    # linear / matmul / conv2d never reach dispatch, but graphs captured above it contain them
    linear = registry_module.FORMULAS[aten.linear]
    out = TensorMeta((2, 3, 6), torch.float32)
    x, w, b = TensorMeta((2, 3, 4), torch.float32), TensorMeta((6, 4), torch.float32), TensorMeta((6,), torch.float32)
    assert linear(x, w, b, out=out) == Cost(macs=144, flops=324)
    matmul = registry_module.FORMULAS[aten.matmul]
    bmm_out = TensorMeta((2, 5, 3, 6), torch.float32)
    assert matmul(TensorMeta((2, 1, 3, 4), torch.float32), TensorMeta((5, 4, 6), torch.float32), out=bmm_out).macs == 720


# ---- attention ------------------------------------------------------------------------------------------

# q (2, 8, 16, 32), k / v (2, 8, 24, 32): scores 2 * 8 * 16 * 24 = 6144; MACs 6144 * (32 + 32) = 393216
_SDPA_MACS = 393216
_SDPA_SCORES = 6144


def test_sdpa() -> None:
    cost = cost_of(
        aten._scaled_dot_product_flash_attention_for_cpu,
        lambda: F.scaled_dot_product_attention(t(2, 8, 16, 32), t(2, 8, 24, 32), t(2, 8, 24, 32)),
    )
    # 2 * MACs + 6 per score (scale, softmax 5)
    assert (cost.macs, cost.flops) == (_SDPA_MACS, 2 * _SDPA_MACS + 6 * _SDPA_SCORES)


def test_sdpa_mask_adds_one_flop_per_score() -> None:
    fn = lambda: F.scaled_dot_product_attention(  # noqa: E731
        t(2, 8, 16, 32), t(2, 8, 24, 32), t(2, 8, 24, 32), attn_mask=t(16, 24)
    )
    cost = cost_of(aten._scaled_dot_product_flash_attention_for_cpu, fn)
    assert cost.flops == 2 * _SDPA_MACS + 7 * _SDPA_SCORES


def test_sdpa_gqa_counts_per_query_head() -> None:
    # 8 query heads share 2 key-value heads: 1 * 8 * 16 * 16 * (32 + 32) = 131072
    fn = lambda: F.scaled_dot_product_attention(t(1, 8, 16, 32), t(1, 2, 16, 32), t(1, 2, 16, 32), enable_gqa=True)  # noqa: E731
    assert cost_of(aten._scaled_dot_product_flash_attention_for_cpu, fn).macs == 131072


def test_sdpa_causal_counts_full_products() -> None:
    # causal masking is not halved: the convention of torch.utils.flop_counter and of the math path
    q = lambda: t(1, 8, 16, 32)  # noqa: E731
    full = cost_of(aten._scaled_dot_product_flash_attention_for_cpu, lambda: F.scaled_dot_product_attention(q(), q(), q()))
    causal = cost_of(
        aten._scaled_dot_product_flash_attention_for_cpu, lambda: F.scaled_dot_product_attention(q(), q(), q(), is_causal=True)
    )
    assert causal == full
    assert causal.macs == 1 * 8 * 16 * 16 * 64  # 131072


def test_sdpa_backward_is_two_and_a_half_forward() -> None:
    # recompute Q K^T, then dV, dP, dQ, dK: 1 * 2 * 8 * 8 * (3 * 16 + 2 * 16) = 10240 = 2.5 x 4096
    q, k, v = (t(1, 2, 8, 16, grad=True) for _ in range(3))
    fn = lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v).sum(), [q, k, v])  # noqa: E731
    assert cost_of(aten._scaled_dot_product_flash_attention_for_cpu_backward, fn).macs == 10240


def test_native_multi_head_attention_fast_path() -> None:
    mha = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()

    def fast() -> None:
        x = t(2, 5, 16)
        with torch.no_grad():
            mha(x, x, x, need_weights=False)

    cost = cost_of(aten._native_multi_head_attention, fast)
    # projections: q, k, v in and out, 2 * (5 + 5 + 5 + 5) = 40 token rows of 16 x 16: 10240 MACs;
    # heads: 2 * 4 heads * 5 * 5 scores * (4 + 4) = 1600 MACs
    assert cost.macs == 10240 + 1600
    # + 40 * 16 = 640 bias adds + 200 scores * 6
    assert cost.flops == 2 * 11840 + 640 + 1200
    # the unfused path (training mode: addmm + sdpa + addmm) does the same contractions
    mha.train()
    unfused = total(lambda: mha(t(2, 5, 16), t(2, 5, 16), t(2, 5, 16), need_weights=False))
    assert unfused.macs == cost.macs


def test_transformer_encoder_layer_fast_path() -> None:
    layer = torch.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True).eval()

    def fast() -> None:
        with torch.no_grad():
            layer(t(2, 5, 16))

    cost = cost_of(aten._transformer_encoder_layer_fwd, fast)
    # attention as above (11840) + feed-forward 10 tokens * 16 * 32 * 2 layers = 10240
    assert cost.macs == 11840 + 10240
    layer.train()
    assert total(lambda: layer(t(2, 5, 16))).macs == cost.macs  # the unfused path: same contractions


# ---- normalisation, softmax ----------------------------------------------------------------------------


def test_norms() -> None:
    # 2 * 5 * 16 = 160 elements: stats 4 + normalise 2 + weight 1 + bias 1 = 8 each
    assert cost_of(aten.native_layer_norm, lambda: F.layer_norm(t(2, 5, 16), [16], t(16), t(16))).flops == 1280
    assert cost_of(aten.native_layer_norm, lambda: F.layer_norm(t(2, 5, 16), [16])).flops == 960  # 160 * 6
    # batch norm on 2 * 4 * 3 * 3 = 72 elements: inference x * scale + shift = 2 each; training 6 each
    x, stats, affine = lambda: t(2, 4, 3, 3), lambda: t(4), lambda: t(4)  # noqa: E731
    inference = cost_of(aten.native_batch_norm, lambda: F.batch_norm(x(), stats(), stats(), affine(), affine()))
    training = cost_of(aten.native_batch_norm, lambda: F.batch_norm(x(), stats(), stats(), affine(), affine(), training=True))
    assert (inference.flops, training.flops) == (144, 432)
    # group norm: 72 * 6 = 432
    assert cost_of(aten.native_group_norm, lambda: F.group_norm(t(2, 4, 3, 3), 2, t(4), t(4))).flops == 432


def test_softmax() -> None:
    # 3 * 7 = 21 elements, 5 each (max, subtract, exp, sum, divide): 105
    assert cost_of(aten._softmax, lambda: F.softmax(t(3, 7), dim=-1)) == Cost(flops=105, bytes_read=84, bytes_written=84)


def test_norm_backward() -> None:
    # layer norm backward, all three gradients on 160 elements: 10 + 2 + 1 = 13 each
    x, w, b = t(2, 5, 16, grad=True), t(16, grad=True), t(16, grad=True)
    fn = lambda: torch.autograd.grad(F.layer_norm(x, [16], w, b).sum(), [x, w, b])  # noqa: E731
    assert cost_of(aten.native_layer_norm_backward, fn).flops == 160 * 13
    # batch norm training backward on 72 elements: stats 5 + grad_input 4 = 9 each
    xb, wb, bb = t(2, 4, 3, 3, grad=True), t(4, grad=True), t(4, grad=True)
    fn = lambda: torch.autograd.grad(F.batch_norm(xb, None, None, wb, bb, training=True).sum(), [xb, wb, bb])  # noqa: E731
    assert cost_of(aten.native_batch_norm_backward, fn).flops == 72 * 9


# ---- pooling, interpolation ------------------------------------------------------------------------------


def test_pooling() -> None:
    # max pool k3 s2 p1 on (1, 2, 8, 8): out (1, 2, 4, 4) = 32, 9 compares each: 288
    assert cost_of(aten.max_pool2d_with_indices, lambda: F.max_pool2d(t(1, 2, 8, 8), 3, 2, 1)).flops == 288
    # avg pool k2 s2: 32 outputs x (4 adds + 1 divide) = 160
    assert cost_of(aten.avg_pool2d, lambda: F.avg_pool2d(t(1, 2, 8, 8), 2)).flops == 160
    # adaptive 7 -> 3: windows [0, 3), [2, 5), [4, 7) = 3 + 3 + 3 per dim; 2 planes * 9 * 9 = 162 adds
    # + 2 * 3 * 3 = 18 divides
    assert cost_of(aten._adaptive_avg_pool2d, lambda: F.adaptive_avg_pool2d(t(1, 2, 7, 7), 3)).flops == 180
    # a global average pool reaches dispatch as mean: 2 * 7 * 7 = 98 adds + 2 divides
    assert cost_of(aten.mean, lambda: F.adaptive_avg_pool2d(t(1, 2, 7, 7), 1)).flops == 100


def test_interpolate() -> None:
    x = lambda: t(1, 2, 4, 4)  # noqa: E731
    # nearest x2: 1 * 2 * 8 * 8 = 128 outputs, a copy each: 0 FLOPs, 32 * 4 bytes read, 128 * 4 written
    nearest = cost_of(aten.upsample_nearest2d, lambda: F.interpolate(x(), scale_factor=2))
    assert nearest == Cost(flops=0, bytes_read=128, bytes_written=512)
    # bilinear: 4 weights x values + 3 adds = 7 per output: 896
    bilinear = cost_of(aten.upsample_bilinear2d, lambda: F.interpolate(x(), scale_factor=2, mode="bilinear"))
    assert bilinear.flops == 896


# ---- element-wise, bytes ----------------------------------------------------------------------------------


def test_elementwise_rates_and_distinct_input_bytes() -> None:
    x = t(4, 4)
    # x + x reads x once: 64 bytes, not 128
    assert cost_of(aten.add, lambda: x + x) == Cost(flops=16, bytes_read=64, bytes_written=64)
    assert cost_of(aten.gelu, lambda: F.gelu(t(10))).flops == 50  # 5 each (erf form)
    assert cost_of(aten.gelu, lambda: F.gelu(t(10), approximate="tanh")).flops == 90  # 9 each
    assert cost_of(aten.relu_, lambda: F.relu(t(4, 4), inplace=True)) == Cost(flops=16, bytes_read=64, bytes_written=64)
    assert cost_of(aten.clamp, lambda: t(10).clamp(max=1.0)).flops == 10  # one bound: min() only
    # polar (DeepSeek's rotary frequencies): abs * cos(angle), abs * sin(angle): 4 per complex element; the two
    # float32 inputs read (2 x 12 x 4 bytes), one complex64 output written (12 x 8)
    assert cost_of(aten.polar, lambda: torch.polar(t(3, 4), t(3, 4))) == Cost(flops=48, bytes_read=96, bytes_written=96)
    # complex arithmetic in real FLOPs: 12 complex64 elements; add 2 each, multiply 6 (4 mul + 2 add), divide 11
    z = torch.polar(t(3, 4), t(3, 4))
    assert cost_of(aten.add, lambda: z + z).flops == 24
    assert cost_of(aten.mul, lambda: z * z) == Cost(flops=72, bytes_read=96, bytes_written=96)
    assert cost_of(aten.div, lambda: z / (z + 1)).flops == 132
    assert cost_of(aten.mul, lambda: t(3, 4) * t(3, 4)).flops == 12  # a real multiply stays 1 per element


def test_tensor_meta_arguments_are_costed_like_tensors() -> None:
    # a shape-propagation pass may hand over TensorMeta instead of tensors; one object passed twice
    # (here inside cat's list) is still read once: 2 * 3 * 4 bytes read, (4, 3) written
    x = TensorMeta((2, 3), torch.float32)
    out = TensorMeta((4, 3), torch.float32)
    assert op_cost(aten.cat.default, ([x, x],), {}, out) == Cost(bytes_read=24, bytes_written=48)
    assert op_cost(aten.mul.Tensor, (x, x), {}, x) == Cost(flops=6, bytes_read=24, bytes_written=24)


def test_embedding_reads_only_gathered_rows() -> None:
    # out (2, 3, 16) = 96 floats; reads 96 * 4 = 384 bytes of rows + 6 * 8 = 48 of indices, not the table
    cost = cost_of(aten.embedding, lambda: F.embedding(t(2, 3, dtype=torch.long), t(1000, 16)))
    assert cost == Cost(flops=0, bytes_read=432, bytes_written=384)


def test_copy_and_fills_do_not_read_their_destination() -> None:
    dst, src = t(8, 8), t(8, 8, dtype=torch.float16)
    assert cost_of(aten.copy_, lambda: dst.copy_(src)) == Cost(bytes_read=128, bytes_written=256)
    assert cost_of(aten.zero_, lambda: t(8, 8).zero_()) == Cost(bytes_written=256)
    assert cost_of(aten.zeros_like, lambda: torch.zeros_like(t(8, 8))) == Cost(bytes_written=256)


def test_index_put_accumulate_touches_only_indexed_rows() -> None:
    # the backward of table[index] (swin's relative position bias): 2401 rows of 16 accumulated into (169, 16)
    table, index, values = t(169, 16), t(2401, dtype=torch.long), t(2401, 16)
    cost = cost_of(aten.index_put_, lambda: table.index_put_((index,), values, accumulate=True))
    touched = 2401 * 16
    assert cost.flops == touched
    assert cost.bytes_read == 2401 * 8 + touched * 4 + touched * 4  # indices, values, destination
    assert cost.bytes_written == touched * 4


def test_boolean_mask_assignment() -> None:
    # x[mask] = 0 on a (4, 8) tensor with a (4,) mask: at most 4 rows of 8 written (an upper bound)
    x, mask = t(4, 8), t(4, dtype=torch.bool)
    calls = capture(lambda: x.__setitem__(mask, 0.0))
    cost = next(cost for func, cost in calls if func.overloadpacket is aten.index_put_)
    assert (cost.flops, cost.bytes_written) == (0, 32 * 4)


def test_embedding_backward_and_dropout() -> None:
    # embedding backward accumulates 2 * 3 * 16 = 96 gradient elements into the (1000, 16) table
    w = t(1000, 16, grad=True)
    fn = lambda: torch.autograd.grad(F.embedding(t(2, 3, dtype=torch.long), w).sum(), [w])  # noqa: E731
    assert cost_of(aten.embedding_dense_backward, fn).flops == 96
    # dropout in training draws one bernoulli per element and rescales the kept ones: 1 + 1 + 1 on 10
    dropout = total(lambda: F.dropout(t(10), 0.3, training=True))
    assert dropout.flops == 30


def test_torchvision_ops_are_counted_once_torchvision_is_loaded() -> None:
    torchvision = pytest.importorskip("torchvision")
    nms = torch.ops.torchvision.nms
    assert op_status(nms) is OpStatus.COUNTED
    boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.1], [5.0, 5.0, 6.0, 6.0]])
    out = torchvision.ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5)
    # sort 3 scores: 3 * ceil(log2 3) = 6 compares; 3 pairs * 13
    assert op_cost(nms.default, (boxes, torch.rand(3), 0.5), {}, out).flops == 6 + 39


# ---- relations and references ---------------------------------------------------------------------------


def _resnet18_cost(batch: int) -> Cost:
    from torchvision.models import resnet18

    model = resnet18().eval()
    with torch.no_grad():
        return total(lambda: model(t(batch, 3, 224, 224)))


def test_macs_are_exactly_linear_in_batch() -> None:
    one, three = _resnet18_cost(1), _resnet18_cost(3)
    assert three.macs == 3 * one.macs
    # conv + fc; torchvision's model card lists 1.81 GFLOPS (as MACs), FlopCounterMode agrees (below)
    assert one.macs == 1_814_073_344


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda: F.conv2d(t(2, 3, 9, 9), t(4, 3, 3, 3), t(4), stride=2, padding=1), id="conv"),
        pytest.param(lambda: F.conv_transpose2d(t(1, 4, 5, 5), t(4, 2, 3, 3), stride=2, groups=2), id="conv_t"),
        pytest.param(lambda: t(4, 6) @ t(6, 5), id="mm"),
        pytest.param(lambda: torch.bmm(t(3, 4, 6), t(3, 6, 5)), id="bmm"),
        pytest.param(lambda: torch.addmm(t(5), t(4, 6), t(6, 5)), id="addmm"),
        pytest.param(lambda: torch.baddbmm(t(3, 4, 5), t(3, 4, 6), t(3, 6, 5)), id="baddbmm"),
    ],
)
def test_flop_counter_mode_agrees(fn: Callable[[], Any]) -> None:
    # torch's FlopCounterMode counts 2 FLOPs per MAC of contractions and nothing else
    with FakeTensorMode(allow_non_fake_inputs=True), FlopCounterMode(display=False) as counter:
        fn()
    assert counter.get_total_flops() == 2 * total(fn).macs


@pytest.mark.parametrize("kernel", [aten._scaled_dot_product_efficient_attention, aten._scaled_dot_product_flash_attention])
def test_flop_counter_mode_agrees_on_attention_kernels(kernel: torch._ops.OpOverloadPacket) -> None:
    # FlopCounterMode has no formula for the CPU kernel (_for_cpu: it counts 0), so compare on the
    # CUDA kernels' meta implementations
    q, k, v = (torch.empty(2, 8, 16 if i == 0 else 24, 32, device="meta") for i in range(3))
    args = (q, k, v, None, False) if kernel is aten._scaled_dot_product_efficient_attention else (q, k, v)
    with FlopCounterMode(display=False) as counter:
        out = kernel.default(*args)
    ours = op_cost(kernel.default, args, {}, out)
    assert ours is not None
    assert counter.get_total_flops() == 2 * ours.macs == 2 * _SDPA_MACS


def test_flop_counter_mode_agrees_on_a_whole_network() -> None:
    from torchvision.models import resnet18

    model = resnet18().eval()
    with torch.no_grad(), FakeTensorMode(allow_non_fake_inputs=True), FlopCounterMode(display=False) as counter:
        model(t(1, 3, 224, 224))
    assert counter.get_total_flops() == 2 * _resnet18_cost(1).macs


def test_fvcore_agrees_on_contractions() -> None:
    fvcore = pytest.importorskip("fvcore.nn")
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 10)
    ).eval()
    x = torch.zeros(2, 3, 6, 6)
    analysis = fvcore.FlopCountAnalysis(model, x).unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    by_op = analysis.by_operator()
    with torch.no_grad():
        ours = total(lambda: model(x))
    # fvcore's "flop" is one multiply-add: conv 2 * 8 * 36 * 27 = 15552, linear 2 * 288 * 10 = 5760
    assert by_op["conv"] + by_op["linear"] == ours.macs == 15552 + 5760


# ---- the registry ------------------------------------------------------------------------------------------


def test_registering_twice_or_a_wrong_key_raises() -> None:
    with pytest.raises(FormulaRegistryError, match="already has a cost formula"):
        register(aten.mm)(lambda *a, out, **k: ZERO)
    with pytest.raises(FormulaRegistryError, match="OpOverloadPacket"):
        register(aten.linalg_cholesky_ex.default)(lambda *a, out, **k: ZERO)  # an overload, not the packet
    with pytest.raises(FormulaRegistryError, match="OpOverloadPacket"):
        register("aten::linalg_cholesky_ex")(lambda *a, out, **k: ZERO)  # type: ignore[arg-type]
    with pytest.raises(FormulaRegistryError, match="zero-cost"):
        register(aten.view)(lambda *a, out, **k: ZERO)
    with pytest.raises(FormulaRegistryError, match="same op twice"):
        register(aten.linalg_cholesky_ex, aten.linalg_cholesky_ex)
    assert aten.linalg_cholesky_ex not in FORMULAS  # nothing half-registered


def test_op_status_and_unsupported_ops() -> None:
    assert op_status(aten.view) is OpStatus.ZERO_COST
    assert op_status(aten.view.default) is OpStatus.ZERO_COST
    assert op_status(aten.mm.default) is OpStatus.COUNTED
    # no formula for a Cholesky factorisation: reported, never silently zero
    assert op_status(aten.linalg_cholesky_ex) is OpStatus.UNSUPPORTED
    x = torch.empty(3, 3, device="meta")
    assert op_cost(aten.linalg_cholesky_ex.default, (x,), {}, aten.linalg_cholesky_ex.default(x)) is None
    assert op_cost(aten.view.default, (x, [9]), {}, x.view(9)) is ZERO


def test_the_three_classes_are_disjoint_and_every_zero_cost_name_resolves() -> None:
    assert not set(FORMULAS) & ZERO_COST_OPS
    names = (
        registry_module.VIEW_OP_NAMES
        + registry_module._METADATA_OP_NAMES
        + registry_module._ALLOCATION_OP_NAMES
        + registry_module._RUNTIME_OP_NAMES
    )
    missing = [n for n in names if getattr(aten, n, None) not in ZERO_COST_OPS]
    assert not missing  # a typo would silently drop an op from the set


def test_formula_errors_name_the_op() -> None:
    bad = TensorMeta((2, 3, 4), torch.float32)  # mm of a 3-d tensor: the formula cannot unpack it
    with pytest.raises(ValueError) as info:
        op_cost(aten.mm.default, (torch.empty(2, 3, 4, device="meta"), torch.empty(4, 5, device="meta")), {}, bad)
    assert any("aten.mm.default" in note for note in info.value.__notes__)


def test_every_rate_is_non_negative() -> None:
    assert all(r.per_input >= 0 and r.per_output >= 0 for r in PER_ELEMENT_FLOPS.values())


# ---- causal attention: counted, executed and useful ------------------------------------------------------
def test_causal_useful_fraction_by_hand() -> None:
    from graphprof.formulas.attention import causal_useful_fraction

    # L = S = 4: query i sees i + 1 keys -> 1 + 2 + 3 + 4 = 10 of 16 scores
    assert causal_useful_fraction(4, 4) == 10 / 16
    # L = 2048 = S: 2048 x 2049 / 2 = 2,098,176 of 4,194,304
    assert causal_useful_fraction(2048, 2048) == 2_098_176 / 4_194_304
    # L = 6 > S = 4 (top-left aligned): rows 0..3 see 1..4 keys, rows 4 and 5 see all 4 -> 10 + 8 = 18 of 24
    assert causal_useful_fraction(6, 4) == 18 / 24


def test_a_causal_sdpa_reports_counted_executed_and_useful_flops() -> None:
    import torch.nn.functional as F

    class Causal(nn.Module):
        def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    class Full(nn.Module):
        def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return F.scaled_dot_product_attention(q, k, v)

    q = torch.randn(1, 2, 256, 16)
    causal = graphprof.profile_model(Causal(), example_inputs=(q, q, q))
    full = graphprof.profile_model(Full(), example_inputs=(q, q, q))
    # counted over the full square either way (torch's convention): 2 heads x 256 x 256 scores
    assert causal.total_flops == full.total_flops
    assert full.useful_flops == full.executed_flops == full.total_flops
    # useful: 256 x 257 / 2 of 256 x 256 scores, for every part of the op (products, scale, softmax)
    assert causal.useful_flops == round(causal.total_flops * (256 * 257 / 2) / (256 * 256))
    # executed by a 128-tile kernel: 2 query tiles see 1 and 2 key tiles -> 3 of 4 tiles
    assert causal.executed_flops == round(causal.total_flops * 3 / 4)
    assert causal.to_dict()["useful_flops"] == causal.useful_flops

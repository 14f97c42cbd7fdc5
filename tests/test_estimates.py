"""Estimates that follow the target: addressed bytes, lowering for a GPU target, predicted time."""

from __future__ import annotations

import torch

from graphprof.base.choices import OpStatus
from graphprof.formulas import TensorMeta, op_cost

aten = torch.ops.aten


# ---- bytes a kernel addresses ---------------------------------------------------------------------


def test_broadcast_input_is_read_once() -> None:
    a = torch.empty(4, 3, 5, device="meta")
    b = torch.empty(5, 6, device="meta").expand(4, 5, 6)  # stride (0, 6, 1)
    cost = op_cost(aten.bmm.default, (a, b), {}, aten.bmm.default(a, b))
    # MACs 4 * 3 * 5 * 6 = 360 (unchanged); read a: 4*3*5*4 = 240 B, b once: 5*6*4 = 120 B; write 4*3*6*4 = 288 B
    assert (cost.macs, cost.bytes_read, cost.bytes_written) == (360, 360, 288)
    dense = b.contiguous()
    cost_dense = op_cost(aten.bmm.default, (a, dense), {}, aten.bmm.default(a, dense))
    # the materialised copy is read in full: 240 + 4*5*6*4 = 720 B
    assert (cost_dense.macs, cost_dense.bytes_read) == (360, 720)


def test_addressed_bytes_of_tensor_meta() -> None:
    meta = TensorMeta((197, 768, 768), torch.bfloat16, (0, 768, 1))
    assert meta.nbytes == 197 * 768 * 768 * 2
    assert meta.addressed_nbytes == 768 * 768 * 2
    # a transposed (non-contiguous but not broadcast) tensor addresses all its elements
    assert TensorMeta((3, 4), torch.float32, (1, 3)).addressed_nbytes == 48
    # unknown strides: dense
    assert TensorMeta((3, 4), torch.float32).addressed_nbytes == 48


# ---- lowering ----------------------------------------------------------------------------------------

import math  # noqa: E402

import pytest  # noqa: E402
from torch import nn  # noqa: E402

import graphprof  # noqa: E402
from graphprof.base.choices import Lowering  # noqa: E402
from graphprof.cost.roofline import classify  # noqa: E402
from graphprof.devices.hardware import get_hardware  # noqa: E402
from graphprof.devices.predict import op_class  # noqa: E402
from graphprof.errors import InvalidInputError  # noqa: E402
from graphprof.formulas.attention import causal_work_fraction  # noqa: E402
from graphprof.run.lowering import parse_lowering  # noqa: E402


class _Sdpa(nn.Module):
    def __init__(self, kv_heads: int = 4, mask: bool = False, causal: bool = False) -> None:
        super().__init__()
        self.kv_heads, self.mask, self.causal = kv_heads, mask, causal

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        b, h, s, d = q.shape
        kv = q[:, : self.kv_heads]
        mask = torch.ones(s, s, dtype=torch.bool, device=q.device).tril() if self.mask else None
        return nn.functional.scaled_dot_product_attention(q, kv, kv, attn_mask=mask, is_causal=self.causal, enable_gqa=self.kv_heads != h)


def _ops(profile: graphprof.Profile) -> list[str]:
    return [op.op for _, op in profile.iter_ops() if op.status is OpStatus.COUNTED]


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_cuda_lowering_records_one_flash_op_for_causal_gqa(device: str) -> None:
    q = torch.empty(2, 8, 256, 64, dtype=torch.bfloat16, device=device)
    cpu = graphprof.profile_model(_Sdpa(kv_heads=2, causal=True), example_inputs=(q,), methods=["eager"])
    gpu = graphprof.profile_model(_Sdpa(kv_heads=2, causal=True), example_inputs=(q,), methods=["eager"], target="cuda")
    assert (cpu.lowering, gpu.lowering) == ("cpu", "cuda")
    assert _ops(gpu) == ["aten._scaled_dot_product_flash_attention"]
    assert "aten._scaled_dot_product_flash_attention" not in _ops(cpu)
    # MACs per query head: 2 * 8 heads * 256 * 256 * (64 + 64) = 134,217,728, whatever the lowering
    assert cpu.total_macs == gpu.total_macs == 2 * 8 * 256 * 256 * 128
    # the fused kernel reads q (2*8*256*64*2 B = 524,288) and the 2 kv heads once (k and v are one tensor
    # here: 2*2*256*64*2 B = 131,072), and writes the output (524,288 B) and its log-sum-exp (2*8*256*4 B)
    flash = next(op for _, op in gpu.iter_ops() if op.op == "aten._scaled_dot_product_flash_attention")
    assert flash.cost.bytes_read == 524_288 + 131_072
    assert flash.cost.bytes_written >= 524_288 + 16_384
    # causal: the kernel computes 2 + 1 of the 2 x 2 tiles of 128 (3/4 of the square)
    assert flash.work_fraction == pytest.approx(0.75)
    if device == "meta":  # the meta device decomposes (math path: score matrix); CPU tensors use a fused CPU kernel
        assert gpu.total_bytes < cpu.total_bytes / 3
        assert gpu.peak_activation_bytes < cpu.peak_activation_bytes


def test_cuda_lowering_uses_efficient_kernel_with_a_mask() -> None:
    q = torch.empty(1, 4, 64, 32, device="meta")
    gpu = graphprof.profile_model(_Sdpa(kv_heads=4, mask=True), example_inputs=(q,), methods=["eager"], target="cuda")
    assert "aten._scaled_dot_product_efficient_attention" in _ops(gpu)
    assert not any("softmax" in op or op == "aten.bmm" for op in _ops(gpu))


def test_multihead_attention_fast_path_is_projection_flash_projection() -> None:
    mha = nn.MultiheadAttention(64, 4, batch_first=True, device="meta", dtype=torch.bfloat16).eval()

    class SelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mha = mha

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.mha(x, x, x, need_weights=False)[0]

    x = torch.empty(2, 10, 64, dtype=torch.bfloat16, device="meta")
    gpu = graphprof.profile_model(SelfAttention(), example_inputs=(x,), methods=["eager"], target="cuda")
    cpu = graphprof.profile_model(SelfAttention(), example_inputs=(x,), methods=["eager"])
    assert _ops(gpu) == ["aten.addmm", "aten._scaled_dot_product_flash_attention", "aten.addmm"]
    # in-projection 20 tokens x 64 x 192 + out-projection 20 x 64 x 64 + attention 2*4*10*10*(16+16)
    assert gpu.total_macs == cpu.total_macs == 20 * 64 * 192 + 20 * 64 * 64 + 2 * 4 * 10 * 10 * 32


def test_parse_lowering() -> None:
    assert parse_lowering("cuda:1") is Lowering.CUDA and parse_lowering(None) is Lowering.CPU
    with pytest.raises(InvalidInputError):
        parse_lowering("tpu")
    assert get_hardware("h100").target == "cuda" and get_hardware("desktop-cpu").target == "cpu"


# ---- predicted time ----------------------------------------------------------------------------------


def test_causal_work_fraction_counts_tiles() -> None:
    # 8192 / 128 = 64 tiles a side; 1 + 2 + ... + 64 = 2080 of 64 * 64 = 4096 tiles
    assert causal_work_fraction(8192, 8192) == pytest.approx(2080 / 4096)
    assert causal_work_fraction(100, 100) == 1.0  # one tile: nothing to skip


def test_op_class() -> None:
    assert op_class("aten.addmm") == "matmul"
    assert op_class("aten._scaled_dot_product_flash_attention") == "attention"
    assert op_class("aten.convolution", ((1, 32, 8, 8), (32, 1, 3, 3))) == "conv_depthwise"
    assert op_class("aten.convolution", ((1, 32, 8, 8), (64, 32, 3, 3))) == "conv"
    assert op_class("aten.native_layer_norm") == "norm" and op_class("aten.gelu") == "elementwise"


def test_predicted_time_is_at_least_host_floor_and_lower_bound() -> None:
    table = get_hardware("h100").calibration
    assert table is not None and get_hardware("desktop-cpu").calibration is None
    profile = graphprof.profile_model("resnet18", input_shape=(1, 3, 64, 64), target="cuda")
    roofline = classify(profile, get_hardware("h100"))
    kernels = sum(1 for _, op in profile.iter_ops() if op.status is not OpStatus.ZERO_COST)
    assert roofline.predicted_seconds is not None and roofline.seconds is not None
    # every kernel costs at least the host floor, and no layer is predicted below its roofline bound
    assert roofline.predicted_seconds >= kernels * table.host_per_kernel_s * (1 - 1e-9)
    for layer in roofline.layers:
        assert layer.predicted_seconds is not None and layer.seconds is not None
        assert layer.predicted_seconds >= layer.seconds * (1 - 1e-9)
    assert classify(profile, get_hardware("desktop-cpu")).predicted_seconds is None
    assert math.isfinite(table.accuracy["median_abs_error"])

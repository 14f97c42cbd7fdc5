"""The architecture families of the ``hf:`` catalogue beyond dense decoders: Gemma-2 (alternating windows,
soft-capping), Qwen3-MoE (128 routed experts, 8 per token) and Mamba (selective scan, no attention), each
built from its published config on the meta device and profiled on a dry run."""

from __future__ import annotations

import pytest

import graphprof

pytestmark = pytest.mark.slow  # tens of seconds each on two cores


def test_mamba_counts_its_reference_scan_op_by_op_in_closed_form() -> None:
    p = graphprof.profile_model("hf:mamba-2.8b")
    assert p.execution == "dry-run" and not p.unsupported
    # parameters per block: in_proj 2560 x 10240, conv1d 5120 x 4 + 5120, x_proj 5120 x (160 + 2 x 16),
    # dt_proj 160 x 5120 + 5120, A_log 5120 x 16, D 5120, out_proj 5120 x 2560, the norm 2560
    block = 2560 * 10240 + 5120 * 4 + 5120 + 5120 * 192 + 160 * 5120 + 5120 + 5120 * 16 + 5120 + 5120 * 2560 + 2560
    assert block == 41_244_160
    assert p.total_params == 64 * block + 50280 * 2560 + 2560 == 2_768_345_600  # the LM head is tied
    # MACs per token and block: the four projections, and the scan's y = state @ C (5120 x 16); the depthwise
    # convolution runs over the sequence padded by kernel - 1 = 3 positions (then cut back to 128)
    per_token = 2560 * 10240 + 5120 * 192 + 160 * 5120 + 5120 * 2560 + 5120 * 16
    conv = (128 + 3) * 5120 * 4
    assert p.total_macs == 128 * (64 * per_token + 2560 * 50280) + 64 * conv == 354_205_040_640


def test_qwen3_moe_counts_the_active_experts_only() -> None:
    p = graphprof.profile_model("hf:qwen3-30b-a3b")
    assert p.total_params == 30_532_122_624  # the published 30.5B
    # per token and layer, the experts' MACs: 8 of 128 experts, each gate, up (2048 x 768) and down (768 x 2048)
    experts = sum(op.cost.macs for row in p.layers for op in row.ops if op.op == "aten._grouped_mm")
    assert experts == 128 * 48 * 8 * 3 * 2048 * 768
    # a dense model of the same size would count 16x the experts' MACs: the total is far from it
    assert p.total_macs < 128 * 2 * p.total_params / 8


def test_gemma2_builds_at_its_published_size_with_tied_embeddings() -> None:
    p = graphprof.profile_model("hf:gemma-2-9b")
    assert p.total_params == 9_241_705_984 and p.execution == "dry-run" and not p.unsupported

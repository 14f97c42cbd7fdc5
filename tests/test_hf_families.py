"""The architecture families of the ``hf:`` catalogue beyond dense decoders: Gemma-2 (alternating windows,
soft-capping), Qwen3-MoE (128 routed experts, 8 per token), DeepSeek-V2-Lite and V3 (routed and shared experts,
latent attention), Mamba (selective scan, no attention) and Mamba-2 (chunked scan), each built from its
published config on the meta device and profiled on a dry run."""

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


def test_mamba2_codestral_counts_its_chunked_scan_in_closed_form() -> None:
    p = graphprof.profile_model("hf:mamba-codestral-7b")
    assert p.execution == "dry-run" and not p.unsupported
    # parameters per block: in_proj 4096 x (2 x 8192 + 2 x 8 x 128 + 128) (gate, x, B, C, dt), conv1d over
    # 8192 + 2048 channels of kernel 4 with bias, dt_bias, A_log, D (128 each), the gated norm 8192, out_proj
    # 8192 x 4096, the block norm 4096
    block = 4096 * 18560 + 10240 * 5 + 3 * 128 + 8192 + 8192 * 4096 + 4096
    assert block == 109_640_064
    assert p.total_params == 64 * block + 2 * 32768 * 4096 + 4096 == 7_285_403_648  # Mistral's published figure
    # MACs per block: the projections for 128 tokens, the convolution over 128 + 3 positions, and the scan's
    # products, padded to one chunk of 256: C B^T (256 x 128)(128 x 256) and its product with x (256 x 256)(256 x 64),
    # the chunk's state (64 x 256)(256 x 128), C times the state it starts from (256 x 128)(128 x 64), per head;
    # the pass between chunks (2 x 2)(2 x 64 x 128) per head
    scan = 128 * (256 * 128 * 256 + 256 * 256 * 64 + 64 * 256 * 128 + 256 * 128 * 64 + 2 * 2 * 64 * 128)
    per_block = 128 * (4096 * 18560 + 8192 * 4096) + 10240 * 131 * 4 + scan
    assert p.total_macs == 64 * per_block + 128 * 4096 * 32768 == 1_052_878_831_616


def _experts_per_token(p: graphprof.Profile, layer: int) -> int:
    macs = {row.path: row.forward.macs for row in p.modules}
    return macs[f"model.layers.{layer}.mlp"] // 128


def test_deepseek_v2_lite_counts_six_routed_and_two_shared_experts() -> None:
    p = graphprof.profile_model("hf:deepseek-v2-lite")
    assert p.execution == "dry-run" and not p.unsupported
    # per layer: q 2048 x 16 x 192, the latent KV 2048 x (512 + 64) with its norm 512, its expansion
    # 512 x 16 x 256, o 2048 x 2048, two norms; layer 0's MLP 3 x 2048 x 10944; the other 26: 64 experts of
    # 3 x 2048 x 1408, a shared MLP of 2 x 1408, the router 64 x 2048
    attention = 2048 * 3072 + 2048 * 576 + 512 + 512 * 4096 + 2048 * 2048 + 2 * 2048
    moe = 64 * 3 * 2048 * 1408 + 3 * 2048 * 2816 + 64 * 2048
    params = 27 * attention + 3 * 2048 * 10944 + 26 * moe + 2 * 102400 * 2048 + 2048
    assert p.total_params == params == 15_706_484_224  # the published 15.7B
    # per token and MoE layer: 6 of the 64 routed experts, the shared MLP, the router
    assert _experts_per_token(p, 1) == 6 * 3 * 2048 * 1408 + 3 * 2048 * 2816 + 2048 * 64 == 69_337_088
    # model FLOPs per token: about 2 x the 2.4B active parameters, and causal attention (128 x 129 / 2 pairs)
    linear = 27 * (2048 * 3072 + 2048 * 576 + 512 * 4096 + 2048 * 2048) + 3 * 2048 * 10944 + 26 * 69_337_088 + 2048 * 102400
    products = 27 * 16 * (192 + 128) * (128 * 129 // 2)
    t = p.per_token
    assert t is not None and t.model_forward == 2 * (linear + products / 128) == 4_920_450_048


def test_deepseek_v3_counts_eight_routed_and_one_shared_expert() -> None:
    p = graphprof.profile_model("hf:deepseek-v3")
    assert p.total_params == 671_026_404_352 and p.execution == "dry-run" and not p.unsupported
    # per token and MoE layer: 8 of 256 routed experts of 3 x 7168 x 2048, one shared, the router 256 x 7168
    assert _experts_per_token(p, 3) == 9 * 3 * 7168 * 2048 + 7168 * 256 == 398_196_736
    # model FLOPs per token: about 2 x the 37B active parameters
    attention = 7168 * 1536 + 1536 * 24576 + 7168 * 576 + 512 * 32768 + 16384 * 7168
    linear = 61 * attention + 3 * 3 * 7168 * 18432 + 58 * 398_196_736 + 7168 * 129280
    products = 61 * 128 * (192 + 128) * (128 * 129 // 2)
    t = p.per_token
    assert t is not None and t.model_forward == 2 * (linear + products / 128) == 73_571_508_224

"""Attention that follows its mask: flex_attention's block counts, causal and sliding-window shares, the
causal backward, and hf models on a dry run (counted, executed and useful FLOPs)."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
from torch.utils.flop_counter import FlopCounterMode

import graphprof
from graphprof.formulas import op_cost
from graphprof.formulas.attention import causal_useful_fraction, causal_work_fraction
from graphprof.formulas.flex import FlexBlocks, flex_blocks
from graphprof.formulas.fractions import kernel_useful_fraction, kernel_work_fraction
from graphprof.formulas.registry import summarise_call
from graphprof.models.hf_attention import window_block_mask

hop = torch.ops.higher_order.flex_attention


def _causal(b, h, q, kv):  # type: ignore[no-untyped-def]
    return q >= kv


def _window(size: int):  # type: ignore[no-untyped-def]
    def mask(b, h, q, kv):  # type: ignore[no-untyped-def]
        return (q >= kv) & (q - kv < size)

    return mask


def test_block_counts_of_a_causal_mask_by_hand() -> None:
    # L = S = 256 in blocks of 128: the kernel visits 1 + 2 = 3 of 4 blocks = 3 x 16,384 = 49,152 pairs;
    # the mask keeps 256 x 257 / 2 = 32,896
    blocks = flex_blocks(create_block_mask(_causal, None, None, 256, 256, device="cpu").as_tuple())
    assert blocks == FlexBlocks(256, 256, 1, 49_152, 32_896)


def test_block_counts_of_a_sliding_window_by_hand() -> None:
    # W = 128 over L = S = 512: q block 0 visits block 0; blocks 1..3 visit their own and the one before:
    # 1 + 2 + 2 + 2 = 7 blocks = 114,688 pairs. Kept: rows 0..127 see 1..128 keys (8,256), the other
    # 384 rows see 128 each (49,152): 57,408, about W / L = 0.25 of 262,144 (0.219)
    blocks = flex_blocks(create_block_mask(_window(128), None, None, 512, 512, device="cpu").as_tuple())
    assert blocks == FlexBlocks(512, 512, 1, 114_688, 57_408)
    assert 57_408 / 512**2 == pytest.approx(causal_useful_fraction(512, 512, window=128))


def test_block_counts_of_a_document_mask_by_hand() -> None:
    # two documents, 100 and 156 tokens, causal within each: kept 100 x 101 / 2 + 156 x 157 / 2 =
    # 5,050 + 12,246 = 17,296. q block 0 (rows 0..127) needs key block 0; q block 1 (rows 128..255,
    # all of document 1, which starts at 100) needs key blocks 0 and 1: 3 blocks = 49,152 pairs
    doc = torch.tensor([0] * 100 + [1] * 156)

    def document(b, h, q, kv):  # type: ignore[no-untyped-def]
        return (doc[q] == doc[kv]) & (q >= kv)

    blocks = flex_blocks(create_block_mask(document, None, None, 256, 256, device="cpu").as_tuple())
    assert blocks == FlexBlocks(256, 256, 1, 49_152, 17_296)


def test_the_closed_form_window_mask_matches_the_mask_function() -> None:
    # graphprof's block lists for an hf sliding window (no L x S grid) against torch's create_block_mask
    for length, window in ((512, 128), (1000, 300), (384, None)):
        ours = flex_blocks(window_block_mask(length, length, window).as_tuple())
        mask = _causal if window is None else _window(window)
        torch_s = flex_blocks(create_block_mask(mask, None, None, length, length, device="cpu").as_tuple())
        assert ours == torch_s


def test_flex_forward_is_counted_as_flop_counter_counts_it() -> None:
    # full square per query head (grouped-query K / V read per query head): 2 x 4 heads x 256 x 256 x
    # (64 + 64) = 67,108,864 MACs; torch's flex formula (FlopCounterMode's registry): 2 FLOPs per MAC.
    # Backward: 256 x 256 x (3 x 64 + 2 x 64) per head, torch's five products
    q = torch.randn(2, 4, 256, 64)
    k = torch.randn(2, 2, 256, 64)
    block_mask = create_block_mask(_causal, None, None, 256, 256, device="cpu")
    with torch.compiler.set_stance("force_eager"):
        out = flex_attention(q, k, k, block_mask=block_mask, enable_gqa=True)
    args = (q, k, k, lambda s, *_: s, block_mask.as_tuple(), 0.125, {})
    cost = op_cost(hop, args, {}, (out, torch.empty(2, 4, 256), torch.empty(2, 4, 256)))
    assert cost is not None
    assert cost.macs == 2 * 4 * 256 * 256 * 128 == 67_108_864
    registry = FlopCounterMode(display=False).flop_registry
    assert 2 * cost.macs == registry[hop](q, k, k, out_val=None)
    backward_hop = torch.ops.higher_order.flex_attention_backward
    lse = torch.empty(2, 4, 256)
    backward_args = (q, k, k, out, lse, out, None, None, None, block_mask.as_tuple(), 0.125, {})
    backward = op_cost(backward_hop, backward_args, {}, (q, k, k, ()))
    assert backward is not None and backward.macs == 2 * 4 * 256 * 256 * (3 * 64 + 2 * 64)
    assert 2 * backward.macs == registry[backward_hop](q, k, k, out, lse, out, out_val=None)
    summarised, _ = summarise_call(hop, args, {})
    assert kernel_work_fraction(hop, summarised, {}) == 0.75  # 3 of 4 blocks
    assert kernel_useful_fraction(hop, summarised, {}) == 32_896 / 65_536


def test_flex_on_a_dry_run_is_one_counted_operator() -> None:
    block_mask = create_block_mask(_causal, None, None, 256, 256, device="cpu")

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(64, 64)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q = self.proj(x)
            return flex_attention(q, q, q, block_mask=block_mask)  # type: ignore[return-value]

    profile = graphprof.profile_model(Model(), input_shape=(1, 4, 256, 64))
    flex = [op for _, op in profile.iter_ops() if op.op == "higher_order.flex_attention"]
    assert len(flex) == 1 and flex[0].status == "counted" and not profile.unsupported
    assert flex[0].cost.macs == 4 * 256 * 256 * 128
    assert (flex[0].work_fraction, flex[0].useful_fraction) == (0.75, 32_896 / 65_536)
    other = profile.total_flops - flex[0].cost.flops
    assert profile.useful_flops == other + round(flex[0].cost.flops * 32_896 / 65_536)


def test_causal_and_window_shares_by_hand() -> None:
    # W = 4 over L = S = 8: rows see 1, 2, 3, 4, 4, 4, 4, 4 keys = 26 of 64
    assert causal_useful_fraction(8, 8, window=4) == 26 / 64
    # a window as long as the sequence is plain causal: 8 x 9 / 2 = 36 of 64
    assert causal_useful_fraction(8, 8, window=8) == causal_useful_fraction(8, 8) == 36 / 64
    # L = S = 8192, tiles of 128, W = 256: query tiles 0 and 1 need 1 and 2 key tiles, the other 62
    # need 3 each: 1 + 2 + 186 = 189 of 4096
    assert causal_work_fraction(8192, 8192, window=256) == 189 / 4096
    assert causal_work_fraction(8192, 8192) == 2080 / 4096  # the causal triangle of tiles, as before


def test_the_causal_backward_gets_the_forwards_credit() -> None:
    # _scaled_dot_product_flash_attention_for_cpu_backward(grad_out, q, k, v, out, lse, dropout, is_causal)
    q = torch.empty(1, 4, 1024, 64, device="meta")
    backward = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default
    args = (q, q, q, q, q, torch.empty(1, 4, 1024, device="meta"), 0.0, True)
    # 1024 / 128 = 8 tiles a side: 1 + ... + 8 = 36 of 64; kept 1024 x 1025 / 2 of 1024^2
    assert kernel_work_fraction(backward, args, {}) == 36 / 64
    assert kernel_useful_fraction(backward, args, {}) == 1024 * 1025 / 2 / 1024**2
    assert kernel_work_fraction(backward, (*args[:7], False), {}) == 1.0


SMALL = "num_hidden_layers=2&hidden_size=256&intermediate_size=512&num_attention_heads=4&num_key_value_heads=2"


def _attention_ops(profile: graphprof.Profile) -> list[object]:
    return [op for _, op in profile.iter_ops() if "attention" in op.op]


def test_hf_llama_dry_run_is_causal_forward_and_backward() -> None:
    # L = 1024: the CPU flash kernel with is_causal, grouped-query K / V as they are (2 heads, not 4)
    profile = graphprof.profile_model(f"hf:llama?{SMALL}", input_shape=(1, 1024), mode="train")
    ops = _attention_ops(profile)
    assert sorted({op.op for op in ops}) == [  # type: ignore[attr-defined]
        "aten._scaled_dot_product_flash_attention_for_cpu",
        "aten._scaled_dot_product_flash_attention_for_cpu_backward",
    ]
    for op in ops:
        assert op.work_fraction == 36 / 64  # type: ignore[attr-defined]
        assert op.useful_fraction == 1024 * 1025 / 2 / 1024**2  # type: ignore[attr-defined]
        assert op.input_shapes[2 if "backward" in op.op else 1][1] == 2  # type: ignore[attr-defined]
    assert profile.useful_flops < profile.executed_flops < profile.total_flops


def test_hf_mistral_sliding_window_follows_w_over_l() -> None:
    # W = 256 over L = 1024 (from the config's sliding_window): useful (256 x 257 / 2 + 768 x 256) / 1024^2
    # = 0.2189; executed 1 + 2 + 6 x 3 = 21 of 64 blocks
    profile = graphprof.profile_model(f"hf:mistral-7b?{SMALL}&sliding_window=256", input_shape=(1, 1024))
    assert profile.execution == "dry-run"
    ops = _attention_ops(profile)
    assert [op.op for op in ops] == ["higher_order.flex_attention"] * 2  # type: ignore[attr-defined]
    for op in ops:
        assert op.useful_fraction == (256 * 257 // 2 + 768 * 256) / 1024**2  # type: ignore[attr-defined]
        assert op.work_fraction == 21 / 64  # type: ignore[attr-defined]


def test_causal_share_is_plain_arithmetic_inside_a_fake_tensor_mode() -> None:
    """The sharded step runs its formulas under FakeTensorMode: a torch tensor made there had no value to sum
    (``graphprof shard --model hf:llama fsdp:2`` ended in DataDependentOutputException)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from graphprof.formulas.attention import causal_useful_fraction

    with FakeTensorMode():
        share = causal_useful_fraction(8, 8, window=4)
    assert share == 26 / 64  # 1 + 2 + 3 + 4 x 5 = 26 of 8 x 8


def _window_pairs(length: int, window: int) -> int:
    """Query-key pairs a causal window of ``window`` keys keeps: a triangle, then ``window`` per query."""
    return window * (window + 1) // 2 + (length - window) * window


def test_hf_gemma2_alternates_a_window_of_4096_with_causal_layers() -> None:
    # Gemma-2's published window (4096, on layers 0, 2, 4...) over L = 8192, on 2 small layers: both soft-capped,
    # so both flex attention; 4 heads of 64 over 2 KV heads; blocks of 128, 64 x 64 in the square
    spec = f"hf:gemma-2-9b?{SMALL}&head_dim=64&query_pre_attn_scalar=64&vocab_size=1000"
    profile = graphprof.profile_model(spec, input_shape=(1, 8192))
    window, causal = _attention_ops(profile)
    for op in (window, causal):  # counted: the full square, scores and values, 4 heads x (64 + 64) per pair
        assert op.op == "higher_order.flex_attention"  # type: ignore[attr-defined]
        assert op.cost.macs == 4 * 8192**2 * 128  # type: ignore[attr-defined]
    # useful: the window keeps 4096 x 4097 / 2 + 4096 x 4096 pairs, W/L (1 - W / 2L) = 0.375 of the square
    assert window.useful_fraction == _window_pairs(8192, 4096) / 8192**2 == pytest.approx(0.375, abs=1e-4)  # type: ignore[attr-defined]
    assert causal.useful_fraction == 8192 * 8193 / 2 / 8192**2  # type: ignore[attr-defined]
    # executed: query block i visits key blocks i - 32 .. i (i + 1 of them below 32): 528 + 32 x 33 = 1584 of
    # 4096; the causal layer the 64 x 65 / 2 = 2080 blocks on and below the diagonal
    assert window.work_fraction == (sum(range(1, 33)) + 32 * 33) / 64**2 == 1584 / 4096  # type: ignore[attr-defined]
    assert causal.work_fraction == 2080 / 4096  # type: ignore[attr-defined]
    # per token: the weights (q, o 256 x 256, k, v 256 x 128, MLP 3 x 256 x 512 per layer; LM head 256 x 1000)
    # and each layer's useful pairs at 4 x 128 MACs
    linear = 2 * (2 * 256 * 256 + 2 * 256 * 128 + 3 * 256 * 512) + 256 * 1000
    attention = 4 * 128 * (_window_pairs(8192, 4096) + 8192 * 8193 // 2)
    t = profile.per_token
    assert t is not None and t.model_forward == 2 * (linear + attention / 8192) == 10_212_096
    assert profile.useful_flops < profile.executed_flops < profile.total_flops


def test_hf_qwen2_windows_the_layers_from_max_window_layers_on() -> None:
    # use_sliding_window with max_window_layers=1: layer 0 causal (the CPU flash kernel), layer 1 a window of 256
    spec = f"hf:qwen2-7b?{SMALL}&use_sliding_window=true&sliding_window=256&max_window_layers=1"
    causal, window = _attention_ops(graphprof.profile_model(spec, input_shape=(1, 1024)))
    assert causal.op == "aten._scaled_dot_product_flash_attention_for_cpu"  # type: ignore[attr-defined]
    assert (causal.useful_fraction, causal.work_fraction) == (1024 * 1025 / 2 / 1024**2, 36 / 64)  # type: ignore[attr-defined]
    assert window.op == "higher_order.flex_attention"  # type: ignore[attr-defined]
    assert (window.useful_fraction, window.work_fraction) == (_window_pairs(1024, 256) / 1024**2, 21 / 64)  # type: ignore[attr-defined]
    # as published (use_sliding_window false) the configured window is not used: every layer causal
    published = _attention_ops(graphprof.profile_model(f"hf:qwen2-7b?{SMALL}", input_shape=(1, 1024)))
    assert [op.useful_fraction for op in published] == [1024 * 1025 / 2 / 1024**2] * 2  # type: ignore[attr-defined]


def test_hf_mistral_window_takes_w_over_l_off_the_per_token_figure() -> None:
    # the same 2 layers with and without a window of 256 over 1024 tokens: the model FLOPs per token differ by
    # the pairs the window drops, 4 heads x (64 + 64) MACs each, in both layers
    profiles = [graphprof.profile_model(f"hf:mistral-7b?{SMALL}&sliding_window={w}", input_shape=(1, 1024)) for w in (256, "none")]
    windowed, causal = (p.per_token for p in profiles)
    assert windowed is not None and causal is not None
    dropped = 1024 * 1025 // 2 - _window_pairs(1024, 256)
    assert causal.model_forward - windowed.model_forward == 2 * 2 * 4 * 128 * dropped / 1024
    assert windowed.executed < causal.executed
    assert profiles[0].total_macs == profiles[1].total_macs  # counted: the full square either way


def test_hf_gemma3_windows_five_layers_of_six() -> None:
    # Gemma-3's pattern (config.layer_types: five sliding-window layers, then a global one) on 6 small layers, a
    # window of 256 over L = 1024, no soft-capping: the window layers run flex attention, the global one the
    # CPU flash kernel with is_causal; blocks of 128, 8 x 8 in the square
    small = "num_hidden_layers=6&hidden_size=256&intermediate_size=512&num_attention_heads=4&num_key_value_heads=2"
    spec = f"hf:gemma-3-1b?{small}&head_dim=64&query_pre_attn_scalar=64&vocab_size=1000&sliding_window=256"
    ops = _attention_ops(graphprof.profile_model(spec, input_shape=(1, 1024)))
    assert [op.op for op in ops] == ["higher_order.flex_attention"] * 5 + ["aten._scaled_dot_product_flash_attention_for_cpu"]  # type: ignore[attr-defined]
    # useful: the window keeps 256 x 257 / 2 + 768 x 256 pairs of 1024^2 (about W/L); executed: query block i
    # visits key blocks i - 2 .. i (1, 2, then 3 of them): 1 + 2 + 6 x 3 = 21 of 64
    for op in ops[:5]:
        assert (op.useful_fraction, op.work_fraction) == (_window_pairs(1024, 256) / 1024**2, 21 / 64)  # type: ignore[attr-defined]
    # the global layer: causal, half the square and the 36 blocks on and below the diagonal
    assert (ops[5].useful_fraction, ops[5].work_fraction) == (1024 * 1025 / 2 / 1024**2, 36 / 64)  # type: ignore[attr-defined]

"""Mixture-of-experts layers on a dry run: each token through its top-k routed experts, the shared experts
and the router, and nothing else (DeepSeek-V2 / V3, Mixtral, Qwen3-MoE), checked by hand on small configs."""

from __future__ import annotations

import pytest

import graphprof

pytest.importorskip("transformers")

# 2 layers of hidden 64 and 4 heads; 32 tokens. DeepSeek's latent attention: KV rank 16, heads of 16 + 8 (rope)
# for queries and keys, 16 for values; layer 0 dense (MLP 160), layer 1 the experts (32 each)
_DEEPSEEK = (
    "hidden_size=64&intermediate_size=160&moe_intermediate_size=32&num_hidden_layers=2&first_k_dense_replace=1"
    "&num_attention_heads=4&num_key_value_heads=4&kv_lora_rank=16&qk_nope_head_dim=16&qk_rope_head_dim=8"
    "&v_head_dim=16&vocab_size=1000"
)
SPECS = {
    # 8 routed experts, 2 per token, 2 shared experts (one MLP of 2 x 32)
    "deepseek-v2": f"hf:deepseek-v2-lite?{_DEEPSEEK}&n_routed_experts=8&num_experts_per_tok=2&n_shared_experts=2",
    # 8 routed experts in 4 groups (2 groups kept), 2 per token, 1 shared expert; queries through a rank of 24
    "deepseek-v3": f"hf:deepseek-v3?{_DEEPSEEK}&n_routed_experts=8&num_experts_per_tok=2&n_group=4&topk_group=2"
    "&n_shared_experts=1&q_lora_rank=24",
    # 4 experts of 96, 2 per token, no shared expert
    "mixtral": "hf:mixtral-8x7b?hidden_size=64&intermediate_size=96&num_hidden_layers=2&num_attention_heads=4"
    "&num_key_value_heads=2&num_local_experts=4&vocab_size=1000",
    # 8 experts of 32, 2 per token, no shared expert, every layer sparse
    "qwen3-moe": "hf:qwen3-30b-a3b?hidden_size=64&moe_intermediate_size=32&num_hidden_layers=2&num_attention_heads=4"
    "&num_key_value_heads=2&num_experts=8&num_experts_per_tok=2&vocab_size=1000",
}
# per token in layer 1: (top-k x gate, up and down of 64 x the expert's width, the shared MLP's, the router 64 x E)
EXPECTED = {
    "deepseek-v2": (2 * 3 * 64 * 32, 3 * 64 * (2 * 32), 64 * 8),
    "deepseek-v3": (2 * 3 * 64 * 32, 3 * 64 * 32, 64 * 8),
    "mixtral": (2 * 3 * 64 * 96, 0, 64 * 4),
    "qwen3-moe": (2 * 3 * 64 * 32, 0, 64 * 8),
}


def _module_macs(profile: graphprof.Profile) -> dict[str, int]:
    return {row.path: row.forward.macs for row in profile.modules}


@pytest.mark.parametrize("family", sorted(SPECS))
def test_expert_macs_per_token_are_top_k_routed_plus_shared_plus_router(family: str) -> None:
    p = graphprof.profile_model(SPECS[family], input_shape=(1, 32))
    assert p.execution == "dry-run" and not p.unsupported
    routed, shared, router = EXPECTED[family]
    macs = _module_macs(p)
    assert macs["model.layers.1.mlp.experts"] == 32 * routed
    assert macs.get("model.layers.1.mlp.shared_experts", 0) == 32 * shared
    assert macs["model.layers.1.mlp.gate"] == 32 * router
    assert macs["model.layers.1.mlp"] == 32 * (routed + shared + router)  # nothing else in the block multiplies


def test_more_experts_cost_only_the_router() -> None:
    # 8 -> 16 routed experts, still 2 per token: the experts' MACs stay, the router's double
    specs = [SPECS["deepseek-v2"].replace("n_routed_experts=8", f"n_routed_experts={n}") for n in (8, 16)]
    few, many = (_module_macs(graphprof.profile_model(spec, input_shape=(1, 32))) for spec in specs)
    assert many["model.layers.1.mlp.experts"] == few["model.layers.1.mlp.experts"]
    assert many["model.layers.1.mlp.gate"] == 2 * few["model.layers.1.mlp.gate"]


def test_deepseek_model_flops_per_token_count_the_active_experts_by_hand() -> None:
    t = graphprof.profile_model(SPECS["deepseek-v2"], input_shape=(1, 32)).per_token
    assert t is not None
    # attention weights per layer: q 64 -> 4 x 24, the latent KV 64 -> 16 + 8, its expansion 16 -> 4 x (16 + 16),
    # o 4 x 16 -> 64; layer 0's MLP 3 x 64 x 160; layer 1's experts as above; the LM head 64 x 1000
    attention = 64 * 96 + 64 * 24 + 16 * 128 + 64 * 64
    linear = 2 * attention + 3 * 64 * 160 + sum(EXPECTED["deepseek-v2"]) + 64 * 1000
    # the products of attention, causal: 4 heads x (24 + 16) MACs over 32 x 33 / 2 pairs, in 2 layers
    products = 2 * 4 * 40 * (32 * 33 // 2)
    assert t.model_forward == 2 * (linear + products / 32) == 305_472
    assert t.model_train == 3 * t.model_forward


def test_mixtral_model_flops_per_token_count_the_active_experts_by_hand() -> None:
    t = graphprof.profile_model(SPECS["mixtral"], input_shape=(1, 32)).per_token
    assert t is not None
    # per layer: q and o 64 x 64, k and v 64 x 32 (2 KV heads of 16), then 2 of the 4 experts and the router;
    # both layers sparse; the LM head 64 x 1000
    linear = 2 * (2 * 64 * 64 + 2 * 64 * 32 + sum(EXPECTED["mixtral"])) + 64 * 1000
    products = 2 * 4 * 32 * (32 * 33 // 2)  # causal: 4 heads x (16 + 16) MACs over 528 pairs, in 2 layers
    assert t.model_forward == 2 * (linear + products / 32) == 334_080

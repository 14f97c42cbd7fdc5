"""Model FLOPs per token (graphprof/cost/tokens.py): the convention checked by hand on the small LLaMA."""

from __future__ import annotations

import graphprof


def test_model_flops_per_token_of_the_small_llama_by_hand() -> None:
    p = graphprof.profile_model("hf:llama")  # hidden 256, MLP 688, 4 layers, 4 heads of 64, 2 KV heads, 128 tokens
    t = p.per_token
    assert t is not None and t.tokens == 128
    # weights per token and layer: q 256x256, k and v 256x128 (2 KV heads x 64), o 256x256, gate, up, down 256x688
    layer = 256 * 256 + 2 * 256 * 128 + 256 * 256 + 3 * 256 * 688
    assert layer == 724_992
    linear = 4 * layer + 256 * 32000  # the LM head is in, the embedding look-up out
    # attention, causal: scores and values, 4 heads x 64, over the 128 x 129 / 2 unmasked pairs, in 4 layers
    attention = 4 * 2 * 4 * 64 * (128 * 129 // 2)
    assert t.model_forward == 2 * (128 * linear + attention) / 128 == 22_448_128
    assert t.model_train == 3 * t.model_forward
    # executed counts every op (norms, activations, softmax inside the kernel's tiles): more than the model FLOPs;
    # counted is the full square, at least the executed
    assert t.counted >= t.executed > t.model_forward
    assert p.to_dict()["per_token"]["model_flops_forward"] == t.model_forward


def test_a_model_without_token_inputs_has_no_per_token_figure() -> None:
    p = graphprof.profile_model("resnet18")
    assert p.per_token is None and "per_token" not in p.to_dict()

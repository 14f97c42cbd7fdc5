"""Causal and window credit in train mode as in eval, for hf: names and for transformers objects."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import torch

import graphprof

transformers = pytest.importorskip("transformers")


def _useful(p: Any) -> Counter[tuple[str, str, float]]:
    """(op, phase, useful share to 4 places) of every attention call, with counts."""
    return Counter((op.op, op.phase.value, round(op.useful_fraction, 4)) for row in p.layers for op in row.ops if "attention" in op.op)


def _window_share(length: int, window: int) -> float:
    # query i sees min(i + 1, W) keys: W(W+1)/2 for the first W rows, W for each of the other L - W rows
    return (window * (window + 1) / 2 + (length - window) * window) / length**2


def _mistral(**config: Any) -> Any:
    c = transformers.MistralConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=100, sliding_window=64, head_dim=16, **config,
    )  # fmt: skip
    return transformers.AutoModelForCausalLM.from_config(c)


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_a_transformers_object_gets_its_window_credit_and_its_config_back(mode: str) -> None:
    model = _mistral()
    before = model.config.__dict__.get("_attn_implementation_internal")
    p = graphprof.profile_model(model, example_inputs=(torch.randint(0, 100, (1, 256)),), mode=mode)
    share = round(_window_share(256, 64), 4)  # (2,080 + 192 x 64) / 65,536 = 0.2192
    assert share == 0.2192
    expected = Counter({("higher_order.flex_attention", "forward", share): 2})
    if mode == "train":
        expected[("higher_order.flex_attention_backward", "backward", share)] = 2
    assert _useful(p) == expected
    assert p.useful_flops < p.total_flops
    assert any(n.startswith("a transformers model: attention counted as the SDPA kernels") for n in p.notes)
    assert model.config._attn_implementation == "sdpa" and model.config.__dict__.get("_attn_implementation_internal") == before


def test_an_eager_or_padded_transformers_object_is_counted_as_it_runs_and_says_why() -> None:
    eager = _mistral(attn_implementation="eager")
    p = graphprof.profile_model(eager, example_inputs=(torch.randint(0, 100, (1, 128)),), mode="train")
    assert not _useful(p) and p.useful_flops == p.total_flops
    assert any("counted as it runs" in n and "'eager'" in n for n in p.notes)

    ids, mask = torch.randint(0, 100, (2, 128)), torch.ones(2, 128, dtype=torch.long)
    mask[1, 100:] = 0
    p = graphprof.profile_model(_mistral(), example_inputs=(ids,), example_kwargs={"attention_mask": mask})
    assert any("counted as it runs" in n and "pads some positions" in n for n in p.notes)


@pytest.mark.slow
def test_gemma2_window_layers_in_train_mode_keep_the_eval_share() -> None:
    # Gemma-2-9B at 8,192 tokens: 21 window layers of 4,096 (share 0.375) and 21 causal layers (about 0.5)
    share = round(_window_share(8192, 4096), 4)
    causal = round(8192 * 8193 / 2 / 8192**2, 4)
    assert (share, causal) == (0.375, 0.5001)
    train = _useful(graphprof.profile_model("hf:gemma-2-9b", input_shape=(1, 8192), mode="train"))
    assert train == Counter(
        {
            ("higher_order.flex_attention", "forward", share): 21,
            ("higher_order.flex_attention", "forward", causal): 21,
            ("higher_order.flex_attention_backward", "backward", share): 21,
            ("higher_order.flex_attention_backward", "backward", causal): 21,
        }
    )

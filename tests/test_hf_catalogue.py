"""The hf: catalogue builds well-known configurations on the meta device with their published sizes."""

from __future__ import annotations

import pytest

from graphprof.models import list_models, resolve_model
from graphprof.models.hf import PRESETS

pytest.importorskip("transformers")

# Published parameter counts (model cards, or the sum the released checkpoints load into transformers):
PUBLISHED = {
    "gpt2": 124_439_808,  # openai-community/gpt2, "124M"; the LM head is tied to wte
    "llama-3-8b": 8_030_261_248,  # meta-llama/Meta-Llama-3-8B, "8.03B params" on its hub page
    "llama-3-70b": 70_553_706_496,  # meta-llama/Meta-Llama-3-70B, "70.6B params"
    "mistral-7b": 7_241_732_096,  # mistralai/Mistral-7B-v0.1, "7.24B params"
    "mixtral-8x7b": 46_702_792_704,  # mistralai/Mixtral-8x7B-v0.1, "46.7B params"
    "qwen2-7b": 7_615_616_512,  # Qwen/Qwen2-7B, "7.62B params"
    "phi-3-mini": 3_821_079_552,  # microsoft/Phi-3-mini-4k-instruct, "3.82B params"
    "bert-base": 109_482_240,  # google-bert/bert-base-uncased with the pooler, "110M"
    "t5-base": 222_903_552,  # google-t5/t5-base, "223M params"
    "vit-b-16": 86_389_248,  # google/vit-base-patch16-224-in21k (ViTModel with pooler), "86.4M params"
    "whisper-small": 241_734_912,  # openai/whisper-small, "242M params"
    "gemma-2-9b": 9_241_705_984,  # google/gemma-2-9b, "9.24B params"; embeddings tied to the LM head
    "gemma-3-1b": 999_885_952,  # google/gemma-3-1b-pt; Keras Hub's gemma3_1b preset lists 999,885,952 params
    "qwen3-30b-a3b": 30_532_122_624,  # Qwen/Qwen3-30B-A3B, "30.5B params" (3.3B active)
    "mamba-2.8b": 2_768_345_600,  # state-spaces/mamba-2.8b-hf, "2.77B params"; by hand in tests/test_hf_families.py
    "mamba-codestral-7b": 7_285_403_648,  # mistralai/Mamba-Codestral-7B-v0.1, "7,285,403,648" in Mistral's release
    "deepseek-v2-lite": 15_706_484_224,  # deepseek-ai/DeepSeek-V2-Lite, "15.7B params"; by hand in test_hf_families.py
    "deepseek-v3": 671_026_404_352,  # deepseek-ai/DeepSeek-V3, "671B" main model (685B on the hub with the 14B MTP)
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_parameter_counts(name: str) -> None:
    model = resolve_model(f"hf:{name}", device="meta").model
    assert sum(p.numel() for p in model.parameters()) == PUBLISHED[name]


def test_catalogue_is_listed_and_covered() -> None:
    listed = {i.name for i in list_models()}
    assert {f"hf:{n}" for n in PRESETS} <= listed
    assert set(PUBLISHED) | {"llama"} == set(PRESETS)  # every entry has a published figure, but the small default


def test_inputs_follow_the_model_type() -> None:
    assert resolve_model("hf:vit-b-16", device="meta").kwargs["pixel_values"].shape == (1, 3, 224, 224)
    whisper = resolve_model("hf:whisper-small", batch_size=2, device="meta").kwargs
    assert whisper["input_features"].shape == (2, 80, 3000)
    assert whisper["decoder_input_ids"].shape == (2, 64)
    t5 = resolve_model("hf:t5-base", input_shape=(1, 32), device="meta").kwargs
    assert (t5["input_ids"].shape, t5["decoder_input_ids"].shape) == ((1, 32), (1, 32))

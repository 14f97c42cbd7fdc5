"""What the examples share: where they write their files, and the small local LLaMA of seed 000's examples."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any


def out_dir() -> Path:
    """The directory given as the first argument, else a fresh temporary one."""
    if len(sys.argv) > 1:
        path = Path(sys.argv[1])
        path.mkdir(parents=True, exist_ok=True)
        return path
    return Path(tempfile.mkdtemp(prefix="graphprof-example-"))


def tiny_llama() -> tuple[Any, Any]:
    """``(LlamaForCausalLM, input_ids)``: a 2-layer LLaMA built from a config (no download), 16 tokens."""
    import torch
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=1000, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    return model, torch.randint(0, config.vocab_size, (1, 16))

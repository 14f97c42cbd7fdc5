"""Seed 000's ``test_hf_llama.py``: wrap ``model.model`` of a Hugging Face ``LlamaForCausalLM``.

The seed downloads Llama-3.1-8B and its tokenizer; this example builds a small LLaMA from a config and
makes the tokens itself, so it runs anywhere, offline. With real weights, swap in ``from_pretrained``.

    python examples/test_hf_llama.py [out_dir]
"""

from __future__ import annotations

import torch
import transformers
from _common import out_dir

from graphprof.compat.seed000 import Profiler

config = transformers.LlamaConfig(
    vocab_size=1000, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
)  # fmt: skip
model = transformers.LlamaForCausalLM(config).eval()
dry_inputs = {"input_ids": torch.randint(0, config.vocab_size, (1, 8)), "attention_mask": torch.ones(1, 8, dtype=torch.long)}

model.model = Profiler(model.model, granularity="module", token_kwarg="input_ids", auto_profile=False, capture_ops=False)
base = out_dir() / "llama_profile"

# Module-level graph
model.model.profile_once(**dry_inputs)
model.model.export(base, module_include_edges=True, include_stats=True, overwrite_module=True)

# Optional operator-level detail graph
model.model.profile_detail(**dry_inputs)
model.model.export(base, detail_include_edges=True, include_stats=True, overwrite_module=False)
model.model.graph.stats()
print(f"wrote {base}_module.txt and {base}_detail.txt")

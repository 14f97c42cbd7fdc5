"""Seed 000's ``test_llama.py``: a local LLaMA-like transformer (no download: built from a config).

At the default granularity every decoder layer (``layers.0``, ``layers.1``: what EdgeShard splits across
devices) is a node with its measured forward time and output shape.

    python examples/test_llama.py [out_dir]
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
torch.manual_seed(0)
model = transformers.LlamaForCausalLM(config).eval()
input_ids = torch.randint(0, config.vocab_size, (1, 16))

prof = Profiler(model.model, granularity="module", token_kwarg="input_ids", auto_profile=False)
graph = prof.profile_once(input_ids=input_ids)
base = out_dir() / "llama_profile"
prof.export(base, overwrite_module=True)

for node in graph.nodes:
    if node.name.startswith("layers."):
        print(f"{node.name}: {node.measured_ms:.3f} ms, output {node.output_shapes}")
graph.stats()

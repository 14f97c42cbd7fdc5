"""Seed 000's ``test_llama.py``: a local LLaMA-like transformer (no download: built from a config).

At the default granularity every decoder layer (``layers.0``, ``layers.1``: what EdgeShard splits across
devices) is a node with its measured forward time and output shape.

    python examples/test_llama.py [out_dir]
"""

from __future__ import annotations

from _common import out_dir, tiny_llama

from graphprof.compat.seed000 import Profiler

model, input_ids = tiny_llama()

prof = Profiler(model.model, granularity="module", token_kwarg="input_ids", auto_profile=False)
graph = prof.profile_once(input_ids=input_ids)
base = out_dir() / "llama_profile"
prof.export(base, overwrite_module=True)

for node in graph.nodes:
    if node.name.startswith("layers."):
        print(f"{node.name}: {node.measured_ms:.3f} ms, output {node.output_shapes}")
graph.stats()

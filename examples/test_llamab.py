"""Seed 000's ``test_llamab.py``: a multi-epoch timing sketch for a local LLaMA-like model.

The wrapper is profiled once, then called like the model for a few epochs; each epoch's wall time is
printed beside the profile's own measured per-layer times.

    python examples/test_llamab.py [out_dir]
"""

from __future__ import annotations

import time

import torch
from _common import out_dir, tiny_llama

from graphprof.compat.seed000 import Profiler

out = out_dir()  # before the work: --help, or a folder that cannot be made, ends here
model, input_ids = tiny_llama()
model.model = Profiler(model.model, token_kwarg="input_ids", auto_profile=True)

with torch.no_grad():
    for epoch in range(3):
        start = time.perf_counter()
        model(input_ids=input_ids)  # the first call builds the module graph first (auto_profile)
        print(f"epoch {epoch}: {(time.perf_counter() - start) * 1e3:.2f} ms")

graph = model.model.graph
timed = sum(n.measured_ms or 0.0 for n in graph.nodes)
print(f"profiled layers: {timed:.2f} ms over {sum(n.measured_ms is not None for n in graph.nodes)} nodes")
model.model.export(out / "llamab_profile", overwrite_module=True)

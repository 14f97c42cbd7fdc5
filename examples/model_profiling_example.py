"""Seed 003's ``examples/model_profiling_example.py``: ``@capture_model``, a trace per forward, analysis.

python examples/model_profiling_example.py [out_dir]
"""

from __future__ import annotations

import os

import torch
from _common import out_dir
from torch import nn

out = out_dir()
os.environ["GRAPHPROF_TRACE_DIR"] = str(out)
os.environ["CHISEL_BACKEND_RUN"] = "1"  # the seed's switch; GRAPHPROF_CAPTURE=1 works too

from graphprof.compat.seed003 import capture_model, parse_model_trace  # noqa: E402  (after the switch)


@capture_model(model_name="MyModel", record_shapes=True, profile_memory=True)
class MyModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear1 = nn.Linear(100, 50)
        self.linear2 = nn.Linear(50, 10)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.linear1(x))
        return self.linear2(x)


model = MyModel()
data = torch.randn(32, 100)
for _ in range(2):
    output = model(data)  # MyModel_forward_001.json, MyModel_forward_002.json

traces = sorted(out.glob("MyModel_forward_*.json"))
print(f"traces: {[t.name for t in traces]}")
analysis = parse_model_trace(str(traces[0]), "MyModel")
if analysis:
    for layer_name, stats in analysis["layer_stats"].items():
        total_time_ms = stats["total_time_us"] / 1000
        print(f"{layer_name}: {total_time_ms:.2f}ms")
        print(f"  Calls: {stats['call_count']}")
        print(f"  Shapes: {list(stats['shapes'])}")
        print(f"  Operations: {list(stats['operations'])}")

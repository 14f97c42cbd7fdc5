"""Will it fit: the planned peak of a training step beside a real step's, for six models on this CPU.

    python benchmarks/bench_fits.py [resnet18:8 vit_b_32:2 hf:llama:2 ...]

For each ``MODEL:BATCH``: :func:`graphprof.training.plan_memory` (AdamW, one parameter at a time as torch
runs it on the CPU; a dry run on FakeTensors, or real values for a graph model whose forward reads them)
and :func:`graphprof.training.measure_step` (the same step run for real, the second of two, measured by the
CPU allocator's own events under ``torch.profiler``: what the process really held). Prints predicted,
measured, the signed error and where the predicted peak is; the breakdown is checked to sum to the peak.
The reference a user runs: the same two calls, or ``torch.distributed._tools.mem_tracker.MemTracker``
around the second step. The planner is fitted to nothing, so every model here is held out.
"""

from __future__ import annotations

import os
import sys
import time

import torch

from graphprof.models import resolve_model
from graphprof.training import measure_step, plan_memory

#: a CNN, a ViT, a small LLaMA (hf config), a BERT (4 layers), a graph model, and EfficientNet (depthwise convs)
DEFAULT = ["resnet18:8", "vit_b_32:2", "hf:llama:2", "hf:bert-base?num_hidden_layers=4:2", "pyg:gat?num_nodes=5000:1", "efficientnet_b0:4"]


def bench(item: str) -> float:
    name, _, batch = item.rpartition(":")
    batch_size = None if name.startswith("pyg:") else int(batch)
    plan = plan_memory(name, batch_size=batch_size, optimizer="adamw", foreach=False)
    assert plan.peak.breakdown.total == sum(v for k, v in plan.peak.breakdown.to_dict().items() if k != "total")
    torch.manual_seed(0)
    built = resolve_model(name, batch_size=batch_size, device="cpu")
    measured = measure_step(built.model, tuple(built.args), dict(built.kwargs), optimizer="adamw")
    error = plan.peak_bytes / measured.peak_bytes - 1
    print(f"{name:40s} {plan.execution:5s} predicted {plan.peak_bytes / 1e6:9.1f} MB  measured {measured.peak_bytes / 1e6:9.1f} MB"
          f"  error {error:+7.2%}  peak in the {plan.peak.phase.value} at {plan.peak.module}", flush=True)  # fmt: skip
    return error


def main(items: list[str]) -> None:
    print(f"load average {os.getloadavg()}; torch {torch.__version__}; memory figures do not depend on load")
    start = time.perf_counter()
    errors = [bench(item) for item in items]
    print(f"largest |error| {max(abs(e) for e in errors):.2%} over {len(errors)} models ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT)

"""Do checkpoint plans hold on the real step? ``graphprof fits --memory-budget`` on five models, checked apart.

    python benchmarks/bench_plan_holds.py [--fraction 0.8] [MODEL ...]

For each model: the unplanned step's peak (a dry run), a budget of ``--fraction`` of it, and the plan
``plan_memory(..., memory_budget=budget, hardware="desktop-cpu")`` makes (a CPU plan: it is run for real
while it is made, :class:`graphprof.training.measured.PlanCheck`). Then, apart from the planner, the same
model with random weights is stepped on this CPU with the chosen modules checkpointed through
``torch.utils.checkpoint`` (:func:`graphprof.training.measure_step`: ``torch.profiler``'s allocator events),
and its peak is set beside the printed one and the budget. Memory figures do not depend on the machine's
load; the load is printed anyway.
"""

from __future__ import annotations

import os
import sys

import torch

from graphprof.base.inputs import materialize
from graphprof.measure.run import materialized
from graphprof.run.step import checkpointed
from graphprof.session import build_model
from graphprof.training import measure_step, plan_memory

CASES = {
    "resnet18": (16, 3, 224, 224),
    "resnet50": (8, 3, 224, 224),
    "hf:llama?num_hidden_layers=8": (8, 512),
    "vit_b_16": (16, 3, 224, 224),
    "mobilenet_v3_large": (16, 3, 224, 224),
    "convnext_tiny": (8, 3, 224, 224),
}


def row(name: str, shape: tuple[int, ...], fraction: float) -> str:
    base = plan_memory(name, input_shape=shape, foreach=False, hardware="desktop-cpu")
    budget = int(fraction * base.peak_bytes)
    cp = plan_memory(name, input_shape=shape, foreach=False, memory_budget=budget, hardware="desktop-cpu").checkpoint
    assert cp is not None and cp.planned is not None and cp.peak_bytes is not None
    built = build_model(name, input_shape=shape)
    cpu = torch.device("cpu")
    model, _ = materialized(built.model, cpu, None, 0)
    args, kwargs = materialize(tuple(built.args), cpu), materialize(dict(built.kwargs), cpu)
    names = {c.module for c in cp.chosen}
    real = measure_step(model, args, kwargs, wraps=(checkpointed(names),), repeats=1).peak_bytes
    mb = 1e6
    return (
        f"| {name} | {'x'.join(map(str, shape))} | {base.peak_bytes / mb:,.1f} | {budget / mb:,.1f} | {len(names)} | "
        f"{cp.planned.peak_bytes / mb:,.1f} | {cp.peak_bytes / mb:,.1f} | {real / mb:,.1f} | {real / cp.peak_bytes - 1:+.1%} | "
        f"{'yes' if cp.feasible else 'no'} | {'yes' if real <= budget else 'NO'} |"
    )


def main(argv: list[str]) -> None:
    fraction = float(argv[argv.index("--fraction") + 1]) if "--fraction" in argv else 0.8
    names = [a for a in argv if not a.startswith("--") and a != str(fraction)] or list(CASES)
    load = os.getloadavg()
    print(
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; torch {torch.__version__}, {torch.get_num_threads()} threads; MB = 10^6 bytes"
    )
    print(f"budget = {fraction:g} x the unplanned simulated peak; plans for desktop-cpu (measured while planned)\n")
    print(
        "| model | input | unplanned peak (sim.) | budget | modules | plan peak simulated | plan peak printed | real peak, apart | real / printed | says fits | real within budget |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|:---:|:---:|")
    for name in names:
        print(row(name, CASES[name], fraction), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

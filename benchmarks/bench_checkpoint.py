"""A checkpoint plan under 60% of the unplanned peak, applied to a real model on this CPU and run.

    XDG_CACHE_HOME=... python benchmarks/bench_checkpoint.py [MODEL BATCHxSEQ] [--hardware local] [--threads 1] [--plot docs/plan_memory.png]

On a shared machine run it on one thread against a one-thread calibration (``graphprof calibrate --threads 1``):
two OpenMP threads stall at every barrier when another process holds a core, one thread only shares it,
and its recompute is then timed in the process's CPU time (what it computes, not the time it waits).

1. :func:`graphprof.training.plan_memory` without a budget: the unplanned peak ``P`` (a dry run);
2. the same with ``memory_budget=0.6 P`` on ``--hardware`` (default ``local``: run ``graphprof calibrate``
   first; its calibration times each recomputed block's forward): the modules chosen, the planned peak
   (the step simulated again with ``torch.utils.checkpoint`` applied) and the predicted recompute time;
3. the real model (random weights) stepped on the CPU without and with the plan
   (:func:`graphprof.training.measure_step`: the allocator's peak; the fastest of a few steps): measured peak
   beside planned, and the measured recompute time (the chosen modules' forwards timed inside the
   backward; two steps' difference is dominated on a CPU by the allocator's page faults) beside the predicted.

The reference a user runs: ``torch.distributed.algorithms._checkpoint.checkpoint_wrapper`` on the same
modules and ``torch.profiler``'s memory events (or ``torch.cuda.max_memory_allocated`` on a GPU).
"""

from __future__ import annotations

import os
import sys

import torch

from graphprof.models import resolve_model
from graphprof.run.step import checkpointed
from graphprof.training import measure_step, plan_memory

MODEL, SHAPE = (
    "hf:bert-base?num_hidden_layers=6&hidden_size=256&num_attention_heads=4&intermediate_size=1024&vocab_size=2048&hidden_dropout_prob=0&attention_probs_dropout_prob=0",
    (8, 512),
)


def main(argv: list[str]) -> None:
    hardware = argv[argv.index("--hardware") + 1] if "--hardware" in argv else "local"
    plot = argv[argv.index("--plot") + 1] if "--plot" in argv else None
    threads = argv[argv.index("--threads") + 1] if "--threads" in argv else None
    args = [a for a in argv if a not in ("--hardware", hardware, "--plot", plot, "--threads", threads)]
    if threads is not None:
        torch.set_num_threads(int(threads))
    name = args[0] if args else MODEL
    shape = tuple(int(x) for x in args[1].split("x")) if len(args) > 1 else SHAPE
    load = os.getloadavg()
    quiet = "quiet" if load[0] <= 1.5 else "NOT QUIET: times are not a result"
    print(
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({quiet}), {torch.get_num_threads()} torch thread(s); memory figures do not depend on load, times do"
    )
    base = plan_memory(name, input_shape=shape, foreach=False)
    budget = int(0.6 * base.peak_bytes)
    plan = plan_memory(name, input_shape=shape, foreach=False, memory_budget=budget, hardware=hardware)
    cp = plan.checkpoint
    assert cp is not None and cp.planned is not None
    if plot is not None:
        from pathlib import Path

        from graphprof.render.plan import render_plan_plot

        Path(plot).write_bytes(render_plan_plot(plan))
        print(f"wrote {plot}")
    chosen = {c.module for c in cp.chosen}
    print(f"{name} {shape}: unplanned peak {base.peak_bytes / 1e6:.1f} MB, budget {budget / 1e6:.1f} MB; solver: {cp.solver}")
    print(f"chosen ({len(chosen)}): {', '.join(sorted(chosen))}")
    torch.manual_seed(0)
    built = resolve_model(name, input_shape=shape, device="cpu")
    real = (built.model, tuple(built.args), dict(built.kwargs))
    plain = measure_step(*real, repeats=5)
    planned = measure_step(*real, wraps=(checkpointed(chosen),), repeats=10, recomputed=frozenset(chosen), cpu_time=threads == "1")
    print(
        f"unplanned peak: predicted {base.peak_bytes / 1e6:.1f} MB, measured {plain.peak_bytes / 1e6:.1f} MB ({base.peak_bytes / plain.peak_bytes - 1:+.2%})"
    )
    print(f"planned peak:   predicted {cp.planned.peak_bytes / 1e6:.1f} MB, measured {planned.peak_bytes / 1e6:.1f} MB "
          f"({cp.planned.peak_bytes / planned.peak_bytes - 1:+.2%}); under the budget: {planned.peak_bytes <= budget}")  # fmt: skip
    measured = planned.recompute_s
    print(f"recompute time: predicted {cp.recompute_s * 1e3:.1f} ms ({cp.timing}), measured {measured * 1e3:.1f} ms "
          f"({'CPU time of' if threads == '1' else 'wall time of'} the chosen modules' forwards inside the backward; error {cp.recompute_s / measured - 1:+.1%}); "
          f"step {plain.step_s * 1e3:.1f} ms unplanned, {planned.step_s * 1e3:.1f} ms planned")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])

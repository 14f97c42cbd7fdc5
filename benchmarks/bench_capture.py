"""Time graph capture per method (fx.symbolic_trace, dynamo.export, eager) and the whole profile.

    python benchmarks/bench_capture.py [resnet50 vit_b_16 yolov8n fasterrcnn_mobilenet_v3_large_320_fpn]

For each model: seconds per capture method (or why it failed), the method graphprof picks, and the
time of the stages of ``profile_model`` (resolve, warm-up, capture, propagate, count). Prints a table;
no assertion: the figures go in the issue notes.
"""

from __future__ import annotations

import sys
import time

import torch

from graphprof import profile_model
from graphprof.capture.methods import capture_graph, warm_up
from graphprof.models import resolve_model

DEFAULT = ["resnet50", "vit_b_16", "yolov8n", "fasterrcnn_mobilenet_v3_large_320_fpn"]


def bench(name: str) -> None:
    resolved = resolve_model(name)
    model, args, kwargs = resolved.model, tuple(resolved.args), dict(resolved.kwargs)
    warm_up(model, args, kwargs)
    cells = []
    for method in ("fx.symbolic_trace", "dynamo.export", "eager"):
        start = time.perf_counter()
        try:
            capture_graph(model, args, kwargs, methods=(method,))
            cells.append(f"{method}={time.perf_counter() - start:.2f}s")
        except Exception as exc:  # report and go on
            cells.append(f"{method}=fails after {time.perf_counter() - start:.2f}s ({type(exc).__name__})")
    start = time.perf_counter()
    profile = profile_model(name)
    total = time.perf_counter() - start
    stages = ", ".join(f"{k} {v:.2f}s" for k, v in profile.timings)
    print(f"{name}: picks {profile.capture_method} ({profile.execution}); " + "; ".join(cells))
    print(f"    profile_model total {total:.2f}s: {stages}")


def main(argv: list[str]) -> None:
    torch.manual_seed(0)
    for name in argv or DEFAULT:
        bench(name)


if __name__ == "__main__":
    main(sys.argv[1:])

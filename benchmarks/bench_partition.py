"""Issue 22's figures: the planner's time on a 70B catalogue model over 8 devices, and plans run for real.

    PYTHONPATH=$PWD:$PWD/cli python benchmarks/bench_partition.py [--skip-runs | --skip-planner] [--iters N]

1. ``hf:llama-3-70b`` (fp16, on the meta device: nothing allocated): the passes (prepare, profile,
   module graph) timed once, then the exact program for each objective over 8 devices of 3 kinds and of
   8 kinds (every kind distinct: the program's worst case).
2. ``resnet50``, ``vit_b_16`` and ``hf:llama`` (a small LLaMA from a config) on ``cpu:2`` and ``cpu:3``
   with the throughput objective: graphprof's plan and the equal-layer split, each run on local gloo
   processes (1 thread each); measured throughput of both, and each stage's predicted time (the local
   calibration's when it was made with 1 thread, ``graphprof calibrate --threads 1``; else this machine's
   measured per-layer times) beside its measured one. A split this machine cannot host (more stages than
   cores) is reported as not run.

Markdown on stdout; the machine's load is printed beside each run (the cores are shared: noisy figures).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import torch
from torch import nn

from graphprof.errors import InvalidInputError
from graphprof.partition.devices import parse_devices
from graphprof.partition.planner import as_links, plan_prepared, prepare_for
from graphprof.partition.report import partition_report

PLANNER_DEVICES = ("orin-agx:4,rtx4090:2,a100:2", "a100,h100,h100-pcie,h200,l4,t4,rtx4090,jetson-orin")
RUN_MODELS = ("resnet50", "vit_b_16", "hf:llama")
RUN_DEVICES = ("cpu:2", "cpu:3")


def planner() -> None:
    print("## Planner: hf:llama-3-70b, fp16, meta device\n")
    start = time.perf_counter()
    devices = parse_devices(PLANNER_DEVICES[0])
    prepared = prepare_for("hf:llama-3-70b", devices, dtype="float16")
    prepared_s = time.perf_counter() - start
    print(f"prepare (build on meta, warm-up, capture): {prepared_s:.1f} s; load {os.getloadavg()[0]:.2f}\n")
    print("| devices | objective | units | stages | passes + plan (s) | program alone (s) | bottleneck | latency |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for spec in PLANNER_DEVICES:
        devs = parse_devices(spec)
        for objective in ("latency", "throughput"):
            start = time.perf_counter()
            plan = plan_prepared(prepared, devs, objective=objective, links=as_links("10/0.5", devs))
            wall = time.perf_counter() - start
            print(
                f"| {spec} | {objective} | {len(plan.table.units)} | {len(plan.stages)} | {wall:.1f} | "
                f"{plan.solve_seconds:.2f} | {plan.bottleneck_s * 1e3:.1f} ms | {plan.latency_s * 1e3:.1f} ms |",
                flush=True,
            )


def unequal_mlp() -> nn.Module:
    """Layers of unequal cost: two wide projections (8M MACs per row each) then fourteen 1M ones.

    The equal-layer split on two stages puts both wide layers and six narrow ones first (22M against 8M
    MACs per row); the balanced split is the wide pair against the narrow fourteen (16M against 14M).
    """
    torch.manual_seed(0)
    wide = [nn.Linear(1024, 8192), nn.Linear(8192, 1024)]
    return nn.Sequential(*wide, *(nn.Linear(1024, 1024) for _ in range(14))).eval()


def runs(iters: int) -> None:
    print("\n## Runs on this machine (throughput objective, 4 micro-batches of 1, 1 thread per stage)\n")
    print("| model | devices | plan splits | equal splits | plan measured /s | equal measured /s | plan / equal | "
          "plan stages: alone / predicted (pipelined / predicted) | equal stages: the same | outputs match | load |")  # fmt: skip
    print("|---|---|---|---|---:|---:|---:|---|---|---|---:|")
    cases: list[tuple[str, Any, dict[str, Any]]] = [(m, m, {}) for m in RUN_MODELS]
    cases.append(("unequal MLP (rows of 64)", unequal_mlp(), {"input_shape": (64, 1024)}))
    for model, target, options in cases:
        for spec in RUN_DEVICES:
            try:
                report = partition_report(target, spec, objective="throughput", run=True, run_iters=iters, micro_batches=4, **options)
            except InvalidInputError as exc:  # e.g. three stages, one process each, on two cores
                print(f"| {model} | {spec} | not run: {exc} |", flush=True)
                continue
            (_, mine), (_, equal) = report.runs

            def ratios(run: object) -> str:
                """Per stage: measured alone / predicted (measured pipelined / predicted)."""
                return ", ".join(
                    f"{s.alone_ratio:.2f} ({s.ratio:.2f})" if s.ratio else "-"
                    for s in run.stages  # type: ignore[attr-defined]
                )

            print(
                f"| {model} | {spec} | {', '.join(mine.split_points)} | {', '.join(equal.split_points)} | "
                f"{mine.throughput:.2f} | {equal.throughput:.2f} | {mine.throughput / equal.throughput:.2f} | "
                f"{ratios(mine)} | {ratios(equal)} | {mine.matches and equal.matches} | {os.getloadavg()[0]:.2f} |",
                flush=True,
            )


def only_mlp(iters: int) -> None:
    """The unequal MLP alone (``--mlp``)."""
    global RUN_MODELS
    RUN_MODELS = ()
    runs(iters)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-runs", action="store_true", help="only time the planner")
    parser.add_argument("--skip-planner", action="store_true", help="only run the plans")
    parser.add_argument("--mlp", action="store_true", help="only run the unequal MLP")
    parser.add_argument("--iters", type=int, default=5, help="timed pipeline steps per run")
    args = parser.parse_args()
    if args.mlp:
        only_mlp(args.iters)
        return
    if not args.skip_planner:
        planner()
    if not args.skip_runs:
        runs(args.iters)


if __name__ == "__main__":
    main()

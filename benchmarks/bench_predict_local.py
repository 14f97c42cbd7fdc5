"""Predicted vs measured forward time on this CPU, after `graphprof calibrate`: ten torchvision models.

Run: ``python benchmarks/bench_predict_local.py [--threads 1] [--iters 10]``. It calibrates this machine
(the same call as ``graphprof calibrate``, writing the ``local`` preset), then for each model at batch 1
and 8, fp32, profiles it (the dry run), classifies it against ``local`` (lower bound and predicted time)
and measures it with graphprof's own ``prepare(...).measure(device="cpu")`` (forward mean, plain runs).
Prints a markdown table with the load average beside every row and writes it to
``benchmarks/results/predict_local.md``. Nothing here is tuned per model: one calibration, one fit.

Done when (issue 24): median |predicted / measured - 1| <= 20%, every model <= 50%, lower bound <= measured.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

import graphprof
from graphprof.calibrate import calibrate
from graphprof.calibrate.preset import loadavg
from graphprof.cost.roofline import classify

MODELS = (
    "resnet18", "resnet50", "mobilenet_v3_large", "efficientnet_b0", "convnext_tiny",
    "vit_b_16", "swin_t", "densenet121", "regnet_y_400mf", "shufflenet_v2_x1_0",
)  # fmt: skip
OUT = Path(__file__).resolve().parent / "results" / "predict_local.md"


def row(name: str, batch: int, iters: int, warmup: int) -> dict[str, object]:
    load = loadavg()
    prepared = graphprof.prepare(name, batch_size=batch)
    roofline = classify(prepared.profile(), graphprof.devices.hardware.get_hardware("local"))
    measured = prepared.measure(device="cpu", iters=iters, warmup=warmup, layer_runs=1, breakdown=False)
    mean_s = measured.forward.mean / 1e3
    predicted = roofline.predicted_seconds or 0.0
    return {
        "model": name, "batch": batch, "lower": roofline.seconds or 0.0, "predicted": predicted, "mean": mean_s,
        "std": measured.forward.std / 1e3, "runs": measured.forward.num_runs, "error": predicted / mean_s - 1.0,
        "load": f"{load} -> {loadavg()}",
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=None, help="torch threads for calibration and runs (default: torch's)")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--output", type=Path, default=OUT)
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    preset = calibrate("cpu")
    cal = preset.calibration
    lines = [
        f"# Predicted vs measured forward time, {preset.hardware.label}, fp32, torch {torch.__version__}",
        "",
        f"Calibration: {preset.device['seconds']} s, {torch.get_num_threads()} threads, load {preset.device['loadavg_before']} -> "
        f"{preset.device['loadavg_after']}; peak {preset.hardware.peak_tflops['float32'] * 1e3:.0f} GFLOP/s fp32, "
        f"bandwidth {preset.hardware.bandwidth_gbs:.0f} GB/s (near) / {cal.memory.far_gbs if cal.memory else 0:.1f} GB/s (far), "
        f"overlap {cal.overlap:.1f}, host floor {cal.host_per_kernel_s * 1e6:.1f} us per kernel, view {cal.view_s * 1e6:.1f} us; "
        f"fit on its own {cal.accuracy['records']} records: median |error| {cal.accuracy['median_abs_error']:.0%}.",
        "",
        "| model | batch | lower bound ms | predicted ms | measured mean ms (std, runs) | predicted / measured | LB <= measured | load (1/5/15 min) |",
        "|---|---:|---:|---:|---:|---:|:---:|---|",
    ]
    print("\n".join(lines), flush=True)
    rows = []
    for name in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            r = row(name, batch, args.iters, args.warmup)
            rows.append(r)
            line = (
                f"| {r['model']} | {r['batch']} | {r['lower'] * 1e3:.2f} | {r['predicted'] * 1e3:.2f} | "  # type: ignore[operator]
                f"{r['mean'] * 1e3:.2f} ({r['std'] * 1e3:.2f}, {r['runs']}) | {r['error']:+.0%} | "  # type: ignore[operator]
                f"{'yes' if r['lower'] <= r['mean'] else '**no**'} | {r['load']} |"  # type: ignore[operator]
            )
            lines.append(line)
            print(line, flush=True)
    errors = [abs(r["error"]) for r in rows]  # type: ignore[arg-type]
    held = all(r["lower"] <= r["mean"] for r in rows)  # type: ignore[operator]
    summary = (
        f"\nmedian |error| {statistics.median(errors):.0%} (goal <= 20%), worst {max(errors):.0%} (goal <= 50%), "
        f"lower bound <= measured: {'all' if held else 'NOT all'} {len(rows)}; total {time.perf_counter() - start:.0f} s, "
        f"load at the end {loadavg()}"
    )
    lines.append(summary)
    print(summary)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

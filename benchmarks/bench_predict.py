"""Issue 30's benchmark: calibrate this CPU, then predict and measure fixed models at batch 1 and 8.

Run (quiet machine; it waits up to ``--wait`` seconds for the 1-minute load to fall below 1.5, and
refuses to report a figure above it)::

    python benchmarks/bench_predict.py --threads 2          # full calibration (<= 3 min), 30 points
    python benchmarks/bench_predict.py --threads 2 --quick  # the one-minute calibration

For each model (fp32, ``--threads`` torch threads): the dry run's prediction against the ``local``
preset with its 80% interval and the roofline lower bound, then graphprof's own measurement (plain
forwards, mean). Prints each error, the median |error|, the share within +-10%, whether the lower bound
was ever above the measurement, and the 80% interval's coverage; writes
``benchmarks/results/bench_predict.md``. None of these models is one the calibration samples
(:data:`graphprof.calibrate.local.CALIBRATION_MODELS`): they are held out, and nothing is tuned per model.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

MODELS = (
    "resnet18", "googlenet", "resnext50_32x4d", "mnasnet1_0", "efficientnet_b0", "convnext_tiny", "vit_b_32", "swin_t",
    "mobilenet_v3_large", "regnet_y_800mf",
    # five timm models of other families (built offline from their configs)
    "timm:levit_128s", "timm:mixer_s16_224", "timm:ghostnet_100", "timm:poolformer_s12", "timm:rexnet_100",
)  # fmt: skip
QUIET = 1.5
OUT = Path(__file__).resolve().parent / "results" / "bench_predict.md"

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_speed import _load, _wait_quiet  # noqa: E402  (one reading of the load, one wait for quiet)


def point(name: str, batch: int, iters: int) -> dict[str, object]:
    """One model at one batch: predicted (with interval), lower bound, measured mean."""
    import graphprof
    from graphprof.cost.roofline import classify
    from graphprof.devices.hardware import get_hardware

    load = _load()
    prepared = graphprof.prepare(name, batch_size=batch)
    roofline = classify(prepared.profile(), get_hardware("local"))
    measured = prepared.measure(device="cpu", iters=iters, warmup=3, layer_runs=1, breakdown=False)
    mean = measured.forward.mean / 1e3
    predicted = roofline.predicted_seconds or 0.0
    interval = roofline.predicted_interval
    return {
        "model": name, "batch": batch, "predicted": predicted, "measured": mean, "lower": roofline.seconds or 0.0,
        "low": interval.low if interval else 0.0, "high": interval.high if interval else 0.0,
        "error": predicted / mean - 1.0, "load": max(load, _load()),
    }  # fmt: skip


def _row(p: dict[str, object]) -> str:
    f = {k: v for k, v in p.items() if isinstance(v, float)}
    covered = f["low"] <= f["measured"] <= f["high"]
    return (f"| {p['model']} | {p['batch']} | {f['predicted'] * 1e3:.1f} ({f['low'] * 1e3:.1f}–{f['high'] * 1e3:.1f}) | "
            f"{f['measured'] * 1e3:.1f} | {f['error']:+.1%} | {'yes' if covered else 'no'} | "
            f"{'yes' if f['lower'] <= f['measured'] else '**no**'} | {f['load']:.2f} |")  # fmt: skip


def _summary(points: list[dict[str, object]]) -> list[str]:
    errors = [abs(float(p["error"])) for p in points]  # type: ignore[arg-type]
    covered = sum(float(p["low"]) <= float(p["measured"]) <= float(p["high"]) for p in points)  # type: ignore[arg-type]
    lower_ok = all(float(p["lower"]) <= float(p["measured"]) for p in points)  # type: ignore[arg-type]
    return [
        f"- median |error| {statistics.median(errors):.1%} (goal <= 10%); within +-10%: {sum(e <= 0.1 for e in errors)}/{len(errors)} "
        f"(goal >= 70%); worst {max(errors):.0%} (goal <= 30%)",
        f"- lower bound never above the measurement: {'yes' if lower_ok else 'NO'}",
        f"- 80% interval coverage: {covered}/{len(points)} = {covered / len(points):.0%} (goal >= 75%)",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="the one-minute calibration")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--wait", type=float, default=300.0)
    parser.add_argument("--output", type=Path, default=OUT)
    args = parser.parse_args()
    if not _wait_quiet(args.wait):
        print(f"refused: the 1-minute load is {_load():.2f} > {QUIET}; run it on a quiet machine", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    from graphprof.calibrate import calibrate

    load = _load()
    start = time.perf_counter()
    preset = calibrate("cpu", threads=args.threads, quick=args.quick)
    took = time.perf_counter() - start
    lines = [
        f"# Predicted vs measured forward, {preset.hardware.label}, fp32, {args.threads} threads, torch {torch.__version__}",
        "",
        f"Calibration ({'--quick' if args.quick else 'full'}): {took:.0f} s, load {load:.2f} -> {_load():.2f}; "
        f"{preset.calibration.op_model.counts.get('calibration', 0) if preset.calibration.op_model else 0} timed ops.",
        "",
        "| model | batch | predicted ms (80%) | measured ms | error | in 80% | LB <= measured | load |",
        "|---|---:|---:|---:|---:|:---:|:---:|---:|",
    ]
    print("\n".join(lines), flush=True)
    points = []
    for name in args.models.split(","):
        for batch in (1, 8):
            try:
                p = point(name, batch, args.iters)
            except Exception as exc:  # noqa: BLE001 - a model missing here is reported, not fatal
                print(f"| {name} | {batch} | failed: {type(exc).__name__}: {str(exc)[:80]} |", flush=True)
                continue
            points.append(p)
            lines.append(_row(p))
            print(lines[-1], flush=True)
    noisy = [p for p in points if float(p["load"]) > QUIET]  # type: ignore[arg-type]
    lines += ["", *_summary(points)] if points else ["", "no points"]
    if noisy:
        lines.append(f"- NOT A RESULT: {len(noisy)} point(s) measured with the load above {QUIET}")
    print("\n".join(lines[-4:]), flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(lines) + "\n")
    return 0 if not noisy else 2


if __name__ == "__main__":
    raise SystemExit(main())

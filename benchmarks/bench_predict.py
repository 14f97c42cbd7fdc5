"""Issue 30's benchmark: calibrate this CPU, then predict and measure fixed models at batch 1 and 8.

Run (quiet machine; it waits up to ``--wait`` seconds for the 1-minute load to fall below 1.5, and
refuses to report a figure above it)::

    python benchmarks/bench_predict.py --threads 2          # full calibration (<= 3 min), 30 points
    python benchmarks/bench_predict.py --threads 2 --quick  # the one-minute calibration

For each model (fp32, ``--threads`` torch threads) the benchmark runs what the user runs, in a fresh
process, verbatim: ``graphprof --model M --batch-size B --hardware local --measure --device cpu --iters 10
--warmup 2 --no-learn`` (with ``-o`` to read its JSON), and takes from it the dry run's prediction against
the ``local`` preset with its 80% interval and the roofline lower bound, and the measured plain forward
(the figure ``--measure`` reports as *forward*: uninstrumented forwards, mean). ``--no-learn``: nothing is
learned between points. Prints each error with
the load beside it, the median |error|, the **signed** median, the share within +-10%, the worst, the 80%
interval's coverage and whether the lower bound was ever above the measurement. Before each point the
benchmark waits for the 1-minute load to fall below 1.5 and refuses the point if it does not; the load
after the point is printed too (it includes the point's own two threads, about +0.3 over ten seconds). The calibration runs
twice, back to back, and the two calibrations' predictions of every model are compared. Writes
``benchmarks/results/bench_predict.md``. None of these models is one the calibration samples
(:data:`graphprof.calibrate.preset.CALIBRATION_MODELS`, checked at start): they are held out, and nothing is
tuned per model.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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


def _command(name: str, batch: int, iters: int, out: Path) -> list[str]:
    """The command the issue's user runs, verbatim, writing its result as JSON."""
    exe = Path(sys.executable).with_name("graphprof")
    return [str(exe) if exe.exists() else "graphprof", "--model", name, "--batch-size", str(batch), "--hardware", "local",
            "--measure", "--device", "cpu", "--iters", str(iters), "--warmup", "2", "--no-learn", "-o", str(out)]  # fmt: skip


def _run_once(name: str, batch: int, iters: int, threads: int) -> dict[str, Any]:
    """One fresh ``graphprof --measure`` process (:func:`_command`): its JSON result."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "point.json"
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        done = subprocess.run(_command(name, batch, iters, out), env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not out.exists():
            raise RuntimeError(f"exit {done.returncode}: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
        result: dict[str, Any] = json.loads(out.read_text())
        return result


def point(name: str, batch: int, iters: int, threads: int, repeat: int, first: dict[tuple[str, int], float]) -> dict[str, object]:
    """One model at one batch, as a user runs it: ``repeat`` fresh ``graphprof --measure`` processes, one
    after the other, each after the load has fallen below 1.5. The prediction (with interval) and lower
    bound are the first's (every run predicts the same); the measured plain-forward mean is the median of
    the runs', and every run's is kept (the noise of the measurement). ``first`` holds the first
    calibration's predictions, for the spread between the two."""
    runs, loads = [], []
    for _ in range(repeat):
        _wait_quiet(120.0)
        loads.append(_load())
        runs.append(_run_once(name, batch, iters, threads))
    result, load = runs[0], max(loads)
    measured = [r["runtime"]["forward"]["mean"] / 1e3 for r in runs]
    roofline, mean = result["roofline"], statistics.median(measured)
    predicted = float(roofline.get("predicted_time_s") or 0.0)
    interval = roofline.get("predicted_interval") or {}
    return {
        "model": name, "batch": batch, "predicted": predicted, "measured": mean,
        "lower": float(roofline.get("lower_bound_time_s") or 0.0),
        "low": float(interval.get("low_s", 0.0)), "high": float(interval.get("high_s", 0.0)),
        "error": predicted / mean - 1.0, "load": load, "load_after": _load(), "runs": measured,
        "spread": predicted / first[(name, batch)] - 1.0 if first.get((name, batch)) else float("nan"),
    }  # fmt: skip


def _row(p: dict[str, object]) -> str:
    f = {k: v for k, v in p.items() if isinstance(v, float)}
    covered = f["low"] <= f["measured"] <= f["high"]
    runs = " / ".join(f"{r * 1e3:.1f}" for r in p["runs"])  # type: ignore[attr-defined]  # the runs' list
    return (f"| {p['model']} | {p['batch']} | {f['predicted'] * 1e3:.1f} ({f['low'] * 1e3:.1f}–{f['high'] * 1e3:.1f}) | "
            f"{f['measured'] * 1e3:.1f} ({runs}) | {f['error']:+.1%} | {'yes' if covered else 'no'} | "
            f"{'yes' if f['lower'] <= f['measured'] else '**no**'} | {f['spread']:+.1%} | {f['load']:.2f} -> {f['load_after']:.2f}"
            f"{'' if f['load'] <= QUIET else ' REFUSED'} |")  # fmt: skip


def _summary(points: list[dict[str, object]]) -> list[str]:
    points = [p for p in points if float(p["load"]) <= QUIET]  # type: ignore[arg-type]  # a refused point counts nowhere
    if not points:
        return ["- no point was taken quiet: no result"]
    signed = [float(p["error"]) for p in points]  # type: ignore[arg-type]
    errors = [abs(e) for e in signed]
    spreads = [abs(float(p["spread"])) for p in points if p["spread"] == p["spread"]]  # type: ignore[arg-type]
    covered = sum(float(p["low"]) <= float(p["measured"]) <= float(p["high"]) for p in points)  # type: ignore[arg-type]
    lower_ok = all(float(p["lower"]) <= float(p["measured"]) for p in points)  # type: ignore[arg-type]
    return [
        f"- median |error| {statistics.median(errors):.1%} (goal <= 10%); signed median {statistics.median(signed):+.1%} "
        f"(goal within +-5%); too fast on {sum(e < 0 for e in signed)}/{len(signed)}; within +-10%: "
        f"{sum(e <= 0.1 for e in errors)}/{len(errors)} (goal >= 70%); worst {max(signed, key=abs):+.0%} (goal within +-30%)",
        f"- two calibrations back to back: predictions differ by at most {max(spreads, default=float('nan')):.1%} "
        f"(median {statistics.median(spreads) if spreads else float('nan'):.1%}; goal <= 5%)",
        f"- lower bound never above the measurement: {'yes' if lower_ok else 'NO'}",
        f"- 80% interval coverage: {covered}/{len(points)} = {covered / len(points):.0%} (goal >= 75%)",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="the one-minute calibration")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=2, help="fresh processes per point (the measured figure is their median)")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--wait", type=float, default=300.0)
    parser.add_argument("--output", type=Path, default=OUT)
    args = parser.parse_args()
    if not _wait_quiet(args.wait):
        print(f"refused: the 1-minute load is {_load():.2f} > {QUIET}; run it on a quiet machine", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    import graphprof
    from graphprof.calibrate import calibrate
    from graphprof.calibrate.preset import CALIBRATION_MODELS, QUICK_MODELS
    from graphprof.cost.roofline import classify
    from graphprof.devices.hardware import get_hardware

    names = args.models.split(",")
    sampled = {m for m, _ in (*CALIBRATION_MODELS, *QUICK_MODELS)} & set(names)
    if sampled:
        print(f"refused: {sorted(sampled)} are sampled by the calibration; the benchmark holds out what it judges", file=sys.stderr)
        return 2
    load = _load()
    start = time.perf_counter()
    calibrate("cpu", threads=args.threads, quick=args.quick)
    took_first = time.perf_counter() - start
    first = {}  # the first calibration's predictions, before the second replaces it
    for name in names:
        for batch in (1, 8):
            try:
                first[(name, batch)] = (
                    classify(graphprof.profile_model(name, batch_size=batch), get_hardware("local")).predicted_seconds or 0.0
                )
            except Exception:  # noqa: BLE001 - reported below, where the point fails
                continue
    start = time.perf_counter()
    preset = calibrate("cpu", threads=args.threads, quick=args.quick)
    took = time.perf_counter() - start
    lines = [
        f"# Predicted vs measured forward, {preset.hardware.label}, fp32, {args.threads} threads, torch {torch.__version__}",
        "",
        f"Calibration ({'--quick' if args.quick else 'full'}), twice back to back: {took_first:.0f} s and {took:.0f} s, "
        f"load {load:.2f} -> {_load():.2f}; "
        f"{preset.calibration.op_model.counts.get('calibration', 0) if preset.calibration.op_model else 0} timed ops.",
        "",
        "| model | batch | predicted ms (80%) | measured ms (plain forward: median (each run)) | error | in 80% | LB <= measured | 2nd / 1st calibration | load before -> after |",
        "|---|---:|---:|---:|---:|:---:|:---:|---:|---:|",
    ]
    print("\n".join(lines), flush=True)
    points = []
    for name in names:
        for batch in (1, 8):
            try:
                p = point(name, batch, args.iters, args.threads, args.repeat, first)
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
    print("\n".join(lines[-5:]), flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(lines) + "\n")
    return 0 if not noisy else 2


if __name__ == "__main__":
    raise SystemExit(main())

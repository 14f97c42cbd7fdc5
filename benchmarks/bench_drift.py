"""How much this machine's own speed drifts, alone: the floor under any CPU time prediction (issue 53).

Run (quiet machine: nothing else running; ticks taken at a 1-minute load above 1.5 are refused)::

    .venv/bin/python benchmarks/bench_drift.py --minutes 12

Every ``--every`` seconds it times three fixed workloads, one after the other, in this one process with
2 threads: graphprof's speed probe (:func:`graphprof.devices.probe.probe_seconds`), a resnet18 forward at
batch 1 (median of 5 calls) and at batch 8 (median of 3), random weights, ``torch.no_grad``. Nothing changes
between ticks but time, so every difference is the machine's.

It prints, per workload: the median, the 10th-90th percentile band over the median, the slowest over the
fastest tick, the lag-1 autocorrelation (near 1: a slow drift; near 0: tick-to-tick noise), the share of pairs
of ticks at least ``--gap`` minutes apart that differ by more than 10% (what "two calibrations in a row
within 10%" asks of a calibration made from such ticks), and the same after dividing each forward by the probe
timed just before it (whether rescaling by one probe reading can help a prediction; it could not here:
``benchmarks/results/bench_drift.md``).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torchvision

from graphprof.devices.probe import probe_seconds

QUIET = 1.5
OUT = Path(__file__).resolve().parent / "results" / "bench_drift.md"


def _load() -> float:
    return os.getloadavg()[0]


def _median_call(fn: Callable[[], object], calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _workloads() -> dict[str, Callable[[], float]]:
    model = torchvision.models.resnet18(weights=None).eval()
    x1, x8 = torch.randn(1, 3, 224, 224), torch.randn(8, 3, 224, 224)

    def forward(x: torch.Tensor, calls: int) -> float:
        with torch.no_grad():
            model(x)  # warm: the first call after a sleep pays for waking the cores
            return _median_call(lambda: model(x), calls)

    return {"probe": probe_seconds, "resnet18 b1": lambda: forward(x1, 5), "resnet18 b8": lambda: forward(x8, 3)}


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _autocorrelation(values: Sequence[float]) -> float:
    if len(values) < 3:
        return float("nan")
    mean = statistics.fmean(values)
    num = sum((a - mean) * (b - mean) for a, b in itertools.pairwise(values))
    den = sum((v - mean) ** 2 for v in values)
    return num / den if den else float("nan")


def _far_pairs_apart(stamps: Sequence[float], values: Sequence[float], gap_s: float) -> tuple[int, int]:
    """Pairs of ticks at least ``gap_s`` apart, and how many of them differ by more than 10%."""
    pairs = [(a, b) for (ta, a), (tb, b) in itertools.combinations(zip(stamps, values, strict=True), 2) if tb - ta >= gap_s]
    return sum(max(a, b) / min(a, b) - 1 > 0.10 for a, b in pairs), len(pairs)


def _row(name: str, stamps: Sequence[float], values: Sequence[float], gap_s: float) -> str:
    median = statistics.median(values)
    band = (_percentile(values, 0.9) - _percentile(values, 0.1)) / median
    apart, pairs = _far_pairs_apart(stamps, values, gap_s)
    return (f"| {name} | {median * 1e3:.3f} | {band:.1%} | {max(values) / min(values):.2f}x | {_autocorrelation(values):+.2f} "
            f"| {apart}/{pairs} ({apart / max(pairs, 1):.0%}) |")  # fmt: skip


def _correlation(a: Sequence[float], b: Sequence[float]) -> float:
    return statistics.correlation(a, b) if len(a) > 2 and statistics.pstdev(a) and statistics.pstdev(b) else float("nan")


def _tick(workloads: dict[str, Callable[[], float]]) -> dict[str, float]:
    return {name: fn() for name, fn in workloads.items()}


def _collect(args: argparse.Namespace) -> tuple[list[float], list[dict[str, float]], list[float], int]:
    workloads = _workloads()
    _tick(workloads)  # warm-up tick, not kept
    stamps, ticks, loads, refused = [], [], [], 0
    start = time.time()
    while time.time() - start < args.minutes * 60:
        begun = time.time()
        load = _load()
        if load > QUIET:
            refused += 1
        else:
            ticks.append(_tick(workloads))
            stamps.append(begun - start)
            loads.append(load)
            print(
                f"{begun - start:6.0f} s  load {load:.2f}  " + "  ".join(f"{k} {v * 1e3:.3f} ms" for k, v in ticks[-1].items()), flush=True
            )
        time.sleep(max(0.0, args.every - (time.time() - begun)))
    return stamps, ticks, loads, refused


def _report(args: argparse.Namespace, stamps: list[float], ticks: list[dict[str, float]], loads: list[float], refused: int) -> str:
    gap = args.gap * 60
    lines = [
        f"# bench_drift: this machine's own speed over {args.minutes:g} minutes, alone",
        "",
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; a tick every {args.every:g} s; {len(ticks)} ticks kept, {refused} refused "
        f"(load above {QUIET}); load while kept: median {statistics.median(loads):.2f}, max {max(loads):.2f}.",
        "",
        f"| workload | median (ms) | p10-p90 band / median | slowest / fastest | lag-1 autocorrelation | pairs >= {args.gap:g} min apart differing > 10% |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    probe = [t["probe"] for t in ticks]
    scale = statistics.median(probe)
    for name in ticks[0]:
        lines.append(_row(name, stamps, [t[name] for t in ticks], gap))
    for name in [n for n in ticks[0] if n != "probe"]:
        lines.append(_row(f"{name} / probe", stamps, [t[name] / t["probe"] * scale for t in ticks], gap))
    lines += ["", "Correlation of each forward with the probe timed just before it (Pearson, over the ticks): "
              + ", ".join(f"{n} {_correlation(probe, [t[n] for t in ticks]):+.2f}" for n in ticks[0] if n != "probe") + "."]  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=12.0)
    parser.add_argument("--every", type=float, default=10.0, help="seconds between ticks")
    parser.add_argument("--gap", type=float, default=3.0, help="minutes apart for the pair count (a calibration's length and more)")
    parser.add_argument("--output", type=Path, default=OUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    stamps, ticks, loads, refused = _collect(args)
    if len(ticks) < 3:
        print(f"bench_drift: only {len(ticks)} quiet ticks ({refused} refused at a load above {QUIET}); no figures", file=sys.stderr)
        return 1
    report = _report(args, stamps, ticks, loads, refused)
    print(report)
    args.output.write_text(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

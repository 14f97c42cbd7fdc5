"""Seconds per model over the torchvision zoo plus a timm sample (and the YOLO / R-CNN models of issue 13).

    python benchmarks/bench_zoo_speed.py [--workers 2] [--filter TEXT] [--limit N] [--every K] [--timm-only]
                                         [--out benchmarks/results/zoo_speed.md]

Each model is profiled (``graphprof.profile_model``, default settings: build, warm-up, capture, dry or
real run, count) in its own worker process, ``--workers`` at a time, so one model's state never speeds
up or slows down the next. The seconds reported are those of the ``profile_model`` call (model build
included, interpreter start and imports not); the wall time of the whole run is reported beside them.
timm models are named ``timm:<name>`` (graphprof builds them with ``timm.create_model(name,
pretrained=False)`` on the meta device, nothing downloaded, at their ``pretrained_cfg`` input size). Writes a Markdown table and a summary
(median, maximum, models over 5 s and 30 s).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TIMM_SAMPLE = (
    "mobilevitv2_050", "tf_efficientnetv2_b0", "twins_svt_small", "hiera_tiny_224", "efficientvit_m0",
    "mobilevit_xxs", "cait_xxs24_224", "sequencer2d_s", "convnext_tiny", "deit_tiny_patch16_224",
    "efficientnet_b0", "regnety_002", "swin_tiny_patch4_window7_224", "coat_lite_tiny", "levit_128s",
)  # fmt: skip
EXTRA = ("yolov8n", "yolo11n-seg", "keypointrcnn_resnet50_fpn", "fasterrcnn_mobilenet_v3_large_320_fpn")
TIMEOUT_S = 300


def _one(name: str) -> dict:
    """Profile one model in this process and return what the table needs."""
    import warnings

    import graphprof

    warnings.simplefilter("ignore")
    start = time.perf_counter()
    profile = graphprof.profile_model(name)  # timm:<name> too: create_model(pretrained=False) on meta
    family = profile.family
    seconds = time.perf_counter() - start
    return {
        "name": name,
        "family": family,
        "seconds": round(seconds, 2),
        "capture": profile.capture_method,
        "execution": profile.execution,
        "gmacs": round(profile.total_macs / 1e9, 3),
        "unsupported": [u.op for u in profile.unsupported],
        "stages": {k: round(v, 2) for k, v in profile.timings},
        "error": "",
    }


def _run(name: str) -> dict:
    command = [sys.executable, __file__, "--one", name]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return {"name": name, "family": "", "seconds": float(TIMEOUT_S), "error": f"timed out after {TIMEOUT_S} s"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-1:])[:200]
    return {"name": name, "family": "", "seconds": float("nan"), "error": tail or f"exit {done.returncode}"}


def _names(args: argparse.Namespace) -> list[str]:
    names: list[str] = []
    if not args.timm_only:
        from graphprof.models import list_models

        names += [i.name for i in list_models() if i.family not in ("hf", "yolo")][:: args.every]
        names += list(EXTRA)
    names += [f"timm:{n}" for n in TIMM_SAMPLE]
    if args.filter:
        names = [n for n in names if args.filter in n]
    names = list(dict.fromkeys(names))  # EXTRA repeats two torchvision detectors: each model runs once
    return names[: args.limit] if args.limit else names


def _table(rows: list[dict], wall: float, workers: int) -> str:
    ok = [r for r in rows if not r.get("error")]
    seconds = [r["seconds"] for r in ok]
    lines = [
        "# Seconds per model (`benchmarks/bench_zoo_speed.py`)",
        "",
        f"{len(rows)} models, {workers} workers, wall time {wall:.0f} s; "
        f"per model: median {statistics.median(seconds):.1f} s, max {max(seconds):.1f} s "
        f"({max(ok, key=lambda r: r['seconds'])['name']}); over 5 s: {sum(s > 5 for s in seconds)}, "
        f"over 30 s: {sum(s > 30 for s in seconds)}; errors: {len(rows) - len(ok)}",
        "",
        "| model | family | seconds | capture | run | GMACs | unsupported | stages (s) | error |",
        "|---|---|---:|---|---|---:|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: -r["seconds"] if r["seconds"] == r["seconds"] else 0):
        stages = " ".join(f"{k} {v}" for k, v in r.get("stages", {}).items())
        lines.append(
            f"| {r['name']} | {r.get('family', '')} | {r['seconds']:.1f} | {r.get('capture', '')} | "
            f"{r.get('execution', '')} | {r.get('gmacs', '')} | {', '.join(r.get('unsupported', []))} | {stages} | "
            f"{r.get('error', '')} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--filter", default=None)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--every", type=int, default=1, help="every k-th torchvision model (a sample)")
    parser.add_argument("--timm-only", action="store_true")
    parser.add_argument("--out", default="benchmarks/results/zoo_speed.md")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(_one(args.one)), flush=True)
        return
    names = _names(args)
    start = time.perf_counter()
    with ThreadPoolExecutor(args.workers) as pool:
        rows = list(pool.map(_run, names))
    wall = time.perf_counter() - start
    text = _table(rows, wall, args.workers)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text.splitlines()[2])


if __name__ == "__main__":
    main()

"""Time each issue-12 sweep against one profile of the same model, both as fresh CLI processes.

    PYTHONPATH=$PWD:$PWD/cli python benchmarks/bench_sweep.py [--repeat N]

The "done when" of issue 12: each sweep takes under twice one ``graphprof --model X``. Wall-clock
seconds include interpreter start and imports, the same for both sides.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

CASES = (
    ("resnet50", ["--batch", "1:128:x2"]),
    ("hf:llama", ["--seq-len", "128:4096:x2"]),
    ("yolov8n", ["--resolution", "320,480,640,800"]),
)


def wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "graphprof_cli.main", *argv], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=1, help="best of N runs of each command")
    args = parser.parse_args()
    print("| model | sweep | profile (s) | sweep (s) | ratio |")
    print("|---|---|---:|---:|---:|")
    for model, axis in CASES:
        one = min(wall(["--model", model]) for _ in range(args.repeat))
        swept = min(wall(["sweep", "--model", model, *axis]) for _ in range(args.repeat))
        print(f"| {model} | {' '.join(axis)} | {one:.1f} | {swept:.1f} | {swept / one:.2f} |", flush=True)


if __name__ == "__main__":
    main()

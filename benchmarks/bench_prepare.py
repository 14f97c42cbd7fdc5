"""One prepared model, many profiles: the timings of issue 8, printed with their ratios.

    python benchmarks/bench_prepare.py [--quick]

1. ``graphprof --help`` and ``graphprof --version``: wall seconds of a fresh process (target < 1 s), and
   whether torch was imported (it must not be).
2. For yolov8n (batch 1, 2, 4, 8), resnet50 (batch 1, 2, 4, 8) and hf:llama (sequence 128 to 2048):
   one ``profile_model`` (build, warm-up, capture, dry run) against ``prepare()`` followed by one
   ``profile()`` per point (target: under 1.5x the single call), with the MACs of each point and their
   ratio to the first (exactly linear in batch; for sequence length, linear plus attention's S^2).

Each measurement runs in a fresh interpreter, so one model's caches never speed up another's. Prints a
Markdown table; no assertion: the figures go in the issue notes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASES = {
    "yolov8n": ("batch_size", [1, 2, 4, 8]),
    "resnet50": ("batch_size", [1, 2, 4, 8]),
    "hf:llama": ("seq_len", [128, 256, 512, 1024, 2048]),
}

_ONE = """
import json, sys, time
import graphprof
t = time.perf_counter()
p = graphprof.profile_model(sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - t, "macs": p.total_macs}))
"""

_MANY = """
import json, sys, time
import graphprof
key, values = sys.argv[2], json.loads(sys.argv[3])
t = time.perf_counter()
pm = graphprof.prepare(sys.argv[1])
profiles = [pm.profile(**{key: v}) for v in values]
print(json.dumps({"seconds": time.perf_counter() - t, "macs": [p.total_macs for p in profiles],
                  "reused": [p.capture_reused for p in profiles]}))
"""


def _python(code: str, *args: str) -> dict:
    env_path = f"{ROOT}:{ROOT / 'cli'}"
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, cwd=ROOT,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "YOLO_OFFLINE": "1"},
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cli_seconds(*argv: str) -> tuple[float, bool]:
    code = (
        "import sys, time; t = time.perf_counter(); sys.argv = ['graphprof', *sys.argv[1:]]\n"
        "from graphprof_cli.main import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write(f'@@{time.perf_counter() - t} {\"torch\" in sys.modules}\\n')"
    )
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT}:{ROOT / 'cli'}", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    wall = time.perf_counter() - start
    line = next(x for x in out.stderr.splitlines() if x.startswith("@@"))
    return wall, line.split()[1] == "True"


def main() -> None:
    quick = "--quick" in sys.argv
    print("| command | wall s (fresh process) | imports torch |")
    print("|---|---:|---|")
    for argv in (("--help",), ("--version",)):
        runs = [_cli_seconds(*argv) for _ in range(1 if quick else 3)]
        best = min(r[0] for r in runs)
        print(f"| graphprof {' '.join(argv)} | {best:.2f} | {'yes' if runs[0][1] else 'no'} |")
    print()
    print("| model | points | one profile_model s | prepare + all points s | ratio | MACs / first point | capture reused |")
    print("|---|---|---:|---:|---:|---|---|")
    for name, (key, values) in CASES.items():
        if quick:
            values = values[:2]
        one = _python(_ONE, name)
        many = _python(_MANY, name, key, json.dumps(values))
        ratios = [m / many["macs"][0] for m in many["macs"]]
        print(
            f"| {name} | {key}={values} | {one['seconds']:.2f} | {many['seconds']:.2f} | "
            f"{many['seconds'] / one['seconds']:.2f} | {', '.join(f'{r:.4f}' for r in ratios)} | {many['reused']} |"
        )


if __name__ == "__main__":
    main()

"""Issue 51's one-GPU check: graphprof's predicted training step and decode beside the same ones measured on a lent GPU.

Run (anywhere; the measurements are files, the predictions dry runs)::

    python benchmarks/bench_gpu_step.py                      # benchmarks/results/gpu_step_h200*.jsonl, preset h200

The measurements come from ``benchmarks/gpu_cluster_check.sh`` on the device (``benchmarks/gpu_step.py``: a
llama-shaped model under FSDP2 on a one-rank NCCL group, torchtitan's mixed precision, ``torch.optim.AdamW``'s
default ``foreach`` implementation; ``generate`` of Llama-3-8B at batch 1). For each one this prints what a user
runs, verbatim::

    graphprof shard fsdp:1 --model SPEC --hardware h200 --dtype bf16 --batch-size B --seq-len S --adamw foreach [--compile] [--checkpoint full]
    graphprof generate --model hf:llama-3-8b --hardware h200 --dtype bf16 --prompt-len 1024 --new-tokens 256 --cache dynamic|static [--compile]

(here through their library calls), the prediction with its interval and breakdown, the measured median with its
spread over the timed steps, and the signed error ``predicted / measured - 1``. The kernel table that prices them
is the H200's own (``graphprof/devices/calibration/h200.json``), fitted to single kernels measured in the same
session (``benchmarks/results/h200_ops_measured.json``); nothing is fitted to these steps.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results"


def _rows(paths: list[Path]) -> list[dict[str, Any]]:
    rows = []
    for path in paths:
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if "error" not in r]


def _train(row: dict[str, Any], preset: str) -> tuple[str, float, str]:
    from graphprof.sharding import StepOptions, shard_profile

    timing = StepOptions(compiled=row["compile"], checkpoint=row["checkpoint"], adamw="foreach")
    p = shard_profile(row["spec"], "fsdp:1", hardware=preset, timing=timing, dtype="bfloat16", batch_size=row["batch"], seq_len=row["seq"])
    step = p.step
    assert step is not None
    b = step.breakdown
    measured = row["step_s_median"]
    flags = (" --compile" if row["compile"] else "") + (f" --checkpoint {row['checkpoint']}" if row["checkpoint"] != "none" else "")
    command = (f"graphprof shard fsdp:1 --model '{row['spec']}' --hardware {preset} --dtype bf16 --batch-size {row['batch']} "
               f"--seq-len {row['seq']} --adamw foreach{flags}")  # fmt: skip
    text = (
        f"  measured {measured * 1e3:,.1f} ms (median of {len(row['steps_s'])} steps, {row['step_s_min'] * 1e3:,.1f}-{row['step_s_max'] * 1e3:,.1f}) "
        f"| predicted {step.time_s * 1e3:,.1f} ms (80%: {step.low_s * 1e3:,.1f}-{step.high_s * 1e3:,.1f}) | error {step.time_s / measured - 1:+.1%}\n"
        f"  predicted: compute {b.compute_s * 1e3:,.1f}, recompute {b.recompute_s * 1e3:,.1f}, optimizer {b.optimizer_s * 1e3:,.1f}, "
        f"host {b.host_s * 1e3:,.1f}, attention backward {b.attention_backward_s * 1e3:,.1f} ms\n"
        f"  peak memory: measured {row['peak_allocated_bytes'] / 1e9:,.1f} GB allocated, estimated {p.rank.memory_bytes / 1e9:,.1f} GB "
        f"with bf16 shards, {(p.master_memory_bytes or p.rank.memory_bytes) / 1e9:,.1f} GB with float32 ones (as measured: torchtitan's)"
    )
    return command, step.time_s / measured - 1, text


def _decode(row: dict[str, Any], preset: str) -> tuple[str, float, str]:
    from graphprof.generate import profile_generation

    cache = "static" if row["compile"] else "dynamic"
    g = profile_generation("hf:llama-3-8b", prompt_len=row["prompt"], new_tokens=row["new"], dtype="bfloat16", cache=cache,
                           hardware=preset, compiled=row["compile"])  # fmt: skip
    assert g.predicted is not None and g.predicted.tpot_s is not None
    predicted, measured = g.predicted.tpot_s, row["tpot_s_median"]
    command = (f"graphprof generate --model hf:llama-3-8b --hardware {preset} --dtype bf16 --prompt-len {row['prompt']} "
               f"--new-tokens {row['new']} --cache {cache}" + (" --compile" if row["compile"] else ""))  # fmt: skip
    text = (
        f"  measured TPOT {measured * 1e3:.2f} ms (median; 10th-90th percentile {row['tpot_s_p10'] * 1e3:.2f}-{row['tpot_s_p90'] * 1e3:.2f}; {row['how']}) "
        f"| predicted {predicted * 1e3:.2f} ms | error {predicted / measured - 1:+.1%}"
    )
    return command, predicted / measured - 1, text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, default=[RESULTS / "gpu_step_h200.jsonl"])
    parser.add_argument("--preset", default="h200")
    args = parser.parse_args(argv)
    rows = _rows(args.files)
    errors: list[tuple[str, float]] = []
    for row in rows:
        start = time.perf_counter()
        if row["job"] == "decode" and row["compile"] and row.get("compile_how") not in (None, "auto"):
            continue  # the manual variants are kept in the file; generate's own compile is what a user gets
        title = (f"{row['shape']} train b{row['batch']} s{row['seq']}, {'compiled' if row['compile'] else 'eager'}, checkpoint {row['checkpoint']}"
                 if row["job"] == "train" else f"{row['shape']} decode b1, {'compiled' if row['compile'] else 'eager'}")  # fmt: skip
        command, error, text = _train(row, args.preset) if row["job"] == "train" else _decode(row, args.preset)
        print(f"{title}\n  {command}\n{text}\n  priced in {time.perf_counter() - start:.1f} s\n", flush=True)
        errors.append((title, error))
    if errors:
        absolute = [abs(e) for _, e in errors]
        worst = max(errors, key=lambda x: abs(x[1]))
        print(f"{len(errors)} checks: median |error| {statistics.median(absolute):.1%}, signed median {statistics.median(e for _, e in errors):+.1%}, "
              f"worst {worst[1]:+.1%} ({worst[0]})")  # fmt: skip
    print(f"load: {os.getloadavg()[0]:.2f} (1-minute), {os.cpu_count()} CPUs (prediction only: no timing here depends on it)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

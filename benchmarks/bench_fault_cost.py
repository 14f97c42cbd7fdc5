"""What a page fault costs inside a CPU forward, beside what the calibration prices it at (issue 53).

The calibration prices a byte of fresh memory by timing one op (``clamp_min``) into fresh pages against a kept
output (:func:`graphprof.calibrate.bench.measure_first_touch`, ``per_byte_s`` of the ``local`` preset). Inside a
model's forward the allocator's faults come with unmapping, trimming and the other thread's work, and may cost
more. This times each model's plain forward in fresh processes two ways, alternating:

* **default**: glibc's heap as ``graphprof --measure`` leaves it (thresholds settled at their ceiling), which
  maps large blocks and trims the heap, so fresh pages fault every forward;
* **kept**: the same, with ``mallopt(M_MMAP_MAX, 0)`` and ``M_TRIM_THRESHOLD`` at 1 GiB: nothing is mapped or
  given back, and after the first forwards nothing faults.

Each process: the dry run, the model materialised as ``--measure`` does, three forwards, then seven timed with
their minor faults counted (the medians kept). The cost of a byte is (median default forward - median kept
forward) / median faulted bytes of the default forwards, the medians over ``--processes`` processes each way.
Every process waits for a 1-minute load under 1.5 before it starts (the processes themselves raise it: two
threads on two cores), and its load is printed.

Run alone::

    python benchmarks/bench_fault_cost.py                                # three models at batch 8
    python benchmarks/bench_fault_cost.py --models vgg11 --processes 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODELS = ("timm:mobilevit_xs", "vgg11", "efficientnet_b2")
#: The 1-minute load a process waits for before it starts.
QUIET = 1.5
WARMUP, TIMED = 3, 7


def _child(name: str, batch: int, kept: bool) -> None:
    """One fresh process: the plain forward's median seconds and faulted bytes, as JSON on the last line."""
    import torch

    from graphprof.measure.heap import keep_heap, settle_malloc
    from graphprof.measure.run import cast_inputs, materialized
    from graphprof.measure.timing import call_model, faulted_bytes
    from graphprof.prepared import prepare

    pm = prepare(name, batch_size=batch)
    call = pm.resolve(pm.spec(batch_size=batch))
    pm.profile(batch_size=batch)  # the dry run first, as the user's command makes it
    work, _ = materialized(pm.model, torch.device("cpu"), call.dtype, 0)
    inputs = cast_inputs(call.kwargs if call.kwargs else call.args, torch.device("cpu"), call.dtype)
    settle_malloc()
    if kept:
        keep_heap()  # M_MMAP_MAX 0: map nothing; M_TRIM_THRESHOLD 1 GiB: never give the heap back
    seconds, faults = [], []
    with torch.no_grad():
        for _ in range(WARMUP):
            call_model(work, inputs)
        for _ in range(TIMED):
            start = time.perf_counter()
            faults.append(faulted_bytes(lambda: call_model(work, inputs)))
            seconds.append(time.perf_counter() - start)
    print(json.dumps({"forward_s": statistics.median(seconds), "faulted": statistics.median(faults)}), flush=True)


def _wait_quiet() -> float:
    while (load := os.getloadavg()[0]) >= QUIET:
        time.sleep(5)
    return load


def _process(name: str, batch: int, kept: bool) -> tuple[dict[str, float], float] | None:
    load = _wait_quiet()
    command = [sys.executable, __file__, "--child", name, str(batch), "kept" if kept else "default"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        return None
    return json.loads(done.stdout.strip().splitlines()[-1]), load


def _model(name: str, batch: int, processes: int, per_byte: float) -> None:
    runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for _ in range(processes):
        for kept in (False, True):
            got = _process(name, batch, kept)
            if got is None:
                print(f"  {name}: a {'kept' if kept else 'default'} process failed")
                continue
            runs[kept].append(got[0])
            print(f"  {name} {'kept   ' if kept else 'default'} forward {got[0]['forward_s'] * 1e3:8.1f} ms, "
                  f"faulted {got[0]['faulted'] / 1e6:7.1f} MB (load {got[1]:.2f})", flush=True)  # fmt: skip
    if not runs[False] or not runs[True]:
        return
    default = statistics.median(r["forward_s"] for r in runs[False])
    kept_s = statistics.median(r["forward_s"] for r in runs[True])
    faulted = statistics.median(r["faulted"] for r in runs[False])
    cost = (default - kept_s) / faulted if faulted > 0 else float("nan")
    print(
        f"| {name} | {default * 1e3:.1f} | {kept_s * 1e3:.1f} | {faulted / 1e6:.1f} | {cost * 1e9:.3f} | {cost / per_byte:.2f}x |",
        flush=True,
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], int(sys.argv[3]), sys.argv[4] == "kept")
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--processes", type=int, default=3)
    args = parser.parse_args()
    from graphprof.devices.hardware import read_local_hardware

    hardware = read_local_hardware()
    op_model = None if hardware is None or hardware.calibration is None else hardware.calibration.op_model
    if op_model is None or op_model.first_touch is None:
        raise SystemExit("bench_fault_cost: no local calibration with a first-touch term; run `graphprof calibrate` first")
    per_byte = op_model.first_touch.per_byte_s
    print(f"# What a page fault costs inside a forward, batch {args.batch_size}: the calibration prices {per_byte * 1e9:.3f} ns a byte")
    for name in args.models:
        _model(name, args.batch_size, args.processes, per_byte)
    print(
        "\n(the table rows: model | default forward ms | kept forward ms | faulted MB a default forward | ns a byte | over the calibration's)"
    )


if __name__ == "__main__":
    main()

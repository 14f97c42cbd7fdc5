"""The page faults of a batch-8 CPU forward: what each law predicts beside what fresh processes count (issue 53).

A plain CPU forward faults in every page of fresh memory it writes; on this 2-core machine that is 0 to 860 MB
a forward and, for timm's mobilevit_xs at batch 8, about half the forward's time. Two laws predict those bytes
from the dry run alone, and this prints both beside the measurement, model by model:

* **share law** (what the predictor prices today, :class:`graphprof.devices.firsttouch.FirstTouch`): every fresh
  block at or above the mmap threshold, plus ``share_below`` of the blocks between 1 MiB and the threshold where
  the dry run's peak reaches ``trim_peak_bytes`` (both fitted by the calibration);
* **heap replay** (:func:`graphprof.devices.heapreplay.steady_faults`, nothing fitted): glibc's heap replayed
  over the dry run's allocation order (:class:`graphprof.run.observers.allocations.AllocationOrder`).

Measured: ``python -m graphprof.calibrate.fresh_faults`` in a fresh process per model (the order of
``graphprof --model M --measure``: dry run, settled thresholds, two forwards, then the median of three counted
forwards' minor faults), in ``--processes`` fresh processes a model (the median compared, each printed: the same
model's heap faults differ several-fold from one process to the next), split as the calibration splits it (:func:`graphprof.calibrate.samples.fault_split`):
the blocks at or above the threshold (which fault whole, in every law) and the rest, ``heap``.

Run (alone: the fresh processes time nothing that is reported, but they do take the CPU)::

    python benchmarks/bench_faults.py                   # the models below, batch 8
    python benchmarks/bench_faults.py --models resnet34 timm:mobilevit_xs --batch-size 8

Needs a calibration (``graphprof calibrate``): the threshold, the convolution copies' channel block and the share
law are the ``local`` preset's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: The calibration's sample models with a heap that trims or not, the development models, and held-out ones.
MODELS = (
    "squeezenet1_1", "mobilenet_v2", "regnet_x_400mf", "efficientnet_b1", "resnet34", "densenet121", "vit_b_16",
    "swin_v2_t", "resnet50", "vgg11", "wide_resnet50_2", "inception_v3", "regnet_y_400mf", "efficientnet_b2",
    "squeezenet1_0", "resnet101", "densenet169", "resnet152", "regnet_y_1_6gf", "timm:mobilevit_xs",
)  # fmt: skip


def _predicted(name: str, batch: int, touch: object) -> tuple[float, float, float, float, float]:
    """(mapped, heap by the replay in the captured graph's order, in the eager forward's order, heap by the share
    law, the dry run's peak) in bytes. The graph's order frees a value after its last use; the eager forward frees
    it when Python drops it (a residual block's input lives to the add): the real forward's is the eager one."""
    from graphprof.devices.heapreplay import heap_faults
    from graphprof.prepared import prepare
    from graphprof.run.loop import run_model
    from graphprof.run.lowering import lowering_context
    from graphprof.run.observers.allocations import AllocationOrder

    pm = prepare(name, batch_size=batch)
    profile = pm.profile(batch_size=batch)  # its dry run records the captured graph's order (Profile.allocations)
    eager = AllocationOrder()  # with the calls the CPU target runs, as the dry run's
    call = pm.resolve(pm.spec(batch_size=batch))
    run_model(None, pm.model, call.args, call.kwargs, [eager], dtype=call.dtype, modes=[lowering_context("cpu")])
    mapped, in_graph = heap_faults(profile.allocations, touch)  # type: ignore[arg-type]
    _, in_eager = heap_faults(eager.steps, touch)  # type: ignore[arg-type]
    law = touch.for_forward(profile.peak_activation_bytes)  # type: ignore[attr-defined]
    sizes = [b for _, op in profile.iter_ops() if op.op.startswith("aten.") for b in law.fresh(op)]
    _, between = law.split(sizes)
    return mapped, in_graph, in_eager, law.share_below * between, float(profile.peak_activation_bytes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--processes", type=int, default=3, help="fresh processes a model (their faults vary: each is printed)")
    args = parser.parse_args()
    from graphprof.calibrate.fresh_faults import fresh_forward
    from graphprof.devices.hardware import read_local_hardware

    hardware = read_local_hardware()
    touch = None if hardware is None or hardware.calibration is None else hardware.calibration.op_model
    touch = None if touch is None else touch.first_touch
    if touch is None:
        raise SystemExit("bench_faults: no local calibration with a first-touch term; run `graphprof calibrate` first")
    print(f"# Page faults a forward, batch {args.batch_size}: measured (fresh process) beside the share law and the heap replay")
    print(
        f"threshold {touch.limit_bytes / 2**20:.2f} MiB, share law {touch.share_below:.3f} above a peak of {touch.trim_peak_bytes / 1e6:.1f} MB; MB = 1e6 bytes\n"
    )
    print(
        "| model | peak MB | mapped MB | heap measured | heap, share law | heap, replay (graph order) | heap, replay (eager order) | load |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    errors: dict[str, list[float]] = {"share law": [], "replay, graph order": [], "replay, eager order": []}
    for name in args.models:
        mapped, replay, eager, law, peak = _predicted(name, args.batch_size, touch)
        runs = [fresh_forward(name, args.batch_size, touch.limit_bytes, touch.min_bytes, (touch.conv_block, touch.threads))
                for _ in range(args.processes)]  # fmt: skip
        counted = [r.faulted for r in runs if r is not None]
        if not counted:
            print(
                f"| {name} | {peak / 1e6:.1f} | {mapped / 1e6:.1f} | failed | {law / 1e6:.1f} | {replay / 1e6:.1f} | {eager / 1e6:.1f} | |"
            )
            continue
        measured = statistics.median(counted)
        errors["share law"].append(law - measured)
        errors["replay, graph order"].append(replay - measured)
        errors["replay, eager order"].append(eager - measured)
        each = " / ".join(f"{c / 1e6:.1f}" for c in counted)
        print(f"| {name} | {peak / 1e6:.1f} | {mapped / 1e6:.1f} | {measured / 1e6:.1f} ({each}) | {law / 1e6:.1f} | {replay / 1e6:.1f} "
              f"| {eager / 1e6:.1f} | {os.getloadavg()[0]:.2f} |", flush=True)  # fmt: skip
    print()
    for law_name, errs in errors.items():
        if errs:
            signed, absolute = sum(errs), sum(abs(e) for e in errs)
            within = sum(abs(e) <= 25e6 for e in errs)
            print(
                f"- {law_name}: summed error {signed / 1e6:+.1f} MB, summed |error| {absolute / 1e6:.1f} MB, within 25 MB {within}/{len(errs)} models"
            )


if __name__ == "__main__":
    main()

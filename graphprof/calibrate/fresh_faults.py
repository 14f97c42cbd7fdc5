"""The page faults of a model's forward as a user's process sees them: a fresh process, the dry run, then plain
forwards (the order of ``graphprof --model M --measure``).

The calibration's own process has run many models by the time it times one, and its heap faults far less:
on this 2-core machine the sample models' batch-8 forwards faulted 3.8% of the bytes of their outputs between
1 MiB and the allocator's limit there, where a fresh ``graphprof --measure`` of efficientnet_b3 at batch 8
faulted 726 MB a forward, about 20% of those bytes. The share a prediction prices
(:attr:`graphprof.devices.opmodel.FirstTouch.share_below`) is therefore measured here, one fresh process
per sample model at its large batch; the samples themselves lose the faults their own process counted.

Run as ``python -m graphprof.calibrate.fresh_faults MODEL BATCH LIMIT_BYTES MIN_BYTES``: prints
``{"faulted": ..., "exposed": ..., "peak": ...}`` (:func:`graphprof.calibrate.samples.fault_split`, and the dry
run's peak of live activation bytes).
"""

from __future__ import annotations

import json
import subprocess
import sys

__all__ = ["fresh_fault_split"]

#: Forwards before the faults are counted, and forwards counted (their median).
WARMUP, COUNTED = 2, 3


def fresh_fault_split(
    name: str, batch: int, limit_bytes: float, min_bytes: float, timeout_s: float = 300.0
) -> tuple[float, float, float] | None:
    """``(faulted, exposed, peak)`` bytes of one plain forward of ``name`` at ``batch`` in a fresh process (``peak``:
    its dry run's live activations at their peak); ``None`` when the process fails (a model missing here only
    samples less)."""
    command = [sys.executable, "-m", "graphprof.calibrate.fresh_faults", name, str(batch), repr(limit_bytes), repr(min_bytes)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0 or not done.stdout.strip():
        return None
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return float(out["faulted"]), float(out["exposed"]), float(out["peak"])


def _main(argv: list[str]) -> None:
    import statistics

    import torch

    from graphprof.calibrate.samples import fault_split
    from graphprof.devices.opmodel import FirstTouch
    from graphprof.measure.context import faulted_bytes
    from graphprof.measure.heap import settle_malloc
    from graphprof.measure.run import cast_inputs, materialized
    from graphprof.measure.timing import call_model
    from graphprof.prepared import prepare

    name, batch, limit, least = argv[0], int(argv[1]), float(argv[2]), float(argv[3])
    model = prepare(name, batch_size=batch)
    call = model.resolve(model.spec(batch_size=batch))
    profile = model.profile(batch_size=batch)  # the dry run first, as the user's command makes it
    work, _ = materialized(model.model, torch.device("cpu"), call.dtype, 0)
    inputs = cast_inputs(call.kwargs if call.kwargs else call.args, torch.device("cpu"), call.dtype)
    settle_malloc()
    with torch.no_grad():
        for _ in range(WARMUP):
            call_model(work, inputs)
        counted = [faulted_bytes(lambda: call_model(work, inputs)) for _ in range(COUNTED)]

    faulted, exposed = fault_split(profile, statistics.median(counted), FirstTouch(limit, 0.0, min_bytes=least))
    print(json.dumps({"faulted": faulted, "exposed": exposed, "peak": float(profile.peak_activation_bytes)}))


if __name__ == "__main__":
    _main(sys.argv[1:])

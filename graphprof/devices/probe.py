"""How fast this CPU runs *now*, against how fast it ran when it was calibrated: one fixed small workload, timed.

A shared machine's speed drifts by tens of percent over minutes, whatever its load average says: on this
2-core VM two full calibrations half an hour apart timed the same sample ops 50% apart (the op grid's
one-element add 0.90 then 1.06 us, a 1x1 convolution in place 391 then 592 us at the median), and a model's
forward measured right after the slower one ran at the faster one's speed. A prediction made from a table
timed in a slow spell is then a slow machine's prediction. So ``graphprof calibrate`` times the probe
(:func:`probe_seconds`) while it measures and stores it with the table (``device.probe_s``); a prediction for
``local`` times the probe again and scales the kind models' times by ``now / then``
(:attr:`graphprof.devices.table.Calibration.speed`), and says so.

The probe is a convolution block at batch 1 (a 3x3 and a 1x1 convolution, a batch norm, ReLUs, an
addition: the op kinds that dominate the sample models), run under ``torch.no_grad`` with the thread count
the caller has set; its time is the median of :data:`CHUNKS` chunks of calls, after warm-up. About 0.1 s.

Worked example: calibrated with the probe at 2.4 ms, timed now at 1.8 ms: predictions are scaled by 0.75.
"""

from __future__ import annotations

import statistics
import time

import torch
from torch import nn

__all__ = ["CHUNKS", "SPEED_LIMITS", "probe_seconds", "speed_factor"]

#: How many chunks of calls the probe's median is taken over, and each chunk's length (seconds).
CHUNKS, CHUNK_S = 9, 0.01
#: A speed factor outside these is not applied (the probe itself misread, or another machine): 1 is used.
SPEED_LIMITS = (0.5, 2.0)


def _block() -> nn.Module:
    generator = torch.Generator().manual_seed(0)
    block = nn.Sequential(
        nn.Conv2d(32, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.Conv2d(32, 128, 1, bias=False), nn.ReLU()
    ).eval()
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.1)
    return block


def probe_seconds() -> float:
    """Seconds of one call of the probe (the median of :data:`CHUNKS` timed chunks), on the CPU, now."""
    block = _block()
    x = torch.randn(1, 32, 28, 28, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        for _ in range(5):
            block(x)
        start = time.perf_counter()
        block(x)
        per_call = max(time.perf_counter() - start, 1e-6)
        calls = max(1, int(CHUNK_S / per_call))
        chunks = []
        for _ in range(CHUNKS):
            start = time.perf_counter()
            for _ in range(calls):
                block(x)
            chunks.append((time.perf_counter() - start) / calls)
    return statistics.median(chunks)


def speed_factor(calibrated_s: float, now_s: float) -> float | None:
    """``now / then`` of the probe, or ``None`` when it falls outside :data:`SPEED_LIMITS` (not applied)."""
    if calibrated_s <= 0 or now_s <= 0:
        return None
    factor = now_s / calibrated_s
    return factor if SPEED_LIMITS[0] <= factor <= SPEED_LIMITS[1] else None

"""How fast this CPU runs at a moment: one fixed small workload, timed (about 0.1 s).

A shared machine's speed drifts by tens of percent over minutes, whatever its load average says. ``graphprof
calibrate`` reads this probe around every stretch of its timing and brings each stretch's samples to the
median reading (:mod:`graphprof.calibrate.speed`), so one calibration's table describes one speed, stored
with it (``device.probe_s``, every reading in ``device.probes_s``); a prediction for ``local`` reads it
:data:`READINGS` times (:func:`probe_now`) and, where that median lies beyond every speed the calibration itself
met (the band its own readings and its fresh processes' readings spanned, :func:`band_of`), scales the table by its
ratio to the band's edge, raised to :data:`SPEED_ELASTICITY` (:func:`speed_factor_beyond`), and says so. One reading
alone is too noisy for either (``benchmarks/bench_drift.py``).

**Why not the ratio itself.** The probe is as noisy as the forwards it stands for, so a forward follows it only in
part. On a 2-core AMD EPYC VM, 18 fresh processes (12 of resnet50, 6 of mobilenet_v2, batch 1, 2 threads) each
read the probe (the median of five readings) and then timed ten plain forwards: the probe ran 0.28-0.64 ms from
process to process and the forwards 56-111 ms (resnet50), and the log of a forward followed the log of its
process's probe with a slope of 0.60 (correlation 0.65, each model about its own mean). The spread of the log
forward about its model's mean was 0.189 unscaled, 0.166 scaled by the whole ratio, and 0.145 scaled by its
square root. A ratio in full lets one stray reading (0.64 ms in a process whose forwards ran at the median)
scale a prediction twice over.

The probe is a convolution block at batch 1 (a 3x3 and a 1x1 convolution, a batch norm, ReLUs: the op kinds
that dominate the sample models), run under ``torch.no_grad`` with the thread count the caller has set; its
time is the median of :data:`CHUNKS` chunks of calls, after warm-up.

Worked example: a reference reading of 2.4 ms and one of 1.8 ms now: the ratio is 0.75, and :func:`speed_factor`
``0.75 ** 0.6 = 0.841``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import torch
from torch import nn

__all__ = [
    "CHUNKS", "READINGS", "SPEED_ELASTICITY", "SPEED_LIMITS", "band_of", "followed", "probe_now", "probe_seconds",
    "speed_factor", "speed_factor_beyond",
]  # fmt: skip

#: How many chunks of calls the probe's median is taken over, and each chunk's length (seconds).
CHUNKS, CHUNK_S = 9, 0.01
#: How many readings a prediction's probe takes the median of (about 0.5 s).
READINGS = 5
#: A speed factor outside these is not applied (the probe itself misread, or another machine): 1 is used.
SPEED_LIMITS = (0.5, 2.0)
#: How far a forward's time follows the probe's: the ratio of two readings is raised to this (see the module docstring).
SPEED_ELASTICITY = 0.6


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


def probe_now(readings: int = READINGS) -> float:
    """The median of ``readings`` probe readings, back to back: one reading alone strays (readings of 0.29 ms
    inside calibrations whose median reading was 0.46 ms)."""
    return statistics.median(probe_seconds() for _ in range(readings))


def followed(ratio: float, elasticity: float = SPEED_ELASTICITY) -> float:
    """What a forward's time is multiplied by where the probe's time was multiplied by ``ratio``:
    ``ratio ** elasticity``, by default :data:`SPEED_ELASTICITY` (the module docstring says why not ``ratio``)."""
    return float(ratio**elasticity)


def speed_factor(calibrated_s: float, now_s: float, elasticity: float = SPEED_ELASTICITY) -> float | None:
    """``(now / then) ** elasticity`` of the probe (by default :data:`SPEED_ELASTICITY`), or ``None`` when
    ``now / then`` falls outside :data:`SPEED_LIMITS` (not applied)."""
    if calibrated_s <= 0 or now_s <= 0:
        return None
    ratio = now_s / calibrated_s
    return followed(ratio, elasticity) if SPEED_LIMITS[0] <= ratio <= SPEED_LIMITS[1] else None


def band_of(readings: Sequence[float]) -> tuple[float, float] | None:
    """The band of speeds a calibration met: the fastest and the slowest of its readings (the long-running
    process's and its fresh processes'), or ``None`` for fewer than ten (a calibration too short to say).

    Why the whole range and not its 10th to 90th percentiles (as before): this machine runs in spells, its probe
    bimodal at about 0.285 and 0.41 ms; a spell takes a process whole or in part, and a fresh process's forward
    follows its own probe at an elasticity near 0.6 (14 fresh processes of resnet50 at batch 1: 58-64 ms at 0.28 ms,
    68-79 ms at 0.41). The table stands at the median fresh process, an average over such spells, and the benchmark's
    reference (the median of three fresh processes) is one too: in held-out run 19, 8 of 20 predicting processes read
    1.09-1.29x above the old band's edge (0.362 ms), their predictions were scaled up by 1.055-1.163, and the processes
    measured beside them ran at the usual speed. A spell the calibration met is noise the interval carries; a speed it
    never met is the machine changed.

    >>> band_of([0.29, 0.30, 0.31, 0.29, 0.41, 0.30, 0.28, 0.30, 0.29, 0.31])
    (0.28, 0.41)
    """
    usable = [r for r in readings if r > 0]
    return (min(usable), max(usable)) if len(usable) >= 10 else None


def speed_factor_beyond(calibrated_s: float, now_s: float, band: tuple[float, float] | None) -> float | None:
    """What a prediction is multiplied by for a probe reading ``now_s`` against a calibration whose median reading
    was ``calibrated_s`` and whose readings spanned ``band``: 1 inside the band (the table already averages over
    such spells: a process that reads there runs at the table's speed, give or take the noise the interval
    carries), else the ratio to the band's nearer edge raised to :data:`SPEED_ELASTICITY`; ``None`` where
    ``now / then`` falls outside :data:`SPEED_LIMITS`. Without a band, :func:`speed_factor`.

    Why a band: on this machine a fresh process's probe reads anywhere in the calibration's own spread (0.28 to
    0.64 ms from process to process, around a median of 0.31), and scaling every prediction by it made two
    predictions of one model from one calibration differ by up to 1.4x, against a reference (the median of three
    fresh processes) that the reading of one process does not move. Outside the band the machine has changed
    (:func:`band_of` says why the band is every speed the calibration met).

    Worked example: a band of 0.29-0.48 ms around a median of 0.31 ms: a reading of 0.40 ms gives 1; one of 0.60
    ms gives ``(0.60 / 0.48) ** 0.6 = 1.143`` (the whole ratio to the median, ``(0.60 / 0.31) ** 0.6``, would give
    1.486); one of 0.25 ms gives ``(0.25 / 0.29) ** 0.6 = 0.915``."""
    whole = speed_factor(calibrated_s, now_s)
    if whole is None or band is None:
        return whole
    low, high = min(band[0], calibrated_s), max(band[1], calibrated_s)
    if now_s > high:
        return followed(now_s / high)
    if now_s < low:
        return followed(now_s / low)
    return 1.0

"""Seed 002's interpretation of arithmetic intensity: four fixed bands of FLOPs per byte, independent of any device.

==========================  ===================  ==========================================
band                        rule (FLOPs/byte)    seed 002's reading
==========================  ===================  ==========================================
Strongly compute-bound      AI > 100             good for GPUs, accelerators
Compute-bound               50 < AI <= 100       typical CNNs
Balanced                    10 < AI <= 50        need both compute and bandwidth
Memory-bound                AI <= 10             need high bandwidth
==========================  ===================  ==========================================

The seed writes the middle bands as "50-100" and "10-50"; each edge here belongs to the band below it,
so that "Memory-bound" is exactly the fixed-threshold verdict of :func:`graphprof.cost.roofline.classify`
with no device (``AI <= 10``, seed 001). A layer that computes but moves no bytes is strongly
compute-bound; one that does neither has no band.

>>> intensity_band(57.1).name, intensity_band(10.0).name, intensity_band(None, flops=0)
('Compute-bound', 'Memory-bound', None)
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["IntensityBand", "INTENSITY_BANDS", "intensity_band"]


@dataclass(frozen=True)
class IntensityBand:
    """One band: its name as seed 002 labels it, the rule, its lower edge (exclusive) and what it means."""

    name: str
    rule: str
    above: float
    meaning: str


#: The four bands, highest first: a layer belongs to the first whose ``above`` its intensity exceeds.
INTENSITY_BANDS = (
    IntensityBand("Strongly compute-bound", "AI > 100", 100.0, "good for GPUs, accelerators"),
    IntensityBand("Compute-bound", "50 < AI <= 100", 50.0, "typical CNNs"),
    IntensityBand("Balanced", "10 < AI <= 50", 10.0, "need both compute and bandwidth"),
    IntensityBand("Memory-bound", "AI <= 10", float("-inf"), "need high bandwidth"),
)


def intensity_band(intensity: float | None, *, flops: int = 1) -> IntensityBand | None:
    """The band of an arithmetic intensity (FLOPs per byte); ``None`` intensity means no bytes moved:
    strongly compute-bound when ``flops`` is positive, no band when there is no work at all."""
    if intensity is None:
        return INTENSITY_BANDS[0] if flops > 0 else None
    return next(band for band in INTENSITY_BANDS if intensity > band.above)

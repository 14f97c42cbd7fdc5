"""The calibration's samples at one speed: each stretch of timing scaled by the speed probe read around it.

This 2-core VM's speed drifts by tens of percent within minutes (``benchmarks/bench_drift.py`` measures it).
One calibration is several minutes of timing, so some sample models are timed in a slow spell and others in
a fast one, and the fit learns the spells as if they were the ops. So the probe
(:func:`graphprof.devices.probe.probe_seconds`, about 0.1 s) is read at the start and before and after each
stretch of timing (the op grid, each sample model's forwards, the adaptive samples), and each stretch's times
are multiplied by ``reference / geometric mean of the two readings``; before the final fit every sample is
brought from the first reading to the **median of all the readings** (about 90 in a full calibration), which
is the speed the table then describes and the one stored with it (``device.probe_s``) — or, where the calibration
timed its sample models in fresh processes (:mod:`graphprof.calibrate.fresh_faults`), to the **median of those
processes' readings** (:attr:`SpeedTrack.table_s`): a prediction is for a user's fresh process, and a fresh process
reads the probe faster than the calibration's long-running one (on this 2-core VM, the 22 anchors of one calibration
read 0.289 ms at the median where its own readings' median was 0.300), so a table at the calibration's median
priced every fresh process about 2% slow, a factor no prediction took back (the reading falls inside the
calibration's band).

Why the median and not a reading: one reading is noisy. Alone and idle, this machine's probe read 0.40 to
0.92 ms around a median of 0.46 (``benchmarks/results/bench_drift.md``: a 17% band from the 10th to the 90th
percentile, tick to tick; inside calibrations, single readings of 0.29-0.33 ms stood beside medians of
0.42-0.47), and a reading correlated with the forward timed right after it at +0.1 only. The slow drift is
real all the same (the probe read 0.46 ms at the median through a calibration and 0.36 ms twenty
minutes later), so a prediction holds the median of five readings now against this median
(:func:`graphprof.devices.hardware.local_hardware`).

Every ratio of readings is raised to :data:`~graphprof.devices.probe.SPEED_ELASTICITY` (0.6): a forward follows
the probe only in part (:mod:`graphprof.devices.probe`).

Worked example: first reading 0.40 ms; a model timed between readings of 0.48 and 0.52 ms (the machine 24%
slow by the probe) has its times multiplied by ``(0.40 / sqrt(0.48 * 0.52)) ** 0.6 = 0.80 ** 0.6 = 0.875``;
with a median of all readings of 0.44 ms, every sample is then multiplied by ``1.10 ** 0.6 = 1.059``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from graphprof.devices.opmodel import Sample
from graphprof.devices.probe import followed, probe_seconds, speed_factor

__all__ = ["SpeedTrack", "at_speed"]

T = TypeVar("T")


@dataclass
class SpeedTrack:
    """The first reading of the probe (the stretches' provisional reference) and every reading since, in order
    (seconds a probe call)."""

    reference_s: float
    readings_s: list[float] = field(default_factory=list)
    probe: Callable[[], float] = probe_seconds
    #: the readings of the fresh processes that timed the sample models (none: not timed so)
    fresh_s: list[float] = field(default_factory=list)

    @classmethod
    def start(cls, probe: Callable[[], float] = probe_seconds) -> SpeedTrack:
        first = probe()
        return cls(first, [first], probe)

    def read(self) -> float:
        now = self.probe()
        self.readings_s.append(now)
        return now

    def factor(self, before_s: float, after_s: float) -> float:
        """What a stretch timed between readings ``before_s`` and ``after_s`` is multiplied by: the reference
        over their geometric mean; 1 where that ratio is outside the probe's :data:`SPEED_LIMITS` (a misread)."""
        ratio = speed_factor(self.reference_s, math.sqrt(before_s * after_s))
        return 1.0 if ratio is None else 1.0 / ratio

    @property
    def median_s(self) -> float:
        """The median of every reading so far: the speed the calibration's table is brought to."""
        return statistics.median(self.readings_s)

    @property
    def table_s(self) -> float:
        """The speed the table is brought to: the median of :attr:`fresh_s` where there are any, else
        :attr:`median_s` (see the module docstring)."""
        return statistics.median(self.fresh_s) if self.fresh_s else self.median_s

    def to_table(self) -> float:
        """What samples scaled to the first reading are multiplied by to stand at :attr:`table_s` instead (the
        ratio raised to :data:`~graphprof.devices.probe.SPEED_ELASTICITY`, as every speed factor is)."""
        return followed(self.table_s / self.reference_s)

    def timed(self, work: Callable[[], T]) -> tuple[T, float]:
        """``work()`` with a reading before and after it, and the factor its times take."""
        before = self.read()
        out = work()
        return out, self.factor(before, self.read())


def at_speed(samples: Sequence[Sample], factor: float) -> list[Sample]:
    """``samples`` with their seconds multiplied by ``factor`` (the same list's copies when it is 1)."""
    return list(samples) if factor == 1.0 else [replace(s, seconds=s.seconds * factor) for s in samples]

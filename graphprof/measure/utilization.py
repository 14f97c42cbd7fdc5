"""MFU and HFU of a measured run: achieved FLOP/s over the device's dense peak at the run's dtype.

* **MFU** (model FLOPs utilisation) counts the model's FLOPs: for a model that takes tokens, the
  convention papers use (:mod:`graphprof.cost.tokens`: weight and token-mixing products, attention over
  unmasked positions, active experts only, training = 3 x forward) times the tokens; for any other model
  the FLOPs its arithmetic needs as graphprof counts them (:attr:`~graphprof.cost.result.Profile.total_flops`:
  2 per multiply-add plus element-wise work, every op of the forward, and of the backward in a training step).
* **HFU** (hardware FLOPs utilisation) counts the FLOPs the kernels execute
  (:attr:`~graphprof.cost.result.Profile.executed_flops`: less the tiles a causal attention kernel skips;
  with activation checkpointing a recomputed forward would add to it).

The peak is the device's **dense** figure for the run's dtype (:meth:`graphprof.devices.hardware.Hardware.peak_for`:
the ``local`` preset's measured matmul peak on this CPU after ``graphprof calibrate``, a datasheet's dense
figure for a GPU), named with the precision it was read at. The optimizer's arithmetic is not counted;
a training step's time includes it, so its MFU is a slight under-statement.

Worked example: 3.6 GFLOPs of a forward in 10 ms on a 1 TFLOP/s peak: 3.6e9 / 0.010 / 1e12 = 36% MFU.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from graphprof.base.choices import Phase
from graphprof.cost.result import Profile
from graphprof.devices.hardware import Hardware

__all__ = ["Utilization", "utilization", "with_utilization"]


@dataclass(frozen=True)
class Utilization:
    """One measured span (``forward``, ``training step``): its FLOPs (model and executed), mean time and
    the peak it is compared against."""

    span: str
    seconds: float
    model_flops: int
    executed_flops: int
    peak_flops: float
    precision: str
    device: str

    @property
    def achieved_flops(self) -> float:
        """Model FLOPs per second."""
        return self.model_flops / self.seconds

    @property
    def mfu(self) -> float:
        return self.model_flops / self.seconds / self.peak_flops

    @property
    def hfu(self) -> float:
        return self.executed_flops / self.seconds / self.peak_flops

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "achieved_flops": self.achieved_flops, "mfu": self.mfu, "hfu": self.hfu}


def _executed(profile: Profile, phase: Phase | None) -> int:
    return round(sum(op.cost.flops * op.work_fraction for _, op in profile.iter_ops() if phase is None or op.phase is phase))


def utilization(profile: Profile, hardware: Hardware) -> tuple[Utilization, ...]:
    """MFU and HFU of each span ``profile.measurement`` timed (the forward; in train mode also the whole
    step), against ``hardware``'s peak at the profile's dtype. Empty without a measurement."""
    m = profile.measurement
    if m is None:
        return ()
    peak, precision = hardware.peak_for(profile.dtype)
    tokens = profile.per_token
    forward = round(tokens.model_forward * tokens.tokens) if tokens is not None else profile.forward.flops
    spans = [Utilization("forward", m.forward.mean / 1e3, forward, _executed(profile, Phase.FORWARD), peak, precision, hardware.label)]
    if m.training_step is not None and profile.backward.flops:
        step = round(tokens.model_train * tokens.tokens) if tokens is not None else profile.total_flops
        spans.append(
            Utilization(
                f"training step ({m.optimizer})",
                m.training_step.mean / 1e3,
                step,
                _executed(profile, None),
                peak,
                precision,
                hardware.label,
            )
        )
    return tuple(spans)


def with_utilization(profile: Profile, hardware: Hardware | None) -> Profile:
    """``profile`` with its measurement's :attr:`~graphprof.measure.result.Measurement.utilization` set
    against ``hardware`` (unchanged without a measurement or a device)."""
    if profile.measurement is None or hardware is None:
        return profile
    return dataclasses.replace(profile, measurement=dataclasses.replace(profile.measurement, utilization=utilization(profile, hardware)))

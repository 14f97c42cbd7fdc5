"""Three costs of a training step that single-kernel timings do not see, each from a published figure, none fitted.

The kernel table (:mod:`graphprof.devices.predict`) prices each kernel as it ran alone, briefly, on an idle GPU.
A training step differs in three ways this module prices, each an estimate added to the step as its own part of
the breakdown (:class:`~graphprof.sharding.step_result.TimeBreakdown`), so a reader sees what each one costs:

* **attention backward** (``attention_backward_s``): the table's attention rates come from forward kernels
  (``aten._scaled_dot_product_flash_attention``). A fused attention's backward reaches a lower share of the peak:
  the FlashAttention-3 paper (Shah et al. 2024, arXiv 2407.08608, figures "Attention forward / backward speed,
  head dim 128, H100 80GB SXM5", sequence 8k) measures 318 / 370 TFLOP/s backward / forward for FlashAttention-2,
  518 / 600 for cuDNN and 559 / 646 for FlashAttention-3: 0.86 for all three. Each backward attention kernel is
  priced at its forward rate / :data:`ATTENTION_BACKWARD_RATIO`; the part is the time beyond the forward rate.
* **SM contention** (``sm_contention_s``): an NCCL collective runs one CTA per channel, each on an SM of its own
  that no compute kernel shares (NCCL maintainer, github.com/NVIDIA/nccl/issues/689: "NCCL CTAs won't share an SM
  with compute kernels"; a DGX with 8 NICs uses 16 SMs; H100 clusters' NCCL logs show 16 channels, issue 1453).
  While a collective is hidden under compute, the compute runs on ``SMs - 16`` SMs: each second of hidden
  collective costs ``16 / SMs`` of a second of compute (:data:`NCCL_SMS`; the device's ``Hardware.sms``).
* **sustained clock** (``sustained_clock_s``): tensor-core work under a sustained load runs at the clock the GPU
  holds at its power limit, not the boost clock its datasheet peak assumes. NVIDIA's published HPL Rpeak for the
  A100 uses 1,305 MHz, the clock it sustains at its 400 W limit, against the 1,410 MHz boost
  (https://glennklockwood.com/garden/peak-FLOPS). Matrix-product and attention kernels take ``boost / sustained - 1``
  longer (the device's ``Hardware.sustained_clock``). No such figure is published for the H100 (at 700 W, or at
  the 500 W some clusters run it at), so it is 1 there and the note says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from graphprof.devices.hardware import Hardware
from graphprof.sharding.timeline import KERNEL, Item, Timeline

__all__ = ["ATTENTION_BACKWARD_RATIO", "NCCL_SMS", "StepPhysics", "physics_note", "step_physics"]

#: Backward over forward TFLOP/s of fused attention, head dim 128, sequence 8k, H100 SXM5 (FlashAttention-3 paper):
#: FlashAttention-2 318 / 370 = 0.859, cuDNN 518 / 600 = 0.863, FlashAttention-3 559 / 646 = 0.865.
ATTENTION_BACKWARD_RATIO = 0.86
#: SMs an NCCL collective holds while it runs: one per channel, 16 channels (NCCL issues 689 and 1453).
NCCL_SMS = 16
_TENSOR_CORE = frozenset({"matmul", "attention"})


@dataclass(frozen=True)
class StepPhysics:
    """The three parts, seconds of one micro-step (module docstring)."""

    attention_backward_s: float
    sm_contention_s: float
    sustained_clock_s: float

    @property
    def total_s(self) -> float:
        return self.attention_backward_s + self.sm_contention_s + self.sustained_clock_s


def _attention_backward(item: Item) -> bool:
    return item.kind == KERNEL and item.klass == "attention" and "backward" in item.op


def step_physics(items: Sequence[Item], played: Timeline, hardware: Hardware) -> StepPhysics:
    """The three parts of ``items`` as :func:`~graphprof.sharding.timeline.simulate` played them (``played``).

    Worked example, an A100 (108 SMs, clock 0.9255): 100 ms of matrix products, 10 ms of attention backward and
    50 ms of collectives of which 5 ms exposed: attention backward ``10 x (1 / 0.86 - 1) = 1.63`` ms; SM contention
    ``45 x 16 / 108 = 6.67`` ms; sustained clock ``(100 + 10 + 1.63) x (1410 / 1305 - 1) = 8.98`` ms."""
    attention = sum(i.seconds for i in items if _attention_backward(i)) * (1.0 / ATTENTION_BACKWARD_RATIO - 1.0)
    sms, clock = hardware.sms, hardware.sustained_clock
    hidden = max(0.0, played.collectives_s - played.communication_s)
    contention = 0.0 if sms is None else hidden * NCCL_SMS / sms
    tensor_core = sum(i.seconds for i in items if i.kind == KERNEL and i.klass in _TENSOR_CORE) + attention
    sustained = 0.0 if clock is None else tensor_core * (1.0 / clock - 1.0)
    return StepPhysics(attention, contention, sustained)


def physics_note(hardware: Hardware) -> str:
    """What the three parts assumed on ``hardware``, for the step's notes."""
    clock, sms = hardware.sustained_clock, hardware.sms
    return (
        f"estimates from published figures, none fitted: attention backward at {ATTENTION_BACKWARD_RATIO} of its forward rate "
        "(FlashAttention-3 paper, H100, head dim 128); "
        + (f"SM contention: {NCCL_SMS} of {sms} SMs held by NCCL while a collective is hidden; " if sms else "SM contention: SM count unknown, not priced; ")
        + (f"sustained clock {clock:.3f} of boost (NVIDIA's HPL clock at the power limit)" if clock else "sustained clock: no published figure for this GPU, taken as boost")
    )  # fmt: skip

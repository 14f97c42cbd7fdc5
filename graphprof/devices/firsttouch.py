"""What fresh memory costs a call on the CPU: its outputs and a convolution's unseen blocked copies, and the
first touch of their pages where the allocator hands out new ones (:class:`FirstTouch`, measured by
:func:`graphprof.calibrate.bench.measure_first_touch` and fitted by the calibration; priced by
:mod:`graphprof.devices.predict` beside each call's kind model, :mod:`graphprof.devices.opmodel`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from graphprof.base.choices import OpStatus
from graphprof.base.record import Record

__all__ = ["CONV_NAMES", "FAULT_MIN_BYTES", "FirstTouch", "conv_scratch", "fresh_bytes", "fresh_outputs", "packet_name"]

#: The aten names of a convolution.
CONV_NAMES = frozenset({"convolution", "_convolution", "conv2d", "conv1d", "conv3d", "cudnn_convolution", "mkldnn_convolution"})


def packet_name(op: str) -> str:
    """``"aten.relu_"`` -> ``"relu"``: the op's packet name without its in-place underscore."""
    name = op.rsplit(".", 1)[-1]
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def fresh_outputs(op: Any) -> list[float]:
    """Bytes of each output a recorded call writes into memory of its own: a counted op's written bytes
    shared over its outputs by element count (all of them in one when it records no output shape); none
    for an op that works in place (``aten.relu_``), a view, or anything not counted."""
    if op.status is not OpStatus.COUNTED or packet_name(op.op) != op.op.rsplit(".", 1)[-1]:
        return []
    written = float(op.cost.bytes_written)
    sizes = [float(math.prod(shape)) for shape in op.output_shapes]
    total = sum(sizes)
    return [written * n / total for n in sizes] if total > 0 else [written]


def conv_scratch(
    op: str, input_shapes: Sequence[Sequence[int]], output_shapes: Sequence[Sequence[int]], itemsize: float, block: int, threads: int
) -> list[float]:
    """Bytes of the blocked copies oneDNN makes around a CPU convolution of plain (NCHW) tensors, which the dry
    run never sees: its input reordered to channel blocks of ``block`` (the channels rounded up to it; none where
    the input has fewer channels than a block, which oneDNN reads as it is) and its output computed in blocks,
    then copied into the tensor the op returns. None where ``block`` is 0 (no oneDNN here, or not measured), for
    anything but a convolution, or where PyTorch takes its own kernel instead (a 1x1 convolution of stride 1
    on a batch under 16 in one thread). ``itemsize``: bytes an element.

    They are fresh memory each call, like an output: at or above the allocator's limit they fault in full.
    Counted on this 2-core AVX-512 machine (minor faults x 4 KiB, fp32, one call in a loop): a 3x3 depthwise
    convolution of ``(8, 192, 75, 75)`` faulted 103.7 MB a call, its output and both copies at 34.56 MB each;
    of ``(8, 24, 400, 400)`` to 16 channels 163.8 MB, its input's copy at 32 channels; of ``(8, 12, 400, 400)``
    nothing. Worked example: ``(8, 40, 150, 150)`` depthwise, block 16: ``8 x 48 x 150 x 150 x 4`` = 34.56 MB
    each way."""
    if block <= 0 or packet_name(op) not in CONV_NAMES or len(input_shapes) < 2 or not output_shapes:
        return []
    x, w, y = input_shapes[0], input_shapes[1], output_shapes[0]
    if len(x) < 3 or len(w) < 3 or len(x) != len(y):
        return []
    if threads == 1 and math.prod(w[2:]) == 1 and x[0] < 16 and tuple(x[2:]) == tuple(y[2:]):
        return []  # PyTorch's own 1x1 kernel

    def blocked(shape: Sequence[int]) -> float:
        return float(shape[0] * -(-shape[1] // block) * block * math.prod(shape[2:])) * itemsize

    return [blocked(x)] * (x[1] >= block) + [blocked(y)]


def fresh_bytes(op: Any, limit: float = 0.0) -> float:
    """Bytes a recorded call writes into memory of its own (:func:`fresh_outputs`), counting only outputs of
    at least ``limit`` bytes."""
    return float(sum(size for size in fresh_outputs(op) if size >= limit))


#: The smallest fresh output that may fault in a model's forward (:attr:`FirstTouch.share_below`): smaller blocks
#: came back from the allocator's free lists in every forward measured here (resnet50 and efficientnet_b2 at
#: batch 8 on this 2-core machine: no fault in an output under 2 MiB).
FAULT_MIN_BYTES = float(2**20)


@dataclass(frozen=True)
class FirstTouch(Record):
    """What a fresh output costs where the allocator hands out new pages: an output of at least
    ``limit_bytes`` (glibc's largest mmap threshold, 32 MiB on 64-bit Linux) is mapped when allocated and
    unmapped when freed, so each of its pages faults on first touch, ``per_byte_s`` per byte, in a model's
    forward and in a loop alike. Both are measured on this machine
    (:func:`graphprof.calibrate.bench.measure_first_touch`); below the limit, a loop re-uses its freed block.

    A model's forward is not a loop: the allocator trims its heap and gives smaller blocks back too, and a
    share of the bytes of its outputs between :data:`FAULT_MIN_BYTES` and the limit faults afresh each forward
    (``share_below``: the calibration's sample models' faulted bytes over those outputs' bytes, measured in
    their plain forwards, :func:`graphprof.calibrate.samples.fault_split`).

    The heap gives pages back only when the free block at its top outgrows glibc's *trim threshold* (twice the
    mmap threshold: 64 MiB once raised to its ceiling), so a forward whose live activations never swing that far
    re-uses its heap and faults nothing below the limit. ``trim_peak_bytes`` is where this machine's forwards
    start to: the dry run's peak of live activation bytes (:attr:`graphprof.profile.Profile.peak_activation_bytes`)
    from which the sample models' fresh processes faulted, fitted with the share by
    :func:`graphprof.calibrate.preset.faulting_share`. A forward with a lower peak pays no ``share_below``
    (:meth:`for_forward`). Measured on this 2-core machine, fresh processes at batch 8: squeezenet1_1 (peak 48.6
    MB), shufflenet_v2_x1_0 (24 MB) and regnet_x_400mf (34 MB) faulted nothing, resnet34 (56 MB) 24% and
    densenet121 (72 MB) 16% of those bytes; every model at batch 1 nothing.

    That share and peak are the calibration's law for every model. A prediction from a dry run replaces both by the
    forward's own: glibc's heap replayed over its allocation order
    (:func:`graphprof.devices.heapreplay.forward_touch`); the law stands where the order is not known.

    Worked example: 0.27 ms per MB above 32 MiB, a GELU writing 38.5 MB pays ``0.27e-3 * 38.5 = 10.4 ms``
    besides its own 2 ms of streaming; with ``share_below`` 0.1, a convolution writing 25.7 MB pays
    ``0.27e-3 * 0.1 * 25.7 = 0.69 ms`` in a forward whose peak reaches ``trim_peak_bytes``, nothing in one
    whose peak stays under it.
    """

    limit_bytes: float
    per_byte_s: float
    share_below: float = 0.0
    min_bytes: float = FAULT_MIN_BYTES
    trim_peak_bytes: float = 0.0
    #: oneDNN's channel block here (16 with AVX-512, 8 with AVX2; 0: no copies priced) and the threads the
    #: calibration ran: what a convolution's unseen copies come to (:func:`conv_scratch`)
    conv_block: int = 0
    threads: int = 0

    def for_forward(self, peak_bytes: float | None) -> FirstTouch:
        """The term for a forward whose dry run peaked at ``peak_bytes`` of live activations: without the share
        below the limit where the peak stays under :attr:`trim_peak_bytes` (the heap never trims); as it is
        where the peak is not known (``None``)."""
        if peak_bytes is None or peak_bytes >= self.trim_peak_bytes or self.share_below == 0.0:
            return self
        return replace(self, share_below=0.0)

    def fresh(self, op: Any) -> list[float]:
        """Bytes of each block of fresh memory one recorded call writes: its outputs (:func:`fresh_outputs`) and a
        convolution's blocked copies (:func:`conv_scratch`)."""
        outputs = fresh_outputs(op)
        if self.conv_block <= 0 or packet_name(op.op) not in CONV_NAMES:
            return outputs
        elements = math.prod(op.output_shapes[0]) if outputs and op.output_shapes else 0
        if elements <= 0:
            return outputs
        return outputs + conv_scratch(op.op, op.input_shapes, op.output_shapes, sum(outputs) / elements, self.conv_block, self.threads)

    def split(self, sizes: Iterable[float]) -> tuple[float, float]:
        """Bytes of fresh blocks of these sizes at or above the limit, and between :attr:`min_bytes` and the limit."""
        above = between = 0.0
        for size in sizes:
            if size >= self.limit_bytes:
                above += size
            elif size >= self.min_bytes:
                between += size
        return above, between

    def of_outputs(self, sizes: Iterable[float]) -> float:
        """The first-touch time of fresh outputs of these sizes (bytes)."""
        above, between = self.split(sizes)
        return self.per_byte_s * (above + self.share_below * between)

    def seconds(self, op: Any) -> float:
        """The first-touch time of one recorded call's fresh memory (:meth:`fresh`)."""
        return self.of_outputs(self.fresh(op)) if op.op.startswith("aten.") else 0.0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FirstTouch:
        return cls(float(data["limit_bytes"]), float(data["per_byte_s"]), float(data.get("share_below", 0.0)),
                   float(data.get("min_bytes", FAULT_MIN_BYTES)), float(data.get("trim_peak_bytes", 0.0)),
                   int(data.get("conv_block", 0)), int(data.get("threads", 0)))  # fmt: skip

"""A kernel model for a GPU that has no measured table: its datasheet, with the measured table's efficiencies.

Only the H100 ships a table measured on the device (``calibration/h100.json``). Its class rates are
*shares* of the device's own peak and bandwidth (a bf16 matrix product reaches 0.865 of the peak; an
element-wise kernel streams at 1.10 x the nominal bandwidth on its cache curve), plus fixed latencies per
kernel and the host's cost per eager launch. :func:`kernel_table` carries those shares over to another
GPU preset: the same shares of *its* datasheet peaks and bandwidth, the streaming curve scaled by the
ratio of the bandwidths, the same latencies and host costs (the host is the same CPU and driver). It is
an assumption, and every result that uses it says so (:func:`kernel_table`'s note).

Worked example: an A100's bf16 matrix product of 1 TFLOP is priced at ``1e12 / (312e12 x 0.865) = 3.7 ms``.
"""

from __future__ import annotations

from dataclasses import replace

from graphprof.devices.hardware import HARDWARE, Hardware
from graphprof.devices.table import Calibration, MemoryCurve
from graphprof.errors import InvalidInputError

__all__ = ["MEASURED_REFERENCE", "kernel_table"]

#: The preset whose measured table lends its efficiencies to presets without one.
MEASURED_REFERENCE = "h100"


def _derived(reference: Calibration, source: Hardware, target: Hardware) -> Calibration:
    ratio = target.bandwidth_gbs / source.bandwidth_gbs
    memory = reference.memory
    curve = None if memory is None else MemoryCurve(memory.near_gbs * ratio, memory.far_gbs * ratio, memory.cache_bytes)
    return replace(
        reference, preset=target.name, bandwidth_gbs=target.bandwidth_gbs, memory=curve, op_model=None,
        source=f"derived: {target.name}'s datasheet peaks and bandwidth x the efficiencies measured on {source.name} ({reference.source})",
    )  # fmt: skip


def kernel_table(hardware: Hardware) -> tuple[Calibration, str | None]:
    """The kernel table that prices ops on ``hardware`` and a note where it is not measured on that device.

    ``hardware``'s own table when it has one (a shipped preset table or a ``local`` calibration), else the
    derived one above (GPUs only)."""
    if hardware.calibration is not None:
        return hardware.calibration, None
    if not hardware.is_gpu and not hardware.label.startswith("AMD"):
        raise InvalidInputError(f"{hardware.name}: a training step's time is priced for GPUs; this preset has no kernel table")
    source = HARDWARE[MEASURED_REFERENCE]
    reference = source.calibration
    if reference is None:  # pragma: no cover - the package ships the table
        raise InvalidInputError(f"the measured {MEASURED_REFERENCE} kernel table is missing from the installed package")
    note = (
        f"kernel model of {hardware.name}: derived from its datasheet (peaks, {hardware.bandwidth_gbs:,.0f} GB/s) and the "
        f"efficiencies measured on an {MEASURED_REFERENCE.upper()}; no table measured on {hardware.name} itself"
    )
    return _derived(reference, source, hardware), note

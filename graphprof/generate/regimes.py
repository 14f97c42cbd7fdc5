"""Decode in two regimes: eager (a host launch per kernel) and compiled (``torch.compile`` with CUDA graphs).

A decode step of a 7-8B model at batch 1 is some 300 small kernels: eager, the host's launches (the
kernel table's ``host_per_kernel_s`` each) outlast most of them, and the step is host-bound. Compiled with
``mode="reduce-overhead"`` (gpt-fast's and torchao's decode benchmarks), the step is one CUDA graph: no
launch cost on the host, and Inductor fuses each chain of element-wise, norm and reduction calls into one
kernel (:func:`graphprof.cost.fusion.fold_chains`, the same rule the training step's ``--compile``
uses). What is left is the kernels back to back, each priced by the device's kernel table
(:func:`graphprof.devices.predict.kernel_seconds`; a preset without a measured table borrows the H100's
efficiencies, :func:`graphprof.devices.derived.kernel_table`): at batch 1 the matrix products stream their
weights, so the step is the weights' bytes over the table's measured streaming rate, plus each kernel's
fixed latency.

The mean step over a run is the mean of the first and last steps' times: a step's cost is affine in the
context (:mod:`graphprof.generate.growth` checks it), and so, very nearly, is its time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from graphprof.base.choices import OpStatus
from graphprof.cost.fusion import fold_chains
from graphprof.cost.result import OpRecord, Profile
from graphprof.devices.derived import kernel_table
from graphprof.devices.hardware import Hardware
from graphprof.devices.predict import host_seconds, kernel_seconds, timeline
from graphprof.errors import InvalidInputError

__all__ = ["DecodeRegimes", "RegimeTime", "forward_seconds", "decode_regimes"]


@dataclass(frozen=True)
class RegimeTime:
    """One regime: the mean decode step (``None`` without a decode step), the prefill, kernels in one step."""

    tpot_s: float | None
    ttft_s: float
    kernels_per_step: int


@dataclass(frozen=True)
class DecodeRegimes:
    """Decode eager and compiled; ``regime``: the one :attr:`GenerationProfile.predicted
    <graphprof.generate.result.GenerationProfile.predicted>` reports; ``kernel_model``: the table that priced them.
    Plain fields all the way down: its JSON is ``dataclasses.asdict``."""

    regime: str
    eager: RegimeTime
    compiled: RegimeTime
    kernel_model: str


def _forward_records(profile: Profile) -> list[OpRecord]:
    return [op for _, op in profile.iter_ops()]


def _is_kernel(r: OpRecord) -> bool:
    return r.status is OpStatus.COUNTED and (r.op.startswith("aten.") or r.op.startswith("fsdp."))


def forward_seconds(profile: Profile, hardware: Hardware, compiled: bool) -> tuple[float, int]:
    """One forward's time on ``hardware`` and its kernel count: eager, every call's host launch and kernel on
    :func:`~graphprof.devices.predict.timeline`; compiled, the fused kernels' times summed (no host)."""
    table, _ = kernel_table(hardware)
    records: Sequence[OpRecord] = _forward_records(profile)
    if compiled:
        kernels = [kernel_seconds(r, profile.dtype, hardware, table) for r in fold_chains(records) if _is_kernel(r)]
        return sum(kernels), len(kernels)
    demands = [(host_seconds(r, table), kernel_seconds(r, profile.dtype, hardware, table) if _is_kernel(r) else 0.0) for r in records]
    return sum(timeline(demands, table.overlap)), sum(1 for r in records if _is_kernel(r))


def decode_regimes(
    prefill: Profile, steps: tuple[Profile, Profile] | None, hardware: Hardware | None, compiled: bool
) -> DecodeRegimes | None:
    """Both regimes for a run whose first and last decode steps are ``steps`` (``None``: no decode step);
    ``None`` without a device."""
    if hardware is None:
        return None
    try:
        table, _ = kernel_table(hardware)
    except InvalidInputError:
        return None
    eager_ttft, _ = forward_seconds(prefill, hardware, compiled=False)
    compiled_ttft, _ = forward_seconds(prefill, hardware, compiled=True)
    eager, compiled_step = RegimeTime(None, eager_ttft, 0), RegimeTime(None, compiled_ttft, 0)
    if steps is not None:
        (e0, kernels_eager), (e1, _) = (forward_seconds(p, hardware, compiled=False) for p in steps)
        (c0, kernels_compiled), (c1, _) = (forward_seconds(p, hardware, compiled=True) for p in steps)
        eager, compiled_step = (
            RegimeTime((e0 + e1) / 2, eager_ttft, kernels_eager),
            RegimeTime((c0 + c1) / 2, compiled_ttft, kernels_compiled),
        )
    return DecodeRegimes("compiled" if compiled else "eager", eager, compiled_step, table.source)

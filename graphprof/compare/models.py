"""Models side by side (seed 002's model selection): each profile reduced to one :class:`ComparisonRow`,
classified against the same device. The renderers are :mod:`graphprof.render.compare`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from graphprof.base.inputs import format_inputs
from graphprof.cost.bounds import Bound
from graphprof.cost.result import Profile
from graphprof.cost.roofline import classify
from graphprof.devices.hardware import Hardware

__all__ = ["COMPARISON_COLUMNS", "ModelFailure", "ComparisonRow", "comparison_rows"]


COMPARISON_COLUMNS = (
    "model", "family", "input", "dtype", "capture_method", "params", "macs", "flops", "memory",
    "weight_bytes", "arithmetic_intensity", "compute_bound_share", "estimated_time_s", "error",
)  # fmt: skip


@dataclass(frozen=True)
class ModelFailure:
    """A model that could not be profiled: its name, the one-line error and the exit code it maps to."""

    model: str
    error: str
    exit_code: int = 1


@dataclass(frozen=True)
class ComparisonRow:
    """One model reduced to the figures a comparison shows (``error`` set, and the rest empty, on failure)."""

    model: str
    family: str | None = None
    input: str | None = None
    dtype: str | None = None
    capture_method: str | None = None
    params: int | None = None
    macs: int | None = None
    flops: int | None = None
    memory: int | None = None
    weight_bytes: int | None = None
    arithmetic_intensity: float | None = None
    compute_bound_share: float | None = None
    estimated_time_s: float | None = None
    error: str | None = None


def comparison_rows(entries: Sequence[Profile | ModelFailure], hardware: Hardware | None = None) -> list[ComparisonRow]:
    """One row per entry, in order; each profile classified against ``hardware`` (or the fixed threshold).

    ``compute_bound_share`` is the share of the model's FLOPs done by compute-bound layers.
    """
    rows = []
    for entry in entries:
        if isinstance(entry, ModelFailure):
            rows.append(ComparisonRow(model=entry.model, error=entry.error))
            continue
        roofline = classify(entry, hardware)
        rows.append(
            ComparisonRow(
                model=entry.model_name,
                family=entry.family,
                input=format_inputs(entry.inputs),
                dtype=entry.dtype,
                capture_method=entry.capture_method,
                params=entry.total_params,
                macs=entry.total_macs,
                flops=entry.total_flops,
                memory=entry.total_bytes,
                weight_bytes=entry.param_bytes,
                arithmetic_intensity=entry.arithmetic_intensity,
                compute_bound_share=roofline.flops_share(Bound.COMPUTE),
                estimated_time_s=roofline.seconds,
            )
        )
    return rows

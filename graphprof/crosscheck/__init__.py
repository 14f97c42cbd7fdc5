"""Cross-check graphprof's counts against the counters users know: fvcore, or torch's FlopCounterMode.

Like for like: graphprof's per-op records are mapped onto the reference's convention
(:mod:`~graphprof.crosscheck.conventions`: fvcore counts one multiply-accumulate as one "flop" and adds
its own per-element counts for batch / group / layer norm, upsampling, adaptive average pooling and grid
sampling; FlopCounterMode counts contractions only, 2 FLOPs per MAC), the reference runs on the same
model object and input (:mod:`~graphprof.crosscheck.references`), and the two are compared per group of
ops (:mod:`~graphprof.crosscheck.compare`). Every difference is named: ops the reference saw and left
uncounted (fused attention, ``padding="same"`` convolutions...) are measured and *explain* their share;
what remains is *unexplained*, group by group.

>>> from graphprof.crosscheck import crosscheck_model
>>> c = crosscheck_model("vit_b_16", input_shape=(1, 3, 224, 224))
>>> c.status(tolerance=1.0).value, [e.name for e in c.explanations()]
('explained', ['aten::scaled_dot_product_attention'])

fvcore is imported lazily, by :func:`~graphprof.crosscheck.references.count_with_fvcore` only; without it
that reference raises :class:`~graphprof.errors.MissingDependencyError`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from graphprof.crosscheck.conventions import CONVENTIONS, FVCORE, LEFT_OUT, TORCH, Convention
from graphprof.crosscheck.references import ReferenceCounts, ReferenceFailedError, count_with_fvcore, count_with_torch
from graphprof.crosscheck.render import (
    describe,
    render_comparison,
    render_csv,
    render_details,
    render_groups,
    render_json,
    render_markdown,
    summarize,
)
from graphprof.crosscheck.result import CrossCheck, Explanation, GroupComparison, OpCount, Status
from graphprof.crosscheck.run import (
    DEFAULT_MODEL,
    DEFAULT_TOLERANCE,
    Reference,
    crosscheck_model,
    crosscheck_models,
    iter_crosschecks,
    select_models,
)

__all__ = [
    "crosscheck_model",
    "crosscheck_models",
    "iter_crosschecks",
    "select_models",
    "Reference",
    "DEFAULT_MODEL",
    "DEFAULT_TOLERANCE",
    "CrossCheck",
    "GroupComparison",
    "Explanation",
    "OpCount",
    "Status",
    "Convention",
    "FVCORE",
    "TORCH",
    "CONVENTIONS",
    "LEFT_OUT",
    "ReferenceCounts",
    "ReferenceFailedError",
    "count_with_fvcore",
    "count_with_torch",
    "summarize",
    "describe",
    "render_comparison",
    "render_groups",
    "render_details",
    "render_json",
    "render_csv",
    "render_markdown",
    "write_crosschecks",
]


def write_crosschecks(results: Sequence[CrossCheck], path: str | os.PathLike[str], *, tolerance: float, fmt: str | None = None) -> Path:
    """Write the comparison to ``path`` as JSON or CSV (from ``fmt`` or the suffix), atomically, through
    :func:`graphprof.render.sink.write_result` (the JSON with ``timestamp`` and ``host``)."""
    from graphprof.render.sink import CrossCheckResult, write_result

    return write_result(CrossCheckResult(tuple(results), tolerance), path, fmt)

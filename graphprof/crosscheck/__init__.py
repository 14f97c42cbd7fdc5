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
that reference raises :class:`~graphprof.errors.MissingDependencyError`. Its renderings (tables, JSON, CSV,
Markdown) are :mod:`graphprof.render.crosscheck`.
"""

from __future__ import annotations

from graphprof.base.choices import Reference
from graphprof.crosscheck.conventions import CONVENTIONS, FVCORE, LEFT_OUT, TORCH, Convention
from graphprof.crosscheck.references import ReferenceCounts, count_with_fvcore, count_with_torch
from graphprof.crosscheck.result import CrossCheck, Explanation, GroupComparison, OpCount, Status
from graphprof.crosscheck.run import DEFAULT_MODEL, DEFAULT_TOLERANCE, crosscheck_model, crosscheck_models, iter_crosschecks, select_models
from graphprof.errors import ReferenceFailedError

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
]

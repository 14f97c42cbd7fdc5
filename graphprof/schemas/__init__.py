"""JSON Schemas of every JSON file graphprof writes, one per kind, versioned with ``schema_version``.

Every JSON file names its ``kind`` and its ``schema_version``; the schema that describes it is
``graphprof/schemas/<kind>.schema.json`` (JSON Schema draft 2020-12), installed with the package:

==================  ===================================================================
kind                written by
==================  ===================================================================
``profile``         ``graphprof --model X --output f.json`` (:func:`graphprof.profile_model`)
``compare``         ``graphprof compare A B --output f.json``
``sweep``           ``graphprof sweep ... --output f.json``
``validate``        ``graphprof validate --output f.json``
``generate``        ``graphprof generate --model hf:X --output f.json``
``partition``       ``graphprof partition ... --output f.json``
``graph``           ``graphprof --model X --graph g.json``
``graph-scaling``   ``graphprof sweep pyg:X --nodes ... --output f.json``
``graph-estimate``  ``graphprof graph-estimate ... --output f.json``
``calibrate``       ``graphprof calibrate`` (the ``local.json`` preset)
``shard``           ``graphprof shard --model X fsdp:64 --output f.json`` (``tp:8``, ``fsdp:8,tp:8``)
``fits``            ``graphprof fits --model X --output f.json``, ``graphprof shard ... --fits``
``fits-ranks``      ``graphprof shard --model X fsdp:auto --fits --hardware h100 --output f.json``
``seed002-profile`` seed 002's script, ``python3 cli/profile_graph.py --model X --output f.json``
``seed004-profile`` seed 004's script, ``python cli/profile_model.py ... --output f.json``
==================  ===================================================================

A version changes when a field is removed or changes meaning (the major number) or is added (the
minor number). :func:`validate` checks a document with ``jsonschema`` (imported on use).

>>> from graphprof.schemas import schema, SCHEMA_VERSIONS
>>> schema("profile")["properties"]["kind"]["const"], SCHEMA_VERSIONS["profile"]
('profile', '2.5')
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from graphprof.errors import InvalidInputError, MissingDependencyError

__all__ = ["KINDS", "SCHEMA_VERSIONS", "schema", "validate", "envelope"]

#: kind -> the version of its layout, written as ``schema_version`` in every file of that kind
SCHEMA_VERSIONS: dict[str, str] = {
    "profile": "2.7",  # 2.7: prediction_breakdown.faults.method (the heap replay or the share law); 2.6: runtime.faults and prediction_breakdown.measured.faults (page faults a plain and a profiled CPU forward), prediction_breakdown.faults (those the prediction prices); 2.5: roofline.prediction_breakdown (the predicted time by op kind and layer); 2.4: fallbacks (the dry run's ladder); 2.3: kind, executed/useful FLOPs, saved activations, the peak's layer
    "compare": "2.3",
    "sweep": "1.1",
    "validate": "1.1",
    "generate": "1.3",  # 1.3: regimes (decode eager and compiled); 1.2: per_token (model FLOPs per token of the prefill)
    "partition": "1.1",
    "graph": "1.1",
    "graph-scaling": "1.1",
    "graph-estimate": "1.1",
    "calibrate": "1.2",  # 1.2: ops timed in place: smearing per kind, first_touch, held_out_summary, outside_share (first_touch.trim_peak_bytes added since, optional: older files still read)
    "shard": "1.4",  # 1.4: step gains adamw, master_dtype, memory_bytes_master (the peak with master-dtype shards); 1.3: step.breakdown gains attention_backward, sm_contention, sustained_clock (estimates); 1.2: step (the step's time, tokens/s per GPU, MFU, HFU, breakdown); 1.1: shard, tensor_parallel, all_reduce_*
    "fits": "1.0",
    "fits-ranks": "1.1",  # 1.1: ranked (the candidates that fit, by tokens/s per GPU)
    "seed002-profile": "1.0",  # the seed's fields (model, total_flops, total_memory, layers) under graphprof's envelope
    "seed004-profile": "1.0",  # the seed's fields (model_info, runtime, memory, flops, scaling) under graphprof's envelope
}
KINDS = tuple(SCHEMA_VERSIONS)


def envelope(kind: str) -> dict[str, str]:
    """``{"kind": kind, "schema_version": ...}``: the first two keys of every JSON file of ``kind``."""
    if kind not in SCHEMA_VERSIONS:
        raise InvalidInputError(f"unknown kind of result {kind!r}: one of {', '.join(KINDS)}")
    return {"kind": kind, "schema_version": SCHEMA_VERSIONS[kind]}


@cache
def schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of ``kind`` (a dict; ``graphprof/schemas/<kind>.schema.json``)."""
    envelope(kind)  # an unknown kind is one line
    text = resources.files(__package__).joinpath(f"{kind}.schema.json").read_text(encoding="utf-8")
    return dict(json.loads(text))


def validate(data: Any, kind: str | None = None) -> None:
    """Check ``data`` (a parsed JSON document) against the schema of its ``kind`` (or the one given);
    raises :class:`~graphprof.errors.InvalidInputError` naming the first place that does not fit."""
    try:
        import jsonschema
    except ImportError as exc:  # pragma: no cover - installed with the test extra
        raise MissingDependencyError("validating a JSON file needs jsonschema: pip install jsonschema") from exc
    chosen = kind or (data.get("kind") if isinstance(data, dict) else None)
    if not isinstance(chosen, str):
        raise InvalidInputError("the document names no kind: pass kind=")
    validator = jsonschema.Draft202012Validator(schema(chosen))
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top)"
        raise InvalidInputError(f"{chosen} JSON does not fit its schema at {where}: {error.message[:200]}")

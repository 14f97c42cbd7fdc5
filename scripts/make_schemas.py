"""Write graphprof/schemas/<kind>.schema.json from sample documents of every kind of JSON graphprof writes.

    python scripts/make_schemas.py            # all kinds
    python scripts/make_schemas.py profile    # one kind

Each schema is inferred (with genson) from a few documents that differ in what they carry (eval and train,
a device or none, measured or not, a failure in a comparison), then stated: ``kind`` and ``schema_version``
are constants, the top-level keys the samples share are required and no other top-level key is allowed, a
field seen as a number and as null is either, counts, sizes and times are never negative, layers and
modules have names, and ``mode`` is ``eval`` or ``train``. Run it when a layout changes, bump :data:`graphprof.schemas.SCHEMA_VERSIONS`, and review the diff:
the schema is what users validate their files against. ``tests/test_schemas.py`` validates the files the
commands write, on other models than these.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from genson import SchemaBuilder
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import graphprof  # noqa: E402
from graphprof.render.sink import ComparisonResult, CrossCheckResult, render_result  # noqa: E402
from graphprof.schemas import SCHEMA_VERSIONS, envelope  # noqa: E402

OUT = ROOT / "graphprof" / "schemas"


def _tiny() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))


def _doc(result: object) -> dict[str, Any]:
    return dict(json.loads(render_result(result, "json")))


def profiles() -> Iterator[dict[str, Any]]:
    h100 = graphprof.get_hardware("h100")
    yield _doc(graphprof.profile_model("resnet18"))
    yield _doc(graphprof.cost.roofline.with_roofline(graphprof.profile_model("hf:llama", mode="train"), h100))
    prepared = graphprof.prepare(_tiny(), input_shape=(2, 3, 16, 16))
    measured = graphprof.cost.roofline.with_roofline(prepared.profile(), h100)
    import dataclasses

    measured = dataclasses.replace(measured, measurement=prepared.measure(device="cpu", iters=3, warmup=1, layer_runs=1))
    yield _doc(measured)


def compares() -> Iterator[dict[str, Any]]:
    from graphprof.compare.models import ModelFailure, comparison_rows

    rows = comparison_rows([graphprof.profile_model("resnet18"), ModelFailure("nope", "unknown model 'nope'", 2)])
    yield _doc(ComparisonResult(tuple(rows), None))
    yield _doc(
        ComparisonResult(
            tuple(comparison_rows([graphprof.profile_model("mobilenet_v2")], graphprof.get_hardware("h100"))),
            graphprof.get_hardware("h100"),
        )
    )


def sweeps() -> Iterator[dict[str, Any]]:
    yield _doc(graphprof.sweep("resnet18", "batch", [1, 2, 4], hardware="h100"))
    yield _doc(graphprof.sweep(_tiny(), "batch", [1, 2], input_shape=(1, 3, 16, 16), measure=True, device="cpu"))


def validates() -> Iterator[dict[str, Any]]:
    yield _doc(CrossCheckResult((graphprof.crosscheck_model("resnet18", against="torch"),), 1.0))
    yield _doc(CrossCheckResult((graphprof.crosscheck_model("vit_b_16", against="fvcore"),), 1.0))


def generates() -> Iterator[dict[str, Any]]:
    yield _doc(graphprof.profile_generation("hf:llama", prompt_len=16, new_tokens=4))
    yield _doc(graphprof.profile_generation("hf:llama", prompt_len=32, new_tokens=8, hardware="h100"))


def partitions() -> Iterator[dict[str, Any]]:
    from graphprof.partition.report import PartitionReport

    yield _doc(PartitionReport(graphprof.partition_model("resnet18", "h100:2")))
    yield _doc(PartitionReport(graphprof.partition_model("hf:llama", "orin-agx:2,rtx4090:1", objective="throughput")))
    yield _doc(PartitionReport(graphprof.partition_model("squeezenet1_0", "cpu:2", iters=2)))  # this machine: no preset


def graphs() -> Iterator[dict[str, Any]]:
    from graphprof.graph.export import to_json

    module_graph, detail = graphprof.graph_model("resnet18", hardware=graphprof.get_hardware("h100"))
    yield dict(json.loads(to_json(module_graph, detail)))
    module_graph, _ = graphprof.graph_model("hf:llama", detail=False)
    yield dict(json.loads(to_json(module_graph, None)))
    yield dict(json.loads(to_json(*graphprof.graph_model("mobilenet_v2"))))


def graph_scalings() -> Iterator[dict[str, Any]]:
    from graphprof.gnn.scaling import run_graph_scaling

    yield _doc(run_graph_scaling("pyg:gin", "num_nodes", [100, 200]))


def graph_estimates() -> Iterator[dict[str, Any]]:
    from graphprof.gnn.compare import compare_graph_model

    yield _doc(compare_graph_model("pyg:gps?num_nodes=200"))


def calibrations() -> Iterator[dict[str, Any]]:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "local.json"
        graphprof.calibrate_device("cpu", output=path, threads=1)
        yield dict(json.loads(path.read_text()))


def shards() -> Iterator[dict[str, Any]]:
    from graphprof.sharding import shard_profile

    yield _doc(shard_profile("hf:llama", "fsdp:8"))
    yield _doc(shard_profile("hf:gpt2", "fsdp:4", dtype="bfloat16", hardware="h100"))
    yield _doc(shard_profile("hf:llama?num_hidden_layers=2", "tp:2"))
    yield _doc(shard_profile("hf:llama?num_hidden_layers=2", "fsdp:2,tp:2", hardware="h100"))
    from graphprof.sharding import StepOptions  # the step priced compiled, with checkpointing, on a derived kernel model

    timing = StepOptions(grad_accum=2, checkpoint="full", gpus_per_node=2, compiled=True)
    yield _doc(shard_profile("hf:llama?num_hidden_layers=2", "fsdp:4", hardware="a100", timing=timing, seq_len=64))
    yield _doc(shard_profile(_tiny(), "fsdp:2", hardware="h100", input_shape=(2, 3, 16, 16)))  # no tokens: no tokens/s, no MFU
    one = StepOptions(adamw="foreach", master_dtype=None)  # one GPU, shards in the compute dtype: no master-dtype peak
    yield _doc(shard_profile("hf:llama?num_hidden_layers=2", "fsdp:1", hardware="h200", timing=one, dtype="bfloat16", seq_len=64))


def fits() -> Iterator[dict[str, Any]]:
    from graphprof.training import plan_memory

    yield _doc(plan_memory("resnet18", batch_size=2))
    yield _doc(plan_memory("hf:llama?num_hidden_layers=2", shard="fsdp:2,tp:2", hardware="h100", dtype="bfloat16"))
    yield _doc(plan_memory("mobilenet_v2", batch_size=8, hardware="h100", memory_budget="150MB"))
    yield _doc(plan_memory("mobilenet_v2", batch_size=8, hardware="desktop-cpu", memory_budget="150MB"))  # measured on the CPU


def fits_ranks() -> Iterator[dict[str, Any]]:
    from graphprof.training import plan_ranks

    yield _doc(plan_ranks("hf:llama?num_hidden_layers=2", "h100"))


SAMPLES: dict[str, Callable[[], Iterator[dict[str, Any]]]] = {
    "profile": profiles, "compare": compares, "sweep": sweeps, "validate": validates, "generate": generates,
    "partition": partitions, "graph": graphs, "graph-scaling": graph_scalings, "graph-estimate": graph_estimates,
    "calibrate": calibrations, "shard": shards, "fits": fits, "fits-ranks": fits_ranks,
}  # fmt: skip


def _nested_required_dropped(node: Any, depth: int = 0) -> Any:
    """Keep ``required`` at the top level only: nested records carry maps (versions, timings, categories)
    whose keys vary from one model to another."""
    if isinstance(node, dict):
        return {k: _nested_required_dropped(v, depth + 1) for k, v in node.items() if not (k == "required" and depth > 0)}
    if isinstance(node, list):
        return [_nested_required_dropped(v, depth + 1) for v in node]
    return node


#: Counts, sizes and times: never negative, whatever the samples held.
_NON_NEGATIVE = ("macs", "flops", "bytes", "params", "calls", "count", "tokens", "nodes", "edges", "runs", "_s", "_us", "_ms", "seconds")
#: Fields (and what they hold) that may be negative.
_SIGNED = re.compile(r"differ|delta|error|adjust|residual|overhead|change|signed|ratio")
#: Top-level fields a document may carry that the samples do not (each a JSON object when present).
_OPTIONAL = {"profile": ("crosscheck",)}


def _tighten(node: Any, name: str = "") -> Any:
    """What a valid document is, beyond the samples' shapes: counts and sizes are not negative, a layer and
    a module have names, ``mode`` is ``eval`` or ``train``."""
    if isinstance(node, list):
        return [_tighten(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: (_tighten(v, k) if k in ("items", "anyOf") else v) for k, v in node.items()}
    if "properties" in out:  # a difference, an error or an adjustment may be negative: left as inferred
        out["properties"] = {k: v if _SIGNED.search(k) else _tighten(v, k) for k, v in out["properties"].items()}
    types = out.get("type")
    numeric = types in ("integer", "number") or (isinstance(types, list) and {"integer", "number"} & set(types))
    if numeric and any(part in name.lower() for part in _NON_NEGATIVE) and "minimum" not in out:
        out["minimum"] = 0
    if name == "mode" and out.get("type") == "string":
        out = {"enum": ["eval", "train"]}
    if name in ("layers", "modules") and isinstance(out.get("items"), dict) and "properties" in out["items"]:
        key = "name" if "name" in out["items"]["properties"] else "path" if "path" in out["items"]["properties"] else None
        if key is not None:
            out["items"]["required"] = sorted(set(out["items"].get("required", [])) | {key})
    return out


#: Calibration numbers: no count, size or rate reaches 10**18; a time is from 0 to an hour; a peak or a
#: bandwidth is positive and under 10**7 (TFLOP/s, GB/s); the op model's fits work in log space, so none of
#: their numbers reaches 10**3. A damaged ``local.json`` (1e308 for a peak) fails its schema when read.
_CALIBRATION_NUMBER = {"minimum": -1e18, "maximum": 1e18}
_SECONDS = {"minimum": 0, "maximum": 3600}
_POSITIVE_RATE = {"exclusiveMinimum": 0, "maximum": 1e7}
_LOG_SPACE = {"minimum": -1e3, "maximum": 1e3}
#: ``learned``: the records a ``--measure`` run adds (``[kind, [features], seconds, source, group]``); their
#: seconds are checked one by one when read (a damaged one is left out with a note, not the file refused).
_LEARNED = {
    "type": "array",
    "items": {
        "type": "array", "minItems": 5, "maxItems": 5,
        "prefixItems": [{"type": "string"}, {"type": "array", "items": {"type": "number"}}, {"type": "number"}, {"type": "string"}, {"type": "string"}],
    },
}  # fmt: skip


def _bounded(node: Any, name: str = "", bounds: dict[str, float] | None = None) -> Any:
    """Every number under ``node`` with its range (see :data:`_CALIBRATION_NUMBER`), by its field's name."""
    if isinstance(node, list):
        return [_bounded(v, name, bounds) for v in node]
    if not isinstance(node, dict):
        return node
    bounds = _LOG_SPACE if name == "kinds" else _POSITIVE_RATE if name == "peak_tflops" else bounds
    out = {k: _bounded(v, name, bounds) if k in ("items", "additionalProperties") else v for k, v in node.items()}
    if "properties" in out:
        out["properties"] = {k: _bounded(v, k, bounds) for k, v in out["properties"].items()}
    types = out.get("type")
    if types in ("integer", "number") or (isinstance(types, list) and {"integer", "number"} & set(types)):
        rule = _SECONDS if name.endswith("_s") else _POSITIVE_RATE if name.endswith(("_gbs", "tflops")) else bounds or _CALIBRATION_NUMBER
        out = {**{k: v for k, v in out.items() if k not in ("minimum", "maximum", "exclusiveMinimum")}, **rule}
    return out


def _nullable_numbers(node: Any) -> Any:
    """``node`` with every number under it allowed to be null (a figure a calibration may not have measured)."""
    if isinstance(node, list):
        return [_nullable_numbers(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _nullable_numbers(v) if k in ("items", "additionalProperties", "properties") else v for k, v in node.items()}
    if "properties" in node:
        out["properties"] = {k: _nullable_numbers(v) for k, v in node["properties"].items()}
    if out.get("type") in ("integer", "number"):
        out["type"] = [out["type"], "null"]
    return out


def _calibration(body: dict[str, Any]) -> dict[str, Any]:
    """The calibration's maps keyed by what this machine measured (dtypes, op classes, op kinds) take any key
    with the samples' record, every number is bounded (:func:`_bounded`), and ``learned`` is described."""
    props = body["properties"]
    hardware, calibration = props["hardware"]["properties"], props["calibration"]["properties"]
    hardware["peak_tflops"]["additionalProperties"] = {"type": "number"}
    rates = calibration["rates"]
    table = next(iter(rates["properties"].values()))
    rates["additionalProperties"] = {"type": "object", "additionalProperties": next(iter(table["properties"].values()))}
    kinds = calibration["op_model"]["properties"]["kinds"]
    kinds["additionalProperties"] = next(iter(kinds["properties"].values()))
    for nullable in (
        calibration["memory"],
        calibration["op_model"]["properties"]["model_q"],
        calibration["op_model"]["properties"]["first_touch"],
    ):
        nullable["type"] = [nullable["type"], "null"]  # not measured on every machine
    hardware.setdefault("memory_gb", {"type": ["number", "null"]})
    for part in (calibration, calibration["op_model"]["properties"]):  # the fits' accuracy: diagnostics, some not measured
        part["accuracy"] = _nullable_numbers(part["accuracy"])
    props["learned"] = _LEARNED
    return _bounded(body)


def _shard(body: dict[str, Any]) -> dict[str, Any]:
    """The ``step`` object (the step's time, :class:`graphprof.sharding.StepTime`), where present, has every key
    the samples' have, its breakdown its five parts, and none of its numbers (times, rates, shares) is negative."""
    for option in body["properties"]["step"].get("anyOf", []):
        if option.get("type") == "object":
            option["required"] = sorted(option["properties"])
            breakdown = option["properties"]["breakdown"]
            breakdown["required"] = sorted(breakdown["properties"])
            for record in (option, breakdown):
                for field in record["properties"].values():
                    types = field.get("type")
                    if types in ("number", "integer") or (isinstance(types, list) and {"number", "integer"} & set(types)):
                        field["minimum"] = 0
    return body


def make(kind: str) -> dict[str, Any]:
    builder = SchemaBuilder(schema_uri="https://json-schema.org/draft/2020-12/schema")
    for doc in SAMPLES[kind]():
        assert {k: doc[k] for k in ("kind", "schema_version")} == envelope(kind), (kind, doc.get("kind"))
        builder.add_object(doc)
    inferred = builder.to_schema()
    required = inferred.get("required", [])
    body = _nested_required_dropped({k: v for k, v in inferred.items() if k not in ("$schema", "required")})
    body = _tighten(body)
    body["properties"]["kind"] = {"const": kind}
    body["properties"]["schema_version"] = {"const": SCHEMA_VERSIONS[kind]}
    for optional in _OPTIONAL.get(kind, ()):
        body["properties"].setdefault(optional, {"type": "object"})
    if kind == "shard":
        body = _shard(body)
    if kind == "calibrate":
        body = _calibration(body)
        required = [k for k in required if k != "table"]  # written by `graphprof calibrate`, not by every preset
    body["additionalProperties"] = False  # a field graphprof does not write is not part of a valid document
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://graphprof.dev/schemas/{kind}-{SCHEMA_VERSIONS[kind]}.schema.json",
        "title": f"graphprof {kind} JSON, schema_version {SCHEMA_VERSIONS[kind]}",
        **body,
        "required": sorted(set(required) | {"kind", "schema_version"}),
    }


def main(kinds: list[str]) -> None:
    torch.manual_seed(0)
    for kind in kinds or list(SAMPLES):
        schema = make(kind)
        (OUT / f"{kind}.schema.json").write_text(json.dumps(schema, indent=1, sort_keys=False) + "\n")
        print(f"wrote {kind}.schema.json ({len(schema['properties'])} top-level fields, {len(schema['required'])} required)")


if __name__ == "__main__":
    main(sys.argv[1:])

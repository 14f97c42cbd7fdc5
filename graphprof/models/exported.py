"""``--model program.pt2``: a ``torch.export`` program, loaded without running code from the file.

``torch.export.load`` reads the graph from JSON and the weights as raw bytes, but it also unpickles in
three places a crafted file controls: a weight or constant marked ``use_pickle`` (``torch.load(weights_only=
False)``), a custom or opaque object constant (``pickle.loads``), and the sample inputs, for which a failed
``weights_only=True`` load falls back to ``weights_only=False``. Before loading, :func:`check_pt2` reads
the archive's JSON configs and refuses any of the first two, and lists the globals every pickled member
names without unpickling it (``torch.serialization.get_unsafe_globals_in_checkpoint``), refusing any
(:class:`~graphprof.errors.UnsafeLoadError`); ``allow_unsafe_load=True`` skips the checks.

The program is profiled as ``torch.export.unflatten(ep)``: the module hierarchy of the exported model is
restored (from each node's ``nn_module_stack``), so rows carry the original module paths
(``layer1.0.conv1``); inputs are the program's saved example inputs, else meta tensors of its input shapes.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from graphprof.errors import InvalidInputError, ModelBuildError, ModelNotFoundError, UnsafeLoadError
from graphprof.inputs import resize_inputs
from graphprof.models.base import ResolvedModel
from graphprof.models.family import Family, Request, Source
from graphprof.models.trust import ALLOW_HINT

__all__ = ["FAMILY", "SOURCE", "SUFFIX", "check_pt2", "resolve_pt2"]

SUFFIX = ".pt2"
_UNPICKLED_PREFIXES = ("custom_obj_", "opaque_obj_")


def _config_problems(name: str, data: bytes) -> list[str]:
    try:
        config = json.loads(data).get("config", {})
    except (ValueError, AttributeError):
        return [f"{name} is not a JSON config"]
    problems = []
    for fqn, meta in config.items():
        if not isinstance(meta, dict):
            problems.append(f"{name}: {fqn} has no payload description")
        elif meta.get("use_pickle") or str(meta.get("path_name", "")).startswith(_UNPICKLED_PREFIXES):
            problems.append(f"{fqn} is stored as a pickle")
    return problems


def _pickle_problems(name: str, data: bytes) -> list[str]:
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data))
    except Exception:  # not a torch.save archive: nothing torch.export.load would unpickle as one
        return []
    return [f"{name} names {', '.join(names[:3])}"] if names else []


def check_pt2(path: Path, spec: str) -> None:
    """Refuse a ``.pt2`` whose loading would unpickle anything beyond plain tensors (see the module docstring)."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ModelBuildError(f"{spec} is not a torch.export archive: {exc}") from exc
    problems: list[str] = []
    with archive:
        for name in archive.namelist():
            if name.endswith(("_weights_config.json", "_constants_config.json")):
                problems += _config_problems(name, archive.read(name))
            elif name.endswith((".pt", ".pkl")) or "/sample_inputs/" in name:
                problems += _pickle_problems(name, archive.read(name))
    if problems:
        raise UnsafeLoadError(f"{spec}: loading it would unpickle code ({'; '.join(problems[:3])}); {ALLOW_HINT}")


def _placeholder_inputs(ep: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Meta tensors shaped as the program's user inputs, where it saved no example inputs."""
    names = set(ep.graph_signature.user_inputs)
    values = []
    for node in ep.graph.nodes:
        if node.op == "placeholder" and node.name in names:
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor):
                raise InvalidInputError(f"input {node.name} of the program is not a tensor; pass example inputs")
            values.append(torch.empty(tuple(int(s) for s in val.shape), dtype=val.dtype, device="meta"))
    return tuple(values), {}


def resolve_pt2(
    spec: str,
    *,
    input_shape: Sequence[int] | None,
    batch_size: int | None,
    device: torch.device,
    allow_unsafe_load: bool = False,
) -> ResolvedModel:
    """Load ``spec`` (a ``.pt2`` path) as an unflattened module with its example inputs."""
    path = Path(spec).expanduser()
    if not path.is_file():
        raise ModelNotFoundError(f"no file {path}")
    if not allow_unsafe_load:
        check_pt2(path, spec)
    try:
        ep = torch.export.load(path)
        module = torch.export.unflatten(ep)
    except Exception as exc:
        raise ModelBuildError(f"could not load {spec} with torch.export.load: {type(exc).__name__}: {exc}") from exc
    saved = ep.example_inputs
    args, kwargs = (tuple(saved[0]), dict(saved[1])) if saved is not None else _placeholder_inputs(ep)
    args, kwargs = resize_inputs(
        args, kwargs, batch_size=batch_size, input_shape=tuple(input_shape) if input_shape else None, what=spec
    )
    notes = (
        "an ExportedProgram loaded with torch.export.load after checking nothing in it is unpickled as code"
        if not allow_unsafe_load
        else "an ExportedProgram loaded with torch.export.load (--allow-unsafe-load: not checked)",
        "profiled as torch.export.unflatten(program): the exported module paths are restored",
        "its weights are the file's; the graph is the one exported (shapes, train/eval mode baked in at export)",
    )
    return ResolvedModel(name=path.name, family="exported", model=module, args=args, kwargs=kwargs, notes=notes)


#: A ``torch.export`` program saved to a ``.pt2`` file.
FAMILY = Family("exported")


def _resolve(spec: str, request: Request) -> ResolvedModel:
    return resolve_pt2(spec, **request.shape_options, allow_unsafe_load=request.allow_unsafe_load)


#: ``path/to/model.pt2``; its family is known only once the file is read.
SOURCE = Source(
    "exported", claims=lambda spec: spec.lower().endswith(SUFFIX), resolve=_resolve, family_of=lambda spec: None, families=(FAMILY,)
)

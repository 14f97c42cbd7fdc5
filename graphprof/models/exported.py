"""``--model program.pt2``: a ``torch.export`` program, loaded without running code from the file.

``torch.export.load`` reads the graph from JSON and the weights as raw bytes, but it also unpickles in
places a crafted file controls: a weight or constant marked ``use_pickle`` (``torch.load(weights_only=
False)``), a custom or opaque object constant (``pickle.loads``), and the legacy weights and constants
(``data/weights/<model>.pt``, ``data/constants/<model>.pt``) and the sample inputs, for which a failed
``weights_only=True`` load falls back to ``weights_only=False``. Before loading, :func:`check_pt2` reads
the archive's JSON configs and refuses the first two, and loads every other member torch would unpickle
with torch's own restricted unpickler (``weights_only=True``): one that does not load that way (a pickle
naming ``os.system``, in any pickle format) is refused (:class:`~graphprof.errors.UnsafeLoadError`), so
torch's fallback never runs; ``allow_unsafe_load=True`` skips that check.

Whatever the opt-in, every member's declared size is checked before anything is read
(:func:`graphprof.base.limits.require_fits`): a member inflating to more than this machine's memory, or
compressed more than :data:`MAX_RATIO` times (a zip bomb: ``torch.export.save`` stores its members
uncompressed), is refused.

The program is profiled as ``torch.export.unflatten(ep)``: the module hierarchy of the exported model is
restored (from each node's ``nn_module_stack``), so rows carry the original module paths
(``layer1.0.conv1``); inputs are the program's saved example inputs, else meta tensors of its input shapes.
"""

from __future__ import annotations

import json
import logging
import zipfile
from pathlib import Path
from typing import Any

import torch

from graphprof.base.inputs import resize_inputs
from graphprof.base.limits import format_bytes, require_fits
from graphprof.base.logs import quiet_loggers
from graphprof.errors import InvalidInputError, ModelBuildError, ModelNotFoundError, UnsafeLoadError
from graphprof.models.base import ResolvedModel
from graphprof.models.family import Family, Request, Source
from graphprof.models.trust import ALLOW_HINT, restricted_load_refusal

__all__ = ["FAMILY", "MAX_RATIO", "SOURCE", "SUFFIX", "check_pt2", "check_sizes", "resolve_pt2"]

SUFFIX = ".pt2"
_UNPICKLED_PREFIXES = ("custom_obj_", "opaque_obj_")
#: Compression beyond this ratio, for a member over :data:`_SMALL` bytes, is a zip bomb, not a program.
MAX_RATIO = 100
_SMALL = 1 << 20


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
    refusal = restricted_load_refusal(data)
    return [f"{name}: {refusal}"] if refusal else []


def _unpickled(name: str) -> bool:
    """Whether ``torch.export.load`` passes member ``name`` to ``torch.load`` (see the module docstring)."""
    return "/data/sample_inputs/" in name or (name.endswith(".pt") and ("/data/weights/" in name or "/data/constants/" in name))


def check_sizes(archive: zipfile.ZipFile, spec: str) -> None:
    """Refuse an archive whose members would inflate past memory, or are compressed like a zip bomb."""
    infos = archive.infolist()
    require_fits(sum(i.file_size for i in infos), f"{spec} (its members, uncompressed)")
    for info in infos:
        if info.file_size > _SMALL and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            raise InvalidInputError(
                f"{spec}: member {info.filename} inflates {info.compress_size} bytes to {format_bytes(info.file_size)}"
                f" (more than {MAX_RATIO} times; torch.export.save stores members uncompressed): refused as a zip bomb"
            )


def check_pt2(path: Path, spec: str, *, allow_unsafe_load: bool = False) -> None:
    """Refuse a ``.pt2`` too large to read, or whose loading would unpickle anything beyond plain tensors."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ModelBuildError(f"{spec} is not a torch.export archive: {exc}") from exc
    problems: list[str] = []
    with archive:
        check_sizes(archive, spec)
        if allow_unsafe_load:
            return
        for name in archive.namelist():
            if name.endswith(("_weights_config.json", "_constants_config.json")):
                problems += _config_problems(name, archive.read(name))
            elif _unpickled(name):
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


#: torch's loggers that report a fallback or a failed load with a whole traceback on stderr.
_NOISY_LOGGERS = ("torch._export.serde.serialize", "torch.export", "torch.export.pt2_archive._package")


def _saved_inputs(saved: Any, spec: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The program's saved ``(args, kwargs)``, checked: a crafted file may save anything there."""
    ok = isinstance(saved, tuple) and len(saved) == 2 and isinstance(saved[0], (tuple, list)) and isinstance(saved[1], dict)
    if not ok:
        raise ModelBuildError(f"{spec}: its saved example inputs are a {type(saved).__name__}, not (args, kwargs)")
    return tuple(saved[0]), dict(saved[1])


def resolve_pt2(spec: str, request: Request) -> ResolvedModel:
    """Load ``spec`` (a ``.pt2`` path) as an unflattened module with its example inputs."""
    input_shape, allow_unsafe_load = request.input_shape, request.allow_unsafe_load
    path = Path(spec).expanduser()
    if not path.is_file():
        raise ModelNotFoundError(f"no file {path}")
    check_pt2(path, spec, allow_unsafe_load=allow_unsafe_load)
    try:
        with quiet_loggers(*_NOISY_LOGGERS, level=logging.ERROR + 1):
            ep = torch.export.load(path)
        module = torch.export.unflatten(ep)
    except Exception as exc:
        raise ModelBuildError(f"could not load {spec} with torch.export.load: {type(exc).__name__}: {exc}") from exc
    args, kwargs = _saved_inputs(ep.example_inputs, spec) if ep.example_inputs is not None else _placeholder_inputs(ep)
    args, kwargs = resize_inputs(
        args, kwargs, batch_size=request.batch_size, input_shape=tuple(input_shape) if input_shape else None, what=spec
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


#: ``path/to/model.pt2``; its family is known only once the file is read.
SOURCE = Source(
    "exported", claims=lambda spec: spec.lower().endswith(SUFFIX), resolve=resolve_pt2, family_of=lambda spec: None, families=(FAMILY,)
)

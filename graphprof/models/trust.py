"""Load what a user names without running code from it, unless they allow it.

A pickled checkpoint (``.pt``/``.pth``) can name any Python callable, and ``torch.load(weights_only=False)``
calls it; a YOLO yaml's ``activation:`` is ``eval``-ed by ultralytics and its layer names are looked
up in ``ultralytics.nn.tasks`` and called. By default graphprof:

- lists the globals a checkpoint needs without unpickling it
  (``torch.serialization.get_unsafe_globals_in_checkpoint``), then loads it with ``weights_only=True``:
  torch's own ``torch.nn`` module classes are allowed for that one load (a pickled ``nn.Sequential``
  loads); a checkpoint naming ``ultralytics`` classes goes to ultralytics' own restricted loader
  (``torch_safe_load(..., safe_only=True)``); anything else (``os.system``, ``builtins.exec``, a class
  of the user's) is refused with :class:`~graphprof.errors.UnsafeLoadError`, naming it;
- checks a YOLO yaml before ultralytics sees it: ``activation:`` must be a ``torch.nn`` class called
  with literal arguments (``nn.SiLU()``, ``nn.LeakyReLU(0.1)``), and every layer must name an
  ``nn.Module`` class.

``allow_unsafe_load=True`` (``--allow-unsafe-load``) skips both checks: ``weights_only=False`` and
ultralytics' own yaml handling, for files the user trusts.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import pickle
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from graphprof.errors import ModelBuildError, UnsafeLoadError, one_line

__all__ = ["ALLOW_HINT", "load_pickle", "check_yolo_yaml", "restricted_build", "restricted_load_refusal"]

ALLOW_HINT = "pass --allow-unsafe-load (allow_unsafe_load=True) only if you trust the file"

# Globals an ultralytics checkpoint legitimately names besides its own classes (ultralytics' allow-list
# decides; these are only left out of the names an error message shows as suspicious).
_EXPECTED_PREFIXES = ("ultralytics.", "torch.", "torchvision.", "numpy.", "pathlib.", "collections.", "builtins.getattr")


def _names(names: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _torch_nn_class(name: str) -> type[torch.nn.Module] | None:
    """The class ``torch.nn.modules.linear.Linear`` names, if it is one of torch's own ``nn.Module`` classes."""
    module_name, _, attribute = name.rpartition(".")
    if not (module_name == "torch.nn.modules" or module_name.startswith("torch.nn.modules.")):
        return None
    try:
        obj = getattr(importlib.import_module(module_name), attribute, None)
    except ImportError:
        return None
    if isinstance(obj, type) and issubclass(obj, torch.nn.Module) and obj.__module__ == module_name:
        return obj
    return None


def _needed_globals(path: Path) -> list[str] | None:
    """The globals ``weights_only=True`` would refuse, read without unpickling; None for a non-zip file."""
    try:
        return list(torch.serialization.get_unsafe_globals_in_checkpoint(path))
    except (ValueError, RuntimeError, pickle.UnpicklingError):
        return None  # the legacy (non-zip) format: torch.load(weights_only=True) vets it as it reads


def restricted_load_refusal(source: Path | bytes) -> str | None:
    """Why torch's restricted unpickler (``torch.load(weights_only=True)``) refuses ``source``; None if it loads.

    For a file a library would load with a fallback to ``weights_only=False`` (``torch.export.load``'s
    sample inputs, PyG's processed data sets): refusing what the restricted unpickler refuses means the
    fallback never runs. Any pickle format is covered (zip, legacy, a raw ``pickle.dumps``).
    """
    try:
        torch.load(io.BytesIO(source) if isinstance(source, bytes) else source, map_location="cpu", weights_only=True)
    except Exception as exc:  # the restricted unpickler refused it: the fallback would unpickle it freely
        named = re.search(r"GLOBAL (\S+)", str(exc))
        return f"it names {named.group(1)}" if named else f"not loadable with weights_only=True: {type(exc).__name__}"
    return None


def load_pickle(path: Path, spec: str, *, allow_unsafe_load: bool, tasks: ModuleType | None) -> tuple[Any, list[str]]:
    """Unpickle ``path`` (see the module docstring); return what it holds and a note on how it was read.

    ``tasks`` is ``ultralytics.nn.tasks`` when ultralytics is installed, else None.
    """
    if allow_unsafe_load:
        loaded = torch.load(path, map_location="cpu", weights_only=False)
        return loaded, ["unpickled with weights_only=False (--allow-unsafe-load): code in the file could run"]
    needed = _needed_globals(path) or []
    if any(name.startswith("ultralytics.") for name in needed):
        return _load_ultralytics(path, spec, needed, tasks), ["loaded with ultralytics' restricted loader"]
    allowed = {name: _torch_nn_class(name) for name in needed}
    refused = [name for name, cls in allowed.items() if cls is None]
    if refused:
        raise UnsafeLoadError(
            f"{spec} names {_names(refused)}, which loading would call: graphprof loads checkpoints with "
            f"torch.load(weights_only=True) and torch.nn classes only; {ALLOW_HINT}"
        )
    try:
        with torch.serialization.safe_globals([cls for cls in allowed.values() if cls is not None]):
            loaded = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:  # a legacy-format file naming something outside the allow-list
        first = one_line(exc, 200)
        raise UnsafeLoadError(f"{spec}: the safe loader (weights_only=True) refused it ({first}); {ALLOW_HINT}") from exc
    return loaded, ["loaded with torch.load(weights_only=True)"]


def _load_ultralytics(path: Path, spec: str, needed: list[str], tasks: ModuleType | None) -> Any:
    if tasks is None:
        from graphprof.errors import MissingDependencyError

        raise MissingDependencyError(f"{spec} is an ultralytics checkpoint: pip install 'graphprof[yolo]' (ultralytics)")
    if not getattr(getattr(tasks, "_SafeLoad", None), "SUPPORTED", False):
        raise UnsafeLoadError(f"{spec}: this ultralytics has no restricted checkpoint loader (upgrade it); {ALLOW_HINT}")
    if path.suffix.lower() != ".pt":
        raise UnsafeLoadError(f"{spec}: ultralytics' restricted loader reads .pt files only (rename it); {ALLOW_HINT}")
    suspicious = [name for name in needed if not name.startswith(_EXPECTED_PREFIXES)]
    try:
        with _allow_list_restored(), tasks._SafeLoad.loading(str(path)):
            # the exact file (torch_safe_load would rename yolov5n.pt to yolov5nu.pt, search its weights
            # folder and try a download), read by torch.load(weights_only=True) against ultralytics' allow-list
            loaded = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError) as exc:
        named = f" (it names {_names(suspicious)})" if suspicious else ""
        first = one_line(exc, 160)
        raise UnsafeLoadError(f"{spec}: ultralytics' restricted loader refused it{named} ({first}); {ALLOW_HINT}") from exc
    return loaded


@contextlib.contextmanager
def _allow_list_restored() -> Iterator[None]:
    """Put torch's process-wide ``weights_only`` allow-list back as it was: ultralytics' restricted loader
    registers the classes a checkpoint needs for the life of the process, which would widen what the
    caller's own later ``torch.load(weights_only=True)`` calls accept. (The list also grows by torch's own
    classes, DTensor, DeviceMesh, ``_DimRange``, when ``torch.distributed.tensor`` and ``torch._dynamo`` are
    first imported, torchvision's import included: torch's registration for every user, left as it is.)"""
    before = list(torch.serialization.get_safe_globals())
    try:
        yield
    finally:
        torch.serialization.clear_safe_globals()
        torch.serialization.add_safe_globals(before)


# ---- YOLO yamls ------------------------------------------------------------------------------------


def _activation_is_literal(text: str) -> bool:
    """``nn.SiLU()``, ``torch.nn.LeakyReLU(0.1, inplace=True)``: a torch.nn class called with literals."""
    try:
        call = ast.parse(text.strip(), mode="eval").body
        if not isinstance(call, ast.Call):
            return False
        parts: list[str] = []
        node: ast.expr = call.func
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return False
        parts.append(node.id)
        if parts[1:] not in (["nn"], ["nn", "torch"]):
            return False
        cls = getattr(torch.nn, parts[0], None)
        if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
            return False
        for value in [*call.args, *(k.value for k in call.keywords)]:
            ast.literal_eval(value)
        return all(k.arg is not None for k in call.keywords)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return False


def _layer_class(name: Any, tasks: ModuleType) -> Any:
    """What ultralytics' ``parse_model`` looks a layer's module name up as (``nn.X``, ``torchvision.ops.X``, a global)."""
    if not isinstance(name, str):
        return None
    if name.startswith("nn."):
        return getattr(torch.nn, name[3:], None)
    if name.startswith("torchvision.ops."):
        if importlib.util.find_spec("torchvision") is None:
            return None
        import torchvision.ops

        return getattr(torchvision.ops, name[16:], None)
    return vars(tasks).get(name)


def check_yolo_yaml(cfg: dict[str, Any], where: str, tasks: ModuleType) -> None:
    """Refuse a yaml dict ultralytics would run code from (see the module docstring); ``where`` names the file."""
    activation = cfg.get("activation")
    if activation and not (isinstance(activation, str) and _activation_is_literal(activation)):
        raise UnsafeLoadError(
            f"{where}: activation {str(activation)[:80]!r} is not a torch.nn class with literal arguments "
            f"(such as nn.SiLU()), and ultralytics would run it as Python; {ALLOW_HINT}"
        )
    for section in ("backbone", "head"):
        layers = cfg.get(section) or []
        if not isinstance(layers, list):
            raise ModelBuildError(f"{where}: {section} is not a list of layers")
        for index, layer in enumerate(layers):
            if not isinstance(layer, list) or len(layer) < 3:
                raise ModelBuildError(f"{where}: {section}[{index}] is not a [from, repeats, module, args] layer")
            cls = _layer_class(layer[2], tasks)
            if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
                raise UnsafeLoadError(
                    f"{where}: {section}[{index}] names {str(layer[2])[:80]!r}, which is not an nn.Module class "
                    f"ultralytics knows, and ultralytics would call it; {ALLOW_HINT}"
                )
            base_model = getattr(tasks, "BaseModel", None)
            if isinstance(base_model, type) and issubclass(cls, base_model):
                # a whole model as a layer is built from a nested config (a dict or another yaml) whose own
                # activation ultralytics evaluates: refused rather than checked level by level
                raise UnsafeLoadError(
                    f"{where}: {section}[{index}] is a whole model ({cls.__name__}) used as a layer, which ultralytics "
                    f"builds from a nested config it evaluates; {ALLOW_HINT}"
                )


@contextlib.contextmanager
def restricted_build(tasks: ModuleType) -> Iterator[None]:
    """Ultralytics' own restricted model construction for the span of a build: ``parse_model`` resolves
    ``activation:`` without ``eval`` and accepts only known layer classes, at every level of nesting.

    It is the per-thread switch behind ``ULTRALYTICS_SAFE_LOAD`` (``_SafeLoad._local.active``), set and
    put back here, so the process-wide flag and other threads are left alone. Where this ultralytics has
    no such switch, :func:`check_yolo_yaml` is the only guard.
    """
    safe = getattr(tasks, "_SafeLoad", None)
    local = getattr(safe, "_local", None)
    if safe is None or local is None or not getattr(safe, "SUPPORTED", False):
        yield
        return
    before = getattr(local, "active", False)
    local.active = True
    try:
        yield
    finally:
        local.active = before

"""A user's own model: ``package.module:make_model``, ``package.module:MyModel``, ``path/to/file.py:make_model``,
or an entry of a registry dict, seed 002's way: ``my_models.py:MODEL_REGISTRY[my_model]``.

The module is imported with the current directory first on ``sys.path`` (removed again after;
a file's own directory too), the attribute is looked up (dots allowed: ``mod:Zoo.small``), and then:
a class is instantiated with no arguments, a function is called with no arguments, an
``nn.Module`` instance is used as it is. The result must be an ``nn.Module``; it is put in
``eval()`` mode. Keywords for a factory or class follow a ``?`` as for ``hf:`` specs
(``pkg.mod:make_model?width=64&depth=4``: values read as int, float, bool, none, else text).

A user's model has no default input, so ``input_shape`` is required: the example input is one
float32 ``randn`` tensor of that shape. With ``device="meta"`` the factory may be called up to three
times (see :mod:`graphprof.models.device`); a factory should build and do nothing else.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from graphprof.base.tied import keep_ties
from graphprof.errors import InvalidInputError, ModelBuildError, ModelNotFoundError
from graphprof.models.base import ResolvedModel, a_type, effective_shape, random_tensor
from graphprof.models.device import build_module
from graphprof.models.family import Family, Request, Source

__all__ = ["FAMILY", "SOURCE", "is_user_spec", "resolve_user", "find_user_object"]


def is_user_spec(spec: str) -> bool:
    """Whether ``spec`` has the ``target:attribute`` form (``hf:`` specs are handled before)."""
    target, sep, attribute = spec.rpartition(":")
    return bool(sep and target and attribute) and not (len(target) == 1 and target.isalpha())  # not "C:"


@contextmanager
def _on_sys_path(*directories: str) -> Iterator[None]:
    """Put ``directories`` first on ``sys.path`` for the block, then remove exactly those entries."""
    added = [d for d in directories if d not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for entry in added:
            if entry in sys.path:
                sys.path.remove(entry)


def _import_file(path: Path, spec: str) -> ModuleType:
    """Import ``path`` under a name unique to its location, registered in ``sys.modules``."""
    resolved = path.resolve()
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:10]
    module_name = f"graphprof_user_{resolved.stem}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    module_spec = importlib.util.spec_from_file_location(module_name, resolved)
    if module_spec is None or module_spec.loader is None:
        raise ModelNotFoundError(f"{spec}: cannot import {path}")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module  # dataclasses and pickle look their module up here
    try:
        with _on_sys_path(str(resolved.parent), os.getcwd()):
            module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def _import_target(target: str, spec: str) -> ModuleType:
    try:
        if target.endswith(".py"):
            path = Path(target).expanduser()
            if not path.is_file():
                raise ModelNotFoundError(f"{spec}: no file {path}")
            return _import_file(path, spec)
        with _on_sys_path(os.getcwd()):
            return importlib.import_module(target)
    except ModelNotFoundError:
        raise
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if target == missing or target.startswith(missing + "."):
            raise ModelNotFoundError(f"{spec}: no module named {missing!r} (looked in the current directory and sys.path)") from exc
        raise ModelBuildError(f"{spec}: importing {target} failed: no module named {missing!r}") from exc
    except Exception as exc:
        raise ModelBuildError(f"{spec}: importing {target} failed: {type(exc).__name__}: {exc}") from exc


def find_user_object(spec: str) -> Any:
    """What ``target:attribute`` names (``pkg.mod:make_model?width=64`` -> the function ``make_model``),
    imported but not called."""
    base = spec.partition("?")[0]
    target, _, attribute = base.rpartition(":")
    return _attribute(_import_target(target, spec), attribute, spec, target)


def _attribute(module: ModuleType, dotted: str, spec: str, target: str) -> Any:
    """``module.a.b`` for ``dotted="a.b"``, and an entry of a mapping for ``a[key]`` (seed 002's
    ``MODEL_REGISTRY[my_model]``, quotes optional); a missing one names ``target``, the user's file or module."""
    path, bracket, key = dotted.partition("[")
    found: Any = module
    for part in path.split("."):
        if not hasattr(found, part):
            raise ModelNotFoundError(f"{spec}: {target} has no attribute {path!r}")
        found = getattr(found, part)
    if not bracket:
        return found
    key = key.removesuffix("]").strip().strip("'\"")
    if not isinstance(found, Mapping) or key not in found:
        known = ", ".join(sorted(map(str, found))) if isinstance(found, Mapping) else f"not a mapping but {a_type(found)}"
        raise ModelNotFoundError(f"{spec}: {target}'s {path} has no entry {key!r} ({known})")
    return found[key]


def resolve_user(spec: str, *, input_shape: Sequence[int] | None, batch_size: int | None, device: torch.device) -> ResolvedModel:
    """Import ``target:attribute``, build the model it names, and a ``randn`` input of ``input_shape``."""
    from graphprof.models.hf import parse_options

    options = parse_options(spec.partition("?")[2]) if "?" in spec else {}
    obj = find_user_object(spec)
    if input_shape is None:
        raise InvalidInputError(f"{spec} has no default input; pass --input-shape (input_shape=...)")
    shape = effective_shape(input_shape, input_shape, batch_size, layout=None, model=spec)
    if options and (isinstance(obj, torch.nn.Module) or not callable(obj)):
        raise InvalidInputError(f"{spec}: keywords after '?' need a factory or class, not a {type(obj).__name__}")
    if isinstance(obj, torch.nn.Module):
        model, notes = obj, ["used the module object as it is"]
        if device.type != "cpu":
            model = keep_ties(model, lambda m: m.to(device))  # to meta: one parameter per name otherwise
    elif callable(obj):
        kind = "class" if isinstance(obj, type) else "factory"
        builder = functools.partial(obj, **options) if options else obj
        model, build_notes = build_module(builder, device, f"the {kind} {spec}")
        called = ", ".join(f"{k}={v!r}" for k, v in options.items()) or "no arguments"
        notes = [f"built by calling the {kind} with {called}", *build_notes]
    else:
        raise ModelBuildError(f"{spec} is {a_type(obj)}, neither an nn.Module nor a callable that builds one")
    _check_usable(model, spec)
    model.eval()
    return ResolvedModel(name=spec, family="user", model=model, args=(random_tensor(shape, device),), kwargs={}, notes=tuple(notes))


def _check_usable(model: torch.nn.Module, spec: str) -> None:
    """Before any run: the module tree can be walked (a ``named_modules()`` that raises is the model's fault)
    and ``forward`` takes the one input ``--input-shape`` makes (a ``forward(self)`` cannot)."""
    try:
        for _ in model.named_modules():
            pass
    except Exception as exc:  # noqa: BLE001 - any failure of the user's override is the model's, named
        raise ModelBuildError(f"{spec}: listing its submodules (named_modules()) failed: {type(exc).__name__}: {exc}") from exc
    try:
        signature = inspect.signature(model.forward)
    except (TypeError, ValueError):  # a builtin or C forward: nothing to check
        return
    try:
        signature.bind(object())
    except TypeError as exc:
        raise InvalidInputError(
            f"{spec}: its forward{signature} cannot take the one input --input-shape (input_shape=...) gives ({exc})"
        ) from exc


#: A user's factory, class or pickled module: nothing is known of it before it is built.
FAMILY = Family("user")


def _resolve(spec: str, request: Request) -> ResolvedModel:
    return resolve_user(spec, **request.shape_options)


#: ``package.module:make_model``, ``path/to/file.py:MyModel``.
SOURCE = Source("user", claims=is_user_spec, resolve=_resolve, family_of=lambda spec: None, families=(FAMILY,))

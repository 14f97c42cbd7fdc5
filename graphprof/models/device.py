"""Build a module on the device asked for: CPU by default, or the meta device (shapes only, no memory).

On the meta device, three ways are tried in order, each only if the one before fails:

1. the builder runs under ``torch.device("meta")``: every tensor it makes is storage-free;
2. the builder runs on CPU, but each parameter and buffer moves to meta as it is registered
   (``torch.nn.modules.module.register_module_{parameter,buffer}_registration_hook``), for builders
   that compute with real tensors, like RegNet's width schedule (``torch.arange(...).tolist()``);
3. the builder runs on CPU and the model is moved to meta afterwards (YOLO runs a forward pass in
   its constructor to find its strides); a note says so.

Every way keeps tied parameters (one parameter under two names, as an LM head sharing its embedding) one
parameter on the meta device.

Any other device (``"cuda"``) gets a CPU build moved there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn, cast

import torch
from torch.nn.modules import module as module_hooks
from torch.utils.weak import WeakIdKeyDictionary

from graphprof.base.tied import keep_ties
from graphprof.errors import DownloadUnavailableError, GraphprofError, InvalidInputError, ModelBuildError
from graphprof.models.base import a_type
from graphprof.models.offline import find_blocked_download

__all__ = ["parse_device", "build_module", "META"]

META = torch.device("meta")
_CPU = torch.device("cpu")


def parse_device(device: str | torch.device | None) -> torch.device:
    """``None`` -> CPU; otherwise a device torch knows and can use here, else :class:`InvalidInputError`."""
    if device is None:
        return _CPU
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise InvalidInputError(f"unknown device {device!r}; use 'cpu' or 'meta'") from exc
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise InvalidInputError(f"device {device!r} is not available here; use 'cpu' or 'meta'")
    return parsed


@contextmanager
def _state_on_meta() -> Iterator[None]:
    """Move each parameter and buffer to meta as a module registers it (way 2 above); a parameter
    registered under several names (tied) becomes one meta parameter, not one per name."""
    moved: WeakIdKeyDictionary = WeakIdKeyDictionary()  # the builder's parameter -> its meta twin

    def parameter_hook(module: torch.nn.Module, name: str, param: torch.nn.Parameter | None) -> torch.nn.Parameter | None:
        if param is None or param.is_meta:
            return None
        if param not in moved:
            moved[param] = torch.nn.Parameter(param.to(META), requires_grad=param.requires_grad)
        return cast(torch.nn.Parameter, moved[param])

    def buffer_hook(module: torch.nn.Module, name: str, buffer: torch.Tensor | None) -> torch.Tensor | None:
        if buffer is None or buffer.is_meta:
            return None
        return buffer.to(META)

    handles = [
        # torch annotates these hooks as returning None, but documents (and honours) a returned replacement
        module_hooks.register_module_parameter_registration_hook(parameter_hook),  # type: ignore[arg-type]
        module_hooks.register_module_buffer_registration_hook(buffer_hook),  # type: ignore[arg-type]
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _checked_module(built: object, what: str) -> torch.nn.Module:
    if not isinstance(built, torch.nn.Module):
        raise ModelBuildError(f"{what} returned {a_type(built)}, not a torch.nn.Module")
    return built


def _raise_for(exc: Exception, what: str) -> NoReturn:
    """Raise the graphprof error for a builder's exception: a refused download, a build failure, or itself."""
    blocked = find_blocked_download(exc)
    if blocked is not None:
        raise DownloadUnavailableError(f"{what} tried to download ({blocked}); pass a local file instead") from exc
    if isinstance(exc, GraphprofError):
        raise exc
    raise ModelBuildError(f"could not build {what}: {type(exc).__name__}: {exc}") from exc


def build_module(make: Callable[[], object], device: torch.device, what: str) -> tuple[torch.nn.Module, tuple[str, ...]]:
    """Call ``make`` so that its module lands on ``device``; return it with notes about how.

    ``what`` names the model in error messages. Failures become :class:`ModelBuildError` (or
    :class:`DownloadUnavailableError` when the builder tried to reach the network), with the cause chained;
    graphprof's own errors pass through.
    """
    if device.type == "meta":
        for way in (torch.device("meta"), _state_on_meta()):
            try:
                with way:
                    return _checked_module(make(), what), ()
            except Exception as exc:
                if isinstance(exc, GraphprofError) or find_blocked_download(exc) is not None:
                    _raise_for(exc, what)
                # otherwise the next way is tried; if none works, the CPU build reports the real error
    try:
        module = _checked_module(make(), what)
    except Exception as exc:
        _raise_for(exc, what)
    if device.type == "cpu":
        return module, ()
    note = f"built on CPU, then moved to {device.type}"
    if device.type == "meta":
        note += " (its builder computes with real tensors)"
    try:
        return keep_ties(module, lambda m: m.to(device)), (note,)  # to meta: one parameter per name otherwise
    except Exception as exc:
        raise ModelBuildError(f"could not move {what} to {device}: {type(exc).__name__}: {exc}") from exc

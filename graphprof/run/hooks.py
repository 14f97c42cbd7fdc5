"""Hooks on every module call, removed on exit: how a pass watches modules without touching them.

``torch.nn.modules.module.register_module_forward_pre_hook`` / ``register_module_forward_hook`` are
process-wide; nothing is attached to the user's modules (:func:`module_call_hooks`). A run's own copy of a
model (a training step's, wrapped by FSDP or checkpointing) is hooked module by module instead
(:func:`own_module_hooks`), after the hooks its wrappers registered, so a wrapper's work before and after a
module's forward (FSDP's all-gather and reshard) happens outside it. The post-hook is always called, an
exception in the forward included, so a pass's stack of open modules always unwinds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

__all__ = ["module_call_hooks", "own_module_hooks"]


@contextlib.contextmanager
def module_call_hooks(pre: Callable[[nn.Module, Any], Any], post: Callable[[nn.Module, Any, Any], Any]) -> Iterator[None]:
    """``pre(module, args)`` before and ``post(module, args, output)`` after every module call, inside."""
    handles = [
        torch.nn.modules.module.register_module_forward_pre_hook(pre),
        torch.nn.modules.module.register_module_forward_hook(post, always_call=True),
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def own_module_hooks(model: nn.Module, pre: Callable[[nn.Module, Any], Any], post: Callable[[nn.Module, Any, Any], Any]) -> Iterator[None]:
    """``pre`` and ``post`` on every module of ``model``, a copy the run owns (never the user's), inside."""
    handles = []
    for module in model.modules():
        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post, always_call=True))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()

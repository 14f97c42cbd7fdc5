"""Tied parameters (an LM head sharing the input embedding) kept tied through a conversion of the model.

``nn.Module._apply`` (behind ``to_empty``, ``to``, ``half``) keeps a parameter's identity only when it can
change the tensor in place: from or to the meta device, to FakeTensors, or with
``torch.__future__.set_overwrite_module_params_on_conversion(True)``, it makes a fresh parameter for every
module attribute that holds one, so a parameter reached under two names becomes two. FSDP would then shard
(and gather, and reduce) a second embedding matrix, and a step would keep its gradients and optimizer
state twice. :func:`tied_groups` reads the names sharing each parameter before such a conversion,
:func:`retie` points them at one parameter again after it, and :func:`keep_ties` does both around one.

Example: GPT-2's ``lm_head.weight`` is ``transformer.wte.weight``::

    >>> groups = tied_groups(model)          # [("transformer.wte.weight", "lm_head.weight")]
    >>> model = model.to_empty(device="cpu")
    >>> retie(model, groups)                 # one parameter again
    >>> model = keep_ties(model, lambda m: m.to_empty(device="cpu"))  # the same, in one call
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

__all__ = ["tied_groups", "retie", "keep_ties"]


def tied_groups(model: nn.Module) -> list[tuple[str, ...]]:
    """The dotted names of each parameter reached under more than one name, first name first."""
    names: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    return [tuple(group) for group in names.values() if len(group) > 1]


def retie(model: nn.Module, groups: list[tuple[str, ...]]) -> None:
    """Make every name of each group hold its first name's parameter (in place)."""
    for first, *others in groups:
        shared = model.get_parameter(first)
        for name in others:
            owner, _, attribute = name.rpartition(".")
            setattr(model.get_submodule(owner), attribute, shared)


def keep_ties(model: nn.Module, convert: Callable[[nn.Module], nn.Module]) -> nn.Module:
    """``convert(model)`` with each group of tied names holding one parameter afterwards, as before.

    The conversion may still make the copies for a moment (``to_empty`` allocates one per name); the
    spares are dropped as soon as the names point at the first name's parameter again."""
    groups = tied_groups(model)
    converted = convert(model)
    retie(converted, groups)
    return converted

"""Tied parameters (an LM head sharing the input embedding) kept tied through a copy of the model.

``nn.Module.to_empty`` makes a fresh parameter for every module attribute that holds one, so a parameter
reached under two names becomes two: FSDP would then shard (and gather, and reduce) a second embedding
matrix. :func:`tied_groups` reads the names sharing each parameter before such a step and :func:`retie`
points them at one parameter again after it.

Example: GPT-2's ``lm_head.weight`` is ``transformer.wte.weight``::

    >>> groups = tied_groups(model)          # [("transformer.wte.weight", "lm_head.weight")]
    >>> model = model.to_empty(device="cpu")
    >>> retie(model, groups)                 # one parameter again
"""

from __future__ import annotations

from torch import nn

__all__ = ["tied_groups", "retie"]


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

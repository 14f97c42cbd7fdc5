"""Executed and useful shares of an attention call's counted FLOPs: the three figures of attention.

graphprof counts attention as the full L x S square (its convention, and ``torch.utils.flop_counter``'s):
the *counted* FLOPs. Beside them, two shares of those FLOPs per call, each below 1 only where the call
itself says the mask has structure:

* **executed** (:func:`kernel_work_fraction`): what the kernel computes. A causal fused kernel
  (``is_causal=True``, forward or backward) skips the key tiles above the diagonal
  (:func:`~graphprof.formulas.attention.causal_work_fraction`); ``flex_attention`` visits the blocks its
  block mask lists (:mod:`graphprof.formulas.flex`).
* **useful** (:func:`kernel_useful_fraction`): the scores the mask keeps (the causal triangle with its
  diagonal; a flex mask's kept elements).

A mask passed as a tensor is not read on a dry run: such a call counts as executed and useful in full.
"""

from __future__ import annotations

from typing import Any

from graphprof.formulas.attention import CAUSAL_OPS, causal_lengths, causal_useful_fraction, causal_work_fraction
from graphprof.formulas.flex import flex_fractions

__all__ = ["MASKABLE", "kernel_work_fraction", "kernel_useful_fraction"]

#: The ops (packet names) whose shares can be below 1: causal fused attention and flex attention. Every
#: other call's shares are 1 without a look at its arguments (the counter tests this set first, per call).
MASKABLE = frozenset({*CAUSAL_OPS, "flex_attention", "flex_attention_backward"})


def kernel_work_fraction(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
    """Share of the counted FLOPs a kernel really executes: below 1 for causal and flex attention only.

    The MACs keep their convention (the full square); a predicted time and
    :attr:`~graphprof.cost.result.Profile.executed_flops` use this share.
    """
    flex = flex_fractions(func, args)
    if flex is not None:
        return flex[0]
    lengths = causal_lengths(func, args, kwargs)
    return 1.0 if lengths is None else causal_work_fraction(*lengths)


def kernel_useful_fraction(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> float:
    """Share of the counted FLOPs that is useful work: the scores the mask keeps, else 1."""
    flex = flex_fractions(func, args)
    if flex is not None:
        return flex[1]
    lengths = causal_lengths(func, args, kwargs)
    return 1.0 if lengths is None else causal_useful_fraction(*lengths)

"""Model FLOPs per token: the figure papers and MFU use, beside what graphprof counted and the kernels execute.

**Convention** (stated once, here and in the report): *model FLOPs* are 2 x the multiply-accumulates of the
matrix products that carry the model's weights or mix its tokens: linear layers and batched products
(``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``matmul``, ``linear``), the experts a router actually sends
tokens to (``_grouped_mm``: active experts only), and attention's two products (scores and values) counted
over the *unmasked* positions (causal: the lower triangle with the diagonal; a window of W: W per query).
The LM head is in; embedding look-ups, norms, activations, softmax, rotary embeddings and the residual adds
are out. Forward + backward is 3 x forward (the backward computes two products per forward product), the
convention of PaLM's and Megatron's MFU; graphprof's own count of a ``--mode train`` step sits beside it in
:attr:`Profile.total_flops`.

*Tokens* are the elements of the ``input_ids`` (``decoder_input_ids`` too, for an encoder-decoder): batch x
sequence. A model without token inputs has no per-token figure.

>>> # Llama-3-8B, 2048 tokens: about 2 x 7.5e9 (the non-embedding weights) + causal attention per token
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["MODEL_FLOP_OPS", "ATTENTION_OPS", "TOKEN_INPUTS", "TokenFlops", "token_flops"]

#: The products whose FLOPs are model FLOPs (aten names, as the records hold them).
MODEL_FLOP_OPS = frozenset({
    "aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.matmul", "aten.linear", "aten._grouped_mm",
})  # fmt: skip
#: Fused attention kernels: model FLOPs are their useful (unmasked) FLOPs.
ATTENTION_OPS = frozenset({
    "aten._scaled_dot_product_flash_attention", "aten._scaled_dot_product_efficient_attention",
    "aten._scaled_dot_product_flash_attention_for_cpu", "aten._scaled_dot_product_cudnn_attention",
    "aten.scaled_dot_product_attention", "aten._flash_attention_forward", "aten._efficient_attention_forward",
    "higher_order.flex_attention",
})  # fmt: skip
#: The inputs whose elements are tokens.
TOKEN_INPUTS = ("input_ids", "decoder_input_ids")


@dataclass(frozen=True)
class TokenFlops:
    """Per-token FLOPs of one profile (see the module docstring for the convention)."""

    tokens: int
    #: model FLOPs of one forward, per token
    model_forward: float
    #: model FLOPs of forward + backward, per token (3 x forward)
    model_train: float
    #: FLOPs the kernels execute, per token (graphprof's count, causal tiles skipped)
    executed: float
    #: FLOPs graphprof counted, per token (every op, attention over the full square)
    counted: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens, "model_flops_forward": self.model_forward, "model_flops_train": self.model_train,
            "executed_flops": self.executed, "counted_flops": self.counted,
            "convention": "model FLOPs: 2 x MACs of weight and token-mixing products (LM head in, embeddings out), "
            "attention over unmasked positions, active experts only; train = 3 x forward",
        }  # fmt: skip


def _tokens(inputs: Any) -> int:
    return sum(math.prod(int(size) for size in spec.shape) for spec in inputs if spec.name in TOKEN_INPUTS)


def token_flops(profile: Any) -> TokenFlops | None:
    """The per-token figures of ``profile``, or ``None`` for a model without token inputs."""
    from graphprof.base.choices import Phase

    tokens = _tokens(profile.inputs)
    if tokens <= 0:
        return None
    model = 0.0
    for _, op in profile.iter_ops():
        if op.phase is not Phase.FORWARD:
            continue
        if op.op in MODEL_FLOP_OPS:
            model += 2.0 * op.cost.macs
        elif op.op in ATTENTION_OPS:
            model += 2.0 * op.cost.macs * op.useful_fraction
    return TokenFlops(
        tokens=tokens, model_forward=model / tokens, model_train=3.0 * model / tokens,
        executed=profile.executed_flops / tokens, counted=profile.total_flops / tokens,
    )  # fmt: skip

"""Estimates that follow the target: addressed bytes, lowering for a GPU target, predicted time."""

from __future__ import annotations

import torch

from graphprof.formulas import TensorMeta, op_cost

aten = torch.ops.aten


# ---- bytes a kernel addresses ---------------------------------------------------------------------


def test_broadcast_input_is_read_once() -> None:
    a = torch.empty(4, 3, 5, device="meta")
    b = torch.empty(5, 6, device="meta").expand(4, 5, 6)  # stride (0, 6, 1)
    cost = op_cost(aten.bmm.default, (a, b), {}, aten.bmm.default(a, b))
    # MACs 4 * 3 * 5 * 6 = 360 (unchanged); read a: 4*3*5*4 = 240 B, b once: 5*6*4 = 120 B; write 4*3*6*4 = 288 B
    assert (cost.macs, cost.bytes_read, cost.bytes_written) == (360, 360, 288)
    dense = b.contiguous()
    cost_dense = op_cost(aten.bmm.default, (a, dense), {}, aten.bmm.default(a, dense))
    # the materialised copy is read in full: 240 + 4*5*6*4 = 720 B
    assert (cost_dense.macs, cost_dense.bytes_read) == (360, 720)


def test_addressed_bytes_of_tensor_meta() -> None:
    meta = TensorMeta((197, 768, 768), torch.bfloat16, (0, 768, 1))
    assert meta.nbytes == 197 * 768 * 768 * 2
    assert meta.addressed_nbytes == 768 * 768 * 2
    # a transposed (non-contiguous but not broadcast) tensor addresses all its elements
    assert TensorMeta((3, 4), torch.float32, (1, 3)).addressed_nbytes == 48
    # unknown strides: dense
    assert TensorMeta((3, 4), torch.float32).addressed_nbytes == 48

"""Recurrent layers: every RNN / LSTM / GRU kernel the dispatcher can reach.

* ``aten.mkldnn_rnn_layer`` (CPU, oneDNN): one call per layer and direction;
* ``aten._cudnn_rnn`` (CUDA) and ``aten.miopen_rnn`` (ROCm): one call for the whole stack, with a flat
  weight list (bidirectional, multi-layer, ``proj_size``, packed sequences via ``batch_sizes``);
* ``aten.lstm`` / ``gru`` / ``rnn_tanh`` / ``rnn_relu`` (``.input`` and packed ``.data``): seen in graphs
  captured above dispatch; at dispatch they decompose into ``addmm`` + element-wise ops (GRU and
  ``proj_size`` LSTMs on the CPU always take that path, and are counted op by op);
* the cells ``lstm_cell`` / ``gru_cell`` / ``rnn_*_cell`` and the fused CUDA cell kernels
  ``_thnn_fused_lstm_cell`` / ``_thnn_fused_gru_cell`` (whose gate products are separate ``mm`` calls);
* the backward kernels ``mkldnn_rnn_layer_backward`` and ``_cudnn_rnn_backward``.

**MACs.** Every weight matrix (``weight_ih``, ``weight_hh`` and the LSTM projection ``weight_hr``) is
applied once per token (time step x batch row) and direction, so a layer-direction costs
``tokens x sum(weight.numel)`` MACs: for an LSTM without projection, ``tokens x 4H x (I + H)``. A packed
sequence holds exactly its ``sum(batch_sizes)`` tokens, which is the first dimension of its data, so no
value has to be read.

**Element-wise gate work** (FLOPs beyond ``2 x MACs``), per token, per layer-direction, for hidden size H
and G gates (LSTM 4, GRU 3, RNN 1), at the rates of :data:`~graphprof.formulas.PER_ELEMENT_FLOPS`:

* each bias vector present: 1 add per gate element (``G H`` each, ``b_ih`` and ``b_hh``);
* the input and hidden products are added: ``G H``;
* LSTM: 3 sigmoids, 2 tanh, ``c' = f c + i g`` (3) and ``h' = o tanh(c')`` (1): ``3 sigmoid + 2 tanh + 4``
  per hidden unit;
* GRU: 2 sigmoids, ``r * (W_hn h + b_hn)`` (1), tanh, ``h' = n + z (h - n)`` (3);
* RNN: the nonlinearity (tanh or relu) once per hidden unit.

These are exactly the ops the CPU's decomposed path issues, so a fused kernel and its decomposition count
the same (a test checks it). Backward kernels count 2 x the forward MACs (the input and hidden gradients
run every product transposed, the weight gradients run each once more) plus the forward's element-wise
work again, as an approximation of the gate derivatives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from graphprof.formulas.common import by_name, flops_of
from graphprof.formulas.cost import Cost, TensorMeta
from graphprof.formulas.registry import Formula, register

aten = torch.ops.aten

__all__ = ["GATES", "gate_flops_per_unit", "rnn_stack_cost"]

#: cuDNN / oneDNN mode numbers -> (name, gates per hidden unit)
_MODES = {0: ("rnn_relu", 1), 1: ("rnn_tanh", 1), 2: ("lstm", 4), 3: ("gru", 3)}
GATES = {name: gates for name, gates in _MODES.values()}


def gate_flops_per_unit(kind: str) -> int:
    """Element-wise FLOPs per hidden unit and token after the gate pre-activations are summed."""
    sigmoid, tanh = flops_of("sigmoid", n_output=1), flops_of("tanh", n_output=1)
    if kind == "lstm":
        return 3 * sigmoid + 2 * tanh + 4  # i, f, o gates; g and tanh(c'); f*c + i*g; o*tanh(c')
    if kind == "gru":
        return 2 * sigmoid + tanh + 1 + 3  # r, z; tanh(n); r * hidden_n; n + z * (h - n)
    if kind == "rnn_relu":
        return flops_of("relu", n_output=1)
    if kind == "rnn_tanh":
        return tanh
    raise ValueError(f"unknown recurrent kind {kind!r}")


def _tokens(input: TensorMeta) -> int:
    """Time steps x batch rows: every leading dimension of the (possibly packed) input."""
    return input.numel // input.shape[-1] if input.ndim > 1 else 1


def rnn_stack_cost(kind: str, tokens: int, hidden_size: int, layer_directions: int, weights: Sequence[TensorMeta | None]) -> Cost:
    """Cost of ``layer_directions`` recurrent layer-directions over ``tokens`` tokens.

    ``weights`` are all the layer-directions' parameters: 2-D ones are matrices (one product per token),
    1-D ones biases (one add per element per token).
    """
    matrices = sum(w.numel for w in weights if w is not None and w.ndim == 2)
    biases = sum(w.numel for w in weights if w is not None and w.ndim == 1)
    macs = tokens * matrices
    gate_units = GATES[kind] * hidden_size
    elementwise = tokens * (biases + layer_directions * (gate_units + hidden_size * gate_flops_per_unit(kind)))
    return Cost(macs=macs, flops=2 * macs + elementwise)


def _written(out: Any) -> int:
    leaves = out if isinstance(out, (list, tuple)) else (out,)
    total = 0
    for t in leaves:
        if isinstance(t, TensorMeta):
            total += t.nbytes
        elif isinstance(t, (list, tuple)):
            total += _written(t)
    return total


def _with_bytes(cost: Cost, reads: Sequence[TensorMeta | None], out: Any) -> Cost:
    # weights, inputs and states read once; a flat cuDNN weight buffer aliases the list and is not added
    read = sum(t.nbytes for t in reads if isinstance(t, TensorMeta))
    return Cost(cost.macs, cost.flops, read, _written(out))


# ---- fused kernels -----------------------------------------------------------------------------------


def _stack_forward(
    input: TensorMeta,
    weight: Sequence[TensorMeta],
    mode: int,
    hidden_size: int,
    num_layers: int,
    bidirectional: bool,
    batch_sizes: Sequence[int],
) -> Cost:
    # the weight list holds every layer-direction's W_ih, W_hh, (b_ih, b_hh), (W_hr when proj_size > 0)
    tokens = sum(batch_sizes) if batch_sizes else _tokens(input)
    layer_directions = num_layers * (1 + bool(bidirectional))
    return rnn_stack_cost(_MODES[mode][0], tokens, hidden_size, layer_directions, weight)


def _layer_weights(w_ih: TensorMeta, w_hh: TensorMeta, b_ih: TensorMeta, b_hh: TensorMeta, has_biases: bool) -> list[TensorMeta]:
    # oneDNN's one layer, one direction: the two bias slots hold placeholders when has_biases is false
    return [w_ih, w_hh, *((b_ih, b_hh) if has_biases else ())]


def _mkldnn_layer_cost(
    input: TensorMeta,
    weight0: TensorMeta,
    weight1: TensorMeta,
    weight2: TensorMeta,
    weight3: TensorMeta,
    hx_: TensorMeta,
    cx_: TensorMeta,
    batch_sizes: Sequence[int],
    mode: int,
    hidden_size: int,
    has_biases: bool,
    *,
    out: Any,
    **_: Any,
) -> Cost:
    weights = _layer_weights(weight0, weight1, weight2, weight3, has_biases)
    cost = _stack_forward(input, weights, mode, hidden_size, 1, False, batch_sizes)
    return _with_bytes(cost, [input, *weights, hx_, cx_ if _MODES[mode][0] == "lstm" else None], out)


register(aten.mkldnn_rnn_layer)(by_name(aten.mkldnn_rnn_layer, _mkldnn_layer_cost))


def _cudnn_like_cost(
    input: TensorMeta,
    weight: Sequence[TensorMeta],
    hx: TensorMeta,
    cx: TensorMeta | None,
    mode: int,
    hidden_size: int,
    num_layers: int,
    bidirectional: bool,
    batch_sizes: Sequence[int],
    *,
    out: Any,
    **_: Any,
) -> Cost:
    # _cudnn_rnn and miopen_rnn: the whole stack in one call (their schemas differ in weight_buf, proj_size)
    cost = _stack_forward(input, weight, mode, hidden_size, num_layers, bidirectional, batch_sizes)
    return _with_bytes(cost, [input, *weight, hx, cx], out)


for _packet in (aten._cudnn_rnn, aten.miopen_rnn):
    register(_packet)(by_name(_packet, _cudnn_like_cost))


# ---- composite ops (graphs captured above dispatch) -----------------------------------------------------


def _composite(kind: str) -> Formula:  # a formula factory
    gates = GATES[kind]

    def formula(input: TensorMeta, *args: Any, out: Any, **kwargs: Any) -> Cost:
        # .input: (input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
        # .data:  (data, batch_sizes, hx, params, has_biases, num_layers, dropout, train, bidirectional)
        packed = isinstance(args[0], TensorMeta) and isinstance(args[2], (list, tuple)) and args[0].ndim == 1
        rest = args[1:] if packed else args
        hx, params, _has_biases, num_layers, _dropout, _train, bidirectional = rest[:7]
        hidden = params[1].shape[0] // gates  # W_hh is (G H, H or proj_size)
        cost = rnn_stack_cost(kind, _tokens(input), hidden, num_layers * (1 + bool(bidirectional)), params)
        states = list(hx) if isinstance(hx, (list, tuple)) else [hx]
        return _with_bytes(cost, [input, *params, *states], out)

    formula.__name__ = formula.__qualname__ = f"recurrent[{kind}]"
    return formula


for _kind in ("lstm", "gru", "rnn_tanh", "rnn_relu"):
    register(getattr(aten, _kind))(_composite(_kind))


def _cell(kind: str) -> Formula:  # a formula factory
    def formula(
        input: TensorMeta,
        hx: Any,
        w_ih: TensorMeta,
        w_hh: TensorMeta,
        b_ih: TensorMeta | None = None,
        b_hh: TensorMeta | None = None,
        *,
        out: Any,
        **_: Any,
    ) -> Cost:
        # one time step of one layer-direction: a cell is the layer with a single step
        hidden = w_hh.shape[0] // GATES[kind]  # W_hh is (G H, H)
        return rnn_stack_cost(kind, _tokens(input), hidden, 1, [w_ih, w_hh, b_ih, b_hh])

    formula.__name__ = formula.__qualname__ = f"recurrent_cell[{kind}]"
    return formula


for _kind in ("lstm", "gru", "rnn_tanh", "rnn_relu"):
    register(getattr(aten, f"{_kind}_cell"))(_cell(_kind))


def _fused_cell(kind: str) -> Formula:  # a body factory, for by_name
    def body(input_gates: TensorMeta, input_bias: TensorMeta | None = None, hidden_bias: TensorMeta | None = None, **_: Any) -> Cost:
        # the gate products were separate mm calls (input_gates is their (rows, G H) result): the cell's work
        # without its matrices, that is the gate sum, the biases and the element-wise work
        hidden = input_gates.shape[-1] // GATES[kind]
        return rnn_stack_cost(kind, _tokens(input_gates), hidden, 1, [input_bias, hidden_bias])

    body.__name__ = body.__qualname__ = f"fused_cell[{kind}]"
    return body


for _kind, _packet in (("lstm", aten._thnn_fused_lstm_cell), ("gru", aten._thnn_fused_gru_cell)):
    register(_packet)(by_name(_packet, _fused_cell(_kind)))


# ---- backward -------------------------------------------------------------------------------------------


def _backward(forward: Cost, want_inputs: bool, want_weights: bool) -> Cost:
    macs = forward.macs * (want_inputs + want_weights)
    return Cost(macs=macs, flops=2 * macs + (forward.flops - 2 * forward.macs))


def _mkldnn_layer_backward_cost(
    input: TensorMeta,
    weight1: TensorMeta,
    weight2: TensorMeta,
    weight3: TensorMeta,
    weight4: TensorMeta,
    hx_: TensorMeta,
    cx_tmp: TensorMeta,
    output: TensorMeta,
    grad_output: TensorMeta | None,
    mode: int,
    hidden_size: int,
    has_biases: bool,
    batch_sizes: Sequence[int],
    *,
    out: Any,
    **_: Any,
) -> Cost:
    weights = _layer_weights(weight1, weight2, weight3, weight4, has_biases)
    forward = _stack_forward(input, weights, mode, hidden_size, 1, False, batch_sizes)
    return _with_bytes(_backward(forward, True, True), [input, *weights, output, grad_output, hx_, cx_tmp], out)


register(aten.mkldnn_rnn_layer_backward)(by_name(aten.mkldnn_rnn_layer_backward, _mkldnn_layer_backward_cost))


def _cudnn_backward_cost(
    input: TensorMeta,
    weight: Sequence[TensorMeta],
    hx: TensorMeta,
    cx: TensorMeta | None,
    output: TensorMeta,
    grad_output: TensorMeta | None,
    mode: int,
    hidden_size: int,
    num_layers: int,
    bidirectional: bool,
    batch_sizes: Sequence[int],
    output_mask: Sequence[bool],
    *,
    out: Any,
    **_: Any,
) -> Cost:
    # output_mask: (grad_input, grad_hx, grad_cx, grad_weight)
    forward = _stack_forward(input, weight, mode, hidden_size, num_layers, bidirectional, batch_sizes)
    cost = _backward(forward, any(output_mask[:3]), bool(output_mask[3]))
    return _with_bytes(cost, [input, *weight, output, grad_output, hx, cx], out)


register(aten._cudnn_rnn_backward)(by_name(aten._cudnn_rnn_backward, _cudnn_backward_cost))


# ---- packing --------------------------------------------------------------------------------------------


@register(aten._pack_padded_sequence, aten._pad_packed_sequence)
def pack_sequence_cost(*args: Any, out: Any, **_: Any) -> Cost:
    # a gather of the valid time steps into one packed block (or back): data movement, no arithmetic
    return Cost()

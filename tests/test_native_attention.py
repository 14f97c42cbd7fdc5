"""Issue 53: the dry run dispatches what the eager CPU forward dispatches for ``nn.MultiheadAttention``.

In eval without grad the CPU runs one ``aten._native_multi_head_attention`` a module call. The dry run now records
that call (its MACs unchanged), with the calls its kernel makes inside (``OpRecord.parts``), which are checked
against a real ``torch.profiler`` run of the same module; the predictor prices the fused call as its parts, and a
calibration takes no sample from it.
"""

from __future__ import annotations

import collections
import contextlib
from types import SimpleNamespace

import pytest
import torch
from torch import nn

import graphprof
from graphprof.base.choices import Phase
from graphprof.cost.parts import fused_parts
from graphprof.run import lowering

WIDTH, HEADS, TOKENS = 64, 4, 10


class Encoder(nn.Module):
    """A ViT-style block: batch-first self-attention without weights, then a linear layer."""

    def __init__(self, batch_first: bool = True) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(WIDTH, HEADS, batch_first=batch_first)
        self.out = nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.attn(x, x, x, need_weights=False)
        return self.out(y)


def _ops(profile: graphprof.Profile, module: str = "attn") -> list[str]:
    """The aten calls recorded in ``module``'s forward (``prim.*`` records are Python-level facts, not calls)."""
    return [
        op.op for row in profile.layers if row.module == module for op in row.ops if op.phase is Phase.FORWARD and op.op.startswith("aten.")
    ]


def _eager_children(model: nn.Module, x: torch.Tensor) -> tuple[list[str], list[str]]:
    """The top-level aten calls of the module's eager forward, and every call inside the fused one, in order."""
    from torch.profiler import profile

    with torch.no_grad():
        model(x)
        with profile(record_shapes=True) as prof:
            model.attn(x, x, x, need_weights=False)
    events = prof.events()
    top = [e.name for e in events if e.cpu_parent is None]
    fused = next(e for e in events if e.name == "aten::_native_multi_head_attention")

    def walk(e: object) -> list[str]:
        return [n for c in e.cpu_children for n in (c.name, *walk(c))]  # type: ignore[attr-defined]

    return top, walk(fused)


def test_the_dry_run_records_the_fused_call_the_eager_forward_runs() -> None:
    model, x = Encoder().eval(), torch.randn(2, TOKENS, WIDTH)
    top, inside = _eager_children(model, x)
    assert top == ["aten::_native_multi_head_attention"]  # the CPU's fast path, as torch.profiler sees it
    profile = graphprof.profile_model(model, input_shape=(2, TOKENS, WIDTH), mode="eval")
    costly = [op for op in _ops(profile) if op != "aten.transpose"]  # views of the module's own batch-first handling
    assert costly == ["aten._native_multi_head_attention"]
    # its parts are the costly calls the real kernel makes, in order (a view or a resolve_conj costs nothing)
    record = next(op for row in profile.layers for op in row.ops if op.op == "aten._native_multi_head_attention")
    parts = [p.op.removeprefix("aten.") for p in record.parts]
    ran = [n.removeprefix("aten::") for n in inside if n.removeprefix("aten::") in set(parts)]
    assert parts == ran == ["mm", "_transform_bias_rescale_qkv", "bmm", "_softmax", "bmm", "clone", "addmm"]
    # the projection in: 20 tokens x 64 -> 192; by hand 20 * 64 * 192 = 245,760 MACs
    assert record.parts[0].input_shapes == ((20, WIDTH), (WIDTH, 3 * WIDTH)) and record.parts[0].cost.macs == 245_760


def test_the_macs_are_the_decompositions() -> None:
    # the decomposition (the fast path switched off, as torch.backends.mha allows) and the fused call count the
    # same MACs: 4 projections of 20 x 64 x 64 and two products of 2 x 4 heads x 10 x 10 x 16, plus the linear
    # layer: 4 * 81,920 + 2 * 12,800 + 81,920 = 435,200
    fused = graphprof.profile_model(Encoder().eval(), input_shape=(2, TOKENS, WIDTH), mode="eval")
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        decomposed = graphprof.profile_model(Encoder().eval(), input_shape=(2, TOKENS, WIDTH), mode="eval")
    finally:
        torch.backends.mha.set_fastpath_enabled(True)
    assert "aten._native_multi_head_attention" not in _ops(decomposed)
    assert fused.total_macs == decomposed.total_macs == 435_200
    record = next(op for row in fused.layers for op in row.ops if op.parts)
    assert sum(p.cost.macs for p in record.parts) == record.cost.macs == 4 * 81_920 + 2 * 12_800


@pytest.mark.parametrize("case", ["train", "not batch first"])
def test_where_the_module_would_not_take_the_fast_path_neither_does_the_dry_run(case: str) -> None:
    # (with a mask the eager CPU still fuses, the mask merged; the dry run keeps the decomposition there: the
    # module has already turned a boolean mask into a float one when the mode sees it, so which it was is lost)
    model = Encoder(batch_first=case != "not batch first")
    shape = (TOKENS, 2, WIDTH) if case == "not batch first" else (2, TOKENS, WIDTH)
    profile = graphprof.profile_model(model, input_shape=shape, mode="train" if case == "train" else "eval")
    ops = _ops(profile)
    assert "aten._native_multi_head_attention" not in ops and {"aten.mm", "aten.addmm"} & set(ops)  # the slow path's projections
    if case != "train":  # the eager forward agrees: no fused call either
        with torch.no_grad(), torch.profiler.profile() as prof:
            model.eval()(torch.randn(shape))
        assert not any(e.name == "aten::_native_multi_head_attention" for e in prof.events())


def test_a_model_built_on_the_meta_device_records_the_fused_call_too() -> None:
    # a zoo model is built without weights, on the meta device, which the module's own fast path refuses:
    # the mode takes it there (without the mode the dry run recorded the slow path's bmm and softmax)
    with torch.device("meta"):
        model = Encoder().eval()
    profile = graphprof.profile_model(model, input_shape=(2, TOKENS, WIDTH), mode="eval")
    assert [op for op in _ops(profile) if op != "aten.transpose"] == ["aten._native_multi_head_attention"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("graphprof.session.lowering_context", lambda *a, **k: contextlib.nullcontext())
        with torch.device("meta"):
            bare = Encoder().eval()
        assert "aten.bmm" in _ops(graphprof.profile_model(bare, input_shape=(2, TOKENS, WIDTH), mode="eval"))


def test_each_target_has_its_mode() -> None:
    assert isinstance(lowering.lowering_context("cpu"), lowering.NativeAttentionMode)
    assert isinstance(lowering.lowering_context("cuda"), lowering.FusedAttentionMode)


def test_the_predictor_prices_the_fused_call_as_its_parts_and_calibration_takes_no_sample() -> None:
    import graphprof.devices.predict as predict_module
    from graphprof.calibrate.samples import samples_from_context
    from graphprof.devices.opmodel import ALONE, IN_CONTEXT, call_of
    from graphprof.devices.predict import predict_ops
    from tests.test_predict_breakdown import _kind_cpu

    hw = _kind_cpu()
    profile = graphprof.profile_model(Encoder().eval(), input_shape=(2, TOKENS, WIDTH), mode="eval")
    record = next(op for row in profile.layers for op in row.ops if op.parts)
    contexts: list[tuple[str, float]] = []

    def spy(op: object, context: float = IN_CONTEXT) -> object:
        contexts.append((op.op, context))  # type: ignore[attr-defined]
        return call_of(op, context)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(predict_module, "call_of", spy)
        whole = predict_ops([record, record.parts[0]], "float32", hw, hw.calibration)  # type: ignore[arg-type]
    # the fused call is priced as its seven parts, each as the grid's loops ran; a call of its own, in context
    assert contexts == [(p.op, ALONE) for p in record.parts] + [("aten.mm", IN_CONTEXT)]
    assert whole[0] > whole[1] > 0 and call_of(record.parts[0], ALONE)[1][-2] == ALONE  # type: ignore[index]
    # a measured forward's calls, paired by name: the fused call pairs, and gives no sample
    calls = [op for row in profile.layers for op in row.ops if op.phase is Phase.FORWARD and op.op.startswith("aten.")]
    times = SimpleNamespace(ops=[(op.op.replace("aten.", "aten::"), 1e-4) for op in calls], forward_s=1e-4 * len(calls),
                            ops_s=1e-4 * len(calls), fault_bytes=0.0)  # fmt: skip
    kinds = collections.Counter(s.kind for s in samples_from_context(profile, times))
    assert "sdpa" not in kinds and kinds["linear"] == 1  # the block's own linear layer only


def test_parts_only_for_known_forward_forms() -> None:
    from graphprof.cost.count import op_record
    from graphprof.formulas import TensorMeta
    from graphprof.run.propagate import OpCall

    f32 = torch.float32
    x, w, b = TensorMeta((2, TOKENS, WIDTH), f32), TensorMeta((3 * WIDTH, WIDTH), f32), TensorMeta((3 * WIDTH,), f32)
    pw, pb = TensorMeta((WIDTH, WIDTH), f32), TensorMeta((WIDTH,), f32)
    func = torch.ops.aten._native_multi_head_attention.default
    args = (x, x, x, WIDTH, HEADS, w, b, pw, pb)
    # as the module's fast path calls it: no mask, no weights (the schema's default returns them)
    assert len(fused_parts(OpCall(func, (*args, None, False), {}, x, Phase.FORWARD), op_record)) == 7
    assert len(fused_parts(OpCall(func, args, {"need_weights": False}, x, Phase.FORWARD), op_record)) == 7
    assert fused_parts(OpCall(func, (*args, TensorMeta((TOKENS, TOKENS), torch.bool), False), {}, x, Phase.FORWARD), op_record) == ()
    assert fused_parts(OpCall(func, args, {"need_weights": True}, x, Phase.FORWARD), op_record) == ()
    assert fused_parts(OpCall(func, args, {}, x, Phase.FORWARD), op_record) == ()  # need_weights defaults to True
    assert fused_parts(OpCall(torch.ops.aten.mm.default, (pw, pw), {}, pw, Phase.FORWARD), op_record) == ()


class Attend(nn.Module):
    """Attention written with ``F.scaled_dot_product_attention`` (timm's and transformers' form)."""

    def __init__(self, mask: str | None = None) -> None:
        super().__init__()
        self.qkv, self.mask = nn.Linear(WIDTH, 3 * WIDTH), mask

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, HEADS, WIDTH // HEADS).permute(2, 0, 3, 1, 4).unbind(0)
        mask = None
        if self.mask == "bool":
            mask = torch.ones(t, t, dtype=torch.bool).tril()
        elif self.mask == "float":
            mask = torch.zeros(t, t)
        return nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(b, t, WIDTH)


def _top_level(model: nn.Module, x: torch.Tensor) -> list[str]:
    """The costly aten calls the eager forward dispatches (what a dispatch mode sees), in order."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: list[str] = []

    class Tap(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            seen.append(str(func.overloadpacket.__name__))
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), Tap():
        model(x)
    return seen


@pytest.mark.parametrize("mask", [None, "bool", "float"])
def test_sdpa_records_the_cpu_flash_kernel_the_eager_forward_runs(mask: str | None) -> None:
    model, x = Attend(mask).eval(), torch.randn(2, TOKENS, WIDTH)
    eager = _top_level(model, x)
    assert "_scaled_dot_product_flash_attention_for_cpu" in eager and "bmm" not in eager
    for meta in (False, True):  # a model with weights, and one built on the meta device as the zoo builds them
        with torch.device("meta") if meta else contextlib.nullcontext():
            built = Attend(mask).eval()
        ops = [op.removeprefix("aten.") for op in _ops(graphprof.profile_model(built, input_shape=(2, TOKENS, WIDTH), mode="eval"), None)]
        assert "_scaled_dot_product_flash_attention_for_cpu" in ops and "bmm" not in ops, ops
    # the MACs are the decomposition's: 2 x 20 x 64 x 192 projection + 2 x (2 x 4 x 10 x 10 x 16) products
    fused = graphprof.profile_model(Attend(mask).eval(), input_shape=(2, TOKENS, WIDTH), mode="eval")
    assert fused.total_macs == 20 * WIDTH * 3 * WIDTH + 2 * (2 * HEADS * TOKENS * TOKENS * (WIDTH // HEADS))


def test_sdpa_in_training_runs_the_flash_kernel_and_its_backward_as_eager_does() -> None:
    model, x = Attend(), torch.randn(2, TOKENS, WIDTH)
    from torch.profiler import profile

    with profile() as prof:
        model(x).sum().backward()
    eager = {e.name.removeprefix("aten::") for e in prof.events()}
    assert {"_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward"} <= eager
    with torch.device("meta"):
        built = Attend()
    train = graphprof.profile_model(built, input_shape=(2, TOKENS, WIDTH), mode="train")
    ops = {op.op for row in train.layers for op in row.ops}
    assert {"aten._scaled_dot_product_flash_attention_for_cpu", "aten._scaled_dot_product_flash_attention_for_cpu_backward"} <= ops


def test_dropout_keeps_the_decomposition_as_the_cpu_does() -> None:
    q = torch.randn(1, HEADS, TOKENS, WIDTH // HEADS)
    with torch.device("meta"):
        meta = q.to("meta")
    with lowering.NativeAttentionMode():
        assert lowering._cpu_flash_sdpa(meta, meta, meta, dropout_p=0.1) is None  # torch picks the math path
        assert lowering._cpu_flash_sdpa(meta, meta, meta) is not None

"""The seeds' rows that ran but behaved differently from what their users expect (issue 20)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import graphprof
from graphprof.capture.methods import METHODS, dynamo_skip_reason
from graphprof.render.tree import module_shapes


@pytest.mark.slow
def test_yolov8n_output_shape_is_the_models_real_one() -> None:
    """Seed 001's headline model: the detect head returns (1, 84, 8400) (4 box + 80 class rows, one column
    per anchor: 80x80 + 40x40 + 20x20 = 8400), and so does the model, whatever the capture."""
    p = graphprof.profile_model("yolov8n")
    shapes = module_shapes(p)
    assert shapes["model.22"][0] == (1, 84, 8400)
    assert shapes[""][0] == (1, 84, 8400) and shapes["model"][0] == (1, 84, 8400)
    attempts = dict(p.capture_attempts)
    assert p.capture_method == "eager" and attempts["dynamo.export"].startswith("not tried: Dynamo export of YOLO")


class _ShapeLoop(nn.Module):
    """A Python loop over a dimension: symbolic tracing cannot take it, Dynamo unrolls it. The residual add
    runs in the container's own forward, so Dynamo's graph gives it layers the eager capture would not."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(x.shape[0]):
            x = self.l(x) + x
        return x


def test_auto_is_fx_then_dynamo_then_eager() -> None:
    """Seed 001's design: FX, with Dynamo as the fallback; the report says why each earlier one failed."""
    p = graphprof.profile_model(_ShapeLoop(), input_shape=(3, 8))
    assert p.capture_method == "dynamo.export"
    assert [m for m, _ in p.capture_attempts] == ["fx.symbolic_trace"]  # the eager try before it is not an attempt
    assert p.total_macs == 3 * (3 * 8 * 8)  # three calls, each 3 rows x 8 in x 8 out


def test_families_where_dynamo_must_fail_or_crawl_skip_it_with_the_reason() -> None:
    assert dynamo_skip_reason("detection", METHODS) is not None
    assert dynamo_skip_reason("hf", METHODS) is not None
    assert dynamo_skip_reason("classification", METHODS) is None
    assert dynamo_skip_reason("detection", ("dynamo.export",)) is None  # --capture dynamo forces it


def test_llama_graph_nodes_all_have_shapes_and_attention_is_named_as_called() -> None:
    """Seed 000's LLaMA graph: every module and op node has an output shape, and the attention node is
    named by what the model called (F.scaled_dot_product_attention), not by the CPU kernel it lowered to."""
    pm = graphprof.prepare("hf:llama", device="cpu")
    module_graph, detail = pm.graph()
    assert detail is not None
    assert all(n.output_shapes for n in module_graph.nodes) and all(n.output_shapes for n in detail.nodes)
    names = [n.name for n in module_graph.nodes] + [n.type for n in detail.nodes]
    assert any("scaled_dot_product_attention" in n for n in names)
    assert not any("_for_cpu" in n or "flash" in n for n in names)


def test_a_transformers_model_object_skips_dynamo_like_its_name() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    from graphprof.capture.methods import family_of

    cfg = LlamaConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=64
    )
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
    assert family_of(model, "custom") == "hf" and family_of(nn.Linear(2, 2), "custom") == "custom"
    p = graphprof.profile_model(model, example_kwargs={"input_ids": torch.zeros(1, 8, dtype=torch.long, device="meta")})
    assert dict(p.capture_attempts)["dynamo.export"].startswith("not tried: transformers")

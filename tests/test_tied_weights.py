"""Tied weights stay tied through every copy and conversion graphprof makes, on every catalogue model that ties them.

For each such family (a small config of it, with the same classes and the same tied names), each
transformation is checked against the model the user gave: the same names share one parameter (``a is b``),
the unique parameter count is the same, and where a figure follows (the step's parameter bytes, the shards
of FSDP2, a pipeline stage's weights) it equals the one a real run of torch gives.
"""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Iterator
from multiprocessing.reduction import ForkingPickler
from typing import Any

import pytest
import torch
from torch import nn

from graphprof.base.tied import keep_ties, retie, tied_groups
from graphprof.run.events import Observer, RunContext

transformers = pytest.importorskip("transformers")

#: The catalogue's tying families, small: the same model classes and the same tied names as the presets.
SMALL = {
    "gpt2": "n_layer=2&n_embd=64&n_head=2&vocab_size=1000&n_positions=128",
    "gemma-2-9b": "num_hidden_layers=2&hidden_size=64&intermediate_size=128&num_attention_heads=2"
    "&num_key_value_heads=1&head_dim=32&vocab_size=1000",
    "gemma-3-1b": "num_hidden_layers=2&hidden_size=64&intermediate_size=128&num_attention_heads=2"
    "&num_key_value_heads=1&head_dim=32&vocab_size=1000",
    "mamba-2.8b": "num_hidden_layers=2&hidden_size=64&vocab_size=1000&time_step_rank=8",
    "t5-base": "d_model=64&d_ff=128&num_layers=2&num_heads=2&d_kv=32&vocab_size=1000",
    "whisper-small": "d_model=64&encoder_layers=2&decoder_layers=2&encoder_attention_heads=2&decoder_attention_heads=2"
    "&encoder_ffn_dim=128&decoder_ffn_dim=128&vocab_size=1000&pad_token_id=0&bos_token_id=1&eos_token_id=2"
    "&decoder_start_token_id=1",
}  # fmt: skip


def _resolve(name: str, device: str) -> Any:
    from graphprof.models import resolve_model

    return resolve_model(f"hf:{name}?{SMALL[name]}", input_shape=(1, 16), device=device)


def _unique_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _assert_tied_as(converted: nn.Module, original: nn.Module) -> None:
    """The same names share one parameter, and nothing else is shared or lost."""
    groups = tied_groups(original)
    assert groups, "the model given ties nothing: the check would prove nothing"
    assert tied_groups(converted) == groups
    for first, *others in groups:
        assert all(converted.get_parameter(name) is converted.get_parameter(first) for name in others)
    assert _unique_params(converted) == _unique_params(original)


# ---- the catalogue ----------------------------------------------------------------------------------------


def test_every_catalogue_model_that_ties_is_checked_with_its_tied_names() -> None:
    from graphprof.models import resolve_model
    from graphprof.models.hf import PRESETS

    tying = {}
    for name in PRESETS:  # on the meta device: Llama-3-70B allocates nothing
        groups = tied_groups(resolve_model(f"hf:{name}", device="meta").model)
        if groups:
            tying[name] = groups
    assert set(tying) == set(SMALL)
    for name, groups in tying.items():
        assert tied_groups(_resolve(name, "meta").model) == groups, name


# ---- torch's conversions, and graphprof's helper around them ------------------------------------------------


@contextlib.contextmanager
def _overwrite_on_conversion() -> Iterator[None]:
    before = torch.__future__.get_overwrite_module_params_on_conversion()
    torch.__future__.set_overwrite_module_params_on_conversion(True)
    try:
        yield
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(before)


def test_which_conversions_untie_and_keep_ties_around_each() -> None:
    import torch.multiprocessing  # noqa: F401 - puts torch's tensor reductions (shared memory) in ForkingPickler

    meta = _resolve("gpt2", "meta").model
    cpu = _resolve("gpt2", "cpu").model
    untie = {"to_empty from meta": (meta, lambda m: m.to_empty(device="cpu")), "to meta": (cpu, lambda m: m.to("meta"))}
    for what, (model, convert) in untie.items():
        assert not tied_groups(convert(_copy(model))), what
        _assert_tied_as(keep_ties(_copy(model), convert), model)
    # these keep them: a deep copy and a pickle (the partition run's processes get the model so) by their
    # memo, a dtype cast by changing each parameter in place (torch's default)
    _assert_tied_as(_copy(cpu), cpu)
    _assert_tied_as(pickle.loads(ForkingPickler.dumps(cpu)), cpu)
    _assert_tied_as(_copy(cpu).to(torch.bfloat16), cpu)
    with _overwrite_on_conversion():  # a user's global switch makes every conversion a new parameter per name
        assert not tied_groups(_copy(cpu).to(torch.bfloat16))
        _assert_tied_as(keep_ties(_copy(cpu), lambda m: m.to(torch.bfloat16)), cpu)


def _copy(model: nn.Module) -> nn.Module:
    import copy

    return copy.deepcopy(model)


def test_retie_points_every_name_at_the_first() -> None:
    model = _resolve("t5-base", "meta").model
    copied = _copy(model).to_empty(device="cpu")
    assert not tied_groups(copied)  # four embedding matrices where T5 has one
    retie(copied, tied_groups(model))
    _assert_tied_as(copied, model)


# ---- building on the meta device (graphprof.models.device) ------------------------------------------------


class _SharedBeforeRegistration(nn.Module):
    """Ties one CPU parameter to two modules and reads a value while it builds (meta way 2: the
    parameters move to meta as they are registered)."""

    def __init__(self) -> None:
        super().__init__()
        shared = nn.Parameter(torch.randn(10, 4))
        self.embed, self.head = nn.Embedding(10, 4), nn.Linear(4, 10, bias=False)
        self.embed.weight = shared
        self.head.weight = shared
        self.steps = int(torch.arange(3).sum())  # no value on the meta device: way 1 fails


class _MovedAfterwards(nn.Module):
    """Ties after building and computes with a buffer's value (meta way 3: built on CPU, moved to meta)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.head = nn.Embedding(10, 4), nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight
        self.register_buffer("scale", torch.ones(1))
        self.scale.mul_(2.0)
        assert float(self.scale) == 2.0  # no value on the meta device: ways 1 and 2 fail


@pytest.mark.parametrize("cls", [_SharedBeforeRegistration, _MovedAfterwards])
def test_a_build_on_the_meta_device_keeps_ties(cls: type[nn.Module]) -> None:
    from graphprof.models.device import META, build_module

    built, notes = build_module(cls, META, cls.__name__)
    assert built.head.weight.is_meta and (cls is _MovedAfterwards) == bool(notes)  # the way that was taken
    _assert_tied_as(built, cls())


def test_a_user_module_object_moved_to_the_meta_device_keeps_ties(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from graphprof.models import resolve_model

    (tmp_path / "tied_user_model.py").write_text(
        "import torch\n"
        "model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10, bias=False))\n"
        "model[1].weight = model[0].weight\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        resolved = resolve_model("tied_user_model:model", input_shape=(1, 3), device="meta")
    finally:
        sys.modules.pop("tied_user_model", None)
    assert resolved.model[1].weight.is_meta and resolved.model[1].weight is resolved.model[0].weight


# ---- measuring: a meta model materialised with seeded values (graphprof.measure.run) ------------------------


@pytest.mark.parametrize("dtype", [None, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(SMALL))
def test_materialised_copy_keeps_ties(name: str, dtype: torch.dtype | None) -> None:
    from graphprof.measure.run import materialized

    model = _resolve(name, "meta").model
    work, note = materialized(model, torch.device("cpu"), dtype, seed=0)
    assert note is not None and "meta" in note
    _assert_tied_as(work, model)
    assert all(p.is_meta for p in model.parameters())  # the user's model untouched


# ---- the planned training step (graphprof.training.step), with and without FSDP -------------------------------


class _Copy(Observer):
    """An observer of the step that only keeps the step's copy of the model."""

    def __init__(self) -> None:
        self.model: nn.Module | None = None

    def started(self, ctx: RunContext) -> None:
        self.model = ctx.model


@pytest.mark.parametrize("name", sorted(SMALL))
def test_planned_step_holds_each_tied_weight_once(name: str) -> None:
    from graphprof.training.step import StepInputs, simulate_step

    r = _resolve(name, "meta")
    seen = _Copy()
    _, base = simulate_step(StepInputs(r.model, tuple(r.args), dict(r.kwargs), None), [seen])
    assert seen.model is not None
    _assert_tied_as(seen.model, r.model)
    tensors = [*r.model.parameters(), *r.model.buffers()]
    assert base["parameters"] == sum(t.numel() * t.element_size() for t in tensors)
    # AdamW: two moments per trained parameter, and a float32 step count each (Whisper's positions are frozen)
    params = [p for p in r.model.parameters() if p.requires_grad]
    assert base["optimizer_state"] == 2 * sum(p.numel() * p.element_size() for p in params) + 4 * len(params)


def _quarter_bytes(model: nn.Module) -> int:
    """What one of 4 FSDP2 ranks holds: each parameter once, dim 0 padded to a multiple of 4, a quarter of it."""
    return sum(-(-p.shape[0] // 4) * (p.numel() // max(p.shape[0], 1)) * p.element_size() for p in model.parameters())


@pytest.mark.parametrize("name", ["gpt2", "t5-base"])
def test_planned_sharded_and_checkpointed_step_holds_each_tied_weight_once(name: str) -> None:
    from graphprof.base.choices import Optimizer
    from graphprof.run.step import checkpointed
    from graphprof.session import build_model
    from graphprof.sharding.spec import ShardSpec
    from graphprof.training import plan_memory
    from graphprof.training.simulate import plan_step

    model = _resolve(name, "meta").model
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    plan = plan_memory(f"hf:{name}?{SMALL[name]}", input_shape=(1, 16), shard="fsdp:4")
    assert {p.breakdown.parameters for p in plan.phases} == {_quarter_bytes(model) + buffers}
    step = build_model(f"hf:{name}?{SMALL[name]}", input_shape=(1, 16))
    blocks = {n for n, m in model.named_modules() if n.endswith("block.0") or n.endswith("h.0")}
    wrapped = plan_step(step, dtype=None, optimizer=Optimizer.ADAMW, foreach=False, shard=ShardSpec(fsdp=4), wraps=(checkpointed(blocks),))
    assert {p.breakdown.parameters for p in wrapped.phases} == {_quarter_bytes(model) + buffers}


# ---- the sharded step (graphprof.sharding) against a real FSDP2 wrap ---------------------------------------


@pytest.mark.parametrize("name", sorted(SMALL))
def test_sharded_step_shards_match_a_real_fsdp2_wrap_to_the_byte(name: str) -> None:
    # the real wrap: fully_shard on the model built on the CPU, same units, the same fake process group of 4
    from torch.distributed.fsdp import fully_shard

    from graphprof.sharding.run import run_sharded_step
    from graphprof.sharding.spec import ShardSpec
    from graphprof.sharding.wraps import fake_world, shard_units, sharding_wraps

    r = _resolve(name, "meta")
    spec = ShardSpec(fsdp=4)
    with fake_world(spec) as meshes:
        wraps = sharding_wraps(spec, meshes, tuple(r.args), dict(r.kwargs), r.name)
        step = run_sharded_step(r.model, tuple(r.args), dict(r.kwargs), wraps, None)
        real = _resolve(name, "cpu").model
        for unit in shard_units(real):
            fully_shard(unit, mesh=meshes.dp)
        fully_shard(real, mesh=meshes.dp)
        _assert_tied_as(real, r.model)  # FSDP2 keeps the user's ties: one sharded parameter under each name
        real_bytes = sum(p.to_local().numel() * p.element_size() for p in real.parameters())  # type: ignore[attr-defined]
    assert step.shard_bytes == real_bytes
    assert step.shard_bytes == _quarter_bytes(r.model)


def test_units_holding_a_tied_weight_are_sharded_as_one_fsdp_group() -> None:
    # one layer each: no repeated blocks, so the units are the children, WhisperModel and proj_out, which
    # hold the decoder's embedding between them; FSDP2 refuses two groups managing it
    from torch.distributed.fsdp import fully_shard

    from graphprof.sharding.run import run_sharded_step
    from graphprof.sharding.spec import ShardSpec
    from graphprof.sharding.wraps import fake_world, fsdp_groups, shard_units, sharding_wraps

    spec = ShardSpec(fsdp=4)
    one_layer = SMALL["whisper-small"].replace("encoder_layers=2&decoder_layers=2", "encoder_layers=1&decoder_layers=1")
    from graphprof.models import resolve_model

    r = resolve_model(f"hf:whisper-small?{one_layer}", input_shape=(1, 16), device="meta")
    assert [[type(m).__name__ for m in g] for g in fsdp_groups(shard_units(r.model))] == [["WhisperModel", "Linear"]]
    with fake_world(spec) as meshes:
        wraps = sharding_wraps(spec, meshes, tuple(r.args), dict(r.kwargs), r.name)
        step = run_sharded_step(r.model, tuple(r.args), dict(r.kwargs), wraps, None)
        real = resolve_model(f"hf:whisper-small?{one_layer}", input_shape=(1, 16), device="cpu").model
        fully_shard([real.model, real.proj_out], mesh=meshes.dp)  # what FSDP2's own message asks for
        fully_shard(real, mesh=meshes.dp)
        real_bytes = sum(p.to_local().numel() * p.element_size() for p in real.parameters())  # type: ignore[attr-defined]
    assert step.shard_bytes == real_bytes
    assert step.unit_bytes == [sum(p.numel() * p.element_size() for p in r.model.parameters())]  # one group: all of it


# ---- pipeline stages (graphprof.partition) against torch.distributed.pipelining's own split ---------------


def _pipelined_stage_params(model: nn.Module, kwargs: dict[str, Any], split_points: list[str]) -> list[int]:
    """Parameters each stage of ``pipeline()``'s split reads when the pipeline runs: the parameters of the
    stage modules that are called (a stage module also keeps a leftover reference of a tied name it never
    calls, GPT-2's first stage an ``lm_head``: not a weight the stage needs)."""
    from torch.distributed.pipelining import SplitPoint, pipeline

    pipe = pipeline(model, mb_args=(), mb_kwargs=kwargs, split_spec={p: SplitPoint.BEGINNING for p in split_points})
    called: set[int] = set()
    for i in range(pipe.num_stages):
        for module in pipe.get_stage_module(i).modules():
            module.register_forward_pre_hook(lambda m, args: called.add(id(m)))
    with torch.no_grad():
        pipe(**kwargs)
    counts = []
    for i in range(pipe.num_stages):
        modules = [m for m in pipe.get_stage_module(i).modules() if id(m) in called]
        counts.append(sum(p.numel() for p in {id(p): p for m in modules for p in m.parameters(recurse=False)}.values()))
    return counts


def _planned_stage_params(name: str, split_points: list[str]) -> tuple[list[int], Any]:
    from graphprof.partition.devices import Links, as_devices, kinds_of
    from graphprof.partition.plan import make_stages
    from graphprof.partition.planner import cost_table, problem_of
    from graphprof.partition.solver import evaluate
    from graphprof.prepared import prepare

    devices = as_devices(f"h100:{len(split_points) + 1}")
    costs, _ = cost_table(prepare(f"hf:{name}?{SMALL[name]}&use_cache=False", input_shape=(1, 16)), devices)
    names = [u.name for u in costs.units]
    bounds = [0, *(names.index(p) for p in split_points), len(names)]
    problem = problem_of(costs, devices, Links())
    solution = evaluate(problem, [(i, j, 0) for i, j in zip(bounds, bounds[1:], strict=False)])
    return [s.params for s in make_stages(problem, costs, devices, solution, kinds_of(devices))], costs


@pytest.mark.parametrize(("name", "split_points"), [("gpt2", ["transformer.h.1"]), ("t5-base", ["encoder.block.1", "decoder.block.0"])])
def test_pipeline_stages_hold_a_tied_weight_as_pipelining_does(name: str, split_points: list[str]) -> None:
    r = _resolve(name, "cpu")
    r.model.config.use_cache = False  # pipeline() traces with torch.export, which takes no cache object out
    planned, costs = _planned_stage_params(name, split_points)
    assert planned == _pipelined_stage_params(r.model, dict(r.kwargs), split_points)
    # more than the model: the stages after the first that use the embedding keep a copy each
    (weight,) = costs.shared
    assert sum(planned) == _unique_params(r.model) + weight.params * (len(planned) - 1)


def test_a_plan_counts_and_names_the_copy_a_later_stage_keeps(tmp_path: Any) -> None:
    import json

    from typer.testing import CliRunner

    from graphprof.schemas import validate
    from graphprof_cli.main import app

    # 172,288 parameters (689 kB in float32) over devices of 600 kB: two stages, the LM head in the second
    out = tmp_path / "plan.json"
    argv = ["partition", "--model", f"hf:gpt2?{SMALL['gpt2']}", "--devices", "h100:3@0.0006", "--input-shape", "1,16", "-o", str(out)]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text())
    validate(document)
    first, last = document["stages"]
    assert (first["first"], last["last"]) == ("transformer.wte", "lm_head")
    embedding = 1000 * 64
    assert first["params"] + last["params"] == 172_288 + embedding  # the last stage's own copy of the embedding
    assert last["weight_bytes"] >= 4 * embedding and last["fits"]
    assert document["cost_table"]["shared_weights"] == [
        {"names": ["transformer.wte.weight", "lm_head.weight"], "units": [0, 6], "params": embedding, "weight_bytes": 4 * embedding}
    ]
    note = "tied weights: transformer.wte.weight is lm_head.weight (64,000 parameters): held by stage 0, and stage 1 keeps a copy"
    assert any(n.startswith(note) for n in document["notes"])

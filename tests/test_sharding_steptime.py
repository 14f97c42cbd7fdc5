"""Issue 51: a sharded training step's time, from the dry run's calls, the kernel table and the links.

Every figure is checked two ways: by hand (the arithmetic in a comment) on the small parts (a collective, a
timeline, a fused chain, a recomputation), and by invariants on a whole step of a small Llama (the breakdown
sums to the step, tokens per second times the step is the step's tokens, MFU is model FLOPs x rate / peak,
micro-batches scale the step, checkpointing adds recomputation only).
"""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from graphprof.base.choices import ActivationCheckpoint, OpStatus, Phase
from graphprof.cost.fusion import fold_chains
from graphprof.cost.result import OpRecord
from graphprof.devices.derived import kernel_table
from graphprof.devices.hardware import HARDWARE, get_hardware
from graphprof.devices.links import Group, collective_seconds, group_layout
from graphprof.devices.predict import kernel_seconds
from graphprof.errors import InvalidInputError
from graphprof.formulas import Cost
from graphprof.sharding import ShardSpec, StepOptions
from graphprof.sharding.steptime import price_step, with_recompute
from graphprof.sharding.timeline import BLOCKING, GATHER, KERNEL, SCATTER, Item, simulate

MS = 1e-3
H100 = get_hardware("h100")


# ---- links: NCCL's ring model, by hand ---------------------------------------------------------------


def test_all_gather_in_one_node_by_hand() -> None:
    # (7/8) x 436e6 B / 450e9 B/s = 0.847778 ms; latency 8.4 us + 7 hops x 3.4 us = 32.2 us
    t = collective_seconds("all_gather", 436e6, Group(8, 1), H100.links)  # type: ignore[arg-type]
    assert t == pytest.approx(7 / 8 * 436e6 / 450e9 + 32.2e-6, rel=1e-12)
    assert t == pytest.approx(0.879978e-3, rel=1e-5)


def test_reduce_scatter_across_two_nodes_by_hand() -> None:
    # 16 ranks on 2 nodes, 8 a node: the ring crosses the network over 8 NICs, bus = min(450, 8 x 50) = 400 GB/s;
    # 15 steps, 1 of them between nodes: 8.4 + 14 x 3.4 + 9.6 = 65.6 us; 15/16 x 1e9 / 400e9 = 2.34375 ms
    t = collective_seconds("reduce_scatter", 1e9, Group(16, 2), H100.links)  # type: ignore[arg-type]
    assert t == pytest.approx(2.34375e-3 + 65.6e-6, rel=1e-12)
    # one GPU of the group a node (FSDP beside tensor parallelism over 8): one NIC, 50 GB/s; 15 network steps
    t = collective_seconds("reduce_scatter", 1e9, Group(16, 16), H100.links)  # type: ignore[arg-type]
    assert t == pytest.approx(15 / 16 * 1e9 / 50e9 + (8.4 + 15 * 9.6) * 1e-6, rel=1e-12)


def test_all_reduce_is_twice_a_ring_inside_a_node_and_never_worse_than_a_ring_across() -> None:
    links = H100.links
    assert links is not None
    one = collective_seconds("all_reduce", 1e8, Group(8, 1), links)
    # 2 x 7/8 x 1e8 / 450e9 + 8.4 us + 14 x 3.4 us
    assert one == pytest.approx(2 * 7 / 8 * 1e8 / 450e9 + (8.4 + 14 * 3.4) * 1e-6, rel=1e-12)
    many = Group(64, 8)
    ring = 8.4e-6 + (126 - 14) * 3.4e-6 + 14 * 9.6e-6 + 2 * 63 / 64 * 1e8 / 400e9
    assert collective_seconds("all_reduce", 1e8, many, links) <= ring * (1 + 1e-12)


def test_collectives_scale_with_bytes_and_vanish_on_one_rank() -> None:
    links = HARDWARE["a100"].links
    assert links is not None
    assert collective_seconds("all_gather", 1e9, Group(1, 1), links) == 0.0
    small, large = (collective_seconds("all_gather", b, Group(64, 8), links) for b in (1e8, 2e8))
    latency = 2 * small - large  # t = latency + bytes x c: twice the bytes adds the transfer once more
    assert latency == pytest.approx(8.4e-6 + 56 * 3.4e-6 + 7 * 9.6e-6, rel=1e-9)


def test_group_layout_and_a_network_nobody_published() -> None:
    assert group_layout(64, 8, 8) == (Group(64, 64), Group(8, 1))  # TP inside a node, FSDP one GPU a node
    assert group_layout(16, 1, 8) == (Group(16, 2), Group(1, 1))
    assert group_layout(4, 2, 8) == (Group(4, 1), Group(2, 1))
    pcie = HARDWARE["h100-pcie"].links
    assert pcie is not None and pcie.inter is None
    with pytest.raises(InvalidInputError, match="no published network"):
        collective_seconds("all_gather", 1e9, Group(16, 2), pcie, "h100-pcie")


def test_every_link_is_sourced_and_one_direction_of_the_printed_figure() -> None:
    for hw in HARDWARE.values():
        if hw.links is None:
            continue
        for link in (hw.links.intra, hw.links.inter):
            if link is not None:
                assert link.gbs > 0 and link.source and link.label
    assert H100.links is not None and H100.links.intra.gbs == 900 / 2  # "NVLink 900GB/s", both directions
    assert H100.links.inter is not None and H100.links.inter.gbs == 400 / 8  # 400 Gb/s a GPU


# ---- the derived kernel model --------------------------------------------------------------------------


def _mm(m: int, k: int, n: int, phase: Phase = Phase.FORWARD) -> OpRecord:
    cost = Cost(macs=m * k * n, flops=2 * m * k * n, bytes_read=2 * (m * k + k * n), bytes_written=2 * m * n)
    return OpRecord("aten.mm", OpStatus.COUNTED, phase, cost, ((m, k), (k, n)), ((m, n),))


def test_a_preset_without_a_table_borrows_the_h100_efficiencies_and_says_so() -> None:
    own, note = kernel_table(H100)
    assert own is H100.calibration and note is None
    a100 = HARDWARE["a100"]
    derived, note = kernel_table(a100)
    assert note is not None and "derived" in note and "a100" in note
    big = _mm(8192, 8192, 8192)  # 1.1 TFLOP: compute-bound on both, so time scales with the peak
    ratio = kernel_seconds(big, "bfloat16", a100, derived) / kernel_seconds(big, "bfloat16", H100, own)
    assert ratio == pytest.approx(989.5 / 312.0, rel=0.01)  # the matrix products' 16 us latency is the 1%
    with pytest.raises(InvalidInputError, match="GPUs"):
        kernel_table(HARDWARE["desktop-cpu"])


# ---- the timeline, by hand ------------------------------------------------------------------------------


def _k(ms: float, *, consumes: bool = False, host: float = 0.0) -> Item:
    return Item(KERNEL, ms * MS, host * MS, "matmul", consumes=consumes)


def test_prefetch_hides_the_second_all_gather_and_the_last_reduce_scatter_is_exposed() -> None:
    # the module docstring's example: AG 2 | unit 0 (1 + 2) | AG 2 | unit 1 (1 + 2) | RS 2
    # AG0 0-2 exposed; unit 0 2-5; AG1 starts with unit 0 (2-4), hidden; unit 1 5-8; RS 8-10 exposed
    items = [Item(GATHER, 2 * MS), _k(1, consumes=True), _k(2), Item(GATHER, 2 * MS), _k(1, consumes=True), _k(2), Item(SCATTER, 2 * MS)]
    t = simulate(items, overlap=1.0)
    assert t.compute_s == pytest.approx(6 * MS) and t.communication_s == pytest.approx(4 * MS) and t.host_s == 0.0
    assert t.total_s == pytest.approx(10 * MS) and t.collectives_s == pytest.approx(6 * MS)


def test_an_all_gather_longer_than_the_unit_before_shows_its_excess() -> None:
    # AG0 0-2; unit 0 2-3; AG1 2-7 (5 ms) under 1 ms of unit 0: the copy-out of unit 1 waits 7 - 3 = 4 ms
    items = [Item(GATHER, 2 * MS), _k(1, consumes=True), Item(GATHER, 5 * MS), _k(1, consumes=True)]
    t = simulate(items, overlap=1.0)
    assert t.communication_s == pytest.approx(2 * MS + 4 * MS) and t.total_s == pytest.approx(8 * MS)


def test_short_kernels_wait_for_the_host_and_blocking_collectives_add_up() -> None:
    # 5 kernels of 1 us launched 10 us apart: idle 10, then 9 x 4; end = 5 x 10 + 1 = 51 us
    t = simulate([_k(1e-3, host=10e-3) for _ in range(5)], overlap=1.0)
    assert t.total_s == pytest.approx(51e-6) and t.compute_s == pytest.approx(5e-6) and t.host_s == pytest.approx(46e-6)
    blocked = simulate([_k(1), Item(BLOCKING, 3 * MS), _k(1)], overlap=1.0)
    assert blocked.total_s == pytest.approx(5 * MS) and blocked.communication_s == pytest.approx(3 * MS)
    slower = simulate([_k(1)], overlap=1.0, scale={"matmul": 1.5})
    assert slower.total_s == pytest.approx(1.5 * MS)


# ---- compiled chains and recomputation, by hand -----------------------------------------------------------


def _pointwise(op: str, read: int, written: int, flops: int) -> OpRecord:
    return OpRecord(op, OpStatus.COUNTED, Phase.FORWARD, Cost(flops=flops, bytes_read=read, bytes_written=written), ((8,),), ((8,),))


def test_a_chain_of_element_wise_calls_is_one_kernel_reading_only_what_comes_from_outside() -> None:
    view = OpRecord("aten.view", OpStatus.ZERO_COST, Phase.FORWARD, Cost())
    records = [_mm(4, 4, 4), _pointwise("aten.add", 64, 32, 8), view, _pointwise("aten.mul", 64, 32, 8), _mm(4, 4, 4)]
    folded = fold_chains(records)
    assert [r.op for r in folded] == ["aten.mm", "aten.add", "aten.mm"]
    fused = folded[1]
    # reads 64 (add) + (64 - 32) (mul's other operand; add's output stays in registers); writes mul's 32
    assert (fused.cost.bytes_read, fused.cost.bytes_written, fused.cost.flops) == (96, 32, 16)


def test_recomputation_full_and_torchtitans_selective_policy() -> None:
    def k(op: str, klass: str, backward: bool = False) -> Item:
        return Item(KERNEL, MS, klass=klass, block=0, backward=backward, op=op)

    forward = [
        k("aten.mm", "matmul"),
        k("aten.add", "elementwise"),
        k("aten.mm", "matmul"),
        k("aten.sdpa", "attention"),
        k("aten.mm", "matmul"),
    ]
    items = [*forward, k("aten.mm", "matmul", backward=True), k("aten.mm", "matmul", backward=True)]
    assert with_recompute(items, ActivationCheckpoint.NONE) == items
    full = with_recompute(items, ActivationCheckpoint.FULL)
    assert len(full) == len(items) + 5 and all(i.recompute for i in full[5:10])  # the 5 forward kernels, once
    selective = [i for i in with_recompute(items, ActivationCheckpoint.SELECTIVE) if i.recompute]
    # saved: mm #1, attention, mm #3; run again: the add and mm #2
    assert [i.op for i in selective] == ["aten.add", "aten.mm"]


# ---- a whole step: invariants --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dry() -> tuple[object, ShardSpec, object, list[str]]:
    """One dry run of a 2-layer Llama over fsdp:4 (bf16, 2 x 128 tokens a rank), priced many ways below."""
    from graphprof.prepared import prepare
    from graphprof.sharding.run import run_sharded_step
    from graphprof.sharding.wraps import fake_world, shard_units, sharding_wraps

    prepared = prepare("hf:llama?num_hidden_layers=2", mode="train", dtype="bfloat16", input_shape=(2, 128))
    spec = ShardSpec(fsdp=4)
    call = prepared.resolve(prepared.spec())
    with fake_world(spec) as meshes:
        step = run_sharded_step(
            prepared.model, call.args, call.kwargs, sharding_wraps(spec, meshes, call.args, call.kwargs, prepared.name), call.dtype
        )
    units = {id(u) for u in shard_units(prepared.model)}
    blocks = [n for n, m in prepared.model.named_modules() if id(m) in units]
    return step, spec, prepared.profile(), blocks


def _price(dry: tuple[object, ShardSpec, object, list[str]], hardware: str = "h100", **options: object) -> object:
    step, spec, plain, blocks = dry
    return price_step(step, spec, get_hardware(hardware), plain, blocks, StepOptions(**options))  # type: ignore[arg-type]


def test_the_breakdown_sums_to_the_step_and_the_rates_follow_from_it(dry: tuple[object, ShardSpec, object, list[str]]) -> None:
    s = _price(dry)
    b = s.breakdown  # type: ignore[attr-defined]
    parts = (b.compute_s, b.recompute_s, b.communication_s, b.optimizer_s, b.host_s, b.attention_backward_s, b.sm_contention_s,
             b.sustained_clock_s)  # fmt: skip
    assert sum(parts) == pytest.approx(s.time_s, rel=1e-12)  # type: ignore[attr-defined]
    assert s.low_s < s.time_s < s.high_s  # type: ignore[attr-defined]
    assert s.tokens_per_s_per_gpu * s.time_s == pytest.approx(2 * 128)  # type: ignore[attr-defined]
    plain = dry[2]
    per_token = plain.per_token.model_train  # type: ignore[attr-defined]
    assert s.model_flops_per_token == per_token  # type: ignore[attr-defined]
    assert s.mfu == pytest.approx(per_token * s.tokens_per_s_per_gpu / 989.5e12, rel=1e-12)  # type: ignore[attr-defined]
    assert s.model_flops_per_token < s.model_flops_per_token_full < 2 * s.model_flops_per_token  # type: ignore[attr-defined]
    assert b.recompute_s == 0.0 and b.compute_s > 0 and b.optimizer_s > 0


def test_the_optimizer_streams_seven_shards(dry: tuple[object, ShardSpec, object, list[str]]) -> None:
    step = dry[0]
    table = H100.calibration
    assert table is not None
    rate = table.rates_for("bfloat16", "elementwise").memory_fraction
    # master weights and moments in the compute dtype: 7 x the bf16 shard; in float32 (torchtitan's): 7 x twice it
    expected = table.memory_seconds(7 * step.shard_bytes, H100.bandwidth) / rate  # type: ignore[attr-defined]
    assert _price(dry, master_dtype=None).breakdown.optimizer_s == pytest.approx(expected, rel=1e-12)  # type: ignore[attr-defined]
    expected = table.memory_seconds(7 * 2 * step.shard_bytes, H100.bandwidth) / rate  # type: ignore[attr-defined]
    assert _price(dry).breakdown.optimizer_s == pytest.approx(expected, rel=1e-12)  # type: ignore[attr-defined]
    # torch.optim.AdamW's own default on CUDA: one pass a _foreach op, 20 element reads and writes (steptime's count)
    expected = table.memory_seconds(20 * 2 * step.shard_bytes, H100.bandwidth) / rate  # type: ignore[attr-defined]
    assert _price(dry, adamw="foreach").breakdown.optimizer_s == pytest.approx(expected, rel=1e-12)  # type: ignore[attr-defined]
    with pytest.raises(InvalidInputError, match="AdamW implementation"):
        _price(dry, adamw="sgd")


def test_a_float32_reduce_scatter_moves_twice_the_bf16_bytes(dry: tuple[object, ShardSpec, object, list[str]]) -> None:
    from graphprof.sharding.steptime import _pricing, step_items

    step, spec, plain, blocks = dry

    def scatters(reduce_dtype: str | None) -> list[float]:
        p, _ = _pricing(spec, H100, "bfloat16", StepOptions(reduce_dtype=reduce_dtype))
        return [i.seconds for i in step_items(step, p, blocks) if i.kind == SCATTER]  # type: ignore[arg-type]

    links = H100.links
    assert links is not None
    bf16, fp32 = scatters(None), scatters("float32")
    assert len(bf16) == len(fp32) > 0
    # a ring's time is latency + (N-1)/N x bytes / bus: the bytes part doubles, the latency stays
    latency = collective_seconds("reduce_scatter", 1.0, Group(4, 1), links)
    for a, b in zip(bf16, fp32, strict=True):
        assert b - latency == pytest.approx(2 * (a - latency), rel=1e-6)


def test_a_language_models_loss_is_a_float32_cross_entropy(dry: tuple[object, ShardSpec, object, list[str]]) -> None:
    ops = [r.op for r in dry[0].records]  # type: ignore[attr-defined]
    assert "aten._log_softmax" in ops and "aten._log_softmax_backward_data" in ops
    assert "aten.nll_loss_forward" in ops and "aten.nll_loss_backward" in ops


def test_micro_batches_repeat_the_micro_step_and_the_optimizer_runs_once(dry: tuple[object, ShardSpec, object, list[str]]) -> None:
    one, two = _price(dry), _price(dry, grad_accum=2)
    opt = one.breakdown.optimizer_s  # type: ignore[attr-defined]
    assert two.time_s == pytest.approx(2 * (one.time_s - opt) + opt, rel=1e-12)  # type: ignore[attr-defined]
    assert two.tokens_per_step == 2 * one.tokens_per_step  # type: ignore[attr-defined]


def test_checkpointing_adds_recomputation_and_nothing_else(dry: tuple[object, ShardSpec, object, list[str]]) -> None:
    none, sel, full = (_price(dry, checkpoint=c) for c in ("none", "selective", "full"))
    assert none.breakdown.compute_s == pytest.approx(full.breakdown.compute_s) == pytest.approx(sel.breakdown.compute_s)  # type: ignore[attr-defined]
    assert 0 < sel.breakdown.recompute_s < full.breakdown.recompute_s  # type: ignore[attr-defined]
    assert full.hfu > none.hfu * (none.time_s / full.time_s)  # recomputed FLOPs count as hardware FLOPs  # type: ignore[attr-defined]
    assert full.mfu < none.mfu  # the same model FLOPs in a longer step  # type: ignore[attr-defined]


def test_compiled_fuses_element_wise_kernels_and_launches_nothing(dry: tuple[object, ShardSpec, object, list[str]]) -> None:
    eager, compiled = _price(dry), _price(dry, compiled=True)
    assert compiled.breakdown.host_s == 0.0 and compiled.kernels < eager.kernels  # type: ignore[attr-defined]
    assert compiled.breakdown.compute_s < eager.breakdown.compute_s  # type: ignore[attr-defined]
    assert compiled.regime == "compiled" and eager.regime == "eager"  # type: ignore[attr-defined]


def test_crossing_nodes_costs_more_communication(dry: tuple[object, ShardSpec, object, list[str]]) -> None:
    inside, across = _price(dry, gpus_per_node=8), _price(dry, gpus_per_node=2)  # 4 ranks: one node, or two
    # 2 GPUs a node: transfers at 2 x 50 = 100 GB/s against 450 (4.5x), latencies 8.4 + 2 x 3.4 + 9.6 against
    # 8.4 + 3 x 3.4 us (1.3x)
    assert across.communication_total_s > 2 * inside.communication_total_s  # type: ignore[attr-defined]


def test_a_device_without_a_table_is_priced_from_its_datasheet_and_says_so(dry: tuple[object, ShardSpec, object, list[str]]) -> None:
    h100, a100 = _price(dry), _price(dry, "a100")
    assert a100.breakdown.compute_s > h100.breakdown.compute_s  # type: ignore[attr-defined]
    assert any("derived" in n for n in a100.notes) and not any("derived" in n for n in h100.notes)  # type: ignore[attr-defined]
    with pytest.raises(InvalidInputError, match="grad-accum"):
        _price(dry, grad_accum=0)


# ---- the library call, JSON and the command line -------------------------------------------------------------


def test_shard_profile_prices_a_gpu_preset_with_links_only_and_its_json_fits_the_schema() -> None:
    from graphprof.render.sink import render_result
    from graphprof.schemas import validate
    from graphprof.sharding import shard_profile

    priced = shard_profile("hf:llama?num_hidden_layers=1", "fsdp:2", hardware="h100", dtype="bfloat16", seq_len=32)
    assert priced.step is not None and "1x32" in priced.inputs
    data = json.loads(render_result(priced, "json"))
    validate(data)
    assert set(data["step"]["breakdown"]) == {"compute", "recompute", "communication", "optimizer", "host", "attention_backward",
                                              "sm_contention", "sustained_clock"}  # fmt: skip
    assert math.isclose(sum(data["step"]["breakdown"].values()), data["step"]["time_s"], rel_tol=1e-9)
    plain = shard_profile("hf:llama?num_hidden_layers=1", "fsdp:2", hardware="desktop-cpu", seq_len=32)
    assert plain.step is None  # no links: no step time, and no error


def test_the_command_prints_the_step() -> None:
    from graphprof_cli.main import app

    result = CliRunner().invoke(app, ["shard", "--model", "hf:llama?num_hidden_layers=1", "fsdp:2", "--hardware", "h100", "--dtype",
                                      "bf16", "--seq-len", "32", "--checkpoint", "full", "--compile", "--grad-accum", "2"])  # fmt: skip
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "tokens/s per GPU" in flat and "compiled, checkpoint full, 2 micro-batch(es)" in flat and "recompute" in flat


@pytest.mark.slow
def test_fsdp_auto_ranks_the_candidates_that_fit_by_tokens_per_second() -> None:
    from graphprof.sharding import shard_profile
    from graphprof.training import plan_ranks

    plan = plan_ranks("hf:llama?num_hidden_layers=2", "h100", dtype="bf16")
    assert [c[1] for c in plan.ranked] == ["none", "full"]  # recomputation only slows a step that fits either way
    rates = [c[2] for c in plan.ranked]
    assert rates == sorted(rates, reverse=True)
    world, checkpoint, rate, seconds = plan.ranked[0]
    again = shard_profile(
        "hf:llama?num_hidden_layers=2", f"fsdp:{world}", hardware="h100", dtype="bf16", timing=StepOptions(checkpoint=checkpoint)
    )
    assert again.step is not None and again.step.tokens_per_s_per_gpu == pytest.approx(rate) and again.step.time_s == pytest.approx(seconds)
    assert plan.to_dict()["ranked"][0]["world"] == world


def test_a_model_without_tokens_gets_a_step_time_but_no_tokens_per_second() -> None:
    from rich.console import Console
    from torch import nn

    from graphprof.render.step import render_step
    from graphprof.sharding import shard_profile

    net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64), nn.Linear(64, 8))
    p = shard_profile(net, "fsdp:2", hardware="h100", input_shape=(32, 64))
    assert p.step is not None and p.step.time_s > 0 and p.step.hfu > 0
    assert p.step.tokens_per_s_per_gpu is None and p.step.mfu is None
    console = Console(width=100, record=True)
    console.print(render_step(p.step))
    assert "no token inputs" in console.export_text()

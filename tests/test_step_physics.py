"""Issue 51: the three costs of a training step that single-kernel timings miss, each from a published figure.

By hand on a planted timeline (the worked example of :func:`graphprof.sharding.physics.step_physics`), then on a
priced step of a small Llama: each part is its own row of the breakdown, the A100 pays a sustained clock the H100
(no published figure) does not, and a step without collectives pays no SM contention.
"""

from __future__ import annotations

import pytest

from graphprof.devices.hardware import get_hardware
from graphprof.sharding import StepOptions, shard_profile
from graphprof.sharding.physics import ATTENTION_BACKWARD_RATIO, NCCL_SMS, step_physics
from graphprof.sharding.timeline import GATHER, KERNEL, Item, Timeline

MS = 1e-3
A100, H100 = get_hardware("a100"), get_hardware("h100")
LLAMA = "hf:llama?num_hidden_layers=2"


def test_the_worked_example_by_hand() -> None:
    items = [
        Item(KERNEL, 100 * MS, klass="matmul", op="aten.mm"),
        Item(KERNEL, 10 * MS, klass="attention", backward=True, op="aten._scaled_dot_product_flash_attention_backward"),
        Item(KERNEL, 7 * MS, klass="attention", op="aten._scaled_dot_product_flash_attention"),  # forward: no penalty
        Item(KERNEL, 30 * MS, klass="elementwise", op="aten.mul"),  # not tensor-core work: no clock
        Item(GATHER, 50 * MS),
    ]
    played = Timeline(147 * MS, 0.0, 5 * MS, 0.0, 50 * MS, 4, 0.0)  # 50 ms of collectives, 5 ms of it exposed
    a100 = step_physics(items, played, A100)
    attention = 10 * MS * (1 / 0.86 - 1)  # 1.628 ms
    assert a100.attention_backward_s == pytest.approx(attention, rel=1e-12)
    assert a100.sm_contention_s == pytest.approx(45 * MS * 16 / 108, rel=1e-12)  # 6.667 ms
    assert a100.sustained_clock_s == pytest.approx((117 * MS + attention) * (1410 / 1305 - 1), rel=1e-12)
    h100 = step_physics(items, played, H100)
    assert h100.sustained_clock_s == 0.0 and h100.sm_contention_s == pytest.approx(45 * MS * 16 / 132, rel=1e-12)
    assert ATTENTION_BACKWARD_RATIO == 0.86 and NCCL_SMS == 16


def test_sm_counts_and_clocks_are_figures_of_the_preset() -> None:
    # whitepapers: A100 108 SMs, H100 SXM5 132, H100 PCIe 114 (a label lookup of "H100" gave the PCIe card 132)
    sms = {name: get_hardware(name).sms for name in ("a100", "h100", "h100-pcie", "h200", "b200", "desktop-cpu", "mi300x")}
    assert sms == {"a100": 108, "h100": 132, "h100-pcie": 114, "h200": 132, "b200": 148, "desktop-cpu": None, "mi300x": None}
    assert A100.sustained_clock == pytest.approx(1305 / 1410) and H100.sustained_clock is None
    pcie = step_physics([], Timeline(0.0, 0.0, 0.0, 0.0, 114 * MS, 1, 0.0), get_hardware("h100-pcie"))
    assert pcie.sm_contention_s == pytest.approx(16 * MS, rel=1e-12)  # 114 ms hidden x 16 / 114 SMs


@pytest.fixture(scope="module")
def steps() -> dict[str, object]:
    out = {}
    for name in ("a100", "h100"):
        out[name] = shard_profile(LLAMA, "fsdp:4", hardware=name, dtype="bfloat16", seq_len=256, timing=StepOptions()).step
    return out


def test_each_part_is_a_row_of_the_breakdown_and_the_rows_sum_to_the_step(steps: dict[str, object]) -> None:
    for step in steps.values():
        b = step.breakdown  # type: ignore[attr-defined]
        assert b.attention_backward_s > 0 and b.sm_contention_s > 0
        assert b.total_s == pytest.approx(step.time_s, rel=1e-12)  # type: ignore[attr-defined]
        assert step.low_s < step.time_s < step.high_s  # type: ignore[attr-defined]
    assert steps["a100"].breakdown.sustained_clock_s > 0 and steps["h100"].breakdown.sustained_clock_s == 0.0  # type: ignore[attr-defined]
    assert any("FlashAttention-3 paper" in n for n in steps["h100"].notes)  # type: ignore[attr-defined]


def test_the_rendered_step_names_each_estimate(steps: dict[str, object]) -> None:
    from rich.console import Console

    from graphprof.render.step import render_step

    console = Console(width=160, record=True)
    console.print(render_step(steps["a100"]))  # type: ignore[arg-type]
    text = console.export_text()
    for label in ("attention backward below forward rate (estimate)", "comm SM contention (estimate)", "sustained clock (estimate)"):
        assert label in text


def test_blocking_collectives_hide_nothing_and_so_cost_no_contention() -> None:
    # tensor parallelism's all-reduces hold the compute stream: nothing runs beside them, no SM is taken from compute
    step = shard_profile(LLAMA, "tp:2", hardware="h100", dtype="bfloat16", seq_len=64, timing=StepOptions()).step
    assert step is not None and step.communication_total_s > 0
    assert step.breakdown.communication_s == pytest.approx(step.communication_total_s, rel=1e-12)
    assert step.breakdown.sm_contention_s == pytest.approx(0.0, abs=1e-15)

"""graphprof partition: the exact planner against brute force, the device spec, a small model end to end."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from graphprof.partition.solver import Infeasible, Problem, evaluate, solve


def _random_problem(rng: random.Random, units: int, counts: tuple[int, ...]) -> Problem:
    kinds = len(counts)
    bw = [[rng.choice([1e3, 5e3, 2e4]) for _ in range(kinds)] for _ in range(kinds)]
    bw = [[bw[min(a, b)][max(a, b)] for b in range(kinds)] for a in range(kinds)]  # symmetric
    lat = [[rng.choice([0.0, 0.01, 0.1]) for _ in range(kinds)] for _ in range(kinds)]
    lat = [[lat[min(a, b)][max(a, b)] for b in range(kinds)] for a in range(kinds)]
    return Problem(
        seconds=tuple(tuple(rng.uniform(0.1, 2.0) for _ in range(units)) for _ in range(kinds)),
        weight_bytes=tuple(rng.randint(1, 10) for _ in range(units)),
        activation_bytes=tuple(rng.randint(0, 5) for _ in range(units)),
        cut_bytes=(0, *(rng.randint(0, 400) for _ in range(units - 1)), 0),
        memory=tuple(rng.randint(12, 40) for _ in range(kinds)),
        count=counts,
        bandwidth=tuple(map(tuple, bw)),
        latency=tuple(map(tuple, lat)),
    )


def _brute_force(p: Problem, objective: str) -> tuple[float, float]:
    """Every composition of the units into stages, every ordered choice of distinct devices for them:
    the optimum, and (for throughput) the least latency among the plans reaching it."""
    devices = [k for k, c in enumerate(p.count) for _ in range(c)]
    n, best = p.units, (math.inf, math.inf)
    for stages in range(1, min(n, len(devices)) + 1):
        for cuts in itertools.combinations(range(1, n), stages - 1):
            bounds = (0, *cuts, n)
            ranges = list(zip(bounds, bounds[1:], strict=False))
            for chosen in itertools.permutations(range(len(devices)), stages):
                kinds = [devices[d] for d in chosen]
                if any(p.stage_memory(i, j) > p.memory[k] for (i, j), k in zip(ranges, kinds, strict=True)):
                    continue
                s = evaluate(p, [(i, j, k) for (i, j), k in zip(ranges, kinds, strict=True)])
                best = min(best, (s.latency, s.latency) if objective == "latency" else (s.bottleneck, s.latency))
    return best


def _tied(rng: random.Random, p: Problem) -> Problem:
    """``p`` with a weight two random units share and random cut sizes: a stage using it without holding
    the first of them keeps a copy."""
    import dataclasses

    shared = ((tuple(sorted(rng.sample(range(p.units), 2))), rng.randint(3, 10)),)
    return dataclasses.replace(p, cut_bytes=(0, *(rng.randint(0, 4) for _ in range(p.units - 1)), 0), shared=shared)


@pytest.mark.parametrize(("objective", "tied"), [("latency", False), ("throughput", False), ("latency", True), ("throughput", True)])
def test_solver_matches_brute_force(objective: str, tied: bool) -> None:
    rng = random.Random(40 if tied else 22)
    checked = 0
    for _ in range(60):
        lo, most_kinds = (2, 2) if tied else (1, 3)
        p = _random_problem(rng, rng.randint(lo, 6), tuple(rng.randint(1, 2) for _ in range(rng.randint(1, most_kinds))))
        p = _tied(rng, p) if tied else p
        expected, latency = _brute_force(p, objective)
        if math.isinf(expected):
            if not tied:
                with pytest.raises(Infeasible):
                    solve(p, objective)
            continue
        got = solve(p, objective)
        value = got.latency if objective == "latency" else got.bottleneck
        assert value == pytest.approx(expected, rel=1e-9)
        if not tied:
            assert got.latency == pytest.approx(latency, rel=1e-6)  # throughput's tie-break: least latency
            # the plan it returns is a real one: contiguous, covering every unit
            assert got.stages[0][0] == 0 and got.stages[-1][1] == p.units
            assert all(a[1] == b[0] for a, b in zip(got.stages, got.stages[1:], strict=False))
        assert all(p.stage_memory(i, j) <= p.memory[k] for i, j, k in got.stages)  # within each device's memory
        checked += 1
    assert checked > (20 if tied else 30)


def test_stage_memory_counts_a_copy_of_a_tied_weight_in_each_later_stage_using_it() -> None:
    from graphprof.partition.solver import holds_copy

    p = Problem(
        seconds=((1.0,) * 4,), weight_bytes=(10, 1, 1, 0), activation_bytes=(0,) * 4, cut_bytes=(0,) * 5,
        memory=(100,), count=(3,), bandwidth=((1.0,),), latency=((0.0,),), shared=(((0, 3), 10),),
    )  # fmt: skip
    # units 0 (an embedding of 10 bytes, counted there) and 3 (the LM head reading it, counted 0)
    assert [holds_copy((0, 3), i, j) for i, j in [(0, 4), (1, 4), (1, 3), (3, 4)]] == [False, True, False, True]
    assert p.stage_memory(0, 4) == 12  # one stage: the embedding once
    assert p.stage_memory(0, 2) + p.stage_memory(2, 4) == 11 + (1 + 0 + 10)  # the last stage keeps its own copy


# ---- device and link specs -------------------------------------------------------------------------


def test_device_spec() -> None:
    from graphprof.partition.devices import parse_devices

    devices = parse_devices("orin-agx:2,rtx4090@20,edge=5/100:1@8")
    assert [d.name for d in devices] == ["orin-agx#0", "orin-agx#1", "rtx4090#0", "edge#0"]
    assert devices[0].hardware is not None and devices[0].hardware.name == "jetson-orin"
    assert devices[0].memory_bytes == 64 * 10**9  # Jetson AGX Orin 64GB module
    assert devices[2].memory_bytes == 20 * 10**9  # @20 overrides the RTX 4090's 24 GB
    assert devices[3].hardware is not None and devices[3].hardware.peak_flops("float16") == 5e12
    local = parse_devices("cpu:4")
    assert all(d.local for d in local) and len({d.memory_bytes for d in local}) == 1


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("nosuch:2", "unknown hardware 'nosuch'"),
        ("rtx4090:0", "zero devices"),
        ("", "no devices given"),
        ("rtx4090:x", "whole number"),
        ("rtx4090:1,rtx4090:2", "named twice"),
        ("edge=5/100:1", "needs its memory"),
        ("rtx4090@-3", "must be from"),
    ],
)
def test_bad_device_specs(spec: str, words: str) -> None:
    from graphprof.errors import InvalidInputError
    from graphprof.partition.devices import parse_devices

    with pytest.raises(InvalidInputError, match=words):
        parse_devices(spec)


def test_links() -> None:
    from graphprof.errors import InvalidInputError
    from graphprof.partition.devices import parse_links

    links = parse_links(["2/0.5", "a~b=0.1/3"], ("a", "b"))
    assert links.between("a", "a") == (2e9, 0.5e-3)
    assert links.between("b", "a") == (0.1e9, 3e-3)
    # 1 ms + 1e6 bytes / 1e8 B/s = 1 ms + 10 ms
    assert parse_links(["0.1/1"]).seconds("x", "y", 10**6) == pytest.approx(0.011)
    with pytest.raises(InvalidInputError, match="device kinds"):
        parse_links(["a~c=1"], ("a", "b"))
    # a pair without its own latency takes the default's, even when the default comes after it
    assert parse_links(["a~b=0.1", "2/0.5"], ("a", "b")).between("a", "b") == (0.1e9, 0.5e-3)


def test_baseline_bounds_and_step_prediction() -> None:
    from graphprof.partition.plan import _bounds_equal_layers, _bounds_equal_params
    from graphprof.partition.run import step_prediction

    assert _bounds_equal_layers(10, 3) == [0, 4, 7, 10]  # 4 + 3 + 3
    # params 5,1,1,1,5 in two: [5,1 | 1,1,5] and [5,1,1 | 1,5] both have a largest part of 7; the first is kept
    assert _bounds_equal_params([5, 1, 1, 1, 5], 2) == [0, 2, 5]
    # GPipe, 4 micro-batches through stages of 1, 2, 3: 1 + 2 + 3 + (4 - 1) x 3 = 15
    assert step_prediction([1.0, 2.0, 3.0], 4) == 15.0


# ---- units and cut bytes from the module graph -----------------------------------------------------


@pytest.fixture(scope="module")
def resnet18_plan():  # type: ignore[no-untyped-def]
    from graphprof.partition import partition

    return partition("resnet18", "rtx4090:1,orin-agx:2", objective="throughput", links="0.5/0.1")


def test_units_and_cuts(resnet18_plan) -> None:  # type: ignore[no-untyped-def]
    table = resnet18_plan.table
    names = [u.name for u in table.units]
    assert names[:5] == ["conv1", "bn1", "relu", "maxpool", "layer1.0"] and names[-2:] == ["avgpool", "fc"]
    assert len(names) == 4 + 8 + 2
    # before layer2.0 only layer1.1's output crosses (the residual stays inside the block): 64 x 56 x 56 x 4 B
    assert table.cut_bytes[names.index("layer2.0")] == 64 * 56 * 56 * 4
    # before fc: the flattened 512 features (flatten runs in avgpool's stage)
    assert table.cut_bytes[names.index("fc")] == 512 * 4
    assert table.cut_bytes[0] == table.cut_bytes[-1] == 0
    # parameters: units sum to the model's 11,689,512
    assert sum(u.params for u in table.units) == 11_689_512
    assert sum(u.weight_bytes for u in table.units) >= 11_689_512 * 4


def test_plan_invariants(resnet18_plan) -> None:  # type: ignore[no-untyped-def]
    plan = resnet18_plan
    assert plan.stages[0].start == 0 and plan.stages[-1].end == len(plan.table.units)
    assert all(s.fits for s in plan.stages)
    assert plan.bottleneck_s == max(s.compute_s + s.receive_s for s in plan.stages)
    for b in plan.baselines:  # the optimum over every split can be no worse than a split users make
        if b.fits:
            assert plan.bottleneck_s <= b.bottleneck_s + 1e-12
    data = plan.to_dict()
    assert data["split_points"] == list(plan.split_points)
    assert {b["name"] for b in data["baselines"]} == {"equal-layers", "equal-params"}


@pytest.mark.slow  # over 2 s: the full suite runs it, the fast tier does not
def test_llama_cut_carries_rotary_and_kv_cache() -> None:
    from graphprof.partition import partition

    plan = partition("hf:llama", "rtx4090:2", dtype="float16")
    table = plan.table
    names = [u.name for u in table.units]
    assert names[:2] == ["model.embed_tokens", "model.rotary_emb"] and names[-1] == "lm_head"
    hidden = 1 * 128 * 256 * 2  # batch 1, 128 positions, hidden 256, fp16
    cut = table.cut_bytes[names.index("model.layers.2")]
    assert cut > hidden  # the rotary cos/sin (and the mask) read by every layer cross the cut too
    layer = table.units[names.index("model.layers.0")]
    # KV cache of one layer: 1 x 128 positions x (k_proj + v_proj out features) x 2 bytes
    import graphprof

    model = graphprof.prepare("hf:llama").model
    attn = model.model.layers[0].self_attn
    assert layer.kv_bytes == 128 * (attn.k_proj.out_features + attn.v_proj.out_features) * 2


# ---- the command ------------------------------------------------------------------------------------


def test_cli_plan_and_json(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from typer.testing import CliRunner

    from graphprof_cli.main import app

    out = tmp_path / "plan.json"
    result = CliRunner().invoke(app, ["partition", "--model", "resnet18", "--devices", "orin-agx:2,rtx4090", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "equal-layers" in result.output and "split points" in result.output
    data = json.loads(out.read_text())
    assert data["objective"] == "latency" and data["stages"]


def test_cli_help() -> None:
    from typer.testing import CliRunner

    from graphprof_cli.main import app

    result = CliRunner().invoke(app, ["partition", "--help"])
    assert result.exit_code == 0 and "--devices" in result.output and "--run" in result.output


@pytest.mark.parametrize(
    ("devices", "words"),
    [("nosuch:1", "unknown hardware"), ("rtx4090:0", "zero devices"), ("rtx4090@0.001", "no plan fits: no device can hold layer")],
)
def test_cli_bad_specs_one_line(devices: str, words: str) -> None:
    from typer.testing import CliRunner

    from graphprof_cli.main import app

    result = CliRunner().invoke(app, ["partition", "--model", "resnet18", "--devices", devices])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("graphprof: error:") and words in lines[0]


# ---- running the split (slow: processes) ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("model", ["resnet18", "hf:llama"])
def test_run_matches_unsplit(model: str) -> None:
    from graphprof.partition.report import partition_report

    report = partition_report(model, "cpu:2", objective="throughput", iters=2, run=True, run_iters=1, micro_batches=2, compare=False)
    ((label, run),) = report.runs
    assert run.matches, run.max_abs_error
    assert len(run.stages) == len(report.plan.stages)
    assert all(s.measured_s > 0 and s.predicted_s for s in run.stages)


def test_cpu_stage_times_are_predicted_only_by_a_calibration_of_the_stages_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    import torch

    from graphprof.devices.hardware import get_hardware
    from graphprof.devices.local import cpu_model
    from graphprof.partition import planner

    hardware, why = planner._local_predictor(None, 1)
    assert hardware is None and "no local calibration" in why
    device = {"threads": 2, "name": cpu_model(), "torch": torch.__version__}
    stored = replace(get_hardware("h100"), measured=device)  # the file as read_local_hardware gives it
    hardware, why = planner._local_predictor(stored, 1)  # a 2-thread calibration cannot predict a 1-thread stage
    assert hardware is None and "of 2 thread(s), each stage runs 1" in why and "--threads 1" in why
    hardware, why = planner._local_predictor(stored, 2)
    assert hardware is stored and why == ""
    # made with another torch: stale, as every other reader of the file says
    stale = replace(stored, measured={**device, "torch": "1.0"})
    hardware, why = planner._local_predictor(stale, 2)
    assert hardware is None and "stale (torch '1.0'" in why


def test_a_model_with_no_children_is_one_unit_and_one_stage() -> None:
    # nn.Linear has no submodule to cut before: the whole model is the one unit (the root, ""), run on one device
    from torch import nn

    from graphprof.partition import partition
    from graphprof.partition.units import choose_units, unit_of

    assert choose_units(nn.Linear(8, 8)) == [""] and unit_of("anything.at.all", {""}) == ""
    plan = partition(nn.Linear(8, 8), "cpu:2", input_shape=(4, 8), iters=1)
    assert len(plan.stages) == 1 and plan.split_points == ()

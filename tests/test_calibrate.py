"""graphprof calibrate and the one prediction model (graphprof.devices.predict, graphprof.calibrate)."""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from graphprof.base.choices import OpStatus
from graphprof.calibrate import fit as fit_module
from graphprof.calibrate.preset import LocalPreset, load_local, measure_default_hardware, preset_from_table
from graphprof.calibrate.store import write_preset
from graphprof.devices.hardware import Hardware, get_hardware
from graphprof.devices.local import local_path, read_local
from graphprof.devices.predict import kernel_seconds, reduction_depth, steady_seconds, timeline
from graphprof.devices.table import Calibration, ClassRates, MemoryCurve
from graphprof.errors import InvalidInputError
from graphprof.formulas import Cost

HW = Hardware(name="synthetic", label="synthetic CPU", kind="test", peak_tflops={"float32": 0.1}, bandwidth_gbs=50.0, source="test")
TRUE_CURVE = MemoryCurve(near_gbs=50.0, far_gbs=5.0, cache_bytes=2**20)
TRUE_MATMUL = ClassRates(compute_fraction=0.8, memory_fraction=1.0, latency_s=2e-6, half_depth=32.0)
FLOOR = 1e-6


def _op(op: str, shapes: list[list[int]], flops: float, nbytes: int) -> SimpleNamespace:
    return SimpleNamespace(
        op=op, input_shapes=shapes, cost=Cost(flops=int(flops), bytes_read=nbytes), work_fraction=1.0, status=OpStatus.COUNTED
    )


def synthetic_table(overlap: float) -> dict[str, Any]:
    """Records timed by the model itself with known parameters (streaming adds, matrix products of many depths)."""
    truth = Calibration("synthetic", "cpu", 50.0, FLOOR, FLOOR, {"float32": {"matmul": TRUE_MATMUL, "elementwise": ClassRates(1.0, 1.0, 0.0)}},
                        overlap=overlap, memory=TRUE_CURVE)  # fmt: skip
    records = []
    for numel in (1024, 16384, 2**18, 2**20, 2**22, 2**24):
        op = _op("aten.add", [[numel], [numel]], numel, 12 * numel)
        records.append({"op": op.op, "shapes": op.input_shapes, "dtype": "float32", "flops": numel, "bytes": 12 * numel})
    for m, k in ((1, 256), (64, 8), (64, 16), (64, 64), (128, 128), (256, 512), (512, 1024), (8, 4), (256, 32)):
        n = 256
        op = _op("aten.mm", [[m, k], [k, n]], 2 * m * n * k, 4 * (m * k + k * n + m * n))
        records.append({"op": op.op, "shapes": op.input_shapes, "dtype": "float32", "flops": op.cost.flops, "bytes": op.cost.bytes_moved})
    for r in records:
        op = _op(r["op"], r["shapes"], r["flops"], r["bytes"])
        r["seconds"] = steady_seconds(FLOOR, kernel_seconds(op, "float32", HW, truth), overlap)
    return {"floors": {"floor_s": FLOOR, "view_s": 0.5e-6, "host_per_kernel_s": 5e-6}, "records": records}


@pytest.mark.parametrize("overlap", [0.0, 1.0])
def test_fit_recovers_known_parameters(overlap: float) -> None:
    cal = fit_module.fit_op_table(synthetic_table(overlap), HW, preset="synthetic", kind="cpu")
    # the overlap is pinned only by the smallest records, where floor and kernel are alike: it trades off
    # against the near (cache) bandwidth, so only its side is recovered (a CPU adds, a GPU overlaps)
    assert cal.overlap <= 0.5 if overlap == 0.0 else cal.overlap >= 0.5
    matmul = cal.rates["float32"]["matmul"]
    # grid steps are ~15% for the fractions, a factor of 2 for half_depth: recovered within one step
    assert matmul.compute_fraction == pytest.approx(0.8, rel=0.16)
    assert 16 <= matmul.half_depth <= 64
    assert cal.memory is not None and cal.memory.far_gbs == pytest.approx(5.0, rel=0.3)
    assert cal.accuracy["median_abs_error"] < 0.08
    assert cal.host_per_kernel_s == 5e-6 and cal.view_s == 0.5e-6


def test_overlap_limits() -> None:
    host = 10e-6
    # short kernels: the host floor dominates, whatever the overlap
    for overlap in (0.0, 0.5, 1.0):
        assert steady_seconds(host, 1e-9, overlap) == pytest.approx(host, rel=1e-3)
    # long kernels: the kernel time dominates (plus the floor once when nothing overlaps: 1 ms + 10 us)
    assert steady_seconds(host, 1e-3, 1.0) == pytest.approx(1e-3)
    assert steady_seconds(host, 1e-3, 0.0) == pytest.approx(1.01e-3)
    # a CPU adds, a GPU overlaps: 10 us + 5 us against max(10, 5) us
    assert steady_seconds(host, 5e-6, 0.0) == pytest.approx(15e-6) and steady_seconds(host, 5e-6, 1.0) == pytest.approx(10e-6)


@pytest.mark.parametrize("overlap", [0.0, 0.3, 0.7, 1.0])
@pytest.mark.parametrize("kernel", [2e-6, 10e-6, 40e-6])
def test_timeline_of_repeated_op_is_the_steady_formula(overlap: float, kernel: float) -> None:
    shares = timeline([(10e-6, kernel)] * 400, overlap)
    # every op's share is at least its kernel time; far from the start, each is the steady per-op time
    assert min(shares) >= kernel * (1 - 1e-9)
    assert shares[-1] == pytest.approx(steady_seconds(10e-6, kernel, overlap), rel=1e-6)


def test_timeline_views_cost_host_time_only() -> None:
    assert timeline([(1e-6, 0.0), (1e-6, 0.0)], 0.0) == pytest.approx([1e-6, 1e-6])
    # on a GPU a view issued behind a long kernel hides in it: 5 us kernel, then a 1 us view = 6 us, not 7
    assert sum(timeline([(1e-6, 5e-6), (1e-6, 0.0), (1e-6, 1e-6)], 1.0)) == pytest.approx(7e-6)


def test_reduction_depth() -> None:
    assert reduction_depth("aten.mm", [[4, 96], [96, 8]]) == 96
    assert reduction_depth("aten.addmm", [[8], [4, 96], [96, 8]]) == 96
    assert reduction_depth("aten.convolution", [[1, 64, 8, 8], [64, 1, 3, 3]]) == 9  # depthwise: 1 * 3 * 3
    assert reduction_depth("aten.convolution", [[1, 64, 8, 8], [128, 64, 3, 3]]) == 576  # 64 * 3 * 3
    assert reduction_depth("aten.relu", [[4, 4]]) == 1


def _preset(tmp_path: Path) -> LocalPreset:
    table = synthetic_table(0.0)
    for r in table["records"]:
        r["label"] = r["op"]
    from graphprof.devices.local import cpu_model

    # made on this machine, with this thread count and this torch: a file that is current (else refused as stale)
    info = {"type": "cpu", "name": cpu_model(), "threads": torch.get_num_threads(), "torch": torch.__version__, "measured_at": "now"}
    return preset_from_table(table, info)


def test_preset_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    preset = _preset(tmp_path)
    path = write_preset(preset.to_dict())
    assert path == local_path() == tmp_path / "graphprof" / "local.json"
    loaded = load_local()
    assert loaded is not None
    assert loaded.hardware == preset.hardware and loaded.calibration == preset.calibration
    assert get_hardware("local") == preset.hardware
    # its peak is the fastest record's rate: no record beat the lower bound
    table = synthetic_table(0.0)
    assert all(r["flops"] / preset.hardware.peak_flops("float32") <= r["seconds"] * (1 + 1e-9) for r in table["records"])
    hardware, note = measure_default_hardware("cpu")
    assert hardware == preset.hardware and "local calibration" in note


def test_missing_local_preset_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert read_local() is None and load_local() is None
    with pytest.raises(InvalidInputError, match="run `graphprof calibrate`"):
        get_hardware("local")
    hardware, note = measure_default_hardware("cpu")
    assert hardware is None and "no local calibration" in note and "graphprof calibrate" in note
    (tmp_path / "graphprof").mkdir()
    (tmp_path / "graphprof" / "local.json").write_text("{not json")
    with pytest.raises(InvalidInputError, match="unreadable"):
        get_hardware("local")


def test_lower_bound_stays_below_prediction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import graphprof
    from graphprof.cost.roofline import classify

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    write_preset(_preset(tmp_path).to_dict())
    profile = graphprof.profile_model("resnet18", input_shape=(1, 3, 64, 64))
    roofline = classify(profile, get_hardware("local"))
    assert roofline.predicted_seconds is not None and roofline.seconds is not None
    for layer in roofline.layers:
        assert layer.predicted_seconds is not None and layer.seconds is not None
        assert layer.predicted_seconds >= layer.seconds * (1 - 1e-9)
    # the layers' shares sum to the model's prediction, which covers every kernel's host floor (overlap 0)
    kernels = sum(1 for _, op in profile.iter_ops() if op.status is not OpStatus.ZERO_COST)
    assert roofline.predicted_seconds >= kernels * 5e-6
    assert math.isclose(sum(layer.predicted_seconds or 0.0 for layer in roofline.layers), roofline.predicted_seconds)


def test_cli_calibrate_writes_the_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from graphprof.calibrate import preset
    from graphprof.calibrate.fresh_faults import FreshForward
    from graphprof_cli.main import app

    def fake_table(device: Any, progress: Any = None, full: Any = None) -> dict[str, Any]:
        progress(1, 1, "done")
        table = synthetic_table(0.0)
        table["floors"]["first_touch"] = {"limit_bytes": 32 * 2**20, "per_byte_s": 0.25e-9}
        return table

    monkeypatch.setattr(preset, "measure_op_table", fake_table)
    monkeypatch.setattr(
        preset,
        "zoo_samples",
        lambda models, progress=None, first_touch=None, passes=1, track=None, anchors=None: preset.ZooTimes([], [], []),
    )  # no real model runs here
    # 30 ms saved over 100 MB: 0.3 ns a byte, 1.2x the loop's 0.25
    anchor = FreshForward(1e6, 10e6, 5e6, 0.050, 0.30e-3, fault_bytes=100e6, saved_s=0.030)
    monkeypatch.setattr(preset, "fresh_forwards", lambda models, touch, progress=None, processes=3: {("resnet34", 8): [anchor]})
    monkeypatch.setattr(preset, "measure_benchmarks", lambda grid, device="cpu", progress=None: [])
    # the machine at one speed throughout, the anchor's: every speed factor 1 (a test process's probe reads anything)
    monkeypatch.setattr(preset.SpeedTrack, "start", classmethod(lambda cls: cls(0.30e-3, [0.30e-3], probe=lambda: 0.30e-3)))
    out = tmp_path / "preset.json"
    result = CliRunner().invoke(app, ["calibrate", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output.replace("\n", "")
    written = read_local(out)
    assert written is not None  # the file validates against its schema, the anchors kept beside the fit's accuracy
    anchors = written["calibration"]["op_model"]["accuracy"]["anchors"]
    assert anchors == {"resnet34@8": {"forward_s": 0.050, "probe_s": 0.30e-3, "fault_bytes": 100e6, "saved_s": 0.030,
                                      "processes": [[0.050, 0.30e-3, 100e6, 0.030]]}}  # fmt: skip
    # one process: its probe is the median, the elasticity the prior's (nothing to fit)
    fresh = written["calibration"]["op_model"]["accuracy"]["fresh_processes"]
    assert fresh == {"count": 1, "probe_s": 0.30e-3, "elasticity": 0.6}
    # the fresh processes' readings, kept beside the long-running ones: the band a prediction is not scaled in
    assert written["device"]["fresh_probes_s"] == [0.30e-3]
    assert "1 fresh processes timed the sample models, their probe's median 0.300 ms" in " ".join(result.output.split())
    # 30 ms over 100 MB, at the table's speed (here every reading's)
    model = written["calibration"]["op_model"]
    cost = model["accuracy"]["fault_cost"]
    assert cost["ladder_per_byte_s"] == 0.25e-9 and cost["used"] and cost["forward_per_byte_s"] == pytest.approx(0.3e-9)
    assert model["first_touch"]["per_byte_s"] == cost["forward_per_byte_s"]
    printed = f"a faulted byte cost {cost['forward_per_byte_s'] * 1e9:.3f} ns inside the sample models' forwards"
    assert printed in " ".join(result.output.split())


@pytest.mark.slow
def test_real_calibration_of_this_cpu(tmp_path: Path) -> None:
    from graphprof.calibrate import calibrate

    # the quick calibration (the full one samples the zoo for about two minutes); how long each takes on a
    # quiet machine is benchmarks/bench_predict.py's to say, not a unit test's
    preset = calibrate("cpu", output=tmp_path / "local.json", threads=1, quick=True)
    assert preset.device["threads"] == 1 and preset.device["seconds"] > 0
    assert preset.hardware.peak_flops("float32") > 0 and preset.calibration.accuracy["records"] > 50
    assert 0.0 <= preset.calibration.overlap <= 1.0
    # the speed track: the reference first, then a reading before and after the grid, each sample model and
    # the adaptive samples; the stored speed is the reference the samples were brought to
    probes = preset.device["probes_s"]
    assert preset.device["probe_s"] == statistics.median(probes) and len(probes) >= 1 + 2 * 2 and all(p > 0 for p in probes)


def test_a_fresh_process_anchors_a_sample_models_time_at_the_reference_speed() -> None:
    """The docstring's example: 54 ms with the probe at 0.30 ms there, a reference reading of 0.40 ms: the calls
    sum to 54 ms, taking (0.40 / 0.30) ** 0.6; the calls keep their shares; no track, no factor; a probe 3x off is a
    misread (outside the probe's limits), no factor either."""
    from graphprof.calibrate.fresh_faults import FreshForward
    from graphprof.calibrate.preset import anchored
    from graphprof.calibrate.speed import SpeedTrack
    from graphprof.measure.context import ContextTimes

    times = ContextTimes((("aten::conv2d", 0.060), ("aten::relu", 0.020)), forward_s=0.070, profiled_s=0.085, runs=3)
    anchor = FreshForward(0.0, 0.0, 1e6, forward_s=0.054, probe_s=0.00030)
    got, factor = anchored(times, anchor, SpeedTrack(0.00040, [0.00040], probe=lambda: 0.00040))
    assert (
        got.forward_s == 0.054
        and got.ops == times.ops
        and factor == pytest.approx((0.40 / 0.30) ** 0.6) == pytest.approx(64.2 / 54, rel=1e-3)
    )
    assert anchored(times, anchor, None)[1] == 1.0
    assert anchored(times, anchor._replace(probe_s=0.0012), SpeedTrack(0.00040))[1] == 1.0


def test_a_sample_models_fresh_processes_merge_into_one_anchor_at_one_speed() -> None:
    """``merged``'s examples, at 0.35 ms and an elasticity of 1: 50 ms at a probe of 0.30 ms is 58.33 ms there, 60
    ms at 0.40 ms is 52.5 ms, the anchor their geometric mean, 55.34 ms, at 0.35 ms; faults their mean; with a third
    process at 80 ms and 0.35 ms the median, 58.33 ms, in any order. At an elasticity of 0 the forwards as timed
    (54.77 ms, then 60 ms); a probe 3x off (a misread) leaves its process unscaled."""
    from graphprof.calibrate.fresh_faults import FreshForward, merged

    one, two = FreshForward(10e6, 100e6, 5e6, 0.050, 0.30e-3, 1e6, 0.010), FreshForward(20e6, 100e6, 5e6, 0.060, 0.40e-3)
    got = merged([one, two], 0.35e-3, 1.0)
    assert got.forward_s == pytest.approx(0.05534, rel=1e-3)
    assert got.forward_s == pytest.approx(math.sqrt(0.050 * 0.35 / 0.30 * 0.060 * 0.35 / 0.40))
    assert got.probe_s == 0.35e-3 and (got.faulted, got.exposed, got.peak, got.fault_bytes) == (15e6, 100e6, 5e6, 0.5e6)
    assert got.saved_s == pytest.approx(0.010 * 0.35 / 0.30 / 2)  # the seconds faults cost, at the same speed
    three = FreshForward(30e6, 100e6, 5e6, 0.080, 0.35e-3)
    for runs_ in ([one, two, three], [three, one, two], [two, three, one]):
        median = merged(runs_, 0.35e-3, 1.0)
        assert (median.forward_s, median.faulted) == pytest.approx((0.050 * 0.35 / 0.30, 20e6))
    assert merged([one, two], 0.35e-3, 0.0).forward_s == pytest.approx(math.sqrt(0.050 * 0.060))
    assert merged([one, two, three], 0.35e-3, 0.0).forward_s == 0.060
    assert merged([one._replace(probe_s=1.2e-3)], 0.35e-3, 1.0).forward_s == 0.050


def test_the_fresh_processes_fit_how_far_a_forward_follows_the_probe() -> None:
    """``elasticity``'s example: two models, processes at 0.30 and 0.36 ms whose forwards differ by 1.2x: 1.0 (no
    residual, the prior weighs nothing). Processes that all read the probe alike teach nothing: the prior, 0.6; so
    does a single process per model. Forwards that did not move with a probe that did: shrunk from 0 towards the
    prior only as far as their scatter allows (here none: 0); a slope beyond the range is held at 1.5."""
    from graphprof.calibrate.fresh_faults import ELASTICITY_PRIOR, ELASTICITY_RANGE, FreshForward, elasticity

    def runs(*pairs: tuple[float, float]) -> list[FreshForward]:
        return [FreshForward(0.0, 0.0, 0.0, f, p) for f, p in pairs]

    a, b = runs((0.050, 0.30e-3), (0.060, 0.36e-3)), runs((0.100, 0.36e-3), (0.100 / 1.2, 0.30e-3))
    assert elasticity([a, b]) == pytest.approx(1.0)
    assert elasticity([runs((0.05, 0.3e-3), (0.06, 0.3e-3)), runs((0.1, 0.3e-3), (0.12, 0.3e-3))]) == ELASTICITY_PRIOR[0]
    assert elasticity([runs((0.05, 0.3e-3)), runs((0.1, 0.36e-3))]) == ELASTICITY_PRIOR[0]
    flat = [runs((0.05, 0.30e-3), (0.05, 0.36e-3)), runs((0.1, 0.36e-3), (0.1, 0.30e-3))]
    assert elasticity(flat) == pytest.approx(0.0)
    steep = [runs((0.05, 0.30e-3), (0.05 * 1.2**3, 0.36e-3)), runs((0.1, 0.36e-3), (0.1 / 1.2**3, 0.30e-3))]
    assert elasticity(steep) == ELASTICITY_RANGE[1]
    # scatter pulls towards the prior: a third process per model off the line by 10% both ways
    noisy = [a + runs((0.0548 * 1.1, 0.33e-3)), b + runs((0.0913 / 1.1, 0.33e-3))]
    assert ELASTICITY_PRIOR[0] < elasticity(noisy) < 1.0


def test_fresh_processes_run_round_robin_and_a_slow_spells_run_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """``fresh_forwards`` runs every model once, then every model again, leaves out a model that failed in every
    process, and runs again each process whose probe read over 1.15x the median of all where most of its model's
    did: the second run replaces it where its probe lies nearer the median (0.31 ms for 0.45; a second run at 0.50
    ms for 0.40 does not)."""
    from graphprof.calibrate import preset
    from graphprof.calibrate.fresh_faults import FreshForward

    def run(forward: float, probe: float) -> FreshForward:
        return FreshForward(0.0, 0.0, 0.0, forward, probe)

    order: list[tuple[str, int]] = []
    a, c = [run(0.05, 0.30e-3), run(0.07, 0.45e-3), run(0.06, 0.40e-3)], [run(0.02, 0.30e-3), run(0.03, 0.29e-3), run(0.04, 0.40e-3)]
    d, again = [run(0.01, 0.30e-3)] * 3, [run(0.05, 0.31e-3), run(0.05, 0.50e-3)]
    runs = iter([a[0], None, c[0], d[0], a[1], None, c[1], d[1], a[2], None, c[2], d[2], *again])

    def fake(name: str, batch: int, limit: float, least: float, blocks: tuple[int, int] = (0, 0)) -> FreshForward | None:
        order.append((name, batch))
        return next(runs)

    monkeypatch.setattr(preset, "fresh_forward", fake)
    got = preset.fresh_forwards([("a", 1), ("b", 8), ("c", 1), ("d", 8)], None, processes=3)
    # the median probe of the nine is 0.30 ms: a's 0.45 and 0.40 ms read over 0.345, two of its three, and run again;
    # c's 0.40 is one of three (its median stands) and is not
    assert order == [("a", 1), ("b", 8), ("c", 1), ("d", 8)] * 3 + [("a", 1), ("a", 1)] and set(got) == {("a", 1), ("c", 1), ("d", 8)}
    assert got[("a", 1)] == [a[0], again[0], a[2]] and got[("c", 1)] == c and got[("d", 8)] == d


@pytest.mark.slow
def test_a_sample_models_fresh_process_reports_what_its_own_dry_run_and_forwards_say() -> None:
    """One real fresh process (``python -m graphprof.calibrate.fresh_faults``, as the calibration runs it): the
    dry run's peak is the one this process computes for the same model; with no limit (``inf``) every output
    from 1 MiB up is exposed to faulting, so ``exposed`` is the sum of those outputs here; the time is a
    plain forward's (within 5x of one timed here: a different process, a different speed) and the probe read."""
    from graphprof.calibrate.fresh_faults import fresh_forward
    from graphprof.calibrate.samples import _forward_calls
    from graphprof.devices.firsttouch import fresh_outputs
    from graphprof.prepared import prepare

    got = fresh_forward("squeezenet1_1", 8, math.inf, 2.0**20)
    assert got is not None
    model = prepare("squeezenet1_1", batch_size=8)
    profile = model.profile(batch_size=8)
    assert got.peak == float(profile.peak_activation_bytes) > 0
    large = sum(b for op in _forward_calls(profile) for b in fresh_outputs(op) if b >= 2.0**20)  # by hand, not split()
    assert got.exposed == pytest.approx(large) and 0.0 <= got.faulted
    x = torch.randn(8, 3, 224, 224)
    with torch.no_grad():
        model.model(x)
        start = time.perf_counter()
        model.model(x)
        here = time.perf_counter() - start
    assert here / 5 < got.forward_s < here * 5 and got.probe_s > 0


def test_the_in_forward_cost_of_a_fault_pools_the_anchors_and_replaces_the_ladders_within_its_range() -> None:
    """``fault_cost``'s example: 100 ms saved over 400 MB at a factor of 1.0 and 60 ms over 200 MB at 1.2, both
    forwards of 0.5 s, give 0.2663 ns a byte (the slope weighed by the inverse square of each forward); a forward not
    measured (0 bytes) adds nothing; a long forward's stray difference weighs little. ``in_forward_cost``
    puts it in the first-touch term where it lies within 0.5-3x of the ladder's, else keeps the ladder's; merged
    anchors average both figures."""
    from graphprof.calibrate.fresh_faults import FreshForward, fault_cost, merged
    from graphprof.calibrate.preset import in_forward_cost
    from graphprof.devices.opmodel import FirstTouch

    a = FreshForward(0.0, 0.0, 0.0, 0.5, 0.3e-3, fault_bytes=400e6, saved_s=0.100)
    b = FreshForward(0.0, 0.0, 0.0, 0.5, 0.3e-3, fault_bytes=200e6, saved_s=0.060)
    none = FreshForward(0.0, 0.0, 0.0, 0.05, 0.3e-3)
    assert fault_cost([(a, 1.0), (b, 1.2), (none, 1.0)]) == pytest.approx(2.0e8 / 7.511e17, rel=1e-4)
    assert fault_cost([(a, 1.0), (a, 1.0)]) == pytest.approx(0.100 / 400e6)  # one figure twice: itself
    assert fault_cost([(none, 1.0)]) is None
    # vit_b_16 at batch 8 in one calibration: 40 ms over 11 MB in 1.8 s moves the pooled figure by under 1%
    stray = FreshForward(0.0, 0.0, 0.0, 1.8, 0.3e-3, fault_bytes=11e6, saved_s=0.040)
    assert fault_cost([(a, 1.0), (stray, 1.0)]) == pytest.approx(0.100 / 400e6, rel=0.01)
    touch = FirstTouch(32 * 2**20, 0.237e-9)
    got, found = in_forward_cost(touch, {("a", 8): a, ("b", 8): b, ("c", 1): none}, None)
    # no speed track: every factor 1, both forwards 0.5 s: (400e6 x 0.100 + 200e6 x 0.060) / (400e6 ** 2 + 200e6 ** 2)
    # = 5.2e7 / 2.0e17 = 0.26 ns, 1.10x the ladder's
    assert got is not None and got.per_byte_s == pytest.approx(0.26e-9) and found["used"]
    assert found["ladder_per_byte_s"] == 0.237e-9 and got.limit_bytes == touch.limit_bytes
    wild = a._replace(saved_s=1.0)  # 2.5 ns a byte: over 3x the ladder's
    assert in_forward_cost(touch, {("a", 8): wild}, None) == (
        touch,
        {"ladder_per_byte_s": 0.237e-9, "forward_per_byte_s": 2.5e-9, "used": False},
    )
    assert in_forward_cost(touch, {("c", 1): none}, None)[0] == touch and in_forward_cost(None, {}, None) == (None, {})
    both = merged([a, b], 0.3e-3)  # both at the anchor's speed: unscaled
    assert (both.fault_bytes, both.saved_s) == pytest.approx((300e6, 0.080))


_KEPT_CHILD = """
import json, torch
from graphprof.calibrate.fresh_faults import _kept
from graphprof.measure.timing import faulted_bytes
relu, x = torch.nn.ReLU(), torch.randn(10 * 2**20)
with torch.no_grad():
    relu(x)
    faulted = faulted_bytes(lambda: relu(x))
print(json.dumps(_kept(relu, x, faulted, 0.010) + (faulted,)))
"""


def test_a_kept_heap_faults_nothing_once_grown() -> None:
    """A fresh process: a ReLU writing a fresh 40 MiB output faults all of it with glibc's defaults (above the 32
    MiB threshold: mapped every call); on the kept heap, after the warm-up calls, nothing, so every faulted byte
    counts. The seconds saved are a difference of two timings (not checked: noise)."""
    import json
    import subprocess
    import sys

    from graphprof.measure.heap import glibc

    if not glibc():
        pytest.skip("glibc's allocator")
    done = subprocess.run([sys.executable, "-c", _KEPT_CHILD], capture_output=True, text=True, timeout=300, check=True)
    fault_bytes, _saved, faulted = json.loads(done.stdout.strip().splitlines()[-1])
    assert 40 * 2**20 <= faulted < 41 * 2**20 and fault_bytes == faulted


def test_what_a_fault_costs_is_brought_to_the_tables_speed_with_the_samples() -> None:
    """``at_table``'s example: 0.40 ns a byte measured at a first reading of 0.50 ms, a table at 0.30 ms (the median
    of the fresh processes' readings): 0.40 x 0.6 ** 0.6 = 0.294 ns, the factor every sample takes
    (``SpeedTrack.to_table``); the rest of the term unchanged; no term, none."""
    from graphprof.calibrate.preset import at_table
    from graphprof.calibrate.speed import SpeedTrack
    from graphprof.devices.opmodel import FirstTouch

    track = SpeedTrack(0.50e-3, [0.50e-3, 0.31e-3], probe=lambda: 0.30e-3)
    track.fresh_s = [0.29e-3, 0.30e-3, 0.31e-3]
    touch = FirstTouch(32 * 2**20, 0.40e-9, share_below=0.05)
    got = at_table(touch, track)
    assert got is not None and got.per_byte_s == pytest.approx(0.294e-9, rel=1e-3) == 0.40e-9 * track.to_table()
    assert (got.limit_bytes, got.share_below) == (touch.limit_bytes, 0.05) and at_table(None, track) is None

"""Ops timed where they run (graphprof.measure.context, graphprof.calibrate.samples.context_pairs), the first
touch of large outputs (graphprof.devices.opmodel, graphprof.calibrate.bench), and the fit's smearing term
and distinct configurations (graphprof.calibrate.fit_ops).

The pairing and the share of the time outside the calls are checked on hand-made runs with known sums; the real pass on a small model is checked for what does not depend on this machine's speed (the
calls it sees are the dry run's, the model is left as found)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from graphprof.base.choices import OpStatus, Phase
from graphprof.base.names import functional_op
from graphprof.calibrate.samples import context_pairs, samples_from_context
from graphprof.devices.opmodel import ALONE, IN_CONTEXT, FirstTouch, Sample, fresh_bytes, op_features
from graphprof.measure.context import ContextTimes, context_times


def _record(name: str, written: int = 0, outputs: tuple[tuple[int, ...], ...] = ((1,),)) -> SimpleNamespace:
    return SimpleNamespace(op=f"aten.{name}", phase=Phase.FORWARD, status=OpStatus.COUNTED, cost=SimpleNamespace(bytes_written=written),
                           output_shapes=outputs)  # fmt: skip


def _profile(*ops: str | SimpleNamespace) -> SimpleNamespace:
    records = [op if isinstance(op, SimpleNamespace) else _record(op) for op in ops]
    return SimpleNamespace(layers=[SimpleNamespace(ops=records[:2]), SimpleNamespace(ops=records[2:])])


def test_the_time_outside_the_calls_is_shared_by_their_time_and_the_pairs_sum_to_the_forward() -> None:
    # three calls of 1, 2 and 3 ms in a forward of 7.2 ms: 1.2 ms outside them, each call scaled by 7.2 / 6
    times = ContextTimes((("aten::convolution", 1e-3), ("aten::relu_", 2e-3), ("aten::addmm", 3e-3)), 7.2e-3, 7.5e-3, 3)
    assert times.outside_s == pytest.approx(1.2e-3)
    pairs = context_pairs(_profile("convolution", "relu_", "addmm"), times)
    assert [op.op for op, _ in pairs] == ["aten.convolution", "aten.relu_", "aten.addmm"]
    assert [s for _, s in pairs] == pytest.approx([1.2e-3, 2.4e-3, 3.6e-3])
    assert math.isclose(sum(s for _, s in pairs), times.forward_s)


def test_a_profiler_that_costs_more_than_the_forward_scales_the_calls_down() -> None:
    # calls of 2 and 4 ms under the profiler, a plain forward of 3 ms: each call halved, nothing outside
    times = ContextTimes((("aten::mm", 2e-3), ("aten::gelu", 4e-3)), 3e-3, 6.5e-3, 3)
    assert times.outside_s == 0.0
    assert [s for _, s in context_pairs(_profile("mm", "gelu"), times)] == pytest.approx([1e-3, 2e-3])


def test_a_fused_kernel_the_dry_run_sees_decomposed_pairs_with_nothing() -> None:
    # the real run's fast path (one fused call) against the dry run's bmm, softmax, bmm: the calls around pair
    times = ContextTimes((("aten::addmm", 1e-3), ("aten::_native_multi_head_attention", 5e-3), ("aten::add", 1e-3)), 7e-3, 7e-3, 3)
    pairs = context_pairs(_profile("addmm", "bmm", "_softmax", "bmm", "add"), times)
    assert [op.op for op, _ in pairs] == ["aten.addmm", "aten.add"]
    assert [s for _, s in pairs] == pytest.approx([1e-3, 1e-3])


def test_fresh_bytes_count_new_outputs_above_the_limit() -> None:
    # 60 MB over two outputs of 3 and 1 elements: 45 MB and 15 MB; above a 32 MiB limit only the 45 MB one
    op = _record("native_batch_norm", 60_000_000, ((3,), (1,)))
    assert fresh_bytes(op) == 60_000_000 and fresh_bytes(op, 32 * 2**20) == 45_000_000
    assert fresh_bytes(_record("relu_", 60_000_000)) == 0.0  # in place: no new memory
    touch = FirstTouch(32 * 2**20, 0.27e-3 / 1e6)  # 0.27 ms per MB
    assert touch.seconds(op) == pytest.approx(0.27e-3 * 45)
    assert touch.seconds(SimpleNamespace(op="prim.device")) == 0.0


def test_repeated_configurations_are_fitted_once_with_their_weight() -> None:
    pytest.importorskip("sklearn")
    from graphprof.calibrate.fit_ops import distinct

    f, g = (1.0, 2.0, 3.0), (1.0, 2.0, 4.0)
    samples = [Sample("conv_dense", f, 1e-3, group="m"), Sample("conv_dense", f, 3e-3, group="m"), Sample("conv_dense", g, 5e-3, group="m"),
               Sample("conv_dense", f, 7e-3, group="n")]  # fmt: skip
    points, weight = distinct(samples)
    assert [(p.features, p.seconds, p.group) for p in points] == [(f, pytest.approx(2e-3), "m"), (g, 5e-3, "m"), (f, 7e-3, "n")]
    assert weight.tolist() == [2.0, 1.0, 1.0]
    # generic reads the first two features: f and g are one configuration of model m there
    assert distinct(samples, generic=True)[1].tolist() == [3.0, 1.0]


def test_the_first_touch_of_this_machine_is_measured_or_said_absent() -> None:
    from graphprof.calibrate.bench import TOUCH_LADDER_MIB, measure_first_touch

    touch = measure_first_touch(torch.device("cpu"))
    assert len(touch["ladder"]) == len(TOUCH_LADDER_MIB) and all(extra >= 0 for _, extra in touch["ladder"])
    if touch["limit_bytes"] is not None:  # glibc: between the smallest and the largest size timed, and a cost per byte
        assert min(TOUCH_LADDER_MIB) * 2**20 / 2 <= touch["limit_bytes"] <= max(TOUCH_LADDER_MIB) * 2**20 and touch["per_byte_s"] > 0


def test_the_plain_forward_sees_the_dry_runs_calls_and_leaves_the_model_as_found() -> None:
    import graphprof

    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 16 * 16, 10))
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(2, 3, 16, 16)
    times = context_times(model, (x,), {}, runs=2, warmup=1, timed=2)
    profile = graphprof.profile_model(model, example_inputs=(x,))
    dry = [
        functional_op(op.op.removeprefix("aten."))
        for row in profile.layers
        for op in row.ops
        if op.phase is Phase.FORWARD and op.op.startswith("aten.")
    ]
    assert [functional_op(name.removeprefix("aten::")) for name, _ in times.ops] == dry
    assert times.forward_s > 0 and times.ops_s > 0 and times.runs == 2 and times.fault_bytes >= 0.0  # counted on the CPU
    assert model.training and all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    samples = samples_from_context(profile, times, group="toy")
    assert samples and all(s.features[-2] == IN_CONTEXT and s.group == "toy" for s in samples if s.kind != "generic")
    # the calls alone (the calibration's anchored models): the same calls, the forward's time the profiled one's,
    # no faults counted, and the model still as found
    alone = context_times(model, (x,), {}, runs=2, warmup=1, timed=2, plain=False)
    assert [name for name, _ in alone.ops] == [name for name, _ in times.ops]
    assert alone.forward_s == alone.profiled_s > 0 and alone.fault_bytes == 0.0
    assert model.training and all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_where_a_call_was_timed_is_a_feature() -> None:
    shapes, out = [(1, 8, 16, 16), (8, 8, 3, 3)], [(1, 8, 16, 16)]
    alone = op_features("conv_dense", 1e6, 1e5, shapes, out, ALONE)
    placed = op_features("conv_dense", 1e6, 1e5, shapes, out)
    assert alone[:-3] == placed[:-3] and alone[-3:] == [0.0, 0.0, 0.0]
    # in context: its weight's elements (8 x 8 x 3 x 3 = 576, read cold), the flag, its output's elements
    assert placed[-3:] == [pytest.approx(math.log(576 + 1)), 1.0, pytest.approx(math.log(8 * 16 * 16 + 1))]


def test_smearing_turns_a_median_into_a_mean_and_one_wild_sample_cannot_blow_it_up() -> None:
    pytest.importorskip("sklearn")
    from graphprof.calibrate.fit_ops import SMEAR_BOUND, smearing

    # errors of +-0.5 in equal numbers: log((e^-0.5 + e^0.5) / 2) = log(1.1276) = 0.1201
    assert smearing(np.array([0.5, -0.5])) == pytest.approx(0.1201, abs=1e-4)
    assert smearing(np.zeros(5)) == 0.0
    # one error of -50 (predicted e^50 too fast) counts as -1: log((e^1 + 3) / 4) = log(1.4296) = 0.3574
    assert smearing(np.array([-50.0, 0.0, 0.0, 0.0])) == pytest.approx(math.log((math.e + 3) / 4))
    assert smearing(np.array([-50.0, -50.0])) == pytest.approx(SMEAR_BOUND)


def test_a_kinds_smearing_is_over_the_residuals_its_predictor_leaves() -> None:
    """Samples on a power law with a +-0.5 scatter in log time, alternating, in two models: the law alone (k = 0)
    leaves the scatter, and its smearing is Duan's over it, log((e^-0.5 + e^0.5) / 2) = 0.1201 within what the ridge
    fit moves; with neighbours (k = 1), each sampled configuration is priced at its own time, nothing is left to
    smear, and a prediction at a sample's configuration is that sample's time."""
    pytest.importorskip("sklearn")
    from graphprof.calibrate.fit_ops import fit_kind
    from graphprof.devices.opmodel import Sample

    samples = [Sample("add", (math.log(n), math.log(n)), 1e-9 * n * math.exp(0.5 if i % 2 else -0.5), "calibration", f"m{i % 3}")
               for i, n in enumerate(2.0**p for p in range(10, 30))]  # fmt: skip
    law = fit_kind(samples, k=0)
    assert law.smear == pytest.approx(0.1201, abs=0.02)
    near = fit_kind(samples, k=1)
    assert abs(near.smear) < 0.005
    at = samples[7]
    assert float(np.exp(near.log_seconds([at.features])[0])) == pytest.approx(at.seconds, rel=0.01)


def test_a_forwards_faulted_bytes_are_shared_by_outputs_below_the_limit_and_priced_by_their_share() -> None:
    from graphprof.calibrate.preset import faulting_share
    from graphprof.calibrate.samples import fault_split

    mib = 2**20
    touch = FirstTouch(32 * mib, 1e-9)  # 1 ms per MB (1e6 bytes)

    # outputs of 64 MiB (faults whole: priced by the limit), 8 MiB and 4 MiB (exposed), 512 KiB (never faults)
    def call(name: str, written: int) -> SimpleNamespace:
        from graphprof.formulas import Cost

        fields = {**vars(_record(name, written, ((written // 4,),))), "cost": Cost(flops=written, bytes_written=written)}
        return SimpleNamespace(**fields, input_shapes=[(written // 4,)], work_fraction=1.0)

    big, mid, small, tiny = (call(n, w) for n, w in (("gelu", 64 * mib), ("gelu", 8 * mib), ("relu", 4 * mib), ("add", mib // 2)))
    profile = _profile(big, mid, small, tiny)
    # the forward faulted 70 MiB: 64 MiB of them the large output's, 6 MiB spread over the 12 MiB exposed
    times = ContextTimes((("aten::gelu", 0.2), ("aten::gelu", 0.1), ("aten::relu", 0.05), ("aten::add", 0.01)), 0.36, 0.36, 3,
                         fault_bytes=70 * mib)  # fmt: skip
    assert fault_split(profile, times.fault_bytes, touch) == (6 * mib, 12 * mib)
    # two forwards of one peak: no split between them, so the share is all faulted over all exposed
    shared = faulting_share(touch, [(*fault_split(profile, times.fault_bytes, touch), 80e6), (0.0, 4 * mib, 80e6)])
    assert shared is not None and shared.share_below == pytest.approx(6 / 16) and shared.trim_peak_bytes == 0.0
    # priced: the 8 MiB output pays 3/8 of its bytes at 1 ns each; the 64 MiB one all; the 512 KiB one none
    assert shared.seconds(mid) == pytest.approx(1e-9 * 8 * mib * 6 / 16)
    assert shared.seconds(big) == pytest.approx(1e-9 * 64 * mib) and shared.seconds(tiny) == 0.0
    assert FirstTouch.from_dict(shared.to_dict()) == shared
    # the samples lose what the pages cost them: the 8 MiB call half its faulted share of 6 MiB (4 of the 12 MiB it holds 8)
    samples = samples_from_context(profile, times, first_touch=touch)
    assert [s.seconds for s in samples][:2] == [pytest.approx(0.2 - 1e-9 * 64 * mib), pytest.approx(0.1 - 1e-9 * 8 * mib * 0.5)]


@pytest.mark.slow
def test_a_fresh_process_counts_a_forwards_faults_times_it_and_a_missing_model_gives_none() -> None:
    from graphprof.calibrate.fresh_faults import TIMED, fresh_forward

    run = fresh_forward("squeezenet1_1", 2, 32 * 2**20, 2**20)
    assert run is not None and run.faulted >= 0.0 and run.exposed > 0.0  # squeezenet at batch 2 has outputs over 1 MiB
    from graphprof.prepared import prepare

    # its dry run's peak of live activations beside them, the one this process's dry run finds
    assert run.peak == prepare("squeezenet1_1", batch_size=2).profile(batch_size=2).peak_activation_bytes > 0
    assert run.faults == (run.faulted, run.exposed, run.peak)
    # its forward's mean time and the probe: a squeezenet forward at batch 2 is far above one probe call (a
    # small block at batch 1) and far below a second on any CPU this runs on
    assert TIMED == 10 and 0.0 < run.probe_s < run.forward_s < 1.0
    assert fresh_forward("no_such_model_anywhere", 2, 32 * 2**20, 2**20) is None


def test_the_trim_peak_splits_the_forwards_that_fault_from_those_that_do_not() -> None:
    """The docstring's example by hand: peaks 24, 48, 56 MB faulting 0, 0, 24 of 100 MB each split at 52 MB
    with share 0.24 (nothing unexplained); a forward peaking below it pays no share, one at or above it does."""
    from graphprof.calibrate.preset import faulting_share
    from graphprof.formulas import Cost

    touch = FirstTouch(32 * 2**20, 1e-9)
    fitted = faulting_share(touch, [(0.0, 100e6, 24e6), (0.0, 100e6, 48e6), (24e6, 100e6, 56e6)])
    assert fitted is not None
    assert fitted.trim_peak_bytes == pytest.approx(52e6) and fitted.share_below == pytest.approx(0.24)
    # every forward faulting alike: no split explains more than none (the lowest cut wins a tie)
    flat = faulting_share(touch, [(10e6, 100e6, 24e6), (10e6, 100e6, 56e6)])
    assert flat is not None and flat.trim_peak_bytes == 0.0 and flat.share_below == pytest.approx(0.1)
    # nothing faulted anywhere: share 0
    none = faulting_share(touch, [(0.0, 100e6, 24e6), (0.0, 100e6, 56e6)])
    assert none is not None and none.share_below == 0.0
    # priced: an 8 MB output pays 0.24 of its bytes at 1 ns each at a peak of 60 MB, nothing at 30 MB, the share
    # where the peak is not known; a 64 MiB output (above the limit) pays whole at any peak
    mid = SimpleNamespace(**{**vars(_record("gelu", 8_000_000, ((2_000_000,),))), "cost": Cost(flops=1, bytes_written=8_000_000)})
    big = SimpleNamespace(**{**vars(_record("gelu", 64 * 2**20, ((16 * 2**20,),))), "cost": Cost(flops=1, bytes_written=64 * 2**20)})
    assert fitted.for_forward(60e6).seconds(mid) == pytest.approx(1e-9 * 0.24 * 8e6)
    assert fitted.for_forward(30e6).seconds(mid) == 0.0
    assert fitted.for_forward(None).seconds(mid) == pytest.approx(1e-9 * 0.24 * 8e6)
    assert fitted.for_forward(30e6).seconds(big) == pytest.approx(1e-9 * 64 * 2**20)
    assert FirstTouch.from_dict(fitted.to_dict()) == fitted
    assert FirstTouch.from_dict({"limit_bytes": 1.0, "per_byte_s": 1e-9}).trim_peak_bytes == 0.0  # a calibration from before


def test_one_slow_climb_of_the_first_touch_ladder_does_not_set_the_price(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each size's figures are the median of the climbs: a first climb at 1.35 ns a byte above 32 MiB (a host
    backing pages afresh) among four at 0.18 ns gives 0.18 ns, and the limit stays between 31 and 33 MiB."""
    from graphprof.calibrate import bench

    calls: list[float] = []

    def extra(mib: float, dev: torch.device) -> tuple[float, float]:
        calls.append(mib)
        slow = len(calls) <= len(bench.TOUCH_LADDER_MIB)  # the first climb
        paid = mib > 32
        return (mib * 2**20 * (1.35e-9 if slow else 0.18e-9) if paid else 0.0), 1e-3

    monkeypatch.setattr(bench, "_fresh_extra", extra)
    touch = bench.measure_first_touch(torch.device("cpu"))
    assert len(calls) == bench.TOUCH_CLIMBS * len(bench.TOUCH_LADDER_MIB)
    assert touch["per_byte_s"] == pytest.approx(0.18e-9)
    assert 31 * 2**20 < touch["limit_bytes"] < 33 * 2**20


def test_the_limit_is_at_most_glibcs_settled_threshold_where_a_loop_finds_a_larger_block_at_the_heaps_top(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ladder whose 33 MiB step paid nothing (served from the heap's free top in the loop) puts the middle at
    sqrt(33 x 36) = 34.5 MiB; with glibc the limit is its settled mmap threshold, 32 MiB less 16 KiB, instead;
    and the record says what a convolution's blocked copies come to here."""
    from graphprof.calibrate import bench
    from graphprof.measure.heap import STEADY_BLOCK_BYTES

    monkeypatch.setattr(bench, "_fresh_extra", lambda mib, dev: ((mib * 2**20 * 0.2e-9) if mib > 33 else 0.0, 1e-3))
    monkeypatch.setattr(bench, "glibc", lambda: True)
    assert bench.measure_first_touch(torch.device("cpu"))["limit_bytes"] == float(STEADY_BLOCK_BYTES)
    monkeypatch.setattr(bench, "glibc", lambda: False)
    touch = bench.measure_first_touch(torch.device("cpu"))
    assert touch["limit_bytes"] == pytest.approx((33 * 36) ** 0.5 * 2**20)
    assert touch["conv_block"] in (0, 8, 16) and touch["threads"] == torch.get_num_threads()


def _conv_record(x: tuple[int, ...], w: tuple[int, ...], y: tuple[int, ...]) -> SimpleNamespace:
    from graphprof.formulas import Cost

    return SimpleNamespace(op="aten.convolution", status=OpStatus.COUNTED, input_shapes=(x, w), output_shapes=(y,),
                           cost=Cost(flops=1, bytes_written=4 * math.prod(y)))  # fmt: skip


def test_a_convolutions_blocked_copies_are_fresh_memory_and_priced_as_outputs() -> None:
    """Counted on an AVX-512 machine (block 16), fp32: (8, 40, 150, 150) depthwise writes its output (28.8 MB)
    and two copies at 48 channels, 8 x 48 x 150 x 150 x 4 = 34.56 MB each; an input of fewer channels than a
    block is read as it is (a first convolution's 3); one thread's 1x1 stride-1 convolution at batch 8 is
    PyTorch's own kernel (no copies), at two threads oneDNN's."""
    from graphprof.devices.opmodel import conv_scratch

    dw = _conv_record((8, 40, 150, 150), (40, 1, 3, 3), (8, 40, 150, 150))
    touch = FirstTouch(limit_bytes=32 * 2**20, per_byte_s=1e-9, min_bytes=2**20, conv_block=16, threads=2)
    assert touch.fresh(dw) == pytest.approx([28.8e6, 34.56e6, 34.56e6])
    assert touch.seconds(dw) == pytest.approx(1e-9 * 2 * 34.56e6)  # the copies above 32 MiB; the output below, share 0
    first = _conv_record((8, 3, 300, 300), (40, 3, 3, 3), (8, 40, 150, 150))
    assert conv_scratch("aten.convolution", first.input_shapes, first.output_shapes, 4.0, 16, 2) == pytest.approx([34.56e6])
    pointwise = ((8, 64, 56, 56), (256, 64, 1, 1)), ((8, 256, 56, 56),)
    assert conv_scratch("aten.convolution", *pointwise, 4.0, 16, 1) == []
    assert conv_scratch("aten.convolution", *pointwise, 4.0, 16, 2) == pytest.approx([8 * 64 * 56 * 56 * 4, 8 * 256 * 56 * 56 * 4])
    # AVX2's block of 8: 40 channels need no rounding; no oneDNN (block 0) or not a convolution: nothing
    assert conv_scratch("aten.convolution", dw.input_shapes, dw.output_shapes, 4.0, 8, 2) == pytest.approx([28.8e6, 28.8e6])
    assert conv_scratch("aten.convolution", dw.input_shapes, dw.output_shapes, 4.0, 0, 2) == []
    assert conv_scratch("aten.add", dw.input_shapes, dw.output_shapes, 4.0, 16, 2) == []
    # a calibration from before the copies were priced prices none
    assert FirstTouch.from_dict({"limit_bytes": 1.0, "per_byte_s": 1e-9}).fresh(dw) == pytest.approx([28.8e6])


#: One depthwise convolution's faults counted in a fresh process (a long-running one's heap may hold free blocks
#: that serve the copies without a fault): after the settled heap and two calls, the median of three calls.
_COUNT_CONV_FAULTS = """
import statistics, torch
from graphprof.measure.context import faulted_bytes
from graphprof.measure.heap import settle_malloc
torch.set_num_threads(2)
settle_malloc()
x, w = torch.randn(8, 192, 75, 75), torch.randn(192, 1, 3, 3)
conv = lambda: torch.nn.functional.conv2d(x, w, None, 1, 1, 1, 192)
with torch.no_grad():
    conv(); conv()
    print(statistics.median(faulted_bytes(conv) for _ in range(3)))
"""


@pytest.mark.slow
def test_the_copies_counted_match_a_convolutions_faults_in_a_fresh_process() -> None:
    """An independent reference: the minor faults one call of a depthwise convolution of (8, 192, 75, 75) takes in a
    fresh process at two threads, its output and both copies above glibc's settled threshold, match the bytes
    priced (3 x 34.56 MB) within 5%."""
    import subprocess
    import sys

    from graphprof.calibrate.bench import conv_copies
    from graphprof.measure.heap import glibc

    if not glibc() or conv_copies()["conv_block"] != 16 or torch.get_num_threads() < 2:
        pytest.skip("counted for glibc, oneDNN's AVX-512 block and two threads or more")
    done = subprocess.run([sys.executable, "-c", _COUNT_CONV_FAULTS], capture_output=True, text=True, timeout=300, check=True)
    counted = float(done.stdout.strip().splitlines()[-1])
    record = _conv_record((8, 192, 75, 75), (192, 1, 3, 3), (8, 192, 75, 75))
    priced = sum(FirstTouch(32 * 2**20, 1e-9, conv_block=16, threads=2).fresh(record))
    assert priced == pytest.approx(3 * 34.56e6)
    assert abs(counted - priced) < 0.05 * priced

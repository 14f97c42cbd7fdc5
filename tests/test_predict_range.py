"""No wild points (issue 53): a kind's law is never extrapolated freely. Each call's prediction is held within the
efficiencies its nearest samples reached (graphprof.devices.predict), the calls outside their kind's sampled range
are named, and the interval widens to take in what the law alone would have said. Synthetic samples with a known
law: nothing depends on this machine's speed."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from graphprof.base.choices import OpStatus
from graphprof.devices.hardware import Hardware
from graphprof.devices.opmodel import OpModel, Sample, op_features
from graphprof.devices.predict import OUT_OF_RANGE_SD, out_of_range, predict_interval, predict_ops
from graphprof.devices.table import Calibration, ClassRates
from graphprof.formulas import Cost

pytest.importorskip("sklearn")

#: 1 GFLOP/s and 1 GB/s: an op's roofline time is max(flops, bytes) nanoseconds
HW = Hardware(name="synthetic", label="synthetic CPU", kind="test", peak_tflops={"float32": 0.001}, bandwidth_gbs=1.0, source="test")


def _shapes(n: int) -> tuple[list[list[int]], list[list[int]]]:
    """An (n, 64) x (64, 64) product: its inputs and output."""
    return [[n, 64], [64, 64]], [[n, 64]]


def _op(n: int) -> SimpleNamespace:
    inputs, outputs = _shapes(n)
    flops = 2 * n * 64 * 64
    return SimpleNamespace(op="aten.mm", input_shapes=inputs, output_shapes=outputs, status=OpStatus.COUNTED, work_fraction=1.0,
                           cost=Cost(flops=flops, bytes_read=4 * (n * 64 + 64 * 64), bytes_written=4 * n * 64))  # fmt: skip


def _seconds(n: int) -> float:
    """The synthetic truth: the roofline time at 50% efficiency (2 ns a FLOP) plus 10 us."""
    return 2e-9 * 2 * n * 64 * 64 + 1e-5


def _model(sizes: list[int], law_slope: float | None = None) -> OpModel:
    """A linear kind fitted to products of ``sizes`` rows (several models' worth, so the fit chooses its
    neighbours); ``law_slope`` replaces the fitted slope on FLOPs (a law that runs off outside its samples)."""
    from graphprof.calibrate.fit_ops import fit_op_model

    rng = random.Random(0)
    samples = []
    for g in range(4):
        for n in sizes:
            op = _op(n)
            features = op_features("linear", op.cost.flops, op.cost.bytes_moved, op.input_shapes, op.output_shapes)
            samples.append(Sample("linear", tuple(features), _seconds(n) * math.exp(rng.gauss(0, 0.05)), group=f"m{g}"))
    model = fit_op_model(samples)
    if law_slope is None:
        return model
    linear = model.kinds["linear"]
    coef = list(linear.coef)
    coef[0] = law_slope * linear.scale[0]  # d log t / d log flops = law_slope, on standardised features
    steep = replace(linear, coef=tuple(coef))
    # the samples' own times stay what they were: their residuals are taken against the steeper law
    points = np.asarray(linear.points)
    residuals = np.asarray(linear.residuals) + linear.linear(points) - steep.linear(points)
    return replace(model, kinds={**model.kinds, "linear": replace(steep, residuals=tuple(float(r) for r in residuals))})


def _calibration(model: OpModel) -> Calibration:
    return Calibration("synthetic", "cpu", 1.0, 1e-6, 1e-6, {"float32": {"matmul": ClassRates(1.0, 1.0, 0.0)}}, op_model=model)


def test_a_law_that_runs_off_is_held_within_its_neighbours_efficiencies() -> None:
    # samples of 16..1024 rows; the law's FLOP slope forced to 3 (time as work cubed): at 65,536 rows it
    # would say (64 ** 3) x the edge's time, about 8 minutes; the samples ran at 50% of the roofline or a
    # little less (10 us on top), so the call is held between 50% efficiency and the worst sampled one
    model = _model([16, 32, 64, 128, 256, 512, 1024], law_slope=3.0)
    cal = _calibration(model)
    far = _op(65536)
    [predicted] = predict_ops([far], "float32", HW, cal)
    roofline = 2 * 65536 * 64 * 64 * 1e-9  # 1 GFLOP/s
    assert roofline / 0.55 <= predicted <= _seconds(65536) * 1.2  # by hand: 1.07 s at 50%, never minutes
    [named] = out_of_range([far], "float32", HW, cal)
    assert named.excess_sd > OUT_OF_RANGE_SD and named.kind == "linear"
    assert named.law_seconds > 100 * named.seconds  # the law alone ran off
    interval = predict_interval([far], "float32", HW, cal)
    assert interval is not None and interval.low <= predicted <= interval.high
    assert interval.high >= named.law_seconds  # widened to take in the law's own extrapolation


def test_calls_the_samples_cover_are_not_named_and_keep_their_efficiency() -> None:
    model = _model([16, 32, 64, 128, 256, 512, 1024])
    cal = _calibration(model)
    inside = [_op(n) for n in (24, 100, 300, 700)]
    assert out_of_range(inside, "float32", HW, cal) == []
    for op, predicted in zip(inside, predict_ops(inside, "float32", HW, cal), strict=True):
        n = op.input_shapes[0][0]
        assert predicted == pytest.approx(_seconds(n), rel=0.2)


@pytest.mark.parametrize("rows", [1, 4, 16, 1024, 4096, 262144])
def test_every_prediction_lies_within_its_nearest_samples_efficiencies(rows: int) -> None:
    # the invariant, inside the range and out of it: time >= roofline / best neighbour efficiency and
    # <= roofline / worst neighbour efficiency (the roofline floor aside)
    model = _model([16, 32, 64, 128, 256, 512, 1024], law_slope=2.0)
    cal = _calibration(model)
    op = _op(rows)
    [predicted] = predict_ops([op], "float32", HW, cal)
    [(_, near)] = model.beyond_range(
        [("linear", op_features("linear", op.cost.flops, op.cost.bytes_moved, op.input_shapes, op.output_shapes), [])]
    )
    assert near is not None and near.shape == (3, 3)
    own = max(op.cost.flops * 1e-9, op.cost.bytes_moved * 1e-9)
    rates = [max(f * 1e-9, b * 1e-9) / s for f, b, s in near]
    assert own / max(rates) * (1 - 1e-9) <= predicted <= max(own / min(rates), own) * (1 + 1e-9)
    assert np.all(near[:, 2] > 0)


def test_the_profile_names_the_calls_priced_out_of_range_in_its_notes_and_json() -> None:
    import dataclasses

    from torch import nn

    import graphprof
    from graphprof.cost.roofline import with_roofline
    from graphprof.render.sink import render_result
    from graphprof.schemas import validate

    calibration = dataclasses.replace(graphprof.get_hardware("h100").calibration, op_model=_model([16, 32, 64, 128, 256, 512, 1024]),
                                      bandwidth_gbs=HW.bandwidth_gbs)  # fmt: skip
    cpu = dataclasses.replace(HW, calibration=calibration)
    far = with_roofline(graphprof.profile_model(nn.Linear(64, 64, bias=False), input_shape=(65536, 64)), cpu)
    # the product, and the weight's transpose (a view: its kind has no samples here, so generic's prices it)
    named = {o.op: o for o in far.roofline.out_of_range}
    assert set(named) == {"aten.mm", "aten.t"} and named["aten.mm"].kind == "linear"
    assert any("2 call(s) lie outside the range their kind's samples cover" in note and "linear x1" in note for note in far.roofline.notes)
    data = json.loads(render_result(far))
    assert {o["op"] for o in data["roofline"]["predicted_out_of_range"]} == {"aten.mm", "aten.t"}
    validate(data)
    near = with_roofline(graphprof.profile_model(nn.Linear(64, 64, bias=False), input_shape=(256, 64)), cpu)
    assert [o.op for o in near.roofline.out_of_range] == ["aten.t"]  # the product lies inside its samples' range
    assert [o["op"] for o in json.loads(render_result(near))["roofline"]["predicted_out_of_range"]] == ["aten.t"]


def test_the_machines_speed_now_scales_the_kind_models_and_never_the_roofline_bound() -> None:
    from graphprof.devices.probe import SPEED_LIMITS, probe_seconds, speed_factor

    assert speed_factor(2.4e-3, 1.8e-3) == pytest.approx(0.841, abs=5e-4)  # the module docstring's example: 0.75 ** 0.6
    assert speed_factor(1e-3, 1e-3) == 1.0 and speed_factor(1e-3, 2e-3) == pytest.approx(2**0.6)  # an elasticity below 1
    assert speed_factor(1e-3, 3e-3) is None and speed_factor(1e-3, 0.4e-3) is None  # outside 0.5-2x: not applied
    assert SPEED_LIMITS == (0.5, 2.0) and 0 < probe_seconds() < 1.0
    cal = _calibration(_model([16, 32, 64, 128, 256, 512, 1024]))
    ops = [_op(n) for n in (24, 300, 700)]
    at_calibration = predict_ops(ops, "float32", HW, cal)
    slower = predict_ops(ops, "float32", HW, replace(cal, speed=1.5))
    assert slower == pytest.approx([1.5 * t for t in at_calibration])
    faster = predict_ops(ops, "float32", HW, replace(cal, speed=0.01))
    bounds = [max(op.cost.flops * 1e-9, op.cost.bytes_moved * 1e-9) for op in ops]  # 1 GFLOP/s, 1 GB/s
    assert faster == pytest.approx([max(0.01 * t, b) for t, b in zip(at_calibration, bounds, strict=True)])
    assert all(f >= b * (1 - 1e-12) for f, b in zip(faster, bounds, strict=True))  # the lower bound stays one


def test_a_local_file_that_timed_the_probe_is_scaled_to_now_with_a_note() -> None:
    from graphprof.devices.hardware import _at_speed_now

    cal = _calibration(_model([16, 32, 64]))
    scaled, note = _at_speed_now(cal, {"probe_s": 1e-9})  # a probe 1 ns long then: far outside the limits now
    assert scaled is cal and note is not None and "not scaled" in note
    same, none = _at_speed_now(cal, {"threads": 2})  # no probe in the file: as it was, silently
    assert same is cal and none is None


def test_a_local_file_with_its_readings_predicts_at_its_own_speed_inside_the_band(monkeypatch: pytest.MonkeyPatch) -> None:
    from graphprof.devices import probe
    from graphprof.devices.hardware import _at_speed_now

    monkeypatch.setattr(probe, "probe_now", lambda readings=probe.READINGS: 0.45e-3)
    cal = _calibration(_model([16, 32, 64]))
    readings = [0.29e-3 + i * 0.02e-3 for i in range(11)]
    same, _ = _at_speed_now(cal, {"probe_s": 0.39e-3, "probes_s": readings})
    assert same.speed == 1.0
    # the fresh processes' readings widen the band: 0.45 ms lies beyond 0.29-0.41 alone, inside with a fresh 0.46
    narrow = readings[:7]
    beyond, _ = _at_speed_now(cal, {"probe_s": 0.39e-3, "probes_s": narrow, "fresh_probes_s": [0.30e-3, 0.31e-3, 0.33e-3]})
    assert beyond.speed == pytest.approx((0.45 / 0.41) ** 0.6)
    inside, _ = _at_speed_now(cal, {"probe_s": 0.39e-3, "probes_s": narrow, "fresh_probes_s": [0.30e-3, 0.31e-3, 0.46e-3]})
    assert inside.speed == 1.0
    alone, _ = _at_speed_now(cal, {"probe_s": 0.39e-3})  # an older file without its readings: the whole ratio
    assert alone.speed == pytest.approx((0.45 / 0.39) ** 0.6)


def test_the_speed_factor_a_prediction_took_is_in_its_json_as_its_note_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """``roofline.prediction.speed_factor`` is the factor the note prints (read back the way a benchmark reads it),
    1 where none was applied; the result validates against the schema either way."""
    import re

    from torch import nn

    import graphprof
    from graphprof.cost.roofline import with_roofline
    from graphprof.devices import probe
    from graphprof.devices.hardware import _at_speed_now
    from graphprof.render.sink import render_result
    from graphprof.schemas import validate

    monkeypatch.setattr(probe, "probe_now", lambda readings=probe.READINGS: 0.45e-3)
    cal = _calibration(_model([16, 32, 64]))
    scaled, note = _at_speed_now(cal, {"probe_s": 0.39e-3})
    found = re.search(r"scaled by ([0-9.]+)", str(note))
    assert found is not None
    summary = scaled.summary()
    assert summary["speed_factor"] == pytest.approx(float(found.group(1)), abs=0.005)
    assert summary["speed_factor"] == pytest.approx((0.45 / 0.39) ** 0.6)  # 1.0896 by hand
    assert cal.summary()["speed_factor"] == 1.0

    calibration = replace(graphprof.get_hardware("h100").calibration, op_model=_model([16, 32, 64]),
                          bandwidth_gbs=HW.bandwidth_gbs, speed=scaled.speed)  # fmt: skip
    result = with_roofline(graphprof.profile_model(nn.Linear(64, 64), input_shape=(32, 64)), replace(HW, calibration=calibration))
    data = json.loads(render_result(result))
    assert data["roofline"]["prediction"]["speed_factor"] == pytest.approx(1.0896, abs=1e-4)
    validate(data)

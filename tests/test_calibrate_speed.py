"""The calibration's samples brought to one speed (``graphprof.calibrate.speed``)."""

from __future__ import annotations

import math

import pytest

from graphprof.calibrate.speed import SpeedTrack, at_speed
from graphprof.devices.opmodel import Sample


def _probe(*readings: float):
    it = iter(readings)
    return lambda: next(it)


def test_the_module_docstrings_worked_example() -> None:
    track = SpeedTrack.start(_probe(0.40e-3, 0.48e-3, 0.52e-3))
    out, factor = track.timed(lambda: "timed")
    assert out == "timed"
    # (0.40 / sqrt(0.48 * 0.52)) ** 0.6 = (0.40 / 0.49960) ** 0.6 = 0.80064 ** 0.6 = 0.87511 (the probe's elasticity)
    assert factor == pytest.approx(0.87511, abs=1e-5)
    assert track.readings_s == [0.40e-3, 0.48e-3, 0.52e-3]
    assert track.reference_s == 0.40e-3


def test_a_stretch_at_the_reference_speed_is_left_alone_and_a_fast_one_is_slowed() -> None:
    track = SpeedTrack.start(_probe(1.0, 1.0, 1.0, 0.5, 0.8))
    assert track.timed(lambda: None)[1] == 1.0
    # the machine ran fast (readings 0.5 and 0.8): its times are scaled up by (1 / sqrt(0.4)) ** 0.6 = 1.3164
    assert track.timed(lambda: None)[1] == pytest.approx((1 / math.sqrt(0.4)) ** 0.6) == pytest.approx(1.3164, abs=1e-4)


def test_a_misread_probe_changes_nothing() -> None:
    # 3 ms against a 1 ms reference is outside the probe's 0.5-2x: not applied
    track = SpeedTrack.start(_probe(1e-3, 3e-3, 3e-3))
    assert track.timed(lambda: None)[1] == 1.0


def test_samples_are_scaled_and_nothing_else_changes() -> None:
    samples = [Sample("conv", (1.0, 2.0), 0.010, "calibration", "resnet18"), Sample("add", (3.0,), 0.002)]
    scaled = at_speed(samples, 0.8)
    assert [s.seconds for s in scaled] == pytest.approx([0.008, 0.0016])
    assert [(s.kind, s.features, s.source, s.group) for s in scaled] == [(s.kind, s.features, s.source, s.group) for s in samples]
    assert at_speed(samples, 1.0) == samples and at_speed(samples, 1.0) is not samples


def test_samples_end_at_the_median_reading() -> None:
    # readings 0.40 (first), 0.48, 0.52, 0.44: median 0.46; samples scaled to the first reading are then
    # multiplied by (0.46 / 0.40) ** 0.6 = 1.15 ** 0.6 = 1.0875
    track = SpeedTrack.start(_probe(0.40, 0.48, 0.52, 0.44))
    track.timed(lambda: None)
    track.read()
    # with no fresh process read, the table stands at that median
    assert track.median_s == pytest.approx(0.46) and track.table_s == track.median_s
    assert track.to_table() == pytest.approx(1.0875, abs=1e-4)
    # fresh processes read 0.41, 0.43 and 0.44: the table stands at their median, 0.43, and samples scaled to the
    # first reading take (0.43 / 0.40) ** 0.6 = 1.075 ** 0.6 = 1.0444
    track.fresh_s = [0.44, 0.41, 0.43]
    assert track.table_s == pytest.approx(0.43) and track.to_table() == pytest.approx(1.0444, abs=1e-4)


def test_a_predictions_probe_is_the_median_of_its_readings(monkeypatch: pytest.MonkeyPatch) -> None:
    from graphprof.devices import probe

    # one stray fast reading (0.29) among five: the median, 0.46, is what the prediction holds against the file
    monkeypatch.setattr(probe, "probe_seconds", _probe(0.50, 0.29, 0.46, 0.47, 0.45))
    assert probe.probe_now() == pytest.approx(0.46) and probe.READINGS == 5


def test_a_reading_inside_the_calibrations_band_leaves_the_prediction_alone() -> None:
    from graphprof.devices.probe import band_of, speed_factor, speed_factor_beyond

    readings = [0.29e-3 + i * 0.02e-3 for i in range(11)]  # 0.29 .. 0.49 ms: every speed the calibration met
    band = band_of(readings)
    assert band == pytest.approx((0.29e-3, 0.49e-3))
    assert band_of(readings[:9]) is None  # too few readings to say
    assert band_of([*readings[:9], 0.0]) is None  # a reading of 0 is no reading
    assert speed_factor_beyond(0.39e-3, 0.40e-3, band) == 1.0
    assert speed_factor_beyond(0.39e-3, 0.48e-3, band) == 1.0  # a spell the calibration met (the old 10-90% band scaled it)
    # outside: the ratio to the nearer edge, (0.60 / 0.49) ** 0.6 = exp(0.6 x 0.2025) = 1.1292; (0.25 / 0.29) ** 0.6 = exp(0.6 x -0.1484) = 0.9148
    assert speed_factor_beyond(0.39e-3, 0.60e-3, band) == pytest.approx(1.1292, abs=1e-4)
    assert speed_factor_beyond(0.39e-3, 0.25e-3, band) == pytest.approx(0.9148, abs=1e-4)
    # continuous at the edges, never further from 1 than the whole ratio, and as before without a band
    assert speed_factor_beyond(0.39e-3, 0.49e-3, band) == pytest.approx(1.0)
    whole = speed_factor(0.39e-3, 0.60e-3)
    assert whole is not None and whole > speed_factor_beyond(0.39e-3, 0.60e-3, band)  # type: ignore[operator]
    assert speed_factor_beyond(0.39e-3, 0.60e-3, None) == whole
    assert speed_factor_beyond(0.39e-3, 3e-3, band) is None  # a misread: outside the 0.5-2x limits

"""Per-kind latency models (graphprof.devices.opmodel, graphprof.calibrate.fit_ops): kinds, the fit, intervals,
staleness, learning from runs. Synthetic op tables with known truth: nothing depends on this machine's speed."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

from graphprof.base.choices import OpStatus, Phase
from graphprof.devices.opmodel import Interval, OpModel, Sample, independent_interval, op_features, op_kind
from graphprof.errors import InvalidInputError

pytest.importorskip("sklearn")

KINDS = ("conv_dw", "linear", "activation")
#: the true law of each kind: seconds = a * flops ** 0.9 + 4 us (a fixed host cost)
LAW = {"conv_dw": 2e-9, "linear": 4e-11, "activation": 3e-10}


def _truth(kind: str, flops: float) -> float:
    return LAW[kind] * flops**0.9 + 4e-6


def _synthetic_model(rng: random.Random, group: str, n: int, op_sd: float, model_sd: float) -> list[tuple[Sample, float]]:
    """``n`` ops of one synthetic model: (sample with the measured seconds, true seconds). Each op's
    measurement is the truth times an op error (sd ``op_sd``) and the model's shared error (``model_sd``)."""
    shared = rng.gauss(0.0, model_sd)
    out = []
    for _ in range(n):
        kind = rng.choice(KINDS)
        flops = 10 ** rng.uniform(4.0, 9.0)
        features = op_features(kind, flops, flops / rng.uniform(1, 40), [(1, 64, 28, 28), (64, 1, 3, 3)], [(1, 64, 28, 28)])
        truth = _truth(kind, flops)
        out.append((Sample(kind, tuple(features), truth * math.exp(rng.gauss(0.0, op_sd) + shared), group=group), truth))
    return out


def _fitted(seed: int = 0, models: int = 10, op_sd: float = 0.1, model_sd: float = 0.05) -> OpModel:
    from graphprof.calibrate.fit_ops import fit_op_model

    rng = random.Random(seed)
    samples = [s for m in range(models) for s, _ in _synthetic_model(rng, f"m{m}", 40, op_sd, model_sd)]
    return fit_op_model(samples, [f"m{m}" for m in range(models)])


def _calls(samples: list[Sample]) -> list[tuple[str, tuple[float, ...], tuple[float, ...]]]:
    return [(s.kind, s.features, s.features[:2]) for s in samples]


def test_op_kinds() -> None:
    conv = "aten.convolution"
    assert op_kind(conv, OpStatus.COUNTED, [(1, 64, 8, 8), (64, 1, 3, 3)]) == "conv_dw"  # one input channel per group
    assert op_kind(conv, OpStatus.COUNTED, [(1, 64, 8, 8), (64, 8, 3, 3)]) == "conv_grouped"  # 8 groups of 8
    assert op_kind(conv, OpStatus.COUNTED, [(1, 64, 8, 8), (128, 64, 1, 1)]) == "conv_pointwise"
    assert op_kind(conv, OpStatus.COUNTED, [(1, 64, 8, 8), (128, 64, 3, 3)]) == "conv_dense"
    assert op_kind("aten.addmm") == "linear" and op_kind("aten.bmm") == "bmm"
    assert op_kind("aten.hardswish_") == op_kind("aten.relu_") == "activation"  # piecewise linear
    assert op_kind("aten.gelu") == op_kind("aten.silu_") == op_kind("aten.sigmoid") == "activation_exp"
    assert op_kind("aten._scaled_dot_product_flash_attention_for_cpu") == "sdpa"
    assert op_kind("aten.native_layer_norm") == "norm" and op_kind("aten._softmax") == "softmax"
    assert op_kind("aten.add") == "elementwise" and op_kind("aten.clone") == "copy"
    assert op_kind("aten.view", OpStatus.ZERO_COST) == "view" and op_kind("prim.device") is None


def test_conv_features_read_stride_and_depth_from_shapes() -> None:
    f = op_features("conv_dense", 1e6, 1e5, [(8, 64, 56, 56), (128, 64, 3, 3)], [(8, 128, 28, 28)])
    assert math.isclose(f[7], math.log(2))  # stride: 56 / 28
    assert math.isclose(f[8], math.log(64 * 9 + 1))  # reduction depth C_in / groups * kh * kw = 576


def test_fit_recovers_known_laws_and_round_trips_as_json() -> None:
    model = _fitted()
    rng = random.Random(99)
    fresh = [pair for m in range(5) for pair in _synthetic_model(rng, f"new{m}", 40, 0.0, 0.0)]
    predicted = model.predict(_calls([s for s, _ in fresh]))
    errors = sorted(abs(math.log(p / truth)) for (p, _, _), (_, truth) in zip(predicted, fresh, strict=True))
    assert errors[len(errors) // 2] < 0.1  # median within ~10% of the truth, on configurations never sampled
    again = OpModel.from_dict(json.loads(json.dumps(model.to_dict())))  # plain data, no pickles
    assert [t for t, _, _ in again.predict(_calls([s for s, _ in fresh]))] == pytest.approx([t for t, _, _ in predicted], rel=1e-3)


def test_whole_model_interval_covers_80_percent_of_synthetic_models() -> None:
    """The truth is known: the measured total of a new model falls in its 80% interval about 80% of the time."""
    model = _fitted(seed=1, models=12, op_sd=0.1, model_sd=0.08)
    assert model.model_q is not None
    rng = random.Random(7)
    hits, trials = 0, 150
    for m in range(trials):
        ops = _synthetic_model(rng, f"t{m}", 30, 0.1, 0.08)
        parts = model.predict(_calls([s for s, _ in ops]))
        interval = model.interval([t for t, _, _ in parts], [lo for _, lo, _ in parts], [hi for _, _, hi in parts])
        hits += interval.low <= sum(s.seconds for s, _ in ops) <= interval.high
    assert 0.65 <= hits / trials <= 0.97


def test_per_kind_quantiles_cover_held_out_records() -> None:
    """Each op's own 80% band (its kind's held-out quantiles) covers about 80% of held-out records."""
    model = _fitted(seed=2, models=10, op_sd=0.15, model_sd=0.0)
    rng = random.Random(3)
    held = [s for m in range(6) for s, _ in _synthetic_model(rng, f"h{m}", 40, 0.15, 0.0)]
    inside = 0
    for s, (t, lo, hi) in zip(held, model.predict(_calls(held)), strict=True):
        inside += t * math.exp(-hi) <= s.seconds <= t * math.exp(-lo)
    assert 0.68 <= inside / len(held) <= 0.92


def test_independent_interval_covers_sums_of_independent_errors() -> None:
    rng = random.Random(5)
    hits = 0
    for _ in range(400):
        truth = [rng.uniform(1e-5, 1e-3) for _ in range(20)]
        measured = sum(t * math.exp(rng.gauss(0.0, 0.3)) for t in truth)
        band = independent_interval(truth, [-0.3 * 1.2816] * 20, [0.3 * 1.2816] * 20)
        hits += band.low <= measured <= band.high
    assert 0.72 <= hits / 400 <= 0.88
    assert independent_interval([], [], []) == Interval(0.0, 0.0, method="independent per-op errors")


def test_a_learned_sample_moves_its_configuration_and_is_counted() -> None:
    model = _fitted()
    features = tuple(op_features("linear", 3e7, 1e6, [(1, 768), (768, 768)], [(1, 768)]))
    before = model.predict([("linear", features, features[:2])])[0][0]
    learned = model.with_samples([Sample("linear", features, before * 3, "run", "user")])
    after = learned.predict([("linear", features, features[:2])])[0][0]
    # at its own configuration the prediction is the sample's time, smeared as every prediction is
    # (a sample is read as a median time; the smearing term turns it into a mean)
    assert after == pytest.approx(before * 3 * math.exp(model.kinds["linear"].smear), rel=0.05)
    assert learned.counts["run"] == 1 and learned.counts["calibration"] == model.counts["calibration"]


# -- the local file: current or refused, and learning from a real run ------------------------------------


def _write_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **device: Any) -> Path:
    from test_calibrate import synthetic_table

    from graphprof.calibrate.preset import preset_from_table
    from graphprof.calibrate.store import write_preset
    from graphprof.devices.local import cpu_model

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    table = synthetic_table(0.0)
    for r in table["records"]:
        r["label"] = r["op"]
    info = {"type": "cpu", "name": cpu_model(), "threads": torch.get_num_threads(), "torch": torch.__version__,
            "measured_at": "now", **device}  # fmt: skip
    return write_preset(preset_from_table(table, info, _fitted()).to_dict())


@pytest.mark.parametrize(("field", "value"), [("name", "Another CPU"), ("threads", 977), ("torch", "1.0.0")])
def test_a_stale_local_file_is_refused_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, field: str, value: Any) -> None:
    from typer.testing import CliRunner

    from graphprof.devices.hardware import get_hardware
    from graphprof_cli.main import app

    _write_local(tmp_path, monkeypatch, **{field: value})
    with pytest.raises(InvalidInputError, match="stale"):
        get_hardware("local")
    result = CliRunner().invoke(app, ["--model", "resnet18", "--hardware", "local"])
    assert result.exit_code == 2
    assert "stale" in result.output and str(value) in result.output and "Traceback" not in result.output


def test_a_foreign_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from graphprof.devices.hardware import get_hardware

    path = _write_local(tmp_path, monkeypatch)
    path.write_text(json.dumps({**json.loads(path.read_text()), "format": 1}))
    with pytest.raises(InvalidInputError, match="another version"):
        get_hardware("local")


def test_prediction_carries_an_interval_and_its_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import graphprof
    from graphprof.cost.roofline import with_roofline
    from graphprof.devices.hardware import get_hardware
    from graphprof.render.summary import _predicted_text

    _write_local(tmp_path, monkeypatch)
    profile = with_roofline(graphprof.profile_model("resnet18", input_shape=(1, 3, 64, 64)), get_hardware("local"))
    roofline = profile.roofline
    assert roofline is not None
    assert roofline.predicted_seconds is not None and roofline.predicted_interval is not None
    assert roofline.predicted_interval.low < roofline.predicted_seconds < roofline.predicted_interval.high
    assert roofline.to_dict()["predicted_interval"]["level"] == 0.8
    assert "(80%: " in _predicted_text(profile) and "from your runs" in _predicted_text(profile)
    assert all((layer.predicted_seconds or 0.0) >= (layer.seconds or 0.0) * (1 - 1e-9) for layer in roofline.layers)


def test_a_measured_run_is_learned_and_used_for_another_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real run of a small MLP (its timings unused: only what was learned is checked) joins the file;
    a prediction of a *different* model then counts the learned records."""
    from torch import nn

    import graphprof
    from graphprof.calibrate.learn import learn_from_run
    from graphprof.cost.roofline import classify
    from graphprof.devices.hardware import get_hardware

    _write_local(tmp_path, monkeypatch)
    mlp = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64), nn.LayerNorm(64))
    prepared = graphprof.prepare(mlp, input_shape=(4, 64))
    measured = prepared.measure(device="cpu", iters=2, warmup=1, layer_runs=1, breakdown=False)
    # held quiet: two forwards on a busy test machine can spread past NOISY_CV, and a noisy run teaches
    # nothing (tests/test_calibration_busy.py)
    measured = replace(measured, forward=replace(measured.forward, std=0.0))
    learned = learn_from_run(replace(prepared.profile(), measurement=measured), get_hardware("local"))
    assert learned >= 3  # the two linears, the GELU, the norm: at least three of them
    calibration = get_hardware("local").calibration  # the file read again: what the run learned is in it
    assert calibration is not None and calibration.op_model is not None
    assert calibration.op_model.counts["run"] == learned
    other = classify(graphprof.profile_model("resnet18", input_shape=(1, 3, 32, 32)), get_hardware("local"))
    assert other.calibration is not None and other.calibration.summary()["records"]["own_runs"] == learned


def test_a_learned_sample_leaves_out_what_the_calibration_prices_for_fresh_pages() -> None:
    """The prediction adds the first-touch term back to every call, so a learned sample must not carry it too."""
    from torch import nn

    import graphprof
    from graphprof.calibrate.samples import samples_from_run
    from graphprof.devices.opmodel import FirstTouch, call_of

    mlp = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
    prepared = graphprof.prepare(mlp, input_shape=(4, 64))
    measured = prepared.measure(device="cpu", iters=2, warmup=1, layer_runs=1, breakdown=False)
    profile = replace(prepared.profile(), measurement=measured)
    # a 1 KiB limit: every fresh output here is "above" it; 1 ns a byte. The first linear and the GELU write
    # 4 x 256 floats = 4,096 bytes (4.096 us), the last linear 4 x 64 floats = 1,024 bytes (1.024 us); a
    # view writes nothing fresh (0)
    touch = FirstTouch(limit_bytes=1024.0, per_byte_s=1e-9, min_bytes=0.0)
    priced = {}
    for row in profile.layers:
        for op in row.ops:
            call = call_of(op)
            if call is not None:
                priced[(call[0], tuple(call[1]))] = touch.seconds(op)
    assert sorted({round(t * 1e6, 3) for t in priced.values()} - {0.0}) == [1.024, 4.096]  # microseconds
    plain = samples_from_run(profile, measured)
    less = samples_from_run(profile, measured, first_touch=touch)
    assert len(plain) == len(less) >= 3
    taken = []
    for a, b in zip(plain, less, strict=True):
        assert (a.kind, a.features) == (b.kind, b.features)
        expected = priced[(a.kind, a.features)]
        assert b.seconds == pytest.approx(max(a.seconds - expected, 0.25 * a.seconds), rel=1e-9)
        taken.append(a.seconds - b.seconds)
    assert any(t > 0 for t in taken)


def test_a_forward_below_the_trim_peak_pays_no_share_of_fresh_pages_and_the_report_passes_its_peak() -> None:
    """The first touch below the limit is priced only in a forward whose live activations reach the trim peak:
    the same calls predict the share's seconds more at a peak at or above it, none below it (by hand: the
    GELU's 8,000,000 bytes, a share of 0.25 at 1 ns a byte: 2 ms)."""
    import graphprof
    from graphprof.cost.roofline import with_roofline
    from graphprof.devices.hardware import custom_hardware
    from graphprof.devices.opmodel import FirstTouch
    from graphprof.devices.predict import predict
    from graphprof.devices.table import Calibration
    from graphprof.formulas import Cost

    touch = FirstTouch(limit_bytes=1e9, per_byte_s=1e-9, share_below=0.25, min_bytes=1e6, trim_peak_bytes=50e6)
    model = replace(_fitted(), first_touch=touch)
    calibration = Calibration("test", "cpu", 100.0, 0.0, 0.0, {}, op_model=model)
    hardware = replace(custom_hardware(1.0, 100.0), calibration=calibration)
    gelu = SimpleNamespace(op="aten.gelu", status=OpStatus.COUNTED, phase=Phase.FORWARD, input_shapes=((2_000_000,),),
                           output_shapes=((2_000_000,),), work_fraction=1.0,
                           cost=Cost(flops=2_000_000, bytes_read=8_000_000, bytes_written=8_000_000))  # fmt: skip
    below, above, unknown = (sum(predict([gelu], "float32", hardware, calibration, peak).seconds) for peak in (49e6, 50e6, None))
    assert above - below == pytest.approx(0.25 * 8e6 * 1e-9, rel=1e-9) and unknown == pytest.approx(above, rel=1e-12)
    # the report prices a real forward by its own dry run's peak: a small MLP peaks far below 50 MB, so no share
    profile = graphprof.profile_model(nn.Sequential(nn.Linear(64, 64), nn.GELU()), input_shape=(4, 64))
    assert 0 < profile.peak_activation_bytes < 50e6
    priced = with_roofline(profile, hardware).roofline
    ops = [op for row in profile.layers for op in row.ops]
    assert priced is not None and priced.predicted_seconds == pytest.approx(
        sum(predict(ops, "float32", hardware, calibration, 0.0).seconds)
    )

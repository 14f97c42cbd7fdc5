"""Hostile and careless input, round two (issue 21): each planted payload leaves a marker file when it runs.

Every case asserts that the marker does not exist after graphprof refused (or survived) the input, and
an opt-in case shows the payload really does run without the guard, so the tests can fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import graphprof
from graphprof.errors import UnsafeLoadError
from graphprof.models import trust, yolo

pytest.importorskip("ultralytics")

WHOLE_MODEL_LAYER = """nc: 10
backbone:
  - [-1, 1, Conv, [16, 3, 2]]
  - [-1, 1, ClassificationModel, [{{nc: 10, channels: 16, activation: '__import__("os").system("touch {marker}") or nn.SiLU()', backbone: [[-1, 1, Conv, [16, 3, 2]]], head: [[-1, 1, Classify, [10]]]}}]]
head:
  - [0, 1, Classify, [nc]]
"""


def _plant(tmp_path: Path, name: str = "tiny-cls.yaml") -> tuple[Path, Path]:
    marker = tmp_path / "PWNED"
    path = tmp_path / name
    path.write_text(WHOLE_MODEL_LAYER.format(marker=marker))
    return path, marker


def test_a_whole_model_as_a_layer_is_refused(tmp_path: Path) -> None:
    path, marker = _plant(tmp_path)
    with pytest.raises(UnsafeLoadError, match="whole model .ClassificationModel. used as a layer"):
        graphprof.profile_model(str(path), input_shape=(1, 3, 64, 64))
    assert not marker.exists()


def test_the_build_itself_is_restricted_when_the_check_misses_a_payload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ultralytics' own restricted construction stops the nested activation even with graphprof's check off."""
    path, marker = _plant(tmp_path)
    monkeypatch.setattr(yolo, "check_yolo_yaml", lambda *a, **k: None)
    with pytest.raises(graphprof.GraphprofError):
        graphprof.profile_model(str(path), input_shape=(1, 3, 64, 64))
    assert not marker.exists()


@pytest.mark.slow
def test_the_opt_in_does_run_the_nested_payload(tmp_path: Path) -> None:
    """Without the restriction (the user's --allow-unsafe-load), ultralytics evaluates the nested activation."""
    path, marker = _plant(tmp_path)
    try:
        graphprof.profile_model(str(path), input_shape=(1, 3, 64, 64), allow_unsafe_load=True)
    except Exception:  # noqa: S110 - the model may not build; the payload has run by then
        pass
    assert marker.exists()


def test_a_bare_packaged_name_is_not_shadowed_by_a_local_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, marker = _plant(tmp_path, "yolov8n-cls.yaml")
    monkeypatch.chdir(tmp_path)
    arch = yolo.find_yolo_architecture("yolov8n-cls.yaml")
    assert arch is not None and arch.path != Path("yolov8n-cls.yaml") and "ultralytics" in str(arch.path)
    with pytest.raises(UnsafeLoadError):  # with a folder, it is the user's own file (and refused)
        graphprof.profile_model(f".{Path('/')}{path.name}", input_shape=(1, 3, 64, 64))
    assert not marker.exists()


def test_restricted_build_puts_the_switch_back() -> None:
    tasks = yolo._import_tasks()
    local = tasks._SafeLoad._local
    before = getattr(local, "active", False)
    with trust.restricted_build(tasks):
        assert local.active is True
    assert getattr(local, "active", False) == before


# ---- a model's sys.exit on every path added since the last round (point 3) ----------------------------

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from graphprof.errors import ModelExitError  # noqa: E402

EXITING = """
import sys
import torch
from torch import nn

REAL_CALLS = [0]


class Quits(nn.Module):
    '''Calls sys.exit(3) from its forward once it has run for real `after` times (dry runs do not count).'''

    def __init__(self, after=0):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.after = after

    def forward(self, x):
        if not isinstance(x, torch._subclasses.fake_tensor.FakeTensor) and not isinstance(x, torch.fx.Proxy):
            REAL_CALLS[0] += 1
            if REAL_CALLS[0] > self.after:
                sys.exit(3)
        return self.fc(x)


def quits():
    return Quits()


class QuitsOnSecondCall(nn.Module):
    '''Calls sys.exit(3) from its second forward, dry or real (the eager capture calls forward each pass).'''

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.calls = 0

    def forward(self, x):
        QUIT_CALLS[0] += 1
        if QUIT_CALLS[0] >= 2:
            sys.exit(3)
        return self.fc(x)


QUIT_CALLS = [0]


def quits_on_second_call():
    return QuitsOnSecondCall()
"""


@pytest.fixture()
def quitting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    (tmp_path / "quitting_models.py").write_text(EXITING)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module("quitting_models")
    module.REAL_CALLS[0] = module.QUIT_CALLS[0] = 0
    yield module
    sys.modules.pop("quitting_models", None)


class _QuitsInDryRuns(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.quit = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.quit:
            sys.exit(3)
        return self.fc(x)


def test_sys_exit_through_the_api_is_the_models_error(quitting: object) -> None:
    model = _QuitsInDryRuns()
    pm = graphprof.prepare(model, input_shape=(2, 8), methods=("eager",))
    model.quit = True
    for call in (lambda: pm.run([]), lambda: pm.graph(), lambda: pm.profile(batch_size=4)):
        with pytest.raises(ModelExitError, match="_QuitsInDryRuns"):
            call()
    with pytest.raises(ModelExitError):
        graphprof.Profiler(model, auto_profile=False, measure=False).profile_once(torch.randn(2, 8))
    real = graphprof.prepare(quitting.Quits(), input_shape=(2, 8))  # type: ignore[attr-defined]
    with pytest.raises(ModelExitError):
        real.measure(device="cpu", iters=2, warmup=1, layer_runs=1, breakdown=False)


def test_a_sweep_keeps_the_points_before_the_models_exit() -> None:
    calls = [0]

    def factory(num_layers: int = 1) -> nn.Module:
        calls[0] += 1
        model = _QuitsInDryRuns()
        model.quit = calls[0] >= 3  # the third point's model quits
        return model

    with pytest.raises(ModelExitError) as caught:
        graphprof.sweep(factory, "layers", [1, 2, 3, 4], input_shape=(2, 8))
    partial = caught.value.partial  # type: ignore[attr-defined]
    assert [r.value for r in partial.rows] == [1, 2]


def test_cli_measure_exit_reports_the_dry_run_and_exit_code_8(quitting: object) -> None:
    from graphprof_cli.main import app

    result = CliRunner().invoke(app, ["--model", "quitting_models:quits", "--input-shape", "2,8", "--measure", "--device", "cpu", "--iters", "2"])
    assert result.exit_code == 8, result.output
    assert "Hierarchical graph profile" in result.stdout  # what was done is kept: the dry run's report
    assert "sys.exit" in result.stderr or "SystemExit" in result.stderr


def test_cli_graph_exit_is_code_8_after_the_report(quitting: object, tmp_path: Path) -> None:
    from graphprof_cli.main import app

    target = tmp_path / "g.json"
    args = ["--model", "quitting_models:quits_on_second_call", "--input-shape", "2,8", "--graph", str(target), "--capture", "eager"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 8, result.output  # the graph pass is the model's second forward
    assert "Hierarchical graph profile" in result.stdout and not target.exists()


# ---- sweeps without end (point 4) ---------------------------------------------------------------------


@pytest.mark.parametrize("values", ["1:inf:x2", "1:1e15:+1", "1:1000000:+1", "1:nan:x2"])
def test_unbounded_sweeps_are_refused_at_once(values: str) -> None:
    from graphprof_cli.main import app

    start = time.perf_counter()
    result = CliRunner().invoke(app, ["sweep", "--model", "resnet18", "--batch", values])
    assert result.exit_code == 2 and time.perf_counter() - start < 1.0, result.output


def test_sweep_output_paths_are_checked_first_and_dash_is_stdout(tmp_path: Path) -> None:
    from graphprof_cli.main import app

    result = CliRunner().invoke(app, ["sweep", "--model", "resnet18", "--batch", "1,2", "--output", str(tmp_path / "no" / "s.json")])
    assert result.exit_code == 7 and "does not exist" in result.stderr
    result = CliRunner().invoke(app, ["sweep", "--model", "alexnet", "--batch", "1,2", "--output", "-"])
    assert result.exit_code == 0 and not Path("-").exists()
    assert '"axis": "batch"' in result.stdout


# ---- out of memory in --measure (point 5), under an address-space cap -------------------------------


def _capped(args: list[str], cap: int = 4_600_000_000) -> subprocess.CompletedProcess[str]:
    if not Path("/usr/bin/prlimit").exists():
        pytest.skip("prlimit is not installed")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(["prlimit", f"--as={cap}", sys.executable, "-m", "graphprof_cli.main", *args], capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.slow
def test_measure_out_of_memory_is_exit_11_naming_the_batch() -> None:
    done = _capped(["--model", "resnet50", "--batch-size", "64", "--measure", "--device", "cpu", "--iters", "2", "--warmup", "1"])
    assert done.returncode == 11, done.stderr[-500:]
    assert "out of host memory" in done.stderr and "64x3x224x224" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_measured_sweep_keeps_its_points_when_memory_runs_out() -> None:
    done = _capped(["sweep", "--model", "resnet18", "--batch", "1:256:x16", "--measure", "--device", "cpu", "--output", "-"])
    assert done.returncode == 0, done.stderr[-500:]
    import json

    result = json.loads(done.stdout)
    assert [r["value"] for r in result["rows"]] == [1, 16] and result["stopped_at"] == 256
    assert all(r["measured_seconds"] > 0 for r in result["rows"])


# ---- outputs (point 6) -------------------------------------------------------------------------------


@pytest.mark.slow
def test_output_to_dev_stdout_appends_to_the_log(tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    log.write_text("earlier line\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run(f"{sys.executable} -m graphprof_cli.main --model alexnet --output /dev/stdout >> {log}", shell=True, check=True, env=env, capture_output=True)
    text = log.read_text()
    assert text.startswith("earlier line\n") and '"model": "alexnet"' in text


def test_output_and_graph_on_one_path_is_refused(tmp_path: Path) -> None:
    from graphprof_cli.main import app

    target = tmp_path / "x.json"
    result = CliRunner().invoke(app, ["--model", "alexnet", "--output", str(target), "--graph", str(target)])
    assert result.exit_code == 2 and "two different names" in result.stderr and not target.exists()  # refused up front (issue 34, item 8)


def test_graph_writes_are_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from graphprof.graph import export

    pm = graphprof.prepare(nn.Linear(4, 2), input_shape=(1, 4))
    graph, detail = pm.graph()
    target = tmp_path / "g.json"
    export.write_graph(graph, target, detail=detail)
    before = target.read_text()
    monkeypatch.setattr(export, "to_json", lambda *a, **k: 1 / 0)  # the writer fails half way
    with pytest.raises(ZeroDivisionError):
        export.write_graph(graph, target, detail=detail)
    assert target.read_text() == before and [p.name for p in tmp_path.iterdir()] == ["g.json"]


# ---- the user's state (point 7) -----------------------------------------------------------------------


def _bn_net() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))


def test_batchnorm_buffers_are_bit_identical_after_a_train_measurement() -> None:
    model = _bn_net()
    before = {k: v.clone() for k, v in model.named_buffers()}
    version = model[1].num_batches_tracked._version
    pm = graphprof.prepare(model, example_inputs=(torch.randn(2, 3, 8, 8),), mode="train")
    assert model[1].num_batches_tracked._version == version  # the dry run wrote nothing
    with torch.no_grad():  # the caller's grad mode does not matter
        r = pm.measure(device="cpu", iters=2, warmup=1, layer_runs=1, breakdown=False)
    assert r.training_step is not None
    assert all(torch.equal(before[k], v) for k, v in model.named_buffers())


@pytest.mark.slow  # over 2 s: the full suite runs it, the fast tier does not
def test_a_float64_default_dtype_does_not_break_a_real_run() -> None:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        pm = graphprof.prepare("alexnet", device="cpu", input_shape=(1, 3, 64, 64))
        assert pm.measure(device="cpu", iters=2, warmup=1, layer_runs=1, breakdown=False).forward.mean > 0
        assert torch.get_default_dtype() == torch.float64  # the caller's default is left as it was
    finally:
        torch.set_default_dtype(previous)


# ---- errors in their class (point 8), a custom op (point 9), small ones (point 10) --------------------


def test_transformers_config_rejections_are_bad_input() -> None:
    with pytest.raises(graphprof.errors.InvalidInputError, match="rejects hidden_size"):
        graphprof.profile_model("hf:llama?hidden_size=nan")


def test_measure_reports_the_models_own_exception_as_a_measurement_error() -> None:
    class Fails(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if not isinstance(x, torch._subclasses.fake_tensor.FakeTensor):
                raise ValueError("boom")
            return self.fc(x)

    pm = graphprof.prepare(Fails(), input_shape=(1, 4), methods=("eager",))
    with pytest.raises(graphprof.errors.MeasurementError, match="the model raised .* ValueError: boom"):
        pm.measure(device="cpu", iters=2, warmup=1)


def test_graph_depth_and_export_name_are_checked() -> None:
    pm = graphprof.prepare(nn.Linear(4, 2), input_shape=(1, 4))
    with pytest.raises(graphprof.errors.InvalidInputError, match="depth"):
        pm.graph(depth=-1)


@torch.library.custom_op("graphprof_tests::double", mutates_args=())
def _double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def test_a_custom_op_without_a_fake_kernel_is_profiled() -> None:
    class UsesCustom(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return _double(self.fc(x))

    p = graphprof.profile_model(UsesCustom(), input_shape=(2, 4))
    assert p.total_macs == 2 * 4 * 4 and p.execution == "real"
    assert [u.op for u in p.unsupported] == ["graphprof_tests.double"]  # named, never silently zero


def test_measure_options_are_checked_without_measure_and_narrow_columns_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    from graphprof_cli.common import console
    from graphprof_cli.main import app

    result = CliRunner().invoke(app, ["--model", "alexnet", "--iters", "-5"])
    assert result.exit_code == 2 and "-5" in result.stderr
    monkeypatch.setenv("COLUMNS", "5")
    assert console().width >= 40


# ---- the checkpoint loader loads the exact file, and leaves torch's allow-list alone (point 2) -------


@pytest.mark.slow  # builds yolov8n, about 3 s
def test_a_yolov5n_named_checkpoint_is_loaded_as_given_and_the_allow_list_restored(tmp_path: Path) -> None:
    from graphprof.models import resolve_model

    model = resolve_model("yolov8n").model.half()
    path = tmp_path / "yolov5n.pt"  # ultralytics' own loader would look for yolov5nu.pt (and download it)
    torch.save({"epoch": -1, "model": None, "ema": model, "updates": 0, "train_args": {"imgsz": 64}}, path)
    saved = list(torch.serialization.get_safe_globals())
    torch.serialization.clear_safe_globals()  # as a fresh process has it: what the load adds would show
    try:
        resolved = resolve_model(str(path))
        assert resolved.family == "yolo" and resolved.args[0].shape == (1, 3, 64, 64)
        assert "yolov5n.pt" in " ".join(resolved.notes) or resolved.name.startswith("yolov5n")
        assert torch.serialization.get_safe_globals() == []
    finally:
        torch.serialization.add_safe_globals(saved)

"""Hostile and careless input (issue 14): files that run code, outputs that clobber, exits that vanish.

Every planted payload would create a marker file; each test checks that none was created without
``--allow-unsafe-load`` (and, where cheap, that one is created with it, so the test can fail).
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from toys import TINY_MODULE
from typer.testing import CliRunner

import graphprof
from graphprof.base.atomic import write_atomic
from graphprof.errors import (
    GraphprofError,
    InvalidInputError,
    ModelBuildError,
    ModelExitError,
    ModelNotFoundError,
    OutputError,
    UnsafeLoadError,
)
from graphprof.models import resolve_model
from graphprof.models.yolo import _ultralytics_models_dir
from graphprof_cli.main import app, join_input_shape

ROOT = Path(__file__).resolve().parents[1]
HAS_ULTRALYTICS = _ultralytics_models_dir() is not None
needs_ultralytics = pytest.mark.skipif(not HAS_ULTRALYTICS, reason="ultralytics is not installed")
runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, join_input_shape(list(args)))


class Payload:
    """Unpickling this runs ``os.system("touch MARKER")``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


USER_MODULE = (
    TINY_MODULE
    + """
BUILT = {marker!r}


def good():
    return Tiny()


def marking():
    open(BUILT, "w").close()
    return Tiny()


def exit3():
    sys.exit(3)


def interrupt():
    raise KeyboardInterrupt


class ExitInForward(Tiny):
    def forward(self, x):
        sys.exit("bye")


class BaseInForward(Tiny):
    def forward(self, x):
        raise BaseException("odd")


def five():
    return 5


class Wrap(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x) + 1


def nested(depth):
    model = torch.nn.Linear(4, 4)
    for _ in range(depth):
        model = Wrap(model)
    return model


def deep200():
    return nested(200)


def deep1000():
    return nested(1000)
"""
)


@pytest.fixture
def user(tmp_path, monkeypatch):
    """A user module ``hostile_user_<n>`` in the current directory; returns (module name, build marker)."""
    name = f"hostile_user_{tmp_path.name.replace('-', '_')}"
    built = tmp_path / "built"
    (tmp_path / f"{name}.py").write_text(USER_MODULE.format(marker=str(built)))
    monkeypatch.chdir(tmp_path)
    return name, built


# ---- 1. files that run code -----------------------------------------------------------------------


def test_pickle_payload_is_refused_by_the_api(tmp_path):
    marker = tmp_path / "MARKER"
    torch.save(Payload(marker), tmp_path / "evil.pt")
    with pytest.raises(UnsafeLoadError, match=r"names posix.system.*--allow-unsafe-load"):
        graphprof.profile_model(str(tmp_path / "evil.pt"), input_shape=(1, 8))
    assert not marker.exists()


def test_pickle_payload_in_a_dict_is_refused_by_the_cli(tmp_path):
    marker = tmp_path / "MARKER"
    torch.save({"model": Payload(marker)}, tmp_path / "evil_yolov8n.pt")
    result = invoke("--model", str(tmp_path / "evil_yolov8n.pt"), "--input-shape", "1", "8")
    assert result.exit_code == 9, result.output  # UnsafeLoadError
    assert "posix.system" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not marker.exists()


def test_pth_payload_in_compare_fails_alone(tmp_path, user):
    name, _ = user
    marker = tmp_path / "MARKER"
    torch.save(Payload(marker), tmp_path / "evil.pth")
    result = invoke("compare", f"{name}:good", str(tmp_path / "evil.pth"), "--input-shape", "1", "8")
    assert result.exit_code == 9, result.output
    assert f"{name}:good" in result.stdout and "evil.pth" in result.stderr
    assert not marker.exists()


def test_the_opt_in_flag_does_run_the_payload(tmp_path):
    """The refusal above is the flag's doing: with it, unpickling calls os.system (which returns an int)."""
    marker = tmp_path / "MARKER"
    torch.save(Payload(marker), tmp_path / "evil.pt")
    with pytest.raises(ModelBuildError, match=r"holds an int \(a state dict\?\)"):
        resolve_model(str(tmp_path / "evil.pt"), input_shape=(1, 8), allow_unsafe_load=True)
    assert marker.exists()


def test_pickled_torch_modules_and_state_dicts_load_safely(tmp_path):
    torch.save(torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)), tmp_path / "m.pt")
    resolved = resolve_model(str(tmp_path / "m.pt"), input_shape=(3, 8))
    assert "loaded with torch.load(weights_only=True)" in resolved.notes
    assert resolved.model(*resolved.args).shape == (3, 2)
    torch.save(torch.nn.Linear(8, 2).state_dict(), tmp_path / "sd.pt")
    with pytest.raises(ModelBuildError, match=r"holds an OrderedDict \(a state dict\?\)"):
        resolve_model(str(tmp_path / "sd.pt"))


@pytest.fixture(scope="module")
def yolov8n_checkpoint(tmp_path_factory):
    """A checkpoint saved as ultralytics saves one (``ema`` in half precision, ``train_args``), and an evil twin."""
    if not HAS_ULTRALYTICS:
        pytest.skip("ultralytics is not installed")
    folder = tmp_path_factory.mktemp("ckpt")
    model = resolve_model("yolov8n").model.half()
    good = folder / "best.pt"
    torch.save({"epoch": -1, "model": None, "ema": model, "updates": 0, "train_args": {"imgsz": 64}}, good)
    evil = folder / "evil_yolov8n.pt"
    torch.save({"model": model, "ema": None, "train_args": {"imgsz": 64}, "x": Payload(folder / "MARKER")}, evil)
    return good, evil, folder / "MARKER"


@needs_ultralytics
def test_genuine_ultralytics_checkpoint_loads_safely(yolov8n_checkpoint):
    good, _, _ = yolov8n_checkpoint
    resolved = resolve_model(str(good))
    assert resolved.family == "yolo" and resolved.args[0].shape == (1, 3, 64, 64)
    assert "weights_only=False" not in " ".join(resolved.notes)


@needs_ultralytics
@pytest.mark.parametrize("safe_env", [None, "1"])
def test_ultralytics_checkpoint_with_a_payload_is_refused(yolov8n_checkpoint, monkeypatch, safe_env):
    _, evil, marker = yolov8n_checkpoint
    if safe_env:
        monkeypatch.setenv("ULTRALYTICS_SAFE_LOAD", safe_env)
    with pytest.raises(UnsafeLoadError, match="posix.system"):
        resolve_model(str(evil))
    assert not marker.exists()


def _yaml_with(tmp_path: Path, **fields: str) -> Path:
    from graphprof.models.yolo import yolo_architectures

    text = yolo_architectures()["yolov8n"].path.read_text()
    for key, value in fields.items():
        text = f"{key}: {value}\n" + text
    path = tmp_path / "my-yolov8n.yaml"
    path.write_text(text)
    return path


@needs_ultralytics
def test_yaml_activation_payload_is_refused(tmp_path):
    marker = tmp_path / "MARKER"
    path = _yaml_with(tmp_path, activation=f"\"__import__('os').system('touch {marker}') or nn.SiLU()\"")
    with pytest.raises(UnsafeLoadError, match="activation"):
        resolve_model(str(path), device="meta")
    assert not marker.exists()
    result = invoke("--model", str(path))
    assert result.exit_code == 9 and not marker.exists()
    # with the flag, ultralytics evals the field: the payload runs (so the refusal is what kept it out)
    resolve_model(str(path), device="meta", allow_unsafe_load=True)
    assert marker.exists()


@needs_ultralytics
def test_yaml_layer_naming_a_function_is_refused(tmp_path):
    path = tmp_path / "fn.yaml"
    path.write_text("nc: 2\nbackbone:\n  - [-1, 1, torch_safe_load, ['x.pt']]\nhead:\n  - [-1, 1, Detect, [2]]\n")
    with pytest.raises(UnsafeLoadError, match=r"backbone\[0\] names 'torch_safe_load'"):
        resolve_model(str(path), device="meta")


@needs_ultralytics
def test_every_packaged_yaml_passes_the_check():
    from graphprof.models.trust import check_yolo_yaml
    from graphprof.models.yolo import _import_tasks, _load_yaml, yolo_architectures

    paths = {arch.path for arch in yolo_architectures().values()}
    assert len(paths) > 10
    for path in paths:
        check_yolo_yaml(_load_yaml(path), str(path), _import_tasks())  # raises on a false refusal


# ---- 2. outputs that clobber ----------------------------------------------------------------------

SMALL = ("--input-shape", "1", "8")


def test_character_device_is_written_through(tmp_path, user):
    name, _ = user
    device = tmp_path / "null"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a copy of /dev/null
    except PermissionError:
        pytest.skip("mknod needs root")
    result = invoke("--model", f"{name}:good", *SMALL, "--output", str(device), "--format", "json")
    assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(device.stat().st_mode)  # still the device, not a 166 KB regular file
    assert not list(tmp_path.glob(".*.tmp"))


def test_fifo_is_written_through(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_atomic(fifo, '{"a": 1}\n')
    reader.join(10)
    assert got == ['{"a": 1}\n'] and stat.S_ISFIFO(fifo.stat().st_mode)


def test_symlink_is_refused_and_its_target_kept(tmp_path, user):
    """Links are not followed to write: the file a link points at is never replaced."""
    name, _ = user
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    result = invoke("--model", f"{name}:good", *SMALL, "--output", str(link))
    assert result.exit_code == 7 and "symbolic link" in result.output, result.output
    assert link.is_symlink() and real.read_text() == "old"


def test_output_dash_is_stdout(user):
    name, _ = user
    result = invoke("--model", f"{name}:good", *SMALL, "--output", "-")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)  # stdout holds the JSON alone; the report went to stderr
    assert data["total_params"] == 18 and "Hierarchical" in result.stderr
    csv_result = invoke("--model", f"{name}:good", *SMALL, "--output", "-", "--format", "csv")
    assert csv_result.stdout.splitlines()[0].startswith("name,type,module,params")


def test_existing_file_keeps_its_mode(tmp_path):
    target = tmp_path / "secret.json"
    target.write_text("{}")
    target.chmod(0o600)
    write_atomic(target, "[]")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600 and target.read_text() == "[]"


def test_long_file_name(tmp_path):
    target = tmp_path / ("p" * 245 + ".json")  # 250 characters: valid, but 250 + the temporary suffix is not
    write_atomic(target, "{}")
    assert target.read_text() == "{}" and not list(tmp_path.glob(".*.tmp"))


SLOW_WRITER = """
import os, signal, sys, time
from graphprof.base import atomic as files
# Ctrl-C as in a terminal: a runner that starts the tests in the background (``cmd &``) hands its children
# SIGINT ignored, and Python then installs no KeyboardInterrupt handler of its own
signal.signal(signal.SIGINT, signal.default_int_handler)
real_fdopen = os.fdopen

class Slow:
    def __init__(self, handle):
        self.handle = handle
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        self.handle.close()
    def write(self, data):
        self.handle.write(data[:10]); self.handle.flush()
        print("writing", flush=True)
        time.sleep(60)

# the data's write is slowed; the note that names the temporary (a text file in the cache) is written as it is
files.os.fdopen = lambda fd, mode, **kw: Slow(real_fdopen(fd, mode)) if mode == "wb" else real_fdopen(fd, mode, **kw)
files.write_atomic(sys.argv[1], "x" * 1000)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.slow  # a subprocess killed mid-write, about 10 s
def test_signal_during_write_leaves_no_temporary_file(tmp_path, sig):
    target = tmp_path / "p.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "cli")])}
    proc = subprocess.Popen([sys.executable, "-c", SLOW_WRITER, str(target)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout.readline().strip() == b"writing"
    assert len(list(tmp_path.glob(".p.json.*.tmp"))) == 1  # the write is under way
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    assert proc.returncode == -sig  # the process still ends by the signal (Python re-raises SIGINT too)
    assert not list(tmp_path.iterdir())
    from graphprof.base.atomic import _pending_folder

    assert not list(_pending_folder().glob("*")) if _pending_folder().is_dir() else True  # its note went with it


def test_missing_folder_is_reported_before_profiling(tmp_path, user):
    name, built = user
    result = invoke("--model", f"{name}:marking", *SMALL, "--output", str(tmp_path / "nope" / "p.json"))
    assert result.exit_code == OutputError.exit_code and "does not exist" in result.stderr
    assert not built.exists()  # the factory never ran


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_unwritable_folder_is_reported_before_profiling(tmp_path, user):
    name, built = user
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    result = invoke("--model", f"{name}:marking", *SMALL, "--output", str(locked / "p.json"))
    assert result.exit_code == OutputError.exit_code and "not writable" in result.stderr
    assert not built.exists()


def test_output_that_is_a_folder_is_refused(tmp_path):
    (tmp_path / "d.json").mkdir()
    with pytest.raises(OutputError, match="it is a folder"):
        write_atomic(tmp_path / "d.json", "{}")


# ---- 3. exits that vanish -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attribute", "expected"),
    [
        ("exit3", r"called sys.exit\(3\) at .*hostile_user_\w+\.py:\d+ \(in exit3\)"),
        ("ExitInForward", r"called sys.exit\('bye'\) at .*\(in forward\)"),
        ("BaseInForward", r"raised BaseException: odd at .*\(in forward\)"),
    ],
)
def test_exits_from_factories_and_forwards_are_the_models_error(user, attribute, expected):
    name, _ = user
    result = invoke("--model", f"{name}:{attribute}", *SMALL)
    assert result.exit_code == ModelExitError.exit_code == 8  # not 0, not the model's own 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("graphprof: error: ")
    import re

    assert re.search(expected, lines[0]), lines[0]
    with pytest.raises(ModelExitError):
        graphprof.profile_model(f"{name}:{attribute}", input_shape=(1, 8))


def test_keyboard_interrupt_is_not_swallowed(user):
    name, _ = user
    with pytest.raises(KeyboardInterrupt):
        graphprof.profile_model(f"{name}:interrupt", input_shape=(1, 8))


def test_compare_keeps_the_good_models(user):
    name, _ = user
    result = invoke("compare", f"{name}:good", f"{name}:exit3", f"{name}:ExitInForward", *SMALL)
    assert result.exit_code == 8
    assert f"{name}:good" in result.stdout and "18" in result.stdout  # its params: 8 * 2 + 2
    assert "sys.exit" not in result.stdout  # per-model errors go to stderr
    assert result.stderr.count("graphprof: error:") == 2


def test_validate_keeps_the_good_models(user):
    name, _ = user
    result = invoke("validate", "--against", "torch", "-m", f"{name}:good,{name}:exit3", *SMALL)
    assert result.exit_code == 1, result.output  # a failed row makes validate disagree
    assert "sys.exit(3)" in " ".join(result.output.split())
    assert "1 of 2 agree" in result.output  # the good model was still checked: 16 MACs = 32 FLOPs both ways


# ---- 4. numbers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "value"), [("--peak-tflops", "nan"), ("--peak-tflops", "inf"), ("--bandwidth-gbs", "-5"), ("--bandwidth-gbs", "0")]
)
def test_device_figures_are_checked(user, flag, value):
    name, built = user
    other = "--bandwidth-gbs" if flag == "--peak-tflops" else "--peak-tflops"
    result = invoke("--model", f"{name}:marking", *SMALL, flag, value, other, "100", "--output", "x.json")
    assert result.exit_code == 2
    assert flag in result.stderr and "positive finite" in result.stderr
    assert not built.exists() and not Path("x.json").exists()


@pytest.mark.parametrize(
    ("shape", "why"),
    [
        (["-1", "3", "64", "64"], "'-1' is not a whole number"),
        (["a", "b", "c", "d"], "'a' is not a whole number"),
        (["1e12", "3", "64", "64"], "'1e12' is not a whole number"),
        (["1,3,64,x64"], "an empty dimension"),
        (["0", "3"], "positive integers"),
    ],
)
@pytest.mark.parametrize("command", [(), ("compare", "resnet18", "alexnet")])
def test_bad_shapes_name_the_flag(user, shape, why, command):
    name, built = user
    model = () if command else ("--model", f"{name}:marking")
    result = invoke(*command, *model, "--input-shape", *shape)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--input-shape" in lines[0] and why in lines[0]
    assert not built.exists()


def test_a_batch_of_a_trillion_by_name_is_a_dry_run(user):
    name, _ = user
    profile = graphprof.profile_model(f"{name}:good", input_shape=(10**12, 8))
    assert profile.total_macs == 10**12 * 8 * 2  # Linear(8, 2): 16 MACs per row
    assert profile.execution == "dry-run"


# ---- 5. global state (the lead's refactor; these turn on when it lands) ---------------------------


def test_rng_state_unchanged_by_a_module_and_input_shape():
    model = torch.nn.Linear(8, 2)  # its own initialisation draws from the RNG: before the state is taken
    before = torch.get_rng_state()
    graphprof.profile_model(model, input_shape=(4, 8))
    assert torch.equal(torch.get_rng_state(), before)
    graphprof.profile_model("resnet18", input_shape=(1, 3, 32, 32))  # a named model's random init too
    assert torch.equal(torch.get_rng_state(), before)


def test_a_callers_compile_cache_survives_a_dynamo_fallback():
    compiles: list[int] = []

    def backend(gm, example_inputs):
        compiles.append(1)
        return gm.forward

    @torch.compile(backend=backend)
    def double(x):
        return x * 2

    double(torch.ones(3))
    assert len(compiles) == 1

    class NeedsDynamo(torch.nn.Module):  # fx cannot trace a branch on a value
        def forward(self, x):
            return x + 1 if x.sum() > 0 else x - 1

    profile = graphprof.profile_model(NeedsDynamo(), input_shape=(2, 3))
    assert profile.capture_method != "fx.symbolic_trace"
    double(torch.ones(3))
    assert len(compiles) == 1  # not compiled again: the cache was not reset


def test_a_batch_of_a_trillion_through_the_api_is_a_dry_run():
    profile = graphprof.profile_model(torch.nn.Linear(8, 2), input_shape=(10**12, 8))
    assert profile.total_macs == 10**12 * 8 * 2


def test_bogus_mode_is_graphprofs_error():
    with pytest.raises(InvalidInputError):
        graphprof.profile_model(torch.nn.Linear(8, 2), input_shape=(1, 8), mode="bogus")


# ---- 6. small things ------------------------------------------------------------------------------


def test_checkpoint_paths_that_are_not_files(tmp_path):
    (tmp_path / "dir.pt").mkdir()
    with pytest.raises(ModelNotFoundError, match="is a folder, not a checkpoint file"):
        resolve_model(str(tmp_path / "dir.pt"))
    loop = tmp_path / "loop.pt"
    loop.symlink_to(loop)
    with pytest.raises(ModelNotFoundError, match="loops back on itself"):
        resolve_model(str(loop))


def test_two_hundred_deep_nesting_profiles(user):
    name, _ = user
    limit = sys.getrecursionlimit()
    profile = graphprof.profile_model(f"{name}:deep200", input_shape=(2, 4))
    # Linear(4, 4) on 2 rows: 2*4*4 = 32 MACs; FLOPs = 2*32 + 8 bias adds + 200 levels * 8 adds = 1672
    assert (profile.total_macs, profile.total_flops) == (32, 1672)
    assert max(m.depth for m in profile.modules) == 200
    assert sys.getrecursionlimit() == limit  # the deeper limit was only for the run


@pytest.mark.slow  # over 4 s: the full suite runs it, the fast tier does not
def test_thousand_deep_nesting_is_a_clear_error(user):
    name, _ = user
    start = time.perf_counter()
    with pytest.raises(ModelBuildError, match="nested too deeply"):
        graphprof.profile_model(f"{name}:deep1000", input_shape=(2, 4))
    assert time.perf_counter() - start < 60


def test_messages_name_the_users_file_and_use_an(tmp_path, user):
    name, _ = user
    with pytest.raises(ModelBuildError, match=r"returned an int, not a torch.nn.Module"):
        resolve_model(f"{name}:five", input_shape=(1, 8))
    path = tmp_path / f"{name}.py"
    with pytest.raises(ModelNotFoundError) as caught:
        resolve_model(f"{path}:missing", input_shape=(1, 8))
    assert f"{path} has no attribute 'missing'" in str(caught.value) and "graphprof_user_" not in str(caught.value)


def test_exit_code_table_lists_every_error():
    import graphprof.errors as errors

    classes = [getattr(errors, n) for n in errors.__all__ if isinstance(getattr(errors, n), type)]
    for cls in classes:
        assert issubclass(cls, GraphprofError)
        assert cls.exit_code in errors.EXIT_CODES, cls.__name__
    # one code, one meaning: a registry bug is not an internal error, a user's exit not "not found"
    assert errors.FormulaRegistryError.exit_code != errors.EXIT_INTERNAL
    assert errors.ModelExitError.exit_code not in (errors.EXIT_MODEL_NOT_FOUND, errors.EXIT_INTERNAL)


def test_readme_states_the_trust_model():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Trust", 1)[1].split("\n## ", 1)[0]
    assert "--allow-unsafe-load" in section and "weights_only=True" in section

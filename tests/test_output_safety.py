"""Every file graphprof replaces: a regular file it may replace, never a link's target; every output checked
before the work; two outputs never onto one file; an ONNX export whole or not at all, its weights' sidecar
included; a killed writer's temporaries removed by the next run of any command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphprof.base.atomic import check_folder, check_path, write_atomic
from graphprof.errors import OutputError
from graphprof_cli.main import app, join_input_shape

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()

MODEL = """
import pathlib
import torch


def tiny():
    pathlib.Path({marker!r}).touch()  # built: the work began
    return torch.nn.Linear(8, 2)
"""


def invoke(*args: str):
    return runner.invoke(app, join_input_shape(list(args)))


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """A model file whose factory leaves a marker when it runs: ``(spec, marker)``."""
    marker = tmp_path / "built"
    (tmp_path / "tinymodel.py").write_text(MODEL.format(marker=str(marker)))
    monkeypatch.chdir(tmp_path)
    return f"{tmp_path / 'tinymodel.py'}:tiny", marker


def _one_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    assert len(lines) == 1, output
    return lines[0]


# ---- links are not followed to write ------------------------------------------------------------------


def test_a_symbolic_link_is_refused_and_its_target_kept(tmp_path: Path) -> None:
    real = tmp_path / "passwd"
    real.write_text("root:x:0:0\n")
    link = tmp_path / "out.json"
    link.symlink_to(real)
    with pytest.raises(OutputError, match="symbolic link"):
        check_path(link)
    with pytest.raises(OutputError, match="symbolic link"):
        write_atomic(link, "{}")
    assert real.read_text() == "root:x:0:0\n" and link.is_symlink()


def test_output_through_a_link_is_refused_before_the_model_is_built(tiny: tuple[str, Path], tmp_path: Path) -> None:
    spec, marker = tiny
    real = tmp_path / "theirs.txt"
    real.write_text("not yours\n")
    (tmp_path / "o.json").symlink_to(real)
    result = invoke("--model", spec, "--input-shape", "2", "8", "--output", str(tmp_path / "o.json"))
    assert result.exit_code == 7 and "symbolic link" in _one_line(result.output)
    assert real.read_text() == "not yours\n" and not marker.exists()


def test_calibrate_refuses_a_linked_local_json_before_measuring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``local.json`` a link to a file that is not a calibration: refused before a minute of measuring, the
    file it points at untouched (the measurement itself is stubbed: it must not be reached)."""
    import graphprof.calibrate.preset as preset
    from graphprof.calibrate.store import write_preset

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (tmp_path / "graphprof").mkdir()
    victim = tmp_path / "passwd"
    victim.write_text("root:x:0:0\n")
    (tmp_path / "graphprof" / "local.json").symlink_to(victim)

    def measured(*args: object, **kwargs: object) -> None:
        raise AssertionError("the calibration measured before checking where it writes")

    monkeypatch.setattr(preset, "measure_op_table", measured)
    with pytest.raises(OutputError, match="symbolic link"):
        preset.calibrate("cpu")
    with pytest.raises(OutputError, match="symbolic link"):
        write_preset({"hardware": {}, "calibration": {}})
    assert victim.read_text() == "root:x:0:0\n"


# ---- every output checked before the work -------------------------------------------------------------


@pytest.fixture
def read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder this process may not write (``os.access`` says so: the tests may run as root)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    real_access = os.access

    def access(path: object, mode: int, *args: object, **kwargs: object) -> bool:
        if mode & os.W_OK and os.path.abspath(str(path)).startswith(str(folder)):
            return False
        return real_access(path, mode, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "access", access)
    return folder


@pytest.mark.parametrize("option", ["--plot", "--graph", "--trace"])
def test_every_output_into_a_read_only_folder_is_refused_first(tiny: tuple[str, Path], read_only: Path, option: str) -> None:
    spec, marker = tiny
    if option == "--plot":
        pytest.importorskip("matplotlib")
    target = {"--plot": "roofline.png", "--graph": "g.json", "--trace": "traces"}[option]
    extra = ["--measure", "--iters", "1", "--warmup", "0"] if option == "--trace" else []
    result = invoke("--model", spec, "--input-shape", "2", "8", *extra, option, str(read_only / target))
    assert result.exit_code == 7, result.output
    assert "not writable" in _one_line(result.output) and not marker.exists()


def test_a_trace_folder_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("mine\n")
    with pytest.raises(OutputError, match="is a file"):
        check_folder(tmp_path / "f")
    with pytest.raises(OutputError, match="is a file"):
        check_folder(tmp_path / "f" / "sub")


@pytest.mark.parametrize(("output_name", "onnx_name"), [("o.json", "o.json"), ("m.onnx.data", "m.onnx")])
def test_export_onnx_onto_the_output_is_refused_up_front(tiny: tuple[str, Path], tmp_path: Path, output_name: str, onnx_name: str) -> None:
    """The ONNX file, or its weights' sidecar, onto ``--output``: one would replace the other."""
    spec, marker = tiny
    output = tmp_path / output_name
    result = invoke("--model", spec, "--input-shape", "2", "8", "--output", str(output), "--export-onnx", str(tmp_path / onnx_name))
    assert result.exit_code == 2 and "both name" in _one_line(result.output)
    assert not marker.exists() and not output.exists()


# ---- ONNX: a regular file, nothing left behind, a write failure is an output error --------------------


@pytest.mark.parametrize("target", ["/dev/full", "/dev/stdout"])
def test_an_onnx_target_that_is_not_a_regular_file_is_refused(target: str) -> None:
    from graphprof.graph.onnx_export import check_onnx_path

    before = os.path.exists(target + ".data")
    with pytest.raises(OutputError, match="regular file|beside it"):
        check_onnx_path(target)
    assert os.path.exists(target + ".data") == before


def test_an_onnx_sidecar_path_taken_by_a_folder_is_refused_before_the_work(tiny: tuple[str, Path], tmp_path: Path) -> None:
    spec, marker = tiny
    (tmp_path / "m.onnx.data").mkdir()
    result = invoke("--model", spec, "--input-shape", "2", "8", "--export-onnx", str(tmp_path / "m.onnx"))
    assert result.exit_code == 7 and "folder" in _one_line(result.output)
    assert not marker.exists() and not (tmp_path / "m.onnx").exists()


_FILE_SIZE_LIMIT = """
import resource, sys, torch, graphprof
from graphprof.errors import GraphprofError
pm = graphprof.prepare(torch.nn.Linear(64, 64), input_shape=(2, 64), device="cpu")
profile = pm.profile()
resource.setrlimit(resource.RLIMIT_FSIZE, (2000, resource.RLIM_INFINITY))  # the weights are 16 kB
try:
    pm.export_onnx(sys.argv[1], profile)
except GraphprofError as exc:
    print(type(exc).__name__, exc.exit_code)
"""


@pytest.mark.slow  # torch.onnx's exporter, about 10 s
@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE")
def test_an_onnx_write_that_hits_the_file_size_limit_is_an_output_error_and_leaves_nothing(tmp_path: Path) -> None:
    pytest.importorskip("onnxscript")
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run([sys.executable, "-c", _FILE_SIZE_LIMIT, str(out / "m.onnx")], capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["OutputError", "7"], done.stdout + done.stderr[-2000:]
    assert list(out.iterdir()) == []  # neither the model, its weights nor the staging folder


# ---- a killed writer's temporary: removed by the next run of any command ------------------------------

_KILLED_WRITER = """
import os, sys, time
import graphprof.base.atomic as atomic

def stuck(*args):
    print("renaming", flush=True)
    time.sleep(120)

os.replace = stuck  # killed between the write and the rename
atomic.write_atomic(sys.argv[1], "x" * 1000)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="SIGKILL")
def test_a_killed_writers_temporary_is_removed_by_the_next_command(tmp_path: Path) -> None:
    elsewhere = tmp_path / "results"
    elsewhere.mkdir()
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    writer = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(elsewhere / "out.json")], env=env, stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "renaming"
    writer.kill()
    writer.wait()
    left = [p.name for p in elsewhere.iterdir()]
    assert len(left) == 1 and left[0].startswith(".out.json.gp") and left[0].endswith(".tmp"), left
    # a command that writes nothing, and nothing into that folder
    done = subprocess.run([sys.executable, "-m", "graphprof_cli.main", "--version"], env={**env, "PYTHONPATH": f"{ROOT}:{ROOT / 'cli'}"},
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert list(elsewhere.iterdir()) == []
    assert list((tmp_path / "cache" / "graphprof" / "pending").iterdir()) == []


def test_a_pending_note_never_removes_a_file_of_another_naming(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A note (a dead writer's) that names a file which is not a temporary of graphprof's naming: left."""
    from graphprof.base import atomic

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    keep = tmp_path / "precious.json"
    keep.write_text("{}")
    os.utime(keep, (1, 1))
    pending = tmp_path / "cache" / "graphprof" / "pending"
    pending.mkdir(parents=True)
    (pending / f"{dead}-0123456789ab").write_text(str(keep))
    atomic.sweep_pending()
    assert keep.read_text() == "{}" and list(pending.iterdir()) == []


def test_write_atomic_leaves_no_note_after_a_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    write_atomic(tmp_path / "a.json", json.dumps({"a": 1}))
    assert json.loads((tmp_path / "a.json").read_text()) == {"a": 1}
    pending = tmp_path / "cache" / "graphprof" / "pending"
    assert not pending.exists() or list(pending.iterdir()) == []

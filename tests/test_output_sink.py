"""One output sink (issue 29) and safe writes (issue 34, items 4-8): every result, every command, one path.

Each test here fails on the code before the sink: graph-estimate wrote JSON into a ``.csv`` and truncated
``/dev/stdout``'s log; sweep/compare/validate JSON had no ``timestamp``/``host``; ``--output`` and
``--html`` on one file were both written; a factory's ``os.chdir`` moved ``--output``; a killed writer's
temporary stayed forever.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphprof.base.atomic import write_atomic
from graphprof.errors import InvalidInputError, OutputError
from graphprof.render.sink import RESULT_FORMATS, check_distinct, choose_format, plan_output, stamped
from graphprof_cli.main import app, join_input_shape

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "cli")])}
runner = CliRunner()

FACTORY = """
import os
import torch

def make():
    os.chdir({elsewhere!r})  # user code that moves the process's working folder
    return torch.nn.Linear(2, 2)

def marking():
    open({marker!r}, "w").close()
    return torch.nn.Linear(2, 2)
"""


def invoke(*args: str):
    return runner.invoke(app, join_input_shape(list(args)))


@pytest.fixture
def factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """``factory.py`` (``make`` chdirs to ``elsewhere``, ``marking`` leaves ``built``); the test runs in ``tmp_path``."""
    elsewhere, built = tmp_path / "elsewhere", tmp_path / "built"
    elsewhere.mkdir()
    (tmp_path / "factory.py").write_text(FACTORY.format(elsewhere=str(elsewhere), marker=str(built)))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "factory.py", elsewhere, built


# ---- the table -----------------------------------------------------------------------------------------


def test_every_kind_has_json_and_csv_only_where_it_has_a_renderer() -> None:
    assert RESULT_FORMATS["profile"] == RESULT_FORMATS["sweep"] == RESULT_FORMATS["compare"] == ("json", "csv")
    for kind in ("generate", "partition", "graph-scaling", "graph-estimate"):
        assert RESULT_FORMATS[kind] == ("json",)
        with pytest.raises(OutputError, match="JSON only, not CSV"):
            choose_format("estimate.csv", kind)
        assert choose_format("plan.out", kind) == "json"  # one format: any other suffix is that format
    with pytest.raises(OutputError, match="cannot tell the output format"):
        choose_format("sweep.txt", "sweep")


def test_stamped_adds_timestamp_and_host_once() -> None:
    data = stamped({"model": "m"})
    assert list(data)[:2] == ["timestamp", "host"] and data["host"]["cores"] >= 1
    assert stamped({"timestamp": "then", "host": None})["timestamp"] == "then"


def test_plan_output_is_absolute_and_refuses_a_missing_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert plan_output("p.json", "profile").path == tmp_path / "p.json"
    with pytest.raises(OutputError, match="does not exist"):
        plan_output("nope/p.json", "sweep")


# ---- (8) one file named twice ------------------------------------------------------------------------


def test_same_file_for_two_options_is_refused_up_front(factory: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, _, built = factory
    for other in ("--html", "--graph"):
        result = invoke("--model", "factory.py:marking", "--input-shape", "1", "2", "--output", "x.json", other, str(tmp_path / "x.json"))
        assert result.exit_code == InvalidInputError.exit_code == 2, result.output
        assert "both name" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not built.exists() and not (tmp_path / "x.json").exists()  # refused before the model was built
    with pytest.raises(InvalidInputError):
        check_distinct({"--html": "a.html", "--plot": [str(tmp_path / "a.html")]})


# ---- (7) a factory that changes the working folder ---------------------------------------------------


def test_chdir_in_the_factory_does_not_move_the_output(factory: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, elsewhere, _ = factory
    result = invoke("--model", "factory.py:make", "--input-shape", "1", "2", "--output", "out.json", "--debug")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out.json").read_text())["total_params"] == 6  # 2 * 2 + 2
    assert not (elsewhere / "out.json").exists()


# ---- missing folders, before the work ----------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--model", "factory.py:marking", "--input-shape", "1", "2"],
        ["generate", "--model", "factory.py:marking"],
        ["sweep", "--model", "factory.py:marking", "--batch", "1,2", "--input-shape", "1", "2"],
        ["compare", "factory.py:marking", "factory.py:marking", "--input-shape", "1", "2"],
        ["validate", "--model", "factory.py:marking"],
        ["partition", "--model", "factory.py:marking", "--devices", "cpu:1"],
        ["graph-estimate", "--model", "pyg:gcn"],
    ],
    ids=["main", "generate", "sweep", "compare", "validate", "partition", "graph-estimate"],
)
def test_missing_output_folder_is_refused_before_the_work(argv: list[str], factory: tuple[Path, Path, Path]) -> None:
    _, _, built = factory
    result = invoke(*argv, "--output", "nope/x.json")
    assert result.exit_code == OutputError.exit_code, result.output
    assert "does not exist" in result.stderr and not built.exists()


@pytest.mark.slow  # over 4 s: the full suite runs it, the fast tier does not
def test_seed_script_refuses_a_missing_folder_before_the_work(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli" / "profile_model.py"), "--model", "gcn", "--dataset", "no-such-dataset", "--output", str(tmp_path / "nope" / "r.json")],
        capture_output=True, text=True, env=ENV, timeout=120,
    )  # fmt: skip
    assert proc.returncode == OutputError.exit_code and "does not exist" in proc.stderr  # not the dataset's error


# ---- formats the result lacks ------------------------------------------------------------------------


def test_graph_estimate_refuses_csv(tmp_path: Path) -> None:
    result = invoke("graph-estimate", "--model", "pyg:gcn", "--output", str(tmp_path / "e.csv"))
    assert result.exit_code == OutputError.exit_code and "JSON only" in result.stderr
    assert not (tmp_path / "e.csv").exists()


# ---- timestamp and host on every JSON ----------------------------------------------------------------


def test_sweep_and_compare_json_carry_timestamp_and_host(factory: tuple[Path, Path, Path], tmp_path: Path) -> None:
    swept = invoke("sweep", "--model", "factory.py:marking", "--batch", "1,2", "--input-shape", "1", "2", "--output", "s.json")
    compared = invoke("compare", "factory.py:marking", "factory.py:marking", "--input-shape", "1", "2", "--output", "c.json")
    for result, name in ((swept, "s.json"), (compared, "c.json")):
        assert result.exit_code == 0, result.output
        data = json.loads((tmp_path / name).read_text())
        assert data["timestamp"] and data["host"]["cores"] >= 1


def test_validate_json_carries_timestamp_and_host(tmp_path: Path) -> None:
    from graphprof.crosscheck import CrossCheck
    from graphprof.render.sink import CrossCheckResult, write_result

    check = CrossCheck(model="m", family="f", input="1x2", reference="torch", unit="flops")
    write_result(CrossCheckResult((check,), 1.0), tmp_path / "v.json")
    data = json.loads((tmp_path / "v.json").read_text())
    assert data["timestamp"] and "host" in data and data["models"][0]["model"] == "m"


# ---- (5) descriptors: appended, never replaced ---------------------------------------------------------


def _shell(command: str, cwd: Path) -> None:
    subprocess.run(command, shell=True, check=True, env=ENV, cwd=cwd, capture_output=True, timeout=300)


@pytest.mark.slow  # over 4 s: the full suite runs it, the fast tier does not
def test_dev_stdout_appends_for_graph_estimate(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text("earlier line\n")
    _shell(f"{sys.executable} -m graphprof_cli.main graph-estimate --model pyg:gcn --output /dev/stdout >> {log}", tmp_path)
    text = log.read_text()
    assert text.startswith("earlier line\n") and '"timestamp"' in text


@pytest.mark.slow  # over 4 s: the full suite runs it, the fast tier does not
def test_graph_through_a_link_to_stdout_appends(tmp_path: Path) -> None:
    (tmp_path / "g.json").symlink_to("/proc/self/fd/1")
    (tmp_path / "factory.py").write_text(FACTORY.format(elsewhere=str(tmp_path), marker=str(tmp_path / "built")))
    log = tmp_path / "log.txt"
    log.write_text("earlier line\n")
    _shell(f"{sys.executable} -m graphprof_cli.main --model factory.py:marking --input-shape 1 2 --graph g.json >> {log}", tmp_path)
    text = log.read_text()
    assert text.startswith("earlier line\n") and '"nodes"' in text and (tmp_path / "g.json").is_symlink()


# ---- (4) a write that fails half-way -------------------------------------------------------------------

PARTIAL_WRITER = """
import resource, signal, sys
from graphprof.base.atomic import write_atomic
from graphprof.errors import OutputError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing the process
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
try:
    write_atomic(sys.argv[1], "y" * 5000)
except OutputError as exc:
    print(exc)
    sys.exit(7)
"""


def test_a_write_past_the_file_size_limit_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "p.json"
    target.write_bytes(b'{"old": true}\n')
    proc = subprocess.run([sys.executable, "-c", PARTIAL_WRITER, str(target)], capture_output=True, text=True, env=ENV, timeout=60)
    assert proc.returncode == 7, proc.stderr
    assert target.read_bytes() == b'{"old": true}\n' and sorted(p.name for p in tmp_path.iterdir()) == ["p.json"]


def test_calibration_preset_keeps_the_old_file_and_refuses_a_folder(tmp_path: Path) -> None:
    from graphprof.calibrate.store import write_preset

    with pytest.raises(OutputError, match="it is a folder"):
        write_preset({"hardware": {}}, tmp_path)
    result = invoke("calibrate", "--output", str(tmp_path))
    assert result.exit_code == OutputError.exit_code and "it is a folder" in result.stderr
    assert list(tmp_path.iterdir()) == []  # no preset.tmp, no local.json.tmp


# ---- (6) a writer killed between the write and the rename ---------------------------------------------

KILLED_WRITER = """
import os, signal, sys
from graphprof.base import atomic
atomic.os.replace = lambda src, dst: os.kill(os.getpid(), signal.SIGKILL)
atomic.write_atomic(sys.argv[1], "new")
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_killed_writers_temporary_is_swept_by_the_next_write(tmp_path: Path) -> None:
    target = tmp_path / "p.json"
    target.write_text("old")
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(target)], env=ENV, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert len(list(tmp_path.glob(".p.json.gp*.tmp"))) == 1 and target.read_text() == "old"  # the kill's leftover
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from graphprof.base.atomic import write_atomic; write_atomic(sys.argv[1], 'next')",
            str(tmp_path / "q.json"),
        ],
        env=ENV,
        timeout=60,
    )
    assert proc.returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "q.json"]


def test_a_live_writers_temporary_is_left_alone(tmp_path: Path) -> None:
    live = tmp_path / f".p.json.gp{os.getppid()}-0123456789ab.tmp"  # our parent runs
    live.write_text("partial")
    write_atomic(tmp_path / "q.json", "{}")
    assert live.exists()

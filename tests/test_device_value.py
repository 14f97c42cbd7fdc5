"""The device as a value, read once at the edge: one CLI run opens the local calibration file once.

``--hardware local`` (and ``partition --devices cpu:N``) reads ``$XDG_CACHE_HOME/graphprof/local.json``
where the options are resolved (:func:`graphprof.devices.hardware.get_hardware`,
:func:`graphprof.devices.hardware.read_local_hardware`); the preset, its calibration and their notes then
travel as one :class:`graphprof.devices.hardware.Hardware`, and the classifier, the predictor and the
planner below never open the file again. Only learning from a ``--measure`` run re-reads it, under its lock.

Opens are counted with an audit hook (the ``open`` event: ``open()``, ``io.open``, ``Path.read_text``,
``os.open`` alike), so a second reading function anywhere would be counted too.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from graphprof.devices.local import local_path
from graphprof_cli.main import app, join_input_shape

#: Whether a test counts now, and the opens for reading of the calibration file it counted.
_COUNTING = [False]
_READS: list[str] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not _COUNTING[0] or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    path, mode, flags = args
    reading = (flags & os.O_ACCMODE) == os.O_RDONLY if mode is None else "r" in str(mode)  # os.open: flags alone
    if reading and Path(os.fsdecode(path)) == local_path():  # where the file is now: the test sets XDG_CACHE_HOME
        _READS.append(os.fsdecode(path))


sys.addaudithook(_audit)  # audit hooks stay for the process: _audit does nothing unless a test watches


@pytest.fixture
def reads() -> Iterator[list[str]]:
    """The opens for reading of ``local.json`` during the test (with the ``XDG_CACHE_HOME`` it sets)."""
    _READS.clear()
    _COUNTING[0] = True
    try:
        yield _READS
    finally:
        _COUNTING[0] = False


def _write(cache: Path, monkeypatch: pytest.MonkeyPatch, *, threads: int | None = None) -> Path:
    """A tiny current ``local.json`` (class rates, no kind models) with one learned record whose seconds
    are damaged: the prediction leaves it out, with a note."""
    from graphprof.devices.local import FORMAT, cpu_model, local_path

    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    rates = {"compute_fraction": 0.5, "memory_fraction": 0.5, "latency_s": 1e-6, "half_depth": 8.0}
    data = {
        "format": FORMAT,
        "hardware": {"name": "local", "label": "this CPU (test)", "kind": "cpu", "peak_tflops": {"float32": 0.2},
                     "bandwidth_gbs": 20.0, "source": "test"},
        "calibration": {"preset": "local", "kind": "cpu", "bandwidth_gbs": 20.0, "launch_s": 1e-6,
                        "host_per_kernel_s": 4e-6, "overlap": 0.0, "rates": {"float32": {"elementwise": rates, "matmul": rates}}},
        "device": {"type": "cpu", "name": cpu_model(), "threads": torch.get_num_threads() if threads is None else threads,
                   "torch": torch.__version__},
        "learned": [["linear", [1.0, 2.0], -1.0, "run", "damaged"]],
    }  # fmt: skip
    path = local_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, join_input_shape(list(args)))


def test_profile_with_the_local_preset_reads_its_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: list[str]) -> None:
    path = _write(tmp_path, monkeypatch)
    result = _invoke("--model", "resnet18", "--input-shape", "1,3,32,32", "--hardware", "local", "-o", str(tmp_path / "p.json"))
    assert result.exit_code == 0, result.output
    assert reads == [str(path)], reads
    document = json.loads((tmp_path / "p.json").read_text())
    assert document["roofline"]["predicted_time_s"] > 0  # the file's calibration predicted, from the record
    assert any("1 learned record(s)" in note for note in document["roofline"]["notes"])  # and its note came along


@pytest.mark.slow  # a real measurement, about 4 s
def test_a_measured_run_that_does_not_learn_reads_the_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: list[str]) -> None:
    path = _write(tmp_path, monkeypatch)
    result = _invoke("--model", "resnet18", "--input-shape", "1,3,32,32", "--hardware", "local", "--measure",
                     "--iters", "1", "--warmup", "0", "--no-learn")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert reads == [str(path)], reads


def test_partition_on_the_local_cpu_reads_the_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: list[str]) -> None:
    threads = torch.get_num_threads()
    path = _write(tmp_path, monkeypatch, threads=threads)
    out = tmp_path / "plan.json"
    result = _invoke("partition", "--model", "resnet18", "--devices", "cpu:1", "--threads", str(threads), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert reads == [str(path)], reads
    assert "predicted by the local calibration" in json.loads(out.read_text())["cost_table"]["time_source"]["cpu"]


@pytest.mark.parametrize("turn", [1, 2])
def test_every_test_has_a_cache_of_its_own(tmp_path_factory: pytest.TempPathFactory, turn: int) -> None:
    """conftest points ``XDG_CACHE_HOME`` at a fresh folder for each test: never the developer's own cache,
    and never one another test wrote a calibration into (the first turn writes one; the second sees none)."""
    from graphprof.calibrate.preset import load_local

    cache = Path(os.environ["XDG_CACHE_HOME"])
    assert cache.is_relative_to(tmp_path_factory.getbasetemp()) and not any(cache.iterdir())
    assert load_local() is None and local_path().is_relative_to(cache)
    if turn == 1:
        local_path().parent.mkdir(parents=True)
        local_path().write_text("{}")


@pytest.mark.slow  # a real measurement, about 6 s
def test_a_measured_run_that_learns_reads_the_file_again_only_to_write_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: list[str]
) -> None:
    """The write-back re-reads the file under its lock (another run may have learned since): the one read
    besides the edge's."""
    from test_opmodel import _write_local

    path = _write_local(tmp_path, monkeypatch)
    result = _invoke("--model", "resnet18", "--input-shape", "1,3,32,32", "--hardware", "local", "--measure",
                     "--iters", "1", "--warmup", "0")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert reads == [str(path), str(path)], reads
    assert "learned" in result.output and json.loads(path.read_text())["learned"]

"""Hostile and careless input, round three (issue 34): files that run code, pages that run script, sizes.

Every planted payload leaves a marker file when it runs; each test checks that none was created, and
an opt-in case (``--allow-unsafe-load``) shows the payload really runs without the guard, so the tests
can fail.
"""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import zipfile
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import graphprof
from graphprof.errors import InvalidInputError, UnsafeLoadError
from graphprof_cli.main import app, join_input_shape

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, join_input_shape(list(args)))


class Payload:
    """Unpickling this runs ``touch MARKER`` (through ``subprocess.call``, which torch does not block outright,
    so a loader that falls back on ``add_safe_globals`` advice runs it too)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (subprocess.call, (["touch", str(self.marker)],))


def _legacy(obj: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer, _use_new_zipfile_serialization=False)
    return buffer.getvalue()


# ---- 1. a .pt2 whose loading would unpickle code ----------------------------------------------------
@pytest.fixture(scope="module")
def tiny_pt2(tmp_path_factory) -> Path:
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    path = tmp_path_factory.mktemp("pt2") / "tiny.pt2"
    torch.export.save(torch.export.export(model, (torch.randn(2, 4),)), path)
    return path


def _rewrite(src: Path, dst: Path, member: str, data: bytes) -> None:
    """``src`` with ``<archive>/member`` replaced by (or added as) ``data``."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        prefix = zin.namelist()[0].split("/")[0]
        for name in zin.namelist():
            if name != f"{prefix}/{member}":
                zout.writestr(name, zin.read(name))
        zout.writestr(f"{prefix}/{member}", data)


PT2_VARIANTS = {
    "legacy sample inputs": ("data/sample_inputs/model.pt", lambda m: _legacy(((Payload(m),), {}))),
    "raw pickle sample inputs": ("data/sample_inputs/model.pt", lambda m: pickle.dumps(Payload(m))),
    "legacy weights": ("data/weights/model.pt", lambda m: _legacy({"w": Payload(m)})),
    "legacy constants": ("data/constants/model.pt", lambda m: _legacy({"c": Payload(m)})),
}


@pytest.fixture(params=sorted(PT2_VARIANTS))
def evil_pt2(request, tiny_pt2, tmp_path) -> tuple[Path, Path]:
    member, make = PT2_VARIANTS[request.param]
    marker = tmp_path / "MARKER"
    path = tmp_path / "evil.pt2"
    _rewrite(tiny_pt2, path, member, make(marker))
    return path, marker


def test_pt2_payloads_are_refused_by_the_api(evil_pt2) -> None:
    path, marker = evil_pt2
    with pytest.raises(UnsafeLoadError, match="would unpickle code"):
        graphprof.profile_model(str(path))
    assert not marker.exists()


def test_pt2_payloads_are_refused_by_the_cli(evil_pt2) -> None:
    path, marker = evil_pt2
    result = invoke("--model", str(path))
    assert result.exit_code == 9, result.output
    assert not marker.exists()
    assert "Traceback" not in result.output


def test_pt2_opt_in_runs_the_payload_and_ends_in_one_line(evil_pt2) -> None:
    """The opt-in really does load the payload (so the tests above can fail), and ends without a traceback."""
    path, marker = evil_pt2
    result = invoke("--model", str(path), "--allow-unsafe-load")
    assert marker.exists()
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output


def test_genuine_pt2_still_loads(tiny_pt2) -> None:
    assert graphprof.profile_model(str(tiny_pt2)).total_macs == 2 * 4 * 3


def test_pt2_zip_bomb_is_refused_before_reading(tiny_pt2, tmp_path) -> None:
    bomb = tmp_path / "bomb.pt2"
    with zipfile.ZipFile(tiny_pt2) as zin, zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as zout:
        for name in zin.namelist():
            zout.writestr(name, zin.read(name))
        zout.writestr(zin.namelist()[0].split("/")[0] + "/extra/blob", bytes(8 << 20))  # 8 MiB -> ~8 KiB
    for opt_in in (False, True):
        with pytest.raises(InvalidInputError, match="zip bomb"):
            graphprof.profile_model(str(bomb), allow_unsafe_load=opt_in)


# ---- 2. a graph data set whose processed file is a payload ------------------------------------------
def _plant_cora(root: Path, marker: Path) -> None:
    raw, processed = root / "Cora" / "raw", root / "Cora" / "processed"
    raw.mkdir(parents=True)
    processed.mkdir(parents=True)
    for part in ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"):
        (raw / f"ind.cora.{part}").write_bytes(b"")
    torch.save(Payload(marker), processed / "data.pt")
    torch.save("None", processed / "pre_transform.pt")
    torch.save("None", processed / "pre_filter.pt")


def test_dataset_payload_is_refused(tmp_path) -> None:
    pytest.importorskip("torch_geometric")
    from graphprof.gnn.datasets import load_graph

    marker = tmp_path / "MARKER"
    _plant_cora(tmp_path / "data", marker)
    with pytest.raises(UnsafeLoadError, match="would run code"):
        load_graph("cora", tmp_path / "data")
    assert not marker.exists()
    with pytest.raises(Exception):  # noqa: B017 - the opt-in runs the payload; the "graph" is then garbage
        load_graph("cora", tmp_path / "data", allow_unsafe_load=True)
    assert marker.exists()


@pytest.mark.slow  # over 4 s: the full suite runs it, the fast tier does not
def test_dataset_payload_is_refused_by_the_seed_script(tmp_path) -> None:
    pytest.importorskip("torch_geometric")
    marker = tmp_path / "MARKER"
    _plant_cora(tmp_path / "data", marker)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "cli")])}
    script = root / "cli" / "profile_model.py"
    if not script.exists():
        script = root / "scripts" / "profile_model.py"
    done = subprocess.run(
        [os.sys.executable, str(script), "--model", "pyg:gcn", "--dataset", "cora", "--data-root", str(tmp_path / "data")],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 9, done.stderr[-2000:]
    assert not marker.exists()


# ---- 9. generation beyond the model's positions -----------------------------------------------------
def test_new_tokens_beyond_the_positions_are_refused_up_front() -> None:
    from graphprof.generate import profile_generation

    for prompt, new in ((1024, 1_000_000), (1024, 4096)):
        with pytest.raises(InvalidInputError, match="2,048 positions"):
            profile_generation("hf:llama", prompt_len=prompt, new_tokens=new)


def test_generate_on_a_plain_module_is_one_line() -> None:
    from graphprof.generate import profile_generation

    with pytest.raises(InvalidInputError, match="decoder-only"):
        profile_generation(torch.nn.Linear(8, 8), prompt_len=4, new_tokens=2)


# ---- 10. partition: devices, the solver, threads and processes bounded ---------------------------------
@pytest.mark.parametrize(
    ("spec", "why"),
    [("h100:1000000000", "at most 1024"), ("cpu:\u00b2", "whole number"), ("h100@1e300", "memory"), ("x=1e-320/1:1@1", "TFLOP/s")],
)
def test_device_specs_are_bounded(spec: str, why: str) -> None:
    from graphprof.partition.devices import parse_devices

    with pytest.raises(InvalidInputError, match=why):
        parse_devices(spec)


def test_a_link_that_would_make_time_infinite_is_refused() -> None:
    from graphprof.partition.devices import parse_links

    with pytest.raises(InvalidInputError, match="link bandwidth"):
        parse_links(["1e-320"])


def test_the_solver_refuses_a_problem_it_cannot_finish() -> None:
    from graphprof.partition.solver import Problem, solve

    kinds, units = 10, 14
    problem = Problem(
        seconds=((1.0,) * units,) * kinds, weight_bytes=(1,) * units, activation_bytes=(0,) * units,
        cut_bytes=(0,) * (units + 1), memory=(10**9,) * kinds, count=(6,) * kinds,
        bandwidth=((1.0,) * kinds,) * kinds, latency=((0.0,) * kinds,) * kinds,
    )  # fmt: skip
    with pytest.raises(InvalidInputError, match="stage choices"):
        solve(problem)


@pytest.mark.parametrize(
    ("options", "why"),
    [({"threads": 100_000}, "threads"), ({"threads": 0}, "threads"), ({"micro_batches": 100_000}, "micro-batches"), ({"kv_len": -1}, "kv-len")],
)
def test_partition_figures_are_bounded_before_any_work(options: dict, why: str, monkeypatch) -> None:
    from graphprof.partition import report

    monkeypatch.setattr(report, "prepare_for", lambda *a, **k: pytest.fail("the model was prepared before the check"))
    with pytest.raises(InvalidInputError, match=why):
        report.partition_report(torch.nn.Linear(4, 4), "cpu:1", run=True, input_shape=(1, 4), **options)


def test_a_run_with_more_stages_than_cores_is_refused(monkeypatch) -> None:
    from graphprof.partition.run import check_run_options

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    with pytest.raises(InvalidInputError, match="3 stages"):
        check_run_options(micro_batches=1, iters=1, threads=1, stages=3)


# ---- 13. state as found ---------------------------------------------------------------------------
@pytest.mark.slow
def test_partition_run_leaves_batchnorm_statistics_as_found() -> None:
    from graphprof.partition.report import partition_report

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3), torch.nn.BatchNorm2d(8))
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    partition_report(model, "cpu:2", input_shape=(2, 3, 16, 16), iters=1, run=True, run_iters=1, micro_batches=2, compare=False)
    assert [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])] == []
    assert model.training


# ---- 12. graph sizes refused up front, with the bytes they would need -------------------------------
@pytest.mark.parametrize(
    "spec",
    ["pyg:gin?num_edges=1000000000000000", "pyg:gin?avg_degree=1000000000000", "pyg:gin?hidden_dim=1000000000", "pyg:gin?num_nodes=1000000000000"],
)
def test_graph_sizes_that_cannot_fit_are_refused_with_their_size(spec: str, monkeypatch) -> None:
    pytest.importorskip("torch_geometric")
    from graphprof.models import graphs

    monkeypatch.setattr(graphs.torch, "randint", lambda *a, **k: pytest.fail("allocated before the check"))
    with pytest.raises(InvalidInputError, match=r"would need [0-9.]+ [KMGTP]iB"):
        graphprof.profile_model(spec)


@pytest.mark.parametrize("query", ["avg_degree=nan", "avg_degree=inf", "pe_dim=-1", "dropout=nan", "ffn_dim=-2"])
def test_graph_options_that_are_not_numbers_are_bad_input(query: str) -> None:
    pytest.importorskip("torch_geometric")
    with pytest.raises(InvalidInputError):
        graphprof.profile_model(f"pyg:gin?{query}")

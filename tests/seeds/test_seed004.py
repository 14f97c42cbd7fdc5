"""Seed 004 (the graph-transformer profiling framework), as its user types it: the printed results at 80
columns, the script and its JSON, the CPU memory figures, the package's module paths, the sparse
aggregation and MultiheadAttention's out_proj among the counts."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from rich.console import Console
from torch import nn

from graphprof.formulas.cost import Cost
from graphprof.gnn.components import COMPONENTS, ComponentCosts
from graphprof.gnn.scaling import GraphPoint, GraphScalingResult
from graphprof.measure.timing import RuntimeStats
from graphprof.render.formatting import format_percent
from graphprof.render.graph_models import render_graph_scaling

ROOT = Path(__file__).resolve().parents[2]


def _piped(renderable: object, width: int = 80) -> str:
    """What a pipe (a file, not a terminal) of ``width`` columns shows."""
    out = io.StringIO()
    Console(file=out, width=width).print(renderable)
    return out.getvalue()


def _graph_result(parameter: str, spreads: tuple[float, ...] = (1.0, 62.15, 1.0)) -> GraphScalingResult:
    """A graph transformer's five components at three points, each FLOPs figure 6-7 characters wide."""
    points = []
    for i, (n, std) in enumerate(zip((100, 200, 400), spreads, strict=True)):
        scale = 1 if parameter == "num_nodes" else i + 1
        costs = {c: Cost(flops=0 if c in ("mpnn", "pe") else 911_363 * (k + 1) * n * scale // 100) for k, c in enumerate(COMPONENTS)}
        value = n if parameter == "num_nodes" else i + 1
        runtime = RuntimeStats(mean=49.44, std=std, min=1.0, max=200.0, num_runs=10)
        points.append(GraphPoint(value, n if parameter == "num_nodes" else 500, 5 * n, 1000, ComponentCosts(costs), runtime))
    return GraphScalingResult("pyg:graph_transformer", parameter, tuple(points))


# ---- the printed results ------------------------------------------------------------------
@pytest.mark.parametrize("parameter", ["num_nodes", "num_layers"])
def test_graph_scaling_at_80_columns_in_a_pipe_cuts_no_cell(parameter: str) -> None:
    """Every cell, every forward time among them, is whole at 80 columns (before: 22 cells cut to ``…``)."""
    text = _piped(render_graph_scaling(_graph_result(parameter)))
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert text.count("49.44") == 3 and "62.15" in text


def test_a_noisy_forward_is_flagged_as_the_main_command_flags_it() -> None:
    text = _piped(render_graph_scaling(_graph_result("num_nodes")))
    assert "62.15 *" in text and "noisy" in text and "over 10%" in text
    quiet = _piped(render_graph_scaling(_graph_result("num_nodes", (1.0, 2.0, 3.0))))
    assert "noisy" not in quiet and "*" not in quiet


def test_a_near_zero_share_prints_zero_never_minus_zero() -> None:
    assert format_percent(-1e-9) == "0.0%" and format_percent(-0.0004) == "0.0%" and format_percent(0.1234) == "12.3%"
    text = _piped(render_graph_scaling(_graph_result("num_layers")), width=200)
    assert "-0.0%" not in text
    assert "x² term" not in text  # the node-pair split is about nodes, not depth


def test_node_scaling_still_splits_attention_over_node_pairs() -> None:
    text = _piped(render_graph_scaling(_graph_result("num_nodes")), width=200)
    assert "the x² term (scores over all node pairs) is 0.0% of attention" in text


def test_sweep_table_at_80_columns_in_a_pipe_cuts_no_cell(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``ScalingExperiment.print_summary()`` of a plain sweep, to a pipe with ``COLUMNS=80``."""
    from graphprof.compat.scaling import ScalingExperiment

    def make(hidden_dim: int = 64, num_layers: int = 2) -> nn.Module:
        return nn.Sequential(*[nn.Linear(16 if i == 0 else hidden_dim, hidden_dim) for i in range(num_layers)])

    monkeypatch.setenv("COLUMNS", "80")
    experiment = ScalingExperiment(make, "cpu", input_shape=(1, 16), hardware="h100")
    experiment.run("hidden_dim", [64, 128, 256])
    capsys.readouterr()
    experiment.print_summary()
    text = capsys.readouterr().out
    assert "…" not in text and "hidden" in text and "Lower bound" in text  # the roofline's time, named as a bound (issue 54)
    assert max(len(line) for line in text.splitlines()) <= 80


def test_seed_script_flags_a_noisy_run() -> None:
    from graphprof_cli.seed_profile import _summary

    report = {
        "model_info": {"total_parameters": 10, "parameter_memory_mb": 0.0},
        "runtime": {"forward": {"mean": 49.44, "std": 62.15, "num_runs": 10}, "backward": {"mean": 10.0, "std": 0.5, "num_runs": 10}},
    }  # fmt: skip
    lines = _summary(report)
    assert "noisy" in lines[1] and "126%" in lines[1] and "over 10%" in lines[1]
    assert "noisy" not in lines[2]


@pytest.mark.slow  # over 4 s: the full suite runs it, the fast tier does not
def test_pyg_import_is_silent_and_leaves_the_users_filters_alone() -> None:
    """PyG's ``torch.jit.script`` deprecation is silenced where graphprof imports PyG, and only there."""
    pytest.importorskip("torch_geometric")
    code = (
        "import warnings; before = list(warnings.filters)\n"
        "from graphprof.models.pyg_import import import_pyg; import_pyg()\n"
        "assert warnings.filters == before, 'the filters changed'\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "cli")])}
    done = subprocess.run([sys.executable, "-W", "error::FutureWarning", "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "jit.script" not in done.stderr
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.warn("`torch.jit.script` is deprecated, the user's own", FutureWarning, stacklevel=1)
    assert len(seen) == 1  # the filter was not left behind


def test_the_pyg_extra_installs_scipy_for_the_laplacian_pe() -> None:
    pyg = next(line for line in (ROOT / "pyproject.toml").read_text().splitlines() if line.startswith("pyg = ["))
    assert '"scipy' in pyg.partition("]")[0]  # tomllib is 3.11+, and the extra is one line


def test_laplacian_pe_precompute_runs() -> None:
    pytest.importorskip("scipy")
    transforms = pytest.importorskip("torch_geometric.transforms")
    from graphprof.compat.seed004_profiling import profile_pe_computation
    from graphprof.models.graphs import random_graph

    data = random_graph(60, avg_degree=4, feature_dim=8, seed=0).to_data()
    stats = profile_pe_computation(transforms.AddLaplacianEigenvectorPE(k=4, attr_name="pe"), data, num_runs=2)
    assert stats.num_runs == 2 and stats.mean > 0


@pytest.mark.slow  # over 2 s: the full suite runs it, the fast tier does not
def test_seed_script_runs_from_the_seeds_path() -> None:
    env = {**os.environ, "PYTHONPATH": ""}
    done = subprocess.run(
        [sys.executable, "scripts/profile_model.py", "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--profile" in done.stdout and "--hidden_dim" in done.stdout


# ---- parameters an op reads though their module never runs -------------------------------------
def test_multihead_attention_out_proj_is_used_in_the_eager_capture() -> None:
    """``nn.MultiheadAttention`` hands ``out_proj.weight`` to ``F.multi_head_attention_forward``, so
    ``out_proj`` never runs as a module: its 64 * 64 + 64 = 4,160 parameters are used all the same
    (before: "4,172 parameters are not used"); a Linear(3, 3) that nothing reads (12) still is not."""
    import graphprof

    class Attn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(64, 4, batch_first=True)
            self.unused = nn.Linear(3, 3)

        def forward(self, x):  # type: ignore[no-untyped-def]
            return self.attn(x, x, x)[0]

    profile = graphprof.profile_model(Attn(), input_shape=(1, 10, 64), methods=("eager",))
    assert profile.graph_params == profile.total_params - 12
    assert next(r for r in profile.layers if r.name == "attn").params == 3 * 64 * 64 + 3 * 64 + 4_160
    assert "12 parameters are not used by the captured forward pass" in profile.notes


# ---- the memory figures on the CPU ------------------------------------------------------
def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512)).eval()


def test_cpu_forward_peak_includes_the_weights_as_the_seed_does():
    from graphprof.seed004 import MemoryProfiler

    model = _mlp()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())  # (512*1024 + 1024 + 1024*512 + 512) * 4
    from graphprof.measure.memory import live_cpu_bytes

    batch = torch.randn(32, 512)
    live = live_cpu_bytes()  # everything allocated on the CPU now, as CUDA's memory_allocated: this process's
    assert live >= weights + batch.nbytes
    stats = MemoryProfiler(model, "cpu").profile_forward(batch)
    # what was live (the weights and the batch among it), plus at least the output, 32*512*4 bytes
    assert live + 32 * 512 * 4 <= stats.peak_bytes < live + 2**20 * 8
    assert stats.allocated_mb >= weights / 2**20


@pytest.mark.slow  # over 2 s: the full suite runs it, the fast tier does not
def test_cpu_peak_counter_resets_and_sees_an_allocation():
    from graphprof.seed004 import get_peak_memory, reset_memory_stats

    reset_memory_stats("cpu")
    base = get_peak_memory("cpu")
    x = torch.empty(64 * 2**20, dtype=torch.uint8)  # 64 MB
    assert get_peak_memory("cpu") - base >= 64
    del x
    assert get_peak_memory("cpu") - base >= 64  # the peak stays until the next reset
    reset_memory_stats()
    assert get_peak_memory("cpu") < base + 64


# ---- SAGE's mean aggregation on a sparse adjacency ----------------------------------------------
def test_sparse_mm_reduce_counts_stored_elements_by_hand():
    pytest.importorskip("torch_geometric")
    from graphprof.formulas import op_cost

    # N = 6 nodes, F = 4 features, E = 10 edges
    src = torch.tensor([0, 1, 2, 3, 4, 5, 0, 1, 2, 3])
    dst = torch.tensor([1, 2, 3, 4, 5, 0, 2, 3, 4, 5])
    adj = torch.sparse_coo_tensor(torch.stack([dst, src]), torch.ones(10), (6, 6)).coalesce().to_sparse_csr()
    x = torch.randn(6, 4)
    aten = torch.ops.aten
    for reduce, macs, flops in (("sum", 40, 80), ("mean", 40, 80 + 24), ("amax", 0, 80)):
        out = aten._sparse_mm_reduce_impl(adj, x, reduce)
        cost = op_cost(aten._sparse_mm_reduce_impl.default, (adj, x, reduce), {}, out)
        # 10 stored x 4 features = 40 products; mean divides each of the 6 x 4 outputs once; amax compares
        assert (cost.macs, cost.flops) == (macs, flops), reduce


def test_sage_on_a_sparse_adjacency_counts_its_mean_aggregation():
    """A tiny GraphSAGE (mean aggregation) on a CSR adjacency: graphprof's MACs equal an independent count,
    the two linear layers per conv plus the aggregation's nnz x F products (before: the aggregation was 0)."""
    pyg = pytest.importorskip("torch_geometric")
    import graphprof

    n, f, hidden, e = 50, 16, 8, 200
    torch.manual_seed(0)
    edge_index = torch.randint(0, n, (2, e))
    adj = pyg.utils.to_torch_csr_tensor(edge_index, size=(n, n)).t().to_sparse_csr()
    nnz = adj._nnz()
    model = pyg.nn.GraphSAGE(f, hidden, num_layers=2, aggr="mean").eval()
    profile = graphprof.profile_model(model, example_inputs=(torch.randn(n, f), adj))
    # per conv: lin_l (F_in x F_out, on the aggregate) and lin_r (on the node itself), n rows each
    linears = n * (f * hidden + f * hidden) + n * (hidden * hidden + hidden * hidden)
    aggregation = nnz * f + nnz * hidden  # each stored edge meets one row of the layer's input features
    assert profile.total.macs == linears + aggregation
    assert not profile.unsupported


# ---- the seed's package: src/profiling/{runtime,memory,flops,scaling,utils}.py -------------------------------
def _readme_block(containing: str) -> str:
    import re

    blocks = re.findall(r"```(\w+)\n(.*?)```", (ROOT / "tests" / "data" / "seed004_readme_blocks.md").read_text(encoding="utf-8"), re.S)
    return next(code for lang, code in blocks if lang == "python" and containing in code)


def test_the_seeds_module_paths_import_as_its_readme_writes_them(capsys: pytest.CaptureFixture[str]) -> None:
    """``from src.profiling.runtime import profile_pe_computation`` and ``from src.profiling.memory import
    estimate_pe_storage`` run as ``graphprof.seed004.runtime`` / ``.memory`` (before: ModuleNotFoundError)."""
    pyg = pytest.importorskip("torch_geometric")
    from graphprof.seed004 import load_graph

    namespace = {"pe_transform": pyg.transforms.AddRandomWalkPE(walk_length=4, attr_name="pe"), "data": load_graph("karate")}
    for name in ("src.profiling.runtime import profile_pe_computation", "src.profiling.memory import estimate_pe_storage"):
        code = _readme_block(name).replace("src.profiling", "graphprof.seed004").replace("num_runs=10", "num_runs=2")
        exec(compile(code, "<seed 004 README>", "exec"), namespace)  # noqa: S102
    out = capsys.readouterr().out
    assert "PE precomputation: " in out and "Node PE: 0.12 MB" in out  # 1000 nodes * 32 dims * 4 bytes


def test_each_module_of_the_seeds_package_holds_its_names() -> None:
    import importlib

    import graphprof.compat.seed004 as api

    layout = {
        "runtime": "RuntimeProfiler",
        "memory": "MemoryProfiler",
        "flops": "FLOPsEstimator",
        "scaling": "ScalingExperiment",
        "utils": "ProfilingContext",
    }
    for module_name, example in layout.items():
        module = importlib.import_module(f"graphprof.seed004.{module_name}")
        assert example in module.__all__
        assert all(getattr(module, name) is getattr(api, name) for name in module.__all__)


# ---- the CPU peak sees transients, as CUDA's does ---------------------------------------------------------
_CPU_PEAK = """
import torch
from torch import nn
from graphprof.seed004 import get_peak_memory, reset_memory_stats
device = torch.device("cpu")
reset_memory_stats()
base = get_peak_memory(device)
x = torch.ones(2**25)  # 2**25 floats * 4 bytes = 128 MiB, written
del x
first = get_peak_memory(device) - base
model = nn.Sequential(nn.Linear(256, 8192), nn.ReLU(), nn.Linear(8192, 256)).eval()
batch = torch.randn(256, 256)
reset_memory_stats()
base = get_peak_memory(device)
with torch.no_grad():
    model(batch)
print(first, get_peak_memory(device) - base)
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="the kernel's resettable peak is Linux's")
def test_the_cpu_peak_includes_a_tensor_made_and_freed_since_the_reset() -> None:
    """The seed's pattern, ``reset_memory_stats()``, work, ``get_peak_memory(device)``: a 128 MB tensor
    allocated and freed between the two readings is in the peak (before: 0.0 MB), and so is a forward's
    transient activation. In a fresh process, as the seed's script runs: the CPU peak is the process's
    resident memory, and a long-lived process (a test session) may serve a block from memory it already holds."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _CPU_PEAK], capture_output=True, text=True, check=True).stdout.split()
    first, forward = float(out[-2]), float(out[-1])
    # MB; the kernel batches its RSS counters per CPU, so the reading can fall short by a little: one run in a
    # loaded fast tier read 125.9 of 128 (98.4%)
    assert first >= 128 * 0.97
    assert forward >= 256 * 8192 * 4 / 2**20  # the 8 MiB hidden activation, freed since


# ---- print_summary() at 80 columns ----------------------------------------------------------------------------
def _parted(text: str) -> list[str]:
    """Lines that end in a number whose unit, or a word whose rest, starts the next line."""
    import re

    lines = text.splitlines()
    return [a + " / " + b for a, b in zip(lines, lines[1:], strict=False) if re.search(r"\d$", a.rstrip()) and re.match(r"\s*[KMGT]\b", b)]


@pytest.mark.parametrize("parameter", ["num_nodes", "num_layers"])
def test_the_scaling_table_at_80_columns_keeps_numbers_and_headers_whole(parameter: str) -> None:
    text = _piped(render_graph_scaling(_graph_result(parameter)))
    assert not _parted(text) and "attention" in text and "911.36K" in text
    assert max(len(line) for line in text.splitlines()) <= 80


@pytest.mark.slow  # the seed's full experiment: node and layer scaling, measured
def test_the_seeds_full_experiment_prints_whole_cells_at_80_columns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch_geometric")
    from graphprof.seed004 import ScalingExperiment, build_graph_model

    def get_model(**kwargs: object) -> nn.Module:
        return build_graph_model("graph_transformer", **{"num_layers": 2, "num_heads": 4, **kwargs})  # type: ignore[arg-type]

    def model_factory(**kwargs: object) -> nn.Module:
        return get_model(hidden_dim=32, **kwargs)

    monkeypatch.setenv("COLUMNS", "80")
    device = torch.device("cpu")
    experiment = ScalingExperiment(model_factory, device, num_runs=2)
    experiment.run_node_scaling([100, 200, 400])
    experiment.run_layer_scaling([1, 2, 4])
    capsys.readouterr()
    experiment.print_summary()
    text = capsys.readouterr().out
    assert "num_nodes scaling" in text and "num_layers scaling" in text and "attention" in text
    assert not _parted(text) and "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80


# ---- the script's JSON: kind and schema_version ----------------------------------------------------------------
def test_the_scripts_json_starts_with_kind_and_schema_version_and_fits_its_schema(tmp_path: Path) -> None:
    """``cli/profile_model.py --output r.json`` is validated like every other JSON graphprof writes."""
    pytest.importorskip("torch_geometric")
    import contextlib
    import json

    from graphprof.schemas import validate
    from graphprof_cli.seed_profile import main

    argv = [
        "--model",
        "gin",
        "--profile",
        "flops",
        "--num_nodes",
        "50",
        "--hidden_dim",
        "16",
        "--num_layers",
        "1",
        "--output",
        str(tmp_path / "r.json"),
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    document = json.loads((tmp_path / "r.json").read_text())
    assert list(document)[:4] == ["kind", "schema_version", "timestamp", "host"]
    assert document["kind"] == "seed004-profile" and "model_info" in document and "flops" in document
    validate(document)
    document["model_info"] = "not the seed's"
    with pytest.raises(Exception, match="model_info"):
        validate(document)


# ---- names that moved: one line saying where -------------------------------------------------------------------
def test_a_seed_name_asked_of_the_top_level_says_where_it_moved() -> None:
    """Last month's README: ``from graphprof import RuntimeProfiler``. Now one line naming graphprof.seed004."""
    with pytest.raises(ImportError, match=r"^graphprof\.RuntimeProfiler moved: from graphprof\.seed004 import RuntimeProfiler"):
        from graphprof import RuntimeProfiler  # noqa: F401
    import graphprof

    with pytest.raises(AttributeError, match="from graphprof.base.choices import Mode"):  # hasattr answers False (issue 54)
        graphprof.Mode  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        graphprof.no_such_name  # noqa: B018


def test_every_moved_name_is_where_the_message_says() -> None:
    import importlib

    import graphprof
    import graphprof.compat.seed004 as api
    from graphprof.base.moved import MOVED

    assert set(api.__all__) <= set(MOVED) and not set(MOVED) & set(graphprof.__all__)
    for name, where in MOVED.items():
        assert hasattr(importlib.import_module(where), name), f"{name} is not in {where}"

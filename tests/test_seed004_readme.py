"""Every code block of seed 004's README runs with ``graphprof.seed004`` in place of ``src.profiling``.

The blocks are kept in ``tests/data/seed004_readme_blocks.md`` (checked against the seed's README when
the seed is on disk). Python blocks run in order in one namespace whose model is a graphprof-built graph
transformer on a synthetic graph, and must print real values; the bash blocks run the seed's script
(:mod:`graphprof_cli.seed_profile`); the JSON block's fields must all be in graphprof's report.
"""

from __future__ import annotations

import contextlib
import glob
import io
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("torch_geometric")

BLOCKS_FILE = Path(__file__).parent / "data" / "seed004_readme_blocks.md"
_FENCE = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _blocks() -> list[tuple[str, str]]:
    return _FENCE.findall(BLOCKS_FILE.read_text(encoding="utf-8"))


def test_the_stored_blocks_are_the_seeds() -> None:
    seeds = glob.glob("/work/shared/seeds/004_*.txt")
    if not seeds:
        pytest.skip("the seed is not on this machine")
    assert _FENCE.findall(Path(seeds[0]).read_text(encoding="utf-8")) == _blocks()


def test_the_whole_seed_api_is_served_from_graphprof_seed004_and_kept_off_the_top_level() -> None:
    import graphprof
    import graphprof.compat.seed004
    import graphprof.seed004

    assert len(graphprof.seed004.__all__) == 39  # the seed's 31 public names and graphprof's 8 companions
    for name in graphprof.seed004.__all__:
        assert getattr(graphprof.seed004, name) is getattr(graphprof.compat.seed004, name), name
    # the top level is graphprof's own API: no seed-004 name (Profiler is seed 000's, judged native)
    assert not set(graphprof.seed004.__all__) & set(graphprof.__all__)


def _namespace() -> dict[str, Any]:
    """What the README's snippets assume exists: a model, a batch, a device, an optimizer, a factory..."""
    import torch_geometric.transforms as T
    from torch import nn

    import graphprof.seed004 as graphprof

    model = graphprof.build_graph_model("graph_transformer", hidden_dim=32, num_layers=2, num_heads=4)
    # the later blocks use the API's names without importing them, as after `from src.profiling import *`
    star = {name: getattr(graphprof, name) for name in graphprof.__all__}
    return {
        **star,
        "torch": torch, "nn": nn, "Dict": dict,
        "dataclass": __import__("dataclasses").dataclass,
        "model": model,
        "batch": graphprof.random_graph(100, avg_degree=5).to_data(),
        "device": torch.device("cpu"),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.01),
        "loss_fn": nn.MSELoss(),
        "fn": torch.mm, "args": (torch.randn(64, 64), torch.randn(64, 64)), "kwargs": {},
        "in_features": 256, "out_features": 512, "batch_size": 1, "seq_len": 500,
        "num_nodes": 500, "num_edges": 2500, "hidden_dim": 256, "num_heads": 8, "ffn_dim": 512, "pe_dim": 16,
        "get_model": lambda **kw: graphprof.build_graph_model("graph_transformer", **{"num_layers": 2, **kw}),
        "pe_transform": T.AddRandomWalkPE(walk_length=16, attr_name="pe"),
        "data": graphprof.load_graph("karate"),
    }  # fmt: skip


def _python(code: str) -> str:
    # src.profiling.runtime / .memory are graphprof.seed004.runtime / .memory, laid out as the seed's package
    return code.replace("src.profiling", "graphprof.seed004")  # its modules too: graphprof.seed004.runtime


def _run_script(line: str) -> tuple[int, str, str]:
    from graphprof_cli.seed_profile import main

    argv = shlex.split(line.replace("\\\n", " "))
    assert argv[:2] == ["python", "scripts/profile_model.py"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv[2:], "--num_runs", "3"])
    return code, out.getvalue(), err.getvalue()


def _json_fields(expected: Any, actual: Any, where: str = "") -> None:
    if isinstance(expected, dict):
        assert isinstance(actual, dict), where
        for key, value in expected.items():
            assert key in actual, f"{where}.{key} missing from graphprof's report"
            _json_fields(value, actual[key], f"{where}.{key}")


@pytest.mark.slow
def test_every_readme_block_runs() -> None:
    import json

    from graphprof.compat.seed004_profiling import profile_report

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the shared 2-core machine: two threads stall each other under load
    namespace = _namespace()
    printed = io.StringIO()
    try:
        for index, (lang, code) in enumerate(_blocks()):
            if lang == "python":
                with contextlib.redirect_stdout(printed):
                    exec(compile(_python(code), f"<seed004 README block {index}>", "exec"), namespace)  # noqa: S102
            elif lang == "bash":
                for chunk in code.split("\n\n"):
                    text = "\n".join(line for line in chunk.splitlines() if not line.lstrip().startswith("#"))
                    if not text.strip():
                        continue
                    code_, out, err = _run_script(text)
                    if "--dataset peptides_func" in text:
                        assert code_ != 0 and "--data-root" in err and err.count("\n") == 1
                    else:
                        assert code_ == 0, err
            elif lang == "json":
                expected = json.loads(code)
                _json_fields(expected, profile_report(namespace["model"], namespace["batch"], "cpu", num_runs=3))
    finally:
        torch.set_num_threads(threads)
    text = printed.getvalue()
    # real values, not placeholders
    assert re.search(r"Forward: \d+\.\d+ ± \d+\.\d+ ms", text)
    assert re.search(r"Peak memory: \d+\.\d+ MB", text)
    assert re.search(r"Total: \d+\.\d+ GFLOPs", text)
    assert re.search(r"N=2000: \d+\.\d+ ms", text)
    assert "PE precomputation" in text and "Relative PE (sparse)" in text
    assert namespace["result"].parameter_values == [2, 4, 6, 8, 12, 16]  # the last block of scaling: layer scaling
    assert set(namespace["results"]) == {"lap", "rwse", "none"}

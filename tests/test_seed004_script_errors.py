"""``cli/profile_model.py`` (seed 004's script): one line and graphprof's exit code for bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch


# ---- cli/profile_model.py (seed 004's script): one line, graphprof's exit code --------------------------------
@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (["--avg_degree", "nan"], 2, "average degree"),
        (["--device", "bogus"], 2, "unknown device 'bogus'"),
        (["--device", "cuda"], 2, "no CUDA GPU"),
        (["--output", "nope/x.json"], 7, "does not exist"),  # an output error, as the main command's
    ],
)
def test_the_seed_script_says_one_line(tmp_path: Path, monkeypatch, capsys, args: list[str], code: int, said: str) -> None:
    from graphprof_cli.seed_profile import main

    if "cuda" in args and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    monkeypatch.chdir(tmp_path)
    assert main(["--profile", "flops", "--num_nodes", "50", *args]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err


def test_a_graph_too_large_for_memory_is_one_line(monkeypatch, capsys) -> None:
    """``--model gps --num_nodes 30000 --profile memory`` asked the allocator for 14.4 GB: a traceback. The
    allocator's own failure is raised here in its place (the same RuntimeError torch's CPU allocator raises)."""
    import graphprof_cli.seed_profile as script
    from graphprof.errors import MeasurementError

    def allocate(args):
        raise RuntimeError(
            "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried to allocate 14400000000 bytes"
        )

    monkeypatch.setattr(script, "run", allocate)
    code = script.main(["--model", "gps", "--num_nodes", "30000", "--profile", "memory"])
    err = capsys.readouterr().err
    assert code == MeasurementError.exit_code and len(err.strip().splitlines()) == 1 and "out of memory" in err, err
    monkeypatch.setattr(script, "run", lambda args: (_ for _ in ()).throw(RuntimeError("a bug of ours")))
    with pytest.raises(RuntimeError, match="a bug of ours"):  # anything else is not dressed up as memory
        script.main(["--model", "gps"])

"""``cli/profile_model.py`` (seed 004's script): one line and graphprof's exit code for bad input.
"""

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

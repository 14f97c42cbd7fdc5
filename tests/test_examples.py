"""Every script in ``examples/`` (the seeds' own examples done with graphprof) runs from the repository
root as its user would run it, and prints what the seed's example prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
slow = pytest.mark.slow

EXAMPLES = [
    # (script, a module it needs, a line its output must hold); slow: over ~5 s
    pytest.param("test_tensor.py", "torchvision", "==== Detail Graph Stats ====", marks=slow),
    pytest.param("test_llama.py", "transformers", "layers.1: ", marks=slow),
    pytest.param("test_llamab.py", "transformers", "epoch 2: ", marks=slow),
    pytest.param("test_hf_llama.py", "transformers", "llama_profile_detail.txt", marks=slow),
    pytest.param("model_profiling_example.py", "torch", "Operations: ['aten::linear']"),
    pytest.param("scaling_experiment.py", "torch_geometric", "N=200: ", marks=slow),
]


def test_every_example_is_run_here() -> None:
    scripts = {p.name for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_")}
    assert scripts == {p.values[0] for p in EXAMPLES}


@pytest.mark.parametrize(("script", "needs", "expected"), EXAMPLES)
def test_example_runs(script: str, needs: str, expected: str, tmp_path: Path) -> None:
    pytest.importorskip(needs)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("GRAPHPROF_CAPTURE", None)
    done = subprocess.run(
        [sys.executable, f"examples/{script}", str(tmp_path)], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert expected in done.stdout, done.stdout[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("script", [p.values[0] for p in EXAMPLES])
def test_example_given_help_prints_usage_and_writes_nothing(script: str, tmp_path: Path) -> None:
    """``--help`` was taken for the output folder: a folder named ``--help`` was made and the script ran."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(ROOT / "examples" / script), "--help"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stdout.startswith("usage:"), done.stdout[-2000:] + done.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["a-file", "a-file/sub"])
@pytest.mark.parametrize("script", ["model_profiling_example.py", "scaling_experiment.py"])  # the second writes nothing
def test_example_given_an_unusable_folder_is_one_line_exit_2(script: str, where: str, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("mine\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(ROOT / "examples" / script), str(tmp_path / where)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr[-2000:]
    assert (tmp_path / "a-file").read_text() == "mine\n"

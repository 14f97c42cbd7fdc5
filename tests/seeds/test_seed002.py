"""Seed 002 (``profile_graph.py`` and ``profile_graph_with_fvcore.py``), as its user types it: the
script's ``MODEL_REGISTRY``, its report under the seed's labels, its JSON with lower-case types, and the
fvcore comparison's title and columns; graphprof's own command keeps its own."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch.nn as nn
from typer.testing import CliRunner

from graphprof_cli.main import app

ROOT = Path(__file__).resolve().parents[2]

#: The seed's "Validate Custom Models" block, with the ``net`` its ``forward`` uses.
MY_MODEL = """
class MyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))

    def forward(self, x):
        return self.net(x)

# Add to MODEL_REGISTRY in profile_graph.py
MODEL_REGISTRY['my_model'] = lambda: MyModel()
"""


def _script(argv: list[str], registry: dict[str, object] | None = None) -> tuple[int, str, str]:
    from graphprof_cli.seed_graph import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv, registry=registry)  # type: ignore[arg-type]
    return code, out.getvalue(), err.getvalue()


# ---- the registry in the user's own file ------------------------------------------------------------
def test_a_model_registered_the_seeds_way_profiles_from_the_command_line(tmp_path: Path) -> None:
    """Seed 002: ``MODEL_REGISTRY['my_model'] = lambda: MyModel()`` in the user's file, then
    ``--model my_models.py:MODEL_REGISTRY[my_model]`` (before: "has no attribute")."""
    import json

    from typer.testing import CliRunner

    from graphprof_cli.main import app

    (tmp_path / "my_models.py").write_text(
        "import torch.nn as nn\n\n"
        "class MyModel(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))\n\n"
        "    def forward(self, x):\n"
        "        return self.net(x)\n\n"
        "MODEL_REGISTRY = {}\n"
        "MODEL_REGISTRY['my_model'] = lambda: MyModel()\n"
    )
    spec = f"{tmp_path / 'my_models.py'}:MODEL_REGISTRY[my_model]"
    done = CliRunner().invoke(app, ["--model", spec, "--input-shape", "1,8", "--output", "-", "--format", "json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout[done.stdout.index("{") :])["total_params"] == 8 * 16 + 16 + 16 * 2 + 2
    missing = CliRunner().invoke(app, ["--model", spec.replace("[my_model]", "['other']"), "--input-shape", "1,8"])
    assert missing.exit_code != 0 and "no entry 'other'" in missing.output and "my_model" in missing.output
    assert "MODEL_REGISTRY[my_model]" in CliRunner().invoke(app, ["--model", spec, "--input-shape", "1,8", "--width", "200"]).output


# ---- the registry in the seed's script --------------------------------------------------------------------
@pytest.mark.slow  # a subprocess: about 4 s
def test_a_model_added_to_the_scripts_registry_profiles_by_its_key(tmp_path: Path) -> None:
    """The seed's user adds ``MODEL_REGISTRY['my_model'] = lambda: MyModel()`` to ``cli/profile_graph.py``
    and runs ``python3 cli/profile_graph.py --model my_model`` (before: exit 3, unknown model)."""
    (tmp_path / "cli").mkdir()
    shutil.copy(ROOT / "cli" / "_shim.py", tmp_path / "cli" / "_shim.py")
    text = (ROOT / "cli" / "profile_graph.py").read_text()
    main_block = text.index('if __name__ == "__main__":')
    user = "import torch.nn as nn\n" + MY_MODEL
    (tmp_path / "cli" / "profile_graph.py").write_text(text[:main_block] + user + "\n\n" + text[main_block:])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "cli")])}
    argv = [sys.executable, "cli/profile_graph.py", "--model", "my_model", "--input-shape", "1,8"]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "GRAPH PROFILE: my_model" in done.stdout
    assert "Total FLOPs:          354" in done.stdout  # 2*8*16 + 16 biases + 16 ReLUs + 2*16*2 + 2 biases


def test_the_registry_is_the_scripts_and_a_key_not_in_it_is_one_line() -> None:
    namespace: dict[str, object] = {"nn": nn, "MODEL_REGISTRY": {}}
    exec(MY_MODEL, namespace)  # noqa: S102 - the seed's block, as the user adds it
    code, out, err = _script(["--model", "my_model", "--input-shape", "1,8"], namespace["MODEL_REGISTRY"])  # type: ignore[arg-type]
    assert code == 0, err
    assert "GRAPH PROFILE: my_model" in out and "net.0:" in out
    code, out, err = _script(["--model", "my_modle"], namespace["MODEL_REGISTRY"])  # type: ignore[arg-type]
    assert code == 3 and err.count("\n") == 1 and "unknown model 'my_modle'" in err and "MODEL_REGISTRY: my_model" in err


# ---- the seed's report and JSON ----------------------------------------------------------------------------
def test_the_script_prints_the_seeds_labels_and_writes_its_json(tmp_path: Path) -> None:
    """``python3 cli/profile_graph.py --model mobilenet_v2 --output profile.json``: the seed's sections
    and its JSON (``"type": "conv2d"``), under graphprof's envelope and checked against its schema."""
    from graphprof.schemas import validate

    code, out, err = _script(["--model", "resnet18", "--input-shape", "1,3,32,32", "--output", str(tmp_path / "profile.json")])
    assert code == 0, err
    for label in ("GRAPH PROFILE: resnet18", "Model Summary:", "Total Operators:", "Total FLOPs:", "Total Memory:",
                  "Arithmetic Intensity:", "Operation Breakdown:", "Bottleneck Analysis:", "Layer Details (Top 10 by FLOPs):"):  # fmt: skip
        assert label in out, label
    document = json.loads((tmp_path / "profile.json").read_text())
    assert list(document)[:2] == ["kind", "schema_version"] and document["kind"] == "seed002-profile"
    validate(document)
    conv1 = next(layer for layer in document["layers"] if layer["name"] == "conv1")
    assert conv1["type"] == "conv2d" and conv1["bottleneck"] in ("compute-bound", "strongly compute-bound", "balanced", "memory-bound")
    # 3*7*7 products for each of 64 * 16 * 16 outputs, two FLOPs each
    assert conv1["flops"] == 2 * 3 * 7 * 7 * 64 * 16 * 16
    assert sum(layer["flops"] for layer in document["layers"]) == document["total_flops"]
    top = [line for line in out.splitlines()[out.splitlines().index("Layer Details (Top 10 by FLOPs):") + 1 :] if line.startswith("  ")]
    assert len(top) == 10
    verbose = _script(["--model", "resnet18", "--input-shape", "1,3,32,32", "--verbose"])[1]
    assert "layer4.1.conv2:" in verbose and len(verbose.splitlines()) > len(out.splitlines())


def test_graphprofs_own_command_keeps_its_own_report() -> None:
    done = CliRunner().invoke(app, ["--model", "resnet18", "--input-shape", "1,3,32,32", "--width", "160"])
    assert done.exit_code == 0, done.output
    assert "Model summary: resnet18" in done.output and "GRAPH PROFILE" not in done.output


@pytest.mark.slow  # fvcore counts the model too: about 3 s
def test_the_fvcore_script_prints_the_seeds_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    """``compare_with_fvcore`` (what ``python3 cli/profile_graph_with_fvcore.py --model resnet18`` runs)."""
    pytest.importorskip("fvcore")
    monkeypatch.setenv("COLUMNS", "160")  # the headers whole, each on one line
    from cli.profile_graph_with_fvcore import compare_with_fvcore

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        (result,) = compare_with_fvcore("resnet18", input_shape=(1, 3, 32, 32))
    text = out.getvalue()
    assert "FLOP COMPARISON: Our Estimator vs fvcore" in text and "Our FLOPs" in text and "fvcore FLOPs" in text
    assert "Difference" in text and "Accuracy" in text and result.agrees(1.0)

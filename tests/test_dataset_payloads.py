"""A graph data set whose processed file is a payload is refused, by the API and by seed 004's script.

Every planted payload leaves a marker file when it runs; each case checks that none was created, and an
opt-in case shows the payload really runs without the guard, so the tests can fail.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import torch
from planted import Payload

from graphprof.errors import UnsafeLoadError


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

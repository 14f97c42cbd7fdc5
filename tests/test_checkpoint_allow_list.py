"""torch's weights_only allow-list after a YOLO checkpoint's load and profile: as found (checked in a fresh process)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

# ---- torch's weights_only allow-list after a YOLO checkpoint (item 13) -----------------------------------
_ALLOW_LIST_PROBE = """
import sys, torch
allowed = torch.serialization.get_safe_globals
fresh = list(allowed())
import torchvision, torch._dynamo  # torch's own import-time registrations (DTensor, DeviceMesh, _DimRange)
import graphprof
from graphprof.models.family import Request
from graphprof.models.yolo import load_checkpoint
imported = [g for g in allowed() if g not in fresh]
load_checkpoint(sys.argv[1], Request(input_shape=None, batch_size=None, device=torch.device("cpu")))
loaded = [g for g in allowed() if g not in fresh and g not in imported]
graphprof.profile_model(sys.argv[1])
profiled = [g for g in allowed() if g not in fresh and g not in imported]
print(sorted({getattr(g, "__module__", "?").split(".")[0] for g in imported}), len(loaded), len(profiled))
"""


@pytest.mark.slow  # builds yolov8n and profiles it in a fresh process, about 15 s
def test_a_yolo_checkpoint_leaves_torchs_allow_list_as_found(tmp_path: Path) -> None:
    """The 73 -> 83 of the report: torchvision's first import loads torch.distributed.tensor and
    torch._dynamo, which register their own classes (DTensor, DeviceMesh...) for the process's life, as
    torch does for every user; the checkpoint's load and the profile add nothing of their own."""
    import subprocess

    from graphprof.models import resolve_model

    model = resolve_model("yolov8n").model.half()
    path = tmp_path / "tiny_yolo.pt"
    torch.save({"model": model, "train_args": {"imgsz": 64}}, path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "YOLO_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", _ALLOW_LIST_PROBE, str(path)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[-2] == "['torch'] 0 0"

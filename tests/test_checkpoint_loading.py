"""A YOLO checkpoint is loaded as given, and torch's weights_only allow-list is left as found."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

# ---- the checkpoint loader loads the exact file, and leaves torch's allow-list alone (point 2) -------


@pytest.mark.slow  # builds yolov8n, about 3 s
def test_a_yolov5n_named_checkpoint_is_loaded_as_given_and_the_allow_list_restored(tmp_path: Path) -> None:
    from graphprof.models import resolve_model

    model = resolve_model("yolov8n").model.half()
    path = tmp_path / "yolov5n.pt"  # ultralytics' own loader would look for yolov5nu.pt (and download it)
    torch.save({"epoch": -1, "model": None, "ema": model, "updates": 0, "train_args": {"imgsz": 64}}, path)
    saved = list(torch.serialization.get_safe_globals())
    torch.serialization.clear_safe_globals()  # as a fresh process has it: what the load adds would show
    try:
        resolved = resolve_model(str(path))
        assert resolved.family == "yolo" and resolved.args[0].shape == (1, 3, 64, 64)
        assert "yolov5n.pt" in " ".join(resolved.notes) or resolved.name.startswith("yolov5n")
        assert torch.serialization.get_safe_globals() == []
    finally:
        torch.serialization.add_safe_globals(saved)

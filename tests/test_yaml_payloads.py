"""A YOLO yaml whose fields would run code: refused unless the user opts in.

Every planted payload leaves a marker file when it runs; each case checks that none was created, and an
opt-in case shows the payload really runs without the guard, so the tests can fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import graphprof
from graphprof.errors import UnsafeLoadError
from graphprof.models import trust, yolo

WHOLE_MODEL_LAYER = """nc: 10
backbone:
  - [-1, 1, Conv, [16, 3, 2]]
  - [-1, 1, ClassificationModel, [{{nc: 10, channels: 16, activation: '__import__("os").system("touch {marker}") or nn.SiLU()', backbone: [[-1, 1, Conv, [16, 3, 2]]], head: [[-1, 1, Classify, [10]]]}}]]
head:
  - [0, 1, Classify, [nc]]
"""


def _plant(tmp_path: Path, name: str = "tiny-cls.yaml") -> tuple[Path, Path]:
    marker = tmp_path / "PWNED"
    path = tmp_path / name
    path.write_text(WHOLE_MODEL_LAYER.format(marker=marker))
    return path, marker


def test_a_whole_model_as_a_layer_is_refused(tmp_path: Path) -> None:
    path, marker = _plant(tmp_path)
    with pytest.raises(UnsafeLoadError, match="whole model .ClassificationModel. used as a layer"):
        graphprof.profile_model(str(path), input_shape=(1, 3, 64, 64))
    assert not marker.exists()


def test_the_build_itself_is_restricted_when_the_check_misses_a_payload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ultralytics' own restricted construction stops the nested activation even with graphprof's check off."""
    path, marker = _plant(tmp_path)
    monkeypatch.setattr(yolo, "check_yolo_yaml", lambda *a, **k: None)
    with pytest.raises(graphprof.GraphprofError):
        graphprof.profile_model(str(path), input_shape=(1, 3, 64, 64))
    assert not marker.exists()


@pytest.mark.slow
def test_the_opt_in_does_run_the_nested_payload(tmp_path: Path) -> None:
    """Without the restriction (the user's --allow-unsafe-load), ultralytics evaluates the nested activation."""
    path, marker = _plant(tmp_path)
    try:
        graphprof.profile_model(str(path), input_shape=(1, 3, 64, 64), allow_unsafe_load=True)
    except Exception:  # noqa: S110 - the model may not build; the payload has run by then
        pass
    assert marker.exists()


def test_a_bare_packaged_name_is_not_shadowed_by_a_local_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, marker = _plant(tmp_path, "yolov8n-cls.yaml")
    monkeypatch.chdir(tmp_path)
    arch = yolo.find_yolo_architecture("yolov8n-cls.yaml")
    assert arch is not None and arch.path != Path("yolov8n-cls.yaml") and "ultralytics" in str(arch.path)
    with pytest.raises(UnsafeLoadError):  # with a folder, it is the user's own file (and refused)
        graphprof.profile_model(f".{Path('/')}{path.name}", input_shape=(1, 3, 64, 64))
    assert not marker.exists()


def test_restricted_build_puts_the_switch_back() -> None:
    tasks = yolo._import_tasks()
    local = tasks._SafeLoad._local
    before = getattr(local, "active", False)
    with trust.restricted_build(tasks):
        assert local.active is True
    assert getattr(local, "active", False) == before

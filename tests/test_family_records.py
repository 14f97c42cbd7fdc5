"""One record per model family (issue 29): the families' traits live in their own modules, read from there.

* no module outside ``graphprof/models/`` holds a set, dict, list or tuple literal of family names;
* the records say what the old tables said (meta device, warm-up, Dynamo skips, libraries, sweep axes);
* a toy family is a module with its records plus one entry in the registry's tuple: resolving, listing,
  spec_family, the meta-device choice and the sweep checks all follow from the record.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import graphprof
from graphprof.models import registry
from graphprof.models.base import ModelInfo, ResolvedModel
from graphprof.models.family import Family, Request, Source

ROOT = Path(graphprof.__file__).parent


def _family_names() -> set[str]:
    return {*registry.FAMILIES, "custom"}


def _literal_strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Dict):
        items: Sequence[ast.AST | None] = node.keys
    elif isinstance(node, (ast.Set, ast.List, ast.Tuple)):
        items = node.elts
    else:
        return []
    return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]


def test_no_family_table_outside_models() -> None:
    names = _family_names()
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.is_relative_to(ROOT / "models"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            hits = sorted(set(_literal_strings(node)) & names)
            if len(hits) >= 2:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {hits}")  # type: ignore[attr-defined]
    assert not found, "family tables outside graphprof/models/:\n" + "\n".join(found)


def test_no_family_comparison_outside_models() -> None:
    """``family == "hf"`` is a one-entry table: outside models/ a family is asked for its record."""
    names = _family_names() - {"custom"}
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.is_relative_to(ROOT / "models"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                consts = [c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
                if any(c in names for c in consts):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, found


def test_records_say_what_the_tables_said() -> None:
    real = {name for name, f in registry.FAMILIES.items() if f.needs_real_values}
    assert real == {"detection", "yolo", "pyg"}
    assert {n for n, f in registry.FAMILIES.items() if f.dynamo_skip} == {"detection", "hf", "yolo", "timm", "optical_flow"}
    assert {n for n, f in registry.FAMILIES.items() if f.no_eager_trial} == {"pyg"}
    # no family needs a real forward before its dry run any more: YOLO's anchors are built by the dry run
    # itself (and put back by preserved_state), with the same counts
    assert {n for n, f in registry.FAMILIES.items() if f.warm_up} == set()
    images = {n for n, f in registry.FAMILIES.items() if f.image_input}
    assert images == {"classification", "detection", "segmentation", "video", "optical_flow", "quantized", "yolo", "timm"}
    assert registry.library_family("transformers.models.llama.modeling_llama") == "hf"
    assert registry.library_family("torchvision.models.detection.faster_rcnn") == "detection"
    assert registry.library_family("torchvision.models.resnet") is None
    assert registry.family_traits(None) == Family("custom") and registry.family_traits("custom") == Family("custom")


def test_torchvision_families_match_its_modules() -> None:
    from graphprof.models import torchvision_zoo

    assert {f.name for f in torchvision_zoo.FAMILIES} == {name for name, _ in torchvision_zoo._FAMILY_MODULES}
    assert set(torchvision_zoo.torchvision_families().values()) <= {f.name for f in torchvision_zoo.FAMILIES}


# ---- a toy family: its own records, one entry in the registry's tuple ----------------------------------

TOY = Family("toy", needs_real_values=True, warm_up="toy models count their calls", image_input=False)


def _toy_resolve(spec: str, request: Request) -> ResolvedModel:
    model = nn.Linear(4, 2).to(request.device)
    return ResolvedModel(name=spec, family=TOY.name, model=model, args=(torch.ones(1, 4, device=request.device),), kwargs={})


TOY_SOURCE = Source(
    "toy",
    claims=lambda spec: spec.startswith("toy:"),
    resolve=_toy_resolve,
    family_of=lambda spec: TOY.name,
    families=(TOY,),
    list_models=lambda: [ModelInfo("toy:linear", TOY.name, "1x4")],
)


@pytest.fixture
def toy_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two edits a new family makes: its records (above) and one entry in the registry's tuples."""
    sources = (TOY_SOURCE, *registry.SOURCES)
    monkeypatch.setattr(registry, "SOURCES", sources)
    monkeypatch.setattr(registry, "LISTED", (*registry.LISTED, TOY_SOURCE))
    families: dict[str, Any] = {f.name: f for s in sources for f in s.families}
    monkeypatch.setattr(registry, "FAMILIES", families)


@pytest.mark.usefixtures("toy_registered")
def test_a_toy_family_needs_only_its_records() -> None:
    from graphprof.base.choices import SweepAxis
    from graphprof.capture.methods import warm_up_reason
    from graphprof.errors import InvalidInputError
    from graphprof.scaling.axis import check_sweep

    assert registry.spec_family("toy:linear") == "toy"
    assert [m.name for m in registry.list_models("toy")] == ["toy:linear"]
    resolved = registry.resolve_model("toy:linear")
    assert resolved.family == "toy"
    assert warm_up_reason(resolved.model, "toy") == "toy models count their calls"
    with pytest.raises(InvalidInputError, match="no image input"):
        check_sweep("toy:linear", SweepAxis.RESOLUTION, "32,64")
    profile = graphprof.profile_model("toy:linear")
    # needs_real_values: built on the CPU, not on the meta device
    assert profile.family == "toy" and not any("meta device" in note for note in profile.notes)
    assert any("toy models count their calls" in note for note in profile.notes)

"""Renderers: golden reports at a fixed width, the JSON schema, the CSV round trip, the charts.

Golden files live in tests/golden/. After an intentional change of the report, regenerate them with
``GRAPHPROF_UPDATE_GOLDEN=1 pytest tests/test_render.py`` and review the diff.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch.nn.functional as F
from rich.console import Console
from torch import nn

import graphprof
from graphprof.base import atomic
from graphprof.base.limits import format_bytes
from graphprof.cost.result import LayerRow, ModuleRow, UnsupportedOp
from graphprof.cost.roofline import with_roofline
from graphprof.devices.hardware import get_hardware
from graphprof.errors import MissingDependencyError, OutputError
from graphprof.formulas import Cost
from graphprof.render import parse_plot_spec, profile_dict, render_csv, render_json, render_report, render_tree, write_plot
from graphprof.render import plots as plots_module
from graphprof.render.formatting import format_count, format_seconds
from graphprof.render.layers import render_layers, render_top_layers
from graphprof.render.sink import choose_format, write_result
from graphprof.render.tree import auto_depth

GOLDEN = Path(__file__).parent / "golden"
WIDTH = 100
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class Block(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x))) + x


class TinyNet(nn.Module):
    """A small custom model: a stem, two residual blocks, a pooled linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.blocks = nn.Sequential(Block(16), Block(16))
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(x.mean((2, 3))).softmax(-1)


@pytest.fixture(scope="module")
def resnet18():
    return graphprof.profile_model("resnet18", input_shape=(1, 3, 64, 64))


@pytest.fixture(scope="module")
def tiny():
    return graphprof.profile_model(TinyNet(), input_shape=(1, 3, 32, 32), model_name="TinyNet")


def render_text(renderable) -> str:
    console = Console(width=WIDTH, record=True, force_terminal=False, color_system=None, file=io.StringIO())
    console.print(renderable)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("GRAPHPROF_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"{path} is missing: run with GRAPHPROF_UPDATE_GOLDEN=1 to create it"
    expected = path.read_text(encoding="utf-8")
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), str(path), "rendered"))
        pytest.fail(f"report differs from {path.name} (GRAPHPROF_UPDATE_GOLDEN=1 to accept):\n{diff}")


# ---- golden reports --------------------------------------------------------------------------------
def test_golden_resnet18_on_h100(resnet18):
    text = render_text(render_report(with_roofline(resnet18, get_hardware("h100")), show_shapes=True))
    check_golden("resnet18_1x3x64x64_h100.txt", text)


def test_golden_tiny_verbose(tiny):
    check_golden("tinynet_1x3x32x32_verbose.txt", render_text(render_report(tiny, verbose=True)))


@pytest.mark.parametrize("verbose", [False, True])
def test_report_fits_100_columns_and_has_every_section(resnet18, verbose):
    text = render_text(render_report(with_roofline(resnet18, get_hardware("a100")), show_shapes=True, verbose=verbose))
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    for section in ("Hierarchical graph profile", "Model summary", "Operation breakdown", "Bottleneck analysis", "Top 10 layers"):
        assert section in text
    assert ("Per-layer details" in text) is verbose
    assert "Roofline time (lower bound)" in text


def test_without_hardware_the_report_names_the_fixed_threshold(resnet18):
    text = render_text(render_report(resnet18))
    assert "fixed 10 FLOPs/byte" in text and "no hardware given" in text
    assert "Est. time" not in text


def test_depth_folds_the_tree(resnet18):
    depth1 = render_text(render_tree(resnet18, depth=1))
    assert "layer1 " in depth1 and "layer1.0" not in depth1
    assert "folded at depth 1" in depth1
    full = render_text(render_tree(resnet18, depth=10))
    assert "layer4.1.conv2" in full and "full tree" in full


def test_tree_rows_sum_to_the_total(resnet18):
    top = [m for m in resnet18.modules if m.depth == 1]
    root = resnet18.modules[0]
    assert root.path == "" and root.cost.flops == resnet18.total_flops
    # resnet18's only top-level graph node outside a child module is `flatten`, which costs nothing
    assert sum(m.cost.flops for m in top) == resnet18.total_flops


def _huge(profile, n: int = 3000):
    """``profile`` with ``n`` synthetic layers in ``n // 10`` blocks, and two unsupported ops."""
    layers, modules = [], [ModuleRow("", "Huge", 0, 0, Cost(flops=n * 10, bytes_read=n * 4), Cost(), n)]
    for b in range(n // 10):
        modules.append(ModuleRow(f"blocks.{b}", "Block", 2, 0, Cost(flops=100, bytes_read=40), Cost(), 10))
        for i in range(10):
            name = f"blocks.{b}.lin{i}"
            modules.append(ModuleRow(name, "Linear", 3, 0, Cost(flops=10, bytes_read=4), Cost(), 1))
            layers.append(LayerRow(name, name, name, "Linear", 0, ((1, 2),), Cost(flops=10, bytes_read=4), Cost()))
    modules.insert(1, ModuleRow("blocks", "Sequential", 1, 0, Cost(flops=n * 10, bytes_read=n * 4), Cost(), n))
    unsupported = (UnsupportedOp("aten.foo", 3, ("blocks.0.lin0", "blocks.1.lin0")), UnsupportedOp("aten.bar", 1, ()))
    return replace(profile, model_name="huge", layers=tuple(layers), modules=tuple(modules), unsupported=unsupported)


def test_thousands_of_layers_stay_readable(tiny):
    huge = _huge(tiny)
    text = render_text(render_report(huge))
    assert len(text.splitlines()) < 120
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    assert auto_depth(huge.modules) == 1
    assert "folded at depth 1 of 3" in text


def test_footer_lists_unsupported_ops_by_name_and_count(tiny):
    text = " ".join(render_text(render_report(_huge(tiny, 30))).split())  # the footer wraps
    assert "Unsupported ops (2 ops, 4 calls" in text
    assert "aten.foo x3 (in blocks.0.lin0, blocks.1.lin0)" in text and "aten.bar x1" in text
    assert "Unsupported" not in render_text(render_report(tiny))


def test_formatting_helpers():
    assert format_count(11_689_512) == "11.69M"
    assert format_count(999) == "999"
    assert format_bytes(47_466_000) == "47.47 MB"
    assert format_bytes(512) == "512 B"
    assert format_seconds(0.00123) == "1.23 ms"
    assert format_seconds(1.3e-5) == "13.0 us"
    assert format_seconds(None) == "-"


# ---- JSON ---------------------------------------------------------------------------------------------
def test_json_schema(resnet18):
    data = json.loads(render_json(with_roofline(resnet18, get_hardware("h100"))))
    top_types = {
        "schema_version": str, "model": str, "total_flops": int, "total_memory": int, "total_macs": int,
        "total_params": int, "capture_method": str, "input_shapes": list, "dtype": str, "hardware": dict,
        "roofline": dict, "unsupported_ops": list, "versions": dict, "layers": list,
    }  # fmt: skip
    for key, kind in top_types.items():
        assert isinstance(data[key], kind), key
    assert {"graphprof", "torch", "torchvision"} <= set(data["versions"])
    assert data["hardware"]["name"] == "h100"
    layer_types = {
        "name": str, "type": str, "flops": int, "memory": int, "macs": int, "params": int,
        "arithmetic_intensity": (float, type(None)), "bottleneck": str, "output_shape": (list, type(None)),
        "module": (str, type(None)), "estimated_time_s": float,
    }  # fmt: skip
    for layer in data["layers"]:
        for key, kind in layer_types.items():
            assert isinstance(layer[key], kind), (layer["name"], key)
        assert layer["bottleneck"] in ("compute-bound", "memory-bound", "none")
    assert sum(layer["flops"] for layer in data["layers"]) == data["total_flops"] == resnet18.total_flops
    assert sum(layer["memory"] for layer in data["layers"]) == data["total_memory"]
    assert data["roofline"]["estimated_time_s"] == pytest.approx(sum(layer["estimated_time_s"] for layer in data["layers"]))


def test_json_without_hardware_keeps_the_core(tiny):
    data = profile_dict(tiny)
    assert data["hardware"] is None and data["roofline"]["threshold_flops_per_byte"] == 10.0
    core = tiny.to_dict()
    assert {k: v for k, v in data.items() if k not in ("hardware", "roofline", "layers")} == {
        k: v for k, v in core.items() if k != "layers"
    }
    assert "bottleneck" not in core["layers"][0]  # to_dict() stays hardware-free


# ---- CSV ----------------------------------------------------------------------------------------------
def test_csv_round_trip(resnet18):
    on_l4 = with_roofline(resnet18, get_hardware("l4"))
    rows = list(csv.DictReader(io.StringIO(render_csv(on_l4))))
    assert len(rows) == len(resnet18.layers)
    for row, layer, verdict in zip(rows, resnet18.layers, on_l4.roofline.layers, strict=True):
        cost = layer.cost
        assert row["name"] == layer.name and row["type"] == layer.type
        assert (int(row["params"]), int(row["macs"]), int(row["flops"])) == (layer.params, cost.macs, cost.flops)
        assert int(row["memory"]) == cost.bytes_moved
        ai = cost.arithmetic_intensity
        assert (float(row["arithmetic_intensity"]) if row["arithmetic_intensity"] else None) == ai
        assert row["bottleneck"] == verdict.bound.value
        assert float(row["estimated_time_s"]) == verdict.seconds
    assert sum(int(row["flops"]) for row in rows) == resnet18.total_flops


# ---- files ----------------------------------------------------------------------------------------------
def test_format_follows_suffix_or_option(tmp_path, tiny):
    assert choose_format("p.JSON", "profile") == "json" and choose_format("p.txt", "profile", "csv") == "csv"
    with pytest.raises(OutputError, match="suffix"):
        choose_format(tmp_path / "p.txt", "profile")
    out = write_result(tiny, tmp_path / "p.csv")
    assert out.read_text().startswith("name,type,module,")


def test_write_is_atomic(tmp_path, tiny, monkeypatch):
    target = tmp_path / "p.json"

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", broken_replace)
    with pytest.raises(OutputError, match="No space left"):
        write_result(tiny, target)
    assert list(tmp_path.iterdir()) == []  # neither the target nor a temporary file
    with pytest.raises(OutputError, match="does not exist"):
        write_result(tiny, tmp_path / "missing" / "p.json")


# ---- charts -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["roofline.png", "layers.png"])
@pytest.mark.parametrize("device", [None, "h100"])
def test_plots_are_real_pngs(tmp_path, resnet18, spec, device):
    path = write_plot(with_roofline(resnet18, get_hardware(device) if device else None), tmp_path / spec)
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000


def test_plot_spec():
    assert parse_plot_spec("out/roofline.png") == ("roofline", Path("out/roofline.png"))
    assert parse_plot_spec("layers=a.svg") == ("layers", Path("a.svg"))
    with pytest.raises(OutputError, match="which chart"):
        parse_plot_spec("chart.png")
    with pytest.raises(OutputError, match="must end in"):
        parse_plot_spec("roofline.gif")


def test_missing_matplotlib_is_a_clear_error(tmp_path, tiny, monkeypatch):
    for module in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingDependencyError, match="pip install"):
        write_plot(tiny, tmp_path / "roofline.png")
    assert not (tmp_path / "roofline.png").exists()
    monkeypatch.setattr(plots_module.importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(MissingDependencyError):
        plots_module.require_matplotlib()


def test_names_in_full_when_the_table_fits():
    class Deep(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder_with_a_rather_long_module_name = nn.ModuleList(nn.Sequential(nn.Linear(8, 8), nn.ReLU()) for _ in range(2))

        def forward(self, x):
            for block in self.encoder_with_a_rather_long_module_name:
                x = block(x)
            return x

    profile = graphprof.profile_model(Deep(), input_shape=(1, 8))
    names = [f"encoder_with_a_rather_long_module_name.{i}.0" for i in range(2)]

    def names_drawn(fitted, width: int) -> list[str]:
        console = Console(width=width, color_system=None, file=io.StringIO())
        table = fitted._table(console, console.options)
        column = next(c for c in table.columns if c.header in ("Layer", "Module"))
        return [str(cell).strip() for cell in column._cells]

    for render in (render_top_layers, render_layers, lambda p: render_tree(p, depth=3)):
        wide = names_drawn(render(profile), 200)
        assert set(names) <= set(wide)  # room enough: nothing shortened
        narrow = [n for n in names_drawn(render(profile), 80) if n.startswith("encoder")]
        assert not set(names) & set(narrow) and sum("..." in n for n in narrow) >= 4  # shortened: no room,
        assert len(set(narrow)) == len(narrow)  # and still one distinct name per row

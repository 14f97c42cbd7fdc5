"""Every fact about a device on its ``Hardware`` record (issue 29): memory and CUDA-name matching are read
from :mod:`graphprof.devices.hardware` by the partition planner, the generation estimate and the calibration, and
the ``local`` preset is read below ``hardware.py`` (which no longer imports the calibration package)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import graphprof
from graphprof.devices.hardware import HARDWARE, get_hardware, host_memory_bytes, match_hardware

ROOT = Path(graphprof.__file__).parent


def test_memory_figures_are_the_datasheets() -> None:
    gb = {name: h.memory_gb for name, h in HARDWARE.items()}
    assert gb == {
        "a100": 80.0, "h100": 80.0, "h100-pcie": 80.0, "h200": 141.0, "b200": 180.0, "h20": 96.0, "mi300x": 192.0,
        "mi325x": 256.0, "mi355x": 288.0, "l4": 24.0, "t4": 16.0, "rtx4090": 24.0,
        "jetson-orin": 64.0, "apple-m1-max": 64.0, "desktop-cpu": 32.0,
    }  # fmt: skip
    assert get_hardware("h200").memory_bytes == 141 * 10**9
    assert [h.name for h in HARDWARE.values() if h.memory_assumed] == ["desktop-cpu"]


@pytest.mark.parametrize(
    ("device_name", "preset"),
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA H20", "h20"),
        ("NVIDIA B200", "b200"),
        ("AMD Instinct MI300X", "mi300x"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA L4", "l4"),
        ("Tesla T4", "t4"),
        ("NVIDIA GeForce GTX 1080", None),
    ],
)
def test_a_cuda_name_matches_its_preset(device_name: str, preset: str | None) -> None:
    matched = match_hardware(device_name)
    assert (matched.name if matched else None) == preset


def test_the_consumers_read_the_record(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no local calibration
    from graphprof.calibrate.preset import measure_default_hardware
    from graphprof.generate.fit import device_memory
    from graphprof.partition.devices import parse_devices

    assert parse_devices("h200:1")[0].memory_bytes == 141 * 10**9
    assert parse_devices("desktop-cpu:1")[0].memory_bytes == 32 * 10**9
    assert device_memory(get_hardware("h100")) == (80 * 10**9, "NVIDIA H100 SXM5 80GB datasheet")
    host = host_memory_bytes()
    assert device_memory(get_hardware("desktop-cpu")) == (host, "this machine's physical memory")
    hardware, note = measure_default_hardware("cuda", "NVIDIA H100 80GB HBM3")
    assert hardware is not None and hardware.name == "h100" and "the h100 preset, matched to" in note


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_hardware_and_predict_do_not_import_calibrate() -> None:
    for name in ("devices/hardware.py", "devices/local.py", "devices/predict.py"):
        assert not {m for m in _imports(ROOT / name) if m.startswith("graphprof.calibrate")}, name


def test_no_device_table_outside_hardware() -> None:
    """No dict keyed by preset names, no tuple of preset names, outside hardware.py."""
    presets = set(HARDWARE)
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.name == "hardware.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            items = node.keys if isinstance(node, ast.Dict) else node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else []
            hits = {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)} & presets
            if len(hits) >= 2:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {sorted(hits)}")  # type: ignore[attr-defined]
    assert not found, found


def test_every_name_a_device_is_accepted_by_is_listed() -> None:
    """``partition --devices orin-agx:2`` worked while ``graphprof hardware`` listed only ``jetson-orin``."""
    from typer.testing import CliRunner

    from graphprof.devices.hardware import get_hardware, hardware_aliases
    from graphprof_cli.main import app

    assert "orin-agx" in hardware_aliases("jetson-orin") and get_hardware("orin-agx").name == "jetson-orin"
    listed = CliRunner().invoke(app, ["hardware"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0 and "orin-agx" in listed.output, listed.output


def test_each_preset_says_what_prices_its_kernels() -> None:
    from typer.testing import CliRunner

    from graphprof_cli.main import app

    def model(name: str) -> str:
        shown = CliRunner().invoke(app, ["hardware", name], env={"COLUMNS": "400"})
        assert shown.exit_code == 0, shown.output
        return next(line for line in shown.output.splitlines() if "kernel model" in line)

    # the H100 and H200 ship tables measured on the device (H200: 286 opbench kernels, 279 kept after the floor)
    assert "measured on the device" in model("h200") and "279 kernels" in model("h200") and "H200" in model("h200")
    assert "measured on the device" in model("h100") and "H100" in model("h100")
    assert "derived from its datasheet" in model("a100") and "no table measured on a100" in model("a100")
    assert "roofline" in model("desktop-cpu")

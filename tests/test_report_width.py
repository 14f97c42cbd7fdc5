"""Every command's report folds cleanly from 60 columns up: no number parted from its unit, no name or
shape cut across two lines (:mod:`graphprof.render.fit`).

A report drawn at 400 columns gives the tokens; the same report at 60, 80, 100 and 160 columns may wrap
at spaces and shorten a name with an ellipsis (its pieces are parts of a wide token), nothing else. A byte
or time unit always sits on the line of its number.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from rich.console import Console
from rich.text import Text
from typer.testing import CliRunner

import graphprof
from graphprof.render import render_report
from graphprof.render.fit import OMITTED_NOTE, Phrases, ReportTable, phrases, shorten_middle
from graphprof_cli.main import app

WIDTHS = (60, 80, 100, 160)
WIDE = 400
_UNITS = {"B", "kB", "MB", "GB", "TB", "PB", "ms", "us", "ns"}
_NUMBER = re.compile(r"^[(~≈<>+\-−]*\d[\d.,]*[KMGT]?$")


def _norm(token: str) -> str:
    return token.rstrip(",;:")


def split_tokens(narrow: str, wide: str) -> list[str]:
    """What of ``narrow`` is a cut token of ``wide``: a token that is none of wide's (an ellipsis' pieces may
    be parts of one), or a unit alone at the start of a line or after no number."""
    wide = wide + " " + OMITTED_NOTE
    tokens = {_norm(t) for t in wide.split()} | {_norm(t) for t in wide.replace("...", "…").split()}
    joined = " ".join(tokens)
    bad = []
    for raw in narrow.replace("...", "…").split():
        token = _norm(raw)
        if token in tokens or all(0x2500 <= ord(c) <= 0x257F for c in token):  # a rule of the box
            continue
        if "…" in token and all(piece.strip(".") in joined for piece in token.split("…") if piece):
            continue
        bad.append(token)
    for line in narrow.splitlines():
        words = line.split()
        for i, word in enumerate(words):
            if _norm(word).rstrip(")") in _UNITS and (i == 0 or not _NUMBER.match(words[i - 1].lstrip("("))):
                bad.append(f"unit alone: {line.strip()!r}")
    return bad


def _text(renderable: object, width: int) -> str:
    console = Console(width=width, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


# ---- the checker and the pieces -------------------------------------------------------------------
def test_checker_finds_the_cuts_of_the_old_report() -> None:
    """The report of issue 54, folded by Rich at 80 columns: each cut is found."""
    wide = "resnet18 ResNet 11.69M 1x1000 118.59 MB\n bn1 BatchNorm2d 128 1x64x112x112 6.42 MB"
    narrow = "resnet18 ResNet 11.69M 1x1000 118.59\n MB\n bn1 BatchNor 128 1x64x112x 6.42 MB\n m2d 112"
    assert set(split_tokens(narrow, wide)) == {"unit alone: 'MB'", "BatchNor", "1x64x112x", "m2d", "112"}
    assert split_tokens(wide, wide) == []


def test_phrases_keep_a_number_with_its_unit() -> None:
    assert phrases("118.59 MB (read 84.03 MB, written 34.57 MB)") == ["118.59 MB", "(read", "84.03 MB,", "written", "34.57 MB)"]
    assert shorten_middle(Text("    layer1.0.conv1"), 12).plain == "    la…conv1"
    lines = _text(Phrases("moved 118.59 MB (read 84.03 MB, written 34.57 MB)"), 20).splitlines()
    assert [line.rstrip() for line in lines] == ["moved 118.59 MB", "(read 84.03 MB,", "written 34.57 MB)"]


def test_a_table_too_wide_leaves_out_its_optional_columns_and_says_so() -> None:
    table = ReportTable(optional=("Type",))
    table.add_column("Module", no_wrap=True, overflow="ellipsis")
    table.add_column("Type", no_wrap=True, overflow="ellipsis")
    for header in ("FLOPs", "Memory", "Time"):
        table.add_column(header, justify="right")
    table.add_row("encoder.layers.encoder_layer_11.mlp", "MLPBlock", "236.03M", "118.59 MB", "1.23 ms")
    text = _text(table, 56)
    assert "not shown at this width" in text and "Type" in text and "MLPBlock" not in text
    assert "118.59 MB" in text and "236.03M" in text and "1.23 ms" in text
    assert split_tokens(text, _text(table, WIDE)) == []


# ---- the main report of the models the issue names -------------------------------------------------
@pytest.mark.parametrize("model", ["resnet18", "vit_b_16", "yolov8n", "hf:llama"])
def test_main_report_folds_cleanly(model: str) -> None:
    if model == "yolov8n":
        pytest.importorskip("ultralytics")
    profile = graphprof.profile_model(model)
    for shapes in (True, False):
        report = render_report(profile, show_shapes=shapes)
        wide = _text(report, WIDE)
        for width in WIDTHS:
            assert split_tokens(_text(report, width), wide) == [], (model, shapes, width)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["resnet18", "vit_b_16", "yolov8n", "hf:llama"])
def test_columns_80_and_60_of_the_command_line(model: str) -> None:
    """What issue 54 asks in its own words: ``COLUMNS=80`` and ``COLUMNS=60 graphprof --model M --showshape``."""
    if model == "yolov8n":
        pytest.importorskip("ultralytics")
    outputs = {}
    for width in (WIDE, 80, 60):
        run = subprocess.run(
            [sys.executable, "-m", "graphprof_cli.main", "--model", model, "--showshape"],
            capture_output=True, text=True, env={**__import__("os").environ, "COLUMNS": str(width)}, timeout=300,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        outputs[width] = run.stdout
    for width in (80, 60):
        assert split_tokens(outputs[width], outputs[WIDE]) == [], width


# ---- every command's report ---------------------------------------------------------------------
COMMANDS = {
    "profile": ["--model", "resnet18", "--input-shape", "1,3,64,64", "--showshape", "--hardware", "h100"],
    "train": ["--model", "resnet18", "--input-shape", "1,3,64,64", "--mode", "train", "--verbose"],
    "compare": ["compare", "resnet18", "mobilenet_v3_small", "--hardware", "l4"],
    "sweep": ["sweep", "--model", "resnet18", "--batch", "1:4:x2", "--hardware", "h100"],
    "hardware": ["hardware"],
    "fits": ["fits", "--model", "resnet18", "--hardware", "l4"],
    "shard": ["shard", "fsdp:2", "--model", "resnet18", "--input-shape", "2,3,64,64"],
    "partition": ["partition", "--model", "resnet18", "--devices", "l4:1,t4:1"],
    "graph-estimate": ["graph-estimate", "--model", "pyg:gcn"],
}


@pytest.mark.parametrize(
    "command", [pytest.param(c, marks=pytest.mark.slow) if c in ("graph-estimate", "shard") else c for c in sorted(COMMANDS)]
)
def test_every_command_folds_cleanly(command: str) -> None:
    if command == "graph-estimate":
        pytest.importorskip("torch_geometric")
    runner = CliRunner()
    outputs = {}
    for width in (WIDE, *WIDTHS):
        result = runner.invoke(app, COMMANDS[command], env={"COLUMNS": str(width)})
        assert result.exit_code == 0, result.output[-2000:]
        outputs[width] = "\n".join(line for line in result.output.splitlines() if "planned in" not in line)  # a timing
    for width in WIDTHS:
        assert split_tokens(outputs[width], outputs[WIDE]) == [], (command, width)

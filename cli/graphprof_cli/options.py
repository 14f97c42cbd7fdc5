"""The options graphprof's commands share, declared once; each command takes the ones it needs.

The choices are :mod:`graphprof.base.choices` (torch-free), so ``--help`` builds without importing torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from graphprof.base.choices import Capture, Mode, Optimizer, OutputFormat, WarmUp
from graphprof_cli.common import MIN_WIDTH, flag


def file_path(text: str) -> Path:
    """A file option's value as typed: ``out.json/`` names a folder, and ``Path`` would drop the slash and
    write ``out.json`` after the work; refused while parsing (exit 2)."""
    if len(text) > 1 and text.endswith(("/", "\\")):
        raise typer.BadParameter(f"{text!r} ends in a slash: it names a folder; give the file's name")
    return Path(text)


__all__ = [
    "file_path",
    "ModelOption",
    "ModelRequired",
    "InputShapeOption",
    "BatchSizeOption",
    "DtypeOption",
    "ModeOption",
    "CaptureOption",
    "HardwareOption",
    "PeakOption",
    "BandwidthOption",
    "OutputOption",
    "FormatOption",
    "AllowUnsafeOption",
    "DebugOption",
    "WidthOption",
    "DeviceOption",
    "IterationsOption",
    "WarmupOption",
    "OptimizerOption",
    "MeasureOption",
    "HtmlOption",
    "WarmUpOption",
    "ExportOnnxOption",
    "MemoryBudgetOption",
]

ModelOption = Annotated[
    str | None,
    typer.Option("--model", "-m", help="torchvision name, YOLO yaml/.pt, hf:llama, timm:NAME, program.pt2, or package.module:factory."),
]
ModelRequired = Annotated[
    str, typer.Option("--model", "-m", help="torchvision name, YOLO yaml/.pt, hf:llama, timm:NAME, program.pt2, or package.module:factory.")
]
InputShapeOption = Annotated[str | None, typer.Option("--input-shape", help="Input shape: 1 3 384 384 or 1,3,384,384.")]
BatchSizeOption = Annotated[int | None, typer.Option("--batch-size", "-b", help="Override the batch dimension.")]
DtypeOption = Annotated[str | None, typer.Option("--dtype", help="Count as this dtype: float32, float16, bfloat16.")]
ModeOption = Annotated[Mode, typer.Option("--mode", help="eval: inference; train: forward + backward.")]
CaptureOption = Annotated[
    Capture, typer.Option("--capture", help="Graph capture: auto (fx, then dynamo, then eager), fx, dynamo or eager.")
]
HardwareOption = Annotated[
    str | None,
    typer.Option("--hardware", help="Device preset for the roofline (see `graphprof hardware`; local after `graphprof calibrate`)."),
]
PeakOption = Annotated[float | None, typer.Option("--peak-tflops", help="Custom device: peak TFLOP/s (or override the preset's).")]
BandwidthOption = Annotated[
    float | None, typer.Option("--bandwidth-gbs", help="Custom device: memory bandwidth in GB/s (or override the preset's).")
]
OutputOption = Annotated[
    Path | None,
    typer.Option("--output", "-o", parser=file_path, metavar="<path>", help="Also write a .json or .csv file; - writes it to stdout."),
]
FormatOption = Annotated[OutputFormat | None, typer.Option("--format", help="Format of --output (default: from its suffix).")]
AllowUnsafeOption = Annotated[
    bool,
    flag(
        "--allow-unsafe-load",
        help="Let a model file run code as it loads: unpickle a .pt/.pth with weights_only=False (any Python it "
        "names runs) and let ultralytics eval a YOLO yaml's activation/layer fields. Only for files you trust.",
    ),
]
DebugOption = Annotated[bool, flag("--debug", help="Show tracebacks.")]
WidthOption = Annotated[
    int | None, typer.Option("--width", min=MIN_WIDTH, help="Report width in columns (default: the terminal's, else COLUMNS, else 160).")
]
MeasureOption = Annotated[bool, flag("--measure", help="Also run the model for real: times, memory, per-layer measured vs estimated.")]
DeviceOption = Annotated[str | None, typer.Option("--device", help="With --measure: cpu or cuda (default: cuda when present).")]
IterationsOption = Annotated[
    int, typer.Option("--iters", help="With --measure: at most this many timed iterations (stops early once stable).")
]


def warmup_count(text: str) -> int:
    """``--warmup N``: a count of iterations; a capture policy given here is pointed to ``--capture-warmup``."""
    try:
        count = int(text)
    except ValueError:
        hint = " (the warm-up before the capture is --capture-warmup always|auto|never)" if text in {w.value for w in WarmUp} else ""
        raise typer.BadParameter(f"{text!r} is not a count of warm-up iterations{hint}") from None
    if count < 0:
        raise typer.BadParameter(f"{count} warm-up iterations: give 0 or more")
    return count


WarmupOption = Annotated[
    int, typer.Option("--warmup", parser=warmup_count, metavar="<int>", help="With --measure: warm-up iterations, reported apart.")
]
OptimizerOption = Annotated[
    Optimizer, typer.Option("--optimizer", help="With --measure --mode train: the optimizer whose state the measured step holds.")
]
HtmlOption = Annotated[
    Path | None,
    typer.Option(
        "--html", parser=file_path, metavar="<path>", help="Also write one self-contained HTML page (opens offline; needs plotly)."
    ),
]
RedactOption = Annotated[
    bool,
    flag(
        "--redact",
        help="Leave the host out of the JSON and HTML written: host name, home, working folder, install paths, CPU and platform.",
    ),
]
WarmUpOption = Annotated[
    WarmUp,
    typer.Option(
        "--capture-warmup",
        help="One real forward before the capture: auto (only a model that initialises lazily), always (seed 001's), never.",
    ),
]
ExportOnnxOption = Annotated[
    Path | None,
    typer.Option(
        "--export-onnx",
        help="Also write the model to this ONNX file (torch.onnx; the onnx extra), its op counts checked against the profile.",
    ),
]
MemoryBudgetOption = Annotated[
    str | None, typer.Option("--memory-budget", help="Choose which modules to recompute (activation checkpointing) to fit this, e.g. 40GB.")
]

"""``graphprof calibrate``: measure this machine and write the ``local`` preset (a progress bar meanwhile).

Parses options, calls :func:`graphprof.calibrate.calibrate`, renders its summary; nothing is computed here.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from graphprof_cli.common import console as make_console
from graphprof_cli.common import run_guarded
from graphprof_cli.options import file_path


def _log_progress() -> Any:
    """Progress as plain lines on stderr (``calibrating: 3/40 op grid: mm 512``), at most one every 2 seconds."""
    last = [-math.inf]

    def progress(done: int, total: int, what: str) -> None:
        now = time.monotonic()
        if now - last[0] >= 2.0 or done >= total:
            last[0] = now
            sys.stderr.write(f"calibrating: {done}/{total} {what}\n")
            sys.stderr.flush()

    return progress


def _summary(preset: Any) -> list[str]:
    hw, cal, dev = preset.hardware, preset.calibration, preset.device
    peaks = ", ".join(f"{dtype} {tf * 1e3:,.1f} GFLOP/s" for dtype, tf in hw.peak_tflops.items())
    acc = cal.accuracy
    memory = f", {cal.memory.far_gbs:,.1f} GB/s beyond {cal.memory.cache_bytes / 2**20:,.1f} MiB" if cal.memory else ""
    return [
        f"calibrated {hw.label} in {dev.get('seconds')} s (load {dev.get('loadavg_before')} -> {dev.get('loadavg_after')})",
        f"  peak     {peaks}",
        f"  memory   {hw.bandwidth_gbs:,.1f} GB/s at best{memory}",
        f"  floors   {cal.host_per_kernel_s * 1e6:.1f} us per eager op in a module, {cal.launch_s * 1e6:.1f} us bare, "
        f"{cal.view_s * 1e6:.1f} us per view; host/kernel overlap {cal.overlap:.1f}",
        f"  fit      median |error| {acc['median_abs_error']:.0%} on its {acc['records']} records (worst {acc['worst']})",
        *_op_model_lines(cal.op_model),
        *_probe_lines(dev.get("probes_s")),
        f"wrote {preset.path}; use it with --hardware local (and --measure compares against it)",
    ]


def _probe_lines(probes: Any) -> list[str]:
    if not probes:
        return []
    times = " / ".join(f"{p * 1e3:.3f}" for p in probes)
    return [
        f"  speed    probe {times} ms (start, after the grid, end): a prediction times it again and scales to the speed "
        "then only where it reads beyond every speed this calibration met"
    ]


def _op_model_lines(model: Any) -> list[str]:
    if model is None:
        return []
    held = model.accuracy.get("held_out_models", {})
    errors = ", ".join(f"{name} {math.expm1(e):+.0%}" for name, e in held.items())
    band = (
        ""
        if model.model_q is None
        else f"; 80% band of a whole model {math.expm1(-model.model_q[1]):+.0%} to {math.expm1(-model.model_q[0]):+.0%}"
    )
    lines = [
        f"  models   {len(model.kinds)} op kinds from {model.counts.get('calibration', 0):,} timed ops{band}",
        f"  held out (whole plain forward predicted by a fit that left the model out): {errors or '-'}",
    ]
    summary = model.accuracy.get("held_out_summary")
    if summary:
        lines.append(
            f"           median |error| {summary['median_abs_error']:.0%}, signed median {summary['signed_median_error']:+.0%}, "
            f"within +-10% {summary['within_10_percent']} of {summary['models']}, worst {summary['worst_error']:+.0%}"
        )
    share = model.accuracy.get("outside_share")
    if share is not None:
        lines.append(
            f"  host     {share:.1%} of a plain forward outside its aten calls (median of the sample models): shared over the calls by their time"
        )
    if model.first_touch is not None:
        lines.append(
            f"  touch    outputs of {model.first_touch.limit_bytes / 2**20:,.0f} MiB and more come from fresh pages: "
            f"{model.first_touch.per_byte_s * 1e9:.3f} ms per MB on first touch, added to their op; in the sample models' "
            f"forwards whose live activations peak at {model.first_touch.trim_peak_bytes / 1e6:,.0f} MB and more (the heap then "
            f"gives pages back) {model.first_touch.share_below:.1%} of the bytes of outputs from "
            f"{model.first_touch.min_bytes / 2**20:,.0f} MiB up faulted too, priced alike; below that peak, none"
        )
    cost = model.accuracy.get("fault_cost") or {}
    if cost.get("forward_per_byte_s") is not None:
        lines.append(
            f"           a faulted byte cost {cost['forward_per_byte_s'] * 1e9:.3f} ns inside the sample models' forwards (plain "
            f"against a kept heap), {cost['ladder_per_byte_s'] * 1e9:.3f} ns in a lone loop: "
            + ("the forwards' figure is priced" if cost["used"] else "the loop's is priced (the forwards' lies out of range)")
        )
    fresh = model.accuracy.get("fresh_processes")
    if fresh:
        lines.append(
            f"  fresh    {fresh['count']} fresh processes timed the sample models, their probe's median {fresh['probe_s'] * 1e3:.3f} ms "
            f"(the table's speed); their forwards followed the probe with an elasticity of {fresh['elasticity']:.2f}"
        )
    return lines


def calibrate_command(
    device: Annotated[str, typer.Option("--device", help="cpu, or cuda (the current GPU).")] = "cpu",
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", parser=file_path, metavar="<path>", help="Where to write the preset (default: ~/.cache/graphprof/local.json)."
        ),
    ] = None,
    threads: Annotated[
        int | None, typer.Option("--threads", min=1, help="torch threads while measuring (default: torch's own); recorded.")
    ] = None,
    quick: Annotated[bool, typer.Option("--quick", help="A one-minute calibration: fewer zoo models, batch 1 only.")] = False,
) -> None:
    """Measure this machine (matrix products, convolutions, bandwidth, per-op floor) and write the `local` preset."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from graphprof.calibrate import calibrate
    from graphprof_cli.output import absolute

    def checked() -> Path | None:  # a folder given as the file, or a missing folder, fails now, not after a minute
        from graphprof.base.atomic import check_path

        if output is not None:
            check_path(output)
        return absolute(output)

    output = run_guarded(checked)
    console = make_console(None)
    if not sys.stderr.isatty():  # a log, not a terminal: one plain line per step on stderr, never a silent quarter hour
        preset = run_guarded(lambda: calibrate(device, output=output, progress=_log_progress(), threads=threads, quick=quick))
    else:
        with Progress(TextColumn("calibrating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.description}"), console=console, transient=True) as bar:  # fmt: skip
            task = bar.add_task("", total=None)

            def progress(done: int, total: int, what: str) -> None:
                bar.update(task, completed=done, total=total, description=what)

            preset = run_guarded(lambda: calibrate(device, output=output, progress=progress, threads=threads, quick=quick))
    busy = preset.device.get("busy")
    if busy:
        typer.echo(f"graphprof: warning: {busy}; the calibration was written marked noisy, and every prediction from it says so", err=True)
    for line in _summary(preset):
        console.print(line, highlight=False)

"""Measured beside estimated: a Rich report of a :class:`Profile` that carries a measurement.

Per layer (module path): the estimate is the roofline time of the graph nodes whose innermost module is
that layer (so a block's own additions sit on the block, as its measured self time does), the measure
is the layer's self time, and the ratio measured / estimated is its own column. With a calibrated
device (``--hardware h100``) the predicted time and measured / predicted sit beside them, and the layers
whose prediction is furthest off are flagged. Per aten op: the estimate summed over the op's calls
beside the measured time of the calls a dispatch mode sees (``OpTime.dispatched_time_us``).

Like for like: the per-layer times are measured on forwards, so the per-layer estimate and prediction
are of the forward alone, in train mode too (its backward is timed for the whole model only). The
header names the threads torch used and the load, and a forward whose coefficient of variation is over
:data:`~graphprof.measure.result.NOISY_CV` is flagged as a noisy run, with what to do about it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from graphprof.base.choices import Mode, Phase
from graphprof.base.names import functional_op
from graphprof.cost.bounds import LayerBound, roofline_time
from graphprof.cost.result import Profile
from graphprof.measure.timing import NOISY_CV
from graphprof.render.fit import ReportTable

__all__ = ["estimated_layer_seconds", "forward_layer_seconds", "forward_predicted_seconds", "predicted_layer_seconds", "render_measured"]


def _by_layer(profile: Profile, seconds: Callable[[LayerBound], float | None]) -> dict[str, float]:
    """``seconds(bound)`` of the roofline ``profile`` carries, summed per module path (``"(model)"`` for
    nodes at top level); empty when it carries none."""
    roofline = profile.roofline
    if roofline is None:
        return {}
    out: dict[str, float] = defaultdict(float)
    for row, bound in zip(profile.layers, roofline.layers, strict=True):
        value = seconds(bound)
        if value is not None:
            out[row.module or "(model)"] += value
    return dict(out)


def estimated_layer_seconds(profile: Profile) -> dict[str, float]:
    """Roofline seconds per module path (``"(model)"`` for nodes at top level); empty without a device."""
    if profile.roofline is None or profile.roofline.seconds is None:
        return {}
    return _by_layer(profile, lambda bound: bound.seconds)


def predicted_layer_seconds(profile: Profile) -> dict[str, float]:
    """Predicted seconds per module path, as :func:`estimated_layer_seconds`; empty without a calibration."""
    return _by_layer(profile, lambda bound: bound.predicted_seconds)


def forward_layer_seconds(profile: Profile) -> dict[str, float]:
    """Roofline seconds of the *forward* per module path: what a measured forward is compared with.

    Equal to :func:`estimated_layer_seconds` in eval mode (no backward); in train mode it leaves the
    backward out. Empty without a device."""
    roofline = profile.roofline
    if roofline is None or roofline.peak_flops is None or roofline.bandwidth is None:
        return {}
    out: dict[str, float] = defaultdict(float)
    for row in profile.layers:
        out[row.module or "(model)"] += roofline_time(row.forward.flops, row.forward.bytes_moved, roofline.peak_flops, roofline.bandwidth)
    return dict(out)


def forward_predicted_seconds(profile: Profile) -> dict[str, float]:
    """Predicted seconds of the forward per module path (the forward's ops alone on the timeline); as
    :func:`predicted_layer_seconds` in eval mode, empty without a calibration. Read from the roofline
    (:attr:`Roofline.forward_predicted`, computed by :func:`graphprof.cost.roofline.classify`), never predicted here."""
    if profile.mode is not Mode.TRAIN:
        return predicted_layer_seconds(profile)
    return {} if profile.roofline is None else dict(profile.roofline.forward_predicted)


def _ms(stats: object) -> str:
    s = stats  # RuntimeStats
    first = ", ".join(f"{t:.2f}" for t in s.first) or "-"  # type: ignore[attr-defined]
    return (
        f"{s.mean:.3f} ± {s.std:.3f} ms  median {s.median:.3f}  min {s.min:.3f}  p20 {s.p20:.3f}  p80 {s.p80:.3f}"  # type: ignore[attr-defined]
        f"  n={s.num_runs}{' (stopped early)' if s.stopped_early else ''}  first: {first}"  # type: ignore[attr-defined]
    )


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:,.1f} MiB"


def _estimated_text(profile: Profile) -> str:
    e = profile.estimated_memory()
    text = f"estimated params {_mib(e['param_bytes'])} + buffers {_mib(e['buffer_bytes'])} + peak activations {_mib(e['peak_activation_bytes'])}"
    if "gradient_bytes" in e and profile.measurement is not None:
        text += f" + gradients {_mib(e['gradient_bytes'])} + optimizer state {_mib(e['optimizer_state_bytes'])} ({profile.measurement.optimizer})"
    return text


def render_measured(profile: Profile) -> Group:
    """The measurement's summary, memory (measured beside estimated) and the per-layer table; the estimates
    and predictions are those of the roofline ``profile`` carries (none without one)."""
    m = profile.measurement
    if m is None:
        return Group(Text("no measurement"))
    lines = [
        Text(f"Measured on {m.device} ({_host(m.host)}), {m.dtype}, {m.mode}, inputs {m.inputs}", style="bold"),
        Text(
            f"forward        {_ms(m.forward)}  CV {m.forward_cv:.1%}  (plain forwards, nothing attached: the figure a predicted time is of)"
        ),
    ]
    if m.noisy:
        lines.append(_noisy(m.forward_cv))
    if m.backward is not None:
        lines.append(Text(f"backward       {_ms(m.backward)}"))
    if m.training_step is not None:
        lines.append(Text(f"training step  {_ms(m.training_step)}  ({m.optimizer})"))
    busy = f", kernel busy {m.kernel_busy_us / 1e3:.3f} ms" if m.kernel_busy_us is not None else ""
    lines.append(
        Text(
            f"per layer ({m.layer_runs} instrumented forwards, kept apart): sum {m.layer_sum_us / 1e3:.3f} ms, instrumented forward "
            f"{m.instrumented_forward.mean:.3f} ms{busy}; overhead of per-layer measurement {m.overhead * 100:+.1f}%"
        )
    )
    mem = m.memory
    lines.append(
        Text(
            f"memory: measured peak {_mib(mem.peak_bytes)} (resident {_mib(mem.resident_bytes)} + run {_mib(mem.run_peak_bytes)}"
            f"{', reserved ' + _mib(mem.reserved_bytes) if mem.reserved_bytes is not None else ''}; {mem.source}); "
            + _estimated_text(profile)
        )
    )
    if mem.breakdown is not None:
        b = mem.breakdown
        parts = ", ".join(
            f"{c.replace('_', ' ')} {_mib(getattr(b, c))}"
            for c in ("parameters", "buffers", "gradients", "optimizer_state", "activations", "temporaries")
        )
        lines.append(Text(f"breakdown at peak (MemTracker): {parts}"))
    lines += _utilization(m)
    for note in m.notes:
        lines.append(Text(f"note: {note}", style="dim"))

    return Group(*lines, _layer_table(profile), _op_table(profile))


def _utilization(m: Any) -> list[Text]:
    """MFU and HFU per span, naming the FLOPs and the peak (read from the measurement, never recomputed)."""
    if not m.utilization:
        return [
            Text(
                "MFU: no device peak for this run (give --hardware; on the CPU, --hardware local after `graphprof calibrate`)", style="dim"
            )
        ]
    return [
        Text(f"{u.span}: MFU {u.mfu:.2%} (model FLOPs {u.model_flops:,} in {u.seconds * 1e3:.3f} ms = {u.achieved_flops / 1e12:.4g} TFLOP/s), "
             f"HFU {u.hfu:.2%} (executed FLOPs {u.executed_flops:,}); peak {u.peak_flops / 1e12:.4g} TFLOP/s dense, {u.precision}, {u.device}")
        for u in m.utilization
    ]  # fmt: skip


def _host(host: object) -> str:
    """``CPU, 2 cores, 2 threads, load 1.52 1.10 0.90 at the end``: the machine and how busy it was."""
    h = host  # Host
    threads = getattr(h, "threads", None)
    load = getattr(h, "loadavg", None)
    parts = [f"{h.gpu or h.cpu}", f"{h.cores} cores"]  # type: ignore[attr-defined]
    if threads is not None:
        parts.append(f"{threads} torch threads")
    parts.append("load " + (" ".join(f"{x:.2f}" for x in load) + " (1/5/15 min, at the end of the run)" if load else "unknown"))
    return ", ".join(parts) + f", torch {h.torch}"  # type: ignore[attr-defined]


def _noisy(cv: float) -> Text:
    return Text(
        f"noisy run: the forward's coefficient of variation is {cv:.1%} (over {NOISY_CV:.0%}), so these figures, "
        "per layer too, move from run to run. Quiet the machine, give more --iters, and pin the threads "
        "(OMP_NUM_THREADS=N, or torch.set_num_threads(N) in Python).",
        style="bold yellow",
    )


#: How many layers the per-layer table flags as those whose prediction is furthest from the measurement.
WORST_FLAGGED = 3
#: Rows of the per-op table (the ops that took longest).
OP_ROWS = 12


def _ratio(measured_us: float, estimated_us: float | None) -> str:
    return f"{measured_us / estimated_us:.1f}x" if estimated_us else "-"


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f} us"


def _layer_table(profile: Profile) -> Table:
    """Per layer: lower bound, predicted (with a calibration), measured, their ratios; the layers whose
    prediction is furthest from the measurement (by the size of log(measured / predicted)) flagged."""
    m = profile.measurement
    assert m is not None
    # like for like: the layers are measured on forwards, so the estimate is of the forward (train mode too)
    estimates = forward_layer_seconds(profile)
    predictions = _forward_predictions(profile)
    table = ReportTable(title=_layer_title(profile), title_justify="left")
    columns = [("Layer", "left"), ("Type", "left"), ("Calls", "right"), ("Estimated", "right")]
    if predictions:
        columns.append(("Predicted", "right"))
    columns += [("Measured", "right"), ("Ratio", "right")]
    if predictions:
        columns.append(("Meas./pred.", "right"))
    columns.append(("Share", "right"))
    for col, justify in columns:
        table.add_column(col, justify=justify, no_wrap=col == "Layer")  # type: ignore[arg-type]
    worst = _worst_predicted(m, predictions)
    total = m.layer_sum_us or 1.0
    for layer in m.layers:
        est = estimates.get(layer.name)
        est_us = est * 1e6 if est is not None else None
        cells = [layer.name + ("  << worst prediction" if layer.name in worst else ""), layer.type, str(layer.calls), _us(est_us)]
        pred = predictions.get(layer.name)
        pred_us = pred * 1e6 if pred is not None else None
        if predictions:
            cells.append(_us(pred_us))
        cells += [_us(layer.time_us), _ratio(layer.time_us, est_us)]
        if predictions:
            cells.append(_ratio(layer.time_us, pred_us))
        cells.append(f"{layer.time_us / total * 100:.1f}%")
        table.add_row(*cells)
    table.add_row(*_total_cells(m, estimates, predictions), style="bold")
    return table


def _forward_predictions(profile: Profile) -> dict[str, float]:
    """The forward's predicted seconds per layer, when the roofline ``profile`` carries is of the kind of
    device the measurement ran on: a prediction held against a run on another kind says nothing."""
    m = profile.measurement
    roofline = profile.roofline
    assert m is not None
    same_kind = roofline is not None and roofline.hardware is not None and roofline.hardware.target == m.device.split(":")[0]
    return forward_predicted_seconds(profile) if same_kind else {}


def _layer_title(profile: Profile) -> str:
    """The per-layer table's title: which device's roofline, and forward only in train mode."""
    roofline = profile.roofline
    where = roofline.hardware.name if roofline is not None and roofline.hardware is not None else None
    title = f"Per layer: estimated{f' ({where} roofline)' if where else ''} vs measured (self time)"
    if profile.mode is Mode.TRAIN:
        title = f"Per layer, forward only: estimated forward{f' ({where} roofline)' if where else ''} vs measured forward (self time); the backward is timed for the whole model above"
    return title


def _worst_predicted(m: Any, predictions: dict[str, float]) -> set[str]:
    """The :data:`WORST_FLAGGED` layers whose prediction is furthest from their measured time."""
    if not predictions:
        return set()
    misses = {
        layer.name: abs(math.log(layer.time_us / (predictions[layer.name] * 1e6)))
        for layer in m.layers
        if predictions.get(layer.name) and layer.time_us > 0
    }
    return set(sorted(misses, key=lambda name: -misses[name])[:WORST_FLAGGED])


def _total_cells(m: Any, estimates: dict[str, float], predictions: dict[str, float]) -> list[str]:
    """The TOTAL row: the summed estimate (and prediction) beside the summed measured self times."""
    est_total = sum(estimates.values()) * 1e6
    pred_total = sum(predictions.values()) * 1e6
    cells = ["TOTAL", "", "", _us(est_total) if estimates else "-"]
    if predictions:
        cells.append(_us(pred_total))
    cells += [_us(m.layer_sum_us), _ratio(m.layer_sum_us, est_total)]
    if predictions:
        cells.append(_ratio(m.layer_sum_us, pred_total))
    cells.append("100.0%")
    return cells


def _op_table(profile: Profile) -> Table:
    """Per aten op over the whole model: calls, the roofline estimate, the measured time of the calls a
    dispatch mode sees (their kernels below them included), the ratio; the longest first."""
    m = profile.measurement
    assert m is not None
    roofline = profile.roofline
    estimated: dict[str, float] = defaultdict(float)
    if roofline is not None and roofline.peak_flops is not None and roofline.bandwidth is not None:
        for _, op in profile.iter_ops():
            if op.phase is Phase.FORWARD:
                estimated[op.op] += roofline_time(op.cost.flops, op.cost.bytes_moved, roofline.peak_flops, roofline.bandwidth)
    measured: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    names = {functional_op(name): name for name in estimated}  # `out += x` runs aten::add_ where the dry run saw aten.add
    for t in m.ops:
        if t.dispatched_calls:
            op = "aten." + t.op.removeprefix("aten::")
            name = names.get(functional_op(op), op)
            measured[name] += t.dispatched_time_us
            calls[name] += t.dispatched_calls
    ranked = sorted(measured, key=lambda name: -measured[name])
    table = ReportTable(
        title=f"Per aten op: estimated vs measured (the {min(OP_ROWS, len(ranked))} longest of {len(ranked)})", title_justify="left"
    )
    for col, justify in (("Aten op", "left"), ("Calls", "right"), ("Estimated", "right"), ("Measured", "right"), ("Ratio", "right")):
        table.add_column(col, justify=justify, no_wrap=col == "Aten op")  # type: ignore[arg-type]
    for name in ranked[:OP_ROWS]:
        est_us = estimated[name] * 1e6 if name in estimated else None
        table.add_row(name, str(calls[name]), _us(est_us), _us(measured[name]), _ratio(measured[name], est_us))
    return table

"""The model summary: totals, the memory split, graph and capture facts, the kind of run and, with a
device, the roofline's and the calibrated prediction's times.

A pure function of a :class:`Profile` (the times from the roofline it carries): it returns a Rich table
and prints nothing.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.markup import escape

from graphprof.base.choices import Execution, Lowering, Mode
from graphprof.base.inputs import format_inputs
from graphprof.base.ladder import Fallback, Rung
from graphprof.base.limits import format_bytes
from graphprof.capture.methods import NOT_TRIED
from graphprof.cost.result import Profile
from graphprof.render.common import profile_roofline
from graphprof.render.formatting import format_count, format_seconds, section_table

__all__ = ["render_summary"]

Rows = list[tuple[str, str]]


def render_summary(profile: Profile) -> RenderableType:
    """Totals, the memory split (inputs, outputs, weights), graph and capture facts, and the kind of run."""
    table = section_table(f"Model summary: {escape(profile.model_name)}", header=False)  # MODEL_REGISTRY[key] is not a style
    table.add_column("key", style="bold", overflow="fold")
    table.add_column("value", overflow="fold")
    rows = _headline_rows(profile) + _flop_rows(profile) + _memory_rows(profile) + _run_rows(profile)
    for key, value in rows + _device_rows(profile):
        table.add_row(key, value)
    return table


def _headline_rows(profile: Profile) -> Rows:
    """The model, its input, mode and dtype, parameters, MACs and FLOPs."""
    total = profile.total
    params = f"{format_count(profile.total_params)} ({profile.total_params:,})"
    if profile.trainable_params != profile.total_params:
        params += f", {profile.trainable_params:,} trainable"
    return [
        ("Model", f"{escape(profile.model_name)} ({profile.family})"),
        ("Input", format_inputs(profile.inputs) or "-"),
        ("Mode / dtype", f"{profile.mode} / {profile.dtype}"),
        ("Parameters", params),
        ("MACs", f"{format_count(total.macs)} ({total.macs:,})"),
        ("FLOPs", f"{format_count(total.flops)} ({total.flops:,})"),
    ]


def _flop_rows(profile: Profile) -> Rows:
    """The summary's FLOPs beyond the total: executed and useful, per token, forward and backward."""
    total = profile.total
    rows: Rows = []
    if profile.useful_flops != total.flops or profile.executed_flops != total.flops:
        rows.append((
            "FLOPs executed / useful",
            f"{format_count(profile.executed_flops)} / {format_count(profile.useful_flops)} (causal attention: "
            "counted over the full score square; a tiled kernel skips the masked tiles; useful = unmasked scores)",
        ))  # fmt: skip
    per_token = profile.per_token
    if per_token is not None:
        rows.append((
            "Model FLOPs per token",
            f"{format_count(round(per_token.model_forward))} forward, {format_count(round(per_token.model_train))} "
            f"forward + backward (weight and token-mixing products, attention unmasked only, train = 3 x forward); "
            f"executed {format_count(round(per_token.executed))}, counted {format_count(round(per_token.counted))} "
            f"per token over {per_token.tokens:,} tokens",
        ))  # fmt: skip
    if profile.mode is Mode.TRAIN:
        rows.append(("FLOPs forward / backward", f"{format_count(profile.forward.flops)} / {format_count(profile.backward.flops)}"))
    return rows


def _memory_rows(profile: Profile) -> Rows:
    """Inputs, outputs, weights, peak activations (and what a training step saves), bytes moved, intensity."""
    total = profile.total
    weights = format_bytes(profile.param_bytes)
    if profile.buffer_bytes:
        weights += f" (+ {format_bytes(profile.buffer_bytes)} buffers)"
    peak = format_bytes(profile.peak_activation_bytes)
    if profile.peak_activation_layer:
        peak += f" (at {profile.peak_activation_layer})"
    rows: Rows = [
        ("Memory: inputs", format_bytes(profile.input_bytes)),
        ("Memory: outputs", format_bytes(profile.output_bytes)),
        ("Memory: weights", weights),
        ("Memory: peak activations", peak),
    ]
    if profile.mode is Mode.TRAIN:
        rows.append((
            "Memory: saved for backward",
            f"{format_bytes(profile.saved_activation_bytes)} (activations a training step holds until its backward; per layer in the Saved column of --verbose)",
        ))  # fmt: skip
    ai = total.arithmetic_intensity
    rows += [
        (
            "Memory moved",
            f"{format_bytes(total.bytes_moved)} (read {format_bytes(total.bytes_read)}, written {format_bytes(total.bytes_written)})",
        ),
        ("Arithmetic intensity", "-" if ai is None else f"{ai:.1f} FLOPs/byte (total FLOPs / bytes moved)"),
    ]
    return rows


def _run_rows(profile: Profile) -> Rows:
    """The graph, the capture, the kind of run and the lowering; then every option the dry run's ladder
    passed over (:mod:`graphprof.base.ladder`), rung by rung, each in the same form."""
    rows: Rows = [
        ("Graph", f"{len(profile.layers)} nodes in {profile.num_subgraphs} captured subgraph(s)"),
        ("Capture", profile.capture_method),
        ("Run", f"{'dry run' if profile.execution is Execution.DRY_RUN else 'real run'}: {profile.execution_note}"),
    ]
    if profile.lowering is not Lowering.CPU:
        rows.append(("Lowering", f"{profile.lowering}: attention costed as the fused kernels a GPU runs"))
    # a profile made by hand may carry only its capture attempts: they are its capture rung
    ladder = profile.fallbacks or (Fallback(Rung.CAPTURE, profile.capture_method, tuple(profile.capture_attempts)),)
    rows += [_passed_over_row(rung.rung, option, reason) for rung in ladder for option, reason in rung.passed_over]
    return rows


def _passed_over_row(rung: Rung, option: str, reason: str) -> tuple[str, str]:
    """An option a rung of the ladder passed over, in one form for every rung: ``not tried`` and why, or
    ``failed`` with what it raised (``auto`` skips Dynamo export for the families whose record says it
    costs too long, YOLO's among them)."""
    if reason.startswith(NOT_TRIED):
        return f"  {rung}: {option} not tried", reason.removeprefix(NOT_TRIED).lstrip(": ") or "-"
    return f"  {rung}: {option} failed", reason


def _device_rows(profile: Profile) -> Rows:
    """With a device: its name and precision, the roofline time and the calibrated prediction."""
    roofline = profile_roofline(profile)
    if roofline.hardware is None:
        return []
    rows: Rows = [
        ("Hardware", f"{roofline.hardware.label} ({roofline.precision})"),
        ("Roofline time (lower bound)", format_seconds(roofline.seconds)),
    ]
    if roofline.predicted_seconds is not None:
        rows.append(("Predicted time", _predicted_text(profile) + " (of a plain forward, as --measure's 'forward' times it)"))
    return rows


def _predicted_text(profile: Profile) -> str:
    """``"22.1 ms (80%: 19.8–24.9 ms)"``, and where the calibration's records came from."""
    roofline = profile_roofline(profile)
    text = format_seconds(roofline.predicted_seconds)
    interval = roofline.predicted_interval
    if interval is not None:
        low, high = format_seconds(interval.low), format_seconds(interval.high)
        if low.split(" ")[-1] == high.split(" ")[-1]:
            low = low.split(" ")[0]  # "19.8–24.9 ms"
        text += f" (80%: {low}–{high})"
    records = roofline.calibration.summary().get("records") if roofline.calibration is not None else None
    if records:
        text += f"; {records['calibration']:,} calibration records, {records['own_runs']:,} from your runs"
    return text

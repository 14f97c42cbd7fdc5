"""Renderings of cross-check results: Rich tables, JSON, CSV and Markdown. Pure functions; printing is the caller's.

The summary table follows the seed tool's comparison (``Model  Our FLOPs  fvcore FLOPs  Difference
Accuracy``), with graphprof's own MACs and FLOPs beside it and the ops that explain each difference.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from graphprof.crosscheck.result import REASONS, CrossCheck, Explanation, OpCount, Status
from graphprof.render.fit import ReportTable
from graphprof.render.formatting import format_count

__all__ = [
    "summarize",
    "describe",
    "render_comparison",
    "render_groups",
    "render_details",
    "render_json",
    "render_csv",
    "render_markdown",
    "crosscheck_dict",
]

_STYLE = {Status.AGREES: "green", Status.EXPLAINED: "green", Status.DIFFERS: "bold red", Status.FAILED: "yellow"}
_LABEL = {"fvcore": "fvcore", "torch": "torch FlopCounterMode"}


def summarize(results: Sequence[CrossCheck], tolerance: float) -> dict[str, int]:
    """How many models are in each :class:`Status`, and in all."""
    counts = Counter(r.status(tolerance).value for r in results)
    return {"models": len(results), **{s.value: counts.get(s.value, 0) for s in Status}}


def _signed(value: int) -> str:
    return "0" if value == 0 else ("+" if value > 0 else "-") + format_count(abs(value))


def _percent(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}%"


def _share(amount: int, result: CrossCheck) -> str:
    base = result.reference_count or result.graphprof_count
    if base == 0:
        return "-"
    share = 100 * amount / base
    return f"{'+' if share > 0 else '-'}<0.01%" if 0 < abs(share) < 0.005 else f"{share:+.2f}%"


def describe(explanation: Explanation, result: CrossCheck) -> str:
    """One explanation as text: ``aten::scaled_dot_product_attention x12 left out by fvcore: +715.33M (+4.24%)``.

    The share is of the reference's count, so the shares and the accuracy add up to 100%.
    """
    amount = f"{_signed(explanation.amount)} ({_share(explanation.amount, result)})"
    if explanation.kind in REASONS:
        calls = f" x{explanation.calls}" if explanation.calls else ""
        return f"{explanation.name}{calls} {REASONS[explanation.kind].format(reference=result.reference)}: {amount}"
    return f"{explanation.name}: {amount} unexplained"


def _status_text(result: CrossCheck, tolerance: float) -> Text:
    status = result.status(tolerance)
    return Text("DIFFERS" if status is Status.DIFFERS else status.value, style=_STYLE[status])


def _notes(result: CrossCheck, tolerance: float) -> list[str]:
    """The lines under the table for one model: its error, or what explains its difference."""
    if result.error is not None:
        return [f"failed: {result.error}"]
    causes = [describe(e, result) for e in result.explanations()]
    if causes and result.status(tolerance) is not Status.AGREES:
        causes.append(f"accuracy once these are counted: {_percent(result.accuracy_explained)}")
    return causes


def render_comparison(results: Sequence[CrossCheck], *, tolerance: float, labels: tuple[str, str, str] | None = None) -> RenderableType:
    """The summary: one row per model (graphprof under the reference's convention against the reference, the
    difference and the accuracy, graphprof's own MACs and FLOPs beside them), then what explains each difference.

    ``labels`` (title, graphprof's column, the reference's column; ``{reference}`` is filled in) replace
    graphprof's own, for a seed's script that prints the seed's (:data:`graphprof.compat.seed002.COMPARISON_LABELS`)."""
    reference = results[0].reference if results else "fvcore"
    label = _LABEL.get(reference, reference)
    title, ours, theirs = (f"FLOP comparison: graphprof vs {label}", f"graphprof\n({reference})", reference)
    if labels is not None:
        title, ours, theirs = (text.format(reference=reference) for text in labels)
    table = ReportTable(title=title, title_justify="left")
    table.add_column("Model", no_wrap=True, overflow="fold")
    for header in ("MACs", "FLOPs", ours, theirs, "Difference", "Accuracy"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("Status", no_wrap=True)
    for r in results:
        if r.error is not None:
            table.add_row(Text(r.model), *["-"] * 6, _status_text(r, tolerance))
            continue
        table.add_row(
            Text(r.model),
            format_count(r.macs),
            format_count(r.flops),
            format_count(r.graphprof_count),
            format_count(r.reference_count),
            _signed(r.difference),
            _percent(r.accuracy),
            _status_text(r, tolerance),
        )
    notes = Text()
    for r in results:
        for i, line in enumerate(_notes(r, tolerance)):
            notes.append(f"{r.model}: " if i == 0 else " " * (len(r.model) + 2), style="bold" if i == 0 else "")
            notes.append(line + "\n", style="yellow" if r.error is not None else "")
    s = summarize(results, tolerance)
    agree = s["agrees"] + s["explained"]
    unit = next((r.unit for r in results if r.unit), "")
    explained = f" ({s['explained']} once {reference}'s blind spots, named above, are counted)" if s["explained"] else ""
    summary = Text(
        f"{agree} of {s['models']} agree within {tolerance:g}%{explained}; {s['differs']} differ, {s['failed']} failed. "
        f"graphprof ({reference}) and {reference} count {unit}; MACs and FLOPs are graphprof's own.",
        style="dim",
    )
    return Group(table, notes, summary) if notes.plain else Group(table, summary)


def _ops(ops: Sequence[OpCount]) -> Text:
    return Text("\n".join(f"{o.op} x{o.calls}" if o.calls else o.op for o in ops) or "-")


def render_groups(result: CrossCheck) -> RenderableType:
    """The per-op comparison of one model: each group with graphprof's ops and the reference's, side by side."""
    ref = result.reference
    # model and op names are shown as Text: a spec like "hf:llama: ..." must not become markup or an emoji
    table = ReportTable(title=Text(f"{result.model}: per-op comparison ({result.unit})"), title_justify="left")
    table.add_column("Group", no_wrap=True)
    table.add_column("graphprof ops")
    table.add_column("graphprof", justify="right")
    table.add_column(f"{ref} ops")
    table.add_column(ref, justify="right")
    table.add_column(f"explained ({ref}'s blind spots)")
    table.add_column("Unexplained", justify="right")
    for g in result.groups:
        left = (
            "\n".join(
                f"{a.op}{f' x{a.calls}' if a.calls else ''} {REASONS[a.reason].format(reference=ref)}: {_signed(a.amount)}"
                for a in g.adjustments
            )
            or "-"
        )
        unexplained = Text(_signed(g.unexplained), style="bold red" if g.unexplained else "")
        table.add_row(
            Text(g.group), _ops(g.graphprof_ops), format_count(g.graphprof), _ops(g.reference_ops),
            format_count(g.reference), Text(left), unexplained,
        )  # fmt: skip
    table.add_section()
    table.add_row(
        "total", "", format_count(result.graphprof_count), "", format_count(result.reference_count),
        _signed(result.explained), Text(_signed(result.unexplained), style="bold red" if result.unexplained else ""),
    )  # fmt: skip
    return table


def render_details(result: CrossCheck) -> RenderableType:
    """``--verbose`` for one model: the per-op table and what each side could not count."""
    if result.error is not None:
        return Text(f"{result.model}: failed: {result.error}", style="yellow")
    parts: list[RenderableType] = [render_groups(result)]
    if result.reference_unsupported:
        ops = ", ".join(f"{o.op} x{o.calls}" for o in result.reference_unsupported)
        parts.append(Text(f"{result.reference} reports as unsupported (outside its convention, counted as 0): {ops}", style="dim"))
    if result.graphprof_unsupported:
        ops = ", ".join(f"{o.op} x{o.calls}" for o in result.graphprof_unsupported)
        parts.append(Text(f"graphprof has no formula for: {ops}", style="yellow"))
    parts.append(
        Text(
            f"graph captured by {result.capture_method}; {result.reference} {result.reference_version}; {result.seconds:.1f}s", style="dim"
        )
    )
    return Group(*parts)


def crosscheck_dict(results: Sequence[CrossCheck], tolerance: float) -> dict[str, Any]:
    """The comparison as a JSON-ready dict: the reference, the tolerance, the summary, one entry per model."""
    reference = results[0].reference if results else ""
    unit = next((r.unit for r in results if r.unit), "")
    return {
        "reference": reference,
        "unit": unit,
        "tolerance_percent": tolerance,
        "summary": summarize(results, tolerance),
        "models": [r.to_dict(tolerance) for r in results],
    }


def render_json(results: Sequence[CrossCheck], tolerance: float) -> str:
    return json.dumps(crosscheck_dict(results, tolerance), indent=2) + "\n"


CSV_COLUMNS = (
    "model", "family", "input", "reference", "status", "macs", "flops", "graphprof", "reference_count",
    "difference", "accuracy_percent", "explained", "unexplained", "accuracy_explained_percent", "explanation",
    "error", "seconds",
)  # fmt: skip


def render_csv(results: Sequence[CrossCheck], tolerance: float) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in results:
        d = r.to_dict(tolerance)
        explanation = "; ".join(describe(e, r) for e in r.explanations())
        writer.writerow([
            r.model, r.family, r.input, r.reference, d["status"], r.macs, r.flops, r.graphprof_count,
            r.reference_count, r.difference, _csv_float(r.accuracy), r.explained, r.unexplained,
            _csv_float(r.accuracy_explained), explanation, r.error or "", f"{r.seconds:.2f}",
        ])  # fmt: skip
    return buffer.getvalue()


def _csv_float(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def render_markdown(results: Sequence[CrossCheck], tolerance: float) -> str:
    """A Markdown table of the comparison (for benchmark reports)."""
    reference = results[0].reference if results else "fvcore"
    lines = [
        f"| Model | Family | MACs | FLOPs | graphprof ({reference} conv.) | {reference} | Difference | Accuracy | Status | Explained by |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in results:
        if r.error is not None:
            lines.append(f"| {r.model} | {r.family or '-'} | - | - | - | - | - | - | failed | {_md(r.error)} |")
            continue
        status = _status_text(r, tolerance).plain
        if r.status(tolerance) is not Status.AGREES:
            status += f" ({_percent(r.accuracy_explained)})"
        why = "; ".join(describe(e, r) for e in r.explanations()) or "-"
        lines.append(
            f"| {r.model} | {r.family} | {format_count(r.macs)} | {format_count(r.flops)} | {format_count(r.graphprof_count)} "
            f"| {format_count(r.reference_count)} | {_signed(r.difference)} | {_percent(r.accuracy)} | {status} | {_md(why)} |"
        )
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")

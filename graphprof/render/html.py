"""One self-contained HTML page per result: a profile (with its measurement), a sweep, a comparison.

Pure functions of the results, like every renderer: they return the page as text. The page opens
offline: the charting library's JavaScript (plotly.js) is embedded from the plotly package, the graph is
Graphviz's SVG inline, and the tree, the sorting and the filters are a few lines of plain JavaScript. No
CDN, no server, nothing fetched.

What a profile's page holds: summary cards (params, MACs, FLOPs, bytes, peak activations, lower-bound and
predicted time, the measured forward's mean ± std when measured, host and timestamp); the module tree,
collapsible, with costs and output shapes and a search box; sortable, filterable per-layer and per-op
tables (the measured column only when the profile carries a measurement); where the predicted time goes, by op
kind beside the measured forward and by layer (:mod:`graphprof.cost.breakdown`); the roofline chart with up to
three points per layer (:func:`graphprof.render.plots.roofline_points`); the module graph; the
unsupported ops and the notes.
"""

from __future__ import annotations

import html
import shutil
import subprocess
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from graphprof.base.choices import Mode
from graphprof.cost.breakdown import TAXONOMIES
from graphprof.cost.result import Profile
from graphprof.errors import MissingDependencyError
from graphprof.render.common import profile_roofline
from graphprof.render.escape import plotly_json
from graphprof.render.plots import POINT_KINDS, roofline_points

__all__ = ["render_html", "render_plan_html", "render_profile_html", "render_sweep_html", "render_compare_html"]

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}
.cards{display:flex;flex-wrap:wrap;gap:.6em}.card{border:1px solid #ccc;border-radius:6px;padding:.5em .8em;min-width:9em}
.card b{display:block;font-size:1.15em}.card span{color:#666;font-size:.8em}
table{border-collapse:collapse;font-size:.85em}th,td{border-bottom:1px solid #eee;padding:2px 8px;text-align:right}
th{cursor:pointer;background:#f6f6f6;position:sticky;top:0}td:first-child,th:first-child{text-align:left}
details{margin-left:1em}summary{cursor:pointer}.tree span.c{color:#666;font-size:.85em}input{margin:.3em 0}
.muted{color:#666;font-size:.85em}
"""

_SCRIPT = """
function sortTable(th){const t=th.closest('table'),i=[...th.parentNode.children].indexOf(th),b=t.tBodies[0];
const asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';const rows=[...b.rows];
const v=r=>{const c=r.cells[i];const n=parseFloat(c.dataset.v??c.textContent);return isNaN(n)?c.textContent:n};
rows.sort((a,c)=>{const x=v(a),y=v(c);return (x>y?1:x<y?-1:0)*(asc?1:-1)});rows.forEach(r=>b.appendChild(r))}
function filterTable(inp,id){const q=inp.value.toLowerCase();for(const r of document.getElementById(id).tBodies[0].rows)
r.style.display=r.textContent.toLowerCase().includes(q)?'':'none'}
function searchTree(inp){const q=inp.value.toLowerCase();for(const d of document.querySelectorAll('#tree details')){
const hit=d.querySelector('summary').textContent.toLowerCase().includes(q)||[...d.querySelectorAll('summary')].some(s=>s.textContent.toLowerCase().includes(q));
d.style.display=hit?'':'none';if(q&&hit)d.open=true}}
document.querySelectorAll('th').forEach(th=>th.addEventListener('click',()=>sortTable(th)));
"""


def _plotly_js() -> str:
    try:
        from plotly.offline import get_plotlyjs
    except ImportError as exc:
        raise MissingDependencyError("--html needs plotly (its chart script is embedded): pip install 'graphprof[html]'") from exc
    return str(get_plotlyjs())


def _num(value: float | int | None, unit: str = "") -> str:
    if value is None:
        return "-"
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= scale:
            return f"{value / scale:.2f}{suffix}{unit}"
    return f"{value:.3g}{unit}" if isinstance(value, float) else f"{value}{unit}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1e3:.3f} ms" if value >= 1e-3 else f"{value * 1e6:.1f} us"


def _page(title: str, body: str) -> str:
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>{_STYLE}</style>"
        f"<script>{_plotly_js()}</script></head><body><h1>{html.escape(title)}</h1>{body}<script>{_SCRIPT}</script></body></html>"
    )


def _table(table_id: str, headers: Sequence[str], rows: Sequence[Sequence[tuple[str, Any]]]) -> str:
    """A sortable, filterable table; each cell is ``(text, sort value)``."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td data-v='{html.escape(str(v))}'>{html.escape(t)}</td>" for t, v in row) + "</tr>" for row in rows)
    search = f"<input placeholder='filter' oninput=\"filterTable(this,'{table_id}')\">"
    return f"{search}<table id='{table_id}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cards(profile: Profile) -> str:
    roofline = profile_roofline(profile)
    m = profile.measurement
    items = [
        ("params", _num(profile.total_params)), ("MACs", _num(profile.total_macs)), ("FLOPs", _num(profile.total_flops)),
        ("bytes moved", _num(profile.total_bytes, "B")), ("peak activations", _num(profile.peak_activation_bytes, "B")),
        ("lower bound", _seconds(roofline.seconds)), ("predicted", _seconds(roofline.predicted_seconds)),
    ]  # fmt: skip
    if m is not None:
        items.append(("measured forward", f"{m.forward.mean:.3f} ± {m.forward.std:.3f} ms"))
    host = m.host if m is not None else profile.host
    when = m.timestamp if m is not None else profile.created
    cards = "".join(f"<div class='card'><b>{html.escape(v)}</b><span>{html.escape(k)}</span></div>" for k, v in items)
    where = f"{getattr(host, 'cpu', '?')}, {getattr(host, 'cores', '?')} cores" if host is not None else "-"
    hw = roofline.hardware.label if roofline.hardware is not None else "no device (fixed threshold)"
    return f"<div class='cards' id='cards'>{cards}</div><p class='muted'>{html.escape(where)} · {html.escape(when)} · {html.escape(hw)}</p>"


def _intensity(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _shapes(shapes: Sequence[Sequence[int]]) -> str:
    return ", ".join("x".join(str(d) for d in s) for s in shapes[:2])


def _tree(profile: Profile) -> str:
    """The module tree as nested ``<details>``: each module's summed cost and its output shape."""
    from graphprof.render.tree import module_shapes

    shapes = module_shapes(profile)
    children: dict[str, list[Any]] = defaultdict(list)
    for m in profile.modules:
        if m.path:
            children[m.path.rpartition(".")[0]].append(m)

    def node(m: Any) -> str:
        label = m.path or profile.model_name
        cost = f"{m.type} · {_num(m.params)} params · {_num(m.cost.macs)} MACs · {_num(m.cost.flops)} FLOPs · {_shapes(shapes.get(m.path, ()))}"
        inner = "".join(node(c) for c in children.get(m.path, []))
        return f"<details><summary>{html.escape(label)} <span class='c'>{html.escape(cost)}</span></summary>{inner}</details>"

    root = next((m for m in profile.modules if m.path == ""), None)
    body = node(root) if root is not None else ""
    return f"<input placeholder='search the tree' oninput='searchTree(this)'><div class='tree' id='tree'>{body}</div>"


def _layer_table(profile: Profile) -> str:
    roofline = profile_roofline(profile)
    measured = {t.name: t.time_us for t in profile.measurement.layers} if profile.measurement is not None else None
    headers = ["layer", "type", "MACs", "FLOPs", "bytes", "FLOP/B", "bound", "lower bound", "predicted"] + (
        ["measured"] if measured is not None else []
    )
    rows = []
    for row, b in zip(profile.layers, roofline.layers, strict=True):
        cells = [(row.name, row.name), (row.type, row.type), (_num(row.cost.macs), row.cost.macs), (_num(row.cost.flops), row.cost.flops),
                 (_num(row.cost.bytes_moved, "B"), row.cost.bytes_moved), (_intensity(row.cost.arithmetic_intensity), row.cost.arithmetic_intensity or 0),
                 (b.bound.value, b.bound.value), (_seconds(b.seconds), b.seconds or 0), (_seconds(b.predicted_seconds), b.predicted_seconds or 0)]  # fmt: skip
        if measured is not None:
            us = measured.get(row.module or "(model)")
            cells.append((_seconds(us / 1e6) if us is not None else "-", us if us is not None else -1))
        rows.append(cells)
    return _table("layers", headers, rows)


def _op_table(profile: Profile) -> str:
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0, 0])
    for row in profile.layers:
        for op in row.ops:
            t = totals[op.op]
            t[0] += 1
            t[1] += op.cost.macs
            t[2] += op.cost.flops
            t[3] += op.cost.bytes_moved
    measured: dict[str, float] | None = None
    if profile.measurement is not None:
        measured = defaultdict(float)
        for o in profile.measurement.ops:
            measured[o.op.replace("::", ".")] += o.dispatched_cpu_us
    headers = ["op", "calls", "MACs", "FLOPs", "bytes"] + (["measured"] if measured is not None else [])
    rows = []
    for name, (calls, macs, flops, nbytes) in sorted(totals.items(), key=lambda kv: -kv[1][2]):
        cells = [
            (name, name),
            (str(int(calls)), calls),
            (_num(int(macs)), macs),
            (_num(int(flops)), flops),
            (_num(int(nbytes), "B"), nbytes),
        ]
        if measured is not None:
            us = measured.get(name)
            cells.append((_seconds(us / 1e6) if us else "-", us or -1))
        rows.append(cells)
    return _table("ops", headers, rows)


def _kind_rows(b: Any) -> list[list[tuple[str, Any]]]:
    """One row per kind of a :class:`~graphprof.cost.breakdown.PredictionBreakdown`: calls, predicted and share;
    with its measurement, the forward's predicted and measured seconds and their ratio (a kind measured alone too)."""
    m = b.measured
    measured = {k.kind: k for k in m.kinds} if m is not None else {}
    predicted = {k.name: k for k in b.kinds}
    rows = []
    for kind in [*predicted, *(k for k in measured if k not in predicted)]:
        k, got = predicted.get(kind), measured.get(kind)
        cells = [(kind, kind), (str(k.calls) if k else "-", k.calls if k else 0), (_seconds(k.predicted_s if k else None), k.predicted_s if k else 0),
                 (f"{k.share:.1%}" if k else "-", k.share if k else 0)]  # fmt: skip
        if m is not None:
            fwd, meas, ratio = (got.predicted_s, got.measured_s, got.ratio) if got is not None else (0.0, 0.0, None)
            cells += [
                (_seconds(fwd), fwd),
                (_seconds(meas), meas),
                ("-" if ratio is None else f"{ratio:.2f}x", -1 if ratio is None else ratio),
            ]
        rows.append(cells)
    return rows


def _prediction(profile: Profile) -> str:
    """Where the predicted time goes: by kind (the measured forward beside it when one ran) and the top layers;
    nothing without a calibrated device."""
    b = profile_roofline(profile).breakdown
    if b is None:
        return ""
    m = b.measured
    headers = ["kind", "calls", "predicted", "share"] + (["predicted fwd", "measured fwd", "measured / predicted"] if m is not None else [])
    what = f"Predicted (an estimate) of the {b.passes}, by {TAXONOMIES[b.taxonomy]}." + (
        "" if b.faults is None else f" The {b.faults.label}."
    )
    label = f" {m.label}; between calls {_seconds(m.between_s)} measured, predicted inside the calls' own times." if m is not None else ""
    layers = [[(x.name, x.name), (x.type, x.type), (_seconds(x.predicted_s), x.predicted_s), (f"{x.share:.1%}", x.share)] for x in b.layers]
    return (
        f"<h2 id='prediction-breakdown'>Where the prediction goes</h2><p class='muted'>{html.escape(what + label)}</p>"
        + _table("prediction-kinds", headers, _kind_rows(b)) + f"<h3>Top {len(b.layers)} of {b.layer_count} layers by predicted time</h3>"
        + _table("prediction-layers", ["layer", "type", "predicted", "share"], layers)
    )  # fmt: skip


def _axis(title: str, log: bool = True) -> dict[str, Any]:
    """A plotly axis with its title (plotly.js 3 takes ``{"text": ...}`` only) and one label per decade."""
    axis: dict[str, Any] = {"title": {"text": title}, "automargin": True}
    if log:
        axis.update(type="log", dtick=1, exponentformat="power", showexponent="all")
    return axis


def _hover(profile: Profile) -> dict[str, list[str]]:
    """Per module path: its FLOPs and intensity, and its times (lower bound, predicted, measured), the two
    lines under the layer's name in each point's hover (plain text: the page escapes it)."""
    points = roofline_points(profile)
    seconds = {kind: {name: f / y for name, _, y, f in pts} for kind, pts in points.items()}
    out = {}
    for name, x, _, flops in points["lower bound"]:
        times = " · ".join(f"{kind} {_seconds(by.get(name))}" for kind, by in seconds.items() if name in by)
        out[name] = [f"{_num(flops)} FLOPs at {x:.2f} FLOP/byte", times]
    return out


def _roofline_caption(profile: Profile) -> str:
    roofline = profile_roofline(profile)
    hw = roofline.hardware
    assert hw is not None and roofline.peak_flops is not None and roofline.bandwidth is not None
    text = (f"Device: {hw.label}, {roofline.precision} peak {roofline.peak_flops / 1e12:.1f} TFLOP/s, "
            f"memory {roofline.bandwidth / 1e12:.2f} TB/s (ridge {roofline.threshold:.1f} FLOP/byte).")  # fmt: skip
    m = profile.measurement
    if m is not None:
        load = getattr(m.host, "loadavg", None)
        cores = getattr(m.host, "cores", None) or 1
        busy = load is not None and load[0] > 0.75 * cores
        text += (
            f" Measured on {m.device} at load {load[0]:.2f} on {cores} cores" if load is not None else f" Measured on {m.device}"
        ) + "."
        if busy:
            text += " The machine was busy: measured points sit further below the roof than the kernels alone would."
    return f"<p class='muted' id='roofline-caption'>{html.escape(text)}</p>"


def _roofline_chart(profile: Profile) -> str:
    roofline = profile_roofline(profile)
    if roofline.hardware is None or roofline.peak_flops is None or roofline.bandwidth is None:
        return "<p class='muted'>No device given (--hardware): no roof to draw.</p>"
    hover = _hover(profile)
    traces = []
    for kind, points in roofline_points(profile).items():
        if points:
            names, xs, ys, _ = zip(*points, strict=True)
            marker = {"o": "circle", "s": "square", "^": "triangle-up"}[POINT_KINDS[kind]]
            traces.append({"type": "scatter", "mode": "markers", "name": kind, "x": xs, "y": [y / 1e12 for y in ys],
                           "text": list(names), "customdata": [hover.get(n, ["", ""]) for n in names],
                           "hovertemplate": f"<b>%{{text}}</b><br>%{{customdata[0]}}<br>%{{customdata[1]}}<extra>{kind}</extra>",
                           "marker": {"symbol": marker}})  # fmt: skip
    xs_all = [x for t in traces for x in t["x"]] or [roofline.threshold]
    lo, hi = min(xs_all + [roofline.threshold]) / 4, max(xs_all + [roofline.threshold]) * 4
    grid = [lo * (hi / lo) ** (i / 100) for i in range(101)]
    peak, bandwidth = roofline.peak_flops / 1e12, roofline.bandwidth / 1e12
    traces.append({"type": "scatter", "mode": "lines", "name": "roof", "x": grid, "y": [min(peak, x * bandwidth) for x in grid],
                   "line": {"color": "black"}, "hoverinfo": "skip"})  # fmt: skip
    layout = {"xaxis": _axis("Arithmetic intensity (FLOP/byte)"), "yaxis": _axis("Achieved throughput (TFLOP/s)"), "height": 480,
              "title": {"text": f"Roofline on {roofline.hardware.label}"}}  # fmt: skip
    data = plotly_json(traces)
    return f"<div id='roofline'></div><script>Plotly.newPlot('roofline',{data},{plotly_json(layout)})</script>" + _roofline_caption(profile)


def _activation_chart(profile: Profile) -> str:
    """Train mode: bytes each layer saves for backward (bars) and their running sum (line), in MiB."""
    rows = [r for r in profile.layers if r.saved_bytes]
    if profile.mode is not Mode.TRAIN or not rows:
        return (
            "<p class='muted'>Activation memory by layer: a training profile (--mode train) shows what each layer saves for backward.</p>"
        )
    names = [r.name for r in rows]
    mib = [r.saved_bytes / 2**20 for r in rows]
    running = [sum(mib[: i + 1]) for i in range(len(mib))]
    traces = [
        {"type": "bar", "name": "saved by the layer", "x": names, "y": mib, "hovertemplate": "%{x}: %{y:.2f} MiB<extra></extra>"},
        {"type": "scatter", "mode": "lines", "name": "held so far", "x": names, "y": running, "yaxis": "y2",
         "hovertemplate": "after %{x}: %{y:.2f} MiB<extra></extra>"},
    ]  # fmt: skip
    layout = {"xaxis": {**_axis("Layer (execution order)", log=False), "showticklabels": len(names) <= 60},
              "yaxis": _axis("Saved by the layer (MiB)", log=False),
              "yaxis2": {**_axis("Held for backward so far (MiB)", log=False), "overlaying": "y", "side": "right"},
              "height": 420, "title": {"text": "Activation memory: bytes saved for backward, by layer"}}  # fmt: skip
    peak = f"{_num(profile.peak_activation_bytes, 'B')}" + (f" at {profile.peak_activation_layer}" if profile.peak_activation_layer else "")
    caption = f"Saved for backward: {_num(profile.saved_activation_bytes, 'B')} in all; the run's activation peak: {peak}."
    return (f"<div id='activations'></div><script>Plotly.newPlot('activations',{plotly_json(traces)},{plotly_json(layout)})</script>"
            f"<p class='muted' id='activations-caption'>{html.escape(caption)}</p>")  # fmt: skip


def _graph_svg(profile: Profile, graph: Any) -> str:
    dot = shutil.which("dot")
    if graph is None or dot is None:
        return "<p class='muted'>Module graph: not drawn (Graphviz's `dot` is not installed, or no graph was built).</p>"
    from graphprof.graph.export import to_dot

    done = subprocess.run([dot, "-Tsvg"], input=to_dot(graph, 1), capture_output=True, text=True, check=False)
    svg = done.stdout[done.stdout.find("<svg") :] if done.returncode == 0 else ""
    return (
        f"<div id='graph' style='overflow:auto;max-height:40em'>{svg}</div>"
        if svg
        else "<p class='muted'>Graphviz failed to draw the graph.</p>"
    )


def render_profile_html(profile: Profile, *, graph: Any = None) -> str:
    """The page of one profile (see the module docstring), with the roofline it carries; ``graph`` is its
    module graph, drawn when given."""
    unsupported = "".join(f"<li>{html.escape(u.op)} x{u.count}</li>" for u in profile.unsupported) or "<li>none</li>"
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in profile.notes)
    body = (
        _cards(profile) + "<h2>Module tree</h2>" + _tree(profile) + "<h2>Roofline</h2>" + _roofline_chart(profile)
        + "<h2>Activation memory</h2>" + _activation_chart(profile)
        + "<h2>Layers</h2>" + _layer_table(profile) + "<h2>Aten ops</h2>" + _op_table(profile) + _prediction(profile)
        + "<h2>Module graph</h2>" + _graph_svg(profile, graph) + f"<h2>Unsupported ops</h2><ul id='unsupported'>{unsupported}</ul>"
        + f"<h2>Notes</h2><ul>{notes}</ul>"
    )  # fmt: skip
    return _page(f"graphprof: {profile.model_name}", body)


#: The unit each sweep metric is drawn in, on its own axis.
_SWEEP_UNITS = {
    "params": "parameters", "macs": "MACs", "flops": "FLOPs", "bytes": "bytes moved", "peak_activation_bytes": "bytes",
    "estimated_seconds": "seconds (roofline lower bound)", "measured_seconds": "seconds (measured)",
}  # fmt: skip


def _sweep_conditions(sweep: Any) -> str:
    """Where a sweep's figures hold: the device (or none: counts only) and the inputs' dtypes."""
    dtypes = sorted({word for row in sweep.rows for word in row.inputs.split() if word.startswith(("float", "bfloat", "int", "bool"))})
    device = f"times on {sweep.hardware} (roofline lower bounds)" if sweep.hardware else "no device: counts only"
    measured = "; measured on this machine" if sweep.measured else ""
    return f"{device}{measured}; inputs in {', '.join(dtypes) or 'the model’s own dtypes'}"


def render_sweep_html(sweep: Any) -> str:
    """The page of one sweep: its table and one log-log chart per metric (each in its own unit), with the
    fitted exponent; the title says the device and the inputs' dtypes."""
    metrics = [m for m in ("params", "macs", "flops", "bytes", "peak_activation_bytes", "estimated_seconds", "measured_seconds")
               if any(r.metric(m) for r in sweep.rows)]  # fmt: skip
    rows = [[(str(r.value), r.value)] + [(_num(r.metric(m)), r.metric(m) or 0) for m in metrics] for r in sweep.rows]
    conditions = _sweep_conditions(sweep)
    charts = ""
    for m in metrics:
        xs, ys = sweep.series(m)
        fit = sweep.fits().get(m)
        title = f"{m}" + (f" ~ x^{fit.exponent:.2f}" if fit is not None else "") + f" ({conditions})"
        trace = {"type": "scatter", "mode": "lines+markers", "name": m, "x": xs, "y": ys}
        layout = {"title": {"text": html.escape(title)}, "xaxis": _axis(sweep.label), "yaxis": _axis(_SWEEP_UNITS[m]), "height": 360}
        charts += f"<div id='growth-{m}'></div><script>Plotly.newPlot('growth-{m}',{plotly_json([trace])},{plotly_json(layout)})</script>"
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in sweep.notes)
    return _page(
        f"graphprof sweep: {sweep.model} over {sweep.label}: {conditions}",
        charts + "<h2>Points</h2>" + _table("points", ["value", *metrics], rows) + f"<ul>{notes}</ul>",
    )


def render_compare_html(rows: Sequence[Any]) -> str:
    """The page of a comparison: one row per model (:func:`graphprof.render.compare.comparison_rows`)."""
    headers = ["model", "params", "MACs", "FLOPs", "bytes", "FLOP/B", "lower bound", "error"]
    cells = [
        [(r.model, r.model), (_num(r.params), r.params or 0), (_num(r.macs), r.macs or 0), (_num(r.flops), r.flops or 0),
         (_num(r.memory, "B"), r.memory or 0), (_intensity(r.arithmetic_intensity), r.arithmetic_intensity or 0),
         (_seconds(r.estimated_time_s), r.estimated_time_s or 0), (r.error or "", r.error or "")]
        for r in rows
    ]  # fmt: skip
    traces = [{"type": "bar", "name": "FLOPs", "x": [r.model for r in rows], "y": [r.flops or 0 for r in rows]}]
    chart = f"<div id='bars'></div><script>Plotly.newPlot('bars',{plotly_json(traces)},{{'height':360}})</script>"
    return _page("graphprof compare", chart + _table("models", headers, cells))


def render_plan_html(plan: Any) -> str:
    """The page of a partition plan: its stages (device, layers, compute, transfer, memory) and their times."""
    headers = ["stage", "device", "layers", "params", "compute", "receive", "memory", "capacity"]
    cells = [
        [(str(s.index), s.index), (s.device, s.device), (f"{s.first} .. {s.last}", s.start), (_num(s.params), s.params),
         (_seconds(s.compute_s), s.compute_s), (_seconds(s.receive_s), s.receive_s), (_num(s.memory_bytes, "B"), s.memory_bytes),
         (_num(s.capacity_bytes, "B"), s.capacity_bytes)]
        for s in plan.stages
    ]  # fmt: skip
    labels = [f"{s.index}: {s.device}" for s in plan.stages]
    traces = [
        {"type": "bar", "name": "compute", "x": labels, "y": [s.compute_s * 1e3 for s in plan.stages]},
        {"type": "bar", "name": "receive", "x": labels, "y": [s.receive_s * 1e3 for s in plan.stages]},
    ]
    layout = {"barmode": "stack", "height": 360, "xaxis": _axis("Stage", log=False), "yaxis": _axis("Time per micro-batch (ms)", log=False)}
    chart = f"<div id='stages'></div><script>Plotly.newPlot('stages',{plotly_json(traces)},{plotly_json(layout)})</script>"
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in plan.notes)
    title = f"graphprof partition: {plan.model_name} ({plan.objective})"
    return _page(title, chart + _table("stages-table", headers, cells) + f"<ul>{notes}</ul>")


def render_html(result: Any) -> str:
    """The HTML page of any result that has one: a profile, a sweep, a comparison (a list of outcomes or of
    rows) or a partition plan. What ``_repr_html_`` shows in a notebook."""
    from graphprof.compare.models import comparison_rows
    from graphprof.partition.plan import Plan
    from graphprof.scaling.result import Sweep

    if isinstance(result, Profile):
        return render_profile_html(result)
    if isinstance(result, Sweep):
        return render_sweep_html(result)
    if isinstance(result, Plan):
        return render_plan_html(result)
    if isinstance(result, list) and all(hasattr(o, "profile") and hasattr(o, "spec") for o in result):
        from graphprof.compare.models import ModelFailure

        entries = [o.profile if o.profile is not None else ModelFailure(o.spec, str(o.error)) for o in result]
        return render_compare_html(comparison_rows(entries))
    raise TypeError(f"no HTML page for {type(result).__name__}")

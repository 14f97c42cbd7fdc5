"""``graphprof calibrate``: measure this machine, fit the prediction model, store the ``local`` preset.

Example::

    >>> from graphprof.calibrate import calibrate          # doctest: +SKIP
    >>> preset = calibrate()                               # ~7 min on a 2-core CPU (quick=True: about one); writes ~/.cache/graphprof/local.json
    >>> preset.hardware.peak_flops("float32")              # the fastest FLOP rate this machine showed

The preset's peak per dtype is the fastest FLOP rate any benchmark reached, and its bandwidth the fastest
byte rate: so its roofline is a lower bound that no op measured here beat. The prediction model
(:mod:`graphprof.devices.predict`) is fitted to the same table by :func:`graphprof.calibrate.fit.fit_op_table`.
The thread count (``torch.get_num_threads()``) and the load average before and after are stored with
it: a prediction holds for that thread count, and a loaded machine measures slow.
"""

from __future__ import annotations

import datetime
import functools
import itertools
import math
import os
import platform
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import torch

from graphprof.calibrate.bench import Progress, kind_benchmarks, measure_benchmarks, measure_op_table
from graphprof.calibrate.fit import fit_op_table
from graphprof.calibrate.fit_ops import fit_op_model, worst_kinds
from graphprof.calibrate.fresh_faults import PROCESSES, FreshForward, elasticity, fault_cost, fresh_forward, merged, strays
from graphprof.calibrate.samples import fault_split, first_touch_of, samples_from_context, samples_from_table
from graphprof.calibrate.speed import SpeedTrack, at_speed
from graphprof.calibrate.store import check_preset_path, write_preset
from graphprof.devices.hardware import PRECISIONS, Hardware, local_hardware, match_hardware
from graphprof.devices.local import LOCAL, cpu_model, load_average, missing_local_message, read_local
from graphprof.devices.opmodel import FirstTouch, OpModel, Sample
from graphprof.devices.probe import speed_factor
from graphprof.devices.table import Calibration
from graphprof.errors import InvalidInputError
from graphprof.measure.run import resolve_device

if TYPE_CHECKING:
    from graphprof.measure.context import ContextTimes

__all__ = ["CALIBRATION_MODELS", "QUICK_MODELS", "LocalPreset", "calibrate", "loadavg", "preset_from_table", "load_local",
           "measure_default_hardware", "faulting_share", "fresh_forwards", "zoo_samples", "ZooTimes", "anchored", "anchors_of", "at_table", "in_forward_cost"]  # fmt: skip

#: The zoo models whose ops the full calibration times in place, ``(name, batch)``: each family at batch 1
#: and a large batch (where activations outgrow the caches and the allocator's limit), none of them a model
#: of benchmarks/bench_predict.py, never used to judge the fit.
CALIBRATION_MODELS = (
    ("squeezenet1_1", 1), ("squeezenet1_1", 8), ("mobilenet_v2", 1), ("mobilenet_v2", 8), ("shufflenet_v2_x1_0", 1),
    ("shufflenet_v2_x1_0", 8), ("mnasnet0_5", 1), ("mnasnet0_5", 8), ("regnet_x_400mf", 1), ("regnet_x_400mf", 8),
    ("efficientnet_b1", 1), ("efficientnet_b1", 8), ("resnet34", 1), ("resnet34", 8), ("densenet121", 1), ("densenet121", 8),
    ("vit_b_16", 1), ("vit_b_16", 8), ("swin_v2_t", 1), ("swin_v2_t", 8), ("maxvit_t", 1), ("maxvit_t", 4),
)  # fmt: skip
#: How many times the full calibration times its zoo models, every pass's samples kept (see :func:`zoo_samples`).
ZOO_PASSES = 2
#: ``--quick``: fewer models, batch 1 only.
QUICK_MODELS = (("mobilenet_v2", 1), ("shufflenet_v2_x1_0", 1), ("regnet_x_400mf", 1), ("vit_b_16", 1), ("resnet34", 1))
#: Adaptive sampling: after the first fit, this many new grid configurations of each of the worst kinds.
ADAPTIVE_KINDS, ADAPTIVE_PER_KIND = 4, 10


@dataclass(frozen=True)
class LocalPreset:
    """The calibrated machine: its :class:`Hardware`, the fitted :class:`Calibration`, what was measured."""

    hardware: Hardware
    calibration: Calibration
    device: Mapping[str, Any]
    path: Path | None = None

    def to_dict(self, table: Mapping[str, Any] | None = None) -> dict[str, Any]:
        out = {"hardware": self.hardware.to_dict(), "calibration": self.calibration.to_dict(), "device": dict(self.device)}
        return out if table is None else {**out, "table": dict(table)}


def loadavg() -> str | None:
    """The 1, 5 and 15 minute load averages as ``/proc/loadavg`` writes them (``"1.20 0.85 0.40"``), from
    :func:`graphprof.devices.local.load_average`; None where there is none."""
    load = load_average()
    return None if load is None else " ".join(f"{v:.2f}" for v in load)


def _device_name(dev: torch.device) -> str:
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    return platform.processor() or platform.machine() or "CPU"


class ZooTimes(NamedTuple):
    """What the sample models' forwards gave: their calls' samples, each forward's share outside its calls, and
    each forward's :func:`~graphprof.calibrate.samples.fault_split` (bytes faulted, bytes exposed) with its dry
    run's peak of live activation bytes."""

    samples: list[Sample]
    outside: list[float]
    faults: list[tuple[float, float, float]]


#: A calibration's speed track (none off the CPU) and the factor the op grid's times take.
Speed = tuple[SpeedTrack | None, float]


def zoo_samples(
    models: tuple[tuple[str, int], ...],
    progress: Progress | None = None,
    first_touch: FirstTouch | None = None,
    passes: int = 1,
    track: SpeedTrack | None = None,
    anchors: Mapping[tuple[str, int], FreshForward] | None = None,
) -> ZooTimes:
    """Samples of each ``(zoo model, batch)``'s forward calls timed where they run (its plain forward
    profiled: :func:`graphprof.measure.context.context_times`, paired with its dry run), without what fresh
    pages cost them; each forward's share outside its calls, and the bytes it faulted. A model that fails is
    skipped.

    With ``passes`` above 1 the models are timed that many times over, one pass after the other, and every
    pass's samples are kept (the fit averages them): on this 2-core machine two identical passes differed
    by up to 30% a model (mobilenet_v2 at batch 1: 17.0 and 12.7 ms; maxvit_t at batch 4: 434 and 563 ms),
    and a user's forward lands anywhere in that spread. (Keeping each model's faster pass instead made the
    predictions 9% too fast at the median on the held-out benchmark, and two calibrations up to 28% apart.)

    With a ``track``, each model's samples are brought to its reference speed (:mod:`graphprof.calibrate.speed`).
    A model with an ``anchor`` (its forward in a fresh process, :mod:`graphprof.calibrate.fresh_faults`) has its
    calls brought to sum to that forward's time instead of this process's, and to the reference speed by the
    probe read around it there: each pass keeps its own shares of the time, and the time is the user's; its plain
    forward and faults are not timed again here (``context_times(..., plain=False)``: about a third of the forwards
    of a pass saved), and the anchor's faults stand for it."""
    from graphprof.measure.context import context_times
    from graphprof.prepared import prepare

    prepared: dict[str, Any] = {}  # each model captured once, run at each of its batches
    profiles: dict[tuple[str, int], Any] = {}  # each model's dry run at each batch, made once
    out = ZooTimes([], [], [])
    for i, (name, batch) in enumerate([m for _ in range(passes) for m in models], start=1):
        if progress is not None:
            progress(i, len(models) * passes, f"{name} batch {batch}")
        anchor = (anchors or {}).get((name, batch))
        try:
            model = prepared.get(name) or prepared.setdefault(name, prepare(name, batch_size=batch))
            call = model.resolve(model.spec(batch_size=batch))
            timing = functools.partial(
                context_times, model.model, call.args, call.kwargs, device="cpu", dtype=call.dtype, runs=3, plain=anchor is None
            )
            times, factor = track.timed(timing) if track is not None else (timing(), 1.0)
            profile = profiles.get((name, batch)) or profiles.setdefault((name, batch), model.profile(batch_size=batch))
        except Exception:  # noqa: BLE001 - a model missing here (no timm, an old torchvision) only samples less
            continue
        if anchor is not None:  # its plain forward and faults are the fresh process's: not timed again here
            times, factor = anchored(times, anchor, track)
        out.outside.append(times.outside_s / times.forward_s)
        out.samples.extend(at_speed(samples_from_context(profile, times, group=name, first_touch=first_touch), factor))
        if first_touch is not None and anchor is not None:
            out.faults.append(anchor.faults)
        elif first_touch is not None:
            out.faults.append((*fault_split(profile, times.fault_bytes, first_touch), float(profile.peak_activation_bytes)))
    return out


def faulting_share(touch: FirstTouch | None, faults: Sequence[tuple[float, float, float]]) -> FirstTouch | None:
    """``touch`` with where the sample models' forwards start to fault below its limit and how much: each forward
    is ``(bytes faulted, bytes exposed, dry-run peak of live activations)``. The trim peak
    (:attr:`~graphprof.devices.opmodel.FirstTouch.trim_peak_bytes`) is the split of the forwards by their peaks
    that leaves the least faulted bytes unexplained, when those at or above it fault their share (all their bytes
    faulted over all their bytes exposed, at most 1) and those below it none; as it was without a measured forward.

    Worked example: forwards peaking at 24, 48 and 56 MB that faulted 0, 0 and 24 of 100 exposed MB each split
    best between 48 and 56 MB (nothing unexplained): trim peak 52 MB, share 0.24; one split lower (36 MB) the
    share would be 0.12 and leave 24 MB unexplained (12 + 12)."""
    if touch is None or sum(b for _, b, _ in faults) <= 0:
        return touch
    peaks = sorted({p for _, _, p in faults})
    scored = [(*_split_at(faults, cut), cut) for cut in [0.0, *((lo + hi) / 2 for lo, hi in itertools.pairwise(peaks))]]
    least = min(unexplained for unexplained, _, _ in scored)
    # the lowest cut among the best (a tie prices the faults where the evidence cannot tell)
    _, share, cut = next(s for s in scored if s[0] <= least * (1 + 1e-9) + 1e-6)
    return replace(touch, share_below=share, trim_peak_bytes=cut)


def _split_at(faults: Sequence[tuple[float, float, float]], cut: float) -> tuple[float, float]:
    """``(unexplained bytes, share)`` of the forwards split at the peak ``cut``: the share is what those at or above
    it faulted over what they exposed (at most 1); unexplained, how far each forward's faulted bytes lie from its
    share of its exposed bytes (none below the cut)."""
    above = [(a, b) for a, b, p in faults if p >= cut]
    exposed = sum(b for _, b in above)
    share = min(sum(a for a, _ in above) / exposed, 1.0) if exposed > 0 else 0.0
    return sum(abs(a - (share * b if p >= cut else 0.0)) for a, b, p in faults), share


def _fit_adaptive(
    table: Mapping[str, Any], zoo: ZooTimes, models: list[str], progress: Progress | None, speed: Speed, touch: FirstTouch | None
) -> OpModel:
    """Fit, then sample more of the kinds whose held-out error is widest, and fit again (the grid's and the
    extra samples' times at the track's reference speed: ``speed`` is the track and the grid's factor), with the
    first-touch term ``touch`` and the share its sample forwards faulted."""
    track, grid_factor = speed
    touch = faulting_share(touch, zoo.faults)
    samples = at_speed(samples_from_table(table), grid_factor) + zoo.samples
    first = fit_op_model(samples, models, touch)
    benchmarks = kind_benchmarks(worst_kinds(first, ADAPTIVE_KINDS), ADAPTIVE_PER_KIND)
    timing = functools.partial(measure_benchmarks, benchmarks, "cpu", progress)
    extra, factor = track.timed(timing) if track is not None else (timing(), 1.0)
    more = at_speed(samples_from_table({"floors": table["floors"], "records": extra}, group_prefix="adaptive"), factor)
    if track is not None:  # every sample from the first reading's speed to the table's (graphprof.calibrate.speed)
        samples, more = at_speed(samples, track.to_table()), at_speed(more, track.to_table())
        touch = at_table(touch, track)  # and what a fault costs with them
    fitted = fit_op_model(samples + more, models, touch) if more or track is not None else first
    share = statistics.median(zoo.outside) if zoo.outside else None
    return replace(fitted, accuracy={**fitted.accuracy, "outside_share": share})


def _op_model(table: Mapping[str, Any], quick: bool, progress: Progress | None, speed: Speed = (None, 1.0)) -> OpModel:
    """The CPU's per-kind models from the grid and the zoo's ops timed in place (see the module docstring),
    at the reference speed of ``speed``'s track (with the factor the grid's times take)."""
    models = QUICK_MODELS if quick else CALIBRATION_MODELS

    def stage(name: str) -> Progress | None:
        return None if progress is None else (lambda done, total, what: progress(done, total, f"{name}: {what}"))

    touch = first_touch_of(table)
    runs = {} if quick else fresh_forwards(models, touch, stage("fresh processes"))  # as the user's process runs them
    fresh, processes = anchors_of(runs, speed[0])  # at the speed of a user's fresh process (graphprof.calibrate.speed)
    touch, cost = in_forward_cost(touch, fresh, speed[0])
    zoo = zoo_samples(models, stage("models"), touch, passes=1 if quick else ZOO_PASSES, track=speed[0], anchors=fresh)
    faults = [run.faults for (_, batch), run in fresh.items() if batch > 1]
    if touch is not None and faults:  # the share a user's fresh process faults, not this process's
        zoo = zoo._replace(faults=faults)
    fitted = _fit_adaptive(table, zoo, sorted({name for name, _ in models}), stage("adaptive"), speed, touch)
    if not fresh:
        return fitted
    # each sample model's anchor, kept in the file: what sets the table's speed, to hold two calibrations side by side
    if cost.get("forward_per_byte_s") is not None and speed[0] is not None:  # as priced: at the table's speed
        cost = {**cost, "forward_per_byte_s": cost["forward_per_byte_s"] * speed[0].to_table()}
    anchors = {f"{name}@{batch}": {"forward_s": run.forward_s, "probe_s": run.probe_s, "fault_bytes": run.fault_bytes,
                                   "saved_s": run.saved_s, "processes": [list(_kept(r)) for r in runs[name, batch]]}
               for (name, batch), run in fresh.items()}  # fmt: skip
    return replace(fitted, accuracy={**fitted.accuracy, "anchors": anchors, "fault_cost": cost, "fresh_processes": processes})


#: The in-forward cost of a fault is taken where it lies within these factors of the ladder's (outside, the
#: ladder's stands: the pooled difference of two timings went astray).
FAULT_COST_RANGE = (0.5, 3.0)


def in_forward_cost(
    touch: FirstTouch | None, fresh: Mapping[tuple[str, int], FreshForward], track: SpeedTrack | None
) -> tuple[FirstTouch | None, dict[str, Any]]:
    """``touch`` pricing a faulted byte at what it cost inside the sample models' fresh forwards
    (:func:`~graphprof.calibrate.fresh_faults.fault_cost`, each at the track's reference speed) instead of the
    first-touch ladder's lone loop, and what was found: ``{"ladder_per_byte_s", "forward_per_byte_s", "used"}``.
    The ladder's stands where nothing was measured or the figure lies outside :data:`FAULT_COST_RANGE` of it.
    Measured on this 2-core machine by ``benchmarks/bench_fault_cost.py``: 1.4-1.6x the ladder's 0.237 ns."""
    if touch is None:
        return None, {}
    measured = fault_cost([(run, _to_reference(run, track)) for run in fresh.values()])
    low, high = FAULT_COST_RANGE
    used = measured is not None and low * touch.per_byte_s <= measured <= high * touch.per_byte_s
    found = {"ladder_per_byte_s": touch.per_byte_s, "forward_per_byte_s": measured, "used": used}
    return (replace(touch, per_byte_s=measured) if used and measured is not None else touch), found


def at_table(touch: FirstTouch | None, track: SpeedTrack) -> FirstTouch | None:
    """``touch`` with what a fault costs brought from the track's reference speed to the table's, as every sample
    is (:meth:`~graphprof.calibrate.speed.SpeedTrack.to_table`). The in-forward cost is measured at the reference
    speed (:func:`in_forward_cost`), the first reading of the probe: one calibration here read 0.501 ms first and
    0.292 ms at the median of its fresh processes, and its faults, left at the first reading's speed, were priced
    1.38x what the table's ops around them were (0.411 ns a byte against 0.298).

    Worked example: 0.40 ns a byte at a first reading of 0.50 ms, a table at 0.30 ms:
    ``0.40 x (0.30 / 0.50) ** 0.6 = 0.294`` ns."""
    return None if touch is None else replace(touch, per_byte_s=touch.per_byte_s * track.to_table())


def _kept(run: FreshForward) -> tuple[float, float, float, float]:
    """What the file keeps of one fresh process: ``(forward_s, probe_s, fault_bytes, saved_s)`` (its faults and what
    they cost it, so that two calibrations' anchors can be told apart by their processes' faults as well as speeds)."""
    return run.forward_s, run.probe_s, run.fault_bytes, run.saved_s


def anchored(times: ContextTimes, anchor: FreshForward, track: SpeedTrack | None) -> tuple[ContextTimes, float]:
    """``times`` whose plain forward is ``anchor``'s (a fresh process's), and the factor that brings it from the
    speed the probe read there to ``track``'s reference (1 without a track, or where the two readings lie
    outside :data:`~graphprof.devices.probe.SPEED_LIMITS` of each other).

    Worked example: a forward of 54 ms in a fresh process whose probe read 0.30 ms, against a reference
    reading of 0.40 ms: the calls sum to 54 ms, times ``(0.40 / 0.30) ** 0.6 = 1.188`` (the probe's
    :data:`~graphprof.devices.probe.SPEED_ELASTICITY`): 64.2 ms at the reference speed."""
    return replace(times, forward_s=anchor.forward_s), _to_reference(anchor, track)


def _to_reference(anchor: FreshForward, track: SpeedTrack | None) -> float:
    """The factor that brings a fresh process's times from the speed its probe read to ``track``'s reference (1
    without a track, or where the two readings lie outside the probe's limits of each other)."""
    ratio = None if track is None else speed_factor(anchor.probe_s, track.reference_s)
    return 1.0 if ratio is None else ratio


def fresh_forwards(
    models: Sequence[tuple[str, int]], touch: FirstTouch | None, progress: Progress | None = None, processes: int = PROCESSES
) -> dict[tuple[str, int], list[FreshForward]]:
    """Each model's forward in ``processes`` fresh processes (:mod:`graphprof.calibrate.fresh_faults`), one model
    after the other and then again (a slow spell does not take every process of one model), then once more each
    process that ran in a slow spell where most of its model's did (:func:`~graphprof.calibrate.fresh_faults.strays`),
    which its second run replaces where that one's probe lies nearer the median; a model that fails in every process is left out. Each
    process's faults split at ``touch``'s limit (none without one), its time and the probe."""
    limit, least = (math.inf, 2.0**20) if touch is None else (touch.limit_bytes, touch.min_bytes)
    blocks = (0, 0) if touch is None else (touch.conv_block, touch.threads)
    order = [m for _ in range(processes) for m in models]
    done: list[tuple[int, FreshForward]] = []
    for i, point in enumerate(order):
        if progress is not None:
            progress(i + 1, len(order), f"{point[0]} batch {point[1]} (a fresh process)")
        run = fresh_forward(*point, limit, least, blocks)
        if run is not None:
            done.append((i, run))
    again = strays([(order[i], run) for i, run in done])
    median = statistics.median([r.probe_s for _, r in done]) if done else 0.0
    for n, place in enumerate(again, start=1):
        i, stray = done[place]
        if progress is not None:
            progress(n, len(again), f"{order[i][0]} batch {order[i][1]} (again: its probe read {stray.probe_s / median:.2f}x the median)")
        rerun = fresh_forward(*order[i], limit, least, blocks)
        if rerun is not None and rerun.probe_s > 0 and abs(math.log(rerun.probe_s / median)) < abs(math.log(stray.probe_s / median)):
            done[place] = (i, rerun)
    runs: dict[tuple[str, int], list[FreshForward]] = {}
    for i, run in done:
        runs.setdefault(order[i], []).append(run)
    return runs


def anchors_of(
    runs: Mapping[tuple[str, int], Sequence[FreshForward]], track: SpeedTrack | None
) -> tuple[dict[tuple[str, int], FreshForward], dict[str, Any]]:
    """Each sample model's anchor (:func:`~graphprof.calibrate.fresh_faults.merged`) at the speed of a user's fresh
    process, and what the file keeps of the processes: ``{"count", "probe_s", "elasticity"}``, that speed being the
    median probe of every process (:attr:`~graphprof.calibrate.speed.SpeedTrack.table_s`, which ``track`` takes) and
    the elasticity the one their forwards followed their probes with
    (:func:`~graphprof.calibrate.fresh_faults.elasticity`)."""
    probes = [r.probe_s for found in runs.values() for r in found if r.probe_s > 0]
    if track is not None:
        track.fresh_s = probes
    at_s = statistics.median(probes) if probes else 0.0
    follows = elasticity(runs.values())
    found = {"count": sum(len(got) for got in runs.values()), "probe_s": at_s, "elasticity": follows}
    return {point: merged(got, at_s, follows) for point, got in runs.items()}, found


def preset_from_table(table: Mapping[str, Any], device: Mapping[str, Any], op_model: OpModel | None = None) -> LocalPreset:
    """The ``local`` preset of a measured op table: peaks and bandwidth from its fastest records, then the fit
    (which the hardware carries, as :func:`load_local` gives it)."""
    peaks: dict[str, float] = {}
    best_bytes = 0.0
    for r in table["records"]:
        if r["dtype"] in PRECISIONS:
            peaks[r["dtype"]] = max(peaks.get(r["dtype"], 0.0), r["flops"] / r["seconds"] / 1e12)
        best_bytes = max(best_bytes, r["bytes"] / r["seconds"] / 1e9)
    if "float32" not in peaks or best_bytes <= 0:
        raise InvalidInputError("the op table has no float32 records: nothing to calibrate from")
    threads = device.get("threads")
    hardware = Hardware(
        name=LOCAL,
        label=f"{device.get('name', 'this machine')} (calibrated, {threads} threads)",
        kind=f"local {device.get('type', 'cpu')}",
        peak_tflops=peaks,
        bandwidth_gbs=best_bytes,
        source=f"measured by `graphprof calibrate` at {device.get('measured_at', '?')} (load {device.get('loadavg_before', '?')}): "
        "the fastest FLOP and byte rates of its op table",
    )
    calibration = fit_op_table(
        table, hardware, preset=LOCAL, kind=str(device.get("type", "cpu")),
        source=f"fitted by graphprof.calibrate from {len(table['records'])} records on {hardware.label}",
    )  # fmt: skip
    if op_model is not None:
        calibration = replace(calibration, op_model=op_model, overlap=0.0)
    return LocalPreset(replace(hardware, calibration=calibration, measured=device), calibration, device)


def calibrate(
    device: str | torch.device = "cpu",
    *,
    output: Path | None = None,
    progress: Progress | None = None,
    threads: int | None = None,
    quick: bool = False,
) -> LocalPreset:
    """Measure ``device`` (CPU, or CUDA when present), fit, and write the ``local`` preset to ``output``
    (default ``$XDG_CACHE_HOME/graphprof/local.json``). ``threads`` sets torch's thread count while
    measuring (restored after); it is recorded either way."""
    dev = resolve_device(device)  # an unknown device, or CUDA without a GPU: one line, exit 2
    if threads is not None and (isinstance(threads, bool) or threads < 1):
        raise InvalidInputError(f"threads must be a positive integer, got {threads!r}")
    check_preset_path(output)  # a link where local.json should be: refused now, not after minutes of measuring
    before_threads = torch.get_num_threads()
    load_before = loadavg()
    start = time.perf_counter()
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        grid = functools.partial(
            measure_op_table, dev, progress=None if progress is None else (lambda d, t, w: progress(d, t, f"op grid: {w}"))
        )
        track = SpeedTrack.start() if dev.type == "cpu" else None  # the machine's speed while it is measured
        table, grid_factor = track.timed(grid) if track is not None else (grid(), 1.0)
        op_model = _op_model(table, quick, progress, (track, grid_factor)) if dev.type == "cpu" else None
        used_threads = torch.get_num_threads()
    finally:
        torch.set_num_threads(before_threads)
    load_after = loadavg()
    info = {
        "type": dev.type, "name": _device_name(dev) if dev.type == "cuda" else cpu_model(), "threads": used_threads,
        "cpu_count": os.cpu_count(), "torch": torch.__version__, "loadavg_before": load_before, "loadavg_after": load_after,
        "seconds": round(time.perf_counter() - start, 1),
        "measured_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }  # fmt: skip
    if track is not None:  # the speed the samples were brought to (graphprof.calibrate.speed), and every reading
        info["probe_s"] = track.table_s
        info["probes_s"] = track.readings_s
        if track.fresh_s:  # what the fresh processes read: with probes_s, the band of speeds a prediction is not scaled in
            info["fresh_probes_s"] = track.fresh_s
    busy = busy_reason(load_before, load_after)
    if busy:
        info["busy"] = busy  # written with the figures, and repeated by every prediction that uses them
    preset = preset_from_table(table, info, op_model)
    path = write_preset(preset.to_dict(table), output)
    return LocalPreset(preset.hardware, preset.calibration, preset.device, path)


def busy_reason(before: str | None, after: str | None, cores: int | None = None) -> str | None:
    """Why a calibration measured a busy machine: the 1-minute load average before or after it above the
    machine's cores (other processes' work then runs in its timings), else ``None``.

    >>> busy_reason("6.90 3.10 1.00", "0.50 0.40 0.30", cores=2)
    'the load average was 6.90 with 2 cores while it measured: its times include other processes\' work'
    >>> busy_reason("0.90 0.50 0.40", "1.20 0.60 0.40", cores=2) is None
    True
    """
    cores = cores or os.cpu_count() or 1
    loads = [float(text.split()[0]) for text in (before, after) if text]
    if not loads or max(loads) <= cores:
        return None
    return f"the load average was {max(loads):.2f} with {cores} cores while it measured: its times include other processes' work"


def load_local(path: Path | None = None) -> LocalPreset | None:
    """The stored ``local`` preset, or ``None`` when ``graphprof calibrate`` has not been run. Its file is read
    once: the hardware carries the calibration (with what it learned) and its notes
    (:func:`graphprof.devices.hardware.local_hardware`)."""
    data = read_local(path)
    if data is None:
        return None
    return LocalPreset(local_hardware(data, path), Calibration.from_dict(data["calibration"]), data.get("device", {}), path)


def measure_default_hardware(device_type: str, device_name: str | None = None) -> tuple[Hardware | None, str]:
    """The device a measurement without ``--hardware`` is compared with, and one line saying which and why.

    The ``local`` preset when it was calibrated on this kind of device (and, for CUDA, this GPU); else,
    on CUDA, the preset whose name the GPU's contains; else ``None``, with the line saying how to get one.
    """
    preset = load_local()
    if preset is not None:
        same = preset.device.get("type") == device_type and (device_type != "cuda" or preset.device.get("name") == device_name)
        if same:
            threads = preset.device.get("threads")
            now = torch.get_num_threads() if device_type == "cpu" else threads
            extra = f"; calibrated with {threads} threads, this run has {now}" if now != threads else ""
            return (
                preset.hardware,
                f"estimate and prediction: the local calibration ({preset.device.get('measured_at')}{extra}); --hardware picks another device",
            )
    matched = match_hardware(device_name) if device_type == "cuda" and device_name else None
    if matched is not None:
        return (
            matched,
            f"estimate and prediction: the {matched.name} preset, matched to {device_name} by name; `graphprof calibrate --device cuda` measures this GPU itself",
        )
    return (None, missing_local_message() + " for an estimate and a predicted time on this device; --hardware picks a preset")

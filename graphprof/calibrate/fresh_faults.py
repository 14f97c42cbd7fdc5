"""A sample model's forward as a user's process runs it: a fresh process, the dry run, then plain forwards (the
order of ``graphprof --model M --measure``): the page faults they take, the time they take, and the speed probe.

**Faults.** The calibration's own process has run many models by the time it times one, and its heap faults far
less: on this 2-core machine the sample models' batch-8 forwards faulted 3.8% of the bytes of their outputs
between 1 MiB and the allocator's limit there, where a fresh ``graphprof --measure`` of efficientnet_b3 at batch 8
faulted 726 MB a forward, about 20% of those bytes. The share a prediction prices
(:attr:`graphprof.devices.opmodel.FirstTouch.share_below`) is therefore measured here, at each sample model's
large batch; the samples themselves lose the faults their own process counted.

**Time.** The figure a user holds a prediction against is the mean of ``--iters 10`` plain forwards in a new
process, and the calibration's long-running process does not time forwards as one does: on a 2-core AMD EPYC VM
its passes of resnet34 at batch 1 ran 64.9 and 88.7 ms where new processes ran 54-56 ms, and the speed probe
read around them (0.29-0.50 ms) moved them further off. So each sample model's forward is timed here too, as
``--measure`` times it (:data:`TIMED` forwards, their mean), with the probe's median of five readings
(:func:`graphprof.devices.probe.probe_now`) taken before and after; the calibration brings that model's
samples to this time at its own speed (:func:`graphprof.calibrate.preset.zoo_samples`). One process strays by tens
of percent here, so each model runs in :data:`PROCESSES` of them, merged into one anchor (:func:`merged`): with
one, two calibrations back to back predicted one held-out model 22.7% apart.

**What a fault costs.** The first-touch ladder (:func:`graphprof.calibrate.bench.measure_first_touch`) times a
lone ``clamp_min`` into fresh pages, 0.24-0.26 ns a byte on this 2-core machine; inside a forward a faulted byte costs
more: fresh processes of mobilevit_xs, vgg11 and efficientnet_b2 at batch 8 put it at 0.33-0.38 ns
(``benchmarks/bench_fault_cost.py``: the forward with glibc's defaults against the same with the heap kept). Priced at
the ladder's cost, the samples keep about 0.1 ns of every faulted byte in their kinds' models, and a prediction
under-prices the faults themselves. So a process whose forward faulted at least :data:`KEPT_MIN_BYTES` then keeps its
heap (:func:`graphprof.measure.heap.keep_heap`: nothing mapped, nothing given back) and times :data:`TIMED` more
forwards, which fault nothing once the heap has grown: the difference, the same process at the same speed, over the
bytes the plain forwards faulted is what a fault costs in that forward (it includes the unmapping and trimming that
come with faults in this allocator). :func:`fault_cost` pools the sample models' figures.

Run as ``python -m graphprof.calibrate.fresh_faults MODEL BATCH LIMIT_BYTES MIN_BYTES [CONV_BLOCK THREADS]``: prints
``{"faulted": ..., "exposed": ..., "peak": ..., "forward_s": ..., "probe_s": ..., "fault_bytes": ..., "saved_s": ...}``
(:func:`graphprof.calibrate.samples.fault_split`, the dry run's peak of live activation bytes, the forwards'
mean seconds, the geometric mean of the two probe medians, and what faults cost the forward, as above).
"""

from __future__ import annotations

import collections
import json
import math
import os
import statistics
import subprocess
import sys
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, NamedTuple

from graphprof.devices.probe import SPEED_ELASTICITY, speed_factor

__all__ = ["FreshForward", "elasticity", "fault_cost", "fresh_forward", "merged", "strays", "PROCESSES", "STRAY"]

#: Forwards before the faults are counted, and forwards counted (their median).
WARMUP, COUNTED = 2, 3
#: Plain forwards timed after them, as ``--measure --iters 10`` times them (their mean).
TIMED = 10
#: A forward that faults at least this much a forward is timed on the kept heap too (batch 1 forwards fault next
#: to nothing here: their difference would be noise).
KEPT_MIN_BYTES = 32 * 2**20
#: Fresh processes per sample model: one process's forward strays by tens of percent here (the reference's own
#: three processes of one point spread 13-20% at the median), and its anchor sets the model's samples. Three, whose
#: median is the anchor as it is the benchmark's figure: with two (their geometric mean), two calibrations back to
#: back put the held-out models at batch 1 16-23% apart (run 12; 9.6% at the median over both batches).
PROCESSES = 3
#: A process whose probe reads above this factor of the median of the calibration's fresh processes is run again
#: once (:func:`strays`): a probe's median of five readings strays about 5% from process to process when the machine
#: is steady; the slow spell of one calibration read 23-43% above.
STRAY = 1.15
#: The elasticity a fresh process's forward follows its probe with, before a calibration's own processes say more
#: (:func:`elasticity`): :data:`~graphprof.devices.probe.SPEED_ELASTICITY`, and how far it may be off (the prior's
#: standard deviation).
ELASTICITY_PRIOR = (SPEED_ELASTICITY, 0.25)
#: A fitted elasticity is held within these (a forward that ran faster as the probe slowed is noise).
ELASTICITY_RANGE = (0.0, 1.5)


class FreshForward(NamedTuple):
    """One sample model's forward in a fresh process: ``(faulted, exposed)`` bytes as
    :func:`~graphprof.calibrate.samples.fault_split` splits its faults, its dry run's ``peak`` of live activation
    bytes, the mean seconds of a plain forward, and the speed probe's seconds around them. Where its forward
    faulted at least :data:`KEPT_MIN_BYTES`, what faults cost it (see the module docstring): ``fault_bytes``, the
    bytes a plain forward faulted beyond a forward on the kept heap, and ``saved_s``, the seconds it took beyond
    one (both 0 where not measured)."""

    faulted: float
    exposed: float
    peak: float
    forward_s: float
    probe_s: float
    fault_bytes: float = 0.0
    saved_s: float = 0.0

    @property
    def faults(self) -> tuple[float, float, float]:
        """``(faulted, exposed, peak)``: what :func:`graphprof.calibrate.preset.faulting_share` fits."""
        return self.faulted, self.exposed, self.peak


def fresh_forward(
    name: str, batch: int, limit_bytes: float, min_bytes: float, blocks: tuple[int, int] = (0, 0), timeout_s: float = 300.0
) -> FreshForward | None:
    """``name`` at ``batch`` run in a fresh process (see the module docstring); ``None`` when the process fails (a
    model missing here only samples less). ``blocks``: the first touch's ``(conv_block, threads)``, what a
    convolution's unseen copies come to (:func:`graphprof.devices.firsttouch.conv_scratch`)."""
    command = [sys.executable, "-m", "graphprof.calibrate.fresh_faults", name, str(batch), repr(limit_bytes), repr(min_bytes),
               *(repr(b) for b in blocks)]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0 or not done.stdout.strip():
        return None
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return FreshForward(*(float(out[key]) for key in FreshForward._fields))


def merged(runs: Sequence[FreshForward], at_s: float, elasticity: float = SPEED_ELASTICITY) -> FreshForward:
    """One anchor from several fresh processes of a model, at the speed a probe reading of ``at_s`` stands for (the
    table's, :attr:`graphprof.calibrate.speed.SpeedTrack.table_s`): each process's forward and the seconds its faults
    cost brought there by ``(at_s / its probe) ** elasticity`` (unscaled where that ratio lies outside the probe's
    limits: a misread), then the median forward (an even count: the geometric mean of the middle two); faults the
    mean of all (``exposed`` and ``peak`` are the dry run's, the same in each); the probe ``at_s``.

    Why each process is brought to one speed before the median: a process here runs at one speed for its whole life
    (shufflenet_v2_x1_5 at batch 1: 21.8, 14.0 and 20.9 ms in three), and a slow spell of a few minutes can take two
    of a model's three. The median of the raw forwards then lies in the spell, and scaling it afterwards by its own
    probe at the prior elasticity (0.6) left 40% of the spell in: in one calibration seven anchors' probes read
    0.33-0.43 ms against a median of 0.30, mobilenet_v2 at batch 1 took 18.1 ms where an hour earlier it took 13.0,
    and two calibrations back to back predicted the held-out models 8.7% apart at the median.

    Worked examples, at 0.35 ms and an elasticity of 1: 50 ms at a probe of 0.30 ms is 58.3 ms there, 60 ms at
    0.40 ms is 52.5 ms: the anchor is sqrt(58.3 x 52.5) = 55.3 ms; add 80 ms at 0.35 ms: the median, 58.3 ms.
    At an elasticity of 0, the forwards as timed: 54.8 ms, then 60 ms."""
    brought = [(speed_factor(r.probe_s, at_s, elasticity) or 1.0, r) for r in runs]
    ordered = sorted(factor * r.forward_s for factor, r in brought)
    middle = ordered[(len(ordered) - 1) // 2 : len(ordered) // 2 + 1]
    forward = middle[0] if len(middle) == 1 else statistics.geometric_mean(middle)
    first = runs[0]
    return FreshForward(statistics.fmean(r.faulted for r in runs), first.exposed, first.peak, forward, at_s,
                        statistics.fmean(r.fault_bytes for r in runs), statistics.fmean(f * r.saved_s for f, r in brought))  # fmt: skip


def elasticity(groups: Iterable[Sequence[FreshForward]]) -> float:
    """How far a fresh process's forward followed its probe in this calibration: the slope of log forward on log
    probe, each model's processes about their own means (a model's speed is not the probe's), shrunk towards the
    prior :data:`ELASTICITY_PRIOR` as a normal prior on the slope shrinks it (the weight of the prior is the
    residual variance over the prior's), and held within :data:`ELASTICITY_RANGE`.

    Why fitted here: the prior, 0.6, was measured once, on 18 processes of two models; a calibration whose
    processes all read the probe alike learns nothing from them and keeps the prior, while one that ran some in a
    slow spell learns how far the forwards followed it (1.0 in the spell that the module docstring of
    :func:`merged` names).

    Worked example: two models, each with processes at probes 0.30 and 0.36 ms (logs about their means
    -/+0.0912) whose forwards differ by a factor of 1.2 (+/-0.0912): the slope is 1, the residuals 0, so the
    prior weighs nothing: 1.0."""
    xs: list[float] = []
    ys: list[float] = []
    models = 0
    for runs in groups:
        usable = [(math.log(r.probe_s), math.log(r.forward_s)) for r in runs if r.probe_s > 0 and r.forward_s > 0]
        if len(usable) < 2:
            continue
        models += 1
        mean_x, mean_y = statistics.fmean(x for x, _ in usable), statistics.fmean(y for _, y in usable)
        xs += [x - mean_x for x, _ in usable]
        ys += [y - mean_y for _, y in usable]
    prior, spread = ELASTICITY_PRIOR
    sxx, sxy = sum(x * x for x in xs), sum(x * y for x, y in zip(xs, ys, strict=True))
    freedom = len(xs) - models - 1
    if freedom < 1 or sxx <= 0:
        return prior
    slope = sxy / sxx
    noise = sum((y - slope * x) ** 2 for x, y in zip(xs, ys, strict=True)) / freedom
    weight = noise / spread**2
    low, high = ELASTICITY_RANGE
    return min(max((sxy + weight * prior) / (sxx + weight), low), high)


def strays(runs: Sequence[tuple[Hashable, FreshForward]]) -> list[int]:
    """The processes, by their place in ``runs`` (each with its model's key), to run again once the rest are done:
    those whose probe read more than :data:`STRAY` times the median of all the processes' (a slow spell), where most of
    their model's processes did. One stray among three leaves the median where it was; two set it. Rerunning every
    stray made a calibration 929-1,050 s long, against 707-804 s without (the larger models' processes are the long
    ones, and a spell takes a third of a round)."""
    probes = [r.probe_s for _, r in runs if r.probe_s > 0]
    if not probes:
        return []
    cut = STRAY * statistics.median(probes)
    slow = [i for i, (_, r) in enumerate(runs) if r.probe_s > cut]
    total = collections.Counter(key for key, _ in runs)
    hit = collections.Counter(runs[i][0] for i in slow)
    return [i for i in slow if 2 * hit[runs[i][0]] > total[runs[i][0]]]


def fault_cost(anchors: Sequence[tuple[FreshForward, float]]) -> float | None:
    """Seconds a faulted byte costs inside a forward, pooled over the sample models' anchors, each with the factor
    that brings its process to the reference speed: the slope through the origin of the seconds their plain forwards
    took beyond the kept heap's on the bytes they faulted beyond it, each model weighed by the inverse square of its
    forward (a least-squares fit whose noise grows with the forward: the difference of two means of ten forwards
    strays with the forward's length, not with its faults); ``None`` where none measured it.

    Why weighed so: a ratio of sums gave every byte one weight, and one calibration here had vit_b_16 at batch 8
    save 40 ms over 11 MB (3.6 ns a byte, a 2% stray of a 1.8 s forward) beside six models at 0.29-0.43 ns: it took
    the pooled figure from 0.32 to 0.36 ns.

    Worked example: 100 ms saved over 400 MB in a forward of 0.5 s at a factor of 1.0, and 60 ms over 200 MB in 0.5 s
    at 1.2 (so 72 ms in 0.6 s): (400e6 x 0.100 / 0.25 + 200e6 x 0.072 / 0.36) / (400e6 ** 2 / 0.25 + 200e6 ** 2 / 0.36)
    = 2.0e8 / 7.511e17 = 0.2663 ns a byte."""
    measured = [(a.saved_s * factor, a.fault_bytes, a.forward_s * factor) for a, factor in anchors if a.fault_bytes > 0 and a.forward_s > 0]
    across = sum(b * b / f**2 for _, b, f in measured)
    return sum(b * s / f**2 for s, b, f in measured) / across if across > 0 else None


def _main(argv: list[str]) -> None:
    import torch

    from graphprof.calibrate.samples import fault_split
    from graphprof.devices.opmodel import FirstTouch
    from graphprof.devices.probe import probe_now
    from graphprof.measure.heap import settle_malloc
    from graphprof.measure.run import cast_inputs, materialized
    from graphprof.measure.timing import call_model, faulted_bytes, profile_forward
    from graphprof.prepared import prepare

    name, batch, limit, least = argv[0], int(argv[1]), float(argv[2]), float(argv[3])
    block, threads = (int(argv[4]), int(argv[5])) if len(argv) > 5 else (0, 0)
    model = prepare(name, batch_size=batch)
    call = model.resolve(model.spec(batch_size=batch))
    profile = model.profile(batch_size=batch)  # the dry run first, as the user's command makes it
    work, _ = materialized(model.model, torch.device("cpu"), call.dtype, 0)
    inputs = cast_inputs(call.kwargs if call.kwargs else call.args, torch.device("cpu"), call.dtype)
    settle_malloc()
    with torch.no_grad():
        for _ in range(WARMUP):
            call_model(work, inputs)
        counted = [faulted_bytes(lambda: call_model(work, inputs)) for _ in range(COUNTED)]
    before = probe_now()
    plain = profile_forward(work, inputs, num_runs=TIMED, warmup_runs=0, device=torch.device("cpu"))
    probe = math.sqrt(before * probe_now())
    fault_bytes, saved_s = _kept(work, inputs, statistics.median(counted), plain.mean / 1e3)

    faulted, exposed = fault_split(
        profile, statistics.median(counted), FirstTouch(limit, 0.0, min_bytes=least, conv_block=block, threads=threads)
    )
    print(json.dumps({"faulted": faulted, "exposed": exposed, "peak": float(profile.peak_activation_bytes),
                      "forward_s": plain.mean / 1e3, "probe_s": probe, "fault_bytes": fault_bytes, "saved_s": saved_s}),
          flush=True)  # fmt: skip


def _kept(work: Any, inputs: Any, faulted: float, forward_s: float) -> tuple[float, float]:
    """``(fault_bytes, saved_s)`` of a forward that faulted ``faulted`` bytes in ``forward_s`` seconds, against
    :data:`TIMED` forwards on the kept heap (after :data:`WARMUP` + 1 that grow it); ``(0, 0)`` below
    :data:`KEPT_MIN_BYTES` or off glibc."""
    import torch

    from graphprof.measure.heap import keep_heap
    from graphprof.measure.timing import call_model, profile_forward

    if faulted < KEPT_MIN_BYTES or not keep_heap():
        return 0.0, 0.0
    with torch.no_grad():
        for _ in range(WARMUP + 1):
            call_model(work, inputs)
    left: list[float] = []
    kept = profile_forward(work, inputs, num_runs=TIMED, warmup_runs=0, device=torch.device("cpu"), faults=left)
    return max(faulted - statistics.median(left), 0.0), forward_s - kept.mean / 1e3


if __name__ == "__main__":
    _main(sys.argv[1:])
    os._exit(0)  # skips the interpreter's teardown of torch once the figures are out: about 0.9 s a process here

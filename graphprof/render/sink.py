"""One output sink: every result graphprof writes, in every format it has, through one function.

:func:`write_result` takes any result (a :class:`~graphprof.cost.result.Profile`, a sweep, a comparison, a
cross-check, a generation profile, a partition plan, a graph scaling or a graph estimate), picks the
format (``fmt``, else the file's suffix), renders it with the result's entry in one table and writes it
with :func:`graphprof.base.atomic.write_atomic`. :func:`plan_output` makes the same checks before any work.

==================  ========================================================  ===========
kind                result                                                    formats
==================  ========================================================  ===========
``profile``         :class:`~graphprof.cost.result.Profile` (its roofline)    json, csv
``sweep``           :class:`graphprof.scaling.result.Sweep`                   json, csv
``compare``         :class:`ComparisonResult`                                 json, csv
``validate``        :class:`CrossCheckResult`                                 json, csv
``generate``        :class:`graphprof.generate.result.GenerationProfile`      json
``partition``       :class:`graphprof.partition.report.PartitionReport`       json
``graph-scaling``   :class:`graphprof.gnn.scaling.GraphScalingResult`         json
``graph-estimate``  :class:`graphprof.gnn.compare.EstimateComparison`         json
``shard``           :class:`graphprof.sharding.ShardedProfile`                json
``fits``            :class:`graphprof.training.MemoryPlan`                    json
``fits-ranks``      :class:`graphprof.training.RanksPlan`                     json
==================  ========================================================  ===========

Every JSON file starts with ``kind`` and ``schema_version`` (its schema: :mod:`graphprof.schemas`), then
``timestamp`` and ``host`` (:func:`stamped`). The renderers are imported when a
result is written, so that the CLI's checks cost no imports.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphprof.base.atomic import STDOUT, absolute_output, check_path, is_descriptor_path, means_stdout, write_atomic
from graphprof.base.choices import OutputFormat
from graphprof.errors import InvalidInputError, OutputError
from graphprof.schemas import envelope

__all__ = [
    "RESULT_FORMATS",
    "ComparisonResult",
    "CrossCheckResult",
    "OutputTarget",
    "check_distinct",
    "choose_format",
    "plan_output",
    "render_result",
    "result_kind",
    "stamped",
    "write_result",
]

#: The formats each kind of result is written in; the first is the default (``--output -``).
_BOTH = (OutputFormat.JSON, OutputFormat.CSV)
_JSON = (OutputFormat.JSON,)
RESULT_FORMATS: Mapping[str, tuple[OutputFormat, ...]] = {
    "profile": _BOTH, "sweep": _BOTH, "compare": _BOTH, "validate": _BOTH, "generate": _JSON, "partition": _JSON,
    "graph-scaling": _JSON, "graph-estimate": _JSON, "shard": _JSON, "fits": _JSON, "fits-ranks": _JSON,
}  # fmt: skip
_KNOWN = frozenset(f for formats in RESULT_FORMATS.values() for f in formats)

#: A result's class (module and name: nothing is imported to look it up) -> its kind.
_KINDS = {
    "graphprof.cost.result.Profile": "profile",
    "graphprof.scaling.result.Sweep": "sweep",
    "graphprof.render.sink.ComparisonResult": "compare",
    "graphprof.render.sink.CrossCheckResult": "validate",
    "graphprof.generate.result.GenerationProfile": "generate",
    "graphprof.partition.report.PartitionReport": "partition",
    "graphprof.gnn.scaling.GraphScalingResult": "graph-scaling",
    "graphprof.gnn.compare.EstimateComparison": "graph-estimate",
    "graphprof.sharding.result.ShardedProfile": "shard",
    "graphprof.training.result.MemoryPlan": "fits",
    "graphprof.training.result.RanksPlan": "fits-ranks",
}


@dataclass(frozen=True)
class ComparisonResult:
    """``graphprof compare``'s rows (:func:`graphprof.render.compare.comparison_rows`) and their hardware."""

    rows: tuple[Any, ...]
    hardware: Any = None


@dataclass(frozen=True)
class CrossCheckResult:
    """``graphprof validate``'s cross-checks and the tolerance they are judged with."""

    results: tuple[Any, ...]
    tolerance: float


@dataclass(frozen=True)
class OutputTarget:
    """Where a result goes: ``path`` (absolute, or ``-``/a descriptor's name as given), ``fmt``, and
    ``shown``, the path as the user wrote it (for ``wrote out.json``)."""

    path: Path
    fmt: OutputFormat
    shown: str
    #: leave the host out (:mod:`graphprof.base.redact`): ``--redact``
    redact: bool = False

    @property
    def to_stdout(self) -> bool:
        return means_stdout(self.path)


def result_kind(result: object) -> str:
    """The kind of ``result`` (a key of :data:`RESULT_FORMATS`); a result with no renderer is an :class:`OutputError`."""
    for cls in type(result).__mro__:
        kind = _KINDS.get(f"{cls.__module__}.{cls.__qualname__}")
        if kind is not None:
            return kind
    raise OutputError(f"graphprof cannot write a {type(result).__name__} to a file")


def choose_format(path: str | os.PathLike[str], kind: str, fmt: str | None = None) -> OutputFormat:
    """The format ``kind`` is written in to ``path``: ``fmt``, else the suffix; one the kind lacks is refused.

    A kind with one format takes a file of any other suffix as that format (``plan.out``), but not a
    suffix that names another format (``estimate.csv``).
    """
    formats = RESULT_FORMATS[kind]
    suffix = Path(path).suffix.lstrip(".").lower()
    if fmt:
        chosen = fmt.lower()
    elif str(path) == STDOUT or (not suffix and is_descriptor_path(path)) or (len(formats) == 1 and suffix not in _KNOWN):
        chosen = formats[0]
    else:
        chosen = suffix
    if chosen in formats:
        return OutputFormat(chosen)
    if fmt:
        raise OutputError(f"unknown output format {fmt!r} for {kind}: choose {' or '.join(formats)}")
    if chosen in _KNOWN:
        raise OutputError(
            f"{kind} writes {' or '.join(f.upper() for f in formats)} only, not {chosen.upper()}: name the file {Path(path).stem}.{formats[0]}"
        )
    raise OutputError(
        f"cannot tell the output format of {str(path)!r} from its suffix: use {' or '.join('.' + f for f in formats)}, or --format"
    )


def plan_output(path: str | os.PathLike[str], kind: str, fmt: str | None = None, redact: bool = False) -> OutputTarget:
    """Before any work: the format (:func:`choose_format`), a writable path (:func:`graphprof.base.atomic.check_path`),
    made absolute now so that a model's ``os.chdir`` cannot move it; ``redact`` leaves the host out."""
    chosen = choose_format(path, kind, fmt)
    check_path(path)
    return OutputTarget(absolute_output(path), chosen, str(path), redact)


def check_distinct(paths: Mapping[str, Sequence[str | os.PathLike[str]] | str | os.PathLike[str] | None]) -> None:
    """Refuse two options that would write one file (``--output p.json --html p.json``): one would replace
    the other. ``paths`` maps each option to the file or files it writes; ``-`` and descriptors are skipped."""
    seen: dict[str, str] = {}
    for option, given in paths.items():
        files = [given] if isinstance(given, (str, os.PathLike)) else list(given or ())
        for path in files:
            if str(path) == STDOUT or is_descriptor_path(path):
                continue
            real = os.path.realpath(path)
            if real in seen and seen[real] != option:
                raise InvalidInputError(f"{seen[real]} and {option} both name {str(path)!r}: choose two different names")
            seen.setdefault(real, option)


def stamped(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with ``timestamp`` (UTC, ISO 8601) and ``host`` (this machine) first, unless it has them."""
    from graphprof.devices.local import detect_host

    timestamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    envelope = {"timestamp": data.get("timestamp", timestamp), "host": data["host"] if "host" in data else detect_host("cpu").to_dict()}
    return {**envelope, **data}


def _json(data: Mapping[str, Any], kind: str) -> str:
    """The file's text: ``kind`` and ``schema_version`` first (:mod:`graphprof.schemas`), then ``timestamp``
    and ``host``, then the result's own fields."""
    head = envelope(kind)
    body = {k: v for k, v in stamped(data).items() if k not in head}
    return json.dumps({**head, **body}, indent=2, allow_nan=False) + "\n"


def _profile(fmt: OutputFormat) -> Callable[[Any], str]:
    from graphprof.render.files import profile_dict, render_csv

    if fmt is OutputFormat.JSON:
        return lambda r: _json(profile_dict(r), "profile")
    return render_csv


def _sweep(fmt: OutputFormat) -> Callable[[Any], str]:
    from graphprof.render.sweep import render_sweep_csv

    return (lambda s: _json(s.to_dict(), "sweep")) if fmt is OutputFormat.JSON else render_sweep_csv


def _compare(fmt: OutputFormat) -> Callable[[Any], str]:
    from graphprof.render.compare import comparison_dict, render_comparison_csv

    if fmt is OutputFormat.JSON:
        return lambda c: _json(comparison_dict(c.rows, c.hardware), "compare")
    return lambda c: render_comparison_csv(c.rows)


def _validate(fmt: OutputFormat) -> Callable[[Any], str]:
    from graphprof.render.crosscheck import crosscheck_dict, render_csv

    if fmt is OutputFormat.JSON:
        return lambda c: _json(crosscheck_dict(c.results, c.tolerance), "validate")
    return lambda c: render_csv(c.results, c.tolerance)


def _partition(fmt: OutputFormat) -> Callable[[Any], str]:
    from graphprof.render.partition import plan_dict

    return lambda report: _json(plan_dict(report.plan, report.runs), "partition")


def _to_dict(kind: str) -> Callable[[OutputFormat], Callable[[Any], str]]:
    return lambda fmt: lambda result: _json(result.to_dict(), kind)


#: kind -> (format -> renderer), each imported when first used.
_RENDERERS: Mapping[str, Callable[[OutputFormat], Callable[[Any], str]]] = {
    "profile": _profile,
    "sweep": _sweep,
    "compare": _compare,
    "validate": _validate,
    "generate": _to_dict("generate"),
    "partition": _partition,
    "graph-scaling": _to_dict("graph-scaling"),
    "graph-estimate": _to_dict("graph-estimate"),
    "shard": _to_dict("shard"),
    "fits": _to_dict("fits"),
    "fits-ranks": _to_dict("fits-ranks"),
}


def render_result(result: object, fmt: str | None = None, redact: bool = False) -> str:
    """``result`` as text in ``fmt`` (default: its kind's first format): what :func:`write_result` writes;
    ``redact`` leaves the host out (:mod:`graphprof.base.redact`)."""
    kind = result_kind(result)
    chosen = choose_format("out", kind, fmt) if fmt else RESULT_FORMATS[kind][0]
    text = _RENDERERS[kind](chosen)(result)
    if not redact:
        return text
    from graphprof.base.redact import redact_json, redact_text

    return redact_json(text) if chosen is OutputFormat.JSON else redact_text(text)


def write_result(result: object, path: str | os.PathLike[str] | OutputTarget, fmt: str | None = None, redact: bool = False) -> Path:
    """Write ``result`` to ``path`` (an :class:`OutputTarget` from :func:`plan_output`, or a path) atomically;
    the path written. Standard output (``-``) is the caller's: write :func:`render_result` there."""
    target = path if isinstance(path, OutputTarget) else plan_output(path, result_kind(result), fmt, redact)
    if str(target.path) == STDOUT:
        raise OutputError("write_result writes files; for standard output write render_result(result) there")
    write_atomic(target.path, render_result(result, target.fmt, target.redact))
    return target.path

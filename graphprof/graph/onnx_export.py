"""ONNX export (seed 001's future work, "export profiled models to ONNX"), checked against the profile.

:func:`export_onnx` writes the model through ``torch.onnx.export`` (its ``torch.export`` based exporter,
with onnxscript: the ``onnx`` extra), reads the file back with ``onnx`` and counts the graph's nodes by
op type. The contractions, which carry nearly all of a model's MACs, are then checked against the aten
calls graphprof's own dry run recorded (:attr:`~graphprof.cost.result.LayerRow.ops`, forward phase):

* convolutions: ONNX ``Conv`` and ``ConvTranspose`` against ``aten.convolution`` calls;
* matrix products: ONNX ``Gemm`` and ``MatMul`` against ``aten.addmm``, ``aten.mm``, ``aten.bmm``,
  ``aten.baddbmm`` and ``aten.matmul`` calls, plus two per attention kernel
  (``aten._scaled_dot_product_*``: ONNX spells attention as its two ``MatMul``, scores and values) and
  four per fused ``aten._native_multi_head_attention`` (its projections in and out as well).

The exporter folds batch norms into convolutions and rewrites element-wise work, so only these two
kinds are compared; every ONNX op type is listed with its count beside them (:attr:`OnnxExport.op_types`).

>>> pm = graphprof.prepare("resnet18", device="cpu")            # doctest: +SKIP
>>> export_onnx(pm.model, pm.args, pm.kwargs, "r18.onnx", pm.profile()).agrees   # doctest: +SKIP
True
"""

from __future__ import annotations

import contextlib
import errno
import io
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from graphprof.base.atomic import check_path, install_staged, staged_files
from graphprof.base.choices import Phase
from graphprof.base.inputs import materialize
from graphprof.base.logs import quiet_loggers
from graphprof.cost.result import Profile
from graphprof.errors import CaptureError, GraphprofError, InvalidInputError, MissingDependencyError, OutputError, one_line

__all__ = ["OpCountCheck", "OnnxExport", "check_onnx_path", "export_onnx", "onnx_op_types", "require_onnx", "INSTALL_HINT"]

INSTALL_HINT = "pip install 'graphprof[onnx]' (onnx and onnxscript)"

#: kind -> (ONNX op types, aten ops with the ONNX nodes each call becomes)
_KINDS: dict[str, tuple[tuple[str, ...], dict[str, int]]] = {
    "convolution": (("Conv", "ConvTranspose"), {"aten.convolution": 1, "aten._convolution": 1}),
    "matrix product": (
        ("Gemm", "MatMul"),
        # nn.MultiheadAttention's fused inference path: in-projection, scores, weighted values, out-projection
        {"aten.addmm": 1, "aten.mm": 1, "aten.bmm": 1, "aten.baddbmm": 1, "aten.matmul": 1, "aten._native_multi_head_attention": 4},
    ),
}
#: attention kernels: each is two matrix products in ONNX (q @ k^T, then the weights @ v)
_ATTENTION_PREFIX = "aten._scaled_dot_product_"


@dataclass(frozen=True)
class OpCountCheck:
    """One kind of op counted both ways: in the ONNX graph and among graphprof's recorded aten calls."""

    kind: str
    onnx_ops: tuple[str, ...]
    onnx_count: int
    graphprof_count: int

    @property
    def agrees(self) -> bool:
        return self.onnx_count == self.graphprof_count

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "onnx_ops": list(self.onnx_ops),
            "onnx": self.onnx_count,
            "graphprof": self.graphprof_count,
            "agrees": self.agrees,
        }


@dataclass(frozen=True)
class OnnxExport:
    """The ONNX file written, its graph's op types with their counts, and the checks against the profile."""

    path: Path
    files: tuple[Path, ...]
    opset: int
    op_types: dict[str, int]
    checks: tuple[OpCountCheck, ...]

    @property
    def agrees(self) -> bool:
        """Every checked kind has as many ops in the ONNX graph as graphprof counted."""
        return all(c.agrees for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path), "files": [str(f) for f in self.files], "opset": self.opset,
            "op_types": dict(self.op_types), "checks": [c.to_dict() for c in self.checks], "agrees": self.agrees,
        }  # fmt: skip


def _graphprof_counts(profile: Profile) -> Counter[str]:
    """How many forward calls of each checked kind graphprof recorded."""
    counts: Counter[str] = Counter()
    for row in profile.layers:
        for record in row.ops:
            if record.phase is not Phase.FORWARD:
                continue
            for kind, (_, aten) in _KINDS.items():
                counts[kind] += aten.get(record.op, 0)
            if record.op.startswith(_ATTENTION_PREFIX):
                counts["matrix product"] += 2
    return counts


def onnx_op_types(path: Path | str) -> tuple[int, dict[str, int]]:
    """``(opset, {op type: nodes})`` of an ONNX file's main graph and its functions (exported modules
    may keep a subgraph as a local function: its nodes count once per call site)."""
    onnx = require_onnx()
    model = onnx.load(str(path), load_external_data=False)
    functions = {(f.domain, f.name): f for f in model.functions}
    counts: Counter[str] = Counter()

    def walk(nodes: Any) -> None:
        for node in nodes:
            called = functions.get((node.domain, node.op_type))
            if called is not None:
                walk(called.node)
            else:
                counts[node.op_type] += 1

    walk(model.graph.node)
    opset = next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    return opset, dict(sorted(counts.items()))


def require_onnx() -> Any:
    try:
        import onnx
        import onnxscript  # noqa: F401 - torch.onnx's exporter needs it
    except ImportError as exc:
        raise MissingDependencyError(f"ONNX export needs onnx and onnxscript: {INSTALL_HINT}") from exc
    return onnx


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """The exporter logs its steps and may print them; the library prints nothing (STYLE.md)."""
    with quiet_loggers("torch.onnx"), contextlib.redirect_stdout(io.StringIO()):
        yield


def check_onnx_path(path: Path | str) -> Path:
    """Before any work: ``path`` and its weights' sidecar ``path.data`` can be written as regular files (a
    device, FIFO, descriptor or symbolic link is refused: the sidecar would land beside it); the sidecar's path."""
    path = Path(path)
    data = path.with_name(path.name + ".data")
    for target in (path, data):
        check_path(target, regular=True)
    return data


def export_onnx(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], path: Path | str, profile: Profile) -> OnnxExport:
    """Write ``model`` (called as ``model(*args, **kwargs)``) to the ONNX file ``path`` and check the graph's
    convolutions and matrix products against ``profile``'s recorded calls (see the module docstring).

    The model needs its weights (a model built on the meta device has none). Weights go to
    ``<path>.data`` beside the file (``torch.onnx``'s external data). Raises
    :class:`~graphprof.errors.MissingDependencyError` without the ``onnx`` extra and
    :class:`~graphprof.errors.CaptureError` when the exporter fails. The model is left in eval mode as
    found otherwise; its training flag is restored.
    """
    require_onnx()
    path = Path(path)
    data = check_onnx_path(path)
    if any(p.is_meta for p in model.parameters()):
        raise InvalidInputError(
            "the model was built on the meta device (no weights to write): prepare it with device='cpu' to export it to ONNX"
        )
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    real_args, real_kwargs = materialize(args, device), materialize(kwargs, device)
    training = model.training
    model.eval()
    try:  # written in a folder of its own beside ``path``, then renamed into place: nothing left on failure
        with staged_files(path) as folder:
            with _quiet_exporter():
                torch.onnx.export(model, real_args, str(folder / path.name), kwargs=real_kwargs, dynamo=True, verbose=False)
            opset, op_types = onnx_op_types(folder / path.name)
            written = (data, path) if (folder / data.name).exists() else (path,)
            for target in written:  # the weights first: the model file never names weights that are not there
                install_staged(folder / target.name, target)
    except GraphprofError:
        raise
    except Exception as exc:  # the exporter's failures are many and unrelated; each named in one line
        raise _export_failed(model, path, exc) from exc
    finally:
        model.train(training)
    ours = _graphprof_counts(profile)
    checks = tuple(
        OpCountCheck(kind, onnx_ops, sum(op_types.get(t, 0) for t in onnx_ops), ours[kind]) for kind, (onnx_ops, _) in _KINDS.items()
    )
    return OnnxExport(path, written[::-1], opset, op_types, checks)


#: A write that failed for want of room (disk full, a file-size limit, a quota) or of a writable disk.
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS, errno.EIO})


def _export_failed(model: nn.Module, path: Path, exc: Exception) -> GraphprofError:
    """The exporter's failure as graphprof's error: an :class:`OutputError` (exit 7) when writing the files
    failed (an ``OSError`` of :data:`_WRITE_ERRNOS` anywhere in its chain), else a :class:`CaptureError`."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno in _WRITE_ERRNOS:
            return OutputError(f"cannot write {str(path)!r}: {cause.strerror or cause}")
        cause = cause.__cause__ or cause.__context__
    return CaptureError(f"torch.onnx.export failed for {type(model).__name__}: {one_line(exc, 400, with_type=True)}")

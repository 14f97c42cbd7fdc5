"""The ONNX export's check against the profile (:class:`~graphprof.graph.onnx_export.OnnxExport`), as lines."""

from __future__ import annotations

from graphprof.graph.onnx_export import OnnxExport

__all__ = ["render_onnx_check"]


def render_onnx_check(export: OnnxExport) -> str:
    """``wrote m.onnx (+ m.onnx.data), opset 20`` and one line per kind checked, ONNX against graphprof.

    >>> from pathlib import Path
    >>> from graphprof.graph.onnx_export import OpCountCheck
    >>> check = OpCountCheck("convolution", ("Conv", "ConvTranspose"), 20, 20)
    >>> print(render_onnx_check(OnnxExport(Path("m.onnx"), (Path("m.onnx"),), 20, {"Conv": 20}, (check,))))
    wrote m.onnx, ONNX opset 20, 1 node type
      convolution (Conv, ConvTranspose): 20 in the ONNX graph, 20 counted by graphprof - agree
    """
    extra = "".join(f" (+ {f})" for f in export.files[1:])
    types = len(export.op_types)
    lines = [f"wrote {export.path}{extra}, ONNX opset {export.opset}, {types} node type{'s' if types != 1 else ''}"]
    for check in export.checks:
        verdict = "agree" if check.agrees else "DIFFER"
        lines.append(
            f"  {check.kind} ({', '.join(check.onnx_ops)}): {check.onnx_count} in the ONNX graph, "
            f"{check.graphprof_count} counted by graphprof - {verdict}"
        )
    return "\n".join(lines)

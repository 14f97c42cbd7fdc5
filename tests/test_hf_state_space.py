"""Mamba-2 on a dry run: transformers' reference chunked (SSD) scan counted op by op, checked in closed form on
a small config; the fused kernels it stands in for named, never zero."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import graphprof
from graphprof.errors import ModelBuildError
from graphprof.models.hf_kernels import FusedKernel, kernel_notes, refuse_uncountable

pytest.importorskip("transformers")

# hidden 64, expand 2 -> 128 inner channels = 4 heads of 32; B and C in 2 groups of a state of 16; chunks of 32
SMALL = (
    "hf:mamba-codestral-7b?hidden_size=64&num_hidden_layers=2&num_heads=4&head_dim=32&state_size=16&n_groups=2"
    "&chunk_size=32&vocab_size=1000"
)


def _scan_macs(length: int, chunk: int, heads: int, head_dim: int, state: int) -> int:
    """The products of transformers' chunked scan over ``length`` positions, padded to whole chunks."""
    chunks = -(-length // chunk)
    per_chunk = heads * chunks * chunk
    scores = per_chunk * chunk * state  # C B^T inside each chunk: (Q x N) (N x Q) per head
    values = per_chunk * chunk * head_dim  # the masked scores times x: (Q x Q) (Q x P)
    states = per_chunk * head_dim * state  # each chunk's end state: (P x Q) (Q x N)
    outputs = per_chunk * state * head_dim  # C times the state each chunk starts from: (Q x N) (N x P)
    passing = heads * (chunks + 1) ** 2 * head_dim * state  # the decay between chunks: (c+1 x c+1) (c+1 x PN)
    return scores + values + states + outputs + passing


def test_the_reference_scan_is_counted_op_by_op_in_closed_form() -> None:
    # 100 tokens: 4 chunks of 32, the last padded with 28 positions that the scan computes too
    p = graphprof.profile_model(SMALL, input_shape=(1, 100))
    assert p.execution == "dry-run" and not p.unsupported
    # per block: in_proj 64 -> 2 x 128 + 2 x 2 x 16 + 4 = 324 (gate, x, B, C, dt), conv1d over 192 channels of
    # kernel 4 with bias, dt_bias, A_log, D (4 each), the gated norm 128, out_proj 128 -> 64, the block norm 64
    block = 64 * 324 + 192 * 4 + 192 + 3 * 4 + 128 + 128 * 64 + 64
    assert p.total_params == 2 * block + 2 * 1000 * 64 + 64 == 188_248  # embeddings and LM head untied
    assert _scan_macs(100, 32, 4, 32, 16) == 4 * 4 * 32 * (32 * 16 + 32 * 32 + 32 * 16 + 16 * 32) + 4 * 25 * 512
    conv = 192 * (100 + 3) * 4  # depthwise, over the sequence padded by kernel - 1 (then cut back to 100)
    per_block = 100 * 64 * 324 + conv + _scan_macs(100, 32, 4, 32, 16) + 100 * 128 * 64
    assert p.total_macs == 2 * per_block + 100 * 64 * 1000 == 15_067_648


def test_the_scan_cost_grows_with_whole_chunks() -> None:
    # 64 tokens fill two chunks exactly; 65 open a third, computed in full
    short, long = (graphprof.profile_model(SMALL, input_shape=(1, n)) for n in (64, 65))
    extra = long.total_macs - short.total_macs
    linear = 64 * 324 + 128 * 64  # one more token through in_proj and out_proj
    conv = 192 * 4
    assert extra == 2 * (linear + conv + _scan_macs(65, 32, 4, 32, 16) - _scan_macs(64, 32, 4, 32, 16)) + 64 * 1000


def test_the_fused_kernels_are_named_where_the_reference_runs() -> None:
    p = graphprof.profile_model(SMALL, input_shape=(1, 64))
    (note,) = [n for n in p.notes if n.startswith("fused kernels")]
    assert "mamba_ssm.mamba_chunk_scan_combined" in note and "causal_conv1d.causal_conv1d_fn" in note
    assert "each of its ops is counted" in note


def test_an_installed_fused_kernel_is_listed_and_refused_by_name() -> None:
    scan = FusedKernel("mamba_chunk_scan_combined", "mamba_ssm", "mamba2_chunk_scan", active=True)
    conv = FusedKernel("causal_conv1d_fn", "causal_conv1d", "causal_conv1d_fn", active=False)
    assert kernel_notes([scan, conv])[1] == "fused kernels outside aten, not counted: mamba_ssm.mamba_chunk_scan_combined"
    refuse_uncountable([conv], "hf:x")  # only the reference runs: nothing to refuse
    with pytest.raises(ModelBuildError, match=r"mamba_ssm\.mamba_chunk_scan_combined \(for mamba2_chunk_scan\)"):
        refuse_uncountable([scan, conv], "hf:x")


_PROBE = """
from graphprof.errors import ModelBuildError
from graphprof.models import resolve_model
try:
    resolve_model("hf:mamba-codestral-7b?num_hidden_layers=1", device="meta")
except ModelBuildError as exc:
    print(exc)
"""


@pytest.mark.slow  # a fresh interpreter: transformers picks its kernels when it imports the model file
def test_a_dry_run_that_would_reach_an_installed_kernel_stops_naming_it(tmp_path: Path) -> None:
    # a stand-in mamba_ssm whose scan is a kernel launch outside aten
    package = tmp_path / "mamba_ssm" / "ops" / "triton"
    package.mkdir(parents=True)
    for folder in (package, package.parent, package.parent.parent):
        (folder / "__init__.py").write_text("")
    (package / "ssd_combined.py").write_text("def mamba_chunk_scan_combined(*args, **kwargs):\n    raise RuntimeError\n")
    paths = [str(tmp_path), os.environ.get("PYTHONPATH", ""), *sys.path]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "fused kernels mamba_ssm.mamba_chunk_scan_combined (for mamba2_chunk_scan)" in done.stdout
    assert "a dry run can neither run nor count them" in done.stdout

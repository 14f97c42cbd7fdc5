"""Issue 51: decode's time per token in two regimes, eager and compiled (torch.compile with CUDA graphs).

The compiled step is its fused kernels' times summed (no host); checked by hand against the kernel table on
the same records, and by relations: fewer kernels than eager, faster than eager, ``predicted`` follows
``--compile``, and the JSON fits the schema.
"""

from __future__ import annotations

import pytest

from graphprof.cost.fusion import fold_chains
from graphprof.devices.derived import kernel_table
from graphprof.devices.hardware import get_hardware
from graphprof.devices.predict import kernel_seconds
from graphprof.generate import profile_generation
from graphprof.generate.regimes import forward_seconds

MODEL = "hf:llama?num_hidden_layers=2"
A100 = get_hardware("a100")


@pytest.fixture(scope="module")
def compiled() -> object:
    return profile_generation(MODEL, prompt_len=16, new_tokens=6, hardware=A100, compiled=True)


def test_both_regimes_and_predicted_is_the_compiled_one(compiled: object) -> None:
    r = compiled.regimes  # type: ignore[attr-defined]
    assert r.regime == "compiled"
    assert r.compiled.kernels_per_step < r.eager.kernels_per_step
    assert r.compiled.tpot_s < r.eager.tpot_s and r.compiled.ttft_s < r.eager.ttft_s
    p = compiled.predicted  # type: ignore[attr-defined]
    assert p.tpot_s == r.compiled.tpot_s and p.ttft_s == r.compiled.ttft_s
    # total = prefill + 5 decode steps at the mean step
    assert p.total_s == pytest.approx(r.compiled.ttft_s + 5 * r.compiled.tpot_s, rel=1e-12)
    assert p.tokens_per_s == pytest.approx(1 / r.compiled.tpot_s, rel=1e-12)


def test_eager_keeps_its_predicted_and_reports_both(compiled: object) -> None:
    eager = profile_generation(MODEL, prompt_len=16, new_tokens=6, hardware=A100)
    assert eager.regimes is not None and eager.regimes.regime == "eager"
    assert eager.regimes.compiled.tpot_s == pytest.approx(compiled.regimes.compiled.tpot_s, rel=1e-12)  # type: ignore[attr-defined]


def test_the_compiled_forward_is_its_fused_kernels_summed_by_hand() -> None:
    from graphprof.prepared import prepare

    profile = prepare(MODEL, dtype="bfloat16", input_shape=(1, 8)).profile()
    table, _ = kernel_table(A100)
    fused = [r for r in fold_chains([op for _, op in profile.iter_ops()]) if r.status.value == "counted" and r.op.startswith("aten.")]
    seconds, kernels = forward_seconds(profile, A100, compiled=True)
    assert kernels == len(fused)
    assert seconds == pytest.approx(sum(kernel_seconds(r, "bfloat16", A100, table) for r in fused), rel=1e-12)


def test_the_json_carries_both_regimes_and_fits_the_schema(compiled: object) -> None:
    from graphprof.render.sink import stamped
    from graphprof.schemas import envelope, validate

    doc = {**envelope("generate"), **stamped(compiled.to_dict())}  # type: ignore[attr-defined]
    validate(doc)
    assert doc["regimes"]["compiled"]["tpot_s"] == doc["predicted"]["tpot_s"]


def test_no_device_no_regimes() -> None:
    assert profile_generation(MODEL, prompt_len=8, new_tokens=2).regimes is None


def test_the_command_takes_compile() -> None:
    import json

    from typer.testing import CliRunner

    from graphprof_cli.main import app

    out = CliRunner().invoke(app, ["generate", "--model", MODEL, "--prompt-len", "8", "--new-tokens", "3", "--hardware", "a100",
                                   "--compile", "--output", "-"])  # fmt: skip
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["regimes"]["regime"] == "compiled" and doc["predicted"]["tpot_s"] == doc["regimes"]["compiled"]["tpot_s"]


def test_the_report_table_shows_both_regimes_and_marks_the_predicted_one(compiled: object) -> None:
    from rich.console import Console

    from graphprof.render.formatting import format_seconds
    from graphprof.render.generate import render_generation

    console = Console(width=200, record=True)
    console.print(render_generation(compiled))  # type: ignore[arg-type]
    text = " ".join(console.export_text().split())
    r = compiled.regimes  # type: ignore[attr-defined]
    assert "decode eager (a host launch per kernel)" in text and "decode compiled (fused, CUDA graphs) = predicted" in text
    assert f"TPOT {format_seconds(r.eager.tpot_s)}" in text and f"{r.compiled.kernels_per_step:,} kernels a step" in text
    plain = Console(width=200, record=True)
    plain.print(render_generation(profile_generation(MODEL, prompt_len=8, new_tokens=2)))
    assert "decode eager" not in plain.export_text()  # no device, no regimes

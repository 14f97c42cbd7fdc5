"""``graphprof generate --model hf:llama-3-8b [--prompt-len 1024] [--new-tokens 256]``: generation's own command.

Parsing only: the work is :func:`graphprof.generate.profile_generation` (and
:func:`graphprof.generate.measure.with_measurement` with ``--measure``); the output is
:func:`graphprof.render.generate.render_generation`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from graphprof.base.choices import KVCache
from graphprof_cli import options as opt
from graphprof_cli.common import flag, request_from, run_guarded
from graphprof_cli.request import CommonOptions

if TYPE_CHECKING:
    from graphprof.devices.hardware import Hardware
    from graphprof.render.sink import OutputTarget

__all__ = ["GenerateRequest", "generate_command", "run_generate"]


@dataclass(frozen=True)
class GenerateRequest(CommonOptions):
    """Every option of ``graphprof generate``, as parsed (names as the options', without dashes)."""

    model: str
    prompt_len: int = 1024
    new_tokens: int = 256
    kv_dtype: str | None = None
    cache: KVCache = KVCache.STATIC
    measure: bool = False
    device: str | None = None
    compile: bool = False


def generate_command(
    ctx: typer.Context,
    model: opt.ModelRequired,
    prompt_len: Annotated[int, typer.Option("--prompt-len", min=1, help="Prompt tokens (the prefill).")] = 1024,
    new_tokens: Annotated[int, typer.Option("--new-tokens", min=1, help="Tokens to generate.")] = 256,
    batch_size: opt.BatchSizeOption = None,
    dtype: opt.DtypeOption = None,
    kv_dtype: Annotated[str | None, typer.Option("--kv-dtype", help="The KV cache's dtype (default: --dtype, else bfloat16).")] = None,
    cache: Annotated[
        KVCache, typer.Option("--cache", help="static (K/V written in place) or dynamic (transformers' DynamicCache, torch.cat each step).")
    ] = KVCache.STATIC,
    hardware: opt.HardwareOption = None,
    peak_tflops: opt.PeakOption = None,
    bandwidth_gbs: opt.BandwidthOption = None,
    measure: opt.MeasureOption = False,
    device: opt.DeviceOption = None,
    compile: Annotated[  # noqa: A002 - the option's name
        bool, flag("--compile", help="Predict as torch.compile with CUDA graphs runs it (no launch cost, element-wise chains fused).")
    ] = False,
    output: opt.OutputOption = None,
    width: opt.WidthOption = None,
    redact: opt.RedactOption = False,
    debug: opt.DebugOption = False,
) -> None:
    """Profile generate(): prefill and decode with a KV cache, per layer; time to first token, per token, will it fit."""
    run_generate(request_from(GenerateRequest, ctx.params))


def _checked(req: GenerateRequest) -> tuple[Hardware | None, OutputTarget | None]:
    """Before any model is built: the hardware and the output's folder."""
    from graphprof.devices.hardware import resolve_hardware
    from graphprof_cli.output import plan

    hardware = resolve_hardware(req.hardware, peak_tflops=req.peak_tflops, bandwidth_gbs=req.bandwidth_gbs)
    return hardware, plan("generate", req.output, redact=req.redact)


def run_generate(req: GenerateRequest) -> None:
    """Profile (and with ``--measure`` run) generation, print the report, write ``--output`` as JSON."""
    from graphprof.generate import profile_generation
    from graphprof.generate.measure import with_measurement
    from graphprof.render.generate import render_generation
    from graphprof_cli.common import console as make_console
    from graphprof_cli.output import emit

    hardware, target = run_guarded(lambda: _checked(req), req.debug)
    console = make_console(req.width)
    options: dict[str, Any] = {
        "prompt_len": req.prompt_len, "new_tokens": req.new_tokens, "batch_size": 1 if req.batch_size is None else req.batch_size, "dtype": req.dtype,
        "kv_dtype": req.kv_dtype, "cache": req.cache.value, "hardware": hardware, "compiled": req.compile,
    }  # fmt: skip
    with console.status(f"profiling generate() of {req.model} ...", spinner="dots"):
        if req.measure:
            result = run_guarded(lambda: with_measurement(req.model, device=req.device, **options), req.debug)
        else:
            result = run_guarded(lambda: profile_generation(req.model, **options), req.debug)
    if target is None or not target.to_stdout:  # with --output -, stdout carries the JSON alone
        console.print(render_generation(result))
    emit(result, target, console, req.debug)

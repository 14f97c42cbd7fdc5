"""``graphprof --model hf:llama-3-8b --generate [--prompt-len 1024] [--new-tokens 256]``: the options and their handling.

The main command declares these options (``GenerateOption`` ...) and hands over to :func:`run_generate`
when ``--generate`` is given. Parsing only: the work is :func:`graphprof.generate.profile_generation`
(and :func:`graphprof.generate.measure.measure_generation` with ``--measure``); the output is
:func:`graphprof.render.generate.render_generation`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from graphprof_cli.common import flag, run_guarded

if TYPE_CHECKING:
    from graphprof_cli.request import ProfileRequest

__all__ = [
    "GenerateOption",
    "PromptLenOption",
    "NewTokensOption",
    "KVDtypeOption",
    "CacheOption",
    "run_generate",
]

GenerateOption = Annotated[
    bool,
    flag(
        "--generate",
        help="Profile generate(): prefill and decode with a KV cache, per layer; time to first token, per token, will it fit.",
    ),
]
PromptLenOption = Annotated[
    int, typer.Option("--prompt-len", min=1, help="With --generate: prompt tokens (the prefill).")
]
NewTokensOption = Annotated[int, typer.Option("--new-tokens", min=1, help="With --generate: tokens to generate.")]
KVDtypeOption = Annotated[
    str | None,
    typer.Option("--kv-dtype", help="With --generate: the KV cache's dtype (default: --dtype, else bfloat16)."),
]
CacheOption = Annotated[
    str,
    typer.Option(
        "--cache",
        help="With --generate: static (K/V written in place) or dynamic (transformers' DynamicCache, torch.cat each step).",
    ),
]


def run_generate(req: ProfileRequest) -> None:
    """Profile (and with ``--measure`` run) generation, print the report, write ``--output`` as JSON."""
    from graphprof.devices.hardware import resolve_hardware
    from graphprof.generate import profile_generation
    from graphprof.generate.measure import with_measurement
    from graphprof.render.generate import render_generation
    from graphprof_cli.common import console as make_console
    from graphprof_cli.output import emit, plan

    def checked() -> tuple[Any, Any]:  # before any model is built: the hardware and the output's folder
        hardware = resolve_hardware(req.hardware, peak_tflops=req.peak_tflops, bandwidth_gbs=req.bandwidth_gbs)
        return hardware, plan("generate", req.output, redact=req.redact)

    hardware, target = run_guarded(checked, req.debug)
    console = make_console(req.width)
    options = {
        "prompt_len": req.prompt_len, "new_tokens": req.new_tokens, "batch_size": req.batch_size or 1, "dtype": req.dtype,
        "kv_dtype": req.kv_dtype, "cache": req.cache, "hardware": hardware,
    }  # fmt: skip
    with console.status(f"profiling generate() of {req.model} ...", spinner="dots"):
        if req.measure:
            result = run_guarded(lambda: with_measurement(req.model, device=req.device, **options), req.debug)
        else:
            result = run_guarded(lambda: profile_generation(req.model, **options), req.debug)
    if target is None or not target.to_stdout:  # with --output -, stdout carries the JSON alone
        console.print(render_generation(result))
    emit(result, target, console, req.debug)

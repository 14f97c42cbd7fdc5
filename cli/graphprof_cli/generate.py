"""``graphprof --model hf:llama-3-8b --generate [--prompt-len 1024] [--new-tokens 256]``: the options and their handling.

The main command declares these options (``GenerateOption`` ...) and hands over to :func:`run_generate`
when ``--generate`` is given. Parsing only: the work is :func:`graphprof.generate.profile_generation`
(and :func:`graphprof.generate.measure.measure_generation` with ``--measure``); the output is
:func:`graphprof.render.generate.render_generation`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from graphprof_cli.common import flag, run_guarded

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


def run_generate(
    *,
    model: str,
    prompt_len: int,
    new_tokens: int,
    batch_size: int | None,
    dtype: str | None,
    kv_dtype: str | None,
    cache: str,
    hardware: Any,
    measure: bool,
    device: str | None,
    output: Path | None,
    console: Any,
    debug: bool,
) -> None:
    """Profile (and with ``measure`` run) generation, print the report, write ``--output`` as JSON."""
    from graphprof.generate import profile_generation
    from graphprof.generate.measure import with_measurement
    from graphprof.render.generate import render_generation

    options = {
        "prompt_len": prompt_len, "new_tokens": new_tokens, "batch_size": batch_size or 1, "dtype": dtype,
        "kv_dtype": kv_dtype, "cache": cache, "hardware": hardware,
    }  # fmt: skip
    with console.status(f"profiling generate() of {model} ...", spinner="dots"):
        if measure:
            result = run_guarded(lambda: with_measurement(model, device=device, **options), debug)
        else:
            result = run_guarded(lambda: profile_generation(model, **options), debug)
    if output is not None and str(output) == "-":
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
        return
    console.print(render_generation(result))
    if output is not None:
        from graphprof.render.files import write_atomic

        run_guarded(lambda: write_atomic(output, json.dumps(result.to_dict(), indent=2) + "\n"), debug)
        console.print(f"wrote {output}")

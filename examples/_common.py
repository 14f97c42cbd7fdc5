"""What the examples share: where they write their files, and the small local LLaMA of seed 000's examples."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any


def arguments(folder: bool = True) -> argparse.Namespace:
    """The script's command line: ``--help`` prints its docstring and exits; with ``folder``, one optional
    output folder (anything else, a misspelt option included, is refused by argparse, exit 2)."""
    parser = argparse.ArgumentParser(
        prog=Path(sys.argv[0]).name, description=sys.modules["__main__"].__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    if folder:
        parser.add_argument("folder", nargs="?", type=Path, help="where its files go (default: a fresh temporary folder)")
    return parser.parse_args()


def out_dir() -> Path:
    """The folder given as the argument (made when missing), else a fresh temporary one. A folder that cannot
    be made (a file of that name, no permission) is one line on standard error and exit 2."""
    path = arguments().folder
    if path is None:
        return Path(tempfile.mkdtemp(prefix="graphprof-example-"))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"{Path(sys.argv[0]).name}: error: cannot use {str(path)!r} as the output folder: {exc.strerror or exc}", file=sys.stderr)
        sys.exit(2)
    return path


def tiny_llama() -> tuple[Any, Any]:
    """``(LlamaForCausalLM, input_ids)``: a 2-layer LLaMA built from a config (no download), 16 tokens."""
    import torch
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=1000, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    return model, torch.randint(0, config.vocab_size, (1, 16))

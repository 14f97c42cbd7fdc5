"""What the examples share: where they write their files, and the small local LLaMA of seed 000's examples."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any


def arguments(folder: bool = True) -> argparse.Namespace:
    """The script's command line: ``--help`` prints its docstring and exits; with ``folder``, one optional
    output folder (anything else, a misspelt option included, is refused by argparse, exit 2), made when
    missing before the script runs: one that cannot be made or written (a file of that name, no permission)
    is one line on standard error and exit 2, whether or not the script writes there."""
    parser = argparse.ArgumentParser(
        prog=Path(sys.argv[0]).name, description=sys.modules["__main__"].__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    if folder:
        parser.add_argument("folder", nargs="?", type=Path, help="where its files go (default: a fresh temporary folder)")
    args = parser.parse_args()
    if getattr(args, "folder", None) is not None:
        _usable(args.folder)
    return args


def _usable(path: Path) -> None:
    """``path`` made (when missing) and writable, else one line on standard error and exit 2."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as exc:
        print(f"{Path(sys.argv[0]).name}: error: cannot use {str(path)!r} as the output folder: {exc.strerror or exc}", file=sys.stderr)
        sys.exit(2)


def out_dir() -> Path:
    """The folder given as the argument (:func:`arguments`: made when missing, checked), else a fresh
    temporary one."""
    path = arguments().folder
    return Path(tempfile.mkdtemp(prefix="graphprof-example-")) if path is None else Path(path)


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

"""Hugging Face transformers: small built-in configs (``hf:llama``) and local config directories.

Spec syntax::

    hf:llama                                      the preset below, random init
    hf:llama?hidden_size=512&num_hidden_layers=2  the preset with config fields overridden
    hf:/path/to/dir                               a directory holding config.json (local files only)
    hf:/path/to/dir?num_hidden_layers=2           the same, overridden

Option values are read as int, float, ``true``/``false``, ``none``, else kept as text; a name the
config does not have is an :class:`InvalidInputError`. A directory named like a preset needs a
path form (``hf:./llama``). A hub id (``hf:meta-llama/Llama-2-7b-hf``) is refused with
:class:`DownloadUnavailableError`: graphprof never downloads, not even a config.

Presets (small enough to build in well under a second on CPU):

* ``hf:llama``: ``LlamaConfig(hidden_size=256, intermediate_size=688, num_hidden_layers=4,
  num_attention_heads=4, num_key_value_heads=2, vocab_size=32000, max_position_embeddings=2048,
  tie_word_embeddings=False)``: grouped-query attention (2 KV heads), 19,286,272 parameters.
* ``hf:gpt2``: ``GPT2Config(n_embd=256, n_layer=4, n_head=4, n_positions=1024)``, GPT-2's vocabulary.

The model is ``AutoModelForCausalLM.from_config(config)`` (``AutoModel`` for configs that are not
causal LMs) with ``attn_implementation="sdpa"`` (``"eager"`` where the model has no SDPA path),
float32, ``use_cache=False`` (one forward over the whole sequence, no KV cache). Input: keyword
``input_ids``, int64 ``1x128`` (``input_shape`` is ``(batch, seq)``).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any
from urllib.parse import parse_qsl

import torch

from graphprof.errors import (
    DownloadUnavailableError,
    InvalidInputError,
    MissingDependencyError,
    ModelBuildError,
    ModelNotFoundError,
)
from graphprof.models.base import ModelInfo, ResolvedModel, effective_shape, format_shape, random_token_ids
from graphprof.models.device import build_module

__all__ = ["PREFIX", "PRESETS", "SEQ_LEN", "list_hf", "resolve_hf", "parse_options"]

PREFIX = "hf:"
SEQ_LEN = 128
INSTALL_HINT = "pip install 'graphprof[hf]' (transformers)"

# preset -> (transformers config class, its arguments)
PRESETS: MappingProxyType[str, tuple[str, MappingProxyType[str, Any]]] = MappingProxyType(
    {
        "llama": (
            "LlamaConfig",
            MappingProxyType(
                {
                    "hidden_size": 256,
                    "intermediate_size": 688,
                    "num_hidden_layers": 4,
                    "num_attention_heads": 4,
                    "num_key_value_heads": 2,
                    "vocab_size": 32000,
                    "max_position_embeddings": 2048,
                    "tie_word_embeddings": False,
                }
            ),
        ),
        "gpt2": (
            "GPT2Config",
            MappingProxyType({"n_embd": 256, "n_layer": 4, "n_head": 4, "n_positions": 1024, "vocab_size": 50257}),
        ),
    }
)


def list_hf() -> list[ModelInfo]:
    """One :class:`ModelInfo` per preset; imports no transformers."""
    return [ModelInfo(name=f"{PREFIX}{name}", family="hf", default_input=f"input_ids 1x{SEQ_LEN}") for name in PRESETS]


def _value(text: str) -> Any:
    lowered = text.lower()
    if lowered in {"true", "false"}:
        return lowered == "true"
    if lowered in {"none", "null"}:
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_options(query: str) -> dict[str, Any]:
    """``"hidden_size=512&rope_theta=1e6"`` -> ``{"hidden_size": 512, "rope_theta": 1000000.0}``."""
    if not query:
        return {}
    try:
        pairs = parse_qsl(query, keep_blank_values=False, strict_parsing=True)
    except ValueError as exc:
        raise InvalidInputError(f"bad hf options {query!r}; write name=value&name=value") from exc
    return {name: _value(text) for name, text in pairs}


def _import_transformers() -> ModuleType:
    try:
        import transformers
    except ImportError as exc:
        raise MissingDependencyError(f"hf: models need transformers: {INSTALL_HINT} ({exc})") from exc
    return transformers


def _local_dir(target: str, spec: str) -> Path:
    """The local config directory ``target`` names, or the error that says why it is none."""
    path = Path(target).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(f"{spec}: {path} has no config.json")
        return path
    looks_like_path = target.startswith(("/", ".", "~")) or "\\" in target or path.exists()
    if not looks_like_path and target.count("/") == 1:
        raise DownloadUnavailableError(
            f"{spec} is a Hugging Face hub id and graphprof never downloads; save its config.json in a "
            "directory and pass hf:/path/to/that/dir"
        )
    if looks_like_path:
        raise ModelNotFoundError(f"{spec}: no directory {path}")
    close = difflib.get_close_matches(target.lower(), list(PRESETS), n=3)
    hint = f"did you mean {', '.join(PREFIX + c for c in close)}? " if close else ""
    raise ModelNotFoundError(
        f"unknown model '{spec}'; {hint}(known: {', '.join(PREFIX + p for p in PRESETS)}, or hf:/path/to/config_dir)"
    )


def _apply_options(config: Any, options: dict[str, Any], spec: str) -> None:
    for name, value in options.items():
        if not hasattr(config, name):
            raise InvalidInputError(f"{spec}: {type(config).__name__} has no field {name!r}")
        setattr(config, name, value)


def _make_config(transformers: ModuleType, target: str, options: dict[str, Any], spec: str) -> tuple[Any, str]:
    """The config to build and a short description of where it came from."""
    preset = PRESETS.get(target.lower())
    if preset is None:
        path = _local_dir(target, spec)
        try:
            config = transformers.AutoConfig.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
        except Exception as exc:
            raise ModelBuildError(f"could not read {path / 'config.json'}: {type(exc).__name__}: {exc}") from exc
        _apply_options(config, options, spec)
        return config, f"{type(config).__name__} from {path / 'config.json'}"
    class_name, defaults = preset
    config_class = getattr(transformers, class_name)
    _apply_options(config_class(), options, spec)  # only to check the names
    arguments = {**defaults, **options}
    try:
        config = config_class(**arguments)
    except Exception as exc:
        raise InvalidInputError(f"{spec}: {class_name} rejects these options: {exc}") from exc
    text = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
    return config, f"{class_name}({text})"


def _model_builder(transformers: ModuleType, config: Any, attention: str) -> Any:
    def make() -> torch.nn.Module:
        try:
            return transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attention)
        except ValueError as exc:
            if "Unrecognized configuration class" not in str(exc):
                raise
            return transformers.AutoModel.from_config(config, attn_implementation=attention)

    return make


def resolve_hf(
    spec: str,
    *,
    input_shape: Sequence[int] | None,
    batch_size: int | None,
    device: torch.device,
) -> ResolvedModel:
    """Build ``hf:<preset or dir>[?options]`` with random weights, and ``input_ids`` for it."""
    target, _, query = spec[len(PREFIX) :].partition("?")
    if not target:
        raise ModelNotFoundError(f"'{spec}' names no model; e.g. {PREFIX}llama or hf:/path/to/config_dir")
    options = parse_options(query)
    shape = effective_shape((1, SEQ_LEN), input_shape, batch_size, layout="batch,seq", model=spec)
    if target.lower() not in PRESETS:
        _local_dir(target, spec)  # its errors before transformers' import time
    transformers = _import_transformers()
    config, origin = _make_config(transformers, target, options, spec)
    config.use_cache = False
    max_positions = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if isinstance(max_positions, int) and shape[1] > max_positions:
        raise InvalidInputError(f"{spec}: sequence length {shape[1]} exceeds the model's {max_positions} positions")
    vocab_size = getattr(config, "vocab_size", None)
    if not isinstance(vocab_size, int) or vocab_size <= 0:
        raise ModelBuildError(f"{spec}: its config has no vocab_size; graphprof feeds hf models input_ids")
    name = spec if target.lower() in PRESETS else f"{PREFIX}{Path(target).expanduser().name}"
    attention = "sdpa"
    try:
        model, build_notes = build_module(_model_builder(transformers, config, attention), device, name)
    except ModelBuildError as exc:
        if "sdpa" not in str(exc).lower():
            raise
        attention = "eager"
        model, build_notes = build_module(_model_builder(transformers, config, attention), device, name)
    model = model.float().eval()
    notes = (
        f"{origin}, built without weights (random init)",
        f"attention: {attention}; use_cache=False (one forward over the sequence, no KV cache)",
        f"input: input_ids {format_shape(shape)} (batch, seq)",
        *build_notes,
    )
    ids = random_token_ids(shape, vocab_size, device)
    return ResolvedModel(name=name, family="hf", model=model, args=(), kwargs={"input_ids": ids}, notes=notes)

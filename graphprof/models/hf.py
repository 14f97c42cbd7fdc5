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

The catalogue (:data:`PRESETS`): plain config data, one dict per model, built on the meta device with
random init and nothing downloaded. ``hf:llama`` is a small LLaMA (19,286,272 parameters, built in well
under a second); the others are the published configurations, at their published parameter counts:
``hf:gpt2`` (124M), ``hf:llama-3-8b``, ``hf:llama-3-70b``, ``hf:mistral-7b``, ``hf:mixtral-8x7b``,
``hf:qwen2-7b``, ``hf:phi-3-mini``, ``hf:gemma-2-9b``, ``hf:gemma-3-1b``, ``hf:qwen3-30b-a3b``, ``hf:mamba-2.8b``,
``hf:mamba-codestral-7b``, ``hf:deepseek-v2-lite``, ``hf:deepseek-v3``, ``hf:bert-base``, ``hf:t5-base``,
``hf:vit-b-16``, ``hf:whisper-small``. Where a model file can call fused kernels instead of its torch
reference (Mamba's scans), :mod:`graphprof.models.hf_kernels` names them.

The model is ``AutoModelForCausalLM.from_config(config)`` (``AutoModel`` for configs that are not
causal LMs, and for BERT and ViT; the seq2seq class for T5 and Whisper) with
``attn_implementation="sdpa"`` (``"eager"`` where the model has no SDPA path),
float32, ``use_cache=False`` (one forward over the whole sequence, no KV cache). Input: keyword
``input_ids``, int64 ``1x128`` (``input_shape`` is ``(batch, seq)``); encoder-decoders add
``decoder_input_ids`` of up to 64 tokens; ViT takes ``pixel_values`` 1x3x224x224 and Whisper
``input_features`` 1x80x3000 (30 s of audio).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any, cast
from urllib.parse import parse_qsl

import torch

from graphprof.errors import DownloadUnavailableError, InvalidInputError, MissingDependencyError, ModelBuildError, ModelNotFoundError
from graphprof.models.base import ModelInfo, ResolvedModel, effective_shape, format_shape, random_token_ids
from graphprof.models.device import build_module
from graphprof.models.family import Family, Source
from graphprof.models.hf_attention import ATTENTION, register_attention
from graphprof.models.hf_kernels import fused_kernels, kernel_notes, refuse_uncountable

__all__ = ["FAMILY", "SOURCE", "PREFIX", "PRESETS", "SEQ_LEN", "list_hf", "resolve_hf", "parse_options"]

PREFIX = "hf:"
SEQ_LEN = 128
INSTALL_HINT = "pip install 'graphprof[hf]' (transformers)"


def _catalogue() -> MappingProxyType[str, MappingProxyType[str, Any]]:
    """The catalogue's configs by name, read-only, from the data file shipped with the package."""
    data = json.loads(resources.files("graphprof.models").joinpath("hf_catalogue.json").read_text(encoding="utf-8"))
    return MappingProxyType({name: MappingProxyType(dict(entry["config"])) for name, entry in data["models"].items()})


# The catalogue is data (``hf_catalogue.json`` beside this file): one config per model (``model_type`` + the
# fields that differ from that type's defaults), built with ``AutoConfig.for_model`` on the meta device; nothing
# is downloaded. Each entry's ``about`` names its source and the published parameter count the tests check.
PRESETS: MappingProxyType[str, MappingProxyType[str, Any]] = _catalogue()

# The model class built for a model_type (AutoModelForCausalLM, else AutoModel, for any other) and its inputs.
_AUTO_CLASS = MappingProxyType(
    {"bert": "AutoModel", "vit": "AutoModel", "t5": "AutoModelForSeq2SeqLM", "whisper": "AutoModelForSpeechSeq2Seq"}
)
_ATTENTION_NOTES = MappingProxyType(
    {
        ATTENTION: "sdpa; on a dry run causal and sliding-window layers follow the mask's structure from the config "
        "(graphprof.models.hf_attention)"
    }
)
IMAGE_SIZE = 224
AUDIO_FRAMES = 3000  # Whisper's 30 s window of 10 ms frames
DECODER_LEN = 64


def list_hf() -> list[ModelInfo]:
    """One :class:`ModelInfo` per catalogue entry; imports no transformers."""
    return [ModelInfo(name=f"{PREFIX}{name}", family="hf", default_input=_input_text(cfg)) for name, cfg in PRESETS.items()]


def _input_text(config: Mapping[str, Any]) -> str:
    kind = config.get("model_type")
    if kind == "vit":
        return f"pixel_values 1x3x{IMAGE_SIZE}x{IMAGE_SIZE}"
    if kind == "whisper":
        return f"input_features 1x80x{AUDIO_FRAMES}, decoder_input_ids 1x{DECODER_LEN}"
    if kind == "t5":
        return f"input_ids 1x{SEQ_LEN}, decoder_input_ids 1x{DECODER_LEN}"
    return f"input_ids 1x{SEQ_LEN}"


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
    raise ModelNotFoundError(f"unknown model '{spec}'; {hint}(known: {', '.join(PREFIX + p for p in PRESETS)}, or hf:/path/to/config_dir)")


def _apply_options(config: Any, options: dict[str, Any], spec: str) -> None:
    for name, value in options.items():
        if not hasattr(config, name):
            raise InvalidInputError(f"{spec}: {type(config).__name__} has no field {name!r}")
        try:
            setattr(config, name, value)
        except Exception as exc:  # transformers' configs validate their fields as they are set
            raise InvalidInputError(f"{spec}: {type(config).__name__} rejects {name}={value!r}: {' '.join(str(exc).split())}") from exc


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
    fields = {k: v for k, v in preset.items() if k != "model_type"}
    model_type = preset["model_type"]
    _apply_options(transformers.AutoConfig.for_model(model_type, **fields), options, spec)  # only to check the names
    arguments = {**fields, **options}
    try:
        config = transformers.AutoConfig.for_model(model_type, **arguments)
    except Exception as exc:
        raise InvalidInputError(f"{spec}: {model_type} config rejects these options: {exc}") from exc
    text = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
    return config, f"{type(config).__name__}({text})"


def _model_builder(transformers: ModuleType, config: Any, attention: str) -> Any:
    auto_class = _AUTO_CLASS.get(getattr(config, "model_type", ""))

    def make() -> torch.nn.Module:
        if auto_class is not None:
            return cast(torch.nn.Module, getattr(transformers, auto_class).from_config(config, attn_implementation=attention))
        try:
            return cast(torch.nn.Module, transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attention))
        except ValueError as exc:
            if "Unrecognized configuration class" not in str(exc):
                raise
            return cast(torch.nn.Module, transformers.AutoModel.from_config(config, attn_implementation=attention))

    return make


def _inputs(config: Any, shape: tuple[int, ...], device: torch.device) -> tuple[dict[str, torch.Tensor], str]:
    """The keyword inputs for the config's model type, and their description."""
    kind = getattr(config, "model_type", "")
    batch = shape[0]
    if kind == "vit":
        size: tuple[int, ...] = (batch, 3, config.image_size, config.image_size)
        return {"pixel_values": _floats(size, device)}, f"pixel_values {format_shape(size)}"
    vocab_size = getattr(config, "vocab_size", None)
    if not isinstance(vocab_size, int) or vocab_size <= 0:
        raise ModelBuildError(f"{getattr(config, 'name_or_path', kind)}: its config has no vocab_size; graphprof feeds hf models input_ids")
    decoder = (batch, min(DECODER_LEN, shape[1]))
    if kind == "whisper":
        size = (batch, config.num_mel_bins, AUDIO_FRAMES)
        inputs = {"input_features": _floats(size, device), "decoder_input_ids": random_token_ids(decoder, vocab_size, device)}
        return inputs, f"input_features {format_shape(size)}, decoder_input_ids {format_shape(decoder)}"
    ids = random_token_ids(shape, vocab_size, device)
    if getattr(config, "is_encoder_decoder", False):
        inputs = {"input_ids": ids, "decoder_input_ids": random_token_ids(decoder, vocab_size, device)}
        return inputs, f"input_ids {format_shape(shape)} (batch, seq), decoder_input_ids {format_shape(decoder)}"
    return {"input_ids": ids}, f"input_ids {format_shape(shape)} (batch, seq)"


def _floats(size: tuple[int, ...], device: torch.device) -> torch.Tensor:
    if device.type == "meta":
        return torch.empty(size, device=device)
    return torch.randn(size, generator=torch.Generator().manual_seed(0)).to(device)


def _build(transformers: ModuleType, config: Any, device: torch.device, name: str) -> tuple[torch.nn.Module, tuple[str, ...], str]:
    """The model with the structured attention of :mod:`graphprof.models.hf_attention` (SDPA on a real
    run), else plain ``sdpa``, else ``eager`` where the model has neither."""
    register_attention()
    for attention in (ATTENTION, "sdpa"):
        try:
            model, notes = build_module(_model_builder(transformers, config, attention), device, name)
            return model, notes, attention
        except (ModelBuildError, ValueError) as exc:
            if "attn" not in str(exc).lower() and "attention" not in str(exc).lower() and "sdpa" not in str(exc).lower():
                raise
    model, notes = build_module(_model_builder(transformers, config, "eager"), device, name)
    return model, notes, "eager"


def resolve_hf(spec: str, *, input_shape: Sequence[int] | None, batch_size: int | None, device: torch.device) -> ResolvedModel:
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
    name = spec if target.lower() in PRESETS else f"{PREFIX}{Path(target).expanduser().name}"
    model, build_notes, attention = _build(transformers, config, device, name)
    kernels = fused_kernels(model)
    if device.type in ("meta", "cpu"):  # a Triton or CUDA kernel runs on neither
        refuse_uncountable(kernels, name)
    model = model.float().eval()
    inputs, described = _inputs(config, shape, device)
    notes = (
        f"{origin}, built without weights (random init)",
        f"attention: {_ATTENTION_NOTES.get(attention, attention)}; use_cache=False (one forward over the sequence, no KV cache)",
        f"input: {described}",
        *kernel_notes(kernels),
        *build_notes,
    )
    return ResolvedModel(name=name, family="hf", model=model, args=(), kwargs=inputs, notes=notes)


#: The Hugging Face family: token ids in, a depth set by ``num_hidden_layers``.
FAMILY = Family(
    "hf",
    dynamo_skip="transformers models take about 0.5 s per decoder layer to export; the eager capture gives the same counts per module",
    library="transformers.",
    sequence_length=True,
    depth_option="num_hidden_layers",
)


#: ``hf:llama``, ``hf:/path/to/config_dir``.
SOURCE = Source.prefixed(FAMILY, PREFIX, resolve_hf, list_hf)

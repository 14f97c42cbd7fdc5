"""A real forward is a decision, not a side effect: a warm-up, a build for an export, a build that falls back
from the meta device and a measured generation count the weights first and are refused in one line, before
allocating, when they exceed what the machine has. The machine's memory is lowered here
(``graphprof.base.limits.available_memory``), never gigabytes allocated."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import graphprof
from graphprof.base import limits
from graphprof.errors import InvalidInputError

LLAMA = "hf:llama?num_hidden_layers=2"  # 17.8 M parameters: 71.34 MB of float32 weights


@pytest.fixture
def small_machine(monkeypatch: pytest.MonkeyPatch) -> int:
    """This machine, said to have 4 MB available."""
    monkeypatch.setattr(limits, "available_memory", lambda: 4_000_000)
    return 4_000_000


@pytest.fixture
def no_real_build(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The devices graphprof's named builds were asked for (a real build is any but meta)."""
    from graphprof.models import registry

    asked: list[str] = []
    resolve = registry.resolve_model

    def watched(spec: str, **kwargs: object) -> object:
        asked.append(str(kwargs.get("device")))
        return resolve(spec, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(registry, "resolve_model", watched)
    monkeypatch.setattr("graphprof.models.resolve_model", watched)
    return asked


@pytest.mark.parametrize(("options", "flag"), [({"warm_up": "always"}, "--capture-warmup always"), ({"device": "cpu"}, "--export-onnx")])
def test_a_real_build_that_cannot_fit_is_refused_before_it_is_built(
    small_machine: int, no_real_build: list[str], options: dict[str, str], flag: str
) -> None:
    with pytest.raises(InvalidInputError, match=r"would need 71\.\d+ MB, more than the 4\.00 MB") as error:
        graphprof.prepare(LLAMA, **options)
    assert flag in str(error.value) and "meta device" in str(error.value)
    assert set(no_real_build) == {"meta"}  # counted on the meta device; nothing built with weights


def test_a_meta_build_needs_no_room(small_machine: int) -> None:
    prepared = graphprof.prepare(LLAMA)
    assert all(p.is_meta for p in prepared.model.parameters())


def test_the_fallback_from_the_meta_device_is_refused_when_the_weights_cannot_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_real_build: list[str]
) -> None:
    """A config folder whose dry run fails on the meta device would be built again with real weights on the CPU
    (a 7B MPT: 26 GB): that build is refused first, with the figure and the meta failure named."""
    transformers = pytest.importorskip("transformers")
    folder = tmp_path / "mpt"
    transformers.MptConfig(d_model=64, n_heads=4, n_layers=2, vocab_size=100, max_seq_len=128).save_pretrained(folder)
    monkeypatch.setattr(limits, "available_memory", lambda: 1000)
    try:
        prepared = graphprof.prepare(f"hf:{folder}")
    except InvalidInputError as exc:
        assert "would need" in str(exc) and "meta device failed" in str(exc)
        assert set(no_real_build) == {"meta"}
    else:  # a transformers whose MPT runs on the meta device: no real weights at all
        assert all(p.is_meta for p in prepared.model.parameters())


def test_measuring_generation_counts_the_weights_before_building(small_machine: int, no_real_build: list[str]) -> None:
    pytest.importorskip("transformers")
    from graphprof.generate.measure import measure_generation

    with pytest.raises(InvalidInputError, match=r"measuring generation of .* would need .*--measure"):
        measure_generation(LLAMA, prompt_len=8, new_tokens=2, runs=1, warmup=0)
    assert set(no_real_build) == {"meta"}


def test_measure_refuses_with_the_same_check(small_machine: int) -> None:
    prepared = graphprof.prepare(torch.nn.Linear(2000, 1000), input_shape=(1, 2000))  # 8 MB of weights
    with pytest.raises(InvalidInputError, match=r"measuring .* would need 8\.\d+ MB, more than the 4\.00 MB.*--measure"):
        prepared.measure(device="cpu", iters=1, warmup=0)

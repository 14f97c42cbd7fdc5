"""The user's state as found: BatchNorm buffers after a training measurement, torch's default dtype."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import graphprof

# ---- the user's state (point 7) -----------------------------------------------------------------------


def _bn_net() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))


def test_batchnorm_buffers_are_bit_identical_after_a_train_measurement() -> None:
    model = _bn_net()
    before = {k: v.clone() for k, v in model.named_buffers()}
    version = model[1].num_batches_tracked._version
    pm = graphprof.prepare(model, example_inputs=(torch.randn(2, 3, 8, 8),), mode="train")
    assert model[1].num_batches_tracked._version == version  # the dry run wrote nothing
    with torch.no_grad():  # the caller's grad mode does not matter
        r = pm.measure(device="cpu", iters=2, warmup=1, layer_runs=1, breakdown=False)
    assert r.training_step is not None
    assert all(torch.equal(before[k], v) for k, v in model.named_buffers())


@pytest.mark.slow  # over 2 s: the full suite runs it, the fast tier does not
def test_a_float64_default_dtype_does_not_break_a_real_run() -> None:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        pm = graphprof.prepare("alexnet", device="cpu", input_shape=(1, 3, 64, 64))
        assert pm.measure(device="cpu", iters=2, warmup=1, layer_runs=1, breakdown=False).forward.mean > 0
        assert torch.get_default_dtype() == torch.float64  # the caller's default is left as it was
    finally:
        torch.set_default_dtype(previous)


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["profile_model", "shard_profile"])
def test_the_callers_environment_is_as_found(entry: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """PyTorch's compiler writes ``TORCHINDUCTOR_CACHE_DIR`` into ``os.environ`` when a LLaMA is profiled."""
    import os

    import graphprof
    from graphprof.sharding import shard_profile

    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    before = dict(os.environ)
    if entry == "profile_model":
        graphprof.profile_model("hf:llama")
    else:
        shard_profile("hf:llama", "fsdp:2")
    assert dict(os.environ) == before


# ---- Python's collector (graphprof.base.collector) -----------------------------------------------------


def test_a_dry_run_defers_full_collections_and_puts_the_callers_thresholds_back() -> None:
    import gc

    seen: list[tuple[int, ...]] = []

    class Watch(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            seen.append(gc.get_threshold())
            return x * 2

    previous, enabled = gc.get_threshold(), gc.isenabled()
    gc.set_threshold(500, 7, 9)  # the caller's own choice
    try:
        graphprof.profile_model(Watch(), input_shape=(2, 3))
        graphprof.prepare(Watch(), input_shape=(2, 3)).profile()
        assert gc.get_threshold() == (500, 7, 9) and gc.isenabled() == enabled
    finally:
        gc.set_threshold(*previous)
    # inside, young collections keep the caller's thresholds; only the oldest generation waits
    assert seen and all(t[:2] == (500, 7) and t[2] > 10**6 for t in seen)

"""The seed-004 API: sizes, ratios and types checked (InvalidInputError), never negative FLOPs."""

from __future__ import annotations

import pytest
import torch


# ---- the seed-004 API: sizes, ratios and types checked, InvalidInputError -----------------------------------
@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.set_seed("abc"),
        lambda s: s.set_seed(1.5),
        lambda s: s.MemoryProfiler(torch.nn.Linear(2, 2), device="bogus"),
        lambda s: s.RuntimeProfiler(torch.nn.Linear(2, 2), device="bogus"),
        lambda s: s.RuntimeProfiler(torch.nn.Linear(2, 2), num_runs=-1),
        lambda s: s.estimate_attention_memory(-1000, 8, 256),
        lambda s: s.estimate_attention_memory(1000, 8, "256"),
        lambda s: s.estimate_pe_storage(1000, 32, 16, float("nan")),
        lambda s: s.estimate_pe_storage(-1000, 32, 16, 0.1),
        lambda s: s.profile_memory_usage(lambda: None, device="bogus"),
    ],
)
def test_the_seed004_api_refuses_bad_sizes_ratios_and_types(call) -> None:
    from graphprof.compat import seed004_profiling
    from graphprof.errors import InvalidInputError

    with pytest.raises(InvalidInputError):
        call(seed004_profiling)


def test_the_seed004_estimator_refuses_negative_sizes_rather_than_negative_flops() -> None:
    from graphprof.errors import InvalidInputError
    from graphprof.gnn.estimate import FLOPsEstimator

    with pytest.raises(InvalidInputError, match="num_nodes"):
        FLOPsEstimator(torch.nn.Linear(2, 2)).estimate(-100, 10)


@pytest.mark.parametrize("model", ["not a model", 42, None])
def test_the_estimator_refuses_what_is_not_a_module(model: object) -> None:
    """``FLOPsEstimator('not a model')`` was a raw AttributeError."""
    from graphprof.errors import InvalidInputError
    from graphprof.seed004 import FLOPsEstimator

    with pytest.raises(InvalidInputError, match="needs an nn.Module"):
        FLOPsEstimator(model)  # type: ignore[arg-type]

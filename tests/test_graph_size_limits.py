"""Graph-model sizes that cannot fit are refused with the bytes they would need; options that are not numbers are bad input."""

from __future__ import annotations

import pytest

import graphprof
from graphprof.errors import InvalidInputError


# ---- 12. graph sizes refused up front, with the bytes they would need -------------------------------
@pytest.mark.parametrize(
    "spec",
    [
        "pyg:gin?num_edges=1000000000000000",
        "pyg:gin?avg_degree=1000000000000",
        "pyg:gin?hidden_dim=1000000000",
        "pyg:gin?num_nodes=1000000000000",
    ],
)
def test_graph_sizes_that_cannot_fit_are_refused_with_their_size(spec: str, monkeypatch) -> None:
    pytest.importorskip("torch_geometric")
    from graphprof.models import graphs

    monkeypatch.setattr(graphs.torch, "randint", lambda *a, **k: pytest.fail("allocated before the check"))
    with pytest.raises(InvalidInputError, match=r"would need [0-9.]+ [kMGTPE]?B"):
        graphprof.profile_model(spec)


@pytest.mark.parametrize("query", ["avg_degree=nan", "avg_degree=inf", "pe_dim=-1", "dropout=nan", "ffn_dim=-2"])
def test_graph_options_that_are_not_numbers_are_bad_input(query: str) -> None:
    pytest.importorskip("torch_geometric")
    with pytest.raises(InvalidInputError):
        graphprof.profile_model(f"pyg:gin?{query}")

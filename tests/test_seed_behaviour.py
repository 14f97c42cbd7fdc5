"""The seeds' rows that ran but behaved differently from what their users expect (issue 20)."""

from __future__ import annotations

import pytest

import graphprof
from graphprof.render.table import _module_shapes


@pytest.mark.slow
def test_yolov8n_output_shape_is_the_models_real_one() -> None:
    """Seed 001's headline model: the detect head returns (1, 84, 8400) (4 box + 80 class rows, one column
    per anchor: 80x80 + 40x40 + 20x20 = 8400), and so does the model, whatever the capture."""
    p = graphprof.profile_model("yolov8n")
    shapes = _module_shapes(p)
    assert shapes["model.22"][0] == (1, 84, 8400)
    assert shapes[""][0] == (1, 84, 8400) and shapes["model"][0] == (1, 84, 8400)

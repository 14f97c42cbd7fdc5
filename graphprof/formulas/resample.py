"""Interpolation and sampling: upsample / F.interpolate in every mode, grid_sample, affine_grid.

Each output element costs its mode's table rate: nearest copies one source element (0 FLOPs, counted for
its bytes), linear / bilinear / trilinear / bicubic weigh 2 / 4 / 8 / 16 neighbours. The interpolation
weights depend on one coordinate each and are amortised over a row, so they are not counted. Antialiased
modes are costed like their plain mode. ``area`` mode reaches dispatch as adaptive average pooling.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from graphprof.formulas.common import contraction, first, flops_of
from graphprof.formulas.cost import Cost, TensorMeta
from graphprof.formulas.registry import register

aten = torch.ops.aten


def _upsample(name: str) -> Callable[..., Cost]:
    def formula(*args: Any, out: Any, **kwargs: Any) -> Cost:
        return Cost(flops=flops_of(name, n_output=first(out).numel))

    formula.__name__ = formula.__qualname__ = f"{name}_cost"
    return formula


register(
    aten.upsample_nearest1d, aten.upsample_nearest2d, aten.upsample_nearest3d,
    aten._upsample_nearest_exact1d, aten._upsample_nearest_exact2d, aten._upsample_nearest_exact3d,
)(_upsample("upsample_nearest"))  # fmt: skip
register(aten.upsample_linear1d)(_upsample("upsample_linear"))
register(aten.upsample_bilinear2d, aten._upsample_bilinear2d_aa)(_upsample("upsample_bilinear"))
register(aten.upsample_bicubic2d, aten._upsample_bicubic2d_aa)(_upsample("upsample_bicubic"))
register(aten.upsample_trilinear3d)(_upsample("upsample_trilinear"))

# grid_sampler interpolation_mode: 0 bilinear, 1 nearest, 2 bicubic
GRID_MODES_2D = ("upsample_bilinear", "upsample_nearest", "upsample_bicubic")
GRID_MODES_3D = ("upsample_trilinear", "upsample_nearest", "upsample_bicubic")


@register(aten.grid_sampler_2d, aten.grid_sampler_3d, aten.grid_sampler)
def grid_sampler_cost(input: TensorMeta, grid: TensorMeta, interpolation_mode: int = 0, *args: Any, out: Any, **_: Any) -> Cost:
    # per grid point: unnormalise the coordinates and compute the weights; per output: interpolate
    dims = grid.shape[-1]
    modes = GRID_MODES_2D if dims == 2 else GRID_MODES_3D
    points = grid.numel // dims
    result = first(out)
    return Cost(flops=flops_of("grid_sample", n_input=points) + flops_of(modes[interpolation_mode], n_output=result.numel))


@register(aten.affine_grid_generator)
def affine_grid_cost(theta: TensorMeta, size: Any, *args: Any, out: TensorMeta, **_: Any) -> Cost:
    # each output coordinate is theta's row (2 x 3, or 3 x 4 in 3-d) times the homogeneous base point
    return contraction(out.numel * theta.shape[-1])

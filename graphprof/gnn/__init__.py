"""Graphs for graph neural networks: synthetic graphs, PyG ``Data``/``Batch`` as model inputs, datasets on disk.

The floor under the ``pyg:`` model family (:mod:`graphprof.models.pyg`) and the seed-004 API
(:mod:`graphprof.gnn.seed`). Only :mod:`graphprof.models.pyg_import` imports PyTorch Geometric, lazily.
"""

from __future__ import annotations

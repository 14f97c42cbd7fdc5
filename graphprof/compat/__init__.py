"""The seeds' compatibility, at the edge: the APIs of the tools graphprof replaces, on graphprof's core.

One module per seed, each a thin layer over native calls that adds only what the seed documents and
the core does not do (printing, the seed's names, units and defaults):

* :mod:`~graphprof.compat.seed000`: the edge profiler's ``Profiler``, whose graphs' ``stats()`` print;
* :mod:`~graphprof.compat.seed003`: ``@capture_model`` printing each forward's layer summary, switched
  on by ``GRAPHPROF_CAPTURE=1`` or the seed's own ``CHISEL_BACKEND_RUN=1``;
* :mod:`~graphprof.compat.seed004` (also importable as :mod:`graphprof.seed004`): the graph-transformer
  framework's whole API, its profilers in :mod:`~graphprof.compat.seed004_profiling` and its
  ``ScalingExperiment`` in :mod:`~graphprof.compat.scaling`.

Nothing in the core imports this package (``tests/test_structure.py`` checks it); the command line's
seed scripts (``cli/*.py``) and a user's code do.
"""

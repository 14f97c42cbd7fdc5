"""Seed 004's scaling experiment: node scaling of a graph transformer, then a ``ScalingExperiment``.

python examples/scaling_experiment.py
"""

from __future__ import annotations

from _common import arguments

import graphprof.seed004 as profiling  # in place of: import src.profiling as profiling

arguments()  # --help: this docstring; the folder every example is handed (this one writes no files there)


def model_factory(**kwargs):
    return profiling.build_graph_model("graph_transformer", **{"hidden_dim": 32, "num_layers": 2, "num_heads": 4, **kwargs})


result = profiling.run_node_scaling(model_factory, num_nodes_list=[50, 100, 200], num_runs=3)
for i, n in enumerate(result.parameter_values):
    print(f"N={n}: {result.runtime_stats[i].mean:.2f} ms")

experiment = profiling.ScalingExperiment(model_factory, "cpu")
experiment.run_node_scaling([50, 100])
experiment.run_layer_scaling([1, 2])
experiment.print_summary()

"""Sharded training, per rank: ``graphprof shard --model hf:llama-3-8b fsdp:64``.

:func:`shard_profile` profiles one training step of a model wrapped with FSDP2's ``fully_shard`` over
``N`` ranks of a fake process group, on a dry run (no GPU, no weights), and sets what one rank holds,
computes and sends beside the analytic figures. :mod:`~graphprof.sharding.spec` parses ``fsdp:N``,
:mod:`~graphprof.sharding.run` runs the step, :mod:`~graphprof.sharding.profile` assembles the result
(:mod:`~graphprof.sharding.result`); with a GPU preset, :mod:`~graphprof.sharding.steptime` prices the
step's time (:class:`StepTime`).
"""

from graphprof.sharding.profile import shard_profile
from graphprof.sharding.result import RankFigures, ShardedProfile
from graphprof.sharding.spec import ShardSpec, parse_shard
from graphprof.sharding.step_result import StepOptions, StepTime, TimeBreakdown

__all__ = ["shard_profile", "ShardedProfile", "RankFigures", "ShardSpec", "parse_shard", "StepOptions", "StepTime", "TimeBreakdown"]

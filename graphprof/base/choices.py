"""The choices graphprof offers, as enums shared by the library and the command line.

Torch-free (this module imports nothing heavy), so the CLI builds its options and ``graphprof --help``
from the same objects the library takes, without importing torch. Each enum's values are what a user
types (``--mode train``, ``mode="train"``).

>>> Capture("fx").methods
('fx.symbolic_trace',)
>>> SweepAxis.parse("seq_len")
<SweepAxis.SEQ_LEN: 'seq-len'>
"""

from __future__ import annotations

import enum

from typing_extensions import Self

from graphprof.errors import InvalidInputError

__all__ = [
    "Choice", "Mode", "Capture", "WarmUp", "Method", "Lowering", "Execution", "Phase", "OpStatus", "Objective", "OutputFormat",
    "Reference", "SweepAxis", "Optimizer", "AdamWImpl", "KVCache", "ActivationCheckpoint", "OPTIMIZER_STATE_TENSORS",
]  # fmt: skip


#: How an error names a choice whose class name does not read as words.
_WHAT = {"WarmUp": "warm-up policy", "AdamWImpl": "AdamW implementation", "SweepAxis": "sweep axis", "OpStatus": "op status", "KVCache": "KV cache",
         "ActivationCheckpoint": "activation checkpointing"}  # fmt: skip


class Choice(str, enum.Enum):
    """An enum whose members are the strings a user types and a file holds: ``str(Mode.TRAIN)`` and
    ``f"{Mode.TRAIN}"`` are ``train`` (Python 3.11 would otherwise print ``Mode.TRAIN``), and a member
    equals its value, so a record typed with a choice writes the same JSON as the string did."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @classmethod
    def parse(cls, value: object) -> Self:
        """The member named by ``value`` (a member or its string); anything else is one
        :class:`~graphprof.errors.InvalidInputError` naming the choices: the one place a choice is checked."""
        try:
            return cls(value)
        except ValueError:
            what = _WHAT.get(cls.__name__, cls.__name__.lower())
            raise InvalidInputError(f"unknown {what} {value!r} (use one of: {', '.join(m.value for m in cls)})") from None


class Mode(Choice):
    """What is counted: inference (``eval``, no grad) or a training step (``train``: forward + backward)."""

    EVAL = "eval"
    TRAIN = "train"


class Capture(Choice):
    """How the graph is captured (``--capture``): ``auto`` is the model's default order
    (:func:`graphprof.capture.methods.default_methods`); the others force one method."""

    AUTO = "auto"
    FX = "fx"
    DYNAMO = "dynamo"
    EAGER = "eager"

    @property
    def methods(self) -> tuple[str, ...] | None:
        """The methods for ``profile_model(methods=...)``; ``None`` means the model's default order."""
        return {"auto": None, "fx": (Method.FX,), "dynamo": (Method.DYNAMO,), "eager": (Method.EAGER,)}[self.value]


class Method(Choice):
    """One capture method (:mod:`graphprof.capture.methods`), named as the report and the JSON name it."""

    FX = "fx.symbolic_trace"
    DYNAMO = "dynamo.export"
    EAGER = "eager"


class Lowering(Choice):
    """How a model's ops are lowered for costing: as the CPU runs them, or as a CUDA GPU does
    (:mod:`graphprof.run.lowering`)."""

    CPU = "cpu"
    CUDA = "cuda"


class Execution(Choice):
    """How a captured graph ran: a dry run on FakeTensors, or for real where the dry run needed values."""

    DRY_RUN = "dry-run"
    REAL = "real"


class Phase(Choice):
    """The part of a run an op belongs to: the forward, or (train mode) the backward; a training step
    (:func:`graphprof.run.step.run_step`) adds the optimizer's step after it."""

    FORWARD = "forward"
    BACKWARD = "backward"
    OPTIMIZER = "optimizer"


class OpStatus(Choice):
    """How graphprof accounts for an op: counted by a formula, known to cost nothing, or unsupported
    (zero *and* listed by name, so nothing is silently zero)."""

    COUNTED = "counted"
    ZERO_COST = "zero_cost"
    UNSUPPORTED = "unsupported"


class Objective(Choice):
    """What a partition plan minimises: one request's ``latency``, or the pipeline's slowest stage
    (``throughput``)."""

    LATENCY = "latency"
    THROUGHPUT = "throughput"


class WarmUp(Choice):
    """When one real forward runs before the capture (``--capture-warmup``, ``warm_up=``): ``auto`` (the default)
    only for a model that builds state on its first call (YOLO's anchors, lazy modules); ``always`` for
    every model, seed 001's strategy ("1. Warm-up (always)"), at the cost of its arithmetic once;
    ``never`` for none (a model with lazy state may then fail to capture).

    >>> WarmUp.parse("Always")
    <WarmUp.ALWAYS: 'always'>
    """

    ALWAYS = "always"
    AUTO = "auto"
    NEVER = "never"

    @classmethod
    def parse(cls, value: object) -> Self:
        return super().parse(str(value).strip().lower() if isinstance(value, str) else value)


class OutputFormat(Choice):
    """The format of a written result (``--format``; by default from the file's suffix)."""

    JSON = "json"
    CSV = "csv"


class Reference(Choice):
    """The counter graphprof is checked against (``validate --against``, ``--fvcore``)."""

    FVCORE = "fvcore"  # fvcore.nn.FlopCountAnalysis: 1 flop per MAC, plus its per-element counts
    TORCH = "torch"  # torch.utils.flop_counter.FlopCounterMode: contractions only, 2 FLOPs per MAC


class SweepAxis(Choice):
    """What a sweep varies."""

    BATCH = "batch"
    RESOLUTION = "resolution"  # H and W of an image (or video) input, square
    SEQ_LEN = "seq-len"  # the sequence dimension of a transformer's token inputs
    LAYERS = "layers"  # a config override (hf: num_hidden_layers) or a factory's num_layers
    SET = "set"  # any keyword of a user's factory

    @classmethod
    def parse(cls, axis: object) -> Self:
        if isinstance(axis, cls):
            return axis
        text = str(axis).strip().lower().replace("_", "-")
        for member in cls:
            if text == member.value:
                return member
        raise InvalidInputError(f"unknown sweep axis {axis!r}: choose one of {', '.join(m.value for m in cls)}")


class Optimizer(Choice):
    """The optimizer of a measured training step (``--optimizer``)."""

    SGD = "sgd"
    ADAMW = "adamw"


class AdamWImpl(Choice):
    """AdamW's implementation in a priced training step (``graphprof shard --adamw``): one fused kernel
    (torchtitan's default) or a ``_foreach`` op per stage (``torch.optim.AdamW``'s own default on CUDA)."""

    FUSED = "fused"
    FOREACH = "foreach"


class KVCache(Choice):
    """The key/value cache of a generation profile (``--cache``)."""

    STATIC = "static"  # written in place, the context read once per step
    DYNAMIC = "dynamic"  # transformers' DynamicCache: the whole cache copied by torch.cat every step


class ActivationCheckpoint(Choice):
    """What a sharded step's blocks recompute in backward (``graphprof shard --checkpoint``): nothing, torchtitan's
    per-op selective policy (every op's output saved but element-wise ones and every second matrix product), or
    the whole block's forward."""

    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"


#: Parameter-sized tensors an optimizer keeps per trainable parameter, as graphprof's measured training
#: step builds them: SGD with momentum one buffer, AdamW its two moments (exp_avg, exp_avg_sq). AdamW's
#: 4-byte ``step`` per parameter tensor is left out of the estimate.
OPTIMIZER_STATE_TENSORS = {"sgd": 1, "adamw": 2}

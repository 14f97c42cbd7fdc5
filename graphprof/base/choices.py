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

from graphprof.errors import InvalidInputError

__all__ = ["Mode", "Capture", "WarmUp", "OutputFormat", "Reference", "SweepAxis", "Optimizer", "KVCache", "OPTIMIZER_STATE_TENSORS"]


class Mode(str, enum.Enum):
    """What is counted: inference (``eval``, no grad) or a training step (``train``: forward + backward)."""

    EVAL = "eval"
    TRAIN = "train"


class Capture(str, enum.Enum):
    """How the graph is captured (``--capture``): ``auto`` is the model's default order
    (:func:`graphprof.capture.methods.default_methods`); the others force one method."""

    AUTO = "auto"
    FX = "fx"
    DYNAMO = "dynamo"
    EAGER = "eager"

    @property
    def methods(self) -> tuple[str, ...] | None:
        """The methods for ``profile_model(methods=...)``; ``None`` means the model's default order."""
        return {
            "auto": None,
            "fx": ("fx.symbolic_trace",),
            "dynamo": ("dynamo.export",),
            "eager": ("eager",),
        }[self.value]


class WarmUp(str, enum.Enum):
    """When one real forward runs before the capture (``--warm-up``, ``warm_up=``): ``auto`` (the default)
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
    def parse(cls, policy: WarmUp | str) -> WarmUp:
        if isinstance(policy, WarmUp):
            return policy
        text = str(policy).strip().lower()
        for member in cls:
            if text == member.value:
                return member
        raise InvalidInputError(f"unknown warm-up policy {policy!r}: choose one of {', '.join(m.value for m in cls)}")


class OutputFormat(str, enum.Enum):
    """The format of a written result (``--format``; by default from the file's suffix)."""

    JSON = "json"
    CSV = "csv"


class Reference(str, enum.Enum):
    """The counter graphprof is checked against (``validate --against``, ``--fvcore``)."""

    FVCORE = "fvcore"  # fvcore.nn.FlopCountAnalysis: 1 flop per MAC, plus its per-element counts
    TORCH = "torch"  # torch.utils.flop_counter.FlopCounterMode: contractions only, 2 FLOPs per MAC


class SweepAxis(str, enum.Enum):
    """What a sweep varies."""

    BATCH = "batch"
    RESOLUTION = "resolution"  # H and W of an image (or video) input, square
    SEQ_LEN = "seq-len"  # the sequence dimension of a transformer's token inputs
    LAYERS = "layers"  # a config override (hf: num_hidden_layers) or a factory's num_layers
    SET = "set"  # any keyword of a user's factory

    @classmethod
    def parse(cls, axis: SweepAxis | str) -> SweepAxis:
        if isinstance(axis, SweepAxis):
            return axis
        text = str(axis).strip().lower().replace("_", "-")
        for member in cls:
            if text == member.value:
                return member
        raise InvalidInputError(f"unknown sweep axis {axis!r}: choose one of {', '.join(m.value for m in cls)}")


class Optimizer(str, enum.Enum):
    """The optimizer of a measured training step (``--optimizer``)."""

    SGD = "sgd"
    ADAMW = "adamw"


class KVCache(str, enum.Enum):
    """The key/value cache of a generation profile (``--cache``)."""

    STATIC = "static"  # written in place, the context read once per step
    DYNAMIC = "dynamic"  # transformers' DynamicCache: the whole cache copied by torch.cat every step


#: Parameter-sized tensors an optimizer keeps per trainable parameter, as graphprof's measured training
#: step builds them: SGD with momentum one buffer, AdamW its two moments (exp_avg, exp_avg_sq). AdamW's
#: 4-byte ``step`` per parameter tensor is left out of the estimate.
OPTIMIZER_STATE_TENSORS = {"sgd": 1, "adamw": 2}

"""Why a dry run cannot go on: an op that needs real values, one with no FakeTensor kernel, or the meta device."""

from __future__ import annotations

import re

from graphprof.errors import DataDependentError, first_line

__all__ = ["needs_values", "MetaDeviceError"]


#: How torch says an op cannot run on meta tensors (a model on the meta device runs without FakeTensors):
#: ``.item()``, an op with no meta kernel, a data-dependent output.
_META_FAILURE = re.compile(r"meta tensor|'Meta' backend|with Meta tensors|on the meta device|to Meta", re.IGNORECASE)


def needs_values(exc: BaseException) -> str | None:
    """Why the dry run cannot go on without real tensors, or ``None`` when ``exc`` is another failure.

    Either an op's output shape depends on values (``nonzero``, ``.item()`` in a branch), or an op has
    no FakeTensor kernel (quantized kernels, some custom ops).
    """
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException, UnsupportedOperatorException

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, UnsupportedOperatorException):
            return f"{seen.func} has no FakeTensor kernel"
        if isinstance(seen, (DataDependentOutputException, DynamicOutputShapeException)):
            return f"{seen.func} has a data-dependent output"
        if type(seen).__name__ == "GuardOnDataDependentSymNode" or "data-dependent" in str(seen):
            return "a data-dependent shape"
        if isinstance(seen, NotImplementedError) and "fake impl" in str(seen):  # a custom or quantized op
            return f"{str(seen).split(':', 1)[0]} has no FakeTensor kernel"
        if isinstance(seen, RuntimeError) and "no fake impl registered" in str(seen):  # torch.library.custom_op
            return f"{str(seen).split('registered for ', 1)[-1].split('.', 1)[0]} has no FakeTensor kernel (register_fake)"
        if isinstance(seen, (RuntimeError, NotImplementedError)) and _META_FAILURE.search(str(seen)):
            return f"the meta device cannot run this ({first_line(seen, 200)})"
        seen = seen.__cause__ or seen.__context__
    return None


class MetaDeviceError(DataDependentError):
    """A dry run straight on the meta device could not go on; FakeTensors may (``run_model(meta=False)``)."""

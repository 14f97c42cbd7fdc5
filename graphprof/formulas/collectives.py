"""Collectives and FSDP2's copy ops: what a sharded training step moves between ranks and in memory.

Registered by :func:`register_collectives` when a sharded run needs them (FSDP2's ``torch.ops.fsdp``
ops exist only once ``torch.distributed.fsdp`` is imported, which an unsharded profile never pays for).

* ``c10d._allgather_base_(output, input)``: each rank contributes ``input`` (its shard) and receives the
  whole ``output``; 0 FLOPs; reads its shard, writes the gathered tensor.
* ``c10d._reduce_scatter_base_(output, input)``: the full ``input`` (a gradient per rank) is summed
  across ranks and each keeps one shard: ``(N - 1)`` adds per element kept, i.e. ``input - output``
  elements of adds; reads ``input``, writes ``output``.
* ``c10d.allreduce_`` (tensor parallelism, a replicated gradient): ``(N - 1)`` adds per element is not
  known from shapes alone (the group size is not an argument); counted as one read and one write.
* ``_c10d_functional.all_reduce(input, op, group)`` (DTensor's tensor parallelism: a partial sum made
  whole): like ``allreduce_``, one read and one write of the tensor, 0 FLOPs counted;
  ``_c10d_functional.all_gather_into_tensor`` and ``reduce_scatter_tensor`` as their ``c10d`` forms
  (the group size is an argument there: ``reduce_scatter_tensor``'s adds are ``(N - 1)`` per element kept);
  ``_c10d_functional.wait_tensor``: waits on a collective, 0.
* ``fsdp.all_gather_copy_in``, ``fsdp.split_with_sizes_copy``, ``fsdp.chunk_cat``: copies into and out of
  the flat communication buffers: each reads its sources and writes its destination, 0 FLOPs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphprof.formulas.cost import Cost, TensorMeta
from graphprof.formulas.registry import FORMULAS, register

__all__ = ["register_collectives"]


def _tensors(value: Any) -> list[TensorMeta]:
    if isinstance(value, TensorMeta):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def allgather_cost(output: TensorMeta, input: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:  # noqa: A002
    return Cost(bytes_read=input.nbytes, bytes_written=output.nbytes)


def reduce_scatter_cost(output: TensorMeta, input: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:  # noqa: A002
    return Cost(flops=input.numel - output.numel, bytes_read=input.nbytes, bytes_written=output.nbytes)


def allreduce_cost(tensors: Any, *args: Any, out: Any, **_: Any) -> Cost:
    nbytes = sum(t.nbytes for t in _tensors(tensors))
    return Cost(bytes_read=nbytes, bytes_written=nbytes)


def functional_allreduce_cost(input: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:  # noqa: A002
    return Cost(bytes_read=input.nbytes, bytes_written=input.nbytes)


def functional_allgather_cost(input: TensorMeta, *args: Any, out: Any, **_: Any) -> Cost:  # noqa: A002
    return Cost(bytes_read=input.nbytes, bytes_written=sum(t.nbytes for t in _tensors(out)))


def functional_reduce_scatter_cost(input: TensorMeta, op: str, group_size: int, *args: Any, out: Any, **_: Any) -> Cost:  # noqa: A002
    kept = input.numel // group_size
    return Cost(flops=(group_size - 1) * kept, bytes_read=input.nbytes, bytes_written=input.nbytes // group_size)


def wait_cost(*args: Any, out: Any = None, **_: Any) -> Cost:
    return Cost()


def copy_in_out_cost(*args: Any, out: Any = None, **kwargs: Any) -> Cost:
    """A copy between buffers: reads every tensor argument but the destination, writes the destination
    (``out=`` where given, else the op's output)."""
    destination = kwargs.get("out", out)
    written = _tensors(destination)
    ids = {id(t) for t in written}
    read = [t for t in _tensors(list(args)) if id(t) not in ids]
    return Cost(bytes_read=sum(t.nbytes for t in read), bytes_written=sum(t.nbytes for t in written))


def register_collectives() -> None:
    """Register the formulas above, once (imports ``torch.distributed.fsdp`` for its ops)."""
    import torch.distributed.fsdp  # noqa: F401  # defines torch.ops.fsdp.*

    table: dict[Any, Callable[..., Cost]] = {
        torch.ops.c10d._allgather_base_: allgather_cost,
        torch.ops.c10d._reduce_scatter_base_: reduce_scatter_cost,
        torch.ops.c10d.allreduce_: allreduce_cost,
        torch.ops._c10d_functional.all_reduce: functional_allreduce_cost,
        torch.ops._c10d_functional.all_gather_into_tensor: functional_allgather_cost,
        torch.ops._c10d_functional.reduce_scatter_tensor: functional_reduce_scatter_cost,
        torch.ops._c10d_functional.wait_tensor: wait_cost,
        torch.ops.fsdp.all_gather_copy_in: copy_in_out_cost,
        torch.ops.fsdp.split_with_sizes_copy: copy_in_out_cost,
        torch.ops.fsdp.chunk_cat: copy_in_out_cost,
    }
    for packet, formula in table.items():
        if packet not in FORMULAS:
            register(packet)(formula)

"""Standard observers of the run loop (:mod:`graphprof.run.loop`), one job each.

* :class:`LiveMemory`: bytes of live activation storages, their peak and the layer where it happens;
* :class:`SavedActivations`: bytes each layer saves for backward (train mode);
* :class:`AllocationOrder`: the order activations' storages are allocated and freed, for a heap replay.

The op recorder that feeds the cost count is :class:`graphprof.run.propagate.OpRecorder`. The backward
attribution is no observer: the loop names each backward op's forward layer before any observer sees
the event (:attr:`graphprof.run.events.OpEvent.layer`).
"""

from graphprof.run.observers.allocations import AllocationOrder
from graphprof.run.observers.memory import LiveMemory
from graphprof.run.observers.saved import SavedActivations

__all__ = ["AllocationOrder", "LiveMemory", "SavedActivations"]

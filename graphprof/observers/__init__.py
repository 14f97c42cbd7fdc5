"""Standard observers of the run loop (:mod:`graphprof.runloop`), one job each.

* :class:`LiveMemory`: bytes of live activation storages, their peak and the layer where it happens;
* :class:`SavedActivations`: bytes each layer saves for backward (train mode).

The op recorder that feeds the cost count is :class:`graphprof.propagate.OpRecorder`. The backward
attribution is no observer: the loop names each backward op's forward layer before any observer sees
the event (:attr:`graphprof.runloop.OpEvent.layer`).
"""

from graphprof.observers.memory import LiveMemory
from graphprof.observers.saved import SavedActivations

__all__ = ["LiveMemory", "SavedActivations"]

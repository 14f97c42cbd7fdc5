"""Observers of the run loop (:mod:`graphprof.runloop`), one job each.

* :class:`LiveMemory`: bytes of live activation storages and their peak;
* :class:`BackwardAttribution`: in train mode, names the forward layer each backward op belongs to.

The op recorder that feeds the cost count is :class:`graphprof.propagate.OpRecorder`.
"""

from graphprof.observers.backward import BackwardAttribution
from graphprof.observers.memory import LiveMemory

__all__ = ["LiveMemory", "BackwardAttribution"]

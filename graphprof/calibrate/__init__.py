"""``graphprof calibrate``: measure the local device, fit the prediction model, store a ``local`` preset.

* :mod:`~graphprof.calibrate.bench`: the op table (single calls over shapes and dtypes, the per-op floors);
* :mod:`~graphprof.calibrate.fit`: one fitting procedure for every device's table (the H100 one too);
* :mod:`~graphprof.calibrate.store`: where the preset lives (``$XDG_CACHE_HOME/graphprof/local.json``);
* :mod:`~graphprof.calibrate.preset`: :func:`calibrate`, :func:`load_local`, the default for ``--measure``.
"""

from graphprof.calibrate.preset import LocalPreset, calibrate, load_local, measure_default_hardware
from graphprof.devices.local import local_path

__all__ = ["LocalPreset", "calibrate", "load_local", "local_path", "measure_default_hardware"]

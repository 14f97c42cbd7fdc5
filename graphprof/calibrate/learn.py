"""Learn from every real run: a ``--measure`` run's per-op times join the local calibration.

:func:`learn_from_run` turns the measured forward's ops into samples (:func:`graphprof.calibrate.samples.
samples_from_run`, marked ``source="run"``) and appends them to the ``learned`` list of the ``local``
preset's file; the next read of the file (:func:`graphprof.devices.hardware.local_hardware`) adds them as
neighbours of their kinds' models, so the next prediction (of any model with those configurations) uses
them, and the report counts them apart from the calibration's own. Only a file made on this machine (same
CPU, thread count and torch) learns: :func:`graphprof.devices.local.check_current`. Whether to learn is
judged from the ``local`` hardware the run was predicted with (its file as read once, where the device was
named); the write-back alone reads the file again. Two runs that learn at once both keep their records:
the file is re-read and written under :func:`graphprof.base.atomic.locked`; a record with damaged seconds
(:func:`graphprof.devices.local.usable_learned`) is never written, and those read are dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from graphprof.base.atomic import locked, write_atomic
from graphprof.base.choices import Mode
from graphprof.calibrate.samples import samples_from_run
from graphprof.devices.hardware import Hardware
from graphprof.devices.local import LOCAL, MAX_LEARNED, check_current, local_path, read_local, usable_learned

__all__ = ["learn_from_run"]


def learn_from_run(profile: Any, hardware: Hardware, path: Path | None = None) -> int:
    """Append the samples of ``profile``'s measured forward (eval mode, on the CPU) to the local preset's file
    (``path``, default :func:`graphprof.devices.local.local_path`); how many (0 unless ``hardware`` is the
    ``local`` preset with a current CPU calibration with kind models, or without a usable measurement: one
    in train mode, on a GPU, or flagged noisy)."""
    calibration = hardware.calibration
    measurement = getattr(profile, "measurement", None)
    if hardware.name != LOCAL or calibration is None or calibration.op_model is None:
        return 0
    if measurement is None or profile.mode is not Mode.EVAL or getattr(measurement, "noisy", False):
        return 0  # a noisy run (its forward's spread over NOISY_CV) would teach the calibration its noise
    if str(getattr(measurement, "device", "cpu")).split(":")[0] != "cpu":
        return 0
    check_current(hardware.measured, path)
    group = str(getattr(profile, "model_name", "") or "run")
    samples = samples_from_run(profile, measurement, source="run", group=group, first_touch=calibration.op_model.first_touch)
    rows = [row for row in (s.to_list() for s in samples) if usable_learned(row)]
    if not rows:
        return 0
    target = path or local_path()
    with locked(target):  # re-read: another run may have learned (or `graphprof calibrate` written) since
        current = read_local(target)
        if current is None:
            return 0
        check_current(current.get("device"), target)
        current.pop("learned_refused", None)
        learned = [*current["learned"], *rows][-MAX_LEARNED:]
        write_atomic(target, json.dumps({**current, "learned": learned}, indent=1) + "\n")
    return len(rows)

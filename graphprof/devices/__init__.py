"""The devices a cost is priced on: presets with their peaks (``hardware``), this machine's own preset
(``local``, ``host``), and the time predicted from a calibration (``predict``, ``opmodel``; the fitted
tables as data in ``table``, with the shipped ones in ``calibration/``). A :class:`~graphprof.devices.hardware.Hardware`
carries its table: the local file is read once, where the device is named.
"""

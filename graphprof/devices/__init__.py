"""The devices a cost is priced on: presets with their peaks (``hardware``), this machine's own preset
(``local``, ``host``), and the time predicted from a calibration (``predict``, ``opmodel``, with the
shipped tables in ``calibration/``).
"""

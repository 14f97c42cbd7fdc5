"""What a run costs: the ops counted (``count``), rolled up the module tree (``aggregate``) into the one
result record (``result``: :class:`~graphprof.cost.result.Profile`), with the lower bound and predicted
time per layer (``bounds``), the roofline class (``roofline``) and seed 002's intensity bands (``intensity``).
"""

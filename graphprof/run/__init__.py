"""One run of a captured model, and what rides along: the run loop (``loop``) and its events, the dry run
on FakeTensors (``propagate``), the standard observers (``observers/``), module-call hooks (``hooks``), and
the lowerings a run applies so that costs follow the target (``lowering``: fused attention; ``moe``:
grouped expert products).
"""

"""Capturing a model's graph: the methods (``methods``: ``torch.fx`` symbolic trace, ``torch._dynamo.export``
and the eager capture, the warm-up before them) and the order in which a session tries them (``plan``).
"""

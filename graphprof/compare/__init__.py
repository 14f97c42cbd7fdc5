"""Models side by side: each profile reduced to one comparison row against the same device (``models``)."""

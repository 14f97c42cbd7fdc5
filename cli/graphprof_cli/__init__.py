"""The graphprof command line: a thin Typer adapter over the :mod:`graphprof` library."""

"""graphprof's version, on the lowest floor: every module (and the command line's ``--version``) reads it here."""

__version__ = "0.1.0"

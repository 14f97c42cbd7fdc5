"""``--redact``: a report to share, with the host left out.

A report names the machine it ran on (``host``: CPU, cores, GPU, driver, platform) and, in the paths it
quotes (a model's file, a module's source, an installed package's folder), the user's home, the working
folder and the Python installation. :func:`redact_text` is one pass over the rendered text (JSON or HTML)
that replaces each of those with a placeholder (a Chrome trace file: :func:`graphprof.measure.trace.redact_trace`), longest first, so that ``/home/ada/proj/m.py`` becomes
``<cwd>/m.py`` when run from ``/home/ada/proj``; :func:`redact_host` keeps only what the numbers need
(cores, threads, GPU kind and memory, versions).
"""

from __future__ import annotations

import json
import os
import re
import site
import socket
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["HOST_KEPT", "redact_host", "redact_json", "redact_text", "redact_strings", "redactor", "replacements"]

#: The ``host`` fields a redacted report keeps: what reading its times needs, nothing that names the machine.
HOST_KEPT = ("cores", "threads", "gpu", "gpu_memory_bytes", "cuda", "torch")


def _site_packages() -> list[str]:
    found = [*site.getsitepackages(), site.getusersitepackages()] if hasattr(site, "getsitepackages") else []
    return found + [p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages"))]


def replacements() -> list[tuple[str, str]]:
    """``(text, placeholder)`` pairs, longest text first: install paths, the working folder, the home, the host."""
    pairs = [(p, "<site-packages>") for p in _site_packages()]
    pairs += [(p, "<python>") for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)]
    pairs += [(os.getcwd(), "<cwd>"), (os.environ.get("HOME", ""), "<home>"), (str(Path.home()), "<home>")]
    pairs += [(socket.gethostname(), "<host>")]
    kept: dict[str, str] = {}
    for text, label in pairs:
        text = text.rstrip("/") if len(text) > 1 else text
        if len(text) > 1 and text not in kept:  # "/" or "" would redact every path
            kept[text] = label
    return sorted(kept.items(), key=lambda pair: -len(pair[0]))


def _pattern(pairs: list[tuple[str, str]]) -> re.Pattern[str]:
    # a whole name only: /home/ada is not the start of /home/adam, nor the host "vm" inside "kvm"
    return re.compile("|".join(rf"(?<![\w.-]){re.escape(text)}(?![\w-])" for text, _ in pairs))


def redactor(html: bool = False) -> Callable[[str], str]:
    """The one pass :func:`redact_text` makes, made once for many strings."""
    pairs = replacements()
    labels = dict(pairs)
    if html:
        labels = {k: v.replace("<", "&lt;").replace(">", "&gt;") for k, v in labels.items()}
    pattern = _pattern(pairs)
    return lambda text: pattern.sub(lambda m: labels[m.group(0)], text)


def redact_text(text: str, html: bool = False) -> str:
    """``text`` with each of :func:`replacements` replaced by its placeholder (escaped for an HTML page)."""
    return redactor(html)(text)


def redact_host(host: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``host`` with only :data:`HOST_KEPT`: the CPU model, platform string, driver and load are left out."""
    return None if host is None else {k: host[k] for k in HOST_KEPT if k in host}


def redact_strings(value: Any, redact: Callable[[str], str]) -> Any:
    """Every string (and key) of a JSON-like ``value`` through ``redact``; the rest kept."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_strings(v, redact) for v in value]
    if isinstance(value, dict):
        return {redact(k): redact_strings(v, redact) for k, v in value.items()}
    return value


def redact_json(text: str) -> str:
    """A JSON report's text redacted: each ``host`` block cut to :data:`HOST_KEPT`, every string (and key)
    through :func:`redact_text`; numbers and the order of the fields are kept."""
    data = json.loads(text)
    data = _hosts(data)
    return json.dumps(redact_strings(data, redactor()), indent=2, allow_nan=False) + "\n"


def _hosts(value: Any) -> Any:
    if isinstance(value, list):
        return [_hosts(v) for v in value]
    if isinstance(value, dict):
        return {k: redact_host(v) if k == "host" and isinstance(v, dict) else _hosts(v) for k, v in value.items()}
    return value

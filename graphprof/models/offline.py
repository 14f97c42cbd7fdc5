"""graphprof never downloads: while a model is resolved, any Internet connection fails at once.

Builders are called so that they need nothing from the network (torchvision with ``weights=None``,
YOLO from packaged yaml files, Hugging Face from config objects or local files). This module is
the guarantee behind that rule, for third-party code and users' factories too: inside
:func:`network_blocked`, an attempt to resolve a host name or open an Internet socket raises
:class:`NetworkBlockedError` before any packet leaves, so a download fails in microseconds instead
of hanging on DNS.

How: one audit hook (PEP 578, ``sys.addaudithook``), installed on first use and inert outside the
context. The flag is a :class:`contextvars.ContextVar`, so only the resolving thread is affected;
threads that a builder starts itself are not covered. ``NetworkBlockedError`` is a
``ConnectionError``, so libraries that fall back to offline mode on ``OSError`` (ultralytics'
online check at import, for one) do so instead of failing.
"""

from __future__ import annotations

import contextvars
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from graphprof.errors import DownloadUnavailableError

__all__ = ["NetworkBlockedError", "network_blocked", "find_blocked_download"]

_NETWORK_EVENTS = frozenset({"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex", "urllib.Request"})
_INTERNET_FAMILIES = frozenset({socket.AF_INET, socket.AF_INET6})

_blocking: contextvars.ContextVar[bool] = contextvars.ContextVar("graphprof_network_blocked", default=False)
_install_lock = threading.Lock()
_installed = False


class NetworkBlockedError(DownloadUnavailableError, ConnectionError):
    """Raised inside :func:`network_blocked` at the first attempt to reach the network."""


def _audit(event: str, args: tuple[Any, ...]) -> None:
    """The audit hook: a no-op unless this context is resolving a model."""
    if not _blocking.get():
        return
    if event == "socket.connect":
        sock = args[0]
        if getattr(sock, "family", None) not in _INTERNET_FAMILIES:
            return  # Unix sockets and the like are not downloads
        target = args[1]
    elif event in _NETWORK_EVENTS:
        target = args[0]
    else:
        return
    raise NetworkBlockedError(f"graphprof never downloads; a network access to {target!r} was refused")


def _install() -> None:
    global _installed
    with _install_lock:
        if not _installed:
            sys.addaudithook(_audit)
            _installed = True


@contextmanager
def network_blocked() -> Iterator[None]:
    """Within this block (in this thread's context), any Internet access raises :class:`NetworkBlockedError`."""
    _install()
    token = _blocking.set(True)
    try:
        yield
    finally:
        _blocking.reset(token)


def find_blocked_download(exc: BaseException) -> NetworkBlockedError | None:
    """The :class:`NetworkBlockedError` behind ``exc``, following causes, contexts and ``URLError.reason``."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, NetworkBlockedError):
            return current
        reason = getattr(current, "reason", None)
        pending.extend([current.__cause__, current.__context__, reason if isinstance(reason, BaseException) else None])
    return None

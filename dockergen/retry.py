"""One HTTP read tried again when it failed for a reason that passes.

An index read that fails because a name did not resolve this once (``EAI_AGAIN``: "Temporary
failure in name resolution"), a connection was reset, a read timed out, or the server
answered 429 or 5xx, usually works a moment later; a CI run should not fail on it, nor a
user's ``outdated`` job. Everything else (a refused connection, 404, 401, a name that does
not exist) fails at once: trying again would only delay the message.
May import: nothing of dockergen (a leaf).
"""

from __future__ import annotations

import socket
import time
import urllib.error
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

ATTEMPTS = 3
DELAYS_S = (1.0, 4.0)  # before the second and the third attempt
_STATUS = frozenset({429, 500, 502, 503, 504})


def transient(exc: BaseException) -> bool:
    """Whether ``exc`` (from urllib) is a failure that passes."""
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code in _STATUS
    reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, socket.gaierror):
        return reason.errno == socket.EAI_AGAIN
    return isinstance(reason, (TimeoutError, ConnectionResetError, ConnectionAbortedError))


def retried(read: Callable[[], T], sleep: Callable[[float], None] = time.sleep) -> T:
    """``read()``, tried up to :data:`ATTEMPTS` times while it fails transiently."""
    for delay in DELAYS_S[:ATTEMPTS - 1]:
        try:
            return read()
        except (urllib.error.URLError, OSError) as exc:
            if not transient(exc):
                raise
        sleep(delay)
    return read()

"""The one HTTP layer: every network read of dockergen and its maintainer tools goes here.

Package indexes (simple-API pages, wheels read by range requests, ``.metadata`` files),
registries (manifests, blobs, Bearer tokens) and PyPI for the knowledge checker are read
through :func:`get`, which enforces one set of rules, whoever calls it:

* **http and https only**, for the first URL and every redirect; a ``file://``, ``ftp://`` or
  any other scheme a page, a redirect or a realm names is refused, never opened. URLs with
  user information (``user:pass@host``) or control characters are refused.
* **Credentials are bound to an origin** (scheme, host, port: :class:`Credential`): each
  request carries only the credential made for its own origin, so a redirect or a link to
  another host (or from https to http) goes without it; what the caller attaches cannot
  follow a URL elsewhere. Header values with CR, LF or another control character are
  refused before anything is sent, and the message never repeats them.
* **At most** :data:`MAX_REDIRECTS` **redirects**, each one checked as above.
* **Every body is bounded**: a limit per kind (:data:`LIMITS`), checked against
  ``Content-Length`` before reading and again while streaming; a body is never read whole
  first. Content is asked for uncompressed (``Accept-Encoding: identity``) and never
  decompressed here, so no compressed answer can inflate past its limit.
* **A total deadline and a request bound per command** (:func:`begin`, called by each
  command with its ``--timeout``): when the deadline passes, the read in flight is cut off
  (a server that trickles one byte a second cannot hold a command), and a command that
  would send more than its bound of requests stops with a clear error.
* **Retries with backoff only on what passes** (urllib3's ``Retry``): 429 and 5xx answers,
  timeouts, resets, a name that did not resolve this once (``EAI_AGAIN``); a refused
  connection, a name that does not exist, 4xx fail at once.
* **The OS trust store** for https (``truststore``, as pip does), so private indexes signed
  by a company CA work as they do for the system's own tools.

Built on urllib3 2.x (installed with docker-py) rather than requests or httpx: requests'
session defaults (netrc read for any host, the Authorization header rebuilt from netrc on
redirects, certifi instead of the system store) are each one of the rules above to turn
off, and httpx would be a new dependency tree for the same connection pool.
The requests themselves (urllib3, the retries, the proxies, the bounded bodies):
:mod:`dockergen.net.transport`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from dockergen.errors import ExitCode, redact
from dockergen.net.transport import ERROR_LIMIT, NetError, Response, fetch

# the errors and answers of every request are the transport's; callers take them from here
__all__ = ["DEFAULT_MAX_REQUESTS", "DEFAULT_TIMEOUT_S", "LIMITS", "MAX_REDIRECTS",
           "REQUESTS_ENV", "TIMEOUT_ENV", "BudgetError", "Credential", "DeadlineError",
           "NetError", "Origin", "Response", "begin", "checked_value", "get", "origin_of", "put"]

_KIB, _MIB = 1 << 10, 1 << 20
# kind -> the most bytes of one body (docs: README "Security").
LIMITS: dict[str, int] = {
    "page": 64 * _MIB,  # a simple-API page: PyPI's JSON page of torch is a few MiB
    "metadata": 16 * _MIB,  # a PEP 658 .metadata file (vLLM's is 10 KiB)
    "wheel": 64 * _MIB,  # a whole wheel, from an index that ignores range requests
    "range": 512 * _MIB,  # one range answer: its size is what was asked, up to this
    "manifest": 4 * _MIB,  # distribution-spec's own limit for a manifest
    "blob": 4 * _MIB,  # an image config blob
    "token": 1 * _MIB,  # a Bearer token answer
    "file": 512 * _MIB,  # the knowledge checker's whole downloads (small sdists)
    "error": ERROR_LIMIT,  # the body of an error answer (never shown; read to reuse the socket)
}
MAX_REDIRECTS = 5
DEFAULT_TIMEOUT_S = 600.0  # a command's network deadline unless --timeout says otherwise
DEFAULT_MAX_REQUESTS = 2000  # lock --python's RECORD check of vLLM's closure sends ~600
TIMEOUT_ENV, REQUESTS_ENV = "DOCKERGEN_NET_TIMEOUT", "DOCKERGEN_NET_MAX_REQUESTS"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class DeadlineError(NetError, code=ExitCode.TIMEOUT):
    """The command's network deadline passed (``--timeout``)."""


class BudgetError(NetError):
    """The command reached its bound of requests: it ends, whatever it was reading."""


@dataclass(frozen=True)
class Origin:
    """Where a credential may go: scheme, host and port (the default port filled in)."""

    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


def origin_of(url: str) -> Origin:
    """The origin of an http(s) URL, or a NetError (no echo of what could be a secret)."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
        host = (parts.hostname or "").lower()
    except ValueError:
        raise NetError(f"{redact(url)}: not a URL dockergen reads") from None
    if parts.scheme not in ("http", "https") or not host:
        raise NetError(f"a {parts.scheme or 'relative'} URL is not read (dockergen reads http "
                       f"and https only): {redact(url)}")
    if parts.username is not None or parts.password is not None:
        raise NetError(f"{redact(url)}: a URL with user information is not followed; "
                       "credentials come from the environment, netrc or the docker config")
    if any(ord(ch) < 33 or ord(ch) == 127 for ch in url):
        raise NetError("a URL with spaces or control characters is not read")
    return Origin(parts.scheme, host, port or (443 if parts.scheme == "https" else 80))


def checked_value(value: str, what: str) -> str:
    """``value`` for an HTTP header, or a NetError that names ``what`` and never the value
    (a token with a line break would otherwise split the request, or show in a trace)."""
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise NetError(f"{what} holds a line break or another control character; it was not "
                       "sent: fix the credential where it is configured")
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        raise NetError(f"{what} holds characters HTTP headers cannot carry; it was not "
                       "sent") from None
    return value


@dataclass(frozen=True)
class Credential:
    """An Authorization header value for one origin, and only for it."""

    origin: Origin
    authorization: str = field(repr=False)

    @classmethod
    def basic(cls, origin: Origin, user: str, password: str, what: str) -> Credential:
        """Basic credentials (``what`` names their source in a refusal)."""
        import base64

        checked_value(user, f"the user name of {what}")
        checked_value(password, f"the password of {what}")
        raw = base64.b64encode(f"{user}:{password}".encode()).decode()
        return cls(origin, f"Basic {raw}")

    @classmethod
    def bearer(cls, origin: Origin, token: str, what: str) -> Credential:
        """A Bearer token for ``origin`` (``what`` names its source in a refusal)."""
        return cls(origin, f"Bearer {checked_value(token, what)}")


class _Budget:
    """The command's deadline (monotonic seconds) and the requests it may still send."""

    def __init__(self, timeout_s: float, max_requests: int) -> None:
        self.timeout_s, self.deadline = timeout_s, time.monotonic() + timeout_s
        self.left = max_requests

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


_budget: _Budget | None = None


def _env_number(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, "") or default)
    except ValueError:
        return default
    return value if 0 < value < float("inf") else default


def begin(timeout_s: float | None = None, max_requests: int | None = None) -> None:
    """Start a command's budget: its deadline from now and its bound of requests (defaults:
    :data:`DEFAULT_TIMEOUT_S`, :data:`DEFAULT_MAX_REQUESTS`, or the environment)."""
    global _budget
    _budget = _Budget(timeout_s or _env_number(TIMEOUT_ENV, DEFAULT_TIMEOUT_S),
                      max_requests or int(_env_number(REQUESTS_ENV, DEFAULT_MAX_REQUESTS)))


def _spend(url: str) -> _Budget:
    """The budget for one more request (a fresh one per request where no command began)."""
    budget = _budget or _Budget(_env_number(TIMEOUT_ENV, DEFAULT_TIMEOUT_S),
                                int(_env_number(REQUESTS_ENV, DEFAULT_MAX_REQUESTS)))
    if budget.remaining() <= 0:
        raise DeadlineError(f"{redact(url)}: the network deadline of {budget.timeout_s:g} s "
                            "passed; give more with --timeout (or "
                            f"{TIMEOUT_ENV})")
    if budget.left <= 0:
        raise BudgetError(f"{redact(url)}: the command reached its bound of requests; an index "
                       f"or registry asking for that many is refused (raise it with "
                       f"{REQUESTS_ENV} if the closure really is that large)")
    budget.left -= 1
    return budget


class _Expired(BaseException):
    """Raised by the alarm inside a blocked read (a BaseException: no library catches it)."""


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """Interrupt whatever blocks the main thread after ``seconds`` (per-read timeouts alone
    let a server that sends a byte before each timeout hold a read for ever)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # the per-operation timeouts still bound each socket read
        return

    def expire(signum: int, frame: Any) -> None:
        raise _Expired

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def get(url: str, kind: str, headers: dict[str, str] | None = None,
        credentials: tuple[Credential, ...] = (), limit: int | None = None) -> Response:
    """GET ``url`` by the rules above; ``kind`` (a key of :data:`LIMITS`) bounds the body
    unless ``limit`` is smaller. Any status comes back as a :class:`Response` (an error
    answer's body bounded by the ``error`` limit); only failures to talk raise."""
    cap = min(limit if limit is not None else LIMITS[kind], LIMITS[kind])
    sent = {k: checked_value(v, f"the {k} header") for k, v in (headers or {}).items()}
    current = url
    for _hop in range(MAX_REDIRECTS + 1):
        origin = origin_of(current)
        auth = [c.authorization for c in credentials if c.origin == origin]
        budget = _spend(current)
        hop_headers = {**sent, **({"Authorization": auth[0]} if auth else {})}
        try:
            with _alarm(budget.remaining()):
                response = fetch(current, hop_headers, cap, budget.remaining())
        except _Expired:
            raise DeadlineError(f"{redact(current)}: the network deadline of "
                                f"{budget.timeout_s:g} s passed; give more with --timeout "
                                f"(or {TIMEOUT_ENV})") from None
        if response.status not in _REDIRECTS:
            return response
        location = response.header("location")
        if not location:
            raise NetError(f"{redact(current)}: a redirect without a Location", response.status)
        current = urllib.parse.urljoin(current, location)
    raise NetError(f"{redact(url)}: more than {MAX_REDIRECTS} redirects")




def put(url: str, body: bytes, content_type: str,
        credentials: tuple[Credential, ...] = ()) -> Response:
    """PUT ``body`` (e.g. an image index to a registry) by the same rules as :func:`get`:
    one origin's credential, bounded answer, the command's deadline and request bound. A
    redirect is not followed (a registry that moves an upload elsewhere is refused)."""
    origin = origin_of(url)
    auth = [c.authorization for c in credentials if c.origin == origin]
    headers = {"Content-Type": checked_value(content_type, "the Content-Type header"),
               **({"Authorization": auth[0]} if auth else {})}
    budget = _spend(url)
    try:
        with _alarm(budget.remaining()):
            response = fetch(url, headers, LIMITS["error"], budget.remaining(), "PUT", body)
    except _Expired:
        raise DeadlineError(f"{redact(url)}: the network deadline of {budget.timeout_s:g} s "
                            f"passed; give more with --timeout (or {TIMEOUT_ENV})") from None
    if response.status in _REDIRECTS:
        raise NetError(f"{redact(url)}: the upload was redirected; dockergen does not follow "
                       "a redirect with a body", response.status)
    return response

"""One HTTP request through urllib3, for :mod:`dockergen.net.http` (which decides what is sent).

A pool per proxy (``https_proxy``/``http_proxy``/``no_proxy``, as every other client on the
machine) over the OS trust store (``truststore``); retries with backoff only on what passes
(:func:`transient`); no redirect followed; the body asked for uncompressed and streamed,
cut at its limit. urllib3 and truststore are imported lazily (start-up time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dockergen.errors import DockergenError, ExitCode, redact

if TYPE_CHECKING:
    import urllib3

CONNECT_TIMEOUT_S, READ_TIMEOUT_S = 15.0, 60.0  # one connect, one silent read
ERROR_LIMIT = 64 << 10  # the body of an error answer (never shown; read to reuse the socket)
_CHUNK = 64 << 10
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


class NetError(DockergenError, code=ExitCode.MISSING_TOOL):
    """A network read failed or was refused: unreachable, an error answer, a rule above."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status, when the server answered with one



@dataclass(frozen=True)
class Response:
    """One answer: the URL that gave it (after redirects), status, headers, bounded body."""

    url: str
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")


_pools: dict[str, urllib3.PoolManager] = {}


def transient(error: BaseException) -> bool:
    """Whether a urllib3 failure passes: a timeout, a reset, ``EAI_AGAIN``."""
    import socket
    import ssl

    from urllib3 import exceptions as x

    timeout = isinstance(error, (x.ConnectTimeoutError, x.ReadTimeoutError, TimeoutError))
    if timeout and not isinstance(error, x.NewConnectionError):  # urllib3 derives one
        return True
    seen: list[BaseException] = []
    todo: list[Any] = [error]
    while todo and len(seen) < 16:  # the cause chain and the args, bounded
        exc = todo.pop()
        if not isinstance(exc, BaseException) or exc in seen:
            continue
        seen.append(exc)
        if isinstance(exc, socket.gaierror):
            return exc.errno == socket.EAI_AGAIN
        if isinstance(exc, ssl.SSLCertVerificationError):
            return False  # a certificate the trust store refuses stays refused
        if isinstance(exc, (ConnectionResetError, ConnectionAbortedError, TimeoutError,
                            ssl.SSLEOFError, ssl.SSLZeroReturnError)):
            return True  # the peer (or a proxy between) dropped the connection mid-TLS
        todo += [exc.__cause__, exc.__context__, *exc.args]
    return False


def _retry() -> Any:
    """urllib3's Retry, trying again only what :func:`transient` says passes."""
    from urllib3.util.retry import Retry

    class Passing(Retry):
        def increment(self, method: str | None = None, url: str | None = None,
                      response: Any = None, error: Exception | None = None,
                      _pool: Any = None, _stacktrace: Any = None) -> Any:
            if error is not None and not transient(error):
                raise error
            return super().increment(method, url, response, error, _pool, _stacktrace)

    return Passing(total=2, connect=2, read=2, status=2, other=0, redirect=False,
                   status_forcelist=_RETRY_STATUS, backoff_factor=1.0, backoff_max=8.0,
                   respect_retry_after_header=False, raise_on_status=False,
                   allowed_methods=frozenset({"GET"}))


def _pool_for(url: str) -> urllib3.PoolManager:
    """The pool for ``url``: direct, or through the proxy the environment names for it
    (``https_proxy``/``http_proxy``/``no_proxy``, as every other client on the machine)."""
    import urllib.request

    import urllib3

    scheme = urllib.parse.urlsplit(url).scheme
    proxy = urllib.request.getproxies().get(scheme)
    host = urllib.parse.urlsplit(url).hostname or ""
    key = "" if not proxy or urllib.request.proxy_bypass(host) else proxy
    if key not in _pools:
        import ssl

        import truststore

        context = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        # maxsize: one kept connection per concurrent reader of a host (owners reads with
        # eight threads), so connections are reused rather than handshaken again
        _pools[key] = (urllib3.ProxyManager(key, ssl_context=context, num_pools=8, maxsize=8)
                       if key else
                       urllib3.PoolManager(ssl_context=context, num_pools=8, maxsize=8))
    return _pools[key]


def fetch(url: str, headers: dict[str, str], cap: int, remaining: float,
          method: str = "GET", body: bytes | None = None, error_cap: int = ERROR_LIMIT
          ) -> Response:
    """One request (a GET, or a PUT of ``body``), no redirect followed, the answer's body
    bounded by ``cap`` (an error answer's by ``error_cap``)."""
    import http.client

    import urllib3

    timeout = urllib3.Timeout(connect=max(min(CONNECT_TIMEOUT_S, remaining), 0.001),
                              read=max(min(READ_TIMEOUT_S, remaining), 0.001))
    sent = {"User-Agent": "dockergen", "Accept-Encoding": "identity", **headers}
    try:
        reply = _pool_for(url).urlopen(method, url, body=body, headers=sent, redirect=False,
                                       retries=_retry(), timeout=timeout,
                                       preload_content=False, decode_content=False)
        try:
            status = reply.status
            names = {k.lower(): v for k, v in reply.headers.items()}
            body, whole = _body(reply, url, cap if 200 <= status < 300 else error_cap,
                                names.get("content-length", ""), status)
        except BaseException:
            reply.close()  # cut off mid-body: the connection cannot be reused
            raise
        reply.release_conn() if whole else reply.close()
    except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError,
            ValueError) as exc:
        raise NetError(f"{redact(url)}: cannot be read ({reason(exc)}); check the address "
                       "and the network") from None
    return Response(url, status, names, body)


def reason(exc: BaseException) -> str:
    """What went wrong, by kind (the exception's text may quote a header or a URL)."""
    import ssl

    inner = getattr(exc, "reason", None) or exc.__cause__ or exc
    tls = next((a for a in (inner, *getattr(inner, "args", ())) if isinstance(a, ssl.SSLError)),
               None)
    if tls is not None and isinstance(tls.reason, str) and tls.reason.isidentifier():
        return f"{type(tls).__name__} {tls.reason}"  # OpenSSL's mnemonic, never peer text
    return type(inner).__name__


def _body(reply: Any, url: str, cap: int, length: str, status: int) -> tuple[bytes, bool]:
    """The body, streamed and cut at ``cap`` (never more than ``cap`` + one chunk in
    memory), and whether it was read to its end."""
    if length.isdigit() and int(length) > cap and 200 <= status < 300:
        raise NetError(f"{redact(url)}: the answer is {int(length)} bytes, more than the "
                       f"{cap} dockergen reads of it", status)
    out = bytearray()
    while True:
        chunk = reply.read1(_CHUNK)
        if not chunk:
            return bytes(out), True
        out += chunk
        if len(out) > cap:
            if not 200 <= status < 300:  # an error's text is never shown: its head is enough
                return bytes(out[:cap]), False
            raise NetError(f"{redact(url)}: the answer is larger than the {cap} bytes "
                           "dockergen reads of it", status)

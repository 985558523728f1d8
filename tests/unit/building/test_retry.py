"""Index reads are tried again when they failed for a reason that passes, and only then
(dockergen.net.http's urllib3 Retry)."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from urllib3 import exceptions as x

from dockergen.net import http as net
from dockergen.net import index as outdated_index
from dockergen.net import transport as net_transport


def _name_error(errno: int) -> x.NameResolutionError:
    """As urllib3 raises it: ``raise NameResolutionError(...) from gaierror``."""
    reason = socket.gaierror(errno, "name")
    exc = x.NameResolutionError("h", None, reason)  # type: ignore[arg-type]
    exc.__cause__ = reason
    return exc


@pytest.mark.parametrize("exc", [
    _name_error(socket.EAI_AGAIN), x.ReadTimeoutError(None, "u", "timed out"),  # type: ignore[arg-type]
    x.ConnectTimeoutError("timed out"),
    x.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset")),
    x.SSLError(ssl.SSLEOFError(8, "[SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred")),
])
def test_a_passing_failure_is_tried_again(exc: BaseException) -> None:
    assert net_transport.transient(exc)


@pytest.mark.parametrize("exc", [
    x.NewConnectionError(None, "Connection refused"),  # type: ignore[arg-type]
    _name_error(socket.EAI_NONAME), x.SSLError("certificate verify failed"),
    x.SSLError(ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED]")),
    x.LocationParseError("bad"),
])
def test_a_lasting_failure_fails_at_once(exc: BaseException) -> None:
    assert not net_transport.transient(exc)


class _Flaky(BaseHTTPRequestHandler):
    answers = [503, 200]
    seen: list[int] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        status = _Flaky.answers.pop(0) if _Flaky.answers else 200
        _Flaky.seen.append(status)
        body = b'{"meta": {"api-version": "1.1"}, "name": "x", "files": []}'
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def flaky_index() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/simple"
    server.shutdown()
    server.server_close()


def test_the_index_reader_gets_past_one_503(flaky_index: str) -> None:
    """A real HTTP server answering 503 once: the product's reader reads the page."""
    _Flaky.answers, _Flaky.seen = [503, 200], []
    assert outdated_index.files(flaky_index, "x") == []
    assert _Flaky.seen == [503, 200]


def test_a_404_is_asked_once(flaky_index: str) -> None:
    _Flaky.answers, _Flaky.seen = [404], []
    with pytest.raises(outdated_index.IndexReadError, match="HTTP 404"):
        outdated_index.files(flaky_index, "x")
    assert _Flaky.seen == [404]


def test_a_refused_connection_is_not_tried_again() -> None:
    with socket.socket() as sock:  # a port nobody listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        with pytest.raises(net.NetError, match="cannot be read"):
            net.get(f"http://127.0.0.1:{port}/simple/x/", "page")


def test_a_tls_failure_is_named_by_its_openssl_reason_and_no_peer_text() -> None:
    """The reason a user sees tells a dropped connection from a refused certificate; the
    message's free text (which a proxy or peer can shape) is not repeated."""
    dropped = ssl.SSLEOFError(8, "EOF from evil.example")
    dropped.reason = "UNEXPECTED_EOF_WHILE_READING"
    assert net_transport.reason(x.SSLError(dropped)) == "SSLEOFError UNEXPECTED_EOF_WHILE_READING"
    refused = ssl.SSLCertVerificationError(1, "certificate verify failed: evil")
    refused.reason = "CERTIFICATE_VERIFY_FAILED"
    assert "evil" not in net_transport.reason(x.MaxRetryError(None, "u", x.SSLError(refused)))  # type: ignore[arg-type]
    odd = ssl.SSLError(1, "x")
    odd.reason = "no such; thing"
    assert net_transport.reason(x.SSLError(odd)) == "SSLError"

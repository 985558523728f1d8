"""Index reads are tried again when they failed for a reason that passes, and only then."""

from __future__ import annotations

import socket
import threading
import urllib.error
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from dockergen import outdated, retry


def _failing(excs: list[BaseException], result: str = "ok"):  # type: ignore[no-untyped-def]
    calls: list[int] = []

    def read() -> str:
        calls.append(1)
        if excs:
            raise excs.pop(0)
        return result
    return read, calls


def _again() -> urllib.error.URLError:
    return urllib.error.URLError(socket.gaierror(socket.EAI_AGAIN,
                                                 "Temporary failure in name resolution"))


@pytest.mark.parametrize("exc", [
    _again(), urllib.error.URLError(TimeoutError("timed out")), ConnectionResetError(),
    urllib.error.HTTPError("u", 503, "Service Unavailable", None, None),  # type: ignore[arg-type]
])
def test_a_passing_failure_is_tried_again(exc: BaseException) -> None:
    read, calls = _failing([exc, exc])
    slept: list[float] = []
    assert retry.retried(read, slept.append) == "ok"
    assert len(calls) == 3 and slept == list(retry.DELAYS_S)


@pytest.mark.parametrize("exc", [
    urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")),
    urllib.error.URLError(socket.gaierror(socket.EAI_NONAME, "Name or service not known")),
    urllib.error.HTTPError("u", 404, "Not Found", None, None),  # type: ignore[arg-type]
    urllib.error.HTTPError("u", 401, "Unauthorized", None, None),  # type: ignore[arg-type]
])
def test_a_lasting_failure_fails_at_once(exc: BaseException) -> None:
    read, calls = _failing([exc])
    with pytest.raises(type(exc)):
        retry.retried(read, lambda _: pytest.fail("slept"))
    assert len(calls) == 1


def test_three_passing_failures_are_the_last_ones_error() -> None:
    read, calls = _failing([_again(), _again(), _again()])
    with pytest.raises(urllib.error.URLError):
        retry.retried(read, lambda _: None)
    assert len(calls) == 3


class _Flaky(BaseHTTPRequestHandler):
    answers = [503, 200]

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        status = _Flaky.answers.pop(0) if _Flaky.answers else 200
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
    _Flaky.answers = [503, 200]
    assert outdated.files(flaky_index, "x") == []
    assert _Flaky.answers == []  # both answers were asked for

"""The test session's registries: started when missing, restarted when gone, never confused.

Each case runs its own ``docker-registry`` on a free port under a temporary state folder, so
the session's own registries (tests/support/registries.py) are never touched.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.registries import Registry, RegistryProblem

pytestmark = pytest.mark.daemon  # needs what tests/infra/provision.sh installs


@pytest.fixture(autouse=True)
def _programs() -> None:
    for program in ("docker-registry", "htpasswd"):
        if shutil.which(program) is None:
            pytest.fail(f"{program} is needed: run tests/infra/provision.sh")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    made = Registry("anon", f"localhost:{_free_port()}", state=tmp_path)
    yield made
    made.stop()


def test_a_missing_registry_is_started_and_a_killed_one_started_again(registry: Registry
                                                                      ) -> None:
    assert registry.probe() == ""  # nothing listens yet
    registry.ensure(before="first")
    assert registry.probe() is None and registry.events == []  # the first start is no event
    assert registry.process is not None
    os.kill(registry.process.pid, signal.SIGKILL)
    registry.process.wait()
    assert registry.probe() == ""
    registry.ensure(before="tests/x.py::second")
    assert registry.probe() is None
    assert len(registry.events) == 1
    event = registry.events[0]
    assert f"{registry.address} stopped answering before tests/x.py::second" in event
    assert "killed by SIGKILL" in event and "listening on" in event  # its log's last lines


def test_stop_ends_only_its_process_and_removes_its_data(registry: Registry) -> None:
    registry.ensure(before="first")
    process = registry.process
    assert process is not None and registry.folder.is_dir()
    (registry.folder / "data").mkdir(exist_ok=True)
    registry.stop()
    assert process.poll() is not None and registry.probe() == ""
    assert not (registry.folder / "data").exists()
    assert (registry.folder / "log").is_file()  # the evidence stays


def test_the_htpasswd_registry_asks_for_its_realm(tmp_path: Path) -> None:
    auth = Registry("auth", f"localhost:{_free_port()}", state=tmp_path, login=("u", "p-secret"))
    try:
        auth.ensure(before="first")
        assert auth.probe() is None
        assert "p-secret" not in (tmp_path / "auth" / "htpasswd").read_text()  # bcrypt only
        # the same port read as an anonymous registry is not the registry the tests want
        anon = Registry("anon", auth.address, state=tmp_path)
        assert anon.probe() == ('HTTP 401, API registry/2.0, '
                                'challenge Basic realm="dockergen-test"')
        with pytest.raises(RegistryProblem, match="answers, but not as the test registry"):
            anon.ensure(before="second")
    finally:
        auth.stop()


class _NotARegistry(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_a_port_held_by_something_else_is_never_taken_for_the_registry(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotARegistry)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        registry = Registry("anon", f"localhost:{port}", state=tmp_path)
        with pytest.raises(RegistryProblem) as caught:
            registry.ensure(before="first")
        assert str(caught.value).startswith(
            f"localhost:{port} answers, but not as the test registry (HTTP 200, API none, "
            f"challenge none): something else holds port {port}")
        assert registry.process is None  # nothing started beside it
    finally:
        server.shutdown()
        server.server_close()

"""A hostile package index and registry on loopback, for the network-safety tests.

Two origins: ``home`` (the index or registry the user configured, with credentials) and
``other`` (another host: another port of 127.0.0.1, which by origin is another host). Each
request is routed by its first path segment, the *scenario* (``/creds/simple/vllm/``); both
servers record every request with its Authorization header, so a test can assert what left
for where. Every loop is bounded: a server answers at most :data:`MAX_REQUESTS` requests
and then stops itself; a trickling answer sends at most :data:`TRICKLE_BYTES` bytes.
"""

from __future__ import annotations

import io
import json
import re
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_REQUESTS = 5000
TRICKLE_BYTES = 600  # one a 0.2 s: two minutes at most, far beyond any test's deadline
VLLM = "vllm-{v}-cp38-abi3-manylinux_2_28_x86_64.whl"


def wheel(version: str, requires: list[str] | None = None, bomb: int = 0,
          lie: bool = False) -> bytes:
    """A small vLLM wheel whose METADATA pins torch 2.14.0 (or ``requires``); ``bomb``:
    METADATA is instead ``bomb`` bytes of one letter, deflated (``lie``: the central
    directory claims 100 bytes unpacked)."""
    meta = (f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
            "Requires-Python: >=3.11,<3.15\n"
            + "".join(f"Requires-Dist: {r}\n" for r in (requires or ["torch==2.14.0"])))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("vllm/__init__.py", f'__version__ = "{version}"\n')
        zf.writestr(f"vllm-{version}.dist-info/METADATA", b"M" * bomb if bomb else meta)
        zf.writestr(f"vllm-{version}.dist-info/RECORD", "")
    data = buf.getvalue()
    if lie:  # the central directory's uncompressed size (offset 24 of its entry) lies
        name = f"vllm-{version}.dist-info/METADATA".encode()
        at = data.rindex(b"PK\x01\x02", 0, data.rindex(name))
        data = data[:at + 24] + (100).to_bytes(4, "little") + data[at + 28:]
    return data


def json_page(name: str, files: list[tuple[str, str]]) -> bytes:
    """A PEP 691 page listing (file name, url)."""
    return json.dumps({"meta": {"api-version": "1.1"}, "name": name,
                       "files": [{"filename": f, "url": u, "hashes": {}} for f, u in files]
                       }).encode()


@dataclass
class Seen:
    """One request as a server received it."""

    port: int
    path: str
    authorization: str | None


@dataclass
class Origins:
    """The two servers: their URLs, what they received, and the scenario table."""

    home: str
    other: str
    seen: list[Seen] = field(default_factory=list)

    def to(self, port_url: str) -> list[Seen]:
        """The requests one origin received."""
        port = int(port_url.rsplit(":", 1)[1].split("/")[0])
        return [s for s in self.seen if s.port == port]


Route = Callable[["_Handler", list[str]], None]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    origins: Origins
    routes: dict[str, Route]

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        port = self.server.server_address[1]
        self.origins.seen.append(Seen(port, self.path, self.headers.get("Authorization")))
        if len(self.origins.seen) >= MAX_REQUESTS:  # a bound on any loop of the client
            threading.Thread(target=self.server.shutdown, daemon=True).start()
        parts = self.path.split("?", 1)[0].strip("/").split("/")
        route = self.routes.get(parts[0])
        if route is None or parts[-1].endswith(".metadata"):  # no PEP 658 files here
            return self.send(b"", status=404)
        return route(self, parts[1:])

    def send(self, body: bytes, kind: str = "application/octet-stream", status: int = 200,
             headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def send_range(self, body: bytes, short: int = 0) -> None:
        """``body`` as a range server would, ``short`` bytes fewer than asked."""
        wanted = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        if not wanted:
            return self.send(body)
        lo, hi = int(wanted.group(1)), min(int(wanted.group(2)), len(body) - 1)
        part = body[lo:hi + 1]
        part = part[:max(len(part) - short, 0)] if short else part
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {lo}-{hi}/{len(body)}")
        self.send_header("Content-Length", str(len(part)))
        self.end_headers()
        self.wfile.write(part)
        return None

    def stream(self, size: int, kind: str = "application/vnd.pypi.simple.v1+json") -> None:
        """``size`` bytes of JSON-looking filler, without a Content-Length."""
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Connection", "close")
        self.end_headers()
        block = b"[" * (1 << 20)
        for _ in range(size >> 20):
            try:
                self.wfile.write(block)
            except OSError:  # the client stopped reading: what it should do
                return

    def trickle(self) -> None:
        """A valid-looking answer sent one byte at a time."""
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
        self.send_header("Content-Length", str(TRICKLE_BYTES))
        self.end_headers()
        for _ in range(TRICKLE_BYTES):
            try:
                self.wfile.write(b" ")
                self.wfile.flush()
            except OSError:
                return
            time.sleep(0.2)

    def log_message(self, *args: object) -> None:
        pass


@dataclass
class Hostile:
    """What a test gets: the origins and a way to add scenarios."""

    origins: Origins
    routes: dict[str, Route]


def serve(routes: dict[str, Route]) -> Iterator[Hostile]:
    """Start both servers on loopback; stop them when the generator is closed."""
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _Handler) for _ in range(2)]
    origins = Origins(*(f"http://127.0.0.1:{s.server_port}" for s in servers))
    handler = type("Handler", (_Handler,), {"origins": origins, "routes": routes})
    threads = []
    for s in servers:
        s.RequestHandlerClass = handler
        s.daemon_threads = True
        t = threading.Thread(target=s.serve_forever, daemon=True)
        t.start()
        threads.append(t)
    try:
        yield Hostile(origins, routes)
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()
        for t in threads:
            t.join(10)

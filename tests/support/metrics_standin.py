"""A stand-in LLM server for monitoring tests: real metric names, synthetic serving.

No GPU runs an engine here, so this small HTTP server takes the engine's place. It exposes
exactly the metric families that scripts/extract_metrics.py read from the release's wheel
(``dockergen/data/metrics_snapshot.json``), in the Prometheus text format, and nothing
else: a query for a name the release does not define finds nothing here, as it would on
the real server. The families the monitoring uses advance as requests are served:
``POST /v1/completions`` waits for one of ``capacity`` slots (queue depth), sleeps the
configured time to first token and per output token (real elapsed time is what the
histograms observe), then counts tokens and the finished request. ``POST /control``
changes the latencies (``{"ttft": s, "itl": s}``) to make the server slow.
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from dockergen.outputs.observe.metrics import SNAPSHOT_FILE, engine_metrics

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, math.inf)
LABEL_VALUES = {"engine": "0", "finished_reason": "stop", "is_streaming": "false"}


def _label_set(labels: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in labels:
        if name.startswith("<"):  # built at run time by the engine: model_name at least
            out["model_name"] = "standin"
        else:
            out[name] = LABEL_VALUES.get(name, "standin" if name == "model_name" else "x")
    return out


def _fmt(labels: dict[str, str], **extra: str) -> str:
    items = {**labels, **extra}
    if not items:
        return ""
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(items.items())) + "}"


def _num(value: float) -> str:
    return "+Inf" if value == math.inf else repr(float(value))


@dataclass
class _Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))
    total: float = 0.0
    n: int = 0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(BUCKETS):
            if value <= bound:
                self.counts[i] += 1
        self.total += value
        self.n += 1


class Standin:
    """State and exposition of one engine release's stand-in server."""

    def __init__(self, engine: str, release: str, capacity: int = 4) -> None:
        snapshot = json.loads(SNAPSHOT_FILE.read_text(encoding="utf-8"))
        self.families: dict[str, dict[str, Any]] = snapshot[engine][release]["metrics"]
        # The families to animate, by role; a role whose name the wheel does not define
        # stays absent, exactly as on the real server.
        roles = engine_metrics(engine, release).roles
        self.role_family = {role: m.name for role, m in roles.items() if m.name in self.families}
        self.capacity = capacity
        self.slots = threading.BoundedSemaphore(capacity)
        self.lock = threading.Lock()
        self.ttft, self.itl = 0.01, 0.004
        self.counters: dict[str, float] = {}
        self.gauges: dict[str, float] = {}
        self.hists: dict[str, _Histogram] = {}
        self.running = self.waiting = 0

    def set_latency(self, ttft: float, itl: float) -> None:
        """Make the server faster or slower from the next token on."""
        with self.lock:
            self.ttft, self.itl = ttft, itl

    def _add(self, role: str, value: float) -> None:
        if role in self.role_family:
            name = self.role_family[role]
            self.counters[name] = self.counters.get(name, 0.0) + value

    def _observe(self, role: str, value: float) -> None:
        if role in self.role_family:
            self.hists.setdefault(self.role_family[role], _Histogram()).observe(value)

    def _queue_gauges(self) -> None:
        for role, value in (("requests_running", self.running),
                            ("requests_waiting", self.waiting),
                            ("kv_cache_usage", 0.9 * self.running / self.capacity)):
            if role in self.role_family:
                self.gauges[self.role_family[role]] = float(value)

    def serve(self, prompt_tokens: int, max_tokens: int) -> None:
        """Serve one request in real time (called on the HTTP handler's thread)."""
        start = time.monotonic()
        with self.lock:
            self.waiting += 1
            self._queue_gauges()
        with self.slots:
            with self.lock:
                self.waiting -= 1
                self.running += 1
                self._queue_gauges()
                ttft, itl = self.ttft, self.itl
            time.sleep(ttft)
            first = time.monotonic()
            with self.lock:
                self._observe("ttft", first - start)
            last = first
            for _ in range(max_tokens - 1):
                time.sleep(itl)
                now = time.monotonic()
                with self.lock:
                    self._observe("itl", now - last)
                last = now
            with self.lock:
                self.running -= 1
                self._add("prompt_tokens", prompt_tokens)
                self._add("generation_tokens", max_tokens)
                self._add("requests", 1)
                self._observe("e2e", time.monotonic() - start)
                self._queue_gauges()

    def exposition(self) -> str:
        """Every family of the release in the Prometheus text format (0.0.4)."""
        lines: list[str] = []
        with self.lock:
            for name, family in sorted(self.families.items()):
                labels = _label_set(family["labels"])
                kind = family["type"]
                lines.append(f"# HELP {name} stand-in for {name}")
                lines.append(f"# TYPE {name} {kind}")
                if kind == "counter":
                    lines.append(f"{name}_total{_fmt(labels)} {_num(self.counters.get(name, 0))}")
                elif kind == "gauge":
                    lines.append(f"{name}{_fmt(labels)} {_num(self.gauges.get(name, 0))}")
                elif kind == "histogram":
                    h = self.hists.get(name, _Histogram())
                    for bound, count in zip(BUCKETS, h.counts, strict=True):
                        lines.append(f"{name}_bucket{_fmt(labels, le=_num(bound))} {count}")
                    lines.append(f"{name}_sum{_fmt(labels)} {_num(h.total)}")
                    lines.append(f"{name}_count{_fmt(labels)} {h.n}")
                else:  # summaries/info are not used by the rules: type only
                    lines.pop()
                    lines.pop()
        return "\n".join(lines) + "\n"


def start_server(standin: Standin, metrics_path: str) -> ThreadingHTTPServer:
    """Serve ``standin`` on a free loopback port in a daemon thread."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def _reply(self, code: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 (http.server API)
            if self.path == metrics_path:
                self._reply(200, standin.exposition().encode(),
                            "text/plain; version=0.0.4; charset=utf-8")
            else:
                self._reply(404, b"{}")

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path == "/v1/completions":
                standin.serve(int(body.get("prompt_tokens", 32)), int(body.get("max_tokens", 8)))
                self._reply(200, b'{"choices": [{"text": "ok"}]}')
            elif self.path == "/control":
                standin.set_latency(float(body["ttft"]), float(body["itl"]))
                self._reply(200, b"{}")
            else:
                self._reply(404, b"{}")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server

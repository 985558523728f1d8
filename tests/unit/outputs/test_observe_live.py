"""A real Prometheus scrapes a stand-in server and evaluates the generated rules.

For each engine whose metric names were read from its wheel (vLLM, SGLang): every recording
rule returns data through Prometheus' HTTP API, and the P99 latency alert fires once the
stand-in slows down. The failing path: rules for vLLM 0.33.0 against a stand-in exposing
vLLM 0.9.1's names find no KV-cache or inter-token-latency data, as against a real 0.9.1
server. Timings come from the profile's observe: section (1 s scrapes, short windows);
every wait is bounded.
"""

from __future__ import annotations

import json
import math
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import PROFILES, run_cli
from tests.support.metrics_standin import Standin, start_server

pytestmark = pytest.mark.slow

FAST = {"observe.scrape_interval": "1s", "observe.rate_window": "5s",
        "observe.latency_for": "2s", "observe.e2e_p99_budget_s": "0.5"}
LATENCY_ALERT = "DockergenE2ELatencyP99High"


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    found = shutil.which("prometheus")
    if not found:
        pytest.fail("prometheus is not installed: apt-get install prometheus (provision.sh)")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, timeout: float = 5) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 (loopback only)
        return json.load(r)


def _post(url: str, body: dict[str, Any], timeout: float = 30) -> None:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310
        r.read()


@dataclass
class Live:
    api: str
    standin_url: str
    recorded: list[str]
    panels: list[str]  # the dashboard's queries, variables filled in as Grafana would

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = _get(f"{self.api}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        assert data["status"] == "success", data
        return list(data["data"]["result"])

    def alert_state(self, name: str) -> str | None:
        alerts = _get(f"{self.api}/api/v1/alerts")["data"]["alerts"]
        states = [a["state"] for a in alerts if a["labels"]["alertname"] == name]
        return "firing" if "firing" in states else (states[0] if states else None)

    def wait_for(self, check: Any, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = check()
            if last:
                return last
            time.sleep(0.5)
        return last

    def with_data(self) -> set[str]:
        """Recording rules returning at least one finite sample now."""
        out = set()
        for rule in self.recorded:
            if any(math.isfinite(float(s["value"][1])) for s in self.query(rule)):
                out.add(rule)
        return out


def _load(url: str, stop: threading.Event, deadline: float,
          workers: int = 6) -> list[threading.Thread]:
    """Clients sending completions until ``stop`` (or the deadline): bounded in time."""

    def client() -> None:
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                _post(f"{url}/v1/completions", {"prompt_tokens": 64, "max_tokens": 8})
            except OSError:
                time.sleep(0.1)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(workers)]
    for t in threads:
        t.start()
    return threads


@pytest.fixture
def live(tmp_path: Path, prometheus_bin: str) -> Iterator[Any]:
    """Start a stand-in for (engine, release) and Prometheus on the generated files."""
    started: list[Any] = []

    def start(engine: str, release: str, out: Path) -> Live:
        manifest = json.loads((out / "dockergen-observe.json").read_text())
        standin = Standin(engine, release)
        path = "/metrics" if engine != "tensorrt-llm" else "/prometheus/metrics"
        server = start_server(standin, path)

        def stop_server() -> None:
            server.shutdown()
            server.server_close()

        started.append(stop_server)
        port = server.server_address[1]
        config = yaml.safe_load((out / "prometheus.yml").read_text())
        config["scrape_configs"][0]["static_configs"][0]["targets"] = [f"127.0.0.1:{port}"]
        assert config["scrape_configs"][0]["job_name"] == manifest["job"]
        (out / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        web = _free_port()
        log = open(out.parent / "prometheus.log", "w")  # noqa: SIM115 (closed at teardown)
        proc = subprocess.Popen(
            [prometheus_bin, f"--config.file={out / 'prometheus.yml'}",
             f"--storage.tsdb.path={out.parent / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{web}"], stdout=log, stderr=subprocess.STDOUT)

        def stop_prometheus() -> None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
            log.close()

        started.append(stop_prometheus)
        api = f"http://127.0.0.1:{web}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{api}/-/ready", timeout=2) as r:  # noqa: S310
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.3)
        else:
            pytest.fail("prometheus did not become ready in 30 s: "
                        + (out.parent / "prometheus.log").read_text()[-2000:])
        recorded = [r["record"] for r in yaml.safe_load(
            (out / "recording-rules.yaml").read_text())["groups"][0]["rules"]]
        dashboard = json.loads((out / "dashboard.json").read_text())
        panels = [t["expr"].replace("$job", manifest["job"]).replace("$instance", ".*")
                  for p in dashboard["panels"] for t in p.get("targets", [])]
        return Live(api, f"http://127.0.0.1:{port}", recorded, panels)

    yield start
    for stop in reversed(started):
        stop()


def _overrides() -> list[str]:
    return [arg for k, v in FAST.items() for arg in ("--set", f"{k}={v}")]


def _vllm_files(tmp_path: Path, *extra: str) -> Path:
    out = tmp_path / "monitoring"
    run = run_cli("observe", str(PROFILES / "h100-fp8.yaml"), "-o", str(out), "-q",
                  *_overrides(), *extra)
    assert run.rc == 0, run.err
    return out


def _sglang_files(tmp_path: Path) -> Path:
    out = tmp_path / "monitoring"
    run = run_cli("observe", str(PROFILES / "h100-sglang-fp8.yaml"), "-o", str(out), "-q",
                  *_overrides())
    assert run.rc == 0, run.err
    return out


def _every_rule_then_alert(live: Live) -> None:
    stop = threading.Event()
    clients = _load(live.standin_url, stop, time.monotonic() + 120)
    try:
        have = live.wait_for(lambda: (d := live.with_data()) == set(live.recorded) and d, 40)
        assert have == set(live.recorded), f"no data: {sorted(set(live.recorded) - have)}"
        # the same numbers a user would see: tokens flow, latency is under budget
        assert float(live.query("job:dockergen_generation_tokens:rate")[0]["value"][1]) > 0
        p99 = float(live.query("job:dockergen_e2e_latency_seconds:p99")[0]["value"][1])
        assert p99 < 0.5, p99
        assert live.alert_state(LATENCY_ALERT) is None
        # every dashboard panel shows data (its query, as Grafana sends it with the
        # default variables)
        empty = [e for e in live.panels if not live.query(e)]
        assert empty == []
        # slow down: ~0.3 s to first token + 7 x 0.06 s > the 0.5 s budget
        _post(f"{live.standin_url}/control", {"ttft": 0.3, "itl": 0.06})
        state = live.wait_for(lambda: live.alert_state(LATENCY_ALERT) == "firing", 45)
        assert state, f"{LATENCY_ALERT} did not fire; state {live.alert_state(LATENCY_ALERT)}"
        p99 = float(live.query("job:dockergen_e2e_latency_seconds:p99")[0]["value"][1])
        assert p99 > 0.5
    finally:
        stop.set()
        for t in clients:
            t.join(timeout=30)


def test_vllm_every_rule_has_data_and_latency_alert_fires(tmp_path: Path, live: Any) -> None:
    _every_rule_then_alert(live("vllm", "0.33.0", _vllm_files(tmp_path)))


def test_sglang_every_rule_has_data_and_latency_alert_fires(tmp_path: Path, live: Any) -> None:
    _every_rule_then_alert(live("sglang", "0.5.23", _sglang_files(tmp_path)))


def test_rules_for_new_names_find_nothing_on_old_server(tmp_path: Path, live: Any) -> None:
    """Rules generated for vLLM 0.33.0, scraped from a server exposing 0.9.1's names."""
    lv = live("vllm", "0.9.1", _vllm_files(tmp_path))
    stop = threading.Event()
    clients = _load(lv.standin_url, stop, time.monotonic() + 60)
    try:
        missing = {"instance:dockergen_kv_cache_usage:ratio", "job:dockergen_itl_seconds:p50",
                   "job:dockergen_itl_seconds:p90", "job:dockergen_itl_seconds:p99"}
        # the other rules get data (so the scrape works) ...
        have = lv.wait_for(lambda: (d := lv.with_data()) >= set(lv.recorded) - missing and d,
                           40)
        assert have == set(lv.recorded) - missing
        # ... and the renamed metrics stay empty while the old server serves
        time.sleep(3)
        assert lv.with_data() & missing == set()
        assert lv.query("vllm:gpu_cache_usage_perc"), "the old name is what the server has"
    finally:
        stop.set()
        for t in clients:
            t.join(timeout=30)

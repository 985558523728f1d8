"""Run the generated Compose file for real: the stand-in image becomes healthy hardened.

The image is the shipped templates built by `dockergen build --push` with the stand-ins of
tests/support/standin.py (its `vllm serve` answers /health); the Compose file is what `dockergen
deploy --record` writes from that build record. An override file only drops the GPU
reservation (no GPU here) and moves the published port to a free one. Everything else —
dockerd, the Compose plugin, the registry, the digest pin — is real. Every container,
network and volume is removed at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from dockergen.parts.python import JIT_PROBE
from tests.conftest import run_cli
from tests.daemon.test_build_daemon import PROFILE
from tests.support.registries import ANON

pytestmark = [pytest.mark.daemon, pytest.mark.usefixtures("registries")]

REPO = f"{ANON}/dockergen-test/deploy-standin"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _compose(project: str, files: list[Path], *args: str, env: dict[str, str],
             timeout: int = 180) -> subprocess.CompletedProcess[str]:
    docker = shutil.which("docker")
    assert docker, "the docker CLI with the compose plugin is required (provision.sh)"
    cmd = [docker, "compose", "-p", project]
    for f in files:
        cmd += ["-f", str(f)]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, check=False,
                          env=env, timeout=timeout)


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[str, list[Path], dict[str, str]]]:
    """A Compose project name; everything it created is removed afterwards."""
    name = f"dgdeploy{os.getpid()}"
    holder: list[Path] = []
    env = {**os.environ, "MODEL_DIR": str(tmp_path / "models")}
    (tmp_path / "models").mkdir()
    yield name, holder, env
    if holder:
        _compose(name, holder, "down", "-v", "--remove-orphans", "--timeout", "5", env=env)


def test_compose_runs_healthy_with_the_hardening_in_force(
        index: str, docker_client, project, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    name, files, env = project
    sets = ("--set", f"build.pip_index_url={index}/simple", "--set",
            f"build.torch_index_url={index}", "--set", f"image.name={REPO}")
    ctx = tmp_path / "ctx"
    built = run_cli("build", str(PROFILE), "--network", "host", "-q", "--push", "-o",
                    str(ctx), *sets)
    assert built.rc == 0, built.err[-3000:]
    record = json.loads((ctx / "build-record.json").read_text())
    compose = tmp_path / "compose.yaml"
    out = run_cli("deploy", str(PROFILE), "--format", "compose", "--record",
                  str(ctx / "build-record.json"), "-o", str(compose), *sets)
    assert out.rc == 0, out.err
    digest = next(iter(record["pushed"].values()))
    assert f"image: {REPO}@{digest}" in compose.read_text()

    port = _free_port()
    override = tmp_path / "no-gpu.yaml"
    override.write_text(
        "# No GPU on this machine: drop the reservation; publish on a free port.\n"
        "services:\n  standin:\n    deploy: !reset {}\n"
        f"    ports: !override\n      - {{target: 8000, published: \"{port}\", "
        "host_ip: 127.0.0.1, protocol: tcp}\n")
    files.extend([compose, override])
    up = _compose(name, files, "up", "-d", "--wait", "--wait-timeout", "120", env=env)
    assert up.returncode == 0, up.stdout + up.stderr

    (container,) = docker_client.containers.list(
        filters={"label": f"com.docker.compose.project={name}"})
    attrs = container.attrs
    host = attrs["HostConfig"]
    assert attrs["State"]["Health"]["Status"] == "healthy"
    assert attrs["Config"]["Image"] == f"{REPO}@{digest}"
    assert attrs["Config"]["User"] == "10001:10001"
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"]
    assert "no-new-privileges:true" in host["SecurityOpt"]
    assert host["ShmSize"] == 1 << 30
    assert host["DeviceRequests"] in (None, [])  # dropped by the override only
    assert {b["Destination"] for b in attrs["Mounts"] if b["Type"] == "bind"} == {"/models"}
    assert all(not b["RW"] for b in attrs["Mounts"] if b["Destination"] == "/models")
    # in force, not just configured: the process is uid 10001, / is read-only, caches write
    assert container.exec_run(["id", "-u"]).output.decode().strip() == "10001"
    denied = container.exec_run(["touch", "/opt/venv/x"])
    assert denied.exit_code != 0 and b"Read-only file system" in denied.output
    assert container.exec_run(["touch", "/home/app/.cache/x", "/tmp/x",
                               "/home/app/.triton/x"]).exit_code == 0
    status = container.exec_run(["grep", "-E", "^(CapEff|NoNewPrivs)", "/proc/1/status"])
    assert "CapEff:\t0000000000000000" in status.output.decode()
    assert "NoNewPrivs:\t1" in status.output.decode()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as resp:
        assert resp.status == 200
    # what Triton does at its first kernel (compile a launcher into a cache, dlopen it) works
    # under the hardening: the cache mounts allow exec
    probe = ["/opt/venv/bin/python", "-c", JIT_PROBE]
    jit = container.exec_run(probe, environment={"TMPDIR": "/home/app/.triton"})
    assert jit.exit_code == 0, jit.output.decode()[-2000:]
    # ... and the image's own server (the stand-in builds and loads Triton's launcher from
    # ~/.triton/cache at start) dies on that cache mounted as Docker mounts tmpfs by default
    # (noexec), as the real one would
    noexec = docker_client.containers.run(
        attrs["Config"]["Image"], user="10001:10001", read_only=True,
        tmpfs={"/tmp": "size=64m,mode=1777", "/home/app/.triton": "size=64m,mode=1777"},
        network_disabled=True, stdout=True, stderr=True, detach=True)
    try:
        code = noexec.wait(timeout=120)["StatusCode"]
        logs = noexec.logs().decode()
    finally:
        with contextlib.suppress(Exception):
            noexec.remove(force=True)
    assert code != 0 and "failed to map segment from shared object" in logs, logs[-2000:]


def test_compose_wait_fails_when_the_health_check_fails(
        index: str, docker_client, project, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The healthy verdict above is real: a server that fails its check is reported."""
    name, files, env = project
    sets = ("--set", f"build.pip_index_url={index}/simple", "--set",
            f"build.torch_index_url={index}", "--set", f"image.name={REPO}")
    ctx = tmp_path / "ctx"
    built = run_cli("build", str(PROFILE), "--network", "host", "-q", "--push", "-o",
                    str(ctx), *sets)
    assert built.rc == 0, built.err[-3000:]
    compose = tmp_path / "compose.yaml"
    assert run_cli("deploy", str(PROFILE), "--format", "compose", "--record",
                   str(ctx / "build-record.json"), "-o", str(compose), *sets).rc == 0
    override = tmp_path / "broken-health.yaml"
    override.write_text(
        "services:\n  standin:\n    deploy: !reset {}\n    ports: !reset []\n"
        "    healthcheck:\n      interval: 2s\n      retries: 2\n      start_period: 1s\n"
        "      test: [CMD, /opt/venv/bin/python, -c, \"import urllib.request; "
        "urllib.request.urlopen('http://127.0.0.1:8000/not-health', timeout=2)\"]\n")
    files.extend([compose, override])
    up = _compose(name, files, "up", "-d", "--wait", "--wait-timeout", "60", env=env)
    assert up.returncode != 0
    (container,) = docker_client.containers.list(
        all=True, filters={"label": f"com.docker.compose.project={name}"})
    assert container.attrs["State"]["Health"]["Status"] == "unhealthy"

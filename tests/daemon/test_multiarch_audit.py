"""Each platform's image is built through the Engine API for that platform (arm64 under
qemu-user-static, registered by tests/infra/provision.sh) and the whole-image audit runs in
it, under emulation for arm64: every ELF file is for the image's CPU. An amd64 program copied
into the arm64 image is caught by the audit (what a wheel of the wrong CPU in one platform's
closure would be)."""

from __future__ import annotations

import time
import uuid

import pytest

from dockergen.build.daemon import context_tar
from dockergen.resources import templates_dir
from tests.conftest import _engine_or_skip

pytestmark = pytest.mark.daemon

DOCKERFILE = """\
ARG OTHER=linux/amd64
FROM --platform=$OTHER local/debian:bookworm AS other-cpu
FROM local/debian:bookworm
RUN apt-get update && apt-get install -y --no-install-recommends python3 \\
 && rm -rf /var/lib/apt/lists/*
COPY image_audit.py /opt/audit/image_audit.py
RUN mkdir -p /opt/own /opt/foreign && cp /usr/bin/true /opt/own/true
COPY --from=other-cpu /usr/bin/true /opt/foreign/true
"""


def _build(daemon: object, tag: str, platform: str, other: str) -> None:
    files = {"Dockerfile": DOCKERFILE.encode(),
             "image_audit.py": (templates_dir() / "context/image_audit.py").read_bytes()}
    stream = daemon.build(context_tar(files), buildkit=True, tag=tag,  # type: ignore[attr-defined]
                          buildargs={"OTHER": other}, target=None, nocache=False, platform=platform,
                          network="host")
    errors = [m for m in stream if "error" in m or "errorDetail" in m]
    assert errors == []


def _audit(daemon: object, tag: str, machine: int, root: str) -> tuple[int, str]:
    return daemon.run(tag, ["/opt/audit/image_audit.py", "--cuda-major", "13",  # type: ignore[attr-defined]
                            "--targets", "9.0", f"--machine={machine}", root],
                      entrypoint=["python3"], timeout=600)


CPUS = {"linux/amd64": (62, "x86-64"), "linux/arm64": (183, "aarch64")}


@pytest.mark.parametrize(("platform", "other"),
                         [("linux/amd64", "linux/arm64"), ("linux/arm64", "linux/amd64")])
def test_audit_runs_per_platform_and_catches_the_other_cpu(platform: str, other: str) -> None:
    _engine_or_skip()
    from dockergen.build.daemon import connect

    daemon = connect()
    tag = f"multiarch-test/audit:{platform.split('/')[1]}-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    try:
        _build(daemon, tag, platform, other)
        assert daemon.inspect(tag)["Architecture"] == platform.split("/")[1]
        code, out = daemon.run(tag, ["-m"], entrypoint=["uname"])
        assert out.strip() == {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}[platform]
        (machine, name), (other_machine, other_name) = CPUS[platform], CPUS[other]
        code, out = _audit(daemon, tag, machine, "/opt/own")
        assert code == 0, out
        assert f'"machine": "{name}"' in out
        code, out = _audit(daemon, tag, machine, "/opt/foreign")
        assert code == 1, out
        assert (f"/opt/foreign/true: an ELF file for {other_name} (e_machine {other_machine}), "
                f"not {name} (e_machine {machine})") in out
    finally:
        print(f"{platform}: built and audited in {time.monotonic() - started:.1f}s")
        daemon.remove_image(tag)

"""The built image runs as OpenShift runs it: an arbitrary UID with GID 0.

OpenShift's restricted-v2 SCC starts a container as a UID from the namespace's range (here
1000730000) with GID 0 and no /etc/passwd entry. The image is the shipped templates built by
`dockergen build` with the stand-ins of tests/support/standin.py, whose `vllm serve` writes
what the real engine writes at start, where the real libraries put it (Hugging Face's
modules cache, vLLM's compile cache, FlashInfer's workspace, torch inductor's cache, Triton's
launcher, resolved from the same environment variables and defaults; server_common.py) and
answers /health. Each run proves the server starts, the caches are written by that UID, and
/health answers; two images with one part of the fix undone fail where the real engine would.
Every container and derived image is removed at the end.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dockergen.parts import engine_jit
from tests.conftest import run_cli
from tests.daemon.test_build_daemon import PROFILE

pytestmark = [pytest.mark.daemon]

OPENSHIFT_USER = "1000730000:0"  # a UID of an OpenShift namespace's range, GID 0
HOME = "/home/app"
# the stand-in vLLM's start-up writes (tests/support/standin_packages/server_common.py)
WRITTEN = {
    "huggingface": f"{HOME}/.cache/huggingface/modules/dockergen-standin-huggingface",
    "vllm": f"{HOME}/.cache/vllm/torch_compile_cache/dockergen-standin-vllm",
    "flashinfer": f"{HOME}/.cache/flashinfer/dockergen-standin-flashinfer",
    "inductor": "/tmp/torchinductor/dockergen-standin-inductor",
}


SGLANG_PROFILE = PROFILE.parent / "standin-sglang.yaml"
# the stand-in SGLang's start-up writes its JIT cache and Hugging Face's, no vLLM cache
SGLANG_WRITTEN = {
    # the image's SGLANG_JIT_CACHE_DIR: nothing seeded, so the Compose output mounts it
    "sglang-jit": f"{engine_jit.CACHE_DIR}/dockergen-standin-sglang-jit",
    "huggingface": WRITTEN["huggingface"], "inductor": WRITTEN["inductor"],
    "flashinfer": WRITTEN["flashinfer"],
}


def _build(index: str, tmp: Path, profile: Path) -> dict[str, Any]:
    """The stand-in image of ``profile`` (its immutable tag), its port and the tmpfs mounts
    its Compose output asks for."""
    sets = ("--set", f"build.pip_index_url={index}/simple",
            "--set", f"build.torch_index_url={index}")
    out = run_cli("build", str(profile), "--network", "host", "-q", "-o", str(tmp / "ctx"),
                  *sets)
    assert out.rc == 0, out.err[-3000:]
    record = json.loads((tmp / "ctx" / "build-record.json").read_text())
    compose = run_cli("deploy", str(profile), "--format", "compose", "-q", *sets)
    assert compose.rc == 0, compose.err
    (service,) = yaml.safe_load(compose.out)["services"].values()
    tmpfs = dict(entry.split(":", 1) for entry in service["tmpfs"])
    return {"image": record["immutable_tag"], "tmpfs": tmpfs,
            "port": service["ports"][0]["target"]}


@pytest.fixture(scope="module")
def built(index: str, docker_client, tmp_path_factory: pytest.TempPathFactory  # type: ignore[no-untyped-def]
          ) -> dict[str, Any]:
    """The stand-in vLLM image."""
    return _build(index, tmp_path_factory.mktemp("uid"), PROFILE)


@pytest.fixture
def cleanup(docker_client) -> Iterator[list[Any]]:  # type: ignore[no-untyped-def]
    """Containers and image ids this test made; removed afterwards."""
    made: list[Any] = []
    yield made
    for thing in reversed(made):
        with contextlib.suppress(Exception):
            if isinstance(thing, str):
                docker_client.images.remove(thing, force=True, noprune=False)
            else:
                thing.remove(force=True)


def _start(docker_client, cleanup: list[Any], image: str,  # type: ignore[no-untyped-def]
           user: str = OPENSHIFT_USER, port: int = 8000, **kwargs: Any) -> Any:
    container = docker_client.containers.run(
        image, user=user, detach=True, ports={f"{port}/tcp": ("127.0.0.1", None)},
        cap_drop=["ALL"], security_opt=["no-new-privileges:true"], **kwargs)
    cleanup.append(container)
    return container


def _health(container: Any, port: int = 8000, deadline_s: float = 90) -> tuple[bool, str]:
    """(/health answered 200 on the published port, the logs), or the container ended."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        container.reload()
        if container.status == "exited":
            return False, container.logs().decode(errors="replace")
        ports = container.attrs["NetworkSettings"]["Ports"].get(f"{port}/tcp") or []
        if ports:
            try:
                url = f"http://127.0.0.1:{ports[0]['HostPort']}/health"
                with urllib.request.urlopen(url, timeout=3) as resp:
                    if resp.status == 200:
                        return True, container.logs().decode(errors="replace")
            except OSError:
                pass
        time.sleep(0.5)
    return False, container.logs().decode(errors="replace")


def _derived(image: str, lines: str, cleanup: list[Any]) -> str:
    """An image made from ``image`` with ``lines`` appended (one part of the fix undone)."""
    dockerfile = f"FROM {image}\n{lines}\n"
    docker = shutil.which("docker")
    assert docker, "the docker CLI with buildx is required (provision.sh)"
    out = subprocess.run([docker, "build", "-q", "-"], input=dockerfile, text=True,
                         capture_output=True, check=False, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    image_id = out.stdout.strip()
    cleanup.append(image_id)
    return image_id


@pytest.mark.parametrize("read_only", [False, True], ids=["writable-root", "read-only-root"])
def test_an_arbitrary_uid_with_gid_0_starts_writes_its_caches_and_answers_health(
        built: dict[str, Any], docker_client, cleanup: list[Any], read_only: bool) -> None:  # type: ignore[no-untyped-def]
    """OpenShift's default (root filesystem writable: the image's own folders) and the
    hardened run (read-only root, the tmpfs mounts the profile's Compose output lists)."""
    mounts = {"read_only": True, "tmpfs": built["tmpfs"]} if read_only else {}
    container = _start(docker_client, cleanup, built["image"], **mounts)
    ok, logs = _health(container)
    assert ok, logs[-3000:]
    ids = container.exec_run(["sh", "-c", "id -u; id -g"]).output.decode().split()
    assert ids == ["1000730000", "0"]
    for cache, path in WRITTEN.items():
        stat = container.exec_run(["stat", "-c", "%u", path])
        assert stat.exit_code == 0, (cache, stat.output.decode())
        assert stat.output.decode().strip() == "1000730000", cache
    triton = container.exec_run(["sh", "-c", f"ls {HOME}/.triton/cache/launcher*.so"])
    assert triton.exit_code == 0, triton.output.decode()
    if not read_only:  # the image's HOME: group 0 with the owner's rights
        gid, mode = container.exec_run(["stat", "-c", "%g %A", HOME]).output.decode().split()
        assert gid == "0" and mode[4:7] == mode[1:4] == "rwx", mode


def test_the_server_fails_as_the_real_one_where_a_part_of_the_fix_is_undone(
        built: dict[str, Any], docker_client, cleanup: list[Any]) -> None:  # type: ignore[no-untyped-def]
    """The stand-in fails where the real engine fails: HOME back to the owner's group only
    (the image before the fix: Triton cannot make its cache), and torch inductor's cache left
    to its default (named after getpass.getuser(), which has no name for the UID)."""
    owner_only = _derived(built["image"], "USER 0\nRUN chown -R 10001:10001 /home/app "
                          "&& chmod -R go-w /home/app\nUSER 10001:10001", cleanup)
    ok, logs = _health(_start(docker_client, cleanup, owner_only))
    assert not ok and "PermissionError" in logs and "/home/app/.triton" in logs, logs[-3000:]
    no_pin = _derived(built["image"], "ENV TORCHINDUCTOR_CACHE_DIR=", cleanup)
    ok, logs = _health(_start(docker_client, cleanup, no_pin))
    assert not ok and "getpwuid(): uid not found: 1000730000" in logs, logs[-3000:]
    # ... and both run as the image's own user, so it is the arbitrary UID that fails
    for image in (owner_only, no_pin):
        ok, logs = _health(_start(docker_client, cleanup, image, user="10001:10001"))
        assert ok, logs[-3000:]


def test_the_sglang_image_runs_read_only_as_an_arbitrary_uid(
        index: str, docker_client, cleanup: list[Any],  # type: ignore[no-untyped-def]
        tmp_path: Path) -> None:
    """SGLang's own JIT cache (the image's SGLANG_JIT_CACHE_DIR, which the Compose output
    mounts writable where the image seeds nothing) too, under the hardened run of its
    Compose output."""
    sglang = _build(index, tmp_path, SGLANG_PROFILE)
    container = _start(docker_client, cleanup, sglang["image"], port=sglang["port"],
                       read_only=True, tmpfs=sglang["tmpfs"])
    ok, logs = _health(container, port=sglang["port"])
    assert ok, logs[-3000:]
    for cache, path in SGLANG_WRITTEN.items():
        stat = container.exec_run(["stat", "-c", "%u", path])
        assert stat.output.decode().strip() == "1000730000", (cache, stat.output.decode())
    # without that mount the unseeded image's first start cannot write the kernels it
    # compiles on the read-only root: the stand-in fails there as SGLang's build would
    unmounted = {path: opts for path, opts in sglang["tmpfs"].items()
                 if path != engine_jit.CACHE_DIR}
    assert len(unmounted) == len(sglang["tmpfs"]) - 1, sglang["tmpfs"]
    container = _start(docker_client, cleanup, sglang["image"], port=sglang["port"],
                       read_only=True, tmpfs=unmounted)
    ok, logs = _health(container, port=sglang["port"])
    assert not ok and "Read-only file system" in logs and engine_jit.CACHE_DIR in logs, \
        logs[-3000:]

"""`build --platform linux/amd64,linux/arm64 --push`: the vLLM stand-in built for both
platforms through the Engine API (arm64 under qemu-user-static), each platform smoke-tested
(under emulation for arm64), both platform images pushed and the image index written in the
local registry. The registry's own index is read back with dockergen's registry client and
lists both platform digests of the build record; ``deploy --record`` names the index digest.

The stand-in profile's bases are local/debian:bookworm, which provisioning makes for both
platforms; the stand-in index serves aarch64 wheels of uv and its build tools. Wall time is
printed (-s): CI must stay under 60 minutes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from dockergen.outputs.fleet.digests import RegistryClient
from tests.conftest import ROOT, run_cli
from tests.support.registries import ANON

pytestmark = [pytest.mark.daemon, pytest.mark.usefixtures("registries")]

PROFILE = ROOT / "tests" / "profiles" / "standin.yaml"
REPO = f"{ANON}/multiarch-test/standin"


def _sets(index: str) -> tuple[str, ...]:
    return ("--set", f"build.pip_index_url={index}/simple", "--set",
            f"build.torch_index_url={index}", "--set", f"image.name={REPO}",
            # no CUDA compile in the emulated build: the devel stand-in carries x86_64 nvcc
            "--set", "flash_attn.build=none", "--set", "cuda.devel_image=local/debian:bookworm",
            "--set", "cuda.runtime_image=local/debian:bookworm")


def test_two_platforms_one_index_in_the_registry(index: str, docker_client,  # type: ignore[no-untyped-def]
                                                 tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    started = time.monotonic()
    built = run_cli("build", str(PROFILE), "--network", "host", "-q", "--push",
                    "--platform", "linux/amd64,linux/arm64", "-o", str(ctx), *_sets(index))
    print(f"two-platform build, smoke and push: {time.monotonic() - started:.0f}s")
    assert built.rc == 0, built.err[-4000:]
    record = json.loads((ctx / "build-record.json").read_text())
    assert record["status"] == "pushed"
    by_platform = {p["platform"]: p for p in record["platforms"]}
    assert sorted(by_platform) == ["linux/amd64", "linux/arm64"]
    # every smoke check ran once per platform, and passed; the audit checked each CPU
    names = [c["name"] for c in record["smoke"]]
    assert all(c["ok"] for c in record["smoke"]), [c for c in record["smoke"] if not c["ok"]]
    assert any(n.startswith("[linux/arm64] whole-image audit (aarch64)") for n in names)
    assert any(n.startswith("[linux/amd64] whole-image audit (x86_64)") for n in names)
    # one index digest under every tag; the registry's index lists both platform digests
    assert len(set(record["pushed"].values())) == 1
    index_digest = next(iter(record["pushed"].values()))
    client = RegistryClient()
    for ref in record["pushed"]:
        for platform, entry in by_platform.items():
            found = client.resolve(ref, platform)
            assert found.index_digest == index_digest
            assert found.platform_digest == entry["digest"]
    assert by_platform["linux/amd64"]["digest"] != by_platform["linux/arm64"]["digest"]
    for platform, entry in by_platform.items():  # each platform image as the engine runs it
        docker_client.api.remove_image(entry["tag"], force=True)
        arch = platform.split("/")[1]
        docker_client.images.pull(f"{REPO}@{index_digest}", platform=platform)
        out = docker_client.containers.run(f"{REPO}@{index_digest}", ["-m"], entrypoint="uname",
                                           platform=platform, remove=True).decode().strip()
        assert out == {"amd64": "x86_64", "arm64": "aarch64"}[arch]
    compose = tmp_path / "compose.yaml"
    deployed = run_cli("deploy", str(PROFILE), "--format", "compose", "--record",
                       str(ctx / "build-record.json"), "-o", str(compose), *_sets(index))
    assert deployed.rc == 0, deployed.err
    assert f"image: {REPO}@{index_digest}" in compose.read_text()


def test_a_smoke_failure_on_one_platform_pushes_nothing(index: str, tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    built = run_cli("build", str(PROFILE), "--network", "host", "-q", "--push",
                    "--platform", "linux/amd64,linux/arm64", "-o", str(ctx), *_sets(index),
                    "--set", "smoke.commands=[{name: 'runs on x86_64', command: [uname, -m], "
                    "expected_output: ['^x86_64']}]")
    assert built.rc != 0
    record = json.loads((ctx / "build-record.json").read_text())
    assert record["status"] == "smoke-failed" and "pushed" not in record
    failed = [c["name"] for c in record["smoke"] if not c["ok"]]
    assert failed == ["[linux/arm64] runs on x86_64"]

"""`dockergen lock --platform linux/amd64,linux/arm64` against the real local registry: a
base image pushed as an index of both platforms is locked with each platform's manifest
digest (read back independently with `docker buildx imagetools inspect --raw`); one pushed
for amd64 only is refused, naming the image and the platform it lacks."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.registries import ANON

pytestmark = [pytest.mark.daemon, pytest.mark.usefixtures("registries")]


def _push(client, local: str, ref: str) -> None:  # type: ignore[no-untyped-def]
    repo, tag = ref.rsplit(":", 1)
    client.api.tag(local, repo, tag)
    for chunk in client.api.push(repo, tag=tag, stream=True, decode=True):
        assert "error" not in chunk, chunk


def _profile(tmp_path: Path, devel: str, runtime: str) -> Path:
    path = tmp_path / "twoplat.yaml"
    path.write_text("extends: h100-fp8\nname: twoplat\ncuda:\n"
                    f"  devel_image: {devel}\n  runtime_image: {runtime}\n")
    return path


def test_each_platform_digest_is_locked_and_a_missing_one_refused(
        docker_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = f"{ANON}/multiarch-test-{uuid.uuid4().hex[:8]}/base"
    both, amd64 = f"{repo}:both", f"{repo}:amd64-only"
    _push(docker_client, "local/debian:bookworm", both)  # the provisioned two-platform image
    _push(docker_client, "local/debian:bookworm-amd64", amd64)
    try:
        raw = json.loads(subprocess.run(
            ["docker", "buildx", "imagetools", "inspect", "--raw", both], check=True,
            capture_output=True, text=True).stdout)
        want = {f"{m['platform']['os']}/{m['platform']['architecture']}": m["digest"]
                for m in raw["manifests"] if m["platform"]["architecture"] != "unknown"}
        assert sorted(want) == ["linux/amd64", "linux/arm64"]
        profile = _profile(tmp_path, both, both)
        done = run_cli("lock", str(profile), "--platform", "linux/amd64,linux/arm64")
        assert done.rc == 0, done.err
        entry = json.loads((tmp_path / "twoplat.lock.json").read_text())["images"][both]
        assert entry["platform_digests"] == want
        assert run_cli("render", str(profile), "-q").rc == 0  # the lock reads back
        refused = run_cli("lock", str(_profile(tmp_path, amd64, both)), "--platform",
                          "linux/amd64,linux/arm64")
        assert refused.rc != 0 and "Traceback" not in refused.err
        assert f"{amd64}: is a linux/amd64 image, not linux/arm64" in refused.err
    finally:
        for ref in (both, amd64):
            docker_client.api.remove_image(ref)

"""Two clean builds of the same profile give the same image digest.

The stand-in profile (tests/profiles/standin.yaml, the shipped templates with the stand-in
bases and index of tests/support/standin.py) is built twice with ``--no-cache``: every step
of both builds runs again, which is what "every cache pruned in between" means on an engine
other engineers share (pruning the engine's whole build cache would take theirs; the cache
*mounts* of uv and ccache stay, as they do for any user, and hold downloads and compiler
outputs, not layers). The two image ids (the manifest digests of the containerd image store)
must be equal; when they are not, the failure message is the image comparer's answer
(tests/support/imagediff.py): which file of which layer differs, and how.

Needs the provisioned engine (Docker 28 with the containerd image store:
tests/infra/provision.sh); where the engine keeps images in its classic store the layers
cannot be made reproducible (docs/building.md) and the test says so instead of passing.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from dockergen.build.daemon import context_tar
from dockergen.build.daemon.docker import DockerDaemon
from dockergen.knowledge import layers, reproducible
from tests.conftest import ROOT, run_cli
from tests.support import imagediff

pytestmark = [pytest.mark.daemon]

PROFILE = ROOT / "tests" / "profiles" / "standin.yaml"


def _build(index: str, name: str, out: Path) -> tuple[str, float]:
    """(the image id, seconds) of one ``--no-cache`` build of the stand-in profile."""
    started = time.monotonic()
    result = run_cli("build", str(PROFILE), "--network", "host", "-q", "--no-cache",
                     "--set", f"image.name={name}",
                     "--set", f"build.pip_index_url={index}/simple",
                     "--set", f"build.torch_index_url={index}", "-o", str(out))
    assert result.rc == 0, result.err[-3000:]
    return result.out.split()[-1], time.monotonic() - started


TINY = "FROM local/debian:bookworm\nRUN echo reproducible > /hello\n"


def _tiny(daemon: DockerDaemon, tag: str, exporter: dict[str, str]) -> str:
    """The image id of a no-cache build of :data:`TINY` with these exporter attributes."""
    image_id = None
    for message in daemon.build(context_tar({"Dockerfile": TINY.encode()}), buildkit=True,
                                tag=tag, buildargs=reproducible.build_args({}), target=None,
                                nocache=True, platform=None, exporter=exporter):
        assert "error" not in message, message
        if message.get("id") == "moby.image.id":
            image_id = message["aux"]["ID"]
    assert image_id is not None
    return str(image_id)


def test_without_the_timestamp_rewrite_two_builds_differ_in_the_files_dates(
        docker_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The check bites: the same step run twice (a second apart) writes /hello with two
    mtimes, and only the exporter's rewrite makes the layers equal; the comparer names the
    file and the difference."""
    daemon = DockerDaemon()
    name = f"repro-test/tiny-{uuid.uuid4().hex[:8]}"
    plain = layers.EXPORTER_ATTRS["zstd"]
    try:
        ids = []
        rewrite = reproducible.exporter(plain, "containerd")
        for n, exporter in enumerate((plain, plain, rewrite, rewrite)):
            ids.append(_tiny(daemon, f"{name}:{n}", exporter))
            imagediff.save(docker_client.api, ids[-1], tmp_path / f"{n}.tar")
            time.sleep(1.1)  # file times have a resolution of a second in a layer tar
        differences = imagediff.compare(imagediff.read_saved(tmp_path / "0.tar"),
                                        imagediff.read_saved(tmp_path / "1.tar"))
        assert ids[0] != ids[1]
        assert any(line.startswith("layer 2: hello: mtime ") for line in differences), differences
        assert ids[2] == ids[3]  # with the rewrite: one digest
    finally:
        for n in range(4):
            daemon.remove_image(f"{name}:{n}")


def test_two_no_cache_builds_give_one_digest(index: str, docker_client,  # type: ignore[no-untyped-def]
                                             tmp_path: Path) -> None:
    if DockerDaemon().image_store() != "containerd":
        pytest.fail("the engine keeps images in its classic store, whose exporter ignores "
                    "rewrite-timestamp: run on the provisioned engine (containerd image store)")
    name = f"localhost:5000/repro-test/standin-{uuid.uuid4().hex[:8]}"
    try:
        first, first_s = _build(index, name, tmp_path / "a")
        # saved at once: the second build moves the tags, and a test session beside this one
        # on the shared engine removes the images it did not see at its start
        saved = [imagediff.save(docker_client.api, first, tmp_path / "first.tar")]
        second, second_s = _build(index, name, tmp_path / "b")
        saved.append(imagediff.save(docker_client.api, second, tmp_path / "second.tar"))
        print(f"\nbuild 1: {first} in {first_s:.0f}s; build 2: {second} in {second_s:.0f}s")
        if first != second:
            answer = imagediff.report(imagediff.compare(*map(imagediff.read_saved, saved)))
            pytest.fail(f"two --no-cache builds gave two digests ({first} and {second}):\n"
                        + answer, pytrace=False)
        created = imagediff.read_saved(saved[1]).config["created"]
        assert created.startswith("1970-01-01T00:00:00"), created  # the fixed epoch
    finally:
        for image in docker_client.images.list(name=name):
            for tag in image.tags:
                if tag.startswith(name + ":"):
                    docker_client.api.remove_image(tag, force=True)

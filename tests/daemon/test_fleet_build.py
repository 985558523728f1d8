"""A two-point stand-in matrix, locked, rendered and built for real with `docker buildx bake
--push` into the local registry; then a no-change rebake and an engine bump.

Real: buildx 0.29.1, the engine's BuildKit (Docker 28, containerd image store), the registry,
the lock against the registry, the rendered Dockerfiles and bake file with its registry
cache export. Stand-ins: the base images and packages (tests/support/standin.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from tests.support.bakerun import NO_CACHE_EXPORT, bake, cached_ratio, host_network_compose, steps
from tests.support.registries import ANON
from tests.support.standin import DEVEL, RUNTIME, IndexServer, build_index, ensure_images

pytestmark = [pytest.mark.daemon, pytest.mark.usefixtures("registries")]

BASES = {"cuda.devel_image": f"{ANON}/dockergen-test/base-devel:bookworm",
         "cuda.runtime_image": f"{ANON}/dockergen-test/base-runtime:bookworm"}
NAMES = ["standin-mx-a100", "standin-mx-h100"]


@pytest.fixture(scope="module")
def client(docker_client):  # type: ignore[no-untyped-def]
    """The session's engine (conftest): skips without one and leaves no socket open."""
    return docker_client


@pytest.fixture(scope="module")
def index(client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:  # type: ignore[no-untyped-def]
    ensure_images(client.api)
    for local, ref in ((DEVEL, BASES["cuda.devel_image"]),
                       (RUNTIME, BASES["cuda.runtime_image"])):
        repo, tag = ref.rsplit(":", 1)
        client.api.tag(local, repo, tag)
        for chunk in client.api.push(repo, tag=tag, stream=True, decode=True):
            assert "error" not in chunk, chunk
    root = tmp_path_factory.mktemp("bake-index")
    build_index(root)
    server = IndexServer(root)
    yield server.url
    server.close()


def _render(folder: Path, out: str, index: str, *extra: str) -> None:
    sets = [f"{k}={v}" for k, v in BASES.items()] + [
        f"build.pip_index_url={index}/simple", f"build.torch_index_url={index}", *extra]
    args = [a for s in sets for a in ("--set", s)]
    result = run_cli("render", "-q", "standin-matrix.yaml", "-o", out, *args, cwd=folder)
    assert result.rc == 0, result.err


def test_stand_in_matrix_bakes_pushes_and_rebakes_from_cache(index: str,  # type: ignore[no-untyped-def]
                                                            client, tmp_path: Path) -> None:
    for name in ("standin.yaml", "standin-matrix.yaml"):
        shutil.copy(ROOT / "tests" / "profiles" / name, tmp_path / name)
    lock = run_cli("lock", "standin-matrix.yaml",
                   *[a for k, v in BASES.items() for a in ("--set", f"{k}={v}")], cwd=tmp_path)
    assert lock.rc == 0, lock.err
    pins = json.loads((tmp_path / "standin-matrix.lock.json").read_text())["images"]
    assert sorted(pins) == sorted(BASES.values())

    _render(tmp_path, "out", index)
    out = tmp_path / "out"
    froms = [line for line in (out / NAMES[0] / "Dockerfile").read_text().splitlines()
             if line.startswith("FROM ") and "@sha256:" in line]
    assert froms == [
        f"FROM {BASES['cuda.devel_image']}@{pins[BASES['cuda.devel_image']]['digest']} "
        "AS build-base",
        f"FROM {BASES['cuda.runtime_image']}@{pins[BASES['cuda.runtime_image']]['digest']} "
        "AS runtime"]
    compose = host_network_compose(out, NAMES)

    # the generated file as it is: the docker driver on the containerd image store exports
    # the registry cache (type=registry, mode=max) beside the image
    first = bake(out, "--push", compose=compose)
    assert first.returncode == 0, first.stdout[-3000:]
    printed = json.loads(subprocess.run(
        ["docker", "buildx", "bake", "-f", "docker-bake.hcl", "--print"], cwd=out,
        capture_output=True, text=True, check=True).stdout)
    for name in NAMES:
        target = printed["target"][name]
        cache = target["cache-to"][0]["ref"]
        for tag in [*target["tags"], cache]:  # every tag, the dg- one too, and the cache
            inspect = subprocess.run(["docker", "buildx", "imagetools", "inspect", tag],
                                     capture_output=True, text=True, check=False)
            assert inspect.returncode == 0, (tag, inspect.stderr)

    # the rebakes read the local build cache: exporting it again would only lengthen them
    again = bake(out, "--push", NO_CACHE_EXPORT, compose=compose)
    assert again.returncode == 0, again.stdout[-3000:]
    second = steps(again.stdout)
    assert {s.target for s in second} == set(NAMES)
    # steps the two targets share (build-base, ...) are one BuildKit vertex, listed once
    assert {s.stage for s in second} == {"build-base", "flash-attn", "engine", "runtime"}
    for stage in ("build-base", "flash-attn", "engine", "runtime"):  # no step went unread
        seen = {s.index for s in second if s.stage == stage}
        assert min(seen) <= 2 and seen == set(range(min(seen), max(seen) + 1)), (stage, seen)
    assert cached_ratio(second) >= 0.95, [s for s in second if not s.cached]

    _render(tmp_path, "bumped", index, "engine.version=0.30.0")
    bumped_dir = tmp_path / "bumped"
    bumped = bake(bumped_dir, "--push", NO_CACHE_EXPORT,
                  compose=host_network_compose(bumped_dir, NAMES))
    assert bumped.returncode == 0, bumped.stdout[-3000:]
    after = steps(bumped.stdout)
    flash = [s for s in after if s.stage == "flash-attn"]
    assert len(flash) == 2 * 3 and all(s.cached for s in flash), flash
    engine = [s for s in after if s.stage == "engine" and "vllm==0.30.0" in s.instruction]
    assert len(engine) == 2 and not any(s.cached for s in engine)

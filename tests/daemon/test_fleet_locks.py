"""`dockergen lock` against the real local registries (anonymous :5000, htpasswd :5001).

Base images are pushed by the test; a changed image pushed under the same tag is the
drift the lock must notice; digests are checked against the engine's own RepoDigests and
`docker buildx imagetools inspect` (independent clients), not against dockergen itself.
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.registries import ANON, AUTH, PASSWORD, USER

pytestmark = [pytest.mark.daemon, pytest.mark.usefixtures("registries")]

# one platform (provisioning's per-arch import): pushed as a plain image manifest; the
# multi-platform local/debian:bookworm would push an index
BASE = "local/debian:bookworm-amd64"
EPOCH = "1764543600"  # 2025-11-30T23:00:00Z
STAMP = "2025-11-30T23:00:00Z"
SINGLE = ("application/vnd.docker.distribution.manifest.v2+json",
          "application/vnd.oci.image.manifest.v1+json")
INDEX = ("application/vnd.docker.distribution.manifest.list.v2+json",
         "application/vnd.oci.image.index.v1+json")


@pytest.fixture(scope="module")
def client(docker_client):  # type: ignore[no-untyped-def]
    """The session's engine (conftest): skips without one, and leaves no socket open (a
    failed docker.from_env here dropped its socket, an ERROR at some test's teardown)."""
    return docker_client


def _push(client, ref: str, auth: dict[str, str] | None = None) -> str:  # type: ignore[no-untyped-def]
    """Push ``ref`` and return the digest the registry reported to the engine."""
    repo, tag = ref.rsplit(":", 1)
    for chunk in client.api.push(repo, tag=tag, stream=True, decode=True, auth_config=auth):
        assert "error" not in chunk, chunk
    digests = client.api.inspect_image(ref)["RepoDigests"]
    return next(d.split("@")[1] for d in digests if d.startswith(repo + "@"))


def _changed_image(client, ref: str) -> None:  # type: ignore[no-untyped-def]
    """A different image (new config) under ``ref``: what a re-pushed tag looks like."""
    dockerfile = f"FROM {BASE}\nLABEL dockergen.test.run={uuid.uuid4().hex}\n".encode()
    client.images.build(fileobj=io.BytesIO(dockerfile), tag=ref, rm=True)


def _imagetools_digest(ref: str) -> str:
    out = subprocess.run(["docker", "buildx", "imagetools", "inspect", ref], check=True,
                         capture_output=True, text=True).stdout
    return next(line.split()[1] for line in out.splitlines() if line.startswith("Digest:"))


def _media_type(ref: str) -> str:
    """The media type the registry serves for ``ref`` (Docker's schema 2 types from Engine
    20.10's classic store, OCI's from the containerd image store)."""
    out = subprocess.run(["docker", "buildx", "imagetools", "inspect", "--raw", ref],
                         check=True, capture_output=True, text=True).stdout
    return str(json.loads(out)["mediaType"])


def _docker_config(tmp_path: Path, registry: str, password: str | None) -> dict[str, str]:
    folder = tmp_path / f"docker-config-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    auths = {}
    if password is not None:
        auths[registry] = {"auth": base64.b64encode(f"{USER}:{password}".encode()).decode()}
    (folder / "config.json").write_text(json.dumps({"auths": auths}))
    return {"DOCKER_CONFIG": str(folder), "SOURCE_DATE_EPOCH": EPOCH}


@pytest.fixture(scope="module")
def bases(client):  # type: ignore[no-untyped-def]
    """A devel image (single manifest) and a runtime image (an index) in the registry."""
    repo = f"{ANON}/dockergen-fleet-{uuid.uuid4().hex[:8]}/cuda"
    devel, single = f"{repo}:devel", f"{repo}:runtime-single"
    for ref in (devel, single):
        client.api.tag(BASE, *ref.rsplit(":", 1))
    devel_digest = _push(client, devel)
    platform_digest = _push(client, single)
    runtime = f"{repo}:runtime"
    subprocess.run(["docker", "buildx", "imagetools", "create", "-t", runtime, single],
                   check=True, capture_output=True)
    types = {"devel_type": _media_type(devel), "runtime_type": _media_type(runtime)}
    assert types["devel_type"] in SINGLE and types["runtime_type"] in INDEX, types
    return {"repo": repo, "devel": devel, "devel_digest": devel_digest, "runtime": runtime,
            "runtime_index": _imagetools_digest(runtime), "runtime_platform": platform_digest,
            **types}


def _profile(tmp_path: Path, devel: str, runtime: str) -> Path:
    path = tmp_path / "fleetlock.yaml"
    path.write_text("extends: h100-fp8\nname: fleetlock\ncuda:\n"
                    f"  devel_image: {devel}\n  runtime_image: {runtime}\n")
    return path


def _from_lines(dockerfile: str) -> list[str]:
    return [line for line in dockerfile.splitlines() if line.startswith("FROM ")]


def test_lock_pins_check_detects_drift_and_update_moves_the_pin(
        client, bases, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    env = {"SOURCE_DATE_EPOCH": EPOCH}
    profile = _profile(tmp_path, bases["devel"], bases["runtime"])
    lock_file = tmp_path / "fleetlock.lock.json"

    first = run_cli("lock", str(profile), env=env)
    assert first.rc == 0, first.err
    d1, idx = bases["devel_digest"], bases["runtime_index"]
    assert first.out.splitlines() == [f"locked {bases['devel']} {d1}",
                                      f"locked {bases['runtime']} {idx}"]
    assert first.err.strip() == f"wrote {lock_file}"
    assert json.loads(lock_file.read_text()) == {"lockfile": 1, "images": {
        bases["devel"]: {
            "digest": d1, "index_digest": None, "platform": "linux/amd64",
            "platform_digest": d1, "media_type": bases["devel_type"],
            "mirror": None, "locked_at": STAMP},
        bases["runtime"]: {
            "digest": idx, "index_digest": idx, "platform": "linux/amd64",
            "platform_digest": bases["runtime_platform"], "media_type": bases["runtime_type"],
            "mirror": None, "locked_at": STAMP}}}

    rendered = run_cli("render", "-q", str(profile))
    assert rendered.rc == 0, rendered.err
    assert _from_lines(rendered.out) == [
        f"FROM {bases['devel']}@{d1} AS build-base",  # h100-fp8 builds no flash-attn
        "FROM build-base AS engine", "FROM engine AS flashinfer-aot",
        f"FROM {bases['runtime']}@{idx} AS runtime"]
    assert run_cli("lock", "--check", str(profile)).out == f"{lock_file}: ok (2 images)\n"
    plan = run_cli("build", str(profile), "--dry-run", "-q",
                   env={"DOCKER_HOST": "tcp://127.0.0.1:9"})  # build pulls the same pins
    assert plan.rc == 0, plan.err
    assert f"  {bases['devel']}@{d1}" in plan.out.splitlines()
    assert f"  {bases['runtime']}@{idx}" in plan.out.splitlines()

    # the registry's tag moves: a changed image pushed under the same tag
    _changed_image(client, bases["devel"])
    d2 = _push(client, bases["devel"])
    assert d2 != d1
    offline = run_cli("lock", "--check", str(profile))
    assert offline.rc == 0  # offline: the lock still holds every image the profile names
    remote = run_cli("lock", "--check", "--remote", str(profile))
    assert remote.rc == 8
    assert remote.err.splitlines()[0] == (
        f"{lock_file}: {bases['devel']}: the tag moved: locked {d1}, registry now {d2}; "
        "run: dockergen lock --update")
    assert _from_lines(run_cli("render", "-q", str(profile)).out)[0] == (
        f"FROM {bases['devel']}@{d1} AS build-base")  # render stays on the pin

    kept = run_cli("lock", str(profile), env=env)
    assert kept.out.splitlines() == [f"kept   {bases['devel']} {d1}",
                                     f"kept   {bases['runtime']} {idx}"]
    assert kept.err.strip() == f"{lock_file}: up to date"
    moved = run_cli("lock", "--update", str(profile), env={"SOURCE_DATE_EPOCH": "1764547200"})
    assert moved.rc == 0, moved.err
    assert moved.out.splitlines() == [f"moved  {bases['devel']} {d1} -> {d2}",
                                      f"same   {bases['runtime']} {idx}"]
    entries = json.loads(lock_file.read_text())["images"]
    assert entries[bases["devel"]]["locked_at"] == "2025-12-01T00:00:00Z"
    assert entries[bases["runtime"]]["locked_at"] == STAMP  # unchanged pin, unchanged time
    assert _from_lines(run_cli("render", "-q", str(profile)).out)[0] == (
        f"FROM {bases['devel']}@{d2} AS build-base")
    assert run_cli("lock", "--check", "--remote", str(profile)).rc == 0


def test_profile_asking_for_an_image_the_lock_lacks(bases, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    profile = _profile(tmp_path, bases["devel"], bases["runtime"])
    assert run_cli("lock", str(profile), env={"SOURCE_DATE_EPOCH": EPOCH}).rc == 0
    other = f"{bases['repo']}:runtime-single"
    check = run_cli("lock", "--check", "--set", f"cuda.runtime_image={other}", str(profile))
    assert check.rc == 8
    assert check.err.splitlines() == [
        f"--set cuda.runtime_image: cuda.runtime_image: {other} is not in fleetlock.lock.json;"
        " run: dockergen lock --update"]
    (tmp_path / "fleetlock.yaml").write_text(profile.read_text().replace(
        bases["runtime"], other))
    render = run_cli("render", "-q", "fleetlock.yaml", "-o", "out", cwd=tmp_path)
    assert render.rc == 2
    assert render.err.splitlines()[0] == (
        f"fleetlock.yaml:5:18: cuda.runtime_image: {other} is not in fleetlock.lock.json; "
        "run: dockergen lock --update fleetlock.yaml")
    assert not (tmp_path / "out").exists()  # nothing written


def test_authenticated_registry_with_and_without_credentials(
        client, bases, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    private = f"{AUTH}/dockergen-fleet-{uuid.uuid4().hex[:8]}/cuda:runtime"
    client.api.tag(BASE, *private.rsplit(":", 1))
    digest = _push(client, private, {"username": USER, "password": PASSWORD})
    profile = _profile(tmp_path, bases["devel"], private)

    none = run_cli("lock", str(profile), env=_docker_config(tmp_path, AUTH, None))
    assert none.rc == 3
    assert none.err.splitlines()[-1] == (
        f"{private.rsplit(':', 1)[0]}: the registry needs credentials and the docker config "
        f"has none for {AUTH}; log in first: docker login {AUTH}")
    wrong = run_cli("lock", str(profile), env=_docker_config(tmp_path, AUTH, "wrong-pass"))
    assert wrong.rc == 3
    assert wrong.err.splitlines()[-1] == (
        f"{private.rsplit(':', 1)[0]}: the registry refused the credentials for {AUTH} (401);"
        f" log in again: docker login {AUTH}")
    assert "wrong-pass" not in wrong.err + wrong.out
    assert not (tmp_path / "fleetlock.lock.json").exists()

    ok = run_cli("lock", str(profile), env=_docker_config(tmp_path, AUTH, PASSWORD))
    assert ok.rc == 0, ok.err
    assert f"locked {private} {digest}" in ok.out.splitlines()
    assert PASSWORD not in ok.out + ok.err
    assert PASSWORD not in (tmp_path / "fleetlock.lock.json").read_text()
    remote = run_cli("lock", "--check", "--remote", str(profile),
                     env=_docker_config(tmp_path, AUTH, None))
    assert remote.rc == 3  # checking against the registry needs the credentials too


def test_mirror_reference_replaces_the_source(client, bases, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    mirror_repo = f"{AUTH}/mirror-{uuid.uuid4().hex[:8]}/cuda"
    mirrored = f"{mirror_repo}:runtime"
    creds = {"username": USER, "password": PASSWORD}
    for ref in (mirrored, f"{mirror_repo}:devel"):  # the mirror holds the whole repository
        client.api.tag(BASE, *ref.rsplit(":", 1))
        digest = _push(client, ref, creds)
    source_repo = bases["repo"]
    profile = _profile(tmp_path, bases["devel"], f"{source_repo}:runtime")
    env = _docker_config(tmp_path, AUTH, PASSWORD)
    result = run_cli("lock", str(profile), "--mirror", f"{source_repo}={mirror_repo}", env=env)
    assert result.rc == 0, result.err
    assert f"locked {source_repo}:runtime {digest} (via {mirrored})" in result.out.splitlines()
    entry = json.loads((tmp_path / "fleetlock.lock.json").read_text())["images"][
        f"{source_repo}:runtime"]
    assert entry["mirror"] == mirrored and entry["digest"] == digest
    rendered = run_cli("render", "-q", str(profile))
    assert _from_lines(rendered.out)[-1] == f"FROM {mirrored}@{digest} AS runtime"
    # --update keeps resolving through the mirror recorded in the lock
    again = run_cli("lock", "--update", str(profile), env=env)
    assert f"same   {source_repo}:runtime {digest} (via {mirrored})" in again.out.splitlines()


def test_unreachable_registry_and_unknown_tag(bases, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    closed = _profile(tmp_path, "localhost:5999/x/cuda:devel", bases["runtime"])
    result = run_cli("lock", str(closed))
    assert result.rc == 3
    assert result.err.splitlines()[-1] == (
        "localhost:5999/x/cuda: cannot read the registry: http://localhost:5999/v2/x/cuda/"
        "manifests/devel: cannot be read (ConnectionRefusedError); check the address and the "
        "network")
    missing = _profile(tmp_path, f"{bases['repo']}:no-such-tag", bases["runtime"])
    result = run_cli("lock", str(missing))
    assert result.rc == 3
    assert result.err.splitlines()[-1] == (
        f"{bases['repo']}:no-such-tag: not found in the registry (404); check the image "
        "name and tag")
    assert "Traceback" not in result.err

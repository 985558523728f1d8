"""``build --platform linux/amd64,linux/arm64``: one image per platform, one image index.

The engine's ``POST /build`` takes one platform (Engine 28.5.2 answers a comma list with 400
"invalid component"), so each platform is built on its own through the Engine API (arm64
under qemu-user-static on an x86_64 host), tagged ``<immutable tag>-<arch>`` and
smoke-tested on its own: the whole-image audit checks its shared objects against its CPU.
Only when every platform passed are the platform images pushed, and the image index is
written in the registry over their manifests (what ``docker buildx imagetools create``
does) under each release tag and the immutable tag. The build record lists each platform's
image id, tag and manifest digest; ``pushed`` holds the index digest, which ``deploy`` pins.
:mod:`dockergen.build.orchestrate` calls it with its one-platform build.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING

from dockergen import platforms, refs
from dockergen.errors import DockergenError
from dockergen.input.buildrecord import BuildRecord, PlatformImage, SmokeCheck, Status

if TYPE_CHECKING:
    from dockergen.build.daemon import ContainerDaemon
    from dockergen.pipeline import Resolution

# (platform, tag, the build log) -> (image id, seconds): the one-platform build of
# dockergen.build.orchestrate, which raises a DockergenError on any failure
BuildOne = Callable[[str, str, IO[str]], tuple[str, float]]


@dataclass(frozen=True)
class IndexBuild:
    """What a multi-platform build was asked for."""

    platforms: tuple[str, ...]
    builder: str
    tags: tuple[str, ...]  # the index's tags: the release tags, the immutable one, --tag
    immutable: str
    smoke: bool = True
    gpus: bool = False
    push: bool = False


def problem(tags: tuple[str, ...], immutable: str, builder: str) -> str | None:
    """Why these tags and builder cannot make an index (None: they can)."""
    if builder != "buildkit":
        return ("--platform with several platforms needs BuildKit (--builder buildkit): the "
                "classic builder builds one platform")
    repo = refs.parse(immutable).name
    elsewhere = [t for t in tags if refs.parse(t).name != repo]
    if elsewhere:  # an index lists manifests of its own repository only
        return (f"--tag {elsewhere[0]}: a multi-platform image is tagged in its own "
                f"repository, {repo}; tag it elsewhere after the push (e.g. docker buildx "
                "imagetools create)")
    return None


def build_index(daemon: ContainerDaemon, res: Resolution, job: IndexBuild,
                build_one: BuildOne, folder: Path, echo: Callable[[str], None],
                out: Callable[[str], None]) -> BuildRecord:
    """Build, smoke-test and (with ``--push``) push every platform and the index over them;
    the build record is kept current at each step."""
    from dockergen.files import atomic
    from dockergen.outputs.dockerfile import LOG_FILE, RECORD_FILE, write_context

    write_context(folder, res.files(), later=(RECORD_FILE, LOG_FILE))
    record = BuildRecord(res.resolved.profile.name, res.resolved.profile_hash, job.builder,
                         job.tags, job.immutable)
    path = folder / RECORD_FILE
    with atomic.open_new(folder / LOG_FILE) as log:
        images, seconds = _build_each(job, build_one, log, record, path, echo)
    record = replace(record, status=Status.BUILT, seconds=round(seconds, 3),
                     platforms=tuple(images))
    if job.smoke:
        record = _smoke_each(daemon, res, record, job.gpus, path, echo)
    if not job.push:
        record.write(path)
        for image in images:
            out(f"{image.platform} {image.tag} {image.image_id}")
        return record
    return _push_index(daemon, record, path, echo, out)


def _build_each(job: IndexBuild, build_one: BuildOne, log: IO[str], record: BuildRecord,
                path: Path, echo: Callable[[str], None]) -> tuple[list[PlatformImage], float]:
    """One build per platform, each under its own tag; a failure is recorded and raised."""
    images, seconds = [], 0.0
    for platform in job.platforms:
        tag = f"{job.immutable}-{platforms.suffix(platform)}"
        echo(f"building {platform} as {tag}")
        try:
            image_id, took = build_one(platform, tag, log)
        except DockergenError as exc:
            replace(record, status=Status.FAILED, error=f"{platform}: "
                    + str(exc).splitlines()[0]).write(path)
            raise
        seconds += took
        images.append(PlatformImage(platform, tag, image_id))
        echo(f"built {platform} {image_id} in {took:.1f}s")
    return images, seconds


def _smoke_each(daemon: ContainerDaemon, res: Resolution, record: BuildRecord,
                gpus: bool, path: Path, echo: Callable[[str], None]) -> BuildRecord:
    """Every platform's smoke tests (an emulated platform's run under qemu); any failure
    stops before the push."""
    from dockergen.build.smoke import SmokeFailed, smoke_test

    checks: list[SmokeCheck] = []
    for image in record.platforms or ():
        report = smoke_test(daemon, image.tag, res.resolved, gpus=gpus)
        for check in report.checks:
            checks.append(replace(check, name=f"[{image.platform}] {check.name}"))
            echo(f"smoke {'ok    ' if check.ok else 'FAILED'} [{image.platform}] {check.name}"
                 + ("" if check.ok else f": {check.detail}"))
    record = replace(record, smoke=tuple(checks))
    failed = [c.name for c in checks if not c.ok]
    if failed:
        replace(record, status=Status.SMOKE_FAILED).write(path)
        raise SmokeFailed(f"{len(failed)} smoke test(s) failed: {'; '.join(failed)}; nothing "
                          "was pushed; the platform images stay as "
                          + ", ".join(i.tag for i in record.platforms or ()))
    return record


def _push_index(daemon: ContainerDaemon, record: BuildRecord, path: Path,
                echo: Callable[[str], None], out: Callable[[str], None]) -> BuildRecord:
    """Push each platform's image, then write the index over their manifests under every
    tag of the build; the record holds the digests before anything is printed."""
    from dockergen.outputs.fleet.digests import RegistryClient

    pushed: list[PlatformImage] = []
    index: dict[str, str] = {}
    try:
        client = RegistryClient()
        for image in record.platforms or ():
            digest = daemon.push(image.tag, on_status=echo)
            pushed.append(replace(image, digest=digest))
            echo(f"pushed {image.platform} {image.tag}@{digest}")
        manifests = [client.descriptor(f"{i.tag.rsplit(':', 1)[0]}@{i.digest}", i.platform)
                     for i in pushed]
        for ref in record.tags:
            index[ref] = client.put_index(ref, manifests)
            echo(f"pushed index {ref}@{index[ref]}")
    except DockergenError as exc:
        replace(record, status=Status.PUSH_FAILED, pushed=index,
                platforms=tuple(pushed) or record.platforms, error=str(exc)).write(path)
        raise
    record = replace(record, status=Status.PUSHED, pushed=index, platforms=tuple(pushed))
    record.write(path)
    for ref, digest in index.items():
        out(f"{ref}@{digest}")
    return record

"""The container daemon behind a small protocol: what build, smoke and push need.

:class:`ContainerDaemon` is the interface; :class:`dockergen.build.daemon.docker.DockerDaemon`
implements it with docker-py (the only module that imports ``docker``), and tests use a
fake for fast failure-path tests. The helpers here (context tar, reference parsing) need
no daemon. In this package "daemon" is the Docker engine; "engine" elsewhere in dockergen
always means the serving engine (vLLM, TensorRT-LLM, ...).
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from dockergen import refs
from dockergen.errors import DockergenError, ExitCode


class DaemonError(DockergenError, code=ExitCode.MISSING_TOOL):
    """The engine could not be reached or refused a request."""


class PullError(DaemonError, code=ExitCode.BUILD_FAILED):
    """A base image could not be pulled."""


class PushError(DaemonError, code=ExitCode.PUSH_FAILED):
    """An image could not be pushed (or the push carried no digest)."""


def split_reference(ref: str) -> tuple[str, str]:
    """``registry/repo:tag`` -> (``registry/repo``, what the Engine API takes as its tag).

    The API's tag is the digest when there is one (``repo:tag@sha256:...`` pulls the digest;
    the tag only names it), else the tag, else ``latest``: what ``docker pull`` sends.
    """
    try:
        parsed = refs.parse(ref)
    except refs.InvalidReference as exc:
        raise DaemonError(f"{ref!r} is not an image reference: {exc}") from None
    return parsed.name, parsed.digest or parsed.tag or "latest"


def registry_of(ref: str) -> str:
    """The registry host of an image reference (``docker.io`` for Docker Hub names)."""
    try:
        return refs.parse(ref).registry
    except refs.InvalidReference:
        return refs.DOCKER_HUB  # no registry would accept it: the pull itself reports it


def context_tar(files: dict[str, bytes]) -> bytes:
    """A reproducible tar of the build context (sorted, mtime 0, root-owned)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = sorted({"/".join(name.split("/")[:i]) for name in files
                       for i in range(1, name.count("/") + 1)})
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(files[name]))
    return buf.getvalue()



class ContainerDaemon(Protocol):
    """The operations ``dockergen build`` needs from a container daemon."""

    def has_buildkit(self) -> bool:
        """Whether BuildKit builds are available."""

    def image_id(self, ref: str) -> str | None:
        """The local image id of ``ref``, or None."""

    def inspect(self, ref: str) -> dict[str, Any]:
        """The image's inspect document (Config, ...)."""

    def history(self, ref: str) -> list[str]:
        """The CreatedBy line of each layer."""

    def pull(self, ref: str) -> None:
        """Pull with the user's credentials; raise :class:`PullError`."""

    def build(self, context: bytes, *, buildkit: bool, tag: str | None,
              buildargs: dict[str, str], target: str | None, nocache: bool,
              platform: str | None, labels: dict[str, str] | None = None,
              network: str | None = None,
              exporter: dict[str, str] | None = None) -> Iterator[dict[str, Any]]:
        """Start a build; yield the decoded messages of its stream. ``exporter``: BuildKit
        image-exporter attributes (layer compression, the timestamp rewrite), BuildKit
        builds only."""

    def image_store(self) -> str:
        """Where the engine keeps images: ``containerd`` (its exporter writes zstd layers)
        or ``classic`` (graph drivers such as overlay2: gzip only)."""

    def cancel(self) -> None:
        """Cancel the running build (may be called from another thread)."""

    def tag(self, image_id: str, ref: str) -> None:
        """Tag an image."""

    def remove_image(self, ref: str) -> None:
        """Remove a tag or image we created; never fails."""

    def run(self, image: str, command: list[str], *, entrypoint: list[str] | None = None,
            timeout: float = 300, gpus: bool = False, run_id: str = "",
            network_disabled: bool = True) -> tuple[int, str]:
        """Run a command in a fresh container; return (exit code, output)."""

    def serve_check(self, image: str, port: int, model: str, *, timeout: float = 300,
                    run_id: str = "", gpus: bool = False) -> tuple[bool, str]:
        """Start the image's server; check /health and a one-token completion."""

    def remove_containers(self, run_id: str) -> None:
        """Remove every container of a run."""

    def push(self, ref: str, retries: int = 3, backoff: float = 1.0,
             on_status: Callable[[str], None] | None = None) -> str:
        """Push; return the digest the registry confirmed; raise :class:`PushError`."""

    def registry_digest(self, ref: str) -> str | None:
        """The digest ``ref`` has in its registry now, or None if the tag is not there."""

    def read_file(self, image: str, path: str, limit: int) -> bytes | None:
        """The bytes of the regular file ``path`` in ``image``, read from a created and
        never-started container (no shell or program of the image runs); None: no such
        file. More than ``limit`` bytes raise :class:`DaemonError`."""


def connect() -> ContainerDaemon:
    """The local Docker daemon (``DOCKER_HOST`` or the socket); imports docker-py lazily."""
    from dockergen.build.daemon.docker import DockerDaemon

    return DockerDaemon()

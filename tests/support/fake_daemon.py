"""An in-memory :class:`~dockergen.build.daemon.ContainerDaemon` for fast failure-path tests.

It stands in for the Docker engine only where a real one would make a test slow or the
failure impossible to provoke on demand (a registry refusing a push, a tag the engine
rejects, a container that cannot start, a build step that prints nothing). Each behaviour
is switched on explicitly; everything it does is recorded for the assertions. The same
paths also run against the real engine in tests/daemon/test_build_daemon.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from dockergen.build.daemon import DaemonError, PushError


@dataclass
class FakeDaemon:
    """A daemon whose build succeeds instantly unless told otherwise."""

    image: str = "sha256:" + "ab" * 32
    refuse_push: str | None = None  # error text the registry answers
    refuse_tag: str | None = None  # refs containing this are rejected
    start_error: str | None = None  # containers cannot start
    silent_build: bool = False  # the build prints nothing until cancelled
    run_output: Callable[[list[str]], tuple[int, str]] | None = None
    tags: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    pushed: list[str] = field(default_factory=list)
    runs: list[list[str]] = field(default_factory=list)
    cancelled: threading.Event = field(default_factory=threading.Event)
    registry: dict[str, str] = field(default_factory=dict)  # ref -> digest already pushed
    repo_digests: list[str] = field(default_factory=list)  # the image's RepoDigests
    store: str = "containerd"  # the image store: containerd (writes zstd) or classic
    exporters: list[dict[str, str] | None] = field(default_factory=list)  # per build
    files: dict[str, bytes] = field(default_factory=dict)  # path -> what read_file finds
    buildargs: list[dict[str, str]] = field(default_factory=list)  # per build

    def has_buildkit(self) -> bool:
        return True

    def image_store(self) -> str:
        return self.store

    def image_id(self, ref: str) -> str | None:
        return "sha256:" + "00" * 32  # every base image is present

    def inspect(self, ref: str) -> dict[str, Any]:
        return {"Config": {}, "RepoDigests": list(self.repo_digests)}

    def history(self, ref: str) -> list[str]:
        return []

    def pull(self, ref: str) -> None:
        raise AssertionError("nothing should be pulled")

    def build(self, context: bytes, *, buildkit: bool, tag: str | None,
              buildargs: dict[str, str], target: str | None, nocache: bool,
              platform: str | None, labels: dict[str, str] | None = None,
              network: str | None = None,
              exporter: dict[str, str] | None = None) -> Iterator[dict[str, Any]]:
        self.exporters.append(exporter)
        self.buildargs.append(dict(buildargs))
        if self.silent_build:
            # like a RUN step that prints nothing: no message until the build is cancelled,
            # then the connection drops
            if not self.cancelled.wait(timeout=30):
                raise AssertionError("the build was never cancelled")
            raise ConnectionError("connection closed")
        assert tag is not None
        self.tags[tag] = self.image
        yield {"id": "moby.image.id", "aux": {"ID": self.image}}

    def cancel(self) -> None:
        self.cancelled.set()

    def tag(self, image_id: str, ref: str) -> None:
        if self.refuse_tag and self.refuse_tag in ref:
            raise DaemonError(f"cannot tag {ref}: invalid reference format")
        self.tags[ref] = image_id

    def remove_image(self, ref: str) -> None:
        self.removed.append(ref)
        self.tags.pop(ref, None)

    def run(self, image: str, command: list[str], *, entrypoint: list[str] | None = None,
            timeout: float = 300, gpus: bool = False, run_id: str = "",
            network_disabled: bool = True) -> tuple[int, str]:
        full = [*(entrypoint or []), *command]
        self.runs.append(full)
        if self.start_error:
            raise DaemonError(f"cannot start {' '.join(full)!r} in {image}: {self.start_error}")
        return self.run_output(full) if self.run_output else (0, "")

    def serve_check(self, image: str, port: int, model: str, *, timeout: float = 300,
                    run_id: str = "", gpus: bool = False) -> tuple[bool, str]:
        return True, "fake"

    def remove_containers(self, run_id: str) -> None:
        pass

    def push(self, ref: str, retries: int = 3, backoff: float = 1.0,
             on_status: Callable[[str], None] | None = None) -> str:
        if self.refuse_push:
            raise PushError(f"cannot push {ref}: {self.refuse_push}")
        self.pushed.append(ref)
        self.registry[ref] = "sha256:" + "cd" * 32
        return self.registry[ref]

    def registry_digest(self, ref: str) -> str | None:
        return self.registry.get(ref)

    def read_file(self, image: str, path: str, limit: int) -> bytes | None:
        return self.files.get(path)

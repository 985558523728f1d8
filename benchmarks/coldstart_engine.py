"""The engine and registry side of benchmarks/coldstart.py: what a run created (so that it
removes exactly that), the registry's manifests, pushes, pulls and containers."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import docker.errors

from dockergen.build.daemon import split_reference
from dockergen.build.daemon.docker import DockerDaemon
from tests.support.registries import Registry

ACCEPT = ", ".join(("application/vnd.oci.image.index.v1+json",
                    "application/vnd.docker.distribution.manifest.list.v2+json",
                    "application/vnd.oci.image.manifest.v1+json",
                    "application/vnd.docker.distribution.manifest.v2+json"))


@dataclass
class Run:
    """What this run created, so that it removes exactly that at its end."""

    daemon: DockerDaemon
    registry: str
    keep: bool
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    cache: set[str] = field(default_factory=set)  # build-cache records of this run's builds
    tags_before: set[str] = field(default_factory=set)
    manifests: set[tuple[str, str]] = field(default_factory=set)  # (repository, digest) pushed
    restore: dict[str, list[str]] = field(default_factory=dict)  # --reuse: alias -> its tags
    started: Registry | None = None
    containers: int = 0

    @property
    def prefix(self) -> str:
        return f"{self.registry}/dgbench/"

    def records(self) -> dict[str, bool]:
        """The engine's build-cache records: id -> in use. Its disk-usage listing fails now
        and then while another client removes something ("snapshot ... does not exist"):
        asked again."""
        for attempt in range(5):
            try:
                found = self.daemon.api.df().get("BuildCache") or ()
                return {str(r["ID"]): bool(r.get("InUse")) for r in found}
            except docker.errors.APIError:
                if attempt == 4:
                    raise
                time.sleep(2)
        raise AssertionError("unreachable")

    @contextlib.contextmanager
    def building(self) -> Iterator[None]:
        """Count the build-cache records that appear while this run builds as its own. An
        interrupted build goes on in the engine a while: its records are awaited (60 s)."""
        before = set(self.records())
        wait = 0.0
        try:
            yield
        except BaseException:
            wait = 60.0
            raise
        finally:
            deadline, found = time.monotonic() + wait, self.records()
            while time.monotonic() < deadline:
                time.sleep(5)
                again = self.records()
                if set(again) == set(found) and not any(again[r] for r in set(again) - before):
                    break
                found = again
            # this build is over: a new record still in use is another build's
            busy = {r for r, used in found.items() if used and r not in before}
            if busy:
                print(f"warning: another build ran on this engine meanwhile ({len(busy)} "
                      "record(s) in use); its finished records count as this run's",
                      file=sys.stderr)
            self.cache |= set(found) - before - busy

    def prune_cache(self, wait: float = 0) -> set[str]:
        """Prune this run's build-cache records, children first, in passes while they remove
        something (a record stays while a child does), or while one is in use, up to
        ``wait`` s; returns those left. ``all``: a record whose layer an image shared
        ("Shared") is pruned only so on Engine 28's containerd image store (measured)."""
        deadline = time.monotonic() + wait
        left = self.cache & set(self.records())
        while left:
            for record in sorted(left):
                with contextlib.suppress(docker.errors.APIError):  # gone with another
                    self.daemon.api.prune_builds(filters={"id": [record]}, all=True)
            now = self.cache & set(self.records())
            if now >= left and time.monotonic() >= deadline:
                return now
            if now >= left:
                time.sleep(5)
            left = now
        return left

    def our_tags(self) -> list[str]:
        return [t for image in self.daemon.client.images.list() for t in image.tags
                if t.startswith(self.prefix) and t not in self.tags_before]

    def remove_images(self) -> None:
        for tag in self.our_tags():
            self.daemon.remove_image(tag)

    def cleanup(self) -> None:
        """Remove what this run created (containers, images, manifests, cache)."""
        self.daemon.remove_containers(self.run_id)
        for alias, tags in self.restore.items():  # a reused image gets its own tags back
            with contextlib.suppress(Exception):
                if self.daemon.image_id(alias) is None:
                    self.daemon.api.pull(*split_reference(alias))
                for tag in tags:
                    self.daemon.api.tag(alias, *split_reference(tag))
        if not self.keep:
            self.remove_images()
            for repository, digest in self.manifests:
                with contextlib.suppress(Exception):
                    _registry(self.registry, repository, digest, method="DELETE")
        left = self.prune_cache(wait=60)
        print(f"build cache: {len(self.cache)} record(s) of this run's builds, {len(left)} left "
              "(in use)", file=sys.stderr)
        if self.started is not None:
            self.started.stop()


def _registry(registry: str, repository: str, reference: str,
              method: str = "GET") -> tuple[str, dict[str, Any]]:
    """(digest, manifest) the registry holds for repository:reference."""
    request = urllib.request.Request(f"http://{registry}/v2/{repository}/manifests/{reference}",
                                     headers={"Accept": ACCEPT}, method=method)
    with urllib.request.urlopen(request, timeout=30) as resp:
        body = resp.read()
        return resp.headers.get("Docker-Content-Digest", ""), json.loads(body) if body else {}


def repository_of(run: Run, ref: str) -> tuple[str, str]:
    """(repository in the run's registry, tag) of a reference there."""
    repo, tag = split_reference(ref)
    return repo[len(run.registry) + 1:], tag or "latest"


def layers(run: Run, ref: str) -> list[dict[str, Any]]:
    """The layers of the image's manifest in the registry (an index: its linux/amd64 one)."""
    repository, tag = repository_of(run, ref)
    _, manifest = _registry(run.registry, repository, tag)
    if "manifests" in manifest:
        chosen = next(m for m in manifest["manifests"]
                      if m.get("platform", {}).get("architecture") == "amd64")
        _, manifest = _registry(run.registry, repository, chosen["digest"])
    return list(manifest["layers"])


def push(run: Run, ref: str) -> None:
    """Push ``ref``; its manifest is this run's to delete when the tag was not there before."""
    repository, tag = repository_of(run, ref)
    try:
        before = _registry(run.registry, repository, tag, method="HEAD")[0]
    except OSError:  # urllib's HTTPError too: 404 for a tag the registry does not hold
        before = ""
    digest = run.daemon.push(ref)
    if digest != before:
        run.manifests.add((repository, digest))


def run_in(run: Run, image: str, code: list[str],
           env: dict[str, str] | None = None) -> tuple[int, str, str, float]:
    """``python3 CODE...`` in a fresh container as the image's user: (exit, out, err, wall)."""
    run.containers += 1
    start = time.perf_counter()
    container = run.daemon.client.containers.create(
        image, code, entrypoint=["python3"], environment=env or {}, network_disabled=True,
        name=f"dgbench-{run.run_id}-{run.containers}", labels={"dockergen.run-id": run.run_id})
    try:
        container.start()
        status = container.wait(timeout=1800)
        wall = time.perf_counter() - start
        out = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
        err = container.logs(stdout=False, stderr=True).decode("utf-8", "replace")
        return int(status.get("StatusCode", 1)), out, err, wall
    finally:
        container.remove(force=True)



def pull(run: Run, ref: str) -> tuple[float, set[str]]:
    """Pull ``ref``: (seconds, the short ids of the layers it downloaded)."""
    repo, tag = split_reference(ref)
    fetched: set[str] = set()
    start = time.perf_counter()
    for chunk in run.daemon.api.pull(repo, tag=tag, stream=True, decode=True):
        if "error" in chunk:
            sys.exit(f"pull of {ref} failed: {chunk['error']}")
        if chunk.get("status") in ("Downloading", "Download complete", "Pull complete"):
            fetched.add(str(chunk.get("id", "")))
    return time.perf_counter() - start, fetched


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Let dockergen cancel its build and remove its containers: a Ctrl-C at a terminal
    reached it too; otherwise (SIGTERM, a background job) it is sent one."""
    for signalled in (False, True):
        if signalled:
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30 if not signalled else 60)
            return
        except subprocess.TimeoutExpired:
            pass
    proc.kill()
    proc.wait()

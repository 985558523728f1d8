"""Base-image digest locks: ``<profile>.lock.json`` beside the profile.

The lock maps every base-image reference a profile (or each variant of its matrix) asks
for to the digest it resolved to, so that ``render`` writes literal
``FROM repo:tag@sha256:...`` lines: reproducible builds, and Renovate/Dependabot can read
and refresh the pins (they do not read ARG-interpolated FROM lines).

File layout (JSON, sorted keys, so diffs stay small)::

    {"lockfile": 1,
     "images": {"<ref as the profile derives it>": {
         "digest": "sha256:...",          # pinned in FROM (index digest if there is one)
         "index_digest": "sha256:..." | null,
         "platform": "linux/amd64", "platform_digest": "sha256:...",
         # `lock --platform linux/amd64,linux/arm64`: each platform's manifest in the index
         "platform_digests": {"linux/amd64": "sha256:...", "linux/arm64": "sha256:..."},
         "media_type": "...", "mirror": "<mirror ref>" | null,
         "locked_at": "2026-11-30T23:00:00Z"}}}

Other sections (a Python closure lock, say) can live beside ``images``; this module keeps
any key it does not own. ``locked_at`` honours ``SOURCE_DATE_EPOCH`` (reproducible runs)
and only changes when the digest does.

Reading a lock and pinning a profile's images with it is dockergen/input/pins.py's job (resolution
applies the pins); this module resolves, writes and checks locks.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dockergen.errors import (
    DockergenError,
    ExitCode,
    Location,
)
from dockergen.files import atomic
from dockergen.input.pins import LOCK_SUFFIX as LOCK_SUFFIX  # the lock command names the file
from dockergen.input.pins import lock_path as lock_path
from dockergen.input.pins import read_lock
from dockergen.outputs.fleet.digests import RegistryClient, TagDigests

FORMAT = 1


class LockStaleError(DockergenError, code=ExitCode.LOCK_STALE):
    """``lock --check``: the lock does not hold what the profiles ask for, or drifted."""

    def __init__(self, lines: list[str]) -> None:
        self._lines = lines
        super().__init__("\n".join(lines))

    def lines(self) -> list[str]:
        return list(self._lines)


@dataclass(frozen=True)
class BaseImage:
    """A base image a profile asks for, and where the profile says so."""

    ref: str
    field: str  # cuda.devel_image / cuda.runtime_image
    location: Location


def write_lock(path: Path, data: dict[str, Any]) -> None:
    """Write the lock atomically (:func:`dockergen.files.atomic.write_file`); an existing file
    there is replaced only when it is a lock dockergen wrote."""
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    atomic.write_file(path, text, ours=is_lock_text)


def is_lock_text(head: bytes) -> bool:
    """``head`` (the start of a file) is a base-image lock dockergen wrote."""
    try:
        data = json.loads(head)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and data.get("lockfile") == FORMAT


def _now() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    stamp = int(epoch) if epoch and epoch.isdigit() else int(time.time())
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


def mirror_of(ref: str, mirrors: dict[str, str]) -> str | None:
    """The mirror reference of ``ref`` under ``--mirror SRC=DST`` repository prefixes."""
    for src, dst in sorted(mirrors.items(), key=lambda kv: -len(kv[0])):
        name = ref.split("@")[0]
        if name == src or name.startswith(src + ":") or name.startswith(src + "/"):
            return dst + name[len(src):]
    return None


def _entry(res: TagDigests, mirror: str | None, locked_at: str,
           others: tuple[TagDigests, ...] = ()) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "digest": res.digest, "index_digest": res.index_digest, "platform": res.platform,
        "platform_digest": res.platform_digest, "media_type": res.media_type,
        "mirror": mirror, "locked_at": locked_at}
    if others:
        entry["platform_digests"] = {r.platform: r.platform_digest for r in (res, *others)}
    return entry


def resolve_platforms(client: RegistryClient, ref: str, platforms: tuple[str, ...]
                      ) -> tuple[TagDigests, tuple[TagDigests, ...]]:
    """``ref`` resolved for each platform: one index that holds every one of them (a
    single-platform image, or an index without one of them, is a RegistryError naming it)."""
    first = client.resolve(ref, platforms[0])
    others = tuple(client.resolve(ref, p) for p in platforms[1:])
    moved = [r for r in others if r.digest != first.digest]
    if moved:  # the tag moved between two reads: resolve again rather than mix two indexes
        raise DockergenError(f"{ref}: the tag moved while it was read ({first.digest}, then "
                             f"{moved[0].digest}); run the command again")
    return first, others


def update_lock(lock_file: Path, images: list[str], *, update: bool,
                mirrors: dict[str, str], client: RegistryClient | None = None,
                echo: Callable[[str], None] = lambda _: None,
                platforms: tuple[str, ...] = ("linux/amd64",)) -> bool:
    """Resolve ``images`` into the lock; return whether the file changed.

    Without ``update`` only images missing from the lock are resolved (existing pins stay);
    with it every image is resolved again and moved pins are reported. With several
    ``platforms`` each image's index must hold each of them; the lock keeps each platform's
    manifest digest (``platform_digests``).
    """
    client = client or RegistryClient()
    data = read_lock(lock_file) or {}
    before = json.dumps(data, sort_keys=True)
    entries: dict[str, Any] = dict(data.get("images", {}))
    for ref in sorted(set(images)):
        old = entries.get(ref)
        mirror = mirror_of(ref, mirrors) or (old or {}).get("mirror")
        has = sorted((old or {}).get("platform_digests") or [(old or {}).get("platform")])
        if (old is not None and not update and old.get("mirror") == mirror
                and has == sorted(platforms)):
            echo(f"kept   {ref} {old['digest']}")
            continue
        res, others = resolve_platforms(client, mirror or ref, platforms)
        via = f" (via {mirror})" if mirror else ""
        if (old is not None and old.get("digest") == res.digest and old.get("mirror") == mirror
                and has == sorted(platforms)):
            echo(f"same   {ref} {res.digest}{via}")
            continue
        entries[ref] = _entry(res, mirror, _now(), others)
        if old is None:
            echo(f"locked {ref} {res.digest}{via}")
        else:
            echo(f"moved  {ref} {old['digest']} -> {res.digest}{via}")
    data["lockfile"] = FORMAT
    data["images"] = dict(sorted(entries.items()))
    if json.dumps(data, sort_keys=True) == before:
        return False
    write_lock(lock_file, data)
    return True


def check_lock(lock_file: Path, images: list[BaseImage], *,
               remote: bool, client: RegistryClient | None = None) -> list[str]:
    """Problems of the lock, one line each (empty: the lock is good).

    Offline: every image the profile asks for is in the lock. With ``remote``: each pin is
    still what its tag points to in the registry (a moved tag is drift).
    """
    data = read_lock(lock_file)
    shown = str(lock_file)
    if data is None:
        return [f"{shown}: no lock file; run: dockergen lock PROFILE"]
    entries = data.get("images", {})
    lines = []
    for image in images:
        if "@" in image.ref:
            continue
        entry = entries.get(image.ref)
        if entry is None:
            lines.append(f"{image.location}: {image.field}: {image.ref} is not in "
                         f"{lock_file.name}; run: dockergen lock --update")
            continue
        if remote:
            client = client or RegistryClient()
            now = client.resolve(entry.get("mirror") or image.ref)
            if now.digest != entry["digest"]:
                lines.append(f"{shown}: {image.ref}: the tag moved: locked {entry['digest']}, "
                             f"registry now {now.digest}; run: dockergen lock --update")
    return lines

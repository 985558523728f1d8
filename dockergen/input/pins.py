"""Base-image pins: the digest lock beside a profile, read as a typed input of resolution.

``PROFILE.lock.json`` (written by ``dockergen lock``, format in
:mod:`dockergen.outputs.fleet.locks`)
maps each base-image reference a profile derives to the digest it resolved to. This module
reads it into :class:`BasePins`; :func:`dockergen.resolve.fold.resolve` applies them, in that one
place, so that every output (render and bake, build, deploy, explain, observe, plan) sees
the same pinned ``FROM`` images and so the same ``dg-`` tag.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dockergen import refs
from dockergen.errors import LOCK, Location, OutputError, Problem, ProfileError
from dockergen.files import inputs

LOCK_SUFFIX = ".lock.json"


def lock_path(profile: Path) -> Path:
    """Where the lock of a profile file lives: beside it, ``NAME.lock.json``."""
    return profile.with_name(profile.stem + LOCK_SUFFIX)


def read_lock(path: Path) -> dict[str, Any] | None:
    """The lock file's data, or None when there is none."""
    try:
        text = inputs.read_text(path, "lock")
    except FileNotFoundError:
        return None
    except inputs.InputError as exc:  # a device, FIFO, link loop, huge file
        raise ProfileError([Problem(Location(str(path), origin=LOCK), "", exc.problem,
                                    exc.fix)]) from None
    except OSError as exc:
        raise OutputError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProfileError([Problem(Location(str(path), exc.lineno, exc.colno), "",
                                    "the lock file is not valid JSON",
                                    "regenerate it: dockergen lock --update PROFILE")]) from None
    except RecursionError:  # nested deeper than the parser's stack
        raise ProfileError([Problem(Location(str(path), 1, 1), "", "the lock file is nested "
                                    "too deeply", "regenerate it: dockergen lock --update "
                                    "PROFILE")]) from None
    if not isinstance(data, dict) or not isinstance(data.get("images", {}), dict):
        raise ProfileError([Problem(Location(str(path), 1, 1), "images",
                                    "expected a mapping of image references",
                                    "regenerate it: dockergen lock --update PROFILE")])
    problems = [Problem(Location(str(path), 1, 1, origin=LOCK), f"images[{ref!r}]", what,
                        "regenerate it: dockergen lock --update PROFILE")
                for ref, entry in data.get("images", {}).items()
                for what in _entry_problems(entry)]
    if problems:
        raise ProfileError(problems)
    return data


# what a pin may be: an OCI content digest (src: opencontainers/image-spec descriptor.md)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128}")


# the fields `dockergen lock` writes beside the digest (dockergen/outputs/fleet/locks.py, _entry):
# each may be absent (a lock written by hand) or null where the registry had none; when
# present it is what `lock` writes, so `lock --check` and `lock --update` compare like with like
_DIGEST_FIELDS = ("index_digest", "platform_digest")
_TEXT_FIELDS = {"platform": re.compile(r"[a-z0-9_]+/[a-z0-9_]+(/[a-z0-9_.]+)?"),
                "media_type": re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/"
                                         r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"),
                "locked_at": re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")}


def _entry_problems(entry: object) -> list[str]:
    """What is wrong with one entry of a lock's ``images`` (each is pinned into a FROM)."""
    if not isinstance(entry, dict):
        return ["expected a mapping with the image's digest"]
    digest, mirror = entry.get("digest"), entry.get("mirror")
    found = []
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        found.append("has no digest" if digest is None else
                     "the digest is not sha256:<64 hex digits>")
    if mirror is not None and not isinstance(mirror, str):
        found.append("the mirror is not an image reference")
    for key in _DIGEST_FIELDS:
        value = entry.get(key)
        if value is not None and not (isinstance(value, str) and _DIGEST.fullmatch(value)):
            found.append(f"{key} is not sha256:<64 hex digits>")
    for key, form in _TEXT_FIELDS.items():
        value = entry.get(key)
        if value is not None and not (isinstance(value, str) and form.fullmatch(value)):
            found.append(f"{key} is not what `dockergen lock` writes there")
    per_platform = entry.get("platform_digests")
    if per_platform is not None and not (
            isinstance(per_platform, dict) and per_platform and all(
                isinstance(k, str) and _TEXT_FIELDS["platform"].fullmatch(k)
                and isinstance(v, str) and _DIGEST.fullmatch(v)
                for k, v in per_platform.items())):
        found.append("platform_digests is not a mapping of platform (linux/arm64) to "
                     "sha256:<64 hex digits>")
    return found


def pinned(ref: str, entry: Mapping[str, Any]) -> str:
    """The FROM reference of a locked image: ``repo:tag@sha256:...`` (mirror if set)."""
    return f"{entry.get('mirror') or ref}@{entry['digest']}"


@dataclass(frozen=True)
class BasePins:
    """The pins of one lock file: unpinned reference -> pinned ``FROM`` reference."""

    file: Path
    images: Mapping[str, str]

    def pin(self, ref: str) -> str | None:
        """The pinned reference of ``ref``; None when the lock does not hold it."""
        return self.images.get(ref)


def read_pins(profile: Path) -> BasePins | None:
    """The pins of the lock beside ``profile``; None when there is no lock.

    Every pin is checked by the reference grammar: the file is anyone's to edit, and its
    references become ``FROM`` lines.
    """
    file = lock_path(profile)
    data = read_lock(file)
    if data is None:
        return None
    images: dict[str, str] = {}
    for ref, entry in data.get("images", {}).items():
        ref_ok = isinstance(ref, str) and refs.is_reference(ref, digest=False)
        value = (pinned(ref, entry) if ref_ok and isinstance(entry, dict)
                 and isinstance(entry.get("digest"), str)
                 and isinstance(entry.get("mirror") or "", str) else "")
        if not refs.is_reference(value, digest=True):
            # the key is anyone's text: JSON-quoted, so a newline in it cannot add a line
            where = Location(str(file), origin=LOCK)
            raise ProfileError([Problem(where, f"images[{json.dumps(ref)}]",
                                        "not an image reference with its digest and an "
                                        "optional mirror reference",
                                        f"regenerate it: dockergen lock --update {profile}")])
        images[ref] = value
    return BasePins(file, images)

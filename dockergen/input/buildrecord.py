"""The build record: what ``dockergen build`` writes and ``deploy --record`` reads.

``build-record.json`` is written by :mod:`dockergen.build.orchestrate` at each step
(``started``, then
``built`` or ``failed``, ``smoke-failed``, ``push-failed`` or ``pushed``); ``deploy`` pins the
image from it only when the build got past its smoke tests. One typed record and one status
enum, written and read here, so the two commands never disagree on a key or a spelling; the
file is one anyone can edit, so reading it checks every value that reaches a YAML file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from dockergen import refs
from dockergen.errors import holds_secret, shown_value
from dockergen.files import atomic


class Status(str, Enum):
    """How far a build got (the record's ``status``; the value is what the JSON holds)."""

    STARTED = "started"
    FAILED = "failed"
    BUILT = "built"
    SMOKE_FAILED = "smoke-failed"
    PUSH_FAILED = "push-failed"
    PUSHED = "pushed"

    @property
    def deployable(self) -> bool:
        """Built and not failed its smoke tests: an image ``deploy`` may name."""
        return self in (Status.BUILT, Status.PUSH_FAILED, Status.PUSHED)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class StepCounts:
    """The build's steps as the engine reported them: counts and per-stage seconds."""

    steps: int
    cached_steps: int
    executed_steps: int
    stage_seconds: dict[str, float]
    cached_by_stage: dict[str, int]
    steps_by_stage: dict[str, int]


@dataclass(frozen=True)
class SmokeCheck:
    """One smoke test and its outcome."""

    name: str
    ok: bool
    detail: str = ""


FINAL_STAGE = "(final stage)"  # the record's ``target`` when the whole Dockerfile was built
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")
# the keys a record has from the build's first step on
_WRITTEN_FIRST = ("profile", "profile_hash", "builder", "tags", "immutable_tag", "target",
                  "status")
_REFERENCE = "an image reference like registry.example.com/llm/vllm:dg-<hash>"


@dataclass(frozen=True)
class PlatformImage:
    """One platform's image of a multi-platform build: the index lists its manifest."""

    platform: str  # "linux/arm64"
    tag: str  # the platform's own immutable tag (the index's tag + "-arm64")
    image_id: str
    digest: str | None = None  # its manifest's digest in the registry, once pushed


@dataclass(frozen=True)
class BuildRecord:
    """One build, as far as it got. ``stage`` is the intermediate stage built (``--target``),
    None for the image itself; ``smoke_not_run`` says why no smoke test ran, if none did."""

    profile: str
    profile_hash: str
    builder: str
    tags: tuple[str, ...]
    immutable_tag: str
    stage: str | None = None
    status: Status = Status.STARTED
    error: str | None = None
    image_id: str | None = None
    seconds: float | None = None
    counts: StepCounts | None = None
    smoke: tuple[SmokeCheck, ...] | None = None
    smoke_not_run: str | None = None
    pushed: dict[str, str] | None = None
    # after a push: each base image by digest (what the provenance names), and the
    # NAME@sha256 references cosign signed (``build --sign``)
    bases: dict[str, str] | None = None
    signed: tuple[str, ...] | None = None
    # a multi-platform build: each platform's image; ``pushed`` then names the index
    platforms: tuple[PlatformImage, ...] | None = None

    def as_json(self) -> dict[str, Any]:
        """The JSON object written: a key for each value the build got to."""
        data: dict[str, Any] = {
            "profile": self.profile, "profile_hash": self.profile_hash,
            "builder": self.builder, "tags": list(self.tags),
            "immutable_tag": self.immutable_tag, "target": self.stage or FINAL_STAGE,
            "status": self.status.value}
        optional = {"error": self.error, "image_id": self.image_id, "seconds": self.seconds,
                    "pushed": self.pushed, "bases": self.bases,
                    "signed": list(self.signed) if self.signed is not None else None}
        data.update((key, value) for key, value in optional.items() if value is not None)
        if self.counts is not None:
            data.update(vars(self.counts))
        if self.platforms is not None:
            data["platforms"] = [{k: v for k, v in vars(p).items() if v is not None}
                                 for p in self.platforms]
        if self.smoke is not None:
            data["smoke"] = [vars(check) for check in self.smoke]
        elif self.smoke_not_run is not None:
            data["smoke"] = self.smoke_not_run
        return data

    def write(self, path: Path) -> None:
        """Write the record atomically over an earlier record, never over another file."""
        atomic.write_file(path, json.dumps(self.as_json(), indent=2, sort_keys=True) + "\n",
                          ours=is_record)

    def pinned_image(self, repo: str) -> str | None:
        """``NAME@sha256:...`` of a pushed reference, one in ``repo`` (the profile's
        image) first; None when nothing was pushed."""
        if not self.pushed:
            return None
        first = sorted(self.pushed, key=lambda r: (refs.parse(r).name != repo, r))[0]
        return f"{refs.parse(first).name}@{self.pushed[first]}"


class RecordProblem(ValueError):
    """A value of a build record is not one ``dockergen build`` writes (``key``: where)."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


def is_record(head: bytes) -> bool:
    """``head`` (the start of a file) is a build record dockergen wrote."""
    try:
        data = json.loads(head)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and {"profile_hash", "immutable_tag", "status"} <= data.keys()


def read_record(data: object) -> BuildRecord:
    """The record a parsed ``build-record.json`` holds; raise :class:`RecordProblem` for a
    value ``dockergen build`` never writes. The references and digests are checked by the
    grammar (they are copied into the YAML ``deploy`` writes); the build's counts and smoke
    results, which nothing reads back, are not kept."""
    if not isinstance(data, dict):
        raise RecordProblem("(the file)", f"{type(data).__name__}, not a JSON object")
    for key in _WRITTEN_FIRST:
        if key not in data:
            raise RecordProblem(key, "missing (`dockergen build` writes it when it starts)")
    try:
        status = Status(data.get("status"))
    except ValueError:
        raise RecordProblem("status", f"{shown_value(str(data.get('status')))} is not one "
                            "`dockergen build` writes ("
                            + ", ".join(s.value for s in Status) + ")") from None
    tags = data.get("tags")
    if not isinstance(tags, list):
        raise RecordProblem("tags", f"{type(tags).__name__}, not a list of references")
    target = _string(data, "target")
    return BuildRecord(
        _string(data, "profile"), _string(data, "profile_hash"), _string(data, "builder"),
        status=status,
        tags=tuple(_reference(f"tags (entry {n})", t) for n, t in enumerate(tags, 1)),
        immutable_tag=_reference("immutable_tag", data.get("immutable_tag"), tag=True),
        stage=None if target == FINAL_STAGE else target,
        image_id=data.get("image_id") if isinstance(data.get("image_id"), str) else None,
        pushed=_digests("pushed", data.get("pushed"), True),
        bases=_digests("bases", data.get("bases"), False),
        platforms=_platforms(data.get("platforms")))


def _platforms(value: object) -> tuple[PlatformImage, ...] | None:
    """The per-platform images of a multi-platform record (their tags and digests are
    references and digests a reader may copy into YAML: checked like ``pushed``)."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise RecordProblem("platforms", "not a list of {platform, tag, image_id, digest}")
    out = []
    for n, entry in enumerate(value, 1):
        digest = entry.get("digest")
        if digest is not None and (not isinstance(digest, str)
                                   or not _SHA256.fullmatch(digest)):
            raise RecordProblem(f"platforms (entry {n})", f"the digest "
                                f"{shown_value(str(digest))} is not sha256:<64 hex>")
        platform, image_id = entry.get("platform"), entry.get("image_id")
        if not isinstance(platform, str) or not re.fullmatch(r"[a-z0-9]+/[a-z0-9_]+(/\w+)?",
                                                             platform):
            raise RecordProblem(f"platforms (entry {n})", f"{shown_value(str(platform))} is "
                                "not a platform such as linux/arm64")
        if not isinstance(image_id, str) or not _SHA256.fullmatch(image_id):
            raise RecordProblem(f"platforms (entry {n})", "the image_id is not sha256:<64 hex>")
        out.append(PlatformImage(platform, _reference(f"platforms (entry {n})",
                                                      entry.get("tag"), tag=True),
                                 image_id, digest))
    return tuple(out)


def _string(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise RecordProblem(key, f"{shown_value(str(value))} ({type(value).__name__}) is not "
                            "a string")
    return value


def _reference(key: str, ref: object, tag: bool | None = None) -> str:
    """One reference of the record: it goes into the YAML ``deploy`` writes as ``image:``."""
    if not isinstance(ref, str):
        raise RecordProblem(key, f"{shown_value(str(ref))} ({type(ref).__name__}) is not "
                            f"{_REFERENCE} (a string)")
    if holds_secret(ref):  # a registry login pasted into the reference
        raise RecordProblem(key, "a reference holds credentials (not shown); an image "
                            "reference never carries user:password@ (log in with "
                            "`docker login REGISTRY`)")
    if not refs.is_reference(ref, tag=tag, digest=False):
        raise RecordProblem(key, f"{shown_value(ref)} is not {_REFERENCE}")
    return ref


def _digests(key: str, value: object, references: bool) -> dict[str, str] | None:
    """A mapping of reference to ``sha256:`` digest: ``pushed`` (each reference checked,
    it reaches ``deploy``'s YAML) or ``bases`` (what ``verify --record`` compares with the
    provenance)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RecordProblem(key, f"{type(value).__name__}, not a mapping of reference "
                            "to digest")
    checked: dict[str, str] = {}
    for n, (ref, digest) in enumerate(value.items(), 1):
        shown = _reference(f"{key} (entry {n})", ref) if references else shown_value(str(ref))
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise RecordProblem(key, f"the digest of {shown} is "
                                f"{shown_value(str(digest))}, not sha256:<64 hex>")
        checked[str(ref)] = digest
    return checked


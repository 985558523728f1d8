"""Profiles (with matrices and locks) -> build contexts and one bake file.

This is what ``render``, ``validate`` and ``lock`` run: each profile file is either one
member or, with ``matrix:``, one member per valid point; base images are pinned from the
lock beside the profile (by resolution itself); the bake file lists every member as a bake
target.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from dockergen.errors import OutputError, Problem, ProfileError
from dockergen.files import inputs
from dockergen.files.owned import is_own_file
from dockergen.input.loader import Overrides
from dockergen.outputs.fleet import adapter, bake, locks
from dockergen.outputs.fleet.matrix import Dropped, Point, expand
from dockergen.pipeline import Resolution, resolution_of
from dockergen.resolve.model import Mode


@dataclass
class Member:
    """One rendered profile or matrix variant (one image; one bake target of the bake file)."""

    name: str
    group: str | None
    resolution: Resolution
    files: dict[str, bytes]
    source: str  # the profile file it comes from
    images: list[locks.BaseImage] = field(default_factory=list)


@dataclass
class Fleet:
    """Everything ``render``/``validate`` produce for a set of profile files."""

    members: list[Member] = field(default_factory=list)
    dropped: list[tuple[str, Dropped]] = field(default_factory=list)
    excluded: list[tuple[str, Point]] = field(default_factory=list)
    matrices: dict[str, list[str]] = field(default_factory=dict)  # source -> variant names

    def warnings(self) -> list[str]:
        """Warning lines, each once (variants of a matrix share most of them)."""
        return list(dict.fromkeys(str(w) for t in self.members
                                   for w in t.resolution.resolved.warnings))

    def dropped_lines(self) -> list[str]:
        return [line for _, d in self.dropped for line in d.lines()]


def base_images(res: Resolution) -> list[locks.BaseImage]:
    """The base images a resolved profile asks for, with where the profile says so."""
    return [locks.BaseImage(res.resolved.base.cuda.image, "cuda.devel_image",
                            res.at("cuda", "devel_image")),
            locks.BaseImage(res.resolved.runtime.image, "cuda.runtime_image",
                            res.at("cuda", "runtime_image"))]


def collect(paths: list[Path | adapter.RawProfile], overrides: Overrides = (),
            mode: Mode = "buildkit",
            syntax: str | None = None, *, pin: bool = True, render: bool = True,
            strict: bool = False) -> Fleet:
    """Resolve (and render) every profile and matrix variant; every problem at once.

    ``pin=False`` resolves without the lock (what ``lock`` itself needs: the unpinned refs);
    otherwise resolution pins the base images from it (dockergen/input/pins.py). A profile
    already read (:func:`dockergen.outputs.fleet.adapter.read_raw`) is not read again.
    """
    from dockergen.outputs.fleet.matrix import MatrixError

    fleet = Fleet()
    problems: list[Problem] = []
    for path in paths:
        try:
            raw = path if isinstance(path, adapter.RawProfile) else adapter.read_raw(path)
            if adapter.is_matrix(raw, overrides):
                exp = expand(raw, overrides, mode, pin=pin)
                fleet.matrices[raw.display] = [v.point.name for v in exp.variants]
                fleet.dropped += [(raw.display, d) for d in exp.dropped]
                fleet.excluded += [(raw.display, p) for p in exp.excluded]
                for v in exp.variants:
                    fleet.members.append(_member(v.resolution, exp.name, raw.display,
                                                 syntax, render))
                continue
            loaded = adapter.load_raw(raw, overrides)
            fleet.members.append(_member(resolution_of(loaded, mode, pin=pin), None,
                                         raw.display, syntax, render))
        except ProfileError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ProfileError(problems)
    if strict and fleet.dropped:
        raise MatrixError([d for _, d in fleet.dropped])
    return fleet


def _member(res: Resolution, group: str | None, source: str, syntax: str | None,
            render: bool) -> Member:
    """A fleet member of a resolved profile; ``render``: with its build context."""
    return Member(res.name, group, res, res.files(syntax) if render else {}, source,
                  base_images(res))


def bake_text(fleet: Fleet, single_context: bool,
              platforms: tuple[str, ...] | None = None) -> str:
    """The bake file: contexts ``.`` (one profile rendered into DIR) or ``<name>``; every
    target built for ``platforms`` (default: :data:`bake.PLATFORMS`), one index each."""
    bake_targets = [bake.bake_target_from(t.resolution, "." if single_context else t.name,
                                          t.group) for t in fleet.members]
    sources = sorted({os.path.basename(t.source) for t in fleet.members})
    return bake.to_hcl(bake.bake_data(bake_targets, platforms or None), sources)


def check_bake(fleet: Fleet) -> None:
    """The checks of :func:`bake_text` (cache refs, shared tags) without rendering: what
    `validate` runs, so that it never passes what `render -o` then refuses."""
    bake.check_bake_targets([bake.bake_target_from(t.resolution, t.name, t.group, content_tag=False)
                              for t in fleet.members])


def check_bake_destination(path: Path) -> None:
    """Refuse to replace a bake file dockergen did not write."""
    if not os.path.lexists(path):
        return
    if inputs.node_kind(path) is not None or path.is_dir():
        raise OutputError(f"{path}: is {inputs.node_kind(path) or 'a folder'}, not a file "
                          "dockergen wrote; move it away or choose another -o folder")
    if not is_own_file(path, lambda head: head.startswith(bake.HEADER.encode()),
                       len(bake.HEADER)):
        raise OutputError(f"{path}: exists and was not written by dockergen; move it "
                          "away or choose another -o folder")


def previous_variants(path: Path) -> list[str]:
    """The contexts an earlier bake file dockergen wrote at ``path`` points at."""
    if inputs.node_kind(path) is not None:  # a link, FIFO, device: not a bake file of ours
        return []
    try:
        return bake.contexts_of(inputs.read_bytes(path, "own-output").decode(
            "utf-8", errors="replace"))
    except (OSError, inputs.InputError):
        return []

"""What makes a file or a folder dockergen's own, before anything replaces it.

A folder is dockergen's while it holds nothing but what its :data:`MANIFEST` lists, of the
kind of output about to replace it; a single file is dockergen's when it is a regular file
its writer recognises from its first bytes (a generated header, a lock's format key).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

from dockergen.errors import OutputError
from dockergen.files import inputs

# The list of files in a folder dockergen wrote, with the kind of output it is: a re-run
# of the same kind replaces the folder only while it holds just those files (a build
# context's .dockerignore ignores everything, so the list never reaches a build).
MANIFEST = ".dockergen-files"
HEADER = "# Written by dockergen (kind: {kind}); its -o replaces this folder only while it " \
          "holds just these files.\n"
HEADER_RE = re.compile(r"# Written by dockergen \(kind: ([a-z-]+)\)")
# What each kind of folder is, for messages.
KINDS = {"context": "a build context (render -o, build -o)",
         "deploy": "run configurations (deploy --all -o)",
         "observe": "monitoring files (observe -o)"}

# (folder, the names a re-run writes there) -> whether a folder without a manifest, written
# before manifests existed, is dockergen's
Legacy = Callable[[Path, set[str]], bool]
# (the first bytes of an existing single-file output) -> whether dockergen wrote it
Ours = Callable[[bytes], bool]


def is_own_file(path: Path, ours: Ours, size: int = inputs.LIMITS["own-output"][0]) -> bool:
    """Whether ``path`` is a regular file (links followed) whose first ``size`` bytes
    ``ours`` recognises as output dockergen wrote (its generated header, a lock's format
    key): the one check of a file's ownership every writer makes before it replaces or
    takes along a file. Never fails: a FIFO, device, unreadable or missing file is not
    dockergen's. A writer that must also refuse a link checks
    :func:`dockergen.files.inputs.node_kind` first, to name what it found."""
    head = inputs.read_head(path, size)
    return head is not None and ours(head)


def holds_only(folder: Path, names: set[str]) -> bool:
    """Whether every file, link and empty folder below ``folder`` is one of ``names``
    (stops at the first other: a mistyped -o may point at a huge tree)."""
    return all(name in names for name in files_in(folder))


def manifest_bytes(kind: str, names: set[str]) -> bytes:
    """The manifest of a folder of ``kind`` that holds ``names`` (itself listed too)."""
    listing = sorted({*names, MANIFEST})
    return (HEADER.format(kind=kind) + "".join(f"{n}\n" for n in listing)).encode()


def check_owned(folder: Path, kind: str, names: set[str], legacy: Legacy | None = None
                ) -> None:
    """Raise :class:`OutputError` unless ``folder`` may be replaced by output of ``kind``
    that writes ``names``: it is empty, or holds only what its manifest lists and the
    manifest is of ``kind``, or ``legacy`` recognises it."""
    if not any(folder.iterdir()):
        return
    manifest = folder / MANIFEST
    if manifest.is_file() and inputs.node_kind(manifest) is None:  # not a link, FIFO...
        found, listed = _read_manifest(manifest)
        if found != kind:
            what = KINDS.get(found or "", "files of another kind")
            raise OutputError(f"{folder}: holds {what}, which dockergen wrote there; choose "
                              "another -o folder")
        foreign = _first_foreign(folder, listed)
        if foreign:
            raise OutputError(f"{folder}: holds files dockergen did not write "
                              f"({', '.join(foreign)}); move them out, or choose another "
                              "-o folder")
        return
    if legacy is not None and legacy(folder, names):
        return
    raise OutputError(f"{folder}: folder is not empty and was not written by dockergen; "
                      "choose an empty or new folder")


def files_in(folder: Path) -> Iterator[str]:
    """Files and links below ``folder``, and its empty folders (as ``name/``), lazily."""
    for root, dirs, names in os.walk(folder):
        base = Path(root).relative_to(folder)
        for name in names:
            yield (base / name).as_posix()
        for name in dirs:
            path = Path(root) / name
            if path.is_symlink():
                yield (base / name).as_posix()
            elif not any(path.iterdir()):
                yield (base / name).as_posix() + "/"
        dirs[:] = [d for d in dirs if not (Path(root) / d).is_symlink()]


def _first_foreign(folder: Path, listed: set[str], most: int = 5) -> list[str]:
    """Up to ``most`` names below ``folder`` the manifest does not list (stops early: a
    mistyped -o may point at a huge tree)."""
    foreign: list[str] = []
    for name in files_in(folder):
        if name not in listed:
            foreign.append(name)
            if len(foreign) > most:
                return [*sorted(foreign[:most]), "..."]
    return sorted(foreign)


def _read_manifest(path: Path) -> tuple[str | None, set[str]]:
    try:
        text = inputs.read_bytes(path, "own-output").decode("utf-8", errors="replace")
    except inputs.InputError:  # larger than any manifest dockergen writes: not one
        return None, set()
    match = HEADER_RE.match(text)
    return (match.group(1), set(text.splitlines()[1:])) if match else (None, set())

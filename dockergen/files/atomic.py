"""Atomic writes of generated output: a file, a folder, or sibling folders changed together.

Whatever fails or interrupts a write, the old output stays as it was or the new one is
complete; nothing half-written is left, and no temporary file or folder remains. A folder is
replaced only while it holds nothing but what dockergen wrote there, as its
:data:`MANIFEST` lists, so neither a mistyped ``-o`` nor a re-run deletes a user's file.
A single file is replaced only when it is a regular file its writer recognises as its
own (a generated header, a lock's format key); a link, device, FIFO or read-only output is
refused, never replaced.
"""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from dockergen.errors import OutputError, path_holds_secret, redact_path
from dockergen.files import inputs
from dockergen.files.owned import MANIFEST, Legacy, Ours, check_owned, is_own_file, manifest_bytes
from dockergen.files.swap import remove, signals_deferred, swap_all

_STDOUT_HINT = " (-o - writes to standard output)"
# outputs completely written by this process (see committed())
_COMMITTED: list[Path] = []


def write_file(path: Path, text: str, *, ours: Ours) -> None:
    """Write ``text`` to ``path`` through a temporary sibling, fsync and a rename.

    An existing ``path`` is replaced only when it is a regular file, not read-only, that
    ``ours`` recognises from its first bytes as output dockergen wrote (its generated
    header, a lock's format key); a link, device, FIFO, socket or another file is an
    :class:`~dockergen.errors.OutputError` naming it, and nothing changes. Missing
    folders are created; on any failure the old file (if any) is left as it was and no
    temporary file remains.
    """
    _check_shows_no_secret(path)
    try:
        blocker = _file_in_the_way(path)
        if blocker is not None:
            raise OutputError(f"{blocker}: is a file, not a folder; choose an -o path that is "
                              "not inside a file")
        mode = _check_replaceable_file(path, ours)
        if path.parent.exists():
            _check_writable(path.parent)
        made = _missing_top(path.parent)
    except OSError as exc:
        raise OutputError(f"{path}: cannot create: {exc.strerror}; choose a writable "
                          "path") from None
    tmp, done = _staging_name(path.parent, path.name), False
    try:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fh = os.fdopen(_create_new(tmp), "w", encoding="utf-8")
        except OSError as exc:
            raise OutputError(f"{path}: cannot create: {exc.strerror}; choose a writable "
                              "path") from None
        with fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)  # created 0600: the team must read generated files
        with signals_deferred():
            os.replace(tmp, path)
            _COMMITTED.append(path)  # before a held signal arrives
            done = True
    except OSError as exc:
        raise OutputError(f"{path}: cannot write: {exc.strerror}; nothing was changed"
                          ) from None
    finally:
        remove(tmp)
        if not done:
            _unmake(path.parent, made)


def open_new(path: Path) -> TextIO:
    """A new file for output written as it comes (a build log): created here, never
    through a link or over anything that is there (``O_EXCL``, ``O_NOFOLLOW``)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise OutputError(f"{path}: cannot create: {exc.strerror}; it is left as it is"
                          ) from None
    return os.fdopen(fd, "w", encoding="utf-8")


def _check_replaceable_file(path: Path, ours: Ours) -> int:
    """Raise unless ``path`` is absent or a writable regular file ``ours`` recognises;
    the permission bits the new file gets (the old file's, or 0644)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return 0o644
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{path}: is a folder; choose a file path")
    kind = inputs.node_kind(path)
    if kind is not None:
        raise OutputError(f"{path}: is {kind}, not a file dockergen wrote; it is left as it "
                          f"is; choose another -o path{_STDOUT_HINT}")
    if not is_own_file(path, ours):
        raise OutputError(f"{path}: exists and was not written by dockergen; move it away or "
                          "choose another -o path")
    if not st.st_mode & 0o200:
        raise OutputError(f"{path}: is read-only (mode {stat.S_IMODE(st.st_mode):o}); make "
                          "it writable (chmod u+w) to let dockergen replace it, or choose "
                          "another -o path")
    return stat.S_IMODE(st.st_mode)


def _check_writable(folder: Path) -> None:
    """Raise when ``folder``'s mode says nobody may change it: root could, but a read-only
    folder (chmod 555) is its owner saying no."""
    mode = folder.stat().st_mode
    if not mode & 0o200:
        raise OutputError(f"{folder}: is read-only (mode {stat.S_IMODE(mode):o}); make it "
                          "writable (chmod u+w) to let dockergen write there, or choose "
                          "another -o path")
    if not os.access(folder, os.W_OK):
        raise OutputError(f"{folder}: is not writable for this user (mode "
                          f"{stat.S_IMODE(mode):o}); choose another -o path")


def committed() -> list[Path]:
    """Every output this process has completely written so far (files and folders), in
    order: what an interrupt that comes afterwards must not be reported as undoing."""
    return list(_COMMITTED)


def write_folder(out_dir: Path, files: dict[str, bytes], *, kind: str,
                 later: tuple[str, ...] = (), legacy: Legacy | None = None) -> None:
    """Write a folder of generated files (names may hold '/') as one change.

    The files and their manifest are written to a temporary sibling folder which then
    replaces ``out_dir``. An existing ``out_dir`` is replaced only when it is empty, or
    its manifest says dockergen wrote it as the same ``kind`` and it holds nothing else
    (``later``: files the caller writes into it afterwards, such as a build record), or
    ``legacy`` recognises it.
    """
    try:
        out_dir = real_folder(out_dir)
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot read: {exc.strerror}; choose another -o path"
                          ) from None
    write_folders(out_dir.parent, {out_dir.name: files}, kind=kind, later=later,
                  legacy=legacy)


def write_folders(parent: Path, folders: dict[str, dict[str, bytes]], *, kind: str,
                  top: dict[str, bytes] | None = None, retired: tuple[str, ...] = (),
                  later: tuple[str, ...] = (), legacy: Legacy | None = None,
                  top_ours: Callable[[Path], None] | None = None) -> None:
    """Write sibling folders ``parent/<name>/`` and files ``parent/<file>`` as one change.

    Every destination is checked (as :func:`write_folder` does) and everything is staged
    before anything is replaced; then, with SIGINT/SIGTERM held, each folder is swapped in
    and each top file replaced, and any failure puts back what was there. ``retired``
    names folders of an earlier run that this one no longer writes: they go with the
    change when their manifest shows them as dockergen's, and stay otherwise.
    ``top_ours(path)`` raises when an existing top file is not dockergen's.
    """
    top = top or {}
    for name in (*folders, *top):
        _check_shows_no_secret(parent / name)
    parent, modes, gone = _check_destinations(parent, folders, top, kind=kind,
                                              retired=retired, later=later, legacy=legacy,
                                              top_ours=top_ours)
    staged: list[tuple[Path, Path]] = []  # (staging, destination)
    made, done = _missing_top(parent), False
    try:
        _stage_all(parent, folders, top, modes, kind, later, staged)
        with signals_deferred():
            swap_all(parent, staged, gone)
            _COMMITTED.extend(dest for _, dest in staged)  # before a held signal arrives
            done = True
    finally:
        for staging, _ in staged:
            remove(staging)
        if not done:  # "nothing was changed" includes the folders made for the change
            _unmake(parent, made)


def _check_destinations(parent: Path, folders: dict[str, dict[str, bytes]],
                        top: dict[str, bytes], *, kind: str, retired: tuple[str, ...],
                        later: tuple[str, ...], legacy: Legacy | None,
                        top_ours: Callable[[Path], None] | None
                        ) -> tuple[Path, dict[str, int], list[Path]]:
    """Raise unless every destination of :func:`write_folders` may be replaced; the real
    ``parent``, the permissions of the folders replaced, and the retired folders to go."""
    try:
        parent = real_folder(parent)
        blocker = _file_in_the_way(parent / "x")
        if blocker is not None:
            raise OutputError(f"{blocker}: is a file, not a folder; choose an -o folder that "
                              "is not inside a file")
        if parent.exists():
            _check_writable(parent)
        modes = _check_destination_folders(parent, folders, kind, later, legacy)
        _check_top_files(parent, top, top_ours)
        gone = [parent / name for name in retired if _owned_quietly(parent / name, kind)]
    except OSError as exc:
        raise OutputError(f"{parent}: cannot read: {exc.strerror}; choose another -o path"
                          ) from None
    return parent, modes, gone


def _check_destination_folders(parent: Path, folders: dict[str, dict[str, bytes]], kind: str,
                               later: tuple[str, ...], legacy: Legacy | None
                               ) -> dict[str, int]:
    """Raise unless each folder of ``folders`` under ``parent`` is absent or replaceable;
    the permissions of those that exist."""
    modes: dict[str, int] = {}  # a replaced folder's permissions stay as they were
    for name, files in folders.items():
        dest = parent / name
        if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
            raise OutputError(f"{dest}: exists and is {inputs.node_kind(dest) or 'a file'}"
                              ", not a folder; it is left as it is; choose another -o "
                              "path")
        if dest.exists():
            check_owned(dest, kind, {*files, *later}, legacy)
            _check_writable(dest)
            modes[name] = stat.S_IMODE(dest.stat().st_mode)
    return modes


def _check_top_files(parent: Path, top: dict[str, bytes],
                     top_ours: Callable[[Path], None] | None) -> None:
    """Raise unless each file of ``top`` under ``parent`` is absent or dockergen's."""
    for name in top:
        kind_there = inputs.node_kind(parent / name)
        if kind_there is not None:
            raise OutputError(f"{parent / name}: is {kind_there}, not a file dockergen "
                              "wrote; it is left as it is; choose another -o folder")
        if top_ours is not None:
            top_ours(parent / name)


def _stage_all(parent: Path, folders: dict[str, dict[str, bytes]], top: dict[str, bytes],
               modes: dict[str, int], kind: str, later: tuple[str, ...],
               staged: list[tuple[Path, Path]]) -> None:
    """Stage every folder and top file of :func:`write_folders` beside its destination,
    appending each (staging, destination) to the caller's ``staged``, which the caller
    removes whatever happens here."""
    try:
        parent.mkdir(parents=True, exist_ok=True)
        # each staging name is recorded before it is created: an interrupt at any
        # moment leaves nothing that the clean-up in write_folders does not know of
        for name, files in folders.items():
            staging = _staging_name(parent, name)
            staged.append((staging, parent / name))
            _stage(staging, files, kind, later)
            staging.chmod(modes.get(name, 0o755))
        for name, data in top.items():
            tmp = _staging_name(parent, name)
            staged.append((tmp, parent / name))
            with os.fdopen(_create_new(tmp), "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o644)
    except OSError as exc:
        raise OutputError(f"{parent}: cannot write: {exc.strerror}; nothing was changed"
                          ) from None


# the longest file name most file systems take (NAME_MAX of ext4, XFS, btrfs, tmpfs)
NAME_MAX = 255
# a staging sibling adds "." + "." + 12 hex digits to the name it stages (_staging_name)
_STAGING_EXTRA = 14


def _check_shows_no_secret(path: Path) -> None:
    """Refuse an output path shaped like a credential: it is printed ("wrote PATH"), and
    the folder names of a build context reach its bake file. Refuse as well a name that is
    not UTF-8 (it is printed and written into manifests and bake files, which are UTF-8)
    or one too long to stage beside itself."""
    text = str(path)
    if path_holds_secret(text):
        raise OutputError(f"{redact_path(text)}: looks like it holds a credential; it "
                          "is left as it is; choose an -o path without a token in it")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are no UTF-8, kept by the OS as surrogates
        shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise OutputError(f"{shown}: the name is not UTF-8; it is left as it is; choose an "
                          "-o path in UTF-8") from None
    if len(path.name.encode()) + _STAGING_EXTRA > NAME_MAX:
        raise OutputError(f"{path.name[:40]}...: a name of {len(path.name.encode())} bytes, "
                          f"over the {NAME_MAX - _STAGING_EXTRA} an output may have (its "
                          f"staging copy adds {_STAGING_EXTRA} within the file system's "
                          f"{NAME_MAX}); choose a shorter -o name")


def real_folder(path: Path) -> Path:
    """The folder an -o path names, links followed: a link is followed only to a folder
    (a dangling link, a loop or a link to a file is not a place to create one)."""
    real = Path(os.path.realpath(path))  # Path.resolve raises RuntimeError on a link loop
    if os.path.islink(path) and not real.is_dir():
        raise OutputError(f"{path}: is a symbolic link to {os.readlink(path)}, which is not a "
                          "folder; it is left as it is; choose another -o path")
    return real


def _owned_quietly(folder: Path, kind: str) -> bool:
    """``folder`` exists and its manifest shows it as dockergen's, of ``kind``."""
    if not folder.is_dir() or folder.is_symlink():
        return False
    try:
        check_owned(folder, kind, set())
        _check_writable(folder)
    except OutputError:
        return False
    return (folder / MANIFEST).is_file()


def _missing_top(folder: Path) -> Path | None:
    """The highest of ``folder`` and its parents that does not exist yet (None: it does)."""
    top = None
    for path in (folder, *folder.parents):
        if os.path.lexists(path):
            break
        top = path
    return top


def _unmake(folder: Path, top: Path | None) -> None:
    """Remove the folders a failed change created, ``folder`` up to ``top``, while empty."""
    if top is None:
        return
    for path in (folder, *folder.parents):
        try:
            os.rmdir(path)
        except OSError:
            return
        if path == top:
            return


def _file_in_the_way(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` when it is not a folder."""
    for parent in path.parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def _staging_name(parent: Path, name: str) -> Path:
    """A fresh hidden sibling name for staging ``name``, chosen before anything is created
    so that the caller can record it for clean-up first (a random part: a leftover of a
    crashed run never blocks)."""
    return parent / f".{name}.{uuid.uuid4().hex[:12]}"


def _create_new(path: Path) -> int:
    """A new private file at ``path`` (never through a link or over anything there)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags, 0o600)


def _stage(staging: Path, files: dict[str, bytes], kind: str, later: tuple[str, ...]
           ) -> None:
    """Create the folder ``staging`` holding ``files`` and their manifest; the caller has
    recorded ``staging`` and removes it whatever happens here."""
    os.mkdir(staging, 0o700)
    manifest = manifest_bytes(kind, {*files, *later})
    for rel, data in {**files, MANIFEST: manifest}.items():
        dest = staging / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        with open(dest, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    staging.chmod(0o755)

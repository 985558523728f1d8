"""The one reader of files given to dockergen: each must be a regular file of bounded size.

Every file a user hands over (a profile and its parents, knowledge files, CA certificates,
model configs and safetensors headers, build records, base-image and Python locks, the
docker config) and every file dockergen reads back from an output path to decide whether
it is its own is opened here, once. A device (``/dev/zero``), a FIFO, a socket or a folder
is refused before it is opened, so nothing blocks or reads without end; a file larger than
the limit of its kind (:data:`LIMITS`, listed in docs/commands.md) is refused before it is read;
a symbolic link loop or a dangling link is named as such. Each refusal is an
:class:`InputError` that says which file, what is wrong and what to do; callers turn it
into the error of their command (a located profile problem, a plan or deploy error).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from dockergen.errors import DockergenError, ExitCode, path_holds_secret, redact_path

_MIB = 1 << 20

# kind -> (the most bytes read, what such a file is). One table: the messages and the
# "Input limits" list of docs/commands.md come from it (tests/unit/input/test_hostile_files.py
# compares them).
LIMITS: dict[str, tuple[int, str]] = {
    "profile": (4 * _MIB, "a profile, a parent it extends, or a knowledge file"),
    "certificate": (4 * _MIB, "a CA certificate (PEM; a whole CA bundle fits)"),
    "model-config": (16 * _MIB, "a model's config.json (--model-config, serving.hf_config, "
                                "--model-dir)"),
    # the format's own bound: "the header ... is limited to 100MB" (safetensors README)
    "safetensors-header": (8 + 100_000_000, "a safetensors header (its 8-byte length and "
                                            "JSON; the tensors are never read)"),
    "public-key": (1 * _MIB, "a signature's public key (--require-signature, PEM)"),
    "record": (4 * _MIB, "a build record (--record, build-record.json)"),
    "lock": (16 * _MIB, "a base-image lock (PROFILE.lock.json) or a Python lock "
                        "(PROFILE.python.lock)"),
    "docker-config": (4 * _MIB, "the docker config (~/.docker/config.json)"),
    "netrc": (1 * _MIB, "the netrc file of index credentials ($NETRC or ~/.netrc)"),
    "own-output": (16 * _MIB, "a file dockergen wrote and reads back to recognise its own "
                              "output (manifest, bake file, lock, generated header)"),
}


_BIGGER_FIX = ('give the right file (docs/commands.md, "Input limits", lists what each kind may '
               "hold)")


class InputError(DockergenError, code=ExitCode.INVALID_PROFILE):
    """A file given to dockergen cannot be read as one: ``path``, ``problem``, ``fix``."""

    def __init__(self, path: Path, problem: str, fix: str) -> None:
        self.path, self.problem, self.fix = path, problem, fix
        super().__init__(f"{path}: {problem}; {fix}")


def size_text(limit: int) -> str:
    """A limit as people read it: ``4 MiB``, ``100000008 bytes``."""
    return f"{limit // _MIB} MiB" if limit % _MIB == 0 else f"{limit} bytes"


def _kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def node_kind(path: Path) -> str | None:
    """What ``path`` itself is when it is not a regular file (links not followed): ``a
    symbolic link``, ``a FIFO (named pipe)``...; None for a regular file or no file."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    return None if stat.S_ISREG(st.st_mode) else _kind_of(st.st_mode)


def _refusal(path: Path, exc: OSError) -> InputError:
    """An open or stat that failed, in words (a missing file is the caller's to word)."""
    if exc.errno == errno.ELOOP:
        return InputError(path, "is a symbolic link loop (or a chain of more than 40 links)",
                          "point the link at a regular file, or give the file's own path")
    if exc.errno == errno.ENOENT:
        points_to = os.readlink(path) if os.path.islink(path) else "?"
        return InputError(path, f"is a symbolic link to {points_to}, which does not exist",
                          "point the link at a regular file, or give the file's own path")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return InputError(path, "cannot be read: permission denied",
                          "make it readable (chmod u+r), or give a copy you can read")
    return InputError(path, f"cannot be opened: {exc.strerror or exc}",
                      "give the path of a readable regular file")


def _is_missing(path: Path, exc: OSError) -> bool:
    return exc.errno == errno.ENOENT and not os.path.islink(path)


@contextlib.contextmanager
def open_input(path: Path, kind: str) -> Iterator[tuple[BinaryIO, int]]:
    """Open ``path`` for reading as a regular file: ``(binary file, its size)``; the
    caller reads at most the limit of ``kind`` (a safetensors shard is larger than the
    header read of it).

    A missing file raises :class:`FileNotFoundError` (callers word that one); anything
    else that is wrong is an :class:`InputError`. Devices, FIFOs and sockets are refused
    from ``stat`` alone, before any open that could block or act on a device; the open is
    non-blocking and its ``fstat`` must show the same regular file (no swap in between).
    """
    if path_holds_secret(str(path)):  # input names reach headers, bake files, messages
        raise InputError(Path(redact_path(str(path))), "its path looks like it holds a "
                         "credential, and dockergen writes the names of the files it reads "
                         "into its output",
                         "rename the file (or its folder) so that no token is part of it")
    try:
        before = os.stat(path)
    except OSError as exc:
        if _is_missing(path, exc):
            raise
        raise _refusal(path, exc) from None
    if not stat.S_ISREG(before.st_mode):
        raise InputError(path, f"is {_kind_of(before.st_mode)}, not a regular file",
                         "give the path of a regular file")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if _is_missing(path, exc):
            raise
        raise _refusal(path, exc) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
        os.close(fd)
        raise InputError(path, "changed while it was opened", "give a file nothing else is "
                                                              "replacing, and run again")
    with os.fdopen(fd, "rb") as fh:
        yield fh, st.st_size


def read_bytes(path: Path, kind: str) -> bytes:
    """The whole of ``path`` (a regular file of at most the limit of ``kind``).

    Reads at most one byte past the limit, also for files whose size ``stat`` does not
    tell (``/proc`` files report 0), so no file can make this read without end.
    """
    limit, what = LIMITS[kind]
    try:
        with open_input(path, kind) as (fh, size):
            if size > limit:
                raise InputError(path, f"is {size} bytes, more than the {size_text(limit)} "
                                 f"dockergen reads of {what}", _BIGGER_FIX)
            data = fh.read(limit + 1)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise _refusal(path, exc) from None  # EISDIR, EIO: reading failed after the open
    if len(data) > limit:
        raise InputError(path, f"is more than the {size_text(limit)} dockergen reads of "
                         f"{what}", _BIGGER_FIX)
    return data


def read_text(path: Path, kind: str) -> str:
    """The whole of ``path`` as UTF-8 text (see :func:`read_bytes`)."""
    data = read_bytes(path, kind)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise InputError(path, f"is not UTF-8 text (byte 0x{data[exc.start]:02x} on line "
                         f"{line})", "save it as UTF-8") from None


def read_head(path: Path, size: int, kind: str = "own-output") -> bytes | None:
    """The first ``size`` bytes of a regular file, or None when ``path`` is anything else
    or cannot be read: for checks whether a file is dockergen's own, which must not fail."""
    try:
        with open_input(path, kind) as (fh, _):
            return fh.read(size)
    except (OSError, InputError):
        return None


def loads_json(data: bytes | str) -> Any:
    """``json.loads``, with nesting too deep for the parser a ValueError like any other
    malformed JSON (it was a RecursionError that escaped every caller's handler)."""
    import json

    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deep") from None

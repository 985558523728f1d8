"""Atomic writes of one generated file: all of it or nothing, never a half-written file.

May import: :mod:`dockergen.errors`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from dockergen.errors import OutputError

# The list of files in a folder dockergen wrote (render -o, deploy --all -o), so that a
# re-run replaces only those (dockergen.render.write_folder). A build context's
# .dockerignore ignores everything, so the list never reaches a build.
MANIFEST = ".dockergen-files"


def _file_in_the_way(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` when it is not a folder."""
    for parent in path.parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def write_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary sibling, fsync and a rename.

    Missing folders are created; on any failure the old file (if any) is left as it was
    and no temporary file remains. Errors are :class:`~dockergen.errors.OutputError`.
    """
    try:
        blocker = _file_in_the_way(path)
        if blocker is not None:
            raise OutputError(f"{blocker}: is a file, not a folder; choose an -o path that is "
                              "not inside a file")
        if path.is_dir():
            raise OutputError(f"{path}: is a folder; choose a file path")
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise OutputError(f"{path}: cannot create: {exc.strerror}; choose a writable "
                          "path") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide generated files from the team
        os.replace(tmp, path)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write: {exc.strerror}; nothing was changed"
                          ) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)

"""Which file a profile argument or an ``extends:`` name stands for, and how a path is shown.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from dockergen.errors import Location, Problem, ProfileError
from dockergen.resources import profiles_dir


def display_path(path: Path) -> str:
    """A path as the user should see it: relative to the working directory if inside."""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


# a parent profile's file name without .yaml: no folder, no leading dot, no control
# characters (names land in the Dockerfile's header comments)
_PARENT = re.compile(r"[^/.\x00-\x1f\x7f][^/\x00-\x1f\x7f]{0,254}")


def find_parent(name: str, child: Path, loc: Location) -> Path:
    """The file of the parent profile ``name`` that ``child`` extends: beside it, else
    a shipped profile; a ProfileError at ``loc`` when neither exists."""
    if not _PARENT.fullmatch(name):
        raise ProfileError([Problem(loc, "extends", f"{name!r} is not a profile name",
                                    "use the name of a profile without .yaml, e.g. base")])
    for folder in (child.parent, profiles_dir()):
        candidate = folder / f"{name}.yaml"
        # anything of that name is the parent (a FIFO or a link loop is refused when read,
        # by its name); realpath, unlike Path.resolve, does not raise on a link loop
        if os.path.lexists(candidate):
            real = Path(os.path.realpath(candidate))
            return real if real.exists() else candidate.absolute()
    shipped = sorted(p.stem for p in profiles_dir().glob("*.yaml"))
    raise ProfileError([Problem(loc, "extends", f"no profile named {name!r} next to "
                                f"{display_path(child)} or among the shipped profiles",
                                "use one of: " + ", ".join(shipped))])


_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def locate_profile(path: Path) -> Path:
    """A profile file by path, or by the name of a shipped profile (``h100-fp8``).

    Names work wherever a path does, also after a plain ``pip install`` where the shipped
    profiles live inside site-packages. An existing file of that name wins.
    """
    text = str(path)
    if _CONTROL.search(text):  # the name is written into the Dockerfile's header comments
        raise ProfileError([Problem(Location(repr(text)[1:-1]), "", "the file name holds a "
                                    "control character (a newline, a tab...)",
                                    "rename the file to letters, digits, '-', '_' and '.'")])
    try:
        exists = path.exists() or path.is_symlink()  # a dangling link or a loop is named
    except OSError as exc:  # e.g. ENAMETOOLONG: exists() only absorbs "no such file"
        raise ProfileError([Problem(Location(text[:80] + "..."), "",
                                    f"cannot read the file: {exc.strerror}",
                                    "give a shorter path")]) from None
    if exists or not _NAME.fullmatch(text):
        return path
    shipped = profiles_dir() / f"{text}.yaml"
    if shipped.is_file():
        return shipped
    names = ", ".join(sorted(p.stem for p in profiles_dir().glob("*.yaml")))
    raise ProfileError([Problem(Location(text), "", "no such file, and no shipped profile of "
                                "that name", f"give a path, or one of: {names}")])


def profile_file(path: Path) -> Path:
    """The file a profile argument names (:func:`locate_profile`), links followed.

    ``realpath``, not ``Path.resolve``: that raises RuntimeError on a link loop. A dangling
    link or a loop is kept as given, so that reading it names it.
    """
    located = locate_profile(path)
    resolved = Path(os.path.realpath(located))
    if not resolved.exists() and located.is_symlink():
        return located.absolute()
    return resolved

"""File ownership of a locked Python closure, before any build.

uv and pip install two wheels that write the same path without a word, and the last one
wins: the image then holds a file of one distribution where the other expects its own.
Here every artifact of a Python lock (``dockergen lock --python``) is found on the index it
came from (uv's ``# from`` annotation; the file whose sha256 the lock pins), its
``.dist-info/RECORD`` is read by HTTP range requests (the zip directory and that one member,
not the wheel), and a path two distributions list is an error naming both and the path. The
known, harmless cases are facts with their source (``python.yaml`` ``shared_files``); the
image's smoke check reads the installed RECORD files and applies the same list.
"""

from __future__ import annotations

import csv
import io
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from dockergen.errors import DockergenError, ExitCode
from dockergen.knowledge import facts as knowledge
from dockergen.net import index as outdated_index

# RECORD files read at once (each is one or two range requests)
WORKERS = 8
_ENTRY = re.compile(r"^([A-Za-z0-9_.-]+)==(\S+) \\\n((?:\s+--hash=sha256:[0-9a-f]{64}.*\n)+)"
                    r"(?:.*\n)*?\s+# from (\S+)", re.M)


class OwnershipError(DockergenError, code=ExitCode.INVALID_PROFILE):
    """Two distributions of the closure write the same file."""


def locked(text: str) -> list[tuple[str, str, set[str], str]]:
    """(name, version, sha256 hashes, index) of every artifact of a lock's text."""
    return [(m.group(1), m.group(2), set(re.findall(r"sha256:([0-9a-f]{64})", m.group(3))),
             m.group(4)) for m in _ENTRY.finditer(text)]


def _record(name: str, version: str, hashes: set[str], index: str) -> list[str] | None:
    """The paths a locked wheel installs (its RECORD), or None when the index holds no
    wheel with a locked hash (an sdist: its files are known only once it is built)."""
    found = [f for f in outdated_index.files(index, name)
             if f.sha256 in hashes and f.name.endswith(".whl")]
    if not found:
        return None
    text = outdated_index.wheel_member(found[0].url, r"[^/]+\.dist-info/RECORD", found[0].name)
    return record_paths(text, found[0].name)


def record_paths(text: str, shown: str) -> list[str]:
    """The paths a RECORD lists, less the wheel's own ``.dist-info`` folder (named after
    its distribution: never shared); :class:`outdated_index.IndexReadError` for a RECORD that is
    no CSV (a field past csv's limit, an unclosed quote at its end)."""
    try:
        paths = [row[0] for row in csv.reader(io.StringIO(text)) if row]
    except csv.Error as exc:
        raise outdated_index.IndexReadError(f"{shown}: its RECORD is not CSV ({exc})") from None
    return [p for p in paths if not p.split("/", 1)[0].endswith(".dist-info")]


@dataclass(frozen=True)
class Owners:
    """What the RECORDs of a lock's wheels say."""

    shared: dict[str, list[str]]  # path -> the distributions that write it (two or more)
    unchecked: list[str]  # name==version of artifacts with no wheel on their index


def read(text: str) -> Owners:
    """The paths two or more distributions of the lock write, less the known harmless
    cases (python.yaml shared_files), and what could not be read."""
    entries = locked(text)
    with ThreadPoolExecutor(WORKERS) as pool:
        records = list(pool.map(lambda e: _record(*e), entries))
    owners: dict[str, list[str]] = {}
    for (name, _, _, _), paths in zip(entries, records, strict=True):
        for path in paths or ():
            owners.setdefault(path, []).append(name)
    allowed = {(a["path"], tuple(sorted(a["dists"])))
               for a in knowledge.facts().python["shared_files"]}
    shared = {path: sorted(names) for path, names in sorted(owners.items())
              if len(names) > 1 and (path, tuple(sorted(_norm(n) for n in names))) not in allowed}
    return Owners(shared, [f"{name}=={version}" for (name, version, _, _), paths
                           in zip(entries, records, strict=True) if paths is None])


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def check(text: str) -> list[str]:
    """Raise :class:`OwnershipError` naming every path two distributions of the lock write;
    return the artifacts that could not be checked (sdists)."""
    found = read(text)
    shared = found.shared
    if shared:
        by_pair: dict[tuple[str, ...], list[str]] = {}
        for path, names in shared.items():
            by_pair.setdefault(tuple(names), []).append(path)
        lines = [f"{' and '.join(pair)} both write {', '.join(paths[:5])}"
                 + (f" (and {len(paths) - 5} more)" if len(paths) > 5 else "")
                 for pair, paths in sorted(by_pair.items())]
        raise OwnershipError("the Python closure has files owned by two distributions (the "
                             "one installed last would silently win): " + "; ".join(lines)
                             + "; pin, in packages.pip, a version of one of them that does "
                             "not ship the other's files (e.g. a cuda-python that depends on "
                             "cuda-bindings instead of carrying it), or move to a release "
                             "whose closure has only one; a shared file that is harmless "
                             "belongs in python.yaml shared_files with its source")
    return found.unchecked

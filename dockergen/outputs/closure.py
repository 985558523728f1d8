"""Every distribution of a locked Python closure installs on the image's Python and machine.

``uv pip compile --python-platform P --python-version V`` resolves a closure from metadata:
it locks a release whose only artifact for P is its sdist as readily as one with a wheel,
and the engine stage then compiles that sdist, an hour into the build, with whatever
toolchain the build image has. Here each pinned distribution's files on the index it came
from (uv's ``# from`` annotation; the simple API through :mod:`dockergen.net.http`) are matched
against the tags the image's interpreter accepts (``packaging.tags`` for CPython V on P's
manylinux glibc and machine: the target's tags, never the host's):

* a wheel with one of those tags, among the hashes the lock pins: installs as is;
* none, while the release has wheels for other platforms or Pythons: its code is compiled,
  so its sdist needs that code's toolchain: an error naming the distribution, the version,
  what is missing, and the fixes found on the index (a release of it with such a wheel,
  a Python its wheels cover);
* none at all (sdist only): a pure-Python sdist, built in the engine stage (reported).
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from dockergen.errors import DockergenError, ExitCode
from dockergen.net import index as outdated_index
from dockergen.outputs.owners import WORKERS, locked

# PEP 600 manylinux_2_X tags and the legacy aliases pip still accepts for them (PEP 599,
# PEP 571, PEP 513: manylinux2014 = 2.17, manylinux2010 = 2.12, manylinux1 = 2.5; the
# legacy ones only for x86_64/i686, manylinux2014 also for aarch64)
_LEGACY = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
_PLATFORM = re.compile(r"(x86_64|aarch64)-manylinux_2_([0-9]+)")
# the CPython minors whose wheels a fix may point at
_PYTHONS = tuple(f"3.{m}" for m in range(9, 16))


class ClosureError(DockergenError, code=ExitCode.INVALID_PROFILE):
    """A distribution of the closure has no wheel for the image's Python and machine."""


def platform_tags(platform: str) -> list[str]:
    """The wheel platform tags an image of ``platform`` (``aarch64-manylinux_2_35``, uv's
    --python-platform) installs, the most specific first."""
    m = _PLATFORM.fullmatch(platform)
    if m is None:
        raise ValueError(f"not a manylinux platform: {platform}")
    machine, glibc = m.group(1), int(m.group(2))
    tags = []
    for minor in range(glibc, 4, -1):
        tags.append(f"manylinux_2_{minor}_{machine}")
        legacy = _LEGACY.get(minor)
        if legacy and (machine == "x86_64" or legacy == "manylinux2014"):
            tags.append(f"{legacy}_{machine}")
    return tags


def target_tags(python: str, platform: str) -> frozenset[Tag]:
    """Every tag CPython ``python`` (``3.12``) on ``platform`` accepts."""
    version = tuple(int(x) for x in python.split(".")[:2])
    plats = platform_tags(platform)
    return frozenset([*cpython_tags(version, platforms=plats),
                      *compatible_tags(version, f"cp{version[0]}{version[1]}", plats)])


@dataclass(frozen=True)
class Verdict:
    """What one locked distribution has for the target."""

    name: str
    version: str
    kind: str  # "wheel", "sdist" (source only, pure Python), "missing" (compiled, no wheel)
    detail: str = ""  # for "missing": what the release has, and the fixes


def _wheel_tags(filename: str) -> frozenset[Tag]:
    try:
        return frozenset(parse_wheel_filename(filename)[3])
    except InvalidWheelFilename:
        return frozenset()


def judge(name: str, version: str, hashes: set[str], files: list[outdated_index.IndexFile],
          python: str, platform: str) -> Verdict:
    """The verdict on one locked distribution from its project's files on the index."""
    tags = target_tags(python, platform)
    mine = [f for f in files if str(f.version) == version or f.version.public == version]
    wheels = [f for f in mine if f.name.endswith(".whl")]
    # the wheel the lock pins (by its hash); an index that lists no hashes (PEP 503 allows
    # it) cannot say which file the lock's hash is, so a wheel for the target counts
    if any((f.sha256 in hashes or not f.sha256) and _wheel_tags(f.name) & tags for f in wheels):
        return Verdict(name, version, "wheel")
    if not wheels:
        return Verdict(name, version, "sdist")
    return Verdict(name, version, "missing", f"its wheels are for {_covered(wheels)}; "
                   + _fixes(name, version, files, python, platform))


def _covered(wheels: list[outdated_index.IndexFile]) -> str:
    """What a release's wheels cover, in words: its interpreters, then its platforms."""
    tags = {t for f in wheels for t in _wheel_tags(f.name)}
    interpreters = sorted({t.interpreter for t in tags}, key=_interpreter_key)
    platforms = sorted({t.platform for t in tags})
    shown = ", ".join(platforms[:4]) + (" and more" if len(platforms) > 4 else "")
    return f"{', '.join(interpreters)} on {shown}"


def _interpreter_key(tag: str) -> tuple[str, int]:
    digits = re.sub(r"\D", "", tag)
    return re.sub(r"\d", "", tag), int(digits) if digits else 0


def _fixes(name: str, version: str, files: list[outdated_index.IndexFile], python: str,
           platform: str) -> str:
    """The changes that would find a wheel: another release of the distribution (the
    closest first), another Python for this release."""
    tags = target_tags(python, platform)
    fit = sorted({f.version for f in files if f.name.endswith(".whl")
                  and not f.version.is_prerelease and _wheel_tags(f.name) & tags})
    here = [f for f in files if str(f.version) == version and f.name.endswith(".whl")]
    minor = int(python.split(".")[1])
    pythons = sorted((p for p in _PYTHONS if p != python and any(
        _wheel_tags(f.name) & target_tags(p, platform) for f in here)),
        key=lambda p: (abs(int(p.split(".")[1]) - minor), p))
    out = []
    if fit:
        near = sorted(fit, key=lambda v: (abs(_rank(str(v)) - _rank(version)), str(v)))[:2]
        out.append(f"pin {' or '.join(f'{name}=={v}' for v in near)} in packages.pip "
                   f"(releases with a wheel for Python {python} on {platform}) if the "
                   "engine's requirements allow it")
    if pythons:
        out.append(f"use python {' or '.join(pythons[:2])} (its wheels of {version} cover "
                   "it) where the engine release supports it")
    out.append("or install a build toolchain for its sdist and accept a source build")
    return "; ".join(out)


def _rank(version: str) -> float:
    parts = [int(x) for x in re.findall(r"\d+", version)[:3]] + [0, 0, 0]
    return parts[0] * 1e6 + parts[1] * 1e3 + parts[2]


def verdicts(text: str, python: str, platform: str) -> list[Verdict]:
    """The verdict on every distribution of a lock's text, read from the indexes."""
    entries = locked(text)

    def one(entry: tuple[str, str, set[str], str]) -> Verdict:
        name, version, hashes, index = entry
        return judge(name, version, hashes, outdated_index.files(index, name), python, platform)

    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(one, entries))


def check(text: str, python: str, platform: str) -> list[str]:
    """Raise :class:`ClosureError` naming every distribution without a wheel for the image
    (and what would give it one); return the pure-Python sdists built in the engine stage."""
    found = verdicts(text, python, platform)
    missing = [v for v in found if v.kind == "missing"]
    if missing:
        raise ClosureError(
            f"the Python closure has distributions with no wheel for Python {python} on "
            f"{platform}, so the engine stage would compile them from source with whatever "
            "the build image has: " + "; ".join(_line(v) for v in missing))
    return [f"{v.name}=={v.version}" for v in found if v.kind == "sdist"]


def _line(v: Verdict) -> str:
    return f"{v.name}=={v.version} ({v.detail})"


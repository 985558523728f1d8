"""Newer releases on the configured index, and what dockergen's rules say of each.

For a profile: its serving engine and the packages pinned beside it (torch, the engine's kernel
packages, flash-attn when the image builds it), the releases newer than the profile's on the
index the profile installs from (``build.pip_index_url``, else PyPI; ``--index`` replaces it),
whether dockergen's knowledge has each, and, for what the profile itself sets
(``engine.version``, ``flash_attn.version``), the verdict of every rule on the profile moved
to that release: the profile is resolved again with the one field changed, so the verdict is
exactly what ``validate`` would say. Packages the engine release pins move with the engine
and get no verdict of their own. Pre-releases are not listed.

The index is read by :mod:`dockergen.net.index` (its simple API, credentials from the
environment or netrc, never written or printed).
"""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.version import Version

from dockergen.errors import (
    DockergenError,
    ExitCode,
    Problem,
    ProfileError,
    Severity,
    redact,
)
from dockergen.input.loader import (
    LoadedProfile,
    apply_overrides,
    load_raw,
    read_raw,
    with_overrides,
)
from dockergen.knowledge import facts as knowledge
from dockergen.net.index import releases
from dockergen.parts.engines import engine_for
from dockergen.pipeline import resolution_of
from dockergen.resolve.model import MAIN_INDEX, is_pypi


class OutdatedError(DockergenError, code=ExitCode.OUTDATED):
    """A newer release exists that a profile can move to with every rule passing (exit 9,
    for scheduled CI); the report itself is already printed."""


@dataclass(frozen=True)
class Newer:
    """A release newer than the profile's: known to dockergen, and the rules' verdict."""

    version: str
    known: bool | None  # None: dockergen keeps no list of this package's releases
    verdict: str  # "ok", "ok, N warning(s)", "error", "unknown", "moves with the engine"
    detail: str = ""  # the first error, or what to do


@dataclass(frozen=True)
class PackageReport:
    """One package of a profile: its version there, who sets it, the newer releases."""

    name: str
    current: str
    setting: str | None  # the profile field that moves it; None: pinned by the engine
    newer: tuple[Newer, ...]


@dataclass(frozen=True)
class Report:
    """What ``dockergen outdated`` says of one profile."""

    profile: str
    index: str
    packages: tuple[PackageReport, ...] = field(default_factory=tuple)

    def valid_newer(self) -> list[tuple[str, str]]:
        """(package, release) for every newer release the profile can move to as it is."""
        return [(p.name, n.version) for p in self.packages for n in p.newer
                if n.verdict.startswith("ok")]


# --- verdicts -----------------------------------------------------------------------------

def index_fields(loaded: LoadedProfile, index: str | None) -> dict[str, str]:
    """The profile fields that make ``--index`` the index every rule judges: releases are
    read from it, so a verdict must be the one of a profile installing from it (a release
    pinning what only the mirror carries is then a warning, not an error). PyPI given in
    full, for a profile that installs from PyPI, changes nothing."""
    current = loaded.profile.build.pip_index_url
    if index is None or index == current or (is_pypi(index) and (current is None
                                                                 or is_pypi(current))):
        return {}
    return {"build.pip_index_url": index}


def _verdict(loaded: LoadedProfile, setting: str, version: str,
             fields: dict[str, str]) -> tuple[str, str]:
    """What the rules say of the profile as read, with ``setting`` moved to ``version``
    and ``fields`` (the index read) set."""
    sets = (f"{setting}={version}", *(f"{k}={v}" for k, v in fields.items()))
    try:
        r = resolution_of(with_overrides(loaded, sets)).resolved
    except ProfileError as exc:
        first = next(p for p in exc.problems if p.severity is Severity.ERROR)
        return "error", redact(f"{first.field}: {first.message}" if first.field
                               else first.message)
    warned = len(r.warnings)
    return ("ok", "") if not warned else (f"ok, {warned} warning(s)",
                                          redact(str(r.warnings[0].message)))


def one_image(path: Path, overrides: tuple[str, ...], command: str) -> LoadedProfile:
    """The profile at ``path``, read once and loaded; refused, for ``command``, when it
    makes no image (abstract) or many (a matrix): the verdicts are those of one resolved
    image. The fix names what to give instead: a profile extending it, or the matrix's
    first variant as ``--set`` options."""
    raw = read_raw(path)
    data, pos = copy.deepcopy(raw.data), raw.positions.copy()
    if data.get("abstract") is True:
        raise ProfileError([Problem(
            pos.of(("abstract",)), "abstract", f"{command} judges one image; this profile "
            "only provides defaults for others",
            f"give a profile that says `extends: {raw.path.stem}`")])
    data = apply_overrides(data, pos, overrides)
    if not data.get("matrix"):
        return load_raw(raw, overrides)
    axes = data["matrix"].get("axes") if isinstance(data["matrix"], dict) else None
    sets = ["--set matrix=null"]
    for axis, values in (axes or {}).items():  # the first value of each axis
        first = next(iter(values.values())) if isinstance(values, dict) else values[0]
        shown = json.dumps(list(first)) if isinstance(first, (list, tuple)) else str(first)
        sets.append("--set " + shlex.quote(f"{axis}={shown}"))
    raise ProfileError([Problem(
        pos.of(("matrix",)), "matrix", f"{command} judges one image; this profile is a "
        "matrix of variants", f"run it on one variant: add `{' '.join(sets)}` to the "
        "command (each axis set to one of its values)")])


def check(path: Path, overrides: tuple[str, ...] = (), index: str | None = None) -> Report:
    """The report for one profile (raises the profile's own errors first)."""
    res = resolution_of(one_image(path, overrides, "outdated"))
    r = res.resolved
    p = r.profile
    where = index or p.build.pip_index_url or MAIN_INDEX
    engine = engine_for(p.engine.name)
    # what is known is what validate knows: the built-in facts and the profile's own files
    known = knowledge.facts(res.loaded.user_facts)
    engine_facts = engine.facts(known)
    torch_rows, fa_releases = set(known.torch["releases"]), set(known.flash_attn["releases"])
    pinned = [(q.split("==", 1)[0].split("[", 1)[0], q.split("==", 1)[1])
              for q in r.engine.requirements[1:] if "==" in q and "/" not in q]
    # (package, its version here, the profile field that moves it, its releases dockergen
    # knows: torch's rows are per minor release)
    packages: list[tuple[str, str, str | None, Callable[[Version], bool] | None]] = [
        (str(engine_facts["package"]), p.engine.version, "engine.version",
         lambda v: str(v) in engine_facts["releases"]),
        ("torch", r.engine.torch, None, lambda v: f"{v.major}.{v.minor}" in torch_rows),
        *((name, version, None, None) for name, version in pinned)]
    if r.flash_attn is not None:
        packages.append(("flash-attn", r.flash_attn.version, "flash_attn.version",
                         lambda v: str(v) in fa_releases))
    reports = []
    for name, current, setting, knows in packages:
        newer = []
        for v in releases(where, name):
            if v.is_prerelease or v.is_devrelease or v <= Version(current):
                continue
            is_known = None if knows is None else knows(v)
            if setting is None:
                newer.append(Newer(str(v), is_known, "moves with the engine",
                                   f"pinned by {r.engine.requirements[0]}"))
            elif is_known is False:
                newer.append(Newer(str(v), False, "unknown", "not in dockergen's knowledge: "
                                   "add its facts in a knowledge file (profile `knowledge:`), "
                                   "or wait for a dockergen release that has them"))
            else:
                verdict, detail = _verdict(res.loaded, setting, str(v),
                                           index_fields(res.loaded, index))
                newer.append(Newer(str(v), is_known, verdict, detail))
        reports.append(PackageReport(name, current, setting, tuple(newer)))
    return Report(str(path), redact(where), tuple(reports))


def to_json(reports: list[Report]) -> str:
    """The reports for machines (``--json``)."""
    return json.dumps([asdict(r) for r in reports], indent=2, sort_keys=True) + "\n"


def to_text(reports: list[Report]) -> str:
    """The reports for people: each package with its newer releases, a line each."""
    lines = []
    for rep in reports:
        lines.append(f"{rep.profile} (index {rep.index}; pre-releases not listed)")
        for pkg in rep.packages:
            who = pkg.setting or "pinned by the engine release"
            lines.append(f"  {pkg.name} {pkg.current} ({who}): "
                         + ("up to date" if not pkg.newer else
                            f"{len(pkg.newer)} newer"))
            for n in pkg.newer:
                known = {True: "known", False: "not known", None: ""}[n.known]
                lines.append(f"    {n.version:<14} {known:<10} {n.verdict}"
                             + (f": {n.detail}" if n.detail else ""))
    return "\n".join(lines) + "\n"

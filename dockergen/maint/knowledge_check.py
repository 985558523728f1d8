"""Check dockergen's knowledge against the real packages: ``python -m dockergen.maint.knowledge``.

``refresh`` reads PyPI (see :mod:`dockergen.maint.pypi`) for every release the knowledge
names, plus the newest final release of each package, runs the compile probe
(:mod:`dockergen.maint.probe`) for every torch a flash-attn build can meet, and writes what it
observed to ``dockergen/data/pypi-snapshot.json`` (sorted, dated by the ``observed_on`` field
only). ``check`` compares the knowledge with that snapshot offline and lists every
difference; ``live`` observes PyPI again and compares with the checked-in snapshot.
``platforms`` reads the facts that differ per machine (which machines, at which glibc, each
engine release has wheels for; the aarch64 wheels' kernel code) from PyPI again and lists
every difference (:mod:`dockergen.maint.platforms`).

Facts no machine can check from PyPI (the PyPI-hosted metadata does not carry them) are
marked ``unverified`` in the knowledge, either as ``unverified: true`` (the whole row) or as a
list of the row's unverified fields; they are reported, never compared, and rules built on
them only warn.
The comparison itself: :mod:`dockergen.maint.knowledge_check_compare`.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from packaging.version import Version

from dockergen.maint.knowledge_check_compare import KnowledgeView, compare, minor_of
from dockergen.maint.observe import (
    Pages,
    observe_engine,
    observe_flash_attn,
    observe_torch,
    spec,
)

SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "pypi-snapshot.json"
SNAPSHOT_VERSION = 1


# --- observing ----------------------------------------------------------------------------

def observe_all(kb: KnowledgeView, pages: Pages | None = None, probe: bool = True,
                today: str | None = None) -> dict[str, Any]:
    """Read PyPI for every release the knowledge names and return the snapshot."""
    pages = pages or Pages()
    newest = {name: pages.newest(name) for name in
              sorted({"torch", "flash-attn", *(pkg for pkg, _ in kb.engines().values())})}
    engines: dict[str, dict[str, Any]] = {}
    for name, (package, releases) in sorted(kb.engines().items()):
        wanted = set(releases) | {newest[package]}
        engines[name] = {v: observe_engine(pages, package, v)
                         for v in sorted(wanted, key=Version)}
    # torch: every engine pin, and every released patch of each minor the knowledge has rows
    # for (a row's Python range must hold for all of them) or PyPI's newest.
    torch_versions = set(kb.torch_pins()) | {newest["torch"]}
    minors = set(kb.torch_rows()) | {minor_of(newest["torch"])}
    for v in pages.versions("torch"):
        if not Version(v).is_prerelease and minor_of(v) in minors:
            torch_versions.add(v)
    torch = {v: observe_torch(pages, v) for v in sorted(torch_versions, key=Version)}
    fa_versions = set(kb.flash_attn()["releases"]) | {newest["flash-attn"]}
    flash_attn = {v: observe_flash_attn(pages, v) for v in sorted(fa_versions, key=Version)}
    snapshot: dict[str, Any] = {
        "format": SNAPSHOT_VERSION,
        "observed_on": today or datetime.date.today().isoformat(),
        "index": pages.index,
        "how": ("PEP 691 JSON simple API; wheel METADATA via PEP 658 or HTTP range reads of "
                "the wheel; sdist setup.py/README.md/PKG-INFO; compile probe with g++"),
        "newest": newest,
        # pre-releases newer than the newest final release: listed, deliberately not known
        "prereleases": {name: [v for v in pages.versions(name)
                               if Version(v).is_prerelease and Version(v) > Version(newest[name])]
                        for name in sorted(newest)},
        "engines": engines,
        # CUDA toolkit releases as PyPI's CUDA wheels show them (the cuda-toolkit metapackage
        # carries the toolkit's own version: 13.0.2, 13.5.0)
        "cuda_toolkit": [v for v in pages.versions("cuda-toolkit")
                         if not Version(v).is_prerelease],
        "torch": torch,
        "torch_minors": _torch_minors(torch),
        "flash_attn": flash_attn,
    }
    if probe:
        from dockergen.maint.probe import compiler_version, probe_torch

        pins = sorted({v for v in kb.torch_pins()} | {newest["torch"]} | {
            max((v for v in torch if minor_of(v) == m and torch[v]), key=Version)
            for m in minors if any(minor_of(v) == m and torch[v] for v in torch)}, key=Version)
        snapshot["compile_probe"] = {
            "compiler": compiler_version(),
            "torch": {v: probe_torch(pages, v) for v in pins},
        }
    return snapshot


def _torch_minors(torch: dict[str, Any]) -> dict[str, Any]:
    """Per torch minor: the CPython range whose linux x86_64 wheels every patch release has."""
    out: dict[str, Any] = {}
    for minor in sorted({minor_of(v) for v in torch if torch[v]}, key=Version):
        rows = [torch[v] for v in torch if torch[v] and minor_of(v) == minor]
        common = set.intersection(*(set(r["cpython_linux_x86_64"]) for r in rows))
        pys = sorted(common, key=Version)
        if not pys:
            continue
        last = Version(pys[-1])
        out[minor] = {"python": spec(f">={pys[0]},<{last.major}.{last.minor + 1}"),
                      "cuda_major": sorted({r["cuda_major"] for r in rows}),
                      "patches": sorted((v for v in torch if torch[v] and minor_of(v) == minor),
                                        key=Version)}
    return out


def dump(snapshot: dict[str, Any]) -> str:
    """The snapshot as deterministic JSON text."""
    return json.dumps(snapshot, indent=1, sort_keys=True, ensure_ascii=True) + "\n"


def write_snapshot(snapshot: dict[str, Any], path: Path = SNAPSHOT) -> None:
    """Write atomically: the old snapshot stays until the new one is complete."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(dump(snapshot), encoding="utf-8")
    tmp.replace(path)


def load_snapshot(path: Path = SNAPSHOT) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _print(lines: Iterable[str], prefix: str) -> None:
    for line in lines:
        print(f"{prefix}{line}")


def main(argv: list[str] | None = None) -> int:
    """``check`` (offline) | ``live`` (read PyPI, compare) | ``refresh`` (write snapshot) |
    ``platforms`` (read the per-machine facts from PyPI's wheels, compare)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m dockergen.maint.knowledge",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["check", "live", "refresh", "platforms"])
    parser.add_argument("--no-probe", action="store_true",
                        help="skip the compile probe (keeps the snapshot's verdicts)")
    parser.add_argument("--snapshot", type=Path, default=SNAPSHOT)
    args = parser.parse_args(argv)
    if args.command == "platforms":
        return _platforms()
    kb = KnowledgeView.load()
    if args.command == "check":
        snap = load_snapshot(args.snapshot)
    else:
        snap = observe_all(kb, probe=not args.no_probe)
        if args.no_probe and args.snapshot.is_file():
            old = load_snapshot(args.snapshot)
            if "compile_probe" in old:
                snap["compile_probe"] = old["compile_probe"]
        if args.command == "refresh":
            write_snapshot(snap, args.snapshot)
            print(f"wrote {args.snapshot} (observed {snap['observed_on']})")
        else:
            published, covered = drift(load_snapshot(args.snapshot), snap)
            _print(published, "PyPI changed: ")
            _print(covered, "coverage changed: ")
            if published:
                print("PyPI changed since the snapshot: run `python -m dockergen.maint.knowledge"
                      " refresh`, then fix the knowledge where `check` reports differences")
            elif covered:
                print("PyPI did not change; the snapshot covers other releases than the "
                      "knowledge now names: run `python -m dockergen.maint.knowledge refresh`")
    report = compare(kb, snap)
    _print(report.unverified, "unverified: ")
    _print(report.ignored, "ignored: ")
    _print(report.differences, "DIFFERENT: ")
    print(f"{len(report.differences)} difference(s), {len(report.unverified)} unverified "
          f"fact(s) against the snapshot of {snap['observed_on']}"
          + (f"; {len(report.ignored)} newer line(s) on PyPI deliberately not known"
             if report.ignored else ""))
    return 1 if report.differences else 0


def _platforms() -> int:
    """``platforms``: the per-machine facts (each engine's wheel platforms and aarch64
    kernels rows) read again from the wheels on PyPI (:mod:`dockergen.maint.platforms`)."""
    from dockergen.maint.platforms import differences

    found = differences()
    _print(found, "DIFFERENT: ")
    print(f"{len(found)} difference(s) between the per-machine facts and PyPI's wheels")
    return 1 if found else 0


# snapshot tables keyed by release -> the package whose newest release dates them
_RELEASE_TABLES = {"torch": "torch", "torch_minors": "torch", "flash_attn": "flash-attn"}


def drift(old: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(what PyPI changed, what only the snapshot's coverage changed) between two snapshots.

    A release that appears is PyPI's news when it is newer than the old snapshot's newest
    release of its package (published since); an older one was on PyPI all along and only
    the knowledge now asks about it, as a release that disappears is one it no longer names.
    A fact that changes on a release both observed is PyPI's change.
    """
    published: list[str] = []
    covered: list[str] = []
    tables: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
        (f"engines.{name}", name, (old.get("engines") or {}).get(name) or {},
         (new.get("engines") or {}).get(name) or {})
        for name in sorted({*(old.get("engines") or {}), *(new.get("engines") or {})})]
    tables += [(t, pkg, old.get(t) or {}, new.get(t) or {}) for t, pkg in _RELEASE_TABLES.items()]
    if "compile_probe" in old and "compile_probe" in new:  # a live run with the probe
        tables.append(("compile_probe.torch", "torch", old["compile_probe"].get("torch") or {},
                       new["compile_probe"].get("torch") or {}))
    for where, package, a_rows, b_rows in tables:
        newest = (old.get("newest") or {}).get(package)
        for key in sorted({*a_rows, *b_rows}):
            a, b = a_rows.get(key), b_rows.get(key)
            if a == b:
                continue
            if a is None and (newest is None or Version(key) > Version(newest)):
                published.append(f"{where}.{key}: {a!r} -> {b!r}")
            elif a is None:
                covered.append(f"{where}.{key}: now observed (on PyPI before the snapshot; the "
                               "knowledge names it now)")
            elif b is None:
                covered.append(f"{where}.{key}: no longer observed (the knowledge no longer "
                               "names it)")
            else:
                published += _changed(a, b, f"{where}.{key}")
    for key in ("newest", "prereleases"):
        published += _changed(old.get(key) or {}, new.get(key) or {}, key)
    if old.get("cuda_toolkit") != new.get("cuda_toolkit"):
        added = sorted(set(new.get("cuda_toolkit") or []) - set(old.get("cuda_toolkit") or []),
                       key=Version)
        published.append(f"cuda_toolkit: {', '.join(added) or 'releases removed'} on PyPI")
    rest = set(old) | set(new)
    rest -= {"engines", "newest", "prereleases", "cuda_toolkit", "observed_on", "compiler",
             "compile_probe", *_RELEASE_TABLES}
    for key in sorted(rest):
        if old.get(key) != new.get(key):
            covered.append(f"{key}: {old.get(key)!r} -> {new.get(key)!r} (how it was read)")
    return published, covered


def _changed(old: dict[str, Any], new: dict[str, Any], path: str = "") -> list[str]:
    """What differs between two snapshots (the date and the compiler aside)."""
    out: list[str] = []
    for key in sorted(set(old) | set(new)):
        if key in ("observed_on", "compiler"):
            continue
        a, b = old.get(key), new.get(key)
        where = f"{path}.{key}" if path else key
        if isinstance(a, dict) and isinstance(b, dict):
            out += _changed(a, b, where)
        elif a != b:
            out.append(f"{where}: {a!r} -> {b!r}")
    return out

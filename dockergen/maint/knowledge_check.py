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
May import: :mod:`dockergen.knowledge` (the facts files), :mod:`dockergen.maint`.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import Version

from dockergen.knowledge import is_unverified
from dockergen.maint.observe import (
    Pages,
    observe_engine,
    observe_flash_attn,
    observe_torch,
    spec,
)

SNAPSHOT = Path(__file__).resolve().parent.parent / "data" / "pypi-snapshot.json"
SNAPSHOT_VERSION = 1


@dataclass(frozen=True)
class KnowledgeView:
    """The few knowledge facts the checker compares (one adapter over the knowledge data)."""

    data: dict[str, Any]

    @classmethod
    def load(cls) -> KnowledgeView:
        """The component facts files, in the shape the checker compares."""
        from dockergen.knowledge import facts

        known = facts()
        engines = {str(rows["package"]): rows for rows in known.engines.values()}
        return cls({"engines": engines, "torch": known.torch["releases"],
                    "flash_attn": known.flash_attn, "cuda": known.cuda["cuda"]})

    def engines(self) -> dict[str, tuple[str, dict[str, dict[str, Any]]]]:
        """engine name -> (PyPI package, {release: row})."""
        return {name: (e["package"], e["releases"]) for name, e in self.data["engines"].items()}

    def flashinfer(self, engine: str) -> dict[str, dict[str, Any]]:
        """The engine's ``flashinfer`` table (vLLM: the pin per release), else empty."""
        return dict(self.data["engines"][engine].get("flashinfer") or {})

    def cuda_versions(self) -> list[str]:
        """The CUDA toolkit releases the knowledge has rows for."""
        return sorted(self.data.get("cuda", {}), key=Version)

    def torch_rows(self) -> dict[str, dict[str, Any]]:
        return dict(self.data["torch"])

    def flash_attn(self) -> dict[str, Any]:
        return dict(self.data["flash_attn"])

    def torch_pins(self) -> list[str]:
        """Every torch an engine release pins (a flash-attn build meets these)."""
        pins = {str(row["torch"]) for _, releases in self.engines().values()
                for row in releases.values()}
        return sorted(pins, key=Version)


# --- observing ----------------------------------------------------------------------------

def _minor(version: str) -> str:
    v = Version(version)
    return f"{v.major}.{v.minor}"


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
    minors = set(kb.torch_rows()) | {_minor(newest["torch"])}
    for v in pages.versions("torch"):
        if not Version(v).is_prerelease and _minor(v) in minors:
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
            max((v for v in torch if _minor(v) == m and torch[v]), key=Version)
            for m in minors if any(_minor(v) == m and torch[v] for v in torch)}, key=Version)
        snapshot["compile_probe"] = {
            "compiler": compiler_version(),
            "torch": {v: probe_torch(pages, v) for v in pins},
        }
    return snapshot


def _torch_minors(torch: dict[str, Any]) -> dict[str, Any]:
    """Per torch minor: the CPython range whose linux x86_64 wheels every patch release has."""
    out: dict[str, Any] = {}
    for minor in sorted({_minor(v) for v in torch if torch[v]}, key=Version):
        rows = [torch[v] for v in torch if torch[v] and _minor(v) == minor]
        common = set.intersection(*(set(r["cpython_linux_x86_64"]) for r in rows))
        pys = sorted(common, key=Version)
        if not pys:
            continue
        last = Version(pys[-1])
        out[minor] = {"python": spec(f">={pys[0]},<{last.major}.{last.minor + 1}"),
                      "cuda_major": sorted({r["cuda_major"] for r in rows}),
                      "patches": sorted((v for v in torch if torch[v] and _minor(v) == minor),
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


# --- comparing ----------------------------------------------------------------------------

@dataclass
class Report:
    """Differences (failures), the unverified facts that were not compared, and the
    pre-releases on PyPI that the knowledge leaves out on purpose."""

    differences: list[str]
    unverified: list[str]
    ignored: list[str] = field(default_factory=list)


@dataclass
class _Findings:
    """What a comparison found so far: differences and facts no artefact confirms."""

    diff: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)

    def same(self, where: str, row: dict[str, Any], field_name: str, seen: Any,
             want: Any) -> None:
        """Record ``want`` (the knowledge's) against ``seen`` (PyPI's) for one fact."""
        if is_unverified(row, field_name):
            self.unverified.append(f"{where}: {field_name} = {want!r} (unverified; PyPI: "
                                   f"{seen!r})")
        elif seen != want:
            self.diff.append(f"{where}: {field_name} is {want!r} in the knowledge, {seen!r} "
                             f"on PyPI ({row.get('src', 'no src')})")


def compare(kb: KnowledgeView, snap: dict[str, Any]) -> Report:
    """Every difference between the knowledge and a snapshot of PyPI."""
    f = _Findings()
    _compare_engines(kb, snap, f)
    _compare_torch(kb, snap, f)
    _compare_flash_attn(kb, snap, f)
    newest, diff, unverified = snap["newest"], f.diff, f.unverified
    cuda_diff, cuda_unverified, ignored = _cuda_toolkit(kb, snap)
    diff += cuda_diff
    unverified += cuda_unverified
    ignored += [f"{package}: {len(versions)} pre-release(s) newer than {newest.get(package)} "
               f"({', '.join(versions[:3])}{' ... ' + versions[-1] if len(versions) > 3 else ''})"
               ", deliberately not known: the knowledge holds final releases, and outdated and "
               "upgrade do not list pre-releases"
               for package, versions in sorted((snap.get("prereleases") or {}).items())
               if versions]
    return Report(diff, unverified, ignored)


def _compare_engines(kb: KnowledgeView, snap: dict[str, Any], f: _Findings) -> None:
    """Each engine release's pins, Python range and CUDA major; the newest known."""
    newest, diff, unverified, same = snap["newest"], f.diff, f.unverified, f.same
    for name, (package, releases) in sorted(kb.engines().items()):
        seen_all = snap["engines"].get(name, {})
        if newest.get(package) not in releases:
            diff.append(f"engines.{name}: PyPI's newest release {newest.get(package)} is "
                        "missing from the knowledge")
        for version, row in sorted(releases.items(), key=lambda kv: Version(kv[0])):
            where = f"engines.{name}.releases.{version}"
            seen = seen_all.get(version)
            if seen is None:
                diff.append(f"{where}: not on PyPI (or not in the snapshot: run refresh)")
                continue
            same(where, row, "torch", seen["torch"], str(row["torch"]))
            same(where, row, "cuda_major", seen["cuda_major"], row["cuda_major"])
            for pinned in ("kernel", "flashinfer"):  # SGLang's lockstep pins
                if pinned in row:
                    same(where, row, pinned, seen.get(pinned), str(row[pinned]))
            fi_row = kb.flashinfer(name).get(version)
            if fi_row is not None and not fi_row.get("extra_only"):  # vLLM's own table
                pin = str(seen.get("flashinfer", "")).rpartition("==")[2] or None
                same(f"engines.{name}.flashinfer.{version}", fi_row, "python", pin,
                     str(fi_row["python"]))
            if "python" in seen:
                same(where, row, "python", seen["python"], spec(row["python"]))
            elif not is_unverified(row, "python"):
                diff.append(f"{where}: python cannot be read from PyPI (the wheel is elsewhere, "
                            "PyPI has a stub sdist); mark it `unverified: [python]`")
            else:
                unverified.append(f"{where}: python = {row['python']!r} (unverified; PyPI's "
                                  f"stub says {seen.get('python_stub')!r})")


def _compare_torch(kb: KnowledgeView, snap: dict[str, Any], f: _Findings) -> None:
    """Each torch minor's Python range, CUDA major and C++ standard (compile probe)."""
    newest, diff, unverified, same = snap["newest"], f.diff, f.unverified, f.same
    rows = kb.torch_rows()
    newest_minor = _minor(newest["torch"])
    if newest_minor not in rows:
        diff.append(f"torch: PyPI's newest torch {newest['torch']} has no row")
    for pin in kb.torch_pins():
        if _minor(pin) not in rows:
            diff.append(f"torch: engines pin torch {pin} but there is no {_minor(pin)} row")
        if not snap["torch"].get(pin):
            diff.append(f"torch: engines pin torch {pin}, which is not on PyPI")
    probes = snap.get("compile_probe", {}).get("torch", {})
    for minor, row in sorted(rows.items(), key=lambda kv: Version(kv[0])):
        where = f"torch.{minor}"
        seen = snap["torch_minors"].get(minor)
        if seen is None:
            diff.append(f"{where}: no torch {minor}.x release on PyPI")
            continue
        same(where, row, "python", seen["python"], spec(row["python"]))
        if len(seen["cuda_major"]) == 1:
            same(where, row, "pypi_cuda_major", seen["cuda_major"][0], row.get("pypi_cuda_major"))
        if "cuda" in row and not is_unverified(row, "cuda"):
            diff.append(f"{where}: cuda (the download.pytorch.org index list) cannot be read "
                        "from PyPI; mark it `unverified: [cuda]`")
        elif "cuda" in row:
            unverified.append(f"{where}: cuda = {row['cuda']} (unverified: download.pytorch.org "
                              "is not reachable)")
        verdicts = {p["cxx_min"] for v, p in probes.items() if _minor(v) == minor}
        if len(verdicts) > 1:
            diff.append(f"{where}: the probe disagrees between patch releases: {sorted(verdicts)}")
        elif verdicts:
            same(where, row, "cxx_min", verdicts.pop(), row.get("cxx_min"))
        elif "cxx_min" in row:
            diff.append(f"{where}: cxx_min has no compile probe in the snapshot (run refresh)")


def _compare_flash_attn(kb: KnowledgeView, snap: dict[str, Any], f: _Findings) -> None:
    """Each flash-attn release's build facts from its setup.py."""
    newest, diff, same = snap["newest"], f.diff, f.same
    fa = kb.flash_attn()
    seen_fa = snap["flash_attn"]
    if newest["flash-attn"] not in fa["releases"]:
        diff.append(f"flash_attn: PyPI's newest release {newest['flash-attn']} is missing")
    for version, row in sorted(fa["releases"].items(), key=lambda kv: Version(kv[0])):
        where = f"flash_attn.releases.{version}"
        seen = seen_fa.get(version)
        if seen is None:
            diff.append(f"{where}: not on PyPI (releases carry .postN suffixes; check the "
                        "exact version)")
            continue
        same(where, row, "cxx_std", seen["cxx_std"], [row.get("cxx_std")])
        same(where, row, "archs_env", seen["archs_env"] is not None, row.get("archs_env"))
        same(where, row, "nvcc_min", seen["nvcc_min"], row.get("nvcc_min"))
        same(where, row, "torch_min", seen["torch_min"], row.get("torch_min"))
        same(where, row, "python", seen["python"], spec(row.get("python")))
        same(where, row, "default_archs", seen["default_archs"], row.get("default_archs"))
        for arch, need in seen["arch_min_nvcc"].items():
            if need == seen["nvcc_min"]:
                continue  # no gate beyond the release's own nvcc minimum
            same(where, fa, f"arch_min_nvcc[{arch}]", need, fa["arch_min_nvcc"].get(arch))
    listed = [v for v in fa["releases"] if seen_fa.get(v)]
    with_env = [v for v in listed if seen_fa[v]["archs_env"]]
    if with_env:
        first = min(with_env, key=Version)
        same("flash_attn", fa, "archs_env_since", first, fa.get("archs_env_since"))
        values = sorted({a for v in with_env for a in seen_fa[v]["default_archs"]}, key=int)
        same("flash_attn", fa, "arch_values", values, fa.get("arch_values"))


def _cuda_toolkit(kb: KnowledgeView, snap: dict[str, Any]
                  ) -> tuple[list[str], list[str], list[str]]:
    """(differences, unverified, ignored) of the CUDA table against PyPI's cuda-toolkit
    releases: every known release is one PyPI's CUDA wheels carry; a newer patch of a known
    minor, and newer minors, are listed (a row's nvidia/cuda image tags and minimum driver
    come from NVIDIA's release notes, which no machine here reads)."""
    on_pypi = snap.get("cuda_toolkit")
    if on_pypi is None:
        return [], [], []
    diff: list[str] = []
    unverified: list[str] = []
    for version in kb.cuda_versions():
        if version not in on_pypi:
            diff.append(f"cuda.{version}: no cuda-toolkit {version} on PyPI")
        patches = [v for v in on_pypi
                   if _minor(v) == _minor(version) and Version(v) > Version(version)]
        if patches:
            unverified.append(f"cuda.{version}: PyPI has the newer patch {patches[-1]} (its "
                              "image tags and driver minimum are not checked here)")
    known = Version(kb.cuda_versions()[-1])
    minors = sorted({_minor(v) for v in on_pypi if Version(v) > known
                     and _minor(v) != _minor(str(known))}, key=Version)
    if not minors:
        return diff, unverified, []
    latest = [max((v for v in on_pypi if _minor(v) == m), key=Version) for m in minors]
    return diff, unverified, [f"cuda: CUDA {', '.join(latest)} are on PyPI as CUDA wheels and "
                              "not in the knowledge (a row needs the nvidia/cuda image tags "
                              "and the minimum driver, from NVIDIA's release notes)"]


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

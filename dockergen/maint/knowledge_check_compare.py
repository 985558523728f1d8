"""The knowledge compared with a snapshot of PyPI: every difference, and what is not compared.

:class:`KnowledgeView` holds the few facts compared (read from the component facts files);
each engine release's pins, Python range and CUDA major, torch's rows and minors,
flash-attn's, and the CUDA toolkit releases; facts marked ``unverified`` in the knowledge are
listed, never compared, and pre-releases newer than the newest final one are listed as
deliberately not known.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from dockergen.knowledge.facts import is_unverified
from dockergen.maint.observe import spec


def minor_of(version: str) -> str:
    """``major.minor`` of a release (torch's rows are per minor)."""
    v = Version(version)
    return f"{v.major}.{v.minor}"


@dataclass(frozen=True)
class KnowledgeView:
    """The few knowledge facts the checker compares (one adapter over the knowledge data)."""

    data: dict[str, Any]

    @classmethod
    def load(cls) -> KnowledgeView:
        """The component facts files, in the shape the checker compares."""
        from dockergen.knowledge.facts import facts

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
    newest_minor = minor_of(newest["torch"])
    if newest_minor not in rows:
        diff.append(f"torch: PyPI's newest torch {newest['torch']} has no row")
    for pin in kb.torch_pins():
        if minor_of(pin) not in rows:
            diff.append(f"torch: engines pin torch {pin} but there is no {minor_of(pin)} row")
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
        verdicts = {p["cxx_min"] for v, p in probes.items() if minor_of(v) == minor}
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
                   if minor_of(v) == minor_of(version) and Version(v) > Version(version)]
        if patches:
            unverified.append(f"cuda.{version}: PyPI has the newer patch {patches[-1]} (its "
                              "image tags and driver minimum are not checked here)")
    known = Version(kb.cuda_versions()[-1])
    minors = sorted({minor_of(v) for v in on_pypi if Version(v) > known
                     and minor_of(v) != minor_of(str(known))}, key=Version)
    if not minors:
        return diff, unverified, []
    latest = [max((v for v in on_pypi if minor_of(v) == m), key=Version) for m in minors]
    return diff, unverified, [f"cuda: CUDA {', '.join(latest)} are on PyPI as CUDA wheels and "
                              "not in the knowledge (a row needs the nvidia/cuda image tags "
                              "and the minimum driver, from NVIDIA's release notes)"]

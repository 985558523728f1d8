"""flash-attn: the FlashAttention-2 source build for exactly the target GPUs, and its audit.

Owns ``flash_attn.yaml`` (releases, arch variable and values, nvcc gates, torch/Python
floors, memory per compile job, pinned build dependencies), the ``fa2-*`` checks, the
derivations (FLASH_ATTN_CUDA_ARCHS, MAX_JOBS, NVCC_THREADS), the ``flash-attn`` stage
(``templates/parts/flash_attn.j2``) with the arch-audit script it copies
(``templates/context/arch_audit.py``), and its smoke checks. Runtime part: the audit
manifest; the wheel itself goes into the venv in the engine stage.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from dockergen.errors import Edit
from dockergen.knowledge import reproducible
from dockergen.knowledge.facts import Facts, in_range
from dockergen.parts import cuda, python, torch
from dockergen.resolve.context import Context, describe, nearest, release_edits
from dockergen.resolve.model import (
    AUDIT_SCRIPT,
    VENV,
    CommandCheck,
    Derivation,
    FlashAttnStage,
    GpuTarget,
    Mode,
    RuntimeCopy,
    SmokeImport,
    cc_tuple,
)

AUDIT_MANIFEST = "/opt/dockergen/arch-audit.json"


def fa_arch_of(cc: str) -> str | None:
    """The FLASH_ATTN_CUDA_ARCHS value that covers a compute capability.

    flash-attn's setup.py only honours 80/90/100/120 (FA@v2.7.3..v2.8.3 add_cuda_gencodes);
    8.6 and 8.9 run the sm_80 code (same major), 10.x the sm_100 code, 12.x sm_120.
    """
    major, _minor = cc_tuple(cc)
    return {8: "80", 9: "90", 10: "100", 12: "120"}.get(major)


def check(c: Context) -> None:
    """fa2-*: version, GPUs, archs, toolkit, Python, torch and build memory."""
    p, fa = c.p, c.facts.flash_attn
    if p.flash_attn.build == "none":  # its fields then count for nothing: fields.py warns
        return
    version = Version(p.flash_attn.version)
    release = _release(c, fa)
    if release is None:
        return
    usable = _check_targets(c, fa)
    archs: set[str] = {a for t in usable if (a := fa_arch_of(t.cc)) is not None}
    _check_archs_env(c, fa, release, version, archs)
    _check_nvcc(c, fa, release, version, archs)
    _check_python(c, release, version)
    _check_torch_floor(c, fa, release, version)
    if c.torch_pin:
        check_cxx_std(c, release, c.torch_pin)
    _check_build_memory(c, fa)
    _check_shared_files(c, fa)
    _warn_build_without_purpose(c, usable)


def _check_shared_files(c: Context, fa: Mapping[str, Any]) -> None:
    """fa2-file-clash: no distribution the engine release requires installs files this
    build installs too (flash-attn >= 2.8.3's flash_attn.cute beside SGLang's flash-attn-4):
    the one installed last would silently replace the other's files. A source of the
    repository is judged as the newest release it follows (its files are unknown until it
    is built)."""
    p = c.p
    rows = c.facts.engine(p.engine.name).get("requires_dist") or {}
    requires = (rows.get(p.engine.version) or {}).get("requires", ())
    for share in fa.get("shares_files", ()):
        req = next((r for r in requires if canonicalize_name(Requirement(r).name)
                    == share["dist"]), None)
        first, last = (Version(v) for v in str(share["releases"]).split(".."))
        if req is None or (p.flash_attn.source is None
                           and not first <= Version(p.flash_attn.version) <= last):
            continue
        paths = list(share["paths"])
        what = ("this flash-attn source" if p.flash_attn.source is not None
                else f"flash-attn {p.flash_attn.version}")
        edits = [Edit.set("flash_attn.build", "none", f"set flash_attn.build: none "
                          f"({c.flash_attn_unneeded})") if c.flash_attn_unneeded else NO_BUILD]
        c.error(("flash_attn", "source") if p.flash_attn.source is not None
                else ("flash_attn", "version"),
                f"{what} (built from source) and {share['dist']} ({p.engine.name} "
                f"{p.engine.version} requires {req}) both install {', '.join(paths[:3])} "
                f"(and {len(paths) - 3} more; {share['src']}): the one installed last "
                "silently replaces the other's files", "or build FlashAttention-2 in an "
                f"image of an engine that does not require {share['dist']}", edits=edits)


def _release(c: Context, fa: Mapping[str, Any]) -> dict[str, Any] | None:
    """The release row the other rules read; None (after an error) for an unknown release."""
    p = c.p
    release: dict[str, Any] | None = fa["releases"].get(p.flash_attn.version)
    if release is None and p.flash_attn.source is None:
        c.error(("flash_attn", "version"), f"flash-attn {p.flash_attn.version} is not on PyPI "
                "or not in the knowledge base (releases carry .postN suffixes)",
                edits=version_edits(c.facts, p.flash_attn.version))
        return None
    if release:
        return release
    # A source build names its own version; the newest release's facts stand in for the
    # ones its setup.py may have changed (only the C++ standard is known to differ, and the
    # profile states it: flash_attn.source.cxx_std).
    newest: dict[str, Any] = fa["releases"][max(fa["releases"], key=Version)]
    return newest


def _check_targets(c: Context, fa: Mapping[str, Any]) -> list[GpuTarget]:
    """Targets too old for FlashAttention-2 or without a flash-attn arch; returns the rest."""
    old = [t for t in c.gpus if cc_tuple(t.cc) < cc_tuple(fa["min_cc"])]
    for t in old:
        c.error(("gpu", "targets"), f"FlashAttention-2 needs compute capability >= "
                f"{fa['min_cc']} (Ampere or newer), but gpu.targets includes {describe(t)}",
                edits=[NO_BUILD, *c.drop(t), *cuda.retarget(
                    c, [t], lambda g: cc_tuple(g.cc) >= cc_tuple(fa["min_cc"])
                    and fa_arch_of(g.cc) is not None)])
    # the other rules still run on the other targets: a fix of this one must not uncover
    # an error that was there all along
    usable = [t for t in c.gpus if t not in old]
    unmapped = [t for t in usable if fa_arch_of(t.cc) is None]
    for t in unmapped:
        c.error(("gpu", "targets"), f"released flash-attn has no build for compute "
                f"capability {t.cc} ({describe(t)})", edits=[NO_BUILD, *c.drop(t)])
    return usable


def _check_archs_env(c: Context, fa: Mapping[str, Any], release: dict[str, Any],
                     version: Version, archs: set[str]) -> None:
    """A release without FLASH_ATTN_CUDA_ARCHS builds sm_80 and sm_90 whatever the targets."""
    if release["archs_env"]:
        return
    beyond = sorted(a for a in archs if a not in ("80", "90"))
    if beyond:
        since = Version(fa["archs_env_since"])
        c.error(("flash_attn", "version"), f"flash-attn {version} always builds sm_80 and "
                f"sm_90 only and cannot build {', '.join(beyond)} (flash-attn >= "
                f"{since} can)",
                edits=[*version_edits(c.facts, str(version), lambda v: Version(v) >= since),
                       NO_BUILD])
    else:
        c.warn(("flash_attn", "version"), f"flash-attn {version} ignores "
               f"FLASH_ATTN_CUDA_ARCHS (added in {fa['archs_env_since']}) and always "
               "builds sm_80 and sm_90", f"use flash-attn >= {fa['archs_env_since']} to "
               "build only the targets' archs")


def _check_nvcc(c: Context, fa: Mapping[str, Any], release: dict[str, Any], version: Version,
                archs: set[str]) -> None:
    """The CUDA toolkit's nvcc must build the release and every target arch."""
    p = c.p
    have = Version(p.cuda.version)
    if have < Version(release["nvcc_min"]):
        nvcc = Version(release["nvcc_min"])
        c.error(("cuda", "version"), f"flash-attn {version} needs nvcc >= {nvcc}",
                edits=cuda.version_edits(c.facts, p.cuda.version, lambda v: v >= nvcc))
    for arch in sorted(archs, key=int):
        need = Version(fa["arch_min_nvcc"][arch])
        if have < need:  # flash-attn would silently skip it
            c.error(("cuda", "version"), f"flash-attn skips arch {arch} without an error when "
                    f"nvcc < {need}; CUDA {p.cuda.version} would ship no kernels for it",
                    edits=cuda.version_edits(c.facts, p.cuda.version,
                                             partial(operator.le, need)))


def _check_python(c: Context, release: dict[str, Any], version: Version) -> None:
    """The profile's Python must be one the release supports."""
    p = c.p
    if not in_range(p.python + ".0", release["python"]):
        c.error(("python",), f"flash-attn {version} requires Python {release['python']}",
                edits=python.version_edits(c.facts, p.python, release["python"]))


def _check_torch_floor(c: Context, fa: Mapping[str, Any], release: dict[str, Any],
                       version: Version) -> None:
    """The torch the image gets must be at least the release's torch floor."""
    if c.torch_pin and Version(c.torch_pin) < Version(release["torch_min"]):
        floor, pin = Version(release["torch_min"]), Version(c.torch_pin)
        newer_torch = release_edits(c, _releases(c),
                                    lambda row: Version(str(row["torch"])) >= floor)
        older_fa = version_edits(c.facts, str(version),
                                 lambda v: Version(fa["releases"][v]["torch_min"]) <= pin)
        c.error(("engine", "version"), f"flash-attn {version} needs torch >= {floor}, but "
                f"the image gets torch {c.torch_pin}", edits=[*newer_torch, *older_fa])


def _check_build_memory(c: Context, fa: Mapping[str, Any]) -> None:
    """max_jobs compile jobs, and at least one, must fit in build.memory_gib."""
    p = c.p
    jobs = p.flash_attn.max_jobs
    need_per_job = fa["job_gib"]
    if isinstance(jobs, int) and jobs * need_per_job > p.build.memory_gib:
        c.error(("flash_attn", "max_jobs"), f"{jobs} jobs need about {jobs * need_per_job} GiB "
                f"({need_per_job} GiB per flash-attn compile job at NVCC_THREADS=4), but "
                f"build.memory_gib is {p.build.memory_gib}", "raise build.memory_gib",
                edits=[Edit.set("flash_attn.max_jobs", "auto", "use max_jobs: auto (= "
                                f"{max(1, p.build.memory_gib // need_per_job)})")])
    if p.build.memory_gib < need_per_job:
        c.warn(("build", "memory_gib"), f"{p.build.memory_gib} GiB is below the ~"
               f"{need_per_job} GiB one flash-attn compile job can peak at",
               "expect the OOM killer; build on a host with more memory")


def _warn_build_without_purpose(c: Context, usable: list[GpuTarget]) -> None:
    """The engine's note on a build whose use the profile does not state."""
    # the engine's note (its attention does not use this build) helps where nobody said why
    # the image builds it; a profile that says so is not warned on every render
    if c.flash_attn_note and not c.p.flash_attn.purpose and usable:
        c.warn(("flash_attn", "build"), c.flash_attn_note,
               "set flash_attn.build: none if nothing else needs it, or say what uses it "
               "in flash_attn.purpose")


def check_cxx_std(c: Context, release: dict[str, Any], pin: str) -> None:
    """fa2-cxx-std: the C++ standard flash-attn forces must be one torch's headers accept.

    flash-attn's setup.py passes -std=c++NN itself, and torch's cpp_extension adds its own
    only when a package sets none; torch >= 2.14's headers stop with "#error C++20 or later
    compatible compiler is required to use ATen" under C++17 (compile probe, torch.*.cxx_min).
    """
    p = c.p
    row = torch.release_row(c.facts, pin) or {}
    need = row.get("cxx_min")
    source = p.flash_attn.source
    forced = source.cxx_std if source is not None else release.get("cxx_std")
    if need is None:
        return
    if forced is None:
        c.warn(("flash_attn", "source"), f"the C++ standard this flash-attn source forces is "
               f"not stated; torch {pin}'s headers need C++{need} or later",
               "set flash_attn.source.cxx_std to the -std=c++NN its setup.py passes (until "
               "then the flash-attn stage's first compile tells)")
        return
    if int(str(forced)) >= int(need):
        return
    where = "flash_attn.source" if source is not None else f"flash-attn {p.flash_attn.version}"
    edits = release_edits(c, _releases(c), lambda row: int(
        (torch.release_row(c.facts, str(row["torch"])) or {}).get("cxx_min", 99))
        <= int(str(forced)))
    edits.append(Edit.set("flash_attn.build", "none",
                          f"set flash_attn.build: none ({c.flash_attn_unneeded})")
                 if c.flash_attn_unneeded else NO_BUILD)
    advice = (f"build a flash-attn source that carries the fix (Dao-AILab/flash-attention "
              f"PR #2879/#2899, merged after the last release): flash_attn.source with url + "
              f"sha256 (an sdist archive) or git + commit, and cxx_std: {need}")
    c.error(("flash_attn", "source") if source is not None else ("flash_attn", "version"),
            f"{where} forces -std=c++{forced}, but the headers of torch {pin} (which the "
            f"image gets with {p.engine.name} {p.engine.version}) require C++{need} (compile "
            "probe: \"#error C++20 or later compatible compiler is required to use ATen\"); "
            "the flash-attn stage would fail at its first compile", advice, edits=edits)


NO_BUILD = Edit.set("flash_attn.build", "none")


def _releases(c: Context) -> dict[str, Any]:
    """The releases table of the profile's serving engine."""
    return dict(c.facts.engine(c.p.engine.name)["releases"])


def version_edits(f: Facts, current: str, keep: Callable[[str], bool] = lambda v: True
                  ) -> list[Edit]:
    """Candidate fixes of flash_attn.version: known releases ``keep`` accepts, the closest
    to ``current`` first."""
    return [Edit.set("flash_attn.version", v, f"use flash-attn {v}")
            for v in nearest(list(f.flash_attn["releases"]), current) if keep(v)]


def build_apt(c: Context) -> tuple[str, ...]:
    """Build-base packages the flash-attn stage needs beyond the compiler (git for a commit)."""
    source = c.p.flash_attn.source if c.p.flash_attn.build == "source" else None
    return ("git",) if source is not None and source.git is not None else ()


def derive(c: Context, d: list[Derivation], arch_list: str, mode: Mode) -> FlashAttnStage | None:
    """The flash-attn stage of a checked profile, or None when it is not built."""
    p = c.p
    if p.flash_attn.build != "source":
        return None
    fa = c.facts.flash_attn
    source = p.flash_attn.source
    targets = c.gpus
    fa_archs = sorted({a for t in targets if (a := fa_arch_of(t.cc))}, key=int)
    jobs = p.flash_attn.max_jobs
    auto_jobs = max(1, p.build.memory_gib // int(fa["job_gib"]))
    max_jobs = auto_jobs if jobs == "auto" else int(jobs)
    covered = {t.cc: fa_arch_of(t.cc) for t in targets}
    if p.flash_attn.purpose:
        d.append(Derivation("flash-attn purpose", p.flash_attn.purpose,
                            "from flash_attn.purpose: what in the image uses this build", ""))
    d.append(Derivation("FLASH_ATTN_CUDA_ARCHS", ";".join(fa_archs),
                        "8.x -> 80, 9.0 -> 90, 10.x -> 100, 12.x -> 120 (flash-attn honours "
                        "only these; " + ", ".join(f"{cc} runs sm_{a}" for cc, a in
                                                    sorted(covered.items())) + ")",
                        "FA@v2.7.3..v2.8.3:setup.py add_cuda_gencodes"))
    d.append(Derivation("MAX_JOBS", str(max_jobs),
                        f"build.memory_gib {p.build.memory_gib} / {fa['job_gib']} GiB per job"
                        if jobs == "auto" else "flash_attn.max_jobs",
                        "FA@v2.8.3:setup.py NinjaBuildExtension ('~8-9GB when threads = 4')"))
    d.append(Derivation("NVCC_THREADS", str(p.flash_attn.nvcc_threads),
                        "flash_attn.nvcc_threads", "FA@v2.8.0..HEAD:setup.py"))
    # Two builds of one source differed in the extension's symbol table, and only there
    # (stand-in, 2026-12-06): nvcc names its intermediate file after its process id
    # (tmpxft_<pid>_...cudafe1.cpp) and gcc writes that name into .symtab as the source
    # file's. ``strip --strip-unneeded`` drops the local symbols (the dynamic ones, which
    # the import resolves, stay); ``wheel pack`` rewrites RECORD with the new hash, and the
    # wheel is dated to the epoch because uv records a local wheel's mtime in the
    # installed uv_cache.json.
    return FlashAttnStage(
        repack_epoch=reproducible.EPOCH,
        version=p.flash_attn.version, archs=";".join(fa_archs), torch_arch_list=arch_list,
        expect=",".join(f"sm_{a}" for a in fa_archs), max_jobs=max_jobs,
        max_jobs_reason=(f"{p.build.memory_gib} GiB build memory / {fa['job_gib']} GiB "
                         "per job" if jobs == "auto" else "set in the profile"),
        job_gib=fa["job_gib"], nvcc_threads=p.flash_attn.nvcc_threads,
        deps=tuple(f"{k}=={v}" for k, v in sorted(fa["build_deps"].items())),
        pip=f"pip=={python.tool(c.facts, 'pip')}", venv=VENV, mode=mode, audit_script=AUDIT_SCRIPT,
        requirement=(f"flash-attn=={p.flash_attn.version}" if source is None else
                     f"flash-attn @ {source.url} --hash=sha256:{source.sha256}"
                     if source.url is not None else
                     f"flash-attn @ git+{source.git}@{source.commit}"),
        source_kind=("pypi" if source is None else
                     "archive" if source.url is not None else "git"),
    )


def runtime_copies(stage: FlashAttnStage | None) -> tuple[RuntimeCopy, ...]:
    """The audit manifest goes into the runtime image (the smoke tests read it)."""
    if stage is None:
        return ()
    return (RuntimeCopy("/wheels/arch-audit.json", AUDIT_MANIFEST, "flash-attn"),)


def smoke_import(stage: FlashAttnStage) -> SmokeImport:
    return SmokeImport("flash_attn", "flash-attn", stage.version)


def smoke_checks(stage: FlashAttnStage | None) -> list[CommandCheck]:
    """The audit manifest in the image must list every expected arch."""
    if stage is None:
        return []
    expect = stage.expect.split(",")

    def verify_audit(code: int, out: str) -> tuple[bool, str]:
        try:
            manifest = json.loads(out)
        except ValueError:
            return False, out[-300:]
        missing = [a for a in expect if a not in manifest.get("present", [])]
        return manifest.get("ok") is True and not missing, (
            f"present {manifest.get('present')}, expected {expect}")

    return [CommandCheck("arch audit manifest matches the GPU targets",
                         ("cat", AUDIT_MANIFEST), verify_audit)]

"""Observe the facts dockergen's knowledge states, from the real packages on PyPI.

Each ``observe_*`` function reads one release and returns plain data (what was seen, and
the file it was read from with its sha256), so a snapshot of it can be checked in and
compared offline. Parsing flash-attn's ``setup.py`` is done on its text (never executed).
"""

from __future__ import annotations

import re
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from dockergen.maint import pypi

_CU = re.compile(r"(?:-|\[|,)cu(1\d)\b")


class Pages:
    """PEP 691 project pages, read once per run."""

    def __init__(self, index: str = pypi.PYPI_SIMPLE) -> None:
        self.index = index
        self._pages: dict[str, dict[str, Any]] = {}

    def page(self, name: str) -> dict[str, Any]:
        if name not in self._pages:
            self._pages[name] = pypi.project(name, self.index)
        return self._pages[name]

    def versions(self, name: str) -> list[str]:
        """Every version with at least one file that is not yanked, oldest first."""
        page = self.page(name)
        live = {v for v in page["versions"]
                if any(not f.yanked for f in pypi.files_of(page, v))}
        return sorted(live, key=_version_key)

    def newest(self, name: str) -> str:
        """The newest final release (no pre-/dev-release)."""
        final = [v for v in self.versions(name) if not Version(v).is_prerelease]
        return final[-1]

    def files(self, name: str, version: str) -> list[pypi.DistFile]:
        return [f for f in pypi.files_of(self.page(name), version) if not f.yanked]


def _version_key(v: str) -> Version:
    try:
        return Version(v)
    except InvalidVersion:
        return Version("0")


def spec(text: str | None) -> str | None:
    """A PEP 440 specifier in one canonical spelling (sorted, no spaces)."""
    if text is None:
        return None
    return ",".join(sorted(str(s) for s in SpecifierSet(text)))


def _requires(metadata: str) -> list[Requirement]:
    out = []
    for line in metadata.splitlines():
        if line.startswith("Requires-Dist:"):
            try:
                out.append(Requirement(line.split(":", 1)[1].strip()))
            except InvalidRequirement:
                continue
    return out


def _field(metadata: str, name: str) -> str | None:
    for line in metadata.splitlines():
        if line.startswith(f"{name}:"):
            return line.split(":", 1)[1].strip()
        if not line.strip():
            break  # headers end at the first blank line (the description follows)
    return None


def _base(req: Requirement) -> bool:
    """True for a dependency every install gets (not behind an ``extra ==`` marker)."""
    return req.marker is None or "extra" not in str(req.marker)


def cuda_majors(reqs: list[Requirement]) -> tuple[list[int], list[str]]:
    """CUDA majors named by ``nvidia-*-cuNN`` / ``pkg[cuNN]`` base dependencies."""
    majors: set[int] = set()
    names: list[str] = []
    for r in reqs:
        if not _base(r):
            continue
        text = r.name + ("[" + ",".join(sorted(r.extras)) + "]" if r.extras else "")
        found = {int(m) for m in _CU.findall(text)}
        if found:
            majors |= found
            names.append(text)
    return sorted(majors), sorted(names)


def linux_wheel(files: list[pypi.DistFile]) -> pypi.DistFile | None:
    """The first x86_64 Linux wheel of a release's files, if it has one."""
    wheels = [f for f in files if f.filename.endswith(".whl") and "x86_64" in f.filename
              and "linux" in f.filename]
    return wheels[0] if wheels else None


def observe_torch(pages: Pages, version: str) -> dict[str, Any] | None:
    """Requires-Python, the CPython versions with linux x86_64 wheels, CUDA major, triton."""
    files = pages.files("torch", version)
    wheel = linux_wheel(files)
    if wheel is None:
        return None
    meta = pypi.wheel_metadata(wheel)
    reqs = _requires(meta)
    majors, names = cuda_majors(reqs)
    cpython = sorted({f"{m.group(1)}.{m.group(2)}" for f in files
                      if (m := re.search(r"-cp(\d)(\d+)-cp\d+t?-manylinux[^-]*x86_64\.whl$",
                                         f.filename))}, key=Version)
    triton = [str(r.specifier) for r in reqs if r.name == "triton" and _base(r)]
    return {"python": spec(_field(meta, "Requires-Python")), "cpython_linux_x86_64": cpython,
            "cuda_major": majors[0] if len(majors) == 1 else None,
            "cuda_from": names[:3], "triton": spec(triton[0]) if triton else None,
            "file": wheel.filename, "sha256": wheel.sha256}


def _python_range(meta: str, files: list[pypi.DistFile], wheel: bool) -> dict[str, Any]:
    """The Python range of an engine release: what its CPython wheel tags cover (else its
    Requires-Python), or for a stub sdist, what its classifiers name."""
    out: dict[str, Any] = {}
    python = spec(_field(meta, "Requires-Python"))
    tags = sorted({(int(m.group(1)), int(m.group(2))) for f in files
                   if (m := re.search(r"-cp(\d)(\d+)-cp\d+-manylinux[^-]*x86_64\.whl$",
                                      f.filename))})
    if wheel and tags:
        # one wheel per CPython (no abi3): the installable range is what the tags cover
        (lo_major, lo), (hi_major, hi) = tags[0], tags[-1]
        python = spec(f">={lo_major}.{lo},<{hi_major}.{hi + 1}")
    out["python" if wheel else "python_stub"] = python
    minors = sorted({tuple(int(x) for x in m.split(".")) for m in re.findall(
        r"^Classifier: Programming Language :: Python :: (3\.\d+)\s*$", meta, re.M)})
    if not wheel and minors:
        # the stub's Requires-Python is not the wheels' (">=3.10, <4"); its classifiers are
        # the CPython versions NVIDIA builds wheels for: the range they span, less the gaps
        (major, lo), hi = minors[0], minors[-1][1]
        gaps = [f"!={major}.{m}.*" for m in range(lo, hi + 1) if (major, m) not in minors]
        out["python"] = spec(",".join([f">={major}.{lo}", f"<{major}.{hi + 1}", *gaps]))
        out["python_from"] = "classifiers"
    return out


def observe_engine(pages: Pages, package: str, version: str) -> dict[str, Any] | None:
    """torch requirement, Requires-Python and CUDA major of one engine release.

    vLLM publishes wheels whose METADATA is read; TensorRT-LLM's PyPI sdist is a stub whose
    PKG-INFO carries the real wheel's Requires-Dist (its wheels are on pypi.nvidia.com), but
    not the wheel's Requires-Python, which is reported as ``python_stub``.
    """
    files = pages.files(package, version)
    if not files:
        return None
    wheel = linux_wheel(files)
    if wheel is not None:
        meta, source = pypi.wheel_metadata(wheel), wheel
    else:
        sdists = [f for f in files if f.filename.endswith(".tar.gz")]
        if not sdists:
            return None
        meta, source = pypi.sdist_member(sdists[0], "PKG-INFO") or "", sdists[0]
    reqs = _requires(meta)
    torch_reqs = [r for r in reqs if r.name == "torch" and _base(r)]
    torch_spec = spec(str(torch_reqs[0].specifier)) if torch_reqs else None
    torch: str | None = None
    if torch_spec:
        allowed = [v for v in pages.versions("torch")
                   if not Version(v).is_prerelease and Version(v) in SpecifierSet(torch_spec)]
        torch = allowed[-1] if allowed else None
    majors, names = cuda_majors(reqs)
    cuda_from = "engine" if majors else None
    if not majors and torch:
        seen = observe_torch(pages, torch)
        if seen and seen["cuda_major"]:
            majors, names, cuda_from = [seen["cuda_major"]], seen["cuda_from"], f"torch {torch}"
    out: dict[str, Any] = {
        "torch_requirement": torch_spec, "torch": torch,
        "cuda_major": majors[0] if len(majors) == 1 else None,
        "cuda_from": f"{cuda_from}: {', '.join(names[:3])}" if cuda_from else None,
        "file": source.filename, "sha256": source.sha256,
    }
    # the kernel packages a release pins in lockstep (SGLang: sglang-kernel; vLLM and
    # SGLang: flashinfer-python), as the facts write them: NAME[EXTRAS]==VERSION
    for field_name, name in (("kernel", "sglang-kernel"), ("flashinfer", "flashinfer-python")):
        exact = [r for r in reqs if canonicalize_name(r.name) == name and _base(r)
                 and str(r.specifier).startswith("==")]
        if exact:
            extras = f"[{','.join(sorted(exact[0].extras))}]" if exact[0].extras else ""
            out[field_name] = f"{name}{extras}{exact[0].specifier}"
    out.update(_python_range(meta, files, wheel is not None))
    return out


_GATE = re.compile(r'bare_metal_version\s*>=\s*Version\("([\d.]+)"\)')
_GENCODE = re.compile(r"arch=compute_(\d+),code=sm_\1")
_MIN = re.compile(r'bare_metal_version\s*<\s*Version\("([\d.]+)"\)')


def parse_flash_attn_setup(setup_py: str, readme: str) -> dict[str, Any]:
    """The build facts of flash-attn's ``setup.py`` (read as text, CUDA path only)."""
    code = [ln for ln in setup_py.splitlines() if not ln.lstrip().startswith("#")]
    text = "\n".join(code)
    env = re.findall(r'getenv\("(FLASH_ATTN_CUDA_ARCHS)",\s*"([^"]*)"\)', text)
    gates: dict[str, str] = {}
    nvcc_min = _MIN.search(text)
    if_stack: list[tuple[int, str | None]] = []
    for ln in code:
        indent = len(ln) - len(ln.lstrip())
        while if_stack and if_stack[-1][0] >= indent and ln.strip():
            if_stack.pop()
        stripped = ln.strip()
        if stripped.startswith("if "):
            gate = _GATE.search(stripped)
            if_stack.append((indent, gate.group(1) if gate else None))
        for arch in _GENCODE.findall(ln):
            need = next((g for _, g in reversed(if_stack) if g), None)
            gates.setdefault(arch, need or (nvcc_min.group(1) if nvcc_min else "?"))
    torch_min = re.findall(r"PyTorch (\d+\.\d+) and above", readme)
    python = re.search(r'python_requires\s*=\s*"([^"]+)"', text)
    return {
        "archs_env": env[0][0] if env else None,
        "default_archs": env[0][1].split(";") if env else sorted(gates, key=int),
        "arch_min_nvcc": dict(sorted(gates.items(), key=lambda kv: int(kv[0]))),
        "nvcc_min": nvcc_min.group(1) if nvcc_min else None,
        "cxx_std": sorted({int(m) for m in re.findall(r"-std=c\+\+(\d+)", text)}),
        "torch_min": torch_min[0] if torch_min else None,
        "python": spec(python.group(1)) if python else None,
    }


def observe_flash_attn(pages: Pages, version: str) -> dict[str, Any] | None:
    """flash-attn's build facts from its sdist's ``setup.py`` and README."""
    sdists = [f for f in pages.files("flash-attn", version) if f.filename.endswith(".tar.gz")]
    if not sdists:
        return None
    setup = pypi.sdist_member(sdists[0], "setup.py") or ""
    readme = pypi.sdist_member(sdists[0], "README.md") or ""
    return {**parse_flash_attn_setup(setup, readme), "file": sdists[0].filename,
            "sha256": sdists[0].sha256}

"""torch: the pin every compiled extension is built against, from the CUDA-matched index.

Owns ``torch.yaml`` (per torch minor: Python range and the CUDA indexes of
download.pytorch.org), the checks on the pin the serving engine establishes
(``engine.torch`` override, known release, CUDA index exists, Python range), the torch
derivations and the template ``templates/parts/torch.j2``. Runtime part: none of
its own (torch lives in the venv the Python component copies).
"""

from __future__ import annotations

import re
from typing import Any

from packaging.version import Version

from dockergen.errors import Edit
from dockergen.knowledge import kernels
from dockergen.knowledge.facts import Facts, in_range, is_unverified
from dockergen.parts import cuda, python
from dockergen.resolve.context import Context
from dockergen.resolve.model import (
    MAIN_INDEX,
    VENV,
    CommandCheck,
    Derivation,
    Mode,
    SmokeImport,
    TorchInstall,
    last_json_line,
)


def release_row(f: Facts, torch_version: str) -> dict[str, Any] | None:
    """The row of a torch version's minor release (``2.14.0`` -> ``2.14``)."""
    v = Version(torch_version)
    entry = f.torch["releases"].get(f"{v.major}.{v.minor}")
    return dict(entry) if entry is not None else None


def index_url(base_url: str, cuda_version: str) -> str:
    """PyTorch's CUDA-matched index, e.g. ``.../whl/cu130`` for CUDA 13.0.x."""
    return f"{base_url}/cu{cuda.major_minor(cuda_version).replace('.', '')}"


def check(c: Context) -> None:
    """torch-pin, torch-known, torch-cuda-index (or torch-main-index), torch-python (once
    the engine set a pin)."""
    p = c.p
    tail = p.build.torch_index_url.rstrip("/").rsplit("/", 1)[-1]
    if re.fullmatch(r"cu[0-9]{2,4}|cpu|rocm[0-9.]+", tail):  # dockergen appends the CUDA
        c.error(("build", "torch_index_url"), f"ends in /{tail}; dockergen appends the "
                "CUDA-matched folder itself, so the index would be "
                f"{index_url(p.build.torch_index_url, p.cuda.version)}",
                "give the index root, e.g. torch_index_url: "
                + p.build.torch_index_url.rstrip("/").rsplit("/", 1)[0])
    if c.release is None:
        return  # unknown engine release: already reported, nothing to check against
    pin = str(c.release["torch"])
    if p.engine.torch and Version(p.engine.torch) != Version(pin):
        c.error(("engine", "torch"), f"{p.engine.name}=={p.engine.version} requires "
                f"torch=={pin}, not {p.engine.torch}",
                "remove engine.torch (it is derived) or change engine.version")
        return
    row = release_row(c.facts, pin)
    if row is None:
        c.error(("engine", "version"), f"torch {pin} is not in the knowledge base",
                "add its release row to dockergen/parts/torch.yaml")
        return
    if p.build.torch_from == "main-index":
        check_main_index(c, pin, row)
        return
    mm = cuda.major_minor(p.cuda.version)
    if mm not in row["cuda"]:
        # The index's contents cannot be read where the knowledge is checked: such a row is
        # marked unverified and the rule only warns.
        text = (f"torch {pin} has no wheels for CUDA {mm} (download.pytorch.org/whl/"
                f"cu{mm.replace('.', '')} does not carry it")
        if is_unverified(row, "cuda"):
            c.warn(("cuda", "version"), text + ", unverified)", "use a CUDA version whose "
                   "major.minor is one of: " + ", ".join(row["cuda"]))
        else:
            c.error(("cuda", "version"), text + ")", edits=cuda.version_edits(
                c.facts, p.cuda.version, lambda v: f"{v.major}.{v.minor}" in row["cuda"]))
    check_python(c, pin, row)


def check_python(c: Context, pin: str, row: dict[str, Any]) -> None:
    """torch-python: the profile's Python is inside the release's wheel range."""
    if not in_range(c.p.python + ".0", row["python"]):
        c.error(("python",), f"torch {pin} supports Python {row['python']}, "
                f"but python is {c.p.python}",
                edits=python.version_edits(c.facts, c.p.python, row["python"]))


# "remove build.torch_from": its default, torch from PyTorch's CUDA-matched index
_PYTORCH_INDEX = Edit.set("build.torch_from", "pytorch-index",
                          "set build.torch_from: pytorch-index (PyTorch's CUDA-matched index)")


def check_main_index(c: Context, pin: str, row: dict[str, Any]) -> None:
    """torch-main-index: PyPI's wheel of the pinned torch must be built for the profile's
    CUDA major, or the image would carry torch for another CUDA than its base and kernels.

    ``pypi_cuda_major`` is read from the wheels' metadata (``cuda-toolkit==13.x`` or
    ``nvidia-*-cu12`` dependencies) by ``python -m dockergen.maint.knowledge check``.
    """
    major = cuda.major_minor(c.p.cuda.version).split(".")[0]
    built_for = row.get("pypi_cuda_major")
    minor = ".".join(pin.split(".")[:2])
    if built_for is None:
        c.error(("build", "torch_from"), f"the knowledge does not say which CUDA PyPI's "
                f"torch {pin} wheel is built for (torch.yaml {minor}: no pypi_cuda_major)",
                edits=[_PYTORCH_INDEX])
    elif str(built_for) != major:
        c.error(("build", "torch_from"), f"PyPI's torch {pin} wheel is built for CUDA "
                f"{built_for} (its CUDA {built_for} library dependencies), but cuda.version "
                f"is {c.p.cuda.version} (CUDA {major})",
                edits=[_PYTORCH_INDEX, *cuda.version_edits(
                    c.facts, c.p.cuda.version, lambda v: str(v.major) == str(built_for))])
    check_python(c, pin, row)


def derive(c: Context, d: list[Derivation], mode: Mode) -> TorchInstall:
    """The torch pin and its index."""
    p = c.p
    pin = c.torch_pin or ""
    release = c.release or {}
    d.append(Derivation("torch", pin, f"pinned by {p.engine.name}=={p.engine.version}"
                        if not p.engine.torch else "engine.torch", release.get("src", "")))
    mm = cuda.major_minor(p.cuda.version)
    if p.build.torch_from == "main-index":
        url = p.build.pip_index_url or MAIN_INDEX
        major = mm.split(".")[0]
        d.append(Derivation("torch index", url, "build.torch_from: main-index: PyPI's torch "
                            f"{pin} wheel is built for CUDA {major} and brings the CUDA "
                            "libraries as wheels", "torch.yaml pypi_cuda_major (PYPI wheel "
                            "metadata)"))
        return TorchInstall(version=pin, index=url, venv=VENV, mode=mode,
                            from_main_index=True, cuda=major)
    url = index_url(p.build.torch_index_url, p.cuda.version)
    d.append(Derivation("torch index", url, f"CUDA-matched wheels for {p.cuda.version}",
                        "engines-compat.md §6 pytorch_index"))
    return TorchInstall(version=pin, index=url, venv=VENV, mode=mode, cuda=mm)


def smoke_import(install: TorchInstall) -> SmokeImport:
    """torch must import at the pinned version (its CUDA is checked beside it)."""
    return SmokeImport("torch", "torch", install.version)


# torch.cuda.get_arch_list() answers [] without a GPU; the list it would give is compiled in
# (torch/cuda/__init__.py: torch._C._cuda_getArchFlags()).
ARCH_SCRIPT = """
import json, torch
print(json.dumps({"cuda": torch.version.cuda, "archs": torch._C._cuda_getArchFlags()}))
"""


_ARCH_FLAG = re.compile(r"(sm|compute)_([0-9]+)([a-z]?)")


def runs_on(archs: list[str], cc: str) -> bool:
    """Whether torch's compiled arch list holds code for a compute capability: SASS
    ``sm_XY`` runs within its major on equal or newer minors (``sm_90a`` only on 9.0), PTX
    ``compute_XY`` JIT-compiles for every newer GPU. The rule is the image audit's
    (:func:`dockergen.knowledge.kernels.runs_on`), given torch's names as the audit's codes."""
    codes = [f"{'sass' if m[1] == 'sm' else 'ptx'}_{m[2]}{'a' if m[3] == 'a' else ''}"
             for arch in archs if (m := _ARCH_FLAG.fullmatch(arch))]
    return kernels.runs_on(codes, cc)


def cuda_problem(install: TorchInstall, reported: object) -> str | None:
    """Why the CUDA torch reports (``torch.version.cuda``) is not the install's, if it is
    not: the exact major.minor, or only the major for PyPI's wheel (build.torch_from)."""
    seen = str(reported)
    if (seen.split(".")[0] if install.from_main_index else seen) == install.cuda:
        return None
    return (f"torch is built for CUDA {seen}, expected {install.cuda}"
            + (".x (torch from the main index)" if install.from_main_index else ""))


def arch_check(install: TorchInstall, targets: dict[str, str]) -> CommandCheck:
    """torch reports the profile's CUDA and an arch list that covers every target
    (``targets``: GPU name -> compute capability)."""
    def verify(code: int, out: str) -> tuple[bool, str]:
        got = last_json_line(out)
        if got is None:
            return False, out.strip()[-500:] or f"exit {code}"
        archs = str(got.get("archs") or "").split()
        cuda_seen = str(got.get("cuda"))
        wrong = cuda_problem(install, cuda_seen)
        bad = [wrong] if wrong else []
        bad += [f"no code for {name} ({cc})" for name, cc in sorted(targets.items())
                if not runs_on(archs, cc)]
        summary = f"CUDA {cuda_seen}, {' '.join(archs) or 'no archs'}"
        return code == 0 and not bad, "; ".join(bad) + f" ({summary})" if bad else summary

    return CommandCheck("torch reports the profile's CUDA and code for every target GPU",
                        (f"{install.venv}/bin/python", "-c", ARCH_SCRIPT), verify)


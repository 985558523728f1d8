"""torch: the pin every compiled extension is built against, from the CUDA-matched index.

Owns ``torch.yaml`` (per torch minor: Python range and the CUDA indexes of
download.pytorch.org), the checks on the pin the serving engine establishes
(``engine.torch`` override, known release, CUDA index exists, Python range), the torch
derivations and the template ``templates/components/torch.j2``. Runtime part: none of
its own (torch lives in the venv the Python component copies).
May import: :mod:`dockergen.components.base`, :mod:`dockergen.components.cuda`,
:mod:`dockergen.knowledge`, :mod:`dockergen.model`.
"""

from __future__ import annotations

import re
from typing import Any

from packaging.version import Version

from dockergen.components import cuda
from dockergen.components.base import Context
from dockergen.knowledge import in_range, is_unverified, load_facts
from dockergen.model import VENV, Derivation, Mode, SmokeImport, TorchInstall


def facts() -> dict[str, Any]:
    return load_facts("torch")


def release_row(torch_version: str) -> dict[str, Any] | None:
    """The row of a torch version's minor release (``2.14.0`` -> ``2.14``)."""
    v = Version(torch_version)
    entry = facts()["releases"].get(f"{v.major}.{v.minor}")
    return dict(entry) if entry is not None else None


def index_url(base_url: str, cuda_version: str) -> str:
    """PyTorch's CUDA-matched index, e.g. ``.../whl/cu130`` for CUDA 13.0.x."""
    return f"{base_url}/cu{cuda.major_minor(cuda_version).replace('.', '')}"


def check(c: Context) -> None:
    """torch-pin, torch-known, torch-cuda-index, torch-python (once the engine set a pin)."""
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
    row = release_row(pin)
    if row is None:
        c.error(("engine", "version"), f"torch {pin} is not in the knowledge base",
                "add its release row to dockergen/components/torch.yaml")
        return
    mm = cuda.major_minor(p.cuda.version)
    if mm not in row["cuda"]:
        # The index's contents cannot be read where the knowledge is checked: such a row is
        # marked unverified and the rule only warns.
        doubt = is_unverified(row, "cuda")
        report = c.warn if doubt else c.error
        report(("cuda", "version"), f"torch {pin} has no wheels for CUDA {mm} "
               f"(download.pytorch.org/whl/cu{mm.replace('.', '')} does not carry it"
               + (", unverified)" if doubt else ")"),
               "use a CUDA version whose major.minor is one of: " + ", ".join(row["cuda"]))
    if not in_range(p.python + ".0", row["python"]):
        c.error(("python",), f"torch {pin} supports Python {row['python']}, "
                f"but python is {p.python}", "pick a Python version inside that range")


def derive(c: Context, d: list[Derivation], mode: Mode) -> TorchInstall:
    """The torch pin and its index."""
    p = c.p
    pin = c.torch_pin or ""
    release = c.release or {}
    d.append(Derivation("torch", pin, f"pinned by {p.engine.name}=={p.engine.version}"
                        if not p.engine.torch else "engine.torch", release.get("src", "")))
    url = index_url(p.build.torch_index_url, p.cuda.version)
    d.append(Derivation("torch index", url, f"CUDA-matched wheels for {p.cuda.version}",
                        "engines-compat.md §6 pytorch_index"))
    return TorchInstall(version=pin, index=url, venv=VENV, mode=mode)


def smoke_import(install: TorchInstall) -> SmokeImport:
    """torch must import at the pinned version (its CUDA is checked beside it)."""
    return SmokeImport("torch", "torch", install.version)

"""The facts that differ per machine, read again from the wheels on the index.

An engine release's wheels are built per machine (x86_64, aarch64), each with its own glibc
floor (the manylinux tag) and its own CUDA arch list: vLLM 0.33.0's aarch64 build carries
no sm_75, sglang-kernel 0.4.10's starts at sm_90. The knowledge keeps them per machine
(each engine's ``wheel_platforms`` and ``kernels_aarch64`` tables); this module reads them
from PyPI (file lists through the simple API, the libraries' fatbin entries through HTTP
range requests, ~60 MiB of a ~300 MiB wheel) and lists every difference:
``python -m dockergen.maint.knowledge platforms``.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterable, Mapping
from typing import Any

from dockergen.knowledge import facts as knowledge
from dockergen.knowledge import kernels
from dockergen.maint import pypi
from dockergen.net.ranges import BLOCK

# PEP 600 / PEP 599 / PEP 513 platform tags -> the glibc they need (manylinux1 = 2.5,
# manylinux2010 = 2.12, manylinux2014 = 2.17)
_LEGACY = {"manylinux1": "2.5", "manylinux2010": "2.12", "manylinux2014": "2.17"}
_TAG = re.compile(r"(manylinux_(\d+)_(\d+)|manylinux1|manylinux2010|manylinux2014)_"
                  r"(x86_64|aarch64)")


def wheel_glibc(filename: str) -> dict[str, str]:
    """machine -> the lowest glibc among the wheel's manylinux platform tags (a wheel name
    may carry several, ``manylinux2010_x86_64.manylinux_2_12_x86_64``)."""
    found: dict[str, str] = {}
    for m in _TAG.finditer(filename.rsplit("-", 1)[-1]):
        glibc = f"{m.group(2)}.{m.group(3)}" if m.group(2) else _LEGACY[m.group(1)]
        machine = m.group(4)
        if machine not in found or _key(glibc) < _key(found[machine]):
            found[machine] = glibc
    return found


def _key(glibc: str) -> tuple[int, ...]:
    return tuple(int(x) for x in glibc.split("."))


def observed_platforms(package: str, version: str) -> dict[str, str]:
    """machine -> the lowest glibc any of the release's wheels on PyPI needs there (a
    machine it has no wheel for is absent)."""
    found: dict[str, str] = {}
    for f in pypi.files_of(pypi.project(package), version):
        if f.yanked or not f.filename.endswith(".whl"):
            continue
        for machine, glibc in wheel_glibc(f.filename).items():
            if machine not in found or _key(glibc) < _key(found[machine]):
                found[machine] = glibc
    return found


def kernel_row(package: str, version: str, machine: str,
               members: Iterable[str]) -> dict[str, Any]:
    """The kernels row (``{code: {member: [codes]}, src}``) of a package version's wheel for
    ``machine``, read from PyPI; ValueError where it cannot be read."""
    files = [f for f in pypi.files_of(pypi.project(package), version)
             if f.filename.endswith(f"_{machine}.whl") and not f.yanked]
    if not files:
        raise ValueError(f"{package} {version}: no {machine} wheel on PyPI")
    f = sorted(files, key=lambda w: w.filename)[-1]
    reader = pypi.range_reader(f.url, f.size)
    reader.prefetch(max(0, f.size - 4 * BLOCK), f.size)  # the central directory
    with zipfile.ZipFile(reader) as zf:
        return row_of(zf, f.filename, members)


def row_of(zf: zipfile.ZipFile, filename: str, members: Iterable[str]) -> dict[str, Any]:
    """The kernels row of an opened wheel: the code of each of ``members`` it holds
    (ValueError: none of them, or one without readable fatbin code)."""
    names = set(zf.namelist())
    code: dict[str, list[str]] = {}
    for member in sorted(m for m in members if m in names):
        try:
            found = kernels.code_of(zf.read(member))
        except kernels.KernelCodeError as exc:
            raise ValueError(f"{filename} {member}: {exc}") from None
        if not found:
            raise ValueError(f"{filename} {member}: no fatbin code")
        code[member] = list(found)
    if not code:
        raise ValueError(f"{filename}: none of {', '.join(members)}")
    return {"code": code, "src": f"{filename} .nv_fatbin (tools/kernel_archs.py)"}


def engines() -> dict[str, dict[str, Any]]:
    """Every serving engine's facts (``serving/<engine>`` -> its facts)."""
    return {f"serving/{name}": dict(rows) for name, rows in knowledge.facts().engines.items()}


def platform_differences(name: str, facts: Mapping[str, Any]) -> list[str]:
    """What differs between an engine's ``wheel_platforms`` rows and its wheels on PyPI."""
    out = []
    for version, row in sorted((facts.get("wheel_platforms") or {}).items()):
        have = {m: str(g) for m, g in row.items() if m in kernels.TABLE_OF_MACHINE}
        seen = observed_platforms(str(facts["package"]), version)
        if have != seen:
            out.append(f"{name} wheel_platforms {version}: the facts have {have}, PyPI's "
                       f"wheels {seen}")
    return out


def kernel_differences(name: str, facts: Mapping[str, Any], machine: str) -> list[str]:
    """What differs between an engine's kernels rows for ``machine`` and the wheels."""
    table = kernels.TABLE_OF_MACHINE[machine]
    if "kernel_libraries" not in facts:
        return []
    package = str(facts["kernel_libraries"]["package"])
    select = facts["kernel_libraries"]["select"]
    members = sorted({m for ms in select.values() for m in ms})
    out = []
    for version, row in sorted((facts.get(table) or {}).items()):
        try:
            seen = kernel_row(package, version, machine, members)
        except ValueError as exc:
            out.append(f"{name} {table} {version}: {exc}")
            continue
        if dict(row.get("code") or {}) != seen["code"]:
            out.append(f"{name} {table} {version}: the facts have {row.get('code')}, "
                       f"{seen['src'].split(' ', 1)[0]} {seen['code']}")
    return out


def differences(machines: Iterable[str] = ("aarch64",),
                facts_of: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
    """Every per-machine fact of every engine that differs from PyPI's wheels (``facts_of``:
    the facts to check, by default the shipped ones)."""
    out = []
    for name, facts in sorted((facts_of or engines()).items()):
        out += platform_differences(name, facts)
        for machine in machines:
            out += kernel_differences(name, facts, machine)
    return out

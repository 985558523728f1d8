#!/usr/bin/env python3
"""Read, per engine release, the GPU code of the compiled library every model loads.

An engine whose compiled kernels carry no code for a GPU cannot serve on it at all, however
the quantization floors read: the first custom op stops with "no kernel image is
available". Which library that is, per compute capability, is a fact of each engine
(``kernel_libraries`` in its facts file: vLLM's ``_C`` library; sglang-kernel's
``common_ops``, one build for 9.0 and one for every other GPU). This script reads those
libraries from the real x86_64 wheels on PyPI through HTTP range requests (the zip's
central directory, then only those members: ~60 MiB of a ~300 MiB wheel) and lists their
fatbin entries with the reader the whole-image audit uses (dockergen/knowledge/kernels.py).
The aarch64 wheels are builds of their own with other arch lists (vLLM 0.33.0's aarch64
build has no sm_75), so each machine has its own table: `kernels:` (x86_64) and
`kernels_aarch64:`.

Usage:
  python tools/kernel_archs.py [ENGINE[==VERSION] ...] [--check] [--machine aarch64]
    ENGINE       vllm or sglang (default: both); VERSION: one package version (for sglang,
                 the sglang-kernel version), default every one the facts know
    --check      compare with the facts' rows; exit 1 on any difference
    --machine    x86_64 (default) or aarch64: which wheels to read, which table to compare
Prints the rows to paste into the facts file otherwise.
"""

from __future__ import annotations

import re
import sys
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dockergen.knowledge import kernels  # noqa: E402 - after the path set-up
from dockergen.knowledge.facts import builtin_facts  # noqa: E402
from dockergen.maint import platforms  # noqa: E402

ENGINES = ("vllm", "sglang")


def package_versions(engine: str, table: str = "kernels") -> list[str]:
    """The versions of the kernel package the facts know for an engine (for a machine's
    own table other than x86_64's: the versions read for it so far, since older releases
    have no wheel for that machine)."""
    if table != "kernels":
        return sorted(builtin_facts(f"serving/{engine}").get(table, {}), key=pypi_version)
    facts = builtin_facts(f"serving/{engine}")
    package = facts["kernel_libraries"]["package"]
    if package == facts["package"]:
        found = set(facts["releases"])
    else:  # a separate kernel package pinned by every release row (`kernel: NAME==V`)
        found = {row["kernel"].split("==", 1)[1] for row in facts["releases"].values()}
    return sorted(found, key=pypi_version)


def pypi_version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def wanted(engine: str) -> list[str]:
    """The wheel members to read for an engine (every one its ``select`` names)."""
    select = builtin_facts(f"serving/{engine}")["kernel_libraries"]["select"]
    return sorted({m for members in select.values() for m in members})


def row_of(zf: zipfile.ZipFile, filename: str, members: list[str]) -> dict[str, Any]:
    """The `kernels:` row of a wheel: the code of each of ``members`` it holds."""
    try:
        return platforms.row_of(zf, filename, members)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


def read(engine: str, version: str, machine: str = "x86_64") -> dict[str, Any]:
    """The kernels row of one kernel-package version for one machine, read from PyPI
    (the reader `python -m dockergen.maint.knowledge platforms` checks with)."""
    package = builtin_facts(f"serving/{engine}")["kernel_libraries"]["package"]
    try:
        return platforms.kernel_row(package, version, machine, wanted(engine))
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


def difference(engine: str, version: str, have: dict[str, Any] | None,
               row: dict[str, Any]) -> str | None:
    """What differs between the facts' row and the wheel's, or None."""
    if (have or {}).get("code") == row["code"]:
        return None
    return f"{engine} {version}: the facts have {have!r}, the wheel {row['code']!r}"


def yaml_row(version: str, row: dict[str, Any]) -> str:
    """One row as the facts file writes it (flow style, one line)."""
    code = ", ".join(f'"{m}": [{", ".join(c)}]' for m, c in sorted(row["code"].items()))
    return f'  "{version}": {{code: {{{code}}}, src: "{row["src"]}"}}'


def main(argv: list[str]) -> int:
    """Command line (see the module docstring)."""
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    check = "--check" in argv
    machine = "x86_64"
    if "--machine" in argv:
        at = argv.index("--machine")
        machine = argv[at + 1] if at + 1 < len(argv) else ""
        argv = argv[:at] + argv[at + 2:]
    if machine not in kernels.TABLE_OF_MACHINE:
        print(f"--machine {machine}: not one of {', '.join(kernels.TABLE_OF_MACHINE)}",
              file=sys.stderr)
        return 2
    table = kernels.TABLE_OF_MACHINE[machine]
    wanted = [a for a in argv if not a.startswith("--")] or list(ENGINES)
    diff = 0
    for spec in wanted:
        engine, _, only = spec.partition("==")
        if engine not in ENGINES:
            print(f"{engine}: not one of {', '.join(ENGINES)}", file=sys.stderr)
            return 2
        have = builtin_facts(f"serving/{engine}").get(table, {})
        if not check:
            print(f"# serving/{engine} {table}:")
        for version in [only] if only else package_versions(engine, table):
            row = read(engine, version, machine)
            if not check:
                print(yaml_row(version, row))
            elif (line := difference(engine, version, have.get(version), row)) is not None:
                print(line, file=sys.stderr)
                diff += 1
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

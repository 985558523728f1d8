#!/usr/bin/env python3
"""Read, per vLLM release, each quantization method's minimum compute capability and the
FlashInfer packages the wheel requires (static: AST and METADATA; no torch, no GPU).

The floors are read by dockergen.parts.engines.vllm.wheel.quant_floors (its docstring
says which files and classes, and how alternatives combine); a layout it does not know
stops the script (exit 2): a wrong floor would be worse than none.

The wheel is read from PyPI with HTTP range requests (the zip's central directory, then the
few members: ~2 MB of a ~330 MB wheel), or from a local file with ``--wheel``.

Usage:
  python tools/vllm_quant.py [VERSION ...] [--wheel PATH ...] [--update]
    VERSION ...  releases to read (default: every release in vllm/facts.yaml `releases:`)
    --update     merge the result into dockergen/parts/engines/vllm/quant.json
    --check      compare with vllm/quant.json instead; exit 1 on any difference
    --yaml       print vllm/facts.yaml's per-release `min_cc` maps from vllm/quant.json
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dockergen.knowledge.facts import builtin_facts  # noqa: E402
from dockergen.maint import pypi  # noqa: E402
from dockergen.net.ranges import BLOCK  # noqa: E402
from dockergen.parts.engines.vllm.wheel import (  # noqa: E402 - after the path set-up
    METHODS,
    QUANT_MEMBERS,
    WheelLayoutError,
    quant_floors,
)

OUTPUT = ROOT / "dockergen" / "parts" / "engines" / "vllm" / "quant.json"
FLASHINFER = re.compile(r"^Requires-Dist:\s*(flashinfer[-_][^;\s]*[^;]*?)\s*(;.*)?$", re.M)
LayoutError = WheelLayoutError  # the wheel's layout is not what METHODS describes (exit 2)


def read_wheel(zf: zipfile.ZipFile, version: str) -> dict[str, Any]:
    """Minimums per dockergen method and the FlashInfer requirements of one wheel."""
    names = set(zf.namelist())
    members = {n: zf.read(n) for n in QUANT_MEMBERS if n in names}
    methods = quant_floors(members, f"vllm {version}")
    meta = [n for n in names if re.fullmatch(r"vllm-[^/]+\.dist-info/METADATA", n)]
    if len(meta) != 1:
        raise LayoutError(f"vllm {version}: no single METADATA")
    text = zf.read(meta[0]).decode("utf-8")
    flashinfer = sorted(m.group(1).replace(" ", "") + (
        f" ;{m.group(2)[1:]}" if m.group(2) else "") for m in FLASHINFER.finditer(text))
    return {"methods": methods, "flashinfer": flashinfer}


def from_pypi(version: str) -> dict[str, Any]:
    """Read one release's manylinux x86_64 wheel from PyPI (range requests)."""
    page = pypi.project("vllm")
    wheels = [f for f in pypi.files_of(page, version)
              if f.filename.endswith("x86_64.whl") and not f.yanked
              and f.filename.startswith(f"vllm-{version}-cp")]
    if not wheels:
        raise LayoutError(f"vllm {version}: no x86_64 wheel on PyPI")
    f = wheels[0]
    reader = pypi.range_reader(f.url, f.size)
    reader.prefetch(max(0, f.size - 4 * BLOCK), f.size)  # the central directory
    with zipfile.ZipFile(reader) as zf:
        out = read_wheel(zf, version)
    out["src"] = f"VLLM-WHEEL {version} {f.filename} sha256:{f.sha256}"
    return out


def from_file(wheel: Path) -> tuple[str, dict[str, Any]]:
    """Read a local wheel (its version from the file name)."""
    m = re.match(r"vllm-([^-]+)-", wheel.name)
    if m is None:
        raise SystemExit(f"{wheel.name}: not a vllm wheel name")
    import hashlib

    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    with zipfile.ZipFile(wheel) as zf:
        out = read_wheel(zf, m.group(1))
    out["src"] = f"VLLM-WHEEL {m.group(1)} {wheel.name} sha256:{digest}"
    return m.group(1), out


def ranges(releases: dict[str, Any], method: str) -> dict[str, str]:
    """A method's minimum as vllm/facts.yaml spells it: inclusive release spans with one value.

    Consecutive releases (in version order) with the same minimum form one span
    ``"FIRST..LAST"`` (one release: ``"FIRST"``); the rule reads no value for a release
    outside every span.
    """
    out: dict[str, str] = {}
    span: list[str] = []
    value = None
    for v in sorted(releases, key=_version):
        cc = releases[v]["methods"][method]["min_cc"]
        if span and cc != value:
            out[_span(span)] = str(value)
            span = []
        span.append(v)
        value = cc
    if span:
        out[_span(span)] = str(value)
    return out


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def _span(span: list[str]) -> str:
    return span[0] if len(span) == 1 else f"{span[0]}..{span[-1]}"


def dump(data: dict[str, Any]) -> str:
    """The checked-in form: sorted keys, one space indent, trailing newline."""
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    """Command line (see the module docstring)."""
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    if "--yaml" in argv:
        releases = json.loads(OUTPUT.read_text(encoding="utf-8"))["releases"]
        for method in METHODS:
            spans = ", ".join(f'"{k}": "{v}"' for k, v in ranges(releases, method).items())
            print(f"  {method}: {{min_cc: {{{spans}}}}}")
        return 0
    update, check = "--update" in argv, "--check" in argv
    wheels = [Path(argv[i + 1]) for i, a in enumerate(argv) if a == "--wheel"]
    skip = {str(w) for w in wheels}
    versions = [a for a in argv if not a.startswith("--") and a not in skip]
    if not versions and not wheels:
        versions = sorted(builtin_facts("serving/vllm")["releases"], key=_version)
    result: dict[str, Any] = {}
    try:
        for w in wheels:
            v, row = from_file(w)
            result[v] = row
        for v in versions:
            result[v] = from_pypi(v)
    except LayoutError as exc:
        print(f"{exc}; the wheel layout changed: update METHODS in {__file__}", file=sys.stderr)
        return 2
    if check:
        have = json.loads(OUTPUT.read_text(encoding="utf-8"))["releases"]
        diff = [f"vllm {v}: {OUTPUT.name} has {have.get(v)!r}, the wheel {row!r}"
                for v, row in sorted(result.items()) if have.get(v) != row]
        for line in diff:
            print(line, file=sys.stderr)
        return 1 if diff else 0
    if update:
        data: dict[str, Any]
        data = json.loads(OUTPUT.read_text(encoding="utf-8")) if OUTPUT.exists() else {
            "about": "Per vLLM release: each quantization method's minimum compute capability "
                     "(get_min_capability, by AST) and the wheel's FlashInfer Requires-Dist, "
                     "read from the real wheel by tools/vllm_quant.py (see its docstring).",
            "releases": {}}
        data["releases"].update(result)
        OUTPUT.write_text(dump(data), encoding="utf-8")
        print(f"{OUTPUT}: {len(result)} release(s)")
    else:
        print(dump(result), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

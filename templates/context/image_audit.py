"""dockergen whole-image audit: every shared object of the image can load and run here.

Runs inside the built runtime image (standard library only; ``ldd`` from libc). For every
ELF file under the given roots:
- every ``DT_NEEDED`` library resolves (``ldd`` prints no "not found"), except the driver
  libraries the NVIDIA container runtime mounts at start (libcuda, libnvidia-*);
- a library that links the CUDA runtime (``libcudart.so.N``) links the image's CUDA major;
- a library that carries CUDA code (an ``.nv_fatbin`` section) holds, for every target
  compute capability, SASS it can run (same major, minor <= the GPU's) or PTX it can JIT
  (version <= the GPU's); otherwise the GPU stops with "no kernel image is available".
The fatbin entries are read directly (no cuobjdump in a runtime image); the test suite
checks this reader against NVIDIA's cuobjdump on code compiled by the real nvcc.

Usage: image_audit.py --cuda-major 13 --targets 8.0,9.0 [--skip-arch GLOB ...] ROOT...
Prints one JSON object; exit 0 when nothing is wrong, 1 otherwise, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import struct
import subprocess
import sys

FATBIN_MAGIC = 0xBA55ED50
DRIVER_LIBS = re.compile(r"^(libcuda\.so|libnvidia-|libnvcuvid\.so|libnvoptix\.so)")
CUDART = re.compile(r"^libcudart\.so\.(\d+)")


def elf_sections(data: bytes) -> dict[str, tuple[int, int]]:
    """Section name -> (offset, size) of a 64-bit little-endian ELF file."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return {}
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if not shoff or shstrndx >= shnum:
        return {}
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
               for i in range(shnum)]
    str_off = headers[shstrndx][4]
    out = {}
    for name_off, _type, _flags, _addr, offset, size, *_rest in headers:
        end = data.index(b"\0", str_off + name_off)
        out[data[str_off + name_off:end].decode("ascii", "replace")] = (offset, size)
    return out


def needed(data: bytes, sections: dict[str, tuple[int, int]]) -> list[str]:
    """The DT_NEEDED entries of a shared object."""
    if ".dynamic" not in sections or ".dynstr" not in sections:
        return []
    dyn_off, dyn_size = sections[".dynamic"]
    str_off, _ = sections[".dynstr"]
    names = []
    for i in range(dyn_size // 16):
        tag, value = struct.unpack_from("<qQ", data, dyn_off + i * 16)
        if tag == 0:
            break
        if tag == 1:  # DT_NEEDED
            end = data.index(b"\0", str_off + value)
            names.append(data[str_off + value:end].decode("ascii", "replace"))
    return names


def fatbin_code(data: bytes, sections: dict[str, tuple[int, int]]) -> set[tuple[str, int]]:
    """(``"sass"`` or ``"ptx"``, arch such as 90) of every entry of the ``.nv_fatbin`` section.

    Layout: a 16-byte header (magic 0xBA55ED50, version, header size, size of the entries)
    per embedded fatbin, then entries, each a header (kind 1 = PTX, 2 = ELF; its own header
    size; payload size; arch at offset 28) followed by its payload.
    """
    if ".nv_fatbin" not in sections:
        return set()
    start, size = sections[".nv_fatbin"]
    end = start + size
    found: set[tuple[str, int]] = set()
    pos = start
    while pos + 16 <= end:
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # fatbins are 8-byte aligned; skip padding
            continue
        entry = pos + header_size
        stop = min(entry + fat_size, end)
        while entry + 32 <= stop:
            kind, _unknown, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            arch, = struct.unpack_from("<I", data, entry + 28)
            if kind in (1, 2):
                found.add(("ptx" if kind == 1 else "sass", arch))
            if entry_header == 0:
                break
            entry += entry_header + payload
        pos = stop
    return found


def runs_on(code: set[tuple[str, int]], cc: tuple[int, int]) -> bool:
    """SASS runs within its major on equal or newer minors; PTX JIT-compiles forward."""
    major, minor = cc
    for kind, arch in code:
        a_major, a_minor = divmod(arch, 10)
        if kind == "sass" and a_major == major and a_minor <= minor:
            return True
        if kind == "ptx" and (a_major, a_minor) <= (major, minor):
            return True
    return False


def unresolved(path: str) -> list[str]:
    """Libraries ``ldd`` cannot find for a file (driver libraries excepted)."""
    result = subprocess.run(["ldd", path], capture_output=True, text=True, check=False)
    missing = []
    for line in result.stdout.splitlines():
        if "not found" in line:
            name = line.strip().split()[0]
            if not DRIVER_LIBS.match(name):
                missing.append(name)
    return missing


def audit(roots: list[str], cuda_major: int, targets: list[tuple[int, int]],
          skip_arch: list[str]) -> dict[str, object]:
    problems: list[str] = []
    elves = cuda_libs = 0
    for root in roots:
        for folder, _dirs, files in os.walk(root):
            for name in sorted(files):
                path = os.path.join(folder, name)
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                with open(path, "rb") as fh:
                    if fh.read(4) != b"\x7fELF":
                        continue
                    fh.seek(0)
                    data = fh.read()
                sections = elf_sections(data)
                if ".dynamic" not in sections:
                    continue  # static executables and objects load nothing
                elves += 1
                problems += [f"{path}: needs {lib}, which is not in the image"
                             for lib in unresolved(path)]
                for lib in needed(data, sections):
                    m = CUDART.match(lib)
                    if m and int(m.group(1)) != cuda_major:
                        problems.append(f"{path}: links {lib}, but the image has CUDA "
                                        f"{cuda_major}")
                code = fatbin_code(data, sections)
                if not code:
                    continue
                cuda_libs += 1
                if any(fnmatch.fnmatch(path, pattern) for pattern in skip_arch):
                    continue
                for cc in targets:
                    if not runs_on(code, cc):
                        have = ", ".join(f"{k}_{a}" for k, a in sorted(code))
                        problems.append(f"{path}: no code for compute capability "
                                        f"{cc[0]}.{cc[1]} (has {have})")
    return {"ok": not problems, "elf_files": elves, "cuda_libraries": cuda_libs,
            "problems": problems}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuda-major", type=int, required=True)
    parser.add_argument("--targets", required=True, help="compute capabilities, e.g. 8.0,9.0")
    parser.add_argument("--skip-arch", action="append", default=[],
                        help="glob of libraries built for one arch only (loaded per GPU)")
    parser.add_argument("roots", nargs="+")
    args = parser.parse_args()
    targets = [tuple(int(x) for x in t.split(".")) for t in args.targets.split(",")]
    report = audit(args.roots, args.cuda_major, targets, args.skip_arch)  # type: ignore[arg-type]
    print(json.dumps(report, sort_keys=True))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

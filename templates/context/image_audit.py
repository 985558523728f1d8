"""dockergen whole-image audit: every shared object of the image can load and run here.

Runs inside the built runtime image (standard library only; ``ldd`` from libc). For every
ELF file under the given roots:
- every ``DT_NEEDED`` library resolves: ``ldd`` finds it, or the image holds a library of
  that name (torch extensions need ``libc10.so`` without a RUNPATH: the loader reuses the
  copy ``import torch`` loaded), except the driver libraries the NVIDIA container runtime
  mounts at start (libcuda, libnvidia-*);
- a library that links the CUDA runtime (``libcudart.so.N``) links the image's CUDA major;
- a library that carries CUDA code (an ``.nv_fatbin`` section) holds, for every target
  compute capability, SASS it can run (same major, minor <= the GPU's; arch-specific
  ``sm_90a`` code only on exactly 9.0) or PTX it can JIT (version <= the GPU's; ``a`` PTX
  only on its own arch); otherwise the GPU stops with "no kernel image is available".
  Libraries an engine ships for some GPU families only (``--arch-scope GLOB=CC,...``, from
  the engine's facts) are checked against the targets in their scope only.
The fatbin entries are read directly (no cuobjdump in a runtime image); the test suite
checks this reader against NVIDIA's cuobjdump on code compiled by the real nvcc.

Exceptions are facts with their source (``dockergen/components/python.yaml``): plugins loaded
with dlopen only when a feature is used excuse exactly the libraries of that feature
(``--optional``), and libraries that keep their kernels outside the fatbin skip the arch check
(``--kernels-elsewhere``).

Usage: image_audit.py --cuda-major 13 --targets 8.0,9.0 [--arch-scope GLOB=CC,... ...]
       [--optional GLOB=LIB,... ...] [--kernels-elsewhere GLOB ...] ROOT...
Prints one JSON object; exit 0 when nothing is wrong, 1 otherwise, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import mmap
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
        end = data.find(b"\0", str_off + name_off)
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
            end = data.find(b"\0", str_off + value)
            names.append(data[str_off + value:end].decode("ascii", "replace"))
    return names


def fatbin_code(data: bytes, sections: dict[str, tuple[int, int]]
                ) -> set[tuple[str, int, str]]:
    """(``"sass"`` or ``"ptx"``, arch such as 90, ``""`` or ``"a"``) of every fatbin entry.

    Layout: a 16-byte header (magic 0xBA55ED50, version, header size, size of the entries)
    per embedded fatbin, then entries, each a header (kind 1 = PTX, 2 = ELF; its own header
    size; payload size; arch at offset 28; flags at offset 40, where 0x100000 marks
    arch-specific ``a`` code) followed by its payload. cuobjdump lists the same entries.
    """
    if ".nv_fatbin" not in sections:
        return set()
    start, size = sections[".nv_fatbin"]
    end = start + size
    found: set[tuple[str, int, str]] = set()
    pos = start
    while pos + 16 <= end:
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # fatbins are 8-byte aligned; skip padding
            continue
        entry = pos + header_size
        stop = min(entry + fat_size, end)
        while entry + 48 <= stop:
            kind, _unknown, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            arch, = struct.unpack_from("<I", data, entry + 28)
            flags, = struct.unpack_from("<Q", data, entry + 40)
            # family "f" code (0x200000) runs like plain code within its major
            suffix = "a" if flags & 0x100000 else ""
            if kind in (1, 2):
                found.add(("ptx" if kind == 1 else "sass", arch, suffix))
            if entry_header == 0:
                break
            entry += entry_header + payload
        pos = stop
    return found


def runs_on(code: set[tuple[str, int, str]], cc: tuple[int, int]) -> bool:
    """SASS runs within its major on equal or newer minors, ``a`` SASS on its exact arch;
    PTX JIT-compiles forward, ``a`` PTX only for its exact arch."""
    major, minor = cc
    for kind, arch, suffix in code:
        a_major, a_minor = divmod(arch, 10)
        if suffix == "a":
            ok = (a_major, a_minor) == (major, minor)
        elif kind == "sass":
            ok = a_major == major and a_minor <= minor
        else:
            ok = (a_major, a_minor) <= (major, minor)
        if ok:
            return True
    return False


def describe(code: set[tuple[str, int, str]]) -> str:
    return ", ".join(f"{kind}_{arch}{suffix}" for kind, arch, suffix in sorted(code))


def unresolved(path: str, provided: set[str], excused: list[str] = ()) -> list[str]:
    """Libraries ``ldd`` (the loader itself: RPATH, RUNPATH and ``$ORIGIN`` as it resolves
    them) cannot find and the image does not hold, less the driver libraries and the names
    ``excused`` (globs) for this file: what an optional plugin needs for its feature."""
    result = subprocess.run(["ldd", path], capture_output=True, text=True, check=False)
    missing = []
    for line in result.stdout.splitlines():
        if "not found" in line:
            name = line.strip().split()[0]
            if DRIVER_LIBS.match(name) or name in provided:
                continue
            if any(fnmatch.fnmatch(name, glob) for glob in excused):
                continue
            missing.append(name)
    return missing


def _elf_files(roots: list[str]) -> list[str]:
    out = []
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs.sort()  # the same order, and so the same report, on every machine
            for name in sorted(files):
                path = os.path.join(folder, name)
                if os.path.islink(path) or not os.path.isfile(path):
                    continue
                with open(path, "rb") as fh:
                    if fh.read(4) == b"\x7fELF":
                        out.append(path)
    return out


def _soname(data: bytes, sections: dict[str, tuple[int, int]]) -> str | None:
    if ".dynamic" not in sections or ".dynstr" not in sections:
        return None
    dyn_off, dyn_size = sections[".dynamic"]
    str_off, _ = sections[".dynstr"]
    for i in range(dyn_size // 16):
        tag, value = struct.unpack_from("<qQ", data, dyn_off + i * 16)
        if tag == 0:
            break
        if tag == 14:  # DT_SONAME
            end = data.find(b"\0", str_off + value)
            return data[str_off + value:end].decode("ascii", "replace")
    return None


def audit(roots: list[str], cuda_major: int, targets: list[tuple[int, int]],
          scopes: list[tuple[str, set[tuple[int, int]]]],
          optional: list[tuple[str, list[str]]] = (),
          elsewhere: list[str] = ()) -> dict[str, object]:
    problems: list[str] = []
    elves = cuda_libs = 0
    paths = _elf_files(roots)
    provided = {os.path.basename(p) for p in paths}
    for path in paths:  # names a library is loaded by, besides its file name
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
            soname = _soname(m, elf_sections(m))  # type: ignore[arg-type]
            if soname:
                provided.add(soname)
    for path in paths:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            sections = elf_sections(data)  # type: ignore[arg-type]
            if ".dynamic" not in sections:
                continue  # static executables and objects load nothing
            elves += 1
            excused = [lib for glob, libs in optional if fnmatch.fnmatch(path, glob)
                       for lib in libs]
            problems += [f"{path}: needs {lib}, which is not in the image"
                         for lib in unresolved(path, provided, excused)]
            for lib in needed(data, sections):  # type: ignore[arg-type]
                m = CUDART.match(lib)
                # a build for another CUDA major that its package never loads here
                other_build = any(fnmatch.fnmatch(lib, glob) for glob in excused)
                if m and int(m.group(1)) != cuda_major and not other_build:
                    problems.append(f"{path}: links {lib}, but the image has CUDA "
                                    f"{cuda_major}")
            code = fatbin_code(data, sections)  # type: ignore[arg-type]
        if not code or any(fnmatch.fnmatch(path, glob) for glob in elsewhere):
            continue
        cuda_libs += 1
        wanted = targets
        for pattern, scope in scopes:
            if fnmatch.fnmatch(path, pattern):
                wanted = [cc for cc in targets if cc in scope]
        for cc in wanted:
            if not runs_on(code, cc):
                problems.append(f"{path}: no code for compute capability {cc[0]}.{cc[1]} "
                                f"(has {describe(code)})")
    return {"ok": not problems, "elf_files": elves, "cuda_libraries": cuda_libs,
            "problems": sorted(problems)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuda-major", type=int, required=True)
    parser.add_argument("--targets", required=True, help="compute capabilities, e.g. 8.0,9.0")
    parser.add_argument("--arch-scope", action="append", default=[], metavar="GLOB=CC,...",
                        help="a library the engine loads only on these compute capabilities")
    parser.add_argument("--optional", action="append", default=[], metavar="GLOB=LIB,...",
                        help="a plugin loaded only for a feature: these missing libraries "
                             "(globs) are that feature's")
    parser.add_argument("--kernels-elsewhere", action="append", default=[], metavar="GLOB",
                        help="a library whose kernels are not in .nv_fatbin")
    parser.add_argument("roots", nargs="+")
    args = parser.parse_args()
    targets = [tuple(int(x) for x in t.split(".")) for t in args.targets.split(",")]
    scopes = []
    for item in args.arch_scope:
        pattern, _, ccs = item.partition("=")
        scopes.append((pattern, {tuple(int(x) for x in cc.split(".")) for cc in ccs.split(",")}))
    optional = [(item.partition("=")[0], item.partition("=")[2].split(","))
                for item in args.optional]
    report = audit(args.roots, args.cuda_major, targets, scopes,  # type: ignore[arg-type]
                   optional, args.kernels_elsewhere)
    print(json.dumps(report, sort_keys=True))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

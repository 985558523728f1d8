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
  the engine's facts) are checked against the targets in their scope only;
- with ``--machine N``: every ELF file is for the image's CPU (ELF ``e_machine``: 62 x86-64,
  183 aarch64); CUDA device code (190) is not CPU code and passes. A wheel of the other
  architecture in an arm64 image loads nowhere there ("cannot open shared object file").
The fatbin entries are read directly (no cuobjdump in a runtime image); the test suite
checks this reader against NVIDIA's cuobjdump on code compiled by the real nvcc.

Exceptions are facts with their source (``dockergen/parts/python.yaml``): plugins loaded
with dlopen only when a feature is used excuse exactly the libraries of that feature
(``--optional``), and libraries that keep their kernels outside the fatbin skip the arch check
(``--kernels-elsewhere``).

Usage: image_audit.py --cuda-major 13 --targets 8.0,9.0 [--machine 183]
       [--arch-scope GLOB=CC,... ...] [--optional GLOB=LIB,... ...]
       [--kernels-elsewhere GLOB ...] ROOT...
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
# ELF e_machine values (src: the System V gABI's registry, /usr/include/elf.h EM_*)
MACHINES = {3: "i386", 40: "arm", 62: "x86-64", 183: "aarch64", 190: "cuda", 224: "amdgpu"}
EM_CUDA = 190  # cubins: GPU code, loaded by the driver, whatever the host CPU
# GPU code objects of any vendor: SGLang 0.5.23's wheel ships AMD ones
# (sglang/kernels/ops/attention/dsv4/asm/gfx950/*.co, EM_AMDGPU), loaded by ROCm only
GPU_MACHINES = (EM_CUDA, 224)
# The first word of a GNU target triple naming each CPU. A folder named by another CPU's
# triple holds what a package ships for cross-compiling, never loaded here (the real vLLM
# image: nvidia_cutlass_dsl/cu13/lib/stubs/aarch64-unknown-linux-gnu/libcute_dsl_runtime.so
# in the x86-64 image, read 2026-12-06).
TRIPLE_CPU = {"x86_64": 62, "amd64": 62, "i386": 3, "i686": 3, "aarch64": 183, "arm64": 183,
              "arm": 40, "armv7": 40}


class ElfError(ValueError):
    """A file that starts as an ELF file but whose headers point past its end, or a fatbin
    whose sizes would not move the reader forward: the file cannot be loaded as it is."""


def _unpack(fmt: str, data: bytes, offset: int, limit: int | None = None) -> tuple[int, ...]:
    """``struct.unpack_from`` that refuses to read past ``limit`` (the file's end)."""
    limit = len(data) if limit is None else limit
    size = struct.calcsize(fmt)
    if offset < 0 or offset + size > limit:
        raise ElfError(f"{size} bytes at offset {offset} run past the end ({limit} bytes)")
    return struct.unpack_from(fmt, data, offset)


def _string(data: bytes, start: int, table: tuple[int, int]) -> str:
    """The NUL-terminated name at ``start`` inside a string table (offset, size)."""
    end = data.find(b"\0", start, table[0] + table[1]) if start >= table[0] else -1
    if end < 0:
        raise ElfError(f"a name at offset {start} runs past its string table")
    return data[start:end].decode("ascii", "replace")


def _section(data: bytes, sections: dict[str, tuple[int, int]], name: str) -> tuple[int, int]:
    """(offset, size) of a section this reader reads, checked to lie inside the file."""
    offset, size = sections[name]
    if offset + size > len(data):
        raise ElfError(f"section {name} ({size} bytes at offset {offset}) runs past the "
                       f"file's end ({len(data)} bytes)")
    return offset, size


def elf_sections(data: bytes) -> dict[str, tuple[int, int]]:
    """Section name -> (offset, size) of a 64-bit little-endian ELF file; empty for any
    other file. :class:`ElfError` when its section headers lie outside it."""
    if data[:4] != b"\x7fELF":
        return {}
    if len(data) < 64:
        raise ElfError(f"the file is cut short: {len(data)} bytes, under an ELF header's 64")
    if data[4:6] != b"\x02\x01":
        return {}
    shoff, = _unpack("<Q", data, 0x28)
    shentsize, shnum, shstrndx = _unpack("<HHH", data, 0x3A)
    if not shoff or shstrndx >= shnum:
        return {}
    if shentsize < 64:
        raise ElfError(f"section header entries of {shentsize} bytes, under ELF64's 64")
    headers = [_unpack("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = (headers[shstrndx][4], headers[shstrndx][5])
    if sum(strtab) > len(data):
        raise ElfError("the section name table runs past the file's end")
    return {_string(data, strtab[0] + name_off, strtab): (offset, size)
            for name_off, _type, _flags, _addr, offset, size, *_rest in headers}


def _dynamic(data: bytes, sections: dict[str, tuple[int, int]], wanted: int) -> list[str]:
    """The names of the ``.dynamic`` entries tagged ``wanted``, up to its DT_NULL."""
    if ".dynamic" not in sections or ".dynstr" not in sections:
        return []
    dyn_off, dyn_size = _section(data, sections, ".dynamic")
    strtab = _section(data, sections, ".dynstr")
    names = []
    for i in range(dyn_size // 16):
        tag, value = _unpack("<qQ", data, dyn_off + i * 16)
        if tag == 0:
            break
        if tag == wanted:
            names.append(_string(data, strtab[0] + value, strtab))
    return names


def needed(data: bytes, sections: dict[str, tuple[int, int]]) -> list[str]:
    """The DT_NEEDED entries of a shared object."""
    return _dynamic(data, sections, 1)


def fatbin_code(data: bytes, sections: dict[str, tuple[int, int]]
                ) -> set[tuple[str, int, str]]:
    """(``"sass"`` or ``"ptx"``, arch such as 90, ``""`` or ``"a"``) of every fatbin entry.

    Layout: a 16-byte header (magic 0xBA55ED50, version, header size, size of the entries)
    per embedded fatbin, then entries, each a header (kind 1 = PTX, 2 = ELF; its own header
    size; payload size; arch at offset 28; flags at offset 40, where 0x100000 marks
    arch-specific ``a`` code) followed by its payload. cuobjdump lists the same entries.
    Every step moves forward (a header is at least its own 16 bytes) and stays inside the
    section, or :class:`ElfError` says where it would not.
    """
    if ".nv_fatbin" not in sections:
        return set()
    start, size = _section(data, sections, ".nv_fatbin")
    end = start + size
    found: set[tuple[str, int, str]] = set()
    pos = start
    while pos + 16 <= end:
        magic, _version, header_size, fat_size = _unpack("<IHHQ", data, pos, end)
        if magic != FATBIN_MAGIC:
            pos += 8  # fatbins are 8-byte aligned; skip padding
            continue
        if header_size < 16:
            raise ElfError(f"fatbin at offset {pos}: a header size of {header_size}, under "
                           "the header's own 16 bytes")
        stop = pos + header_size + fat_size
        if stop > end:
            raise ElfError(f"fatbin at offset {pos}: {fat_size} bytes of entries run past "
                           f"the .nv_fatbin section's end ({end})")
        found |= _fatbin_entries(data, pos + header_size, stop)
        pos = stop
    return found


def _fatbin_entries(data: bytes, entry: int, stop: int) -> set[tuple[str, int, str]]:
    """The code of the entries of one fatbin, from ``entry`` up to ``stop``."""
    found: set[tuple[str, int, str]] = set()
    while entry + 48 <= stop:
        kind, _unknown, entry_header, payload = _unpack("<HHIQ", data, entry, stop)
        arch, = _unpack("<I", data, entry + 28, stop)
        flags, = _unpack("<Q", data, entry + 40, stop)
        # family "f" code (0x200000) runs like plain code within its major
        suffix = "a" if flags & 0x100000 else ""
        if kind in (1, 2):
            found.add(("ptx" if kind == 1 else "sass", arch, suffix))
        if entry_header == 0:
            break
        if entry_header < 48:
            raise ElfError(f"fatbin entry at offset {entry}: a header size of "
                           f"{entry_header}, under the 48 bytes read from it")
        if entry + entry_header + payload > stop:
            raise ElfError(f"fatbin entry at offset {entry}: {payload} bytes of payload run "
                           "past its fatbin's end")
        entry += entry_header + payload
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


def elf_machine(path: str) -> int:
    """The ``e_machine`` of an ELF file (little-endian, at offset 18 in ELF32 and ELF64)."""
    with open(path, "rb") as fh:
        head = fh.read(20)
    if len(head) < 20:
        raise ElfError(f"the file is cut short: {len(head)} bytes, under an ELF header's 20")
    return int(struct.unpack_from("<H", head, 18)[0])


def for_another_target(path: str, machine: int) -> bool:
    """Whether ``path`` is a Python package's file in a folder named by another CPU's
    target triple (``.../aarch64-unknown-linux-gnu/...`` in an x86-64 image): material for
    cross-compiling. Only inside site-packages: the system's own multiarch folders
    (/usr/lib/x86_64-linux-gnu) hold what the image loads, and stay audited."""
    parts = path.split("/")[:-1]
    if "site-packages" not in parts and "dist-packages" not in parts:
        return False
    return any(TRIPLE_CPU.get(part.split("-", 1)[0], machine) != machine
               for part in parts if "-" in part)


def machine_problems(paths: list[str], machine: int) -> list[str]:
    """Every ELF file for another CPU than ``machine`` (GPU code of any vendor, and what
    lies in a folder named by another CPU's target triple, excepted)."""
    problems = []
    want = MACHINES.get(machine, str(machine))
    for path in paths:
        if for_another_target(path, machine):
            continue
        try:
            found = elf_machine(path)
        except (ElfError, OSError) as exc:
            problems.append(f"{path}: cannot read its ELF header: {exc}")
            continue
        if found != machine and found not in GPU_MACHINES:
            problems.append(f"{path}: an ELF file for {MACHINES.get(found, str(found))} "
                            f"(e_machine {found}), not {want} (e_machine {machine}): this "
                            "image's CPU cannot load it")
    return problems


def _soname(data: bytes, sections: dict[str, tuple[int, int]]) -> str | None:
    names = _dynamic(data, sections, 14)  # DT_SONAME
    return names[0] if names else None


def _read(path: str) -> tuple[bool, str | None, list[str], set[tuple[str, int, str]]]:
    """(whether it loads libraries, its soname, its DT_NEEDED, its fatbin code)."""
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
        data: bytes = m  # type: ignore[assignment]  # mmap reads as bytes do
        sections = elf_sections(data)
        return (".dynamic" in sections, _soname(data, sections), needed(data, sections),
                fatbin_code(data, sections))


def audit(roots: list[str], cuda_major: int, targets: list[tuple[int, int]],
          scopes: list[tuple[str, set[tuple[int, int]]]],
          optional: list[tuple[str, list[str]]] = (),
          elsewhere: list[str] = (), listed: list[str] = (),
          machine: int | None = None) -> dict[str, object]:
    problems: list[str] = []
    elves = cuda_libs = 0
    paths = _elf_files(roots)
    if machine is not None:
        problems += machine_problems(paths, machine)
    read = {}
    for path in paths:
        try:
            read[path] = _read(path)
        except ElfError as exc:  # the loader cannot load it either: a problem, not a crash
            problems.append(f"{path}: starts as an ELF file but cannot be read as one: {exc}")
    # names a library is loaded by: its file name and its soname
    provided = {os.path.basename(p) for p in paths} | {
        soname for _, soname, _, _ in read.values() if soname}
    for path, (dynamic, _, needs, code) in read.items():
        if not dynamic:
            continue  # static executables and objects load nothing
        elves += 1
        excused = [lib for glob, libs in optional if fnmatch.fnmatch(path, glob)
                   for lib in libs]
        problems += [f"{path}: needs {lib}, which is not in the image"
                     for lib in unresolved(path, provided, excused)]
        for lib in needs:
            m = CUDART.match(lib)
            # a build for another CUDA major that its package never loads here
            other_build = any(fnmatch.fnmatch(lib, glob) for glob in excused)
            if m and int(m.group(1)) != cuda_major and not other_build:
                problems.append(f"{path}: links {lib}, but the image has CUDA {cuda_major}")
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
    # the kernels the build compiled itself (ahead of time, or seeded JIT caches): their code
    kernels = {os.path.basename(path): describe(code) for path, (_, _, _, code)
               in sorted(read.items()) if any(fnmatch.fnmatch(path, g) for g in listed)}
    report: dict[str, object] = {"ok": not problems, "elf_files": elves,
                                 "cuda_libraries": cuda_libs, "problems": sorted(problems)}
    if listed:
        report["kernels"] = kernels
    if machine is not None:
        report["machine"] = MACHINES.get(machine, str(machine))
    return report


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
    parser.add_argument("--list", action="append", default=[], metavar="GLOB",
                        help="libraries whose code the report lists (kernels the build made)")
    parser.add_argument("--machine", type=int, default=None,
                        help="the ELF e_machine every CPU file must have (183: aarch64)")
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
                   optional, args.kernels_elsewhere, args.list, args.machine)
    print(json.dumps(report, sort_keys=True))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

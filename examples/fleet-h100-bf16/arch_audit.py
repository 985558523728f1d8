"""dockergen arch audit: prove compiled CUDA extensions hold code for every requested arch.

Runs inside the build (standard library only). flash-attn's setup.py silently skips archs
its nvcc cannot target, so a build can "succeed" without kernels for a target GPU and fail
at run time with "no kernel image is available". This script lists the ELF cubins of every
shared object in the given wheels (or files) with ``cuobjdump --list-elf`` and fails the
build, naming the missing archs, unless each expected ``sm_XX`` is present.

Usage: arch_audit.py (--wheel-dir DIR | --file SO ...) --expect sm_80,sm_90 [--manifest OUT]
Exit: 0 all present, 1 an arch is missing, 2 usage error or no CUDA code found.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

_SM = re.compile(r"\bsm_(\d+[a-z]?)\b")


def find_cuobjdump() -> str | None:
    """cuobjdump from PATH, else from CUDA_HOME / /usr/local/cuda."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and os.path.isfile(os.path.join(root, "bin", "cuobjdump")):
            return os.path.join(root, "bin", "cuobjdump")
    return None


def archs_of(cuobjdump: str, path: str) -> set[str]:
    """The SASS archs (``sm_80`` ...) embedded in one shared object."""
    proc = subprocess.run([cuobjdump, "--list-elf", path], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0 and "does not contain device code" not in proc.stderr:
        raise RuntimeError(f"cuobjdump failed on {path}: {proc.stderr.strip()}")
    return {f"sm_{m}" for m in _SM.findall(proc.stdout)}


def shared_objects(wheel_dir: str | None, files: list[str], tmp: str) -> list[tuple[str, str]]:
    """(display name, path on disk) of every .so to audit."""
    out = [(f, f) for f in files]
    if wheel_dir:
        for wheel in sorted(os.listdir(wheel_dir)):
            if not wheel.endswith(".whl"):
                continue
            with zipfile.ZipFile(os.path.join(wheel_dir, wheel)) as zf:
                for member in sorted(zf.namelist()):
                    if member.endswith(".so") or ".so." in member:
                        path = zf.extract(member, tmp)
                        out.append((f"{wheel}:{member}", path))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel-dir")
    parser.add_argument("--file", action="append", default=[])
    parser.add_argument("--expect", required=True, help="comma-separated, e.g. sm_80,sm_90")
    parser.add_argument("--manifest")
    args = parser.parse_args(argv)
    expected = sorted({a.strip() for a in args.expect.split(",") if a.strip()})
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        print("arch audit: cuobjdump not found (a CUDA *devel* image ships it in "
              "/usr/local/cuda/bin)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        objects = shared_objects(args.wheel_dir, args.file, tmp)
        found: dict[str, list[str]] = {}
        for name, path in objects:
            archs = archs_of(cuobjdump, path)
            if archs:
                found[name] = sorted(archs)
    present = sorted({a for archs in found.values() for a in archs})
    missing = [a for a in expected if a not in present]
    manifest = {"expected": expected, "present": present, "missing": missing,
                "objects": found, "ok": bool(found) and not missing}
    if args.manifest:
        with open(args.manifest, "w", encoding="utf-8") as fh:
            json.dump(manifest, fh, indent=2, sort_keys=True)
            fh.write("\n")
    if not found:
        print("arch audit: FAILED: no CUDA device code found in "
              f"{len(objects)} shared object(s)", file=sys.stderr)
        return 2
    if missing:
        print(f"arch audit: FAILED: no code for {', '.join(missing)} (found "
              f"{', '.join(present)}); the compiler skipped these archs: check that the CUDA "
              "toolkit supports them and FLASH_ATTN_CUDA_ARCHS lists them", file=sys.stderr)
        return 1
    print(f"arch audit: ok: {', '.join(present)} present in {len(found)} object(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Build FlashInfer's kernels ahead of time, in the image build, without a GPU.

Run by the ``flashinfer-aot`` stage of dockergen's Dockerfile with the venv's Python::

    python flashinfer_aot.py --tools DIR --cuda-home DIR --out DIR NAME=MODULE:FUNCTION ...

Each NAME is built by FlashInfer's own JIT spec (``FUNCTION()`` returns it; ``build()`` is
what a first start would run), for the archs in ``FLASHINFER_CUDA_ARCH_LIST``, with the nvcc
under ``--cuda-home`` (CUDA's compiler wheels: ``nvidia/cu13`` of ``cuda-toolkit[nvcc,cccl,
cudart]``). The built library is copied to ``OUT/<name>/<name>.so``: the runtime stage puts
that folder at ``flashinfer/data/aot/``, where FlashInfer looks for a module before any JIT
(flashinfer/jit/env.py FLASHINFER_AOT_DIR, jit/core.py try_load). Prints one JSON line:
each module's name and library size.

The link step names ``-lcudart -lcuda`` from ``$CUDA_HOME/lib64`` and ``lib64/stubs``
(flashinfer/jit/cpp_ext.py): the wheels lay the runtime out as ``lib/libcudart.so.13``, and a
build host has no driver, so the links and a driver stub (driver_stub.py, copied beside this
file) are made here. Standard library and the venv's own packages only.
"""

import argparse
import glob
import importlib
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from driver_stub import libcuda_stub  # noqa: E402 - beside this file in the image


def prepare_cuda_home(home: str) -> None:
    """Make the compiler wheels' tree look like the CUDA home FlashInfer's build expects."""
    lib = os.path.join(home, "lib")
    lib64 = os.path.join(home, "lib64")
    if not os.path.lexists(lib64):
        os.symlink("lib", lib64)
    runtimes = sorted(glob.glob(os.path.join(lib, "libcudart.so.*")))
    if not runtimes:
        raise SystemExit(f"no libcudart.so.* under {lib}: is cuda-toolkit[cudart] installed?")
    link = os.path.join(lib, "libcudart.so")
    if not os.path.lexists(link):
        os.symlink(os.path.basename(runtimes[0]), link)
    stubs = os.path.join(lib, "stubs")
    os.makedirs(stubs, exist_ok=True)
    built = libcuda_stub()
    shutil.copy(os.path.join(built, "libcuda.so.1"), os.path.join(stubs, "libcuda.so"))
    if not os.access(os.path.join(home, "bin", "nvcc"), os.X_OK):
        raise SystemExit(f"no nvcc under {home}/bin: is cuda-toolkit[nvcc] installed?")


def build(spec_paths: list[str], out: str) -> dict[str, int]:
    """Build each FlashInfer JIT spec and copy its library to ``out/<name>/<name>.so``."""
    sizes = {}
    os.makedirs(out, exist_ok=True)
    for item in spec_paths:
        name, _, path = item.partition("=")
        module, _, function = path.partition(":")
        spec = getattr(importlib.import_module(module), function)()
        if spec.name != name:
            raise SystemExit(f"{path}() builds {spec.name!r}, not {name!r}")
        spec.build(verbose=False)
        library = str(spec.get_library_path())
        target = os.path.join(out, name, f"{name}.so")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(library, target)
        sizes[name] = os.path.getsize(target)
        print(f"flashinfer-aot: built {name} for {os.environ['FLASHINFER_CUDA_ARCH_LIST']}",
              file=sys.stderr, flush=True)
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cuda-home", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--tools", required=True, help="where the compiler wheels are")
    parser.add_argument("modules", nargs="+", help="NAME=PACKAGE.MODULE:FUNCTION")
    args = parser.parse_args()
    if not os.environ.get("FLASHINFER_CUDA_ARCH_LIST"):
        raise SystemExit("FLASHINFER_CUDA_ARCH_LIST is not set: no GPU to detect archs from")
    os.environ["CUDA_HOME"] = args.cuda_home
    # ninja's wheel, installed beside the compiler with --target, puts its binary in bin/
    ninja = os.path.join(args.tools, "bin", "ninja")
    if not os.access(ninja, os.X_OK):
        raise SystemExit(f"no ninja binary at {ninja}: is ninja installed there?")
    os.environ["PATH"] = os.pathsep.join([os.path.join(args.cuda_home, "bin"),
                                          os.path.dirname(ninja), os.environ["PATH"]])
    prepare_cuda_home(args.cuda_home)
    print(json.dumps({"built": build(args.modules, args.out)}, sort_keys=True))


if __name__ == "__main__":  # engine_jit.py imports prepare_cuda_home
    main()

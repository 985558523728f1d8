"""dockergen's stand-in for the NVIDIA driver library, for checks of a built image without a GPU.

``libcuda.so.1`` comes with the driver: the NVIDIA container runtime mounts it when a
container starts on a GPU host, so a build host has none, and every library linked against it
(vLLM's kernels, Triton's launcher) fails to load. NVIDIA's devel images carry a stub for
linking (``/usr/local/cuda/lib64/stubs/libcuda.so``); this builds the same kind of stub: every
driver API entry point that ``cuda.h`` declares, each returning CUDA_ERROR_UNKNOWN (999), so
loading and linking work and any real driver call fails as it does without a GPU.

The header is the real one Triton ships (``triton/backends/nvidia/include/cuda.h``); the
compiler is the image's own C compiler. Standard library only; defines :func:`libcuda_stub`
and is prepended to the check scripts that need it.
"""

import ctypes
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile


def libcuda_stub() -> str:
    """Build the stub into a new folder, load it (so that ``DT_NEEDED libcuda.so.1`` of later
    loads resolves to it by its soname), and return the folder."""
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("no triton in the image: its cuda.h is what the driver stub is built from")
    header = os.path.join(list(spec.submodule_search_locations)[0], "backends", "nvidia",
                          "include", "cuda.h")
    with open(header, encoding="utf-8") as fh:
        text = fh.read()
    names = set(re.findall(r"CUresult\s+CUDAAPI\s+(cu\w+)\s*\(", text))
    names |= set(re.findall(r"#define\s+cu\w+\s+(cu\w+)\b", text))  # the _v2 entry points
    folder = tempfile.mkdtemp(prefix="dockergen-libcuda-")
    source = os.path.join(folder, "libcuda_stub.c")
    with open(source, "w", encoding="utf-8") as fh:
        fh.writelines(f"int {name}(void) {{ return 999; }}\n" for name in sorted(names))
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise SystemExit("no C compiler in the image (as Triton's launcher build would fail)")
    library = os.path.join(folder, "libcuda.so.1")
    subprocess.check_call([cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", library,
                           source])
    os.symlink("libcuda.so.1", os.path.join(folder, "libcuda.so"))
    ctypes.CDLL(library, mode=ctypes.RTLD_GLOBAL)
    return folder

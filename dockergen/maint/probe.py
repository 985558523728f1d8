"""Compile probe: do a torch release's C++ headers accept flash-attn's forced C++ standard?

flash-attn's setup.py passes ``-std=c++17`` for its C++ sources; torch's cpp_extension adds
its own ``-std=`` only when the package sets none. So whether a flash-attn build can start
against a torch release is a property of that release's headers, which this probe measures:
the translation unit includes what ``csrc/flash_attn/flash_api.cpp`` includes from torch
(the CUDA-only headers need the CUDA toolkit and are left out; the standard check sits in the
common ATen/c10 headers, e.g. ``c10/macros/Macros.h``), compiled with the system g++ under
flash-attn's flags, against ``torch/include`` extracted from the real PyPI wheel (only that
folder is read, by HTTP range requests, and cached). A control compile with ``-std=c++20``
must pass, or the probe itself is broken and says so.
"""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from dockergen.errors import MissingToolError
from dockergen.maint import pypi
from dockergen.maint.observe import Pages, linux_wheel

# The torch includes of flash-attn 2.8.3.post2 csrc/flash_attn/flash_api.cpp (CPU-side ones).
TRANSLATION_UNIT = """\
// dockergen compile probe: the torch headers flash-attn's flash_api.cpp includes.
#include <torch/python.h>
#include <torch/nn/functional.h>
int dockergen_probe() { return 0; }
"""
# flash-attn setup.py: extra_compile_args["cxx"] = ["-O3", "-std=c++17"]; torch's
# cpp_extension adds these defines and include folders for every extension.
FLASH_ATTN_CXX_FLAGS = ["-O3", "-std=c++17"]
TORCH_EXTENSION_FLAGS = ["-DTORCH_API_INCLUDE_EXTENSION_H",
                         "-DTORCH_EXTENSION_NAME=flash_attn_2_cuda",
                         "-D_GLIBCXX_USE_CXX11_ABI=1", "-fPIC", "-fsyntax-only"]


def torch_include(pages: Pages, version: str) -> Path:
    """``torch/include`` of the real torch wheel (cached under the cache folder)."""
    wheel = linux_wheel(pages.files("torch", version))
    if wheel is None:
        raise pypi.PyPIError(f"torch {version}: no linux x86_64 wheel on PyPI")
    dest = pypi.cache_dir() / "torch-include" / wheel.sha256
    if not (dest / "torch" / "include").is_dir():
        if dest.exists():
            shutil.rmtree(dest)
        pypi.extract_prefix(wheel, "torch/include/", dest)
    return dest / "torch" / "include"


def compiler() -> str:
    """The C++ compiler the probe uses (g++, as torch's cpp_extension picks on Linux)."""
    found = shutil.which("g++")
    if not found:
        raise MissingToolError("g++ is not installed; the compile probe needs it "
                               "(apt-get install g++)")
    return found


def compile_tu(include: Path, std: str) -> subprocess.CompletedProcess[str]:
    """Compile the probe translation unit with flash-attn's flags, ``-std=`` replaced."""
    flags = [f if not f.startswith("-std=") else f"-std={std}" for f in FLASH_ATTN_CXX_FLAGS]
    with tempfile.TemporaryDirectory(prefix="dockergen-probe-") as tmp:
        src = Path(tmp) / "flash_api_probe.cpp"
        src.write_text(TRANSLATION_UNIT, encoding="utf-8")
        cmd = [compiler(), *flags, *TORCH_EXTENSION_FLAGS, "-I", str(include),
               "-I", str(include / "torch" / "csrc" / "api" / "include"),
               "-I", sysconfig.get_paths()["include"], str(src)]
        return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600)


def _first_error(stderr: str) -> str:
    for line in stderr.splitlines():
        if "error" in line:
            # keep the message, not the machine's cache path
            return line.split("torch/include/", 1)[-1].strip()
    return stderr.strip().splitlines()[-1] if stderr.strip() else ""


def probe_torch(pages: Pages, version: str) -> dict[str, Any]:
    """The verdict for one torch release: which of C++17 / C++20 its headers accept."""
    include = torch_include(pages, version)
    c17 = compile_tu(include, "c++17")
    c20 = compile_tu(include, "c++20")
    if c20.returncode != 0:
        raise MissingToolError(f"compile probe broken: torch {version} headers fail even "
                               f"with -std=c++20: {_first_error(c20.stderr)}")
    return {
        "cxx17": "accepted" if c17.returncode == 0 else "rejected",
        "cxx20": "accepted",
        "cxx_min": 17 if c17.returncode == 0 else 20,
        "first_error_cxx17": _first_error(c17.stderr) if c17.returncode else None,
        "flags": " ".join(FLASH_ATTN_CXX_FLAGS + TORCH_EXTENSION_FLAGS),
        "includes": ["torch/python.h", "torch/nn/functional.h"],
    }


def compiler_version() -> str:
    """First line of ``g++ --version`` (recorded beside the verdicts)."""
    out = subprocess.run([compiler(), "--version"], capture_output=True, text=True, check=False)
    return out.stdout.splitlines()[0] if out.stdout else "unknown"

"""Stand-in flash-attn build: the real one's contract, a tiny kernel."""
import os
import shutil
import subprocess

import torch  # like flash-attn: needs the venv's torch (--no-build-isolation)
from setuptools import setup
from setuptools.command.build_py import build_py

KNOWN = "{known}"  # flash-attn v2.8.3 add_cuda_gencodes


class Build(build_py):
    def run(self) -> None:
        super().run()
        if os.environ.get("FLASH_ATTENTION_FORCE_BUILD") != "TRUE":
            raise SystemExit("would download a prebuilt wheel")
        archs = os.environ.get("FLASH_ATTN_CUDA_ARCHS", "80;90;100;120").split(";")
        gencode = []
        for arch in archs:
            if arch in KNOWN:  # anything else is skipped silently, as upstream does
                gencode += ["-gencode", f"arch=compute_{arch},code=sm_{arch}"]
        nvcc = os.environ.get("PYTORCH_NVCC", "/usr/local/cuda/bin/nvcc").split()
        release = subprocess.run([nvcc[-1], "--version"], capture_output=True, text=True,
                                 check=True).stdout.split("release ")[1].split(",")[0]
        if tuple(int(x) for x in release.split(".")) < (12, 8):  # as upstream: no error
            gencode = [g for g in gencode if "_100" not in g and "_120" not in g]
        out = os.path.join(self.build_lib, "flash_attn", "flash_attn_2_cuda.so")
        # compile with nvcc, link with g++ (the PyPI toolkit ships no static cudart)
        subprocess.check_call(nvcc + ["-c", "-Xcompiler", "-fPIC", "-o", "flash_fwd.o",
                                      "csrc/flash_fwd.cu", *gencode])
        subprocess.check_call(["g++", "-shared", "-o", out, "flash_fwd.o"])
        # the C++ sources under the standard setup.py forces ("cxx": ["-O3", "-std=c++NN"]),
        # against the venv torch's headers, as torch's cpp_extension compiles them
        include = os.path.join(os.path.dirname(torch.__file__), "include")
        subprocess.check_call(["g++", "-O3", "-std=c++{std}", "-fsyntax-only", "-I", include,
                               "csrc/flash_api.cpp"])


setup(name="flash_attn", version="{version}", packages=["flash_attn"],
      cmdclass={"build_py": Build}, install_requires=["torch", "einops"])

"""Stand-ins that let the real templates build here, without GPUs, NGC or download.pytorch.org.

- Base images: ``local/standin-devel:bookworm`` (Debian + NVIDIA's real nvcc, CUDA headers
  and cuobjdump from PyPI under /usr/local/cuda) and ``local/standin-runtime:bookworm``
  (plain Debian), both derived from the debootstrap'ed ``local/debian:bookworm``.
- A PEP 503 package index on 127.0.0.1 serving small real packages under the names the
  templates install: ``torch`` (2.13.0, 2.14.0), ``vllm`` (0.27.1, 0.30.0, 0.33.0; its
  ``vllm serve`` answers /health), ``sglang`` 0.5.23 (its ``sglang serve`` accepts exactly the
  flags of the real release's wheel, rejects any other as argparse does, and compiles a C
  launcher with the system compiler before serving, as Triton does at its first kernel)
  with ``sglang-kernel`` and ``flashinfer-python`` pinned as the real metadata pins them,
  and a ``flash-attn`` 2.8.3 *sdist* whose setup.py, like
  the real one, imports the venv's torch (--no-build-isolation), reads
  FLASH_ATTN_CUDA_ARCHS, silently skips values it does not know, compiles a CUDA kernel
  with nvcc (through PYTORCH_NVCC, i.e. ccache) and its C++ API file with g++ under the
  C++ standard it forces (-std=c++17, as every release up to 2.8.3.post2) against the
  venv torch's headers. The torch stand-ins ship those headers: from 2.14 they stop with
  "#error C++20 or later compatible compiler is required to use ATen", as the real ones do
  (tests/support/test_standin_headers.py ties this to the compile probe of the real headers).
  ``flash_attn-2.8.4.dev0.tar.gz`` is a source archive that carries the upstream fix
  (-std=c++20), for profiles that pin a fixed source (flash_attn.source). Build tools (uv,
  pip, setuptools, wheel, ninja, packaging, psutil, einops) are the real wheels, downloaded
  from PyPI once.

These are test doubles for packages that cannot be installed on these machines; every
other part of the build (BuildKit, the Dockerfile, nvcc, cuobjdump, the registries) is real.

By hand (from the repository root, with the provisioned engine)::

    python -m tests.support.standin images              # build the stand-in base images once
    python -m tests.support.standin serve --port 8777   # build and serve the index (Ctrl-C stops)

``serve`` prints the ``dockergen build`` command that uses it (see docs/testing.md).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CACHE = Path(os.environ.get("DOCKERGEN_TEST_CACHE", "/tmp/dockergen-test-cache"))
ROOT = Path(__file__).resolve().parents[2]
DEVEL = "local/standin-devel:bookworm"
RUNTIME = "local/standin-runtime:bookworm"
BASE = "local/debian:bookworm"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")

REAL_WHEELS = ["uv==0.13.9", "pip==26.3", "setuptools==80.9.0", "wheel==0.45.1",
               "ninja==1.13.2", "packaging==25.0", "psutil==7.2.2", "einops==0.8.2"]
# One CUDA release for every piece (pip would otherwise mix nvvm/crt versions, and
# ptxas rejects newer PTX).
CUDA_WHEELS = [f"{p}==13.2.51" for p in ("nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-crt",
                                           "nvidia-cuda-runtime", "nvidia-cuda-cuobjdump")]

DEVEL_DOCKERFILE = f"""\
FROM {BASE}
COPY host-ca.crt /usr/local/share/ca-certificates/host-ca.crt
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates python3 \\
      python3-venv && update-ca-certificates && rm -rf /var/lib/apt/lists/*
# NVIDIA's real CUDA compiler, headers and cuobjdump, from PyPI, where a CUDA devel image
# has them: /usr/local/cuda/{{bin,include,lib}}
RUN python3 -m venv /opt/cudatk && /opt/cudatk/bin/pip install --no-cache-dir \\
      {" ".join(CUDA_WHEELS)} \\
 && ln -s /opt/cudatk/lib/python3.11/site-packages/nvidia/cu13 /usr/local/cuda \\
 && /usr/local/cuda/bin/nvcc --version
"""

# torch/include of the stand-in: the C++ standard gate of the real ATen/ATen.h (from 2.14).
ATEN_H = """#pragma once
{gate}
namespace at {{ inline int standin() {{ return 0; }} }}
"""
ATEN_GATE = """#if !defined(__cplusplus) || __cplusplus < 202002L
#error C++20 or later compatible compiler is required to use ATen.
#endif"""
TORCH_PYTHON_H = "#pragma once\n#include <ATen/ATen.h>\n"


def torch_headers(version: str) -> dict[str, str]:
    """The stand-in's ``torch/include`` files for a torch version."""
    major, minor = (int(x) for x in version.split(".")[:2])
    gate = ATEN_GATE if (major, minor) >= (2, 14) else ""
    return {"torch/include/ATen/ATen.h": ATEN_H.format(gate=gate),
            "torch/include/torch/python.h": TORCH_PYTHON_H}


TORCH_INIT = '''"""Stand-in for torch (dockergen tests): versions only."""
__version__ = "{version}+standin"


class version:  # noqa: N801 - mirrors torch.version
    cuda = "13.0"


class _C:  # noqa: N801 - the compiled arch list torch.cuda.get_arch_list() reads
    @staticmethod
    def _cuda_getArchFlags() -> str:  # noqa: N802
        return "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"  # real torch 2.14.0 (CUDA 13.0)
'''

# Triton as far as the smoke checks read it without a GPU: the driver API header the
# driver stub (templates/context/driver_stub.py) is built from.
TRITON_CUDA_H = """typedef int CUresult;
#define CUDAAPI
CUresult CUDAAPI cuInit(unsigned int Flags);
CUresult CUDAAPI cuDeviceGetCount(int *count);
#define cuGetProcAddress cuGetProcAddress_v2
CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int v, unsigned long f);
"""

# vLLM's CLI layout as the smoke test's parser check (templates/context/vllm_serve_parse.py)
# drives it: main() parses, then dispatches to ServeSubcommand.cmd; platforms as vLLM has them.
VLLM_STANDIN_MODULES = {
    "vllm/platforms/__init__.py": "current_platform = None\n",
    "vllm/platforms/interface.py": ("from typing import NamedTuple\n\n\n"
                                    "class DeviceCapability(NamedTuple):\n"
                                    "    major: int\n    minor: int\n"),
    "vllm/platforms/cuda.py": "class CudaPlatform:\n    pass\n",
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/cli/__init__.py": "",
    "vllm/entrypoints/cli/serve.py": ("import argparse\n\n\nclass ServeSubcommand:\n"
                                      "    @staticmethod\n"
                                      "    def cmd(args: argparse.Namespace) -> None:\n"
                                      "        from vllm.cli import run\n"
                                      "        run(vars(args))\n"),
    "vllm/entrypoints/cli/main.py": ("import argparse\n\n\ndef main() -> None:\n"
                                     "    from vllm.cli import parse\n"
                                     "    from vllm.entrypoints.cli.serve import ServeSubcommand\n"
                                     "    ServeSubcommand.cmd(argparse.Namespace(**parse()))\n"),
}

# SGLang's: sglang.cli.main -> prepare_server_args (ServerArgs, its __post_init__) ->
# sglang.launch_server.run_server, as templates/context/sglang_serve_parse.py drives it.
SGLANG_STANDIN_MODULES = {
    "sglang/srt/__init__.py": "",
    "sglang/srt/server_args.py": ("class ServerArgs:\n"
                                  "    def __init__(self, **kw):\n"
                                  "        self.__dict__.update(kw)\n"
                                  "        self.__post_init__()\n\n"
                                  "    def __post_init__(self):\n"
                                  "        pass\n"),
    "sglang/launch_server.py": ("def run_server(server_args):\n"
                                "    from sglang.cli_impl import serve_forever\n"
                                "    serve_forever(vars(server_args))\n"),
    "sglang/cli/__init__.py": "",
    "sglang/cli/main.py": ("def main() -> None:\n"
                           "    from sglang.cli_impl import parse\n"
                           "    import sglang.launch_server\n"
                           "    from sglang.srt.server_args import ServerArgs\n"
                           "    sglang.launch_server.run_server(ServerArgs(**parse()))\n"),
}

# flashinfer-python's kernel-wheel check (flashinfer/jit/env.py _check_cubin_version): a
# flashinfer-cubin of another version is refused (0.6.x raises; 0.7.x ignores it and downloads
# kernels at first use instead; the stand-in takes the strict reading).
FLASHINFER_INIT = '''"""Stand-in for flashinfer-python (dockergen tests): the kernel check."""
import importlib.util

__version__ = "{version}"
if importlib.util.find_spec("flashinfer_cubin") is not None:
    import flashinfer_cubin

    if flashinfer_cubin.__version__ != __version__:
        raise RuntimeError(f"flashinfer-cubin version ({{flashinfer_cubin.__version__}}) does "
                           f"not match flashinfer version ({{__version__}}).")
'''

VLLM_INIT = '''"""Stand-in for vllm (dockergen tests)."""
__version__ = "{version}"
'''

# What the stand-in servers share: the real release's option strings (extracted from the
# wheel by tools/vllm_flags.py / tools/sglang_flags.py, shipped in the package as
# flags.json) and Triton's launcher build, which needs a C compiler and Python headers at
# the first kernel launch (triton/runtime/build.py) and fails without them.
SERVER_COMMON = '''import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from http.server import BaseHTTPRequestHandler, HTTPServer
from importlib import resources

LAUNCHER = ('#include <Python.h>\\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, '
            '"launcher", NULL, -1, NULL};\\nPyMODINIT_FUNC PyInit_launcher(void) '
            '{ return PyModule_Create(&m); }\\n')


def serve_args(package: str, usage: str, positional: bool) -> dict:
    """`<engine> serve ...` parsed like the real release's parser (exit 2 on anything else)."""
    argv = sys.argv[1:]
    if not argv or argv[0] != "serve":
        print("usage: " + usage, file=sys.stderr)
        sys.exit(2)
    # vLLM's FlexibleArgumentParser reads --max_model_len as --max-model-len
    rest = [a.split("=", 1)[0].replace("_", "-") + a[len(a.split("=", 1)[0]):]
            if a.startswith("--") and positional else a for a in argv[1:]]
    return vars(parser(package, package + " serve", positional).parse_args(rest))


def parser(package: str, prog: str, positional: bool) -> argparse.ArgumentParser:
    """Every option string of the real release (flags.json) and its --no- form."""
    p = argparse.ArgumentParser(prog=prog, allow_abbrev=False)  # no prefix matching
    if positional:
        p.add_argument("model_tag", nargs="?")
    flags = json.loads(resources.files(package).joinpath("flags.json").read_text())
    for flag in flags:
        p.add_argument(flag, nargs="?", const=True, default=None)
        if flag.startswith("--") and not flag.startswith("--no-") and positional:
            p.add_argument("--no-" + flag[2:], action="store_true")  # BooleanOptionalAction
    return p


def triton_launcher() -> None:
    """What triton/runtime/build.py does at the first kernel launch."""
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise SystemExit("RuntimeError: Failed to find C compiler. Please specify via CC "
                         "environment variable or set triton.knobs.build.impl.")
    d = tempfile.mkdtemp()
    with open(os.path.join(d, "launcher.c"), "w") as fh:
        fh.write(LAUNCHER)
    # Triton keeps the built launcher in its cache (TRITON_CACHE_DIR, default
    # ~/.triton/cache: triton/knobs.py) and loads it from there
    cache = os.environ.get("TRITON_CACHE_DIR") or os.path.expanduser("~/.triton/cache")
    os.makedirs(cache, exist_ok=True)
    so = os.path.join(cache, "launcher" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.check_call([cc, os.path.join(d, "launcher.c"), "-O1", "-shared", "-fPIC",
                           "-I" + sysconfig.get_paths()["include"], "-o", so])
    # and loads it, as Triton does (a noexec cache mount fails here, as with the real one)
    import importlib.util
    spec = importlib.util.spec_from_file_location("launcher", so)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


def serve(host: str, port: int, served: str) -> None:
    """/health, /v1/models and /v1/completions for the served model name."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            request = json.loads(self.rfile.read(length) or b"{}")
            ok = self.path == "/v1/completions" and request.get("model") == served
            self.send_response(200 if ok else 404)
            self.end_headers()
            if ok:
                self.wfile.write(json.dumps({"choices": [{"text": "!"}]}).encode())

        def do_GET(self) -> None:
            body = {"/health": b"", "/v1/models": json.dumps(
                {"data": [{"id": served}]}).encode()}.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, format: str, *a: object) -> None:  # noqa: A002
            pass

    HTTPServer((host, port), Handler).serve_forever()
'''

VLLM_CLI = '''"""`vllm serve MODEL ...`: the real release's flags, Triton's launcher build."""
''' + SERVER_COMMON + '''

def parse() -> dict:
    args = serve_args("vllm", "vllm serve MODEL [--host H] [--port P] ...", positional=True)
    model = args.get("model_tag") or args.get("model")
    if not isinstance(model, str):
        print("vllm serve: error: a model is required", file=sys.stderr)
        sys.exit(2)
    return args


def run(args: dict) -> None:
    model = args.get("model_tag") or args.get("model")
    triton_launcher()
    serve(args.get("host") or "0.0.0.0", int(args.get("port") or 8000),
          args.get("served_model_name") or model)


def main() -> None:
    from vllm.entrypoints.cli.main import main as cli_main
    cli_main()
'''

# TensorRT-LLM's trtllm-serve: no flag list and no Triton launcher (its PyTorch backend's
# run-time compilation was not checked: the image keeps no compiler, see tensorrt_llm.yaml).
TRTLLM_CLI = '''"""`trtllm-serve MODEL --host H --port P ...`: answers /health and /v1/models."""
''' + SERVER_COMMON + '''

def main() -> None:
    args = sys.argv[1:]
    host = args[args.index("--host") + 1] if "--host" in args else "0.0.0.0"
    port = int(args[args.index("--port") + 1]) if "--port" in args else 8000
    serve(host, port, args[0])
'''

SGLANG_CLI = '''"""`sglang serve`: the real release's flags, Triton's launcher build, /health."""
''' + SERVER_COMMON + '''

def parse() -> dict:
    args = serve_args("sglang", "sglang serve --model-path MODEL ...", positional=False)
    model = args.get("model_path")
    if not isinstance(model, str):
        print("sglang serve: error: the following arguments are required: --model-path",
              file=sys.stderr)
        sys.exit(2)
    return args


def serve_forever(args: dict) -> None:
    triton_launcher()
    serve(args.get("host") or "127.0.0.1", int(args.get("port") or 30000),
          args.get("served_model_name") or args["model_path"])


def main() -> None:
    from sglang.cli.main import main as cli_main
    cli_main()
'''

FA_SETUP = '''"""Stand-in flash-attn build: the real one's contract, a tiny kernel."""
import os
import shutil
import subprocess

import torch  # like flash-attn: needs the venv's torch (--no-build-isolation)
from setuptools import setup
from setuptools.command.build_py import build_py

KNOWN = {known}  # flash-attn v2.8.3 add_cuda_gencodes


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
'''

FA_KERNEL = "__global__ void flash_fwd(float *o, const float *q) { o[threadIdx.x] = q[0]; }\n"
FA_API = "#include <torch/python.h>\nint flash_api() { return at::standin(); }\n"


def _wheel(out: Path, name: str, version: str, files: dict[str, str | bytes],
           requires: list[str] = (), scripts: dict[str, str] | None = None,  # type: ignore[assignment]
           extras: tuple[str, ...] = (), python: str = ">=3.9") -> None:
    """Write a minimal, valid pure-Python wheel."""
    dist = f"{name}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
            f"Requires-Python: {python}"] + [f"Provides-Extra: {e}" for e in extras] + [
                f"Requires-Dist: {r}" for r in requires]
    contents: dict[str, str | bytes] = dict(files)
    contents[f"{dist}/METADATA"] = "\n".join(meta) + "\n"
    contents[f"{dist}/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: dockergen-tests\n"
                                 "Root-Is-Purelib: true\nTag: py3-none-any\n")
    if scripts:
        contents[f"{dist}/entry_points.txt"] = "[console_scripts]\n" + "".join(
            f"{k} = {v}\n" for k, v in scripts.items())
    record = []
    for path, text in contents.items():
        raw = text if isinstance(text, bytes) else text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(raw).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(raw)}")
    record.append(f"{dist}/RECORD,,")
    contents[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(out / f"{name}-{version}-py3-none-any.whl", "w") as zf:
        for path in sorted(contents):
            zf.writestr(zipfile.ZipInfo(path, (1980, 1, 1, 0, 0, 0)), contents[path])


def _sdist(out: Path, known: tuple[str, ...], version: str = "2.8.3", std: int = 17) -> Path:
    buf = io.BytesIO()
    files = {"PKG-INFO": f"Metadata-Version: 2.1\nName: flash_attn\nVersion: {version}\n",
             "setup.py": FA_SETUP.replace("{known}", repr(known)).replace(
                 "{std}", str(std)).replace("{version}", version),
             "flash_attn/__init__.py": f'__version__ = "{version}"\n',
             "csrc/flash_fwd.cu": FA_KERNEL, "csrc/flash_api.cpp": FA_API}
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, text in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(f"flash_attn-{version}/{path}")
            info.size = len(data)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    target = out / f"flash_attn-{version}.tar.gz"
    target.write_bytes(buf.getvalue())
    return target


def broken_libraries(work: Path) -> dict[str, bytes]:
    """Two shared objects the whole-image audit must reject, built with the real compilers.

    ``_ext_missing_dep.so`` needs ``libdgmissing.so.1``, which no image has (linked against a
    throw-away copy); ``_C_sm80.so`` carries CUDA code for sm_80 only, so an H100 (9.0) has
    nothing to run.
    """
    work.mkdir(parents=True, exist_ok=True)
    (work / "missing.c").write_text("int dg_missing(void) { return 1; }\n")
    (work / "ext.c").write_text("int dg_missing(void);\nint ext(void) { return dg_missing(); }\n")
    (work / "k.cu").write_text(FA_KERNEL)
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libdgmissing.so.1", "-o",
                    str(work / "libdgmissing.so.1"), str(work / "missing.c")], check=True)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(work / "ext.so"), str(work / "ext.c"),
                    str(work / "libdgmissing.so.1")], check=True)
    nvcc = "nvcc" if shutil.which("nvcc") else "/usr/local/cuda/bin/nvcc"
    subprocess.run([nvcc, "-shared", "-Xcompiler", "-fPIC", "-o", str(work / "sm80.so"),
                    str(work / "k.cu"), "-gencode", "arch=compute_80,code=sm_80"], check=True)
    return {"vllm/_ext_missing_dep.so": (work / "ext.so").read_bytes(),
            "vllm/_C_sm80.so": (work / "sm80.so").read_bytes()}


def build_index(root: Path, fa_archs: tuple[str, ...] = ("80", "90", "100", "120"),
                broken_libs: bool = False) -> Path:
    """Create the stand-in package index under ``root``; return the files folder.

    ``fa_archs`` are the FLASH_ATTN_CUDA_ARCHS values the flash-attn sdist honours; a mirror
    serving a patched build that knows fewer is what the arch audit must catch.
    ``broken_libs`` puts :func:`broken_libraries` into every vllm wheel (the test profile's
    release among them): what the whole-image audit must catch.
    """
    files = root / "files"
    files.mkdir(parents=True, exist_ok=True)
    for version in ("2.9.0", "2.13.0", "2.14.0", "2.14.1"):
        _wheel(files, "torch", version, {"torch/__init__.py": TORCH_INIT.format(
            version=version), **torch_headers(version)})
    # every stand-in vllm serves its release's real flag list (tools/vllm_flags.py)
    vllm_flags = json.loads(
        (ROOT / "dockergen/components/serving/vllm_flags.json").read_text())["releases"]
    for version, torch in (("0.27.1", "2.13.0"), ("0.30.0", "2.13.0"), ("0.33.0", "2.14.0")):
        vllm: dict[str, str | bytes] = {"vllm/__init__.py": VLLM_INIT.format(version=version),
                                        "vllm/cli.py": VLLM_CLI,
                                        "vllm/flags.json": json.dumps(vllm_flags[version]),
                                        **VLLM_STANDIN_MODULES}
        if broken_libs:
            vllm.update(broken_libraries(root / "broken"))
        # as the real wheels: >= 0.27.1 pull flashinfer-python without its kernels
        flashinfer = {"0.30.0": ["flashinfer-python==0.6.18.post1"]}.get(version, [])
        _wheel(files, "vllm", version, vllm,
               requires=[f"torch=={torch}", "triton==3.8.0", *flashinfer],
               scripts={"vllm": "vllm.cli:main"})
    # the stand-in release of tests/profiles/knowledge/standin-trtllm.yaml
    _wheel(files, "tensorrt_llm", "1.1.0.post900",
           {"tensorrt_llm/__init__.py": '__version__ = "1.1.0.post900"\n',
            "tensorrt_llm/serve.py": TRTLLM_CLI},
           requires=["torch==2.9.0"], scripts={"trtllm-serve": "tensorrt_llm.serve:main"})
    # sglang 0.5.23 as its real metadata pins it (Requires-Python >=3.11, torch==2.14.1,
    # sglang-kernel==0.4.10, flashinfer_python[cu13]==0.7.2), serving the real flag list
    flags = json.loads((ROOT / "dockergen/components/serving/sglang_flags.json").read_text())
    _wheel(files, "sglang", "0.5.23",
           {"sglang/__init__.py": '__version__ = "0.5.23"\nimport torch  # noqa: F401\n',
            "sglang/cli_impl.py": SGLANG_CLI,
            "sglang/flags.json": json.dumps(flags["releases"]["0.5.23"]),
            **SGLANG_STANDIN_MODULES},
           requires=["torch==2.14.1", "triton==3.8.0", "sglang-kernel==0.4.10",
                     "flashinfer_python[cu13]==0.7.2"],
           scripts={"sglang": "sglang.cli_impl:main"}, python=">=3.11")
    _wheel(files, "triton", "3.8.0", {"triton/__init__.py": '__version__ = "3.8.0"\n',
                                      "triton/backends/nvidia/include/cuda.h": TRITON_CUDA_H})
    _wheel(files, "sglang_kernel", "0.4.10", {"sgl_kernel/__init__.py": '__version__ = "0.4.10"\n'},
           requires=["torch==2.14.1"])
    _wheel(files, "flashinfer_python", "0.7.2",
           {"flashinfer/__init__.py": '__version__ = "0.7.2"\n'}, extras=("cu13",))
    # vLLM 0.30.0's FlashInfer, its kernels at the same version and at another one
    _wheel(files, "flashinfer_python", "0.6.18.post1",
           {"flashinfer/__init__.py": FLASHINFER_INIT.format(version="0.6.18.post1")})
    for cubin in ("0.6.18.post1", "0.6.13"):
        _wheel(files, "flashinfer_cubin", cubin,
               {"flashinfer_cubin/__init__.py": f'__version__ = "{cubin}"\n'})
    _sdist(files, fa_archs)
    # a source that carries the upstream C++20 fix (Dao-AILab/flash-attention #2879/#2899)
    _sdist(files, fa_archs, version="2.8.4.dev0", std=20)
    wheels = CACHE / "wheels"
    if not all(any(wheels.glob(f"{w.split('==')[0].replace('-', '_')}-{w.split('==')[1]}-*"))
               for w in REAL_WHEELS):
        wheels.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                        "--only-binary=:all:", "--python-version", "3.11",
                        "--platform", "manylinux_2_17_x86_64", "--platform",
                        "manylinux2014_x86_64", "--platform", "manylinux_2_28_x86_64",
                        "-d", str(wheels), *REAL_WHEELS], check=True)
    for wheel in wheels.iterdir():
        target = files / wheel.name
        if not target.exists():
            target.write_bytes(wheel.read_bytes())
    by_project: dict[str, list[str]] = {}
    for f in sorted(files.iterdir()):
        project = f.name.split("-")[0].lower().replace("_", "-")
        by_project.setdefault(project, []).append(f.name)
    for index in ("simple", "cu130", "cu129", "cu128"):  # torch_index_url/<cuXYZ> too
        for project, names in by_project.items():
            page = root / index / project
            page.mkdir(parents=True, exist_ok=True)
            links = "".join(f'<a href="../../files/{n}">{n}</a><br>\n' for n in names)
            (page / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
    return files


class IndexServer:
    """Serve a folder over HTTP on 127.0.0.1 (a thread of the test process)."""

    def __init__(self, root: Path, port: int = 0) -> None:
        handler = partial(_QuietHandler, directory=str(root))
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def ensure_images(api: object) -> None:
    """Build the stand-in base images once (they are kept by the engine between runs)."""
    import docker

    client = docker.from_env()
    if not _exists(client, BASE):
        raise RuntimeError(f"{BASE} is missing: run tests/infra/provision.sh")
    if not _exists(client, RUNTIME):
        client.api.tag(BASE, *RUNTIME.split(":"))
    for tag, dockerfile in ((DEVEL, DEVEL_DOCKERFILE),):
        if _exists(client, tag):
            continue
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, data in (("Dockerfile", dockerfile.encode()),
                               ("host-ca.crt", HOST_CA.read_bytes())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        buf.seek(0)
        _, logs = client.images.build(fileobj=buf, custom_context=True, tag=tag,
                                      network_mode="host", forcerm=True)
        for _chunk in logs:
            pass


def _exists(client: object, ref: str) -> bool:
    import docker

    try:
        client.api.inspect_image(ref)  # type: ignore[attr-defined]
        return True
    except docker.errors.ImageNotFound:
        return False


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.support.standin images|serve``: the stand-ins without writing code."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.support.standin", description=(
        "Stand-ins for the build tests: base images and a package index "
        "(tests/support/standin.py)."))
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("images", help=f"build {DEVEL} and {RUNTIME} from {BASE} (needs the engine)")
    serve = sub.add_parser("serve", help="build the package index and serve it on 127.0.0.1")
    serve.add_argument("--port", type=int, default=8777, help="0 picks a free port")
    serve.add_argument("--root", type=Path, default=CACHE / "index",
                       help="folder for the index (default: %(default)s)")
    serve.add_argument("--fa-archs", default="80,90,100,120",
                       help="FLASH_ATTN_CUDA_ARCHS values the flash-attn stand-in honours")
    args = parser.parse_args(argv)
    if args.command == "images":
        import docker

        ensure_images(docker.from_env().api)
        print(f"ready: {DEVEL}, {RUNTIME}")
        return 0
    build_index(args.root, tuple(a for a in args.fa_archs.split(",") if a))
    server = IndexServer(args.root, args.port)
    print(f"serving {args.root} on {server.url}", flush=True)
    print("build with: dockergen build tests/profiles/standin.yaml --network host "
          f"--set build.pip_index_url={server.url}/simple "
          f"--set build.torch_index_url={server.url}", flush=True)
    try:
        server.thread.join()
    except KeyboardInterrupt:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

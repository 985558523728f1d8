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
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
# The stand-ins' source is in real files that the linters read: standin_packages/<dist>/ is
# what each archive holds ("{version}" filled in as it is built; <dist>-<version>/ where a
# release's files differ), standin_images/devel.Dockerfile the devel image (FROM the base
# image; one CUDA release for every piece: pip would otherwise mix nvvm/crt versions, and
# ptxas rejects newer PTX).
PACKAGES = Path(__file__).resolve().parent / "standin_packages"
DEVEL_DOCKERFILE = (Path(__file__).resolve().parent / "standin_images" / "devel.Dockerfile"
                    ).read_text(encoding="utf-8")
BASE = DEVEL_DOCKERFILE.split("\n", 1)[0].removeprefix("FROM ")

REAL_WHEELS = ["uv==0.13.9", "pip==26.3", "setuptools==80.9.0", "wheel==0.45.1",
               "ninja==1.13.2", "packaging==25.0", "psutil==7.2.2", "einops==0.8.2",
               # CUDA's compiler wheels as the SGLang image's jit-toolchain stage installs them
               # (cuda-toolkit 13.0.2's METADATA pins; nvvm and crt at its nvcc's version)
               "cuda-toolkit==13.0.2", "nvidia-cuda-nvcc==13.0.88", "nvidia-nvvm==13.0.88",
               "nvidia-cuda-crt==13.0.88", "nvidia-cuda-cccl==13.0.85",
               "nvidia-cuda-runtime==13.0.96"]
# The real wheels above that are built for one CPU, as aarch64 wheels too (downloaded once):
# the vLLM stand-in's arm64 image installs uv and its build tools from the same index.
AARCH64_WHEELS = ["uv==0.13.9", "psutil==7.2.2", "ninja==1.13.2"]


def _source(path: str, version: str = "") -> str:
    """One stand-in file, ``{version}`` filled in."""
    text = (PACKAGES / path).read_text(encoding="utf-8")
    return text.replace("{version}", version) if version else text


def _sources(folder: str, paths: tuple[str, ...]) -> dict[str, str]:
    """Files of one stand-in folder, in the order given (the order of the wheel's RECORD)."""
    return {path: _source(f"{folder}/{path}") for path in paths}


# What the stand-in servers share: the real release's option strings (extracted from the
# wheel by tools/vllm_flags.py / tools/sglang_flags.py, shipped in the package as
# flags.json) and Triton's launcher build, which needs a C compiler and Python headers at
# the first kernel launch (triton/runtime/build.py) and fails without them. Each server
# module names it with one import line, which the wheel has replaced by the shared code.
def _server(path: str) -> str:
    """A stand-in server module with server_common.py in place of its import line."""
    head, _, rest = _source(path).partition("from server_common import ")
    return head + _source("server_common.py") + rest.split("\n", 1)[1]


# torch/include of the stand-in: the C++ standard gate of the real ATen/ATen.h (from 2.14).
ATEN_GATE_START, ATEN_GATE_END = "#if !defined(__cplusplus)", "#endif"


def torch_headers(version: str) -> dict[str, str]:
    """The stand-in's ``torch/include`` files for a torch version."""
    major, minor = (int(x) for x in version.split(".")[:2])
    headers = _sources("torch", ("torch/include/ATen/ATen.h", "torch/include/torch/python.h"))
    if (major, minor) < (2, 14):  # the same header without the gate
        aten = headers["torch/include/ATen/ATen.h"]
        start = aten.index(ATEN_GATE_START)
        end = aten.index(ATEN_GATE_END, start) + len(ATEN_GATE_END)
        headers["torch/include/ATen/ATen.h"] = aten[:start] + aten[end:]
    return headers


# vLLM's CLI layout as the smoke test's parser check
# (dockergen/parts/engines/vllm/serve_parse.py) drives it: main() parses, then
# dispatches to ServeSubcommand.cmd; platforms as vLLM has them.
VLLM_STANDIN_MODULES = _sources("vllm", (
    "vllm/platforms/__init__.py", "vllm/platforms/interface.py", "vllm/platforms/cuda.py",
    "vllm/entrypoints/__init__.py", "vllm/entrypoints/cli/__init__.py",
    "vllm/entrypoints/cli/serve.py", "vllm/entrypoints/cli/main.py"))
VLLM_CLI = _server("vllm/vllm/cli.py")

# SGLang's: sglang.cli.main -> prepare_server_args (ServerArgs, its __post_init__) ->
# sglang.launch_server.run_server, as dockergen/parts/engines/sglang/serve_parse.py drives it.
SGLANG_STANDIN_MODULES = _sources("sglang", (
    "sglang/srt/__init__.py", "sglang/srt/server_args.py", "sglang/launch_server.py",
    "sglang/cli/__init__.py", "sglang/cli/main.py"))
SGLANG_CLI = _server("sglang/sglang/cli_impl.py")

# TensorRT-LLM's trtllm-serve: no flag list and no Triton launcher (its PyTorch backend's
# run-time compilation was not checked: the image keeps no compiler, see tensorrt_llm/facts.yaml).
TRTLLM_CLI = _server("tensorrt_llm/tensorrt_llm/serve.py")

FA_KERNEL = _source("flash_attn/csrc/flash_fwd.cu")
FA_API = _source("flash_attn/csrc/flash_api.cpp")


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
    # setup.py's placeholders: "{known}" (quoted, so the file is valid Python) becomes the
    # tuple of arch values, {std} the C++ standard it forces, {version} the release
    setup = _source("flash_attn/setup.py").replace('"{known}"', repr(known)).replace(
        "{std}", str(std)).replace("{version}", version)
    files = {"PKG-INFO": f"Metadata-Version: 2.1\nName: flash_attn\nVersion: {version}\n",
             "setup.py": setup,
             "flash_attn/__init__.py": _source("flash_attn/flash_attn/__init__.py", version),
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
    for name in ("missing.c", "ext.c"):
        (work / name).write_text(_source(f"broken_libs/{name}"))
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
        _wheel(files, "torch", version, {"torch/__init__.py": _source(
            "torch/torch/__init__.py", version), **torch_headers(version)})
    # every stand-in vllm serves its release's real flag list (tools/vllm_flags.py)
    vllm_flags = json.loads(
        (ROOT / "dockergen/parts/engines/vllm/flags.json").read_text())["releases"]
    for version, torch in (("0.27.1", "2.13.0"), ("0.30.0", "2.13.0"), ("0.33.0", "2.14.0")):
        vllm: dict[str, str | bytes] = {
            "vllm/__init__.py": _source("vllm/vllm/__init__.py", version), "vllm/cli.py": VLLM_CLI,
            "vllm/flags.json": json.dumps(vllm_flags[version]), **VLLM_STANDIN_MODULES}
        if broken_libs:
            vllm.update(broken_libraries(root / "broken"))
        # as the real wheels: >= 0.27.1 pull flashinfer-python without its kernels
        flashinfer = {"0.30.0": ["flashinfer-python==0.6.18.post1"]}.get(version, [])
        _wheel(files, "vllm", version, vllm,
               requires=[f"torch=={torch}", "triton==3.8.0", *flashinfer],
               scripts={"vllm": "vllm.cli:main"})
    # the stand-in release of tests/profiles/knowledge/standin-trtllm.yaml
    _wheel(files, "tensorrt_llm", "1.1.0.post900",
           {"tensorrt_llm/__init__.py": _source("tensorrt_llm/tensorrt_llm/__init__.py"),
            "tensorrt_llm/serve.py": TRTLLM_CLI},
           requires=["torch==2.9.0"], scripts={"trtllm-serve": "tensorrt_llm.serve:main"})
    # sglang 0.5.23 as its real metadata pins it (Requires-Python >=3.11, torch==2.14.1,
    # sglang-kernel==0.4.10, flashinfer_python[cu13]==0.7.2), serving the real flag list
    flags = json.loads((ROOT / "dockergen/parts/engines/sglang/flags.json").read_text())
    _wheel(files, "sglang", "0.5.23",
           {"sglang/__init__.py": _source("sglang/sglang/__init__.py"),
            "sglang/cli_impl.py": SGLANG_CLI,
            "sglang/flags.json": json.dumps(flags["releases"]["0.5.23"]),
            **SGLANG_STANDIN_MODULES},
           requires=["torch==2.14.1", "triton==3.8.0", "sglang-kernel==0.4.10",
                     "flashinfer_python[cu13]==0.7.2"],
           scripts={"sglang": "sglang.cli_impl:main"}, python=">=3.11")
    # Triton as far as the smoke checks read it without a GPU: the driver API header the
    # driver stub (templates/context/driver_stub.py) is built from.
    _wheel(files, "triton", "3.8.0", _sources("triton", (
        "triton/__init__.py", "triton/backends/nvidia/include/cuda.h")))
    _wheel(files, "sglang_kernel", "0.4.10", _sources("sglang_kernel", ("sgl_kernel/__init__.py",)),
           requires=["torch==2.14.1"])
    _wheel(files, "flashinfer_python", "0.7.2",
           _sources("flashinfer_python-0.7.2", ("flashinfer/__init__.py",)), extras=("cu13",))
    # vLLM 0.30.0's FlashInfer, its kernels at the same version and at another one. Its
    # kernel-wheel check (flashinfer/jit/env.py _check_cubin_version): a flashinfer-cubin of
    # another version is refused (0.6.x raises; 0.7.x ignores it and downloads kernels at
    # first use instead; the stand-in takes the strict reading).
    _wheel(files, "flashinfer_python", "0.6.18.post1", {"flashinfer/__init__.py": _source(
        "flashinfer_python-0.6.18.post1/flashinfer/__init__.py", "0.6.18.post1")})
    for cubin in ("0.6.18.post1", "0.6.13"):
        _wheel(files, "flashinfer_cubin", cubin, {"flashinfer_cubin/__init__.py": _source(
            "flashinfer_cubin/flashinfer_cubin/__init__.py", cubin)})
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
    aarch64 = CACHE / "wheels-aarch64"
    if not all(any(aarch64.glob(f"{w.split('==')[0]}-{w.split('==')[1]}-*aarch64*.whl"))
               for w in AARCH64_WHEELS):
        aarch64.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                        "--only-binary=:all:", "--python-version", "3.11",
                        "--platform", "manylinux_2_17_aarch64", "--platform",
                        "manylinux2014_aarch64", "--platform", "manylinux_2_28_aarch64",
                        "-d", str(aarch64), *AARCH64_WHEELS], check=True)
    for wheel in [*wheels.iterdir(), *aarch64.iterdir()]:
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

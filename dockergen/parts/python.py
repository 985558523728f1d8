"""Python: the interpreter, uv and the venv every later stage installs into.

Owns ``python.yaml`` (the python3 each base OS ships; the pinned uv and pip), the check
``python-from-image``, and the template ``templates/parts/python.j2``. Runtime part:
the venv (and the uv-managed CPython) copied into the runtime stage, ``python3`` from the
OS when the image's own interpreter is used, and the Python environment variables.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field

from dockergen.errors import Edit
from dockergen.knowledge.facts import Facts, in_range
from dockergen.resolve.context import Context, nearest
from dockergen.resolve.model import (
    PYTHON_HOME,
    VENV,
    CommandCheck,
    Derivation,
    Mode,
    PythonSetup,
    RuntimeCopy,
    VenvLayer,
    last_json_line,
    last_line,
)

# Compilers in the runtime image, in one place: the executables the smoke check looks for,
# and the apt packages that bring one (packages.apt is checked against them before a build).
COMPILER_EXECUTABLES = ("gcc", "g++", "cc", "c++", "clang", "nvcc")
COMPILER_PACKAGES = frozenset({"gcc", "g++", "cpp", "clang", "build-essential",
                               "nvidia-cuda-toolkit"})
COMPILER_PACKAGE_PREFIXES = ("gcc-", "g++-", "clang-", "cuda-nvcc", "cuda-compiler",
                             "cuda-toolkit", "cuda-minimal-build")
# What an engine whose Triton kernels build their launcher at run time keeps: a C compiler
# (triton/runtime/build.py: $CC, then gcc, then clang), libc headers; Debian's gcc package
# also provides `cc`. Everything else in the lists above stays out.
C_COMPILER_PACKAGES = ("gcc", "libc6-dev")
C_COMPILER_EXECUTABLES = ("gcc", "cc")


def is_compiler_package(name: str) -> bool:
    """Whether an apt package installs a compiler (see COMPILER_PACKAGES)."""
    return name in COMPILER_PACKAGES or name.startswith(COMPILER_PACKAGE_PREFIXES)


def os_python(f: Facts, os_name: str) -> str | None:
    value = f.python["os_python"].get(os_name)
    return str(value) if value is not None else None


def version_edits(f: Facts, current: str, spec: str) -> list[Edit]:
    """Candidate fixes of ``python``: CPython releases inside ``spec`` (a PEP 440
    range), the closest to ``current`` first."""
    return [Edit.set("python", v, f"use Python {v}")
            for v in nearest(f.python["cpython_minors"], current) if in_range(v + ".0", spec)]


def tool(f: Facts, name: str) -> str:
    """The pinned version of a build tool (uv, pip)."""
    return str(f.python["tools"][name])


def check_python_source(c: Context) -> None:
    """python-from-image: the base image's python3 must be the profile's version; a
    python-build-standalone mirror only means something when uv downloads the interpreter."""
    if c.p.build.python_from != "image":
        return
    if c.p.build.python_mirror:
        # An unused mirror would look like an air-gapped build that is not one.
        c.error(("build", "python_mirror"), "python_from: image uses the base image's "
                "python3, so uv downloads no CPython and the mirror would never be read",
                "remove build.python_mirror, or set build.python_from: uv")
    if c.p.cuda.devel_image:
        return  # OS unknown; the build-base stage asserts the version itself
    found = os_python(c.facts, c.p.cuda.os)
    if found != c.p.python:
        c.error(("build", "python_from"), f"{c.p.cuda.os} ships Python {found}, "
                f"but python is {c.p.python}", edits=_python_source_edits(c, found))


def _python_source_edits(c: Context, found: str | None) -> list[Edit]:
    """The fixes of an OS python3 that is not the profile's, the least change first: uv's
    CPython (the OS stays), an OS whose python3 is the profile's, and the OS's python3
    only where the engine release supports it (its Python range; an unknown release has
    its own error first)."""
    p = c.p
    edits = [Edit.set("build.python_from", "uv", "use build.python_from: uv")]
    edits += [Edit.set("cuda.os", os_name, f"use cuda.os: {os_name} (its python3 is "
                       f"{p.python})")
              for os_name, version in c.facts.python["os_python"].items()
              if str(version) == p.python and os_name != p.cuda.os]
    if found is not None and c.release is not None and in_range(found + ".0",
                                                                 str(c.release["python"])):
        edits.append(Edit.set("python", found, f'use python: "{found}"'))
    return edits


@dataclass(frozen=True)
class PythonPart:
    """The build-stage setup and what the runtime stage needs from it."""

    setup: PythonSetup
    build_apt: tuple[str, ...]
    runtime_apt: tuple[str, ...]
    copies: tuple[RuntimeCopy, ...]
    env: dict[str, str]
    context_files: dict[str, bytes] = field(default_factory=dict)


# BuildKit mounts its own /etc/hosts into every RUN and, where the image has none (NVIDIA's
# images and Debian's minbase have none), creates the file first and removes it after: /etc
# then enters each RUN's layer with the time of the build, and no two builds of the same venv
# layer are equal. An /etc/hosts of the image's own (what `docker run` and Kubernetes mount
# over anyway) keeps /etc out of the venv layers.
HOSTS_IN_CONTEXT = "etc-hosts"
HOSTS = b"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"


def downloads(f: Facts) -> dict[str, str]:
    """Where uv 0.13.x fetches CPython, and the variable that replaces it (``python.yaml``)."""
    return {k: str(v) for k, v in f.python["uv_python_downloads"].items()}


def derive(c: Context, d: list[Derivation], mode: Mode) -> PythonPart:
    """uv, interpreter and venv of a checked profile."""
    p = c.p
    from_image = p.build.python_from == "image"
    # check_python_source rejected a mirror with python_from: image, so this is the uv path.
    mirror = p.build.python_mirror if not from_image else None
    if not from_image:
        src = downloads(c.facts)
        d.append(Derivation(
            src["env"], mirror or "(unset)",
            f"uv {tool(c.facts, 'uv')} fetches CPython {p.python} from "
            # uv joins with one slash whether or not the mirror ends in one
            + (f"{mirror.rstrip('/')}/<release>/<archive> (build.python_mirror) instead of "
               if mirror else "its default ")
            + f"{src['default_prefix']}/<release>/<archive>, checking the sha256 built "
            "into uv", src["src"]))
    if p.build.pip_index_url:
        d.append(Derivation("pip index", p.build.pip_index_url, "from build.pip_index_url: "
                            "replaces PyPI for every install of the build stages "
                            "(PIP_INDEX_URL, UV_DEFAULT_INDEX)", ""))
    copies = [RuntimeCopy(PYTHON_HOME, PYTHON_HOME, "build-base")] if not from_image else []
    context: dict[str, bytes] = {}
    if mode != "buildkit":
        copies.append(RuntimeCopy(VENV, VENV, "engine"))  # as the engine stage left it
    else:  # BuildKit reads the venv in layers instead (venv_layers)
        copies.append(RuntimeCopy(HOSTS_IN_CONTEXT, "/etc/hosts"))
        context[HOSTS_IN_CONTEXT] = HOSTS
    return PythonPart(
        setup=PythonSetup(python=p.python, python_from=p.build.python_from,
                          python_home=PYTHON_HOME, venv=VENV, uv_version=tool(c.facts, "uv"),
                          pip_index_url=p.build.pip_index_url, mode=mode,
                          python_mirror=mirror),
        # python3-venv bootstraps uv's own venv; the OS interpreter needs its headers.
        build_apt=("python3-venv", "python3-dev") if from_image else ("python3-venv",),
        runtime_apt=("python3",) if from_image else (),
        copies=tuple(copies),
        env={"PYTHONUNBUFFERED": "1", "VIRTUAL_ENV": VENV},
        context_files=context,
    )


# The environment of the bytecode step: marshal writes a frozenset constant (``x in {...}``)
# in its iteration order, which follows the strings' hashes, randomized per process unless
# the seed is fixed; with it two builds write the same .pyc files (src: CPython
# Python/marshal.c w_object, set and frozenset; reproducible-builds.org "Python: hash
# randomization").
BYTECODE_ENV = ("PYTHONHASHSEED=0",)


def bytecode_mode(f: Facts, d: list[Derivation]) -> str:
    """How the venv's bytecode is compiled in the engine stage (compileall's
    ``--invalidation-mode``, ``python.yaml`` ``bytecode``), with its derivation."""
    row = f.python["bytecode"]
    mode = str(row["invalidation_mode"])
    d.append(Derivation("bytecode", f"compiled in the build ({mode})", "the runtime user "
                        "cannot write the venv, so each start would compile every module it "
                        "imports; mtime-0 layers would invalidate timestamp-based caches",
                        str(row["src"])))
    return mode


def venv_layers(f: Facts, python_version: str, cuda_major: str, mode: Mode,
                engine_names: tuple[str, ...]) -> tuple[VenvLayer, ...]:
    """The runtime venv in layers of balanced size.

    The groups of ``python.yaml`` ``venv_layers`` (the CUDA library wheels of the image's
    CUDA major; torch and triton), then the engine's own packages (``engine_names``, its
    facts' ``layer_packages``), then everything else: a node pulls the layers in parallel,
    and images with the same CUDA libraries or torch share those layers by digest. Classic
    builds have no bind mounts: one COPY of the venv (none here).
    """
    if mode != "buildkit":
        return ()
    site = f"lib/python{python_version}/site-packages"
    base = [posixpath.dirname(VENV), VENV, f"{VENV}/lib", f"{VENV}/lib/python{python_version}",
            f"{VENV}/{site}"]
    groups = [(str(row["title"]), tuple(row["names"].get(cuda_major, ())
                                         if isinstance(row["names"], dict) else row["names"]))
              for row in f.python["venv_layers"]]
    groups.append(("the serving engine and its kernels", engine_names))
    layers = []
    for title, names in groups:
        if not names:
            continue
        # folders between site-packages and a member (nvidia/ of nvidia/cu13)
        inner = sorted({f"{VENV}/{site}/{posixpath.dirname(n)}" for n in names
                        if posixpath.dirname(n)})
        layers.append(VenvLayer(title, tuple(f"./{site}/{n}" for n in names),
                                parents=(*base, *inner)))
    taken = tuple(m for layer in layers for m in layer.members)
    layers.append(VenvLayer("everything else: scripts, smaller packages, metadata", (".",),
                            taken, tuple(base)))
    return tuple(layers)


# What Triton does at its first kernel launch (triton/runtime/build.py): find $CC, gcc or
# clang, compile a C file against this interpreter's headers into an extension module, and
# import it. If this fails in the image, the engine's first Triton kernel fails the same way.
JIT_PROBE = """
import importlib.util, os, shutil, subprocess, sysconfig, tempfile
cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")
if not cc:
    raise SystemExit("Failed to find C compiler (as Triton would)")
d = tempfile.mkdtemp()
src = os.path.join(d, "dgprobe.c")
with open(src, "w") as fh:
    fh.write('#include <Python.h>\\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, '
             '"dgprobe", NULL, -1, NULL};\\nPyMODINIT_FUNC PyInit_dgprobe(void) '
             '{ return PyModule_Create(&m); }\\n')
so = os.path.join(d, "dgprobe" + sysconfig.get_config_var("EXT_SUFFIX"))
subprocess.check_call([cc, src, "-O1", "-shared", "-fPIC",
                       "-I" + sysconfig.get_paths()["include"], "-o", so])
spec = importlib.util.spec_from_file_location("dgprobe", so)
spec.loader.exec_module(importlib.util.module_from_spec(spec))
print("compiled and imported a C extension with", cc)
"""


def jit_check(venv: str) -> CommandCheck:
    """The image can build and import a C extension the way Triton does at run time."""
    return CommandCheck(
        "a C extension compiles and imports (what Triton does at its first kernel)",
        (f"{venv}/bin/python", "-c", JIT_PROBE),
        lambda code, out: (code == 0, last_line(out) or f"exit {code}"))


# Every installed distribution's RECORD (PEP 376/627): which distributions own each path.
# Two owners means one silently overwrote the other's file (uv and pip say nothing), and
# uninstalling either removes the file from both. Bytecode caches are left out: Python writes
# them, and RECORD lists them only when the installer compiled them.
RECORD_AUDIT = """
import csv, glob, json, os, re, sys, sysconfig
allowed = {(a["path"], tuple(sorted(a["dists"]))) for a in json.loads(sys.argv[1])}
owners = {}
for site in sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}):
    for record in sorted(glob.glob(os.path.join(site, "*.dist-info", "RECORD"))):
        info = os.path.basename(os.path.dirname(record))
        dist = re.sub(r"[-_.]+", "-", info[:-len(".dist-info")].split("-")[0]).lower()
        with open(record, newline="", encoding="utf-8") as fh:
            for row in csv.reader(fh):
                if not row or row[0].endswith(".pyc"):
                    continue
                path = os.path.relpath(os.path.normpath(os.path.join(site, row[0])), site)
                owners.setdefault(path, set()).add(dist)
shared = {p: sorted(d) for p, d in owners.items() if len(d) > 1}
bad = {p: d for p, d in shared.items() if (p, tuple(d)) not in allowed}
print(json.dumps({"paths": len(owners), "shared": len(shared), "bad": bad}, sort_keys=True))
"""


def record_check(f: Facts, venv: str) -> CommandCheck:
    """No file of the image is owned by two Python distributions (``python.yaml``
    ``shared_files`` lists the known, harmless ones with their source)."""
    allowed = [{"path": a["path"], "dists": a["dists"]} for a in f.python["shared_files"]]

    def verify(code: int, out: str) -> tuple[bool, str]:
        got = last_json_line(out)
        if got is None:
            return False, out[-500:]
        bad = got["bad"]
        if code != 0 or bad:
            by_pair: dict[str, list[str]] = {}
            for path, dists in sorted(bad.items()):
                by_pair.setdefault(" and ".join(dists), []).append(path)
            return False, "; ".join(
                f"{pair} both own {len(paths)} file(s): {', '.join(paths[:3])}"
                + (" ..." if len(paths) > 3 else "") for pair, paths in by_pair.items())
        return True, (f"{got['paths']} files, {got['shared']} shared by two distributions, "
                      "each a known case (python.yaml shared_files)")

    return CommandCheck("no file of the image is owned by two Python distributions",
                        (f"{venv}/bin/python", "-c", RECORD_AUDIT,
                         json.dumps(allowed, sort_keys=True)), verify)


# What Triton compiles at its first kernel launch: triton.backends.nvidia.driver.CudaUtils
# builds the real launcher source of the installed triton (backends/nvidia/driver.c) with the
# image's C compiler against this interpreter's headers and links it to libcuda, then loads
# it (triton/runtime/build.py). The driver library is the stand-in of driver_stub.py; a GPU
# host's driver takes its place at run time. torch pulls triton (its Requires-Dist): a torch
# without that requirement (a CPU build, the tests' stand-in) compiles nothing at run time.
TRITON_LAUNCHER = """
import importlib.metadata as md, json, os, sys, tempfile
if not any(r.replace(" ", "").startswith(("triton", "pytorch-triton"))
           for r in (md.requires("torch") or [])):
    print(json.dumps({"compiled": None})); sys.exit(0)
os.environ["TRITON_LIBCUDA_PATH"] = libcuda_stub()
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="dockergen-triton-")
from triton.backends.nvidia.driver import CudaUtils
utils = CudaUtils()
print(json.dumps({"compiled": md.version("triton"), "launch": callable(utils.launch)}))
"""


def triton_check(venv: str, driver_stub: str) -> CommandCheck:
    """The installed triton's own launcher compiles and loads in the image (a C compiler and
    Python headers at run time: Triton needs both at the first kernel launch).

    ``driver_stub`` is the text of ``templates/context/driver_stub.py``."""

    def verify(code: int, out: str) -> tuple[bool, str]:
        got = last_json_line(out)
        if got is None:
            return False, out.strip()[-500:] or f"exit {code}"
        if got.get("compiled") is None:
            return code == 0, "torch does not require triton: no launcher is compiled"
        return code == 0 and got.get("launch") is True, (
            f"triton {got['compiled']}'s launcher (driver.c) compiled and loaded")

    return CommandCheck("Triton's launcher compiles with the image's C compiler and Python "
                        "headers", (f"{venv}/bin/python", "-c", driver_stub + TRITON_LAUNCHER),
                        verify)


# What a container start compiles: ``python -v`` logs "code object from <file>.py" for each
# module it compiles from source (and "code object from '<file>.pyc'" for each it loads from
# the bytecode cache), importlib/_bootstrap_external.py SourceLoader.get_code. Run as the
# image's user, on the module the server imports first.
BYTECODE_PROBE = """
import json, re, subprocess, sys
proc = subprocess.run([sys.executable, "-v", "-c", "import " + sys.argv[1]],
                      capture_output=True, text=True)
compiled = re.findall(r"^# code object from (/.*[.]py)$", proc.stderr, re.M)
cached = re.findall(r"^# code object from '(/.*[.]pyc)'$", proc.stderr, re.M)
wrote = re.findall(r"^# (?:created|could not create) '?([^' ]+)", proc.stderr, re.M)
err = [line for line in proc.stderr.splitlines() if not line.startswith(("#", "import "))]
print(json.dumps({"code": proc.returncode, "compiled": compiled, "cached": len(cached),
                  "wrote": wrote, "error": err[-3:]}))
"""


def bytecode_check(venv: str, module: str) -> CommandCheck:
    """Importing the server's module compiles nothing and writes nothing: every module's
    bytecode was compiled in the build and is still valid in the image's layers."""

    def verify(code: int, out: str) -> tuple[bool, str]:
        got = last_json_line(out)
        if got is None:
            return False, out.strip()[-500:] or f"exit {code}"
        if got["code"] != 0:
            return False, f"import {module} failed: " + " | ".join(got["error"])[-500:]
        if got["compiled"] or got["wrote"]:
            shown = ", ".join(got["compiled"][:3]) + (" ..." if len(got["compiled"]) > 3
                                                      else "")
            return False, (f"{len(got['compiled'])} module(s) compiled at import ({shown}); "
                           f"{len(got['wrote'])} bytecode file(s) written or tried")
        return True, f"import {module}: {got['cached']} modules from bytecode, 0 compiled"

    return CommandCheck(f"importing {module} compiles no module (bytecode shipped)",
                        (f"{venv}/bin/python", "-c", BYTECODE_PROBE, module), verify)

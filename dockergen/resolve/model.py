"""The typed resolved model: what the checks decided, handed to every output.

Frozen dataclasses, one per Dockerfile stage plus the whole :class:`Resolved`. The
components build their slices (:mod:`dockergen.parts`), :mod:`dockergen.resolve.fold`
assembles them, the templates only format them, and every later output (build records,
smoke tests, bake files, run configurations) reads the same model.
Also the typed inputs of resolution besides the profile (:class:`Inputs`). The stages of
the kernels built ahead of time or seeded for start-up are in
:mod:`dockergen.resolve.kernel_stages` (and named here too).
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from dockergen.errors import Location, Problem
from dockergen.input.pins import BasePins
from dockergen.input.profile import Profile
from dockergen.input.pylockfile import LockInputs
from dockergen.resolve.kernel_stages import EngineJit as EngineJit
from dockergen.resolve.kernel_stages import FlashInferAotStage as FlashInferAotStage
from dockergen.resolve.kernel_stages import FlashInferModule as FlashInferModule
from dockergen.resolve.kernel_stages import JitKernel as JitKernel
from dockergen.resolve.mode import Mode as Mode

# Paths inside the image: one place, every component and template uses these.
VENV = "/opt/venv"
PYTHON_HOME = "/opt/python"
APP_HOME = "/home/app"
# The main index when build.pip_index_url is unset.
MAIN_INDEX = "https://pypi.org/simple"
# PyPI's simple index however a profile writes it: the host's case never matters and the
# trailing slash is the canonical form (PEP 503: "https://pypi.org/simple/");
# pypi.python.org is the host it had before (it redirects to pypi.org).
_PYPI_HOSTS = ("pypi.org", "pypi.python.org")


def is_pypi(url: str | None) -> bool:
    """Whether ``url`` names PyPI's simple index itself (not a mirror of it)."""
    if not url:
        return False
    parts = urllib.parse.urlsplit(url)
    return (parts.scheme.lower() == "https" and (parts.hostname or "") in _PYPI_HOSTS
            and parts.port in (None, 443) and not parts.username
            and parts.path.rstrip("/") == "/simple" and not parts.query and not parts.fragment)
AUDIT_SCRIPT = "arch_audit.py"
# FlashInfer's ahead-of-time build (parts/flashinfer.py): the stage's script, the driver
# stub it links against, and where the stage leaves the built modules
FLASHINFER_AOT_SCRIPT = "flashinfer_aot.py"
DRIVER_STUB = "driver_stub.py"
FLASHINFER_AOT_OUT = "/flashinfer-aot"
# The engine's own start-up JIT kernels (parts/engine_jit.py): the script that prepares
# the compiler wheels and seeds the engine's JIT cache, and where the compiler wheels go
ENGINE_JIT_SCRIPT = "engine_jit.py"
CUDA_COMPILER_DIR = "/opt/cuda-nvcc"
CERT_DIR = "certs"


@dataclass(frozen=True)
class GivenCertificate:
    """A CA certificate a command was given (``build --ca-cert PATH``): checked and copied
    into the build stages like the profile's own, but not part of the profile, so neither
    the profile's record nor its hash holds the machine's path to it (the build context's
    content tag covers its bytes)."""

    path: Path
    origin: Location  # how a problem names it: the option as typed


@dataclass(frozen=True)
class Inputs:
    """What resolution takes besides the profile, each typed: none of it is an override of
    the profile's fields."""

    # the base-image lock beside the profile (None: no lock, or resolved without it)
    pins: BasePins | None = None
    certificates: tuple[GivenCertificate, ...] = ()


@dataclass(frozen=True)
class Derivation:
    """One derived setting and why it has that value (``dockergen explain``)."""

    key: str
    value: str
    reason: str
    src: str = ""


@dataclass(frozen=True)
class GpuTarget:
    """One entry of ``gpu.targets`` after lookup."""

    given: str
    cc: str  # "9.0"
    name: str | None  # known GPU name, None when given as a compute capability
    family: str
    src: str
    mem_gib: int | None = None  # the named GPU's memory (capacity plans); None: not known
    # GPU Feature Discovery's nvidia.com/gpu.product values of the named GPU's boards (the
    # Kubernetes output prefers nodes with them); empty: none known
    gfd_products: tuple[str, ...] = ()
    # the image platforms the named GPU is sold with (GH200: linux/arm64 only, its CPU is
    # Grace); empty: any host
    platforms: tuple[str, ...] = ()

    @property
    def cc_tuple(self) -> tuple[int, int]:
        return cc_tuple(self.cc)


def cc_tuple(cc: str) -> tuple[int, int]:
    """``"8.9"`` -> ``(8, 9)``."""
    major, minor = cc.split(".")
    return int(major), int(minor)


# --- build-base stage: CUDA base system, Python, torch ------------------------------------
@dataclass(frozen=True)
class CudaBase:
    """The CUDA devel image and the build-base system packages."""

    image: str
    apt: tuple[str, ...]
    ca_certificates: bool
    cert_dir: str


@dataclass(frozen=True)
class PythonSetup:
    """uv, the interpreter and the venv of the build stages."""

    python: str
    python_from: Literal["uv", "image"]
    python_home: str
    venv: str
    uv_version: str
    pip_index_url: str | None
    mode: Mode
    # UV_PYTHON_INSTALL_MIRROR; None when uv downloads from its default (or python_from: image)
    python_mirror: str | None = None


@dataclass(frozen=True)
class TorchInstall:
    """torch from PyTorch's CUDA-matched index, or from the main index (build.torch_from)."""

    version: str
    index: str  # where the torch wheel comes from
    venv: str
    mode: Mode
    # True: ``index`` is the main index (no extra index for torch); torch then reports the
    # CUDA of PyPI's wheel, checked by its major only (the minor is the wheel's, not the
    # profile's: NVIDIA's minor-version compatibility covers it).
    from_main_index: bool = False
    cuda: str = ""  # what torch.version.cuda must be (major.minor), or start with (major)


@dataclass(frozen=True)
class BuildBase:
    """The build-base stage: one slice per component."""

    cuda: CudaBase
    python: PythonSetup
    torch: TorchInstall


# --- flash-attn stage ---------------------------------------------------------------------
@dataclass(frozen=True)
class FlashAttnStage:
    """The FlashAttention-2 source build and its arch audit."""

    version: str
    archs: str  # FLASH_ATTN_CUDA_ARCHS, e.g. "80;90"
    torch_arch_list: str
    expect: str  # "sm_80,sm_90"
    max_jobs: int
    max_jobs_reason: str
    job_gib: int
    nvcc_threads: int
    deps: tuple[str, ...]
    pip: str
    venv: str
    mode: Mode
    audit_script: str
    # What pip builds: "flash-attn==V" (the PyPI sdist), "flash-attn @ URL --hash=sha256:H"
    # (a pinned archive, installed with --require-hashes) or "flash-attn @ git+URL@COMMIT".
    requirement: str = ""
    source_kind: str = "pypi"  # pypi | archive | git
    # the built wheel is stripped of its local symbols, repacked and dated to this epoch
    # (why: parts/flash_attn.py, where the stage is made); None: left as built
    repack_epoch: int | None = None


# --- engine stage -------------------------------------------------------------------------
@dataclass(frozen=True)
class EngineStage:
    """The serving engine installed into the venv, keeping the torch pin."""

    name: str
    requirements: tuple[str, ...]  # the engine first, then packages pinned in lockstep
    torch: str
    indexes: tuple[str, ...]
    venv: str
    mode: Mode
    flash_attn: bool
    # Without a lock: uv's strategy over the indexes (see serving/base.py derive). Always: the
    # CUDA the installed torch must report (major.minor of the index it came from).
    index_strategy: str
    torch_cuda: str
    torch_cuda_major_only: bool = False  # torch from the main index: see TorchInstall
    # Installing from the profile's hashed Python lock (dockergen lock --python): its path in
    # the image and the install arguments; empty: the engine and torch are resolved in the build.
    lock: str = ""
    lock_args: tuple[str, ...] = ()
    # uv --constraint file in the image (its lines in the context's constraints.txt): what
    # the install may not pick freely, e.g. the CUDA Python bindings of another CUDA major
    constraints: str = ""
    # compileall --invalidation-mode of the venv's bytecode (python.yaml bytecode); empty:
    # none is compiled
    bytecode: str = ""
    # NAME=VALUE environment of the bytecode step (what makes the .pyc files reproducible)
    bytecode_env: tuple[str, ...] = ()
    # files uv writes into a dist-info for a local-file install, removed with their RECORD
    # lines (they hold the file's ctime: dockergen/knowledge/reproducible.py)
    local_install_records: tuple[str, ...] = ()

    @property
    def requirement(self) -> str:
        """The engine's own requirement, e.g. ``vllm==0.33.0``."""
        return self.requirements[0]


@dataclass(frozen=True)
class ServeCommand:
    """How the image starts its server, and the files that command reads."""

    entrypoint: tuple[str, ...]
    args: tuple[str, ...]
    context_files: Mapping[str, bytes] = field(default_factory=dict)


# --- runtime stage ------------------------------------------------------------------------
@dataclass(frozen=True)
class RuntimeCopy:
    """One ``COPY`` into the runtime stage (from a build stage, or from the context)."""

    src: str
    dst: str
    stage: str | None = None


@dataclass(frozen=True)
class VenvLayer:
    """One layer of the runtime venv, read from the engine stage's venv through a bind mount.

    ``members`` are paths relative to the venv (``./lib/pythonX.Y/site-packages/torch``);
    ``exclude`` are the members the other layers carry (only the last layer, ``.``, has any);
    ``parents`` are the folders the layer creates or changes, whose mtimes it sets to 0 (the
    extraction gives folders that are not members of the archive the time of the build).
    """

    title: str
    members: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    parents: tuple[str, ...] = ()


@dataclass(frozen=True)
class RuntimeStage:
    """The runtime stage: the runtime image plus what each component contributes."""

    image: str
    apt: tuple[str, ...]
    uid: int
    home: str
    venv: str  # first on PATH
    copies: tuple[RuntimeCopy, ...]
    env: Mapping[str, str]
    labels: Mapping[str, str]
    port: int
    health_cmd: tuple[str, ...]  # exec form (the template writes it as JSON)
    health_start_period: int
    entrypoint: tuple[str, ...]  # exec form
    cmd: tuple[str, ...]  # exec form: the server's arguments
    jit_toolchain: bool  # runtime.jit_toolchain: nvcc and g++ kept
    jit_c_compiler: bool = False  # the serving engine compiles C at run time (Triton)
    # the venv in layers (BuildKit); empty: one COPY of the venv among ``copies``
    venv_layers: tuple[VenvLayer, ...] = ()
    # copies into the venv, after it (FlashInfer's modules built ahead of time)
    after_venv: tuple[RuntimeCopy, ...] = ()
    # HOME's group, with the owner's rights (g=u): any UID of this group (OpenShift: an
    # arbitrary UID with GID 0) creates the engine's caches there
    home_group: int = 0
    # build-time logs, caches and backups removed after the packages are installed (shell
    # globs; what makes the package layer reproducible)
    build_noise: tuple[str, ...] = ()


@dataclass(frozen=True)
class SmokeImport:
    """A module the built image must import at the expected version."""

    module: str
    dist: str
    version: str
    needs_gpu: bool = False  # imports libcuda: without --gpus only the install is checked


@dataclass(frozen=True)
class Resolved:
    """Everything derived from one profile, computed once."""

    profile: Profile
    mode: Mode
    source_name: str  # profile file name for the banner (machine-independent)
    chain: tuple[str, ...]
    gpus: tuple[GpuTarget, ...]  # gpu.targets, looked up
    base: BuildBase
    flash_attn: FlashAttnStage | None
    engine: EngineStage
    runtime: RuntimeStage
    # FlashInfer's start-up kernels built ahead of time (None: the engine has no known set)
    flashinfer_aot: FlashInferAotStage | None
    context_files: Mapping[str, bytes]  # extra files of the build context
    tags: tuple[str, ...]
    # the resolution record (dockergen.resolved.json): the profile's image inputs and every
    # derived value, as the profile hash covers them; written, never read back
    record: Mapping[str, Any]
    profile_hash: str
    min_driver: str  # the oldest NVIDIA driver the runtime image's CUDA runs on
    main_index: str  # build.pip_index_url, or PyPI
    # what the profile's Python lock is made from (`dockergen lock --python`)
    python_lock_inputs: LockInputs
    smoke_imports: tuple[SmokeImport, ...] = ()
    # libraries loaded on some compute capabilities only (whole-image audit): (glob, ccs)
    arch_scopes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # the engine's own server parser, run on ENTRYPOINT + CMD: the script's text (a file of
    # the engine's folder); empty: the engine has none
    serve_parser: str = ""
    # the module the server imports first (the bytecode check imports it); empty: none
    startup_import: str = ""
    # the engine's own start-up JIT: toolchain and seeded kernels (None: it has none)
    engine_jit: EngineJit | None = None
    derivations: tuple[Derivation, ...] = ()
    warnings: tuple[Problem, ...] = ()


@dataclass(frozen=True)
class CommandCheck:
    """A smoke check run as a command in the built image; ``verify(code, output)``."""

    name: str
    command: tuple[str, ...]
    verify: Any  # Callable[[int, str], tuple[bool, str]]


def last_line(out: str) -> str:
    """The last line of a command's output, trailing blank lines aside ("" for none)."""
    lines = out.strip().splitlines()
    return lines[-1] if lines else ""


def last_json_line(out: str) -> Any:
    """What a check's command printed as its last line, read as JSON (each check script
    prints one JSON line last); None where that line is missing or is not JSON."""
    try:
        return json.loads(last_line(out))
    except ValueError:
        return None

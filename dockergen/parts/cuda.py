"""The CUDA base: GPU targets, compute capabilities, the toolkit and its base images.

Owns ``cuda.yaml`` (GPUs, first/last toolkit per compute capability, toolkit releases with
their minimum driver and OS), the checks ``gpu-known``, ``cuda-known``, ``cuda-os``,
``cuda-arch-vs-toolkit``, ``ca-certificates`` and ``base-image-locked``, the arch list every
compile uses, the devel and runtime images (pinned from the base-image lock, when there is
one: dockergen/input/pins.py), the build-base system packages and the template
``templates/parts/cuda.j2``. Runtime part: the runtime image, ``ca-certificates``
(and the JIT toolchain when asked for), ``NVIDIA_DRIVER_CAPABILITIES`` and the arch labels.
"""

from __future__ import annotations

import difflib
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from packaging.version import Version

from dockergen import refs
from dockergen.errors import Edit, Location
from dockergen.files import inputs
from dockergen.knowledge.facts import Facts
from dockergen.resolve.context import Context, describe, nearest
from dockergen.resolve.model import CERT_DIR, CudaBase, Derivation, GpuTarget, cc_tuple

_CC = re.compile(r"(\d{1,2})\.(\d)")
_FAMILY_BY_MAJOR = {7: "volta/turing", 8: "ampere/ada", 9: "hopper", 10: "blackwell",
                    11: "thor", 12: "blackwell"}


# --- lookups ------------------------------------------------------------------------------
def gpu_names(f: Facts) -> list[str]:
    return sorted(f.cuda["gpus"])


def gpu(f: Facts, given: str) -> GpuTarget | None:
    """Resolve a GPU name (case-insensitive) or a compute capability string."""
    key = given.strip().lower()
    entry = f.cuda["gpus"].get(key)
    if entry is not None:
        return GpuTarget(given, entry["cc"], key, entry["family"], entry["src"],
                         int(entry["mem_gib"]), tuple(entry.get("gfd_product", ())),
                         tuple(entry.get("platforms", ())))
    m = _CC.fullmatch(key)
    if m:
        major = int(m.group(1))
        return GpuTarget(given, key, None, _FAMILY_BY_MAJOR.get(major, "unknown"),
                         "given as a compute capability")
    return None


def gpu_mem_gib(f: Facts, name: str) -> int | None:
    entry = f.cuda["gpus"].get(name)
    return int(entry["mem_gib"]) if entry else None


def cc_arch(f: Facts, cc: str) -> dict[str, Any] | None:
    entry = f.cuda["cuda_archs"].get(cc)
    return dict(entry) if entry is not None else None


def versions(f: Facts) -> list[str]:
    """Every CUDA toolkit release in the knowledge, oldest first."""
    return sorted(f.cuda["cuda"], key=Version)


def toolkit(f: Facts, version: str) -> dict[str, Any] | None:
    entry = f.cuda["cuda"].get(version)
    return dict(entry) if entry is not None else None


def version_edits(f: Facts, current: str, keep: Callable[[Version], bool] = lambda v: True
                  ) -> list[Edit]:
    """Candidate fixes of cuda.version: the known releases that ``keep`` accepts, the
    closest to ``current`` first."""
    return [Edit.set("cuda.version", v, f"use CUDA {v}")
            for v in nearest(versions(f), current) if keep(Version(v))]


def retarget(c: Context, old: list[GpuTarget], ok: Callable[[GpuTarget], bool]
             ) -> list[Edit]:
    """"target NAME instead of OLD": known GPUs newer than every one of ``old`` that ``ok``
    accepts, the closest compute capability first (for a rule no change of the software
    can satisfy on that GPU)."""
    gone = {t.given for t in old}
    rest = [given for given in c.p.gpu.targets if given not in gone]
    newest = max(t.cc_tuple for t in old)
    out: dict[str, Edit] = {}  # one GPU per compute capability: the first name
    gpus = c.facts.cuda["gpus"]
    for name in sorted(gpu_names(c.facts), key=lambda n: (cc_tuple(gpus[n]["cc"]), n)):
        target = gpu(c.facts, name)
        if (target is None or target.cc_tuple <= newest or name in rest or not ok(target)
                or target.cc in out or not _fits_platform(c, target)):
            continue
        out[target.cc] = Edit(f"target {name} instead of {' and '.join(sorted(gone))}",
                              (("gpu.targets", "[" + ", ".join([*rest, name]) + "]"),),
                              drastic=True)
    return list(out.values())


def _fits_platform(c: Context, target: GpuTarget) -> bool:
    """Whether ``target`` comes in hosts of the profile's platform (GH200: arm64 only)."""
    return not target.platforms or c.p.build.platform in target.platforms


def major_minor(version: str) -> str:
    """``"13.0.2"`` -> ``"13.0"``."""
    return ".".join(version.split(".")[:2])


def compiler_wheels(f: Facts, version: str, extras: str = "nvcc,cccl,cudart"
                    ) -> tuple[str, ...] | None:
    """CUDA's compiler as wheels for this CUDA release (``cuda.yaml`` ``compiler_wheels``):
    ``cuda-toolkit`` with ``extras`` (nvcc, CCCL and cudart; a build that includes cuRAND or
    cuBLAS headers adds those), and the nvvm and crt wheels pinned to its nvcc; None where
    dockergen does not know them."""
    row = f.cuda.get("compiler_wheels", {}).get(version)
    if row is None:
        return None
    return (f"cuda-toolkit[{extras}]=={version}",
            *(f"{name}=={row['nvcc']}" for name in ("nvidia-nvvm", "nvidia-cuda-crt")))


# the CUDA 13 wheels lay the toolkit out in one tree (nvidia-cuda-nvcc 13.x RECORD)
CUDA_HOME_IN_WHEELS = {"13": "nvidia/cu13"}


# --- checks -------------------------------------------------------------------------------
def major_constraints(f: Facts, version: str) -> tuple[str, ...]:
    """Constraints keeping the CUDA Python bindings at this CUDA release's major
    (``cuda.yaml`` ``same_major_packages``, with why)."""
    major = major_minor(version).split(".")[0]
    return tuple(f"{name}=={major}.*" for name in f.cuda["same_major_packages"])


def _other_model(given: str, name: str) -> bool:
    """rtx3090 is not a typo of rtx5090 but another GPU (another architecture): a guess that
    swaps digits of a model number, or changes the product line, is no guess."""
    family = re.compile(r"[a-z]*")  # rtx, h, a, l, b: a guess keeps the GPU line
    if family.match(given).group() != family.match(name).group():  # type: ignore[union-attr]
        return True
    return len(given) == len(name) and any(
        a != b and a.isdigit() and b.isdigit() for a, b in zip(given, name, strict=True))


def check_gpus(c: Context) -> None:
    """gpu-known: every target is a known GPU name or a compute capability."""
    for i, given in enumerate(c.p.gpu.targets):
        target = gpu(c.facts, given)
        if target is None:
            guess = [g for g in difflib.get_close_matches(given.lower(), gpu_names(c.facts), n=3,
                                                          cutoff=0.5)
                     if not _other_model(given.lower(), g)][:1]
            hint = f"did you mean {guess[0]!r}? " if guess else ""
            c.error(("gpu", "targets", i), f"unknown GPU {given!r}",
                    f"{hint}use a GPU name ({', '.join(gpu_names(c.facts))}) or a compute "
                    "capability like \"9.0\"")
            continue
        if cc_arch(c.facts, target.cc) is None:
            c.error(("gpu", "targets", i), f"compute capability {target.cc} is not in the "
                    "knowledge base", "use one of: " + ", ".join(sorted(
                        c.facts.cuda["cuda_archs"], key=cc_tuple)))
            continue
        c.gpus.append(target)
    c.gpus.sort(key=lambda t: (t.cc_tuple, t.given))


def check_cuda(c: Context) -> None:
    """cuda-known, cuda-os, cuda-arch-vs-toolkit."""
    version = c.p.cuda.version
    info = toolkit(c.facts, version)
    if info is None:
        c.error(("cuda", "version"), f"CUDA {version} is not in the knowledge base",
                edits=version_edits(c.facts, version))
        return
    if c.p.cuda.os not in info["os"]:
        c.error(("cuda", "os"), f"nvidia/cuda {version} images are not published for "
                f"{c.p.cuda.os}", edits=[Edit.set("cuda.os", o, f"use cuda.os: {o}")
                                         for o in info["os"]])
    _check_explicit_images(c)
    cuda = Version(version)
    for t in c.gpus:
        arch = cc_arch(c.facts, t.cc) or {}
        floor = Version(arch["min_cuda"])
        if cuda < floor:
            newer = version_edits(c.facts, version, partial(operator.le, floor))  # floor <= v
            c.error(("cuda", "version"), f"CUDA {version} cannot compile for compute capability "
                    f"{t.cc} (CUDA >= {arch['min_cuda']} can), but gpu.targets includes "
                    f"{describe(t)}", edits=[*newer, *c.drop(t)])
        ceiling = Version(arch.get("max_cuda", "999") + ".99")
        if cuda > ceiling:
            older = version_edits(c.facts, version, partial(operator.ge, ceiling))  # v <= ceiling
            still = retarget(c, [t], lambda g: (cc_arch(c.facts, g.cc) or {}).get(
                "max_cuda") is None)
            c.error(("cuda", "version"), f"CUDA {version} dropped compute capability {t.cc} "
                    f"(CUDA <= {arch['max_cuda']} has it), but gpu.targets includes "
                    f"{describe(t)}", edits=[*older, *c.drop(t), *still])


def check_platform(c: Context) -> None:
    """gpu-platform: a GPU sold only inside one kind of host (GH200, GB200: a Grace CPU;
    GB10: DGX Spark's) runs only images of that host's platform. An error, not a warning:
    an amd64 image on a Grace host stops at its first binary ("exec format error"), and
    nothing in the image could make it start."""
    platform = c.p.build.platform
    for t in c.gpus:
        if t.platforms and platform not in t.platforms:
            want = t.platforms[0]
            c.error(("build", "platform"), f"{describe(t)} exists only in {want} hosts, "
                    f"but build.platform is {platform}: the image could not start there",
                    edits=[Edit.set("build.platform", want, f"use build.platform: {want}"),
                           *c.drop(t)])


# nvidia/cuda's tag scheme, kept by mirrors: VERSION-[cudnn-]FLAVOUR-OS
# (src: hub.docker.com/r/nvidia/cuda tags, e.g. 13.0.2-cudnn-devel-ubuntu22.04)
_CUDA_TAG = re.compile(r":(\d+\.\d+\.\d+)-(?:cudnn\d*-)?(devel|runtime|base)-"
                       r"([a-z]+\d+(?:\.\d+)?)(?:$|@)")


def _check_explicit_images(c: Context) -> None:
    """cuda.devel_image / runtime_image, when their tag says what they are, must be what
    the profile says: a 12.8 devel image under cuda.version 13.0.2, a build stage on another
    OS (glibc) than the runtime, or a devel image shipped as the runtime all build for hours
    before failing, or never fail."""
    p = c.p.cuda
    for name, flavours in (("devel_image", ("devel",)), ("runtime_image", ("runtime", "base"))):
        ref = getattr(p, name)
        m = _CUDA_TAG.search(ref or "")
        if m is None:
            continue  # a tag in another scheme (a private base): nothing to compare
        version, flavour, os_name = m.groups()
        if version != p.version:
            c.error(("cuda", name), f"{ref} is CUDA {version}, but cuda.version is "
                    f"{p.version}", f"use the {p.version} image, or set cuda.version: "
                    f'"{version}"')
        if os_name != p.os:
            c.error(("cuda", name), f"{ref} is built on {os_name}, but cuda.os is {p.os} "
                    "(the stages must share one glibc)", f"use the {p.os} image, or set "
                    f"cuda.os: {os_name}")
        if flavour not in flavours:
            c.error(("cuda", name), f"{ref} is a {flavour} image, not "
                    + " or ".join(flavours), f"use the {flavours[0]} flavour of it")


def base_images(c: Context) -> dict[str, str]:
    """The base images the profile asks for, by field: cuda.devel_image / runtime_image, else
    the nvidia/cuda devel and runtime flavours of cuda.version and cuda.os (unpinned: these
    are the keys of the base-image lock)."""
    cuda = c.p.cuda
    return {"devel_image": cuda.devel_image or f"nvidia/cuda:{cuda.version}-devel-{cuda.os}",
            "runtime_image": cuda.runtime_image
            or f"nvidia/cuda:{cuda.version}-{cuda.runtime_flavor}-{cuda.os}"}


def check_locked(c: Context) -> None:
    """base-image-locked: with a lock beside the profile, it pins every base image the profile
    asks for (rendering one unpinned would silently drop the pin)."""
    if c.pins is None:
        return
    for name, ref in base_images(c).items():
        if refs.parse(ref).digest is None and c.pins.pin(ref) is None:
            c.error(("cuda", name), f"{ref} is not in {c.pins.file.name}",
                    f"run: dockergen lock --update {c.loaded.display}")


def _pinned(c: Context, ref: str) -> str:
    """``ref`` pinned by the lock (``repo:tag@sha256:...``, or its mirror), else as it is."""
    return (c.pins.pin(ref) if c.pins else None) or ref


def check_ca_certificates(c: Context) -> None:
    """ca-certificates: each listed file (``build.ca_certificates``, then the command's own,
    ``build --ca-cert``) exists and holds a PEM certificate."""
    listed = c.p.build.ca_certificates
    for i, name in enumerate(listed):
        _read_certificate(c, i, name, c.loaded.path.parent / name, None,
                          (f"{name} does not exist next to {c.loaded.path.name}",
                           "give a path relative to the profile file"))
    for j, given in enumerate(c.inputs.certificates):
        _read_certificate(c, len(listed) + j, str(given.path), given.path, given.origin,
                          (f"{given.path} does not exist", "give the path of a PEM file"))


def _read_certificate(c: Context, i: int, name: str, path: Path, where: Location | None,
                      missing: tuple[str, str]) -> None:
    """Check one certificate file and keep its bytes for the build context (read once);
    ``missing``: the problem and fix when there is no such file."""
    at = ("build", "ca_certificates", i)
    try:
        text = inputs.read_bytes(path, "certificate").decode("ascii")
    except FileNotFoundError:
        c.error(at, *missing, where=where)
        return
    except inputs.InputError as exc:  # a device, FIFO, link loop, huge file
        c.error(at, f"{name} {exc.problem}",
                "give a PEM certificate (-----BEGIN CERTIFICATE-----)", where=where)
        return
    except UnicodeDecodeError:
        c.error(at, f"{name} is not a readable PEM file",
                "give a PEM certificate (-----BEGIN CERTIFICATE-----)", where=where)
        return
    if "-----BEGIN CERTIFICATE-----" not in text or "PRIVATE KEY" in text:
        c.error(at, f"{name} is not a PEM certificate",
                "give a PEM certificate (-----BEGIN CERTIFICATE-----), never a key", where=where)
        return
    unreadable = _openssl_refuses(text)
    if unreadable:  # the markers alone passed, and update-ca-certificates failed later
        c.error(at, f"{name} holds a certificate OpenSSL cannot read ({unreadable})",
                "give the PEM file your CA published; check it with: openssl x509 -noout "
                f"-in {name}", where=where)
        return
    c.certificates.append(text.encode("ascii"))  # what the context copies


def _openssl_refuses(pem: str) -> str | None:
    """Why OpenSSL (the parser of update-ca-certificates) rejects the certificates, if so."""
    import ssl  # only for profiles with extra certificates: ssl costs start-up time

    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=pem)
    except (ssl.SSLError, ValueError) as exc:
        return re.sub(r"\s*\(_ssl\.c:\d+\)$", "", str(exc))  # OpenSSL's text, not CPython's line
    return None


# --- derivations --------------------------------------------------------------------------
@dataclass(frozen=True)
class CudaPart:
    """What the CUDA base decided, for the stages and the other components."""

    base: CudaBase
    runtime_image: str
    arch_list: str  # TORCH_CUDA_ARCH_LIST, e.g. "8.0;9.0"
    min_driver: str
    major_minor: str  # "13.0"
    runtime_apt: tuple[str, ...]
    env: dict[str, str]
    labels: dict[str, str]


def derive(c: Context, d: list[Derivation]) -> CudaPart:
    """Images, arch list and driver floor of a checked profile."""
    p = c.p
    for t in c.gpus:
        d.append(Derivation(f"gpu {t.given}", f"compute capability {t.cc}", f"{t.family}",
                            t.src))
    arch_list = ";".join(sorted({t.cc for t in c.gpus}, key=cc_tuple))
    d.append(Derivation("TORCH_CUDA_ARCH_LIST", arch_list,
                        "one entry per distinct compute capability of gpu.targets",
                        "torch/utils/cpp_extension.py _get_cuda_arch_flags"))
    cuda = p.cuda
    info = toolkit(c.facts, cuda.version) or {}
    mm = major_minor(cuda.version)
    asked = base_images(c)
    devel_image, runtime_image = (_pinned(c, asked["devel_image"]),
                                  _pinned(c, asked["runtime_image"]))
    locked = f"; pinned by {c.pins.file.name}" if c.pins else ""
    d.append(Derivation("build image", devel_image, ("cuda.devel_image" if cuda.devel_image
                        else "nvidia/cuda devel flavour of cuda.version and cuda.os (nvcc and "
                        "headers for the CUDA compiles)")
                        + (locked if devel_image != asked["devel_image"] else ""),
                        "engines-compat.md §5.3"))
    flavour_why = ("cudart only: the CUDA libraries come as wheels with torch (3.5 GB "
                   "under nvidia/ in a real vLLM 0.33.0 image)" if cuda.runtime_flavor == "base"
                   else "the CUDA math libraries and NCCL beside the wheels' own")
    d.append(Derivation("runtime image", runtime_image, ("cuda.runtime_image"
                        if cuda.runtime_image else f"nvidia/cuda {cuda.runtime_flavor} "
                        f"flavour: no compilers; {flavour_why}")
                        + (locked if runtime_image != asked["runtime_image"] else ""),
                        "engines-compat.md §5.3; VLLM:docker/Dockerfile FINAL_BASE_IMAGE"))
    d.append(Derivation("minimum host driver", info["min_driver"],
                        f"CUDA {cuda.version} (12.x/13.x minor-version compatibility allows "
                        "older drivers with a reduced feature set)", info["src"]))
    runtime_apt = ["ca-certificates"]
    if p.runtime.jit_toolchain:
        runtime_apt += ["g++", f"cuda-nvcc-{mm.replace('.', '-')}"]
    return CudaPart(
        # ccache and g++ compile the C++/CUDA extensions of the build stages.
        base=CudaBase(image=devel_image, apt=("ca-certificates", "ccache", "g++"),
                      ca_certificates=bool(c.certificates), cert_dir=CERT_DIR),
        runtime_image=runtime_image, arch_list=arch_list, min_driver=info["min_driver"],
        major_minor=mm, runtime_apt=tuple(runtime_apt),
        env={"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"},
        labels={"dockergen.cuda.archs": arch_list,
                "dockergen.cuda.min-driver": info["min_driver"]},
    )

"""What every serving engine shares: releases, quantization, the engine stage, the server.

:class:`ServingEngine` holds the checks and derivations that read only an engine's own
facts file (``components/serving/<engine>.yaml``): the release is known, its Python range
and CUDA major match the profile, the quantization methods exist and run on the targets,
the scheduler limits the server would refuse at start-up, no credentials in the server's
environment or arguments. An engine module subclasses it and adds what is its own: the
server command (:meth:`ServingEngine.serve`), extra environment, the import the smoke test
checks, and why it does or does not want a FlashAttention-2 build. The engine stage is
formatted by ``templates/components/serving.j2``.
"""

from __future__ import annotations

import inspect
import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from packaging.utils import canonicalize_name
from packaging.version import Version

from dockergen import inputs, kernels, pylockfile, reproducible
from dockergen.components import cuda, python, python_platform
from dockergen.components import torch as torch_component
from dockergen.components.base import Context, describe_all, dotted, release_edits
from dockergen.components.serving.run import IMAGE_ENV, ContextLimit, EngineRun, ModelContext
from dockergen.errors import Edit
from dockergen.knowledge import Facts, in_range, is_unverified
from dockergen.model import (
    APP_HOME,
    MAIN_INDEX,
    PYTHON_HOME,
    VENV,
    Derivation,
    EngineStage,
    GpuTarget,
    Mode,
    RuntimeCopy,
    ServeCommand,
    SmokeImport,
    TorchInstall,
    cc_tuple,
    is_pypi,
)
from dockergen.profile import MACHINE_OF_PLATFORM

OPTIONS_DIR = "/etc/dockergen"  # where engine option files from the context are copied


@dataclass(frozen=True)
class ServingPart:
    """What a serving engine decided: its stage, server, and runtime contributions."""

    stage: EngineStage
    serve: ServeCommand
    runtime_apt: tuple[str, ...]
    copies: tuple[RuntimeCopy, ...]
    env: dict[str, str]
    health_cmd: tuple[str, ...]  # exec form
    smoke: tuple[SmokeImport, ...]  # the engine, then what it installs beside itself
    c_compiler: bool  # the engine compiles C at run time (Triton's launcher)
    context_files: Mapping[str, bytes] = field(default_factory=dict)  # e.g. python.lock
    # libraries the engine loads on some compute capabilities only: (glob, ccs)
    arch_scopes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # the script that runs the release's own server parser (facts serve_parser, a file of the
    # engine's folder): its text; empty: the engine has none
    serve_parser: str = ""
    # the module the server imports first (facts startup_import): the bytecode check's
    startup_import: str = ""
    # top-level site-packages entries of the engine and its kernels: one venv layer
    layer_packages: tuple[str, ...] = ()


# Folders of the image a read-only model mount must neither cover nor enter: the base
# system (FHS top folders of the CUDA images), the tmpfs/emptyDir mounts of the run
# configurations (/tmp, /dev/shm), and what dockergen installs (the venv and Python the
# entrypoint runs, the app user's HOME with its cache mounts, dockergen's own files).
IMAGE_FOLDERS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32",
                 "/proc", "/root", "/run", "/sbin", "/sys", "/tmp", "/usr", "/var",
                 VENV, PYTHON_HOME, APP_HOME, "/opt/dockergen", OPTIONS_DIR)
MODEL_FOLDER_EXAMPLE = "/models/{name}"


def model_mount_problem(model: str) -> str | None:
    """Why the read-only mount of a local ``serving.model`` would break the image, or None.

    ``deploy`` mounts the model's parent folder (``/models/x`` -> ``/models``): a model at
    ``/opt/m`` mounted over ``/opt`` and hid the venv and Python the entrypoint needs. A
    path that is not in normal form (``..``, ``.``, ``//``, a trailing ``/``) would be
    mounted somewhere else than it reads.
    """
    if posixpath.normpath(model) != model or "//" in model:
        return f"{model!r} is not a normalised path (no '..', '.', '//' or trailing '/')"
    mount = posixpath.dirname(model)
    if mount == "/":
        return ("the model is mounted read-only at its parent folder, here / (the whole "
                "image, which the entrypoint needs)")
    for folder in IMAGE_FOLDERS:
        if mount == folder or folder.startswith(mount + "/") or mount.startswith(folder + "/"):
            where = "covers" if folder.startswith(mount) else "lies in"
            return (f"the model is mounted read-only at its parent folder {mount}, which "
                    f"{where} {folder} of the image (the entrypoint needs what is there)")
    return None


LOCK_IN_CONTEXT = "python.lock"
LOCK_IN_IMAGE = "/opt/dockergen/python.lock"
CONSTRAINTS_IN_CONTEXT = "constraints.txt"
CONSTRAINTS_IN_IMAGE = "/opt/dockergen/constraints.txt"
# The reason of every derivation of a serving.extra_args item (an engine's own checks of the
# flags it derives leave these out).
EXTRA_ARGS_REASON = "from serving.extra_args"
# Where FlashInfer publishes flashinfer-cubin releases PyPI lacks (its own installer's index;
# not reachable from the machines that check the knowledge, hence unverified), for every
# engine that installs FlashInfer. dockergen installs from it only when
# build.flashinfer_index_url is set (this URL or a mirror).
FLASHINFER_INDEX: dict[str, str] = {
    "url": "https://flashinfer.ai/whl",
    "src": "flashinfer-python 0.7.2.post1 wheel flashinfer/__main__.py _build_cubin_index_url "
           "(non-nightly); _install_cubin_wheel"}


def _glibc(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def _on(machine: str) -> str:
    """How a message names the image's machine: x86_64, the default, goes unsaid."""
    return "" if machine == "x86_64" else f" on {machine}"


class ServingEngine:
    """One serving engine; subclasses set the class attributes and :meth:`serve`."""

    name: ClassVar[str]  # engine.name in profiles
    facts_file: ClassVar[str]  # "serving/<module>"
    module: ClassVar[str]  # the Python module the smoke test imports
    imports_need_gpu: ClassVar[bool] = False  # import loads libcuda (no GPU: check install)
    health_path: ClassVar[str] = "/health"
    # how the server is probed and which folders it writes at run time (deploy)
    run: ClassVar[EngineRun]
    # Why the engine does (or does not) want a FlashAttention-2 build; shown beside a
    # valid flash-attn build as a warning, None when there is nothing to say.
    flash_attn_note: ClassVar[str | None] = None
    # Packages a release row pins in lockstep with the engine (row field -> package), read
    # from a new release's METADATA by `dockergen upgrade`
    lockstep_pins: ClassVar[dict[str, str]] = {}
    # Why the engine serves without a FlashAttention-2 build (None: it may need one)
    flash_attn_unneeded: ClassVar[str | None] = None

    # --- facts ----------------------------------------------------------------------------
    def folder(self) -> Path:
        """The engine's folder: its code, facts, flag list, metric names and scripts."""
        return Path(inspect.getfile(type(self))).parent

    def facts(self, f: Facts) -> Mapping[str, Any]:
        """This engine's facts in the knowledge ``f`` of one resolution."""
        return f.of(self.facts_file)

    def probe_path(self, f: Facts) -> str:
        """The server's health endpoint: the image's HEALTHCHECK and the run
        configurations' probes ask it (facts ``health_path``, else the class's)."""
        return str(self.facts(f).get("health_path", self.health_path))

    def release(self, f: Facts, version: str) -> dict[str, Any] | None:
        entry = self.facts(f)["releases"].get(version)
        return dict(entry) if entry is not None else None

    def versions(self, f: Facts) -> list[str]:
        return sorted(self.facts(f)["releases"], key=Version)

    def quant(self, f: Facts, kind: str, value: str) -> dict[str, Any] | None:
        """``kind`` is ``"quantization"`` (weights) or ``"kv_cache"``."""
        entry = self.facts(f)[kind].get(value)
        return dict(entry) if entry is not None else None

    def flag_list(self, f: Facts, version: str) -> frozenset[str] | None:
        """Every option string the release's server accepts: its ``serve_flags`` row
        (extracted from its wheel: ``vllm/flags.json``, ``sglang/flags.json``; or a user
        knowledge file's, e.g. written by ``dockergen upgrade``); None: not read, or an
        engine that keeps no flag lists (TensorRT-LLM)."""
        row = self.facts(f).get("serve_flags", {}).get(version)
        return frozenset(row["flags"]) if row is not None else None

    def flag_source(self, f: Facts, version: str) -> str:
        """Where the release's flag list was read (its row's ``src``)."""
        return str(self.facts(f)["serve_flags"][version]["src"])

    # the wheel members :meth:`read_serve_flags` reads (none: the engine's are not read)
    flag_members: ClassVar[tuple[str, ...]] = ()

    def read_serve_flags(self, members: Mapping[str, bytes], shown: str) -> list[str]:
        """Every option string of a release's server, read from its wheel's ``members``
        (those of :attr:`flag_members` it holds; ``shown`` names the wheel in errors), for a
        release dockergen does not know. Raises ValueError when they cannot be read."""
        raise ValueError(f"dockergen does not read {self.name}'s from its wheel")

    # the wheel members :meth:`read_floors` reads (none: the engine's are not read)
    floor_members: ClassVar[tuple[str, ...]] = ()

    def read_floors(self, members: Mapping[str, bytes], shown: str) -> dict[str, str]:
        """Each quantization method's minimum compute capability in a release, read from its
        wheel's ``members`` (those of :attr:`floor_members` it holds), like
        :meth:`read_serve_flags`. Raises ValueError when they cannot be read."""
        raise ValueError(f"dockergen does not read {self.name}'s from its wheel")

    def floor_of(self, f: Facts, method: str, release: str) -> str | None:
        """The minimum compute capability of a weight quantization method on a release
        (None: none was read for that release)."""
        return min_cc(self.facts(f)["quantization"][method], release)[0]

    # --- checks ---------------------------------------------------------------------------
    # server flags the profile derives -> the field that owns them (each engine's serve())
    derived_flags: ClassVar[dict[str, str]] = {}

    def flag_name(self, arg: str) -> str | None:
        """The flag an ``extra_args`` item sets (``--a-b=1`` -> ``--a-b``), or None."""
        return arg.split("=", 1)[0] if arg.startswith("-") and not arg[1:2].isdigit() else None

    def check_extra_args(self, c: Context) -> None:
        """serving.extra_args may not set what the profile derives, nor removed flags.

        A derived flag given again lands after the derived one and wins, while `explain`,
        the labels and the lock file still show the profile's value.
        """
        removed = self.facts(c.facts).get("removed_flags", {})
        version = Version(c.p.engine.version)
        args = c.p.serving.extra_args
        for i, arg in enumerate(args):
            name = self.flag_name(arg)
            if name is None:
                continue
            given = repr(arg)
            if "=" not in arg and i + 1 < len(args) and self.flag_name(args[i + 1]) is None:
                given += f" and its value {args[i + 1]!r}"
            if name in self.derived_flags:
                owner = self.derived_flags[name]
                c.error(("serving", "extra_args", i), f"{name} is derived from {owner}; given "
                        "here it would silently win over the profile's value (explain, labels "
                        "and the lock file would disagree with the server)",
                        f"set {owner} instead and remove {given}")
            elif name in removed and version >= Version(removed[name]["since"]):
                row = removed[name]
                c.error(("serving", "extra_args", i), f"{name} was removed in {self.name} "
                        f"{row['since']} ({row['src']}); the server would refuse to start",
                        f"remove {given}" + (f"; {row['instead']}" if row.get("instead")
                                             else ""))

    def check_release(self, c: Context) -> None:
        """engine-release-known, engine-python, engine-cuda-major; sets the torch pin."""
        p = c.p
        c.torch_pin = p.engine.torch
        c.flash_attn_note = self.flash_attn_note
        c.flash_attn_unneeded = self.flash_attn_unneeded
        release = self.release(c.facts, p.engine.version)
        if release is None:
            c.error(("engine", "version"), f"{p.engine.name} {p.engine.version} is not in the "
                    "knowledge base", "add the release with its source in a knowledge file "
                    f"listed under the profile's `knowledge:`, table {self.facts_file}: "
                    "releases (`dockergen outdated` shows what is known)",
                    edits=release_edits(c, self.facts(c.facts)["releases"]))
            return
        c.release = release
        c.flashinfer_aot = (self.facts(c.facts).get("flashinfer_aot") or {}).get(p.engine.version)
        c.startup_jit = (self.facts(c.facts).get("startup_jit") or {}).get(p.engine.version)
        c.torch_pin = p.engine.torch or str(release["torch"])
        mark = release.get("unverified")
        if mark:
            what = ("the pins" if mark is True else
                    "the " + ", ".join(f"{f} range" if f == "python" else f for f in mark))
            c.warn(("engine", "version"), f"{what} of {p.engine.name} {p.engine.version} "
                   f"{'are' if mark is True else 'is'} unverified ({release['src']})",
                   "confirm before a long build")
        if not in_range(p.python + ".0", release["python"]):
            # unverified facts only warn (see `python -m dockergen.maint.knowledge check`)
            doubt = is_unverified(release, "python")
            text = (f"{p.engine.name} {p.engine.version} requires Python {release['python']}, "
                    f"but python is {p.python}")
            if doubt:
                c.warn(("python",), text + " (unverified)", "pick a Python version inside "
                       "that range")
            else:
                c.error(("python",), text,
                        edits=python.version_edits(c.facts, p.python, release["python"]))
        major = Version(p.cuda.version).major
        if cuda.toolkit(c.facts, p.cuda.version) is not None and major != release["cuda_major"]:
            want = int(release["cuda_major"])
            c.error(("cuda", "version"), f"{p.engine.name} {p.engine.version} wheels are built "
                    f"for CUDA {want}.x, but cuda.version is {p.cuda.version}",
                    edits=[*cuda.version_edits(c.facts, p.cuda.version,
                                               lambda v: v.major == want),
                           *release_edits(c, self.facts(c.facts)["releases"],
                                          lambda row: row["cuda_major"] == major)])

    def kernel_version(self, f: Facts, release: str, row: Mapping[str, Any] | None = None
                       ) -> str | None:
        """The version of the package holding the release's compiled kernels: the engine's
        own, or the one its release row (``row``, else the facts') pins (``kernel:
        NAME==VERSION``)."""
        facts = self.facts(f)
        if facts["kernel_libraries"]["package"] == facts["package"]:
            return release
        pin = (row if row is not None else facts["releases"].get(release) or {}).get("kernel")
        return str(pin).split("==", 1)[1] if pin else None

    def kernel_code(self, f: Facts, release: str, cc: str, machine: str = "x86_64"
                    ) -> dict[str, list[str]] | None:
        """The libraries a GPU of compute capability ``cc`` loads on ``release`` and the code
        each carries in the wheel for ``machine`` (its ``kernels`` table: x86_64's
        ``kernels``, aarch64's ``kernels_aarch64``), or None when nothing was read for it."""
        facts = self.facts(f)
        version = self.kernel_version(f, release)
        table = facts.get(kernels.TABLE_OF_MACHINE[machine], {})
        row = table.get(version) if version else None
        if row is None:
            return None
        select = facts["kernel_libraries"]["select"]
        members = select.get(cc, select["*"])
        return {m: list(row["code"][m]) for m in members if m in row["code"]}

    def _runs(self, f: Facts, release: str, target: GpuTarget, machine: str = "x86_64"
              ) -> bool | None:
        code = self.kernel_code(f, release, target.cc, machine)
        return None if code is None else all(kernels.runs_on(c, target.cc)
                                             for c in code.values())

    def check_kernels(self, c: Context) -> None:
        """engine-kernel-archs: every target runs the code of the compiled library each model
        loads (read from the release's wheel for the image's machine), whatever the
        quantization floors say."""
        facts, p, machine = self.facts(c.facts), c.p, c.machine
        if "kernel_libraries" not in facts or c.release is None:
            return
        wheels = (facts.get("wheel_platforms") or {}).get(p.engine.version)
        if wheels is not None and machine not in wheels:
            return  # no wheel for the machine at all: engine-platform's error says so
        package = facts["kernel_libraries"]["package"]
        version = self.kernel_version(c.facts, p.engine.version)
        if not c.gpus or self.kernel_code(c.facts, p.engine.version, c.gpus[0].cc,
                                          machine) is None:
            wheel = f"'s {machine} wheel" if machine != "x86_64" else ""
            c.warn(("engine", "version"), f"the GPU code of {package} {version}{wheel} has "
                   "not been read: whether it runs on every target is unknown until the "
                   "image runs there", "test it on each GPU first")
            return
        bad = [t for t in c.gpus if not self._runs(c.facts, p.engine.version, t, machine)]
        if not bad:
            return
        shown: dict[str, list[str]] = {}
        for t in bad:
            shown.update(self.kernel_code(c.facts, p.engine.version, t.cc, machine) or {})
        libraries = "; ".join(f"{m}: {kernels.span(code)}" for m, code in sorted(shown.items()))
        src = facts[kernels.TABLE_OF_MACHINE[machine]][version]["src"]
        works = {v: row for v, row in facts["releases"].items()
                 if all(self._runs(c.facts, v, t, machine) for t in c.gpus)}
        c.error(("gpu", "targets"), f"{p.engine.name} {p.engine.version} cannot run on "
                f"{describe_all(bad)}{_on(machine)}; its compiled kernels carry no code for "
                f"that compute capability ({libraries}; {src}), so the server stops at its "
                "first kernel with \"no kernel image is available\"",
                edits=[*release_edits(c, works), *c.drop(*bad),
                       *cuda.retarget(c, bad, lambda g: bool(
                           self._runs(c.facts, p.engine.version, g, machine)))])

    def check_platform_wheels(self, c: Context) -> None:
        """engine-platform: the release publishes a wheel for the image's machine, and the
        base OS's glibc is one that wheel installs on (SGLang's manylinux_2_34: not
        ubuntu20.04's 2.31). Read per release from the files on the index
        (``wheel_platforms``); a release not read there warns off x86_64."""
        p, machine = c.p, c.machine
        if c.release is None:
            return
        releases = self.facts(c.facts)["releases"]
        rows = self.facts(c.facts).get("wheel_platforms") or {}
        row = rows.get(p.engine.version)
        if row is None:
            if machine != "x86_64":
                c.warn(("build", "platform"), f"which machines {p.engine.name} "
                       f"{p.engine.version} publishes wheels for has not been read "
                       "(dockergen/maint/platforms.py): whether it installs on "
                       f"{machine} is unknown until the build", "build it once for "
                       f"{p.build.platform} before relying on it")
            return
        if machine not in row:
            other = next(pl for pl, m in MACHINE_OF_PLATFORM.items() if m in row)
            c.error(("build", "platform"), f"{p.engine.name} {p.engine.version} publishes "
                    f"no {machine} wheel ({row['src']}), so it cannot be installed on "
                    f"{p.build.platform}",
                    edits=[*release_edits(c, {v: r for v, r in releases.items()
                                              if machine in rows.get(v, {})}),
                           Edit.set("build.platform", other, f"use build.platform: {other}")])
            return
        self._check_glibc(c, row)

    def check_closure_wheels(self, c: Context) -> None:
        """closure-wheels: every member of the release's whole closure has a wheel for the
        image's Python and wheel platform, as read for that triple (``closure_wheels``,
        tools/closure_wheels.py: uv's resolution, then each member's files on the index);
        a member without one would be compiled from its sdist in the engine stage.
        ``dockergen lock --python`` judges the real closure the same way online."""
        p = c.p
        row = (self.facts(c.facts).get("closure_wheels") or {}).get(p.engine.version) or {}
        platform = python_platform.wheel_platform(p.cuda.os, p.cuda.devel_image, c.machine)
        lacking = (row.get(platform) or {}).get(p.python)
        if not lacking:
            return
        minor = int(p.python.split(".")[1])
        fits = sorted((py for py, names in (row.get(platform) or {}).items() if not names),
                      key=lambda py: (abs(int(py.split(".")[1]) - minor), py))
        c.error(("python",), f"the closure of {p.engine.name} {p.engine.version} has no "
                f"wheel for Python {p.python} on {platform} of {', '.join(lacking)} "
                f"({row['src']}): the engine stage would compile them from their sdists "
                "with whatever the build image has", "run `dockergen lock --python` to see "
                "the whole closure judged", edits=[
                    Edit.set("python", py, f'use python: "{py}"') for py in fits])

    def _check_glibc(self, c: Context, row: Mapping[str, Any]) -> None:
        p, need = c.p, str(row[c.machine])
        have = python_platform.os_glibc(p.cuda.os, p.cuda.devel_image)
        if have is None or have >= _glibc(need):
            return
        toolkit = cuda.toolkit(c.facts, p.cuda.version) or {"os": []}
        fits = [o for o in toolkit["os"]
                if (python_platform.os_glibc(o, None) or (0, 0)) >= _glibc(need)]
        c.error(("cuda", "os"), f"{p.engine.name} {p.engine.version}'s {c.machine} wheels "
                f"need glibc >= {need} (manylinux_{need.replace('.', '_')}; {row['src']}), "
                f"but {p.cuda.os} has glibc {have[0]}.{have[1]}: no wheel installs there",
                edits=[Edit.set("cuda.os", o, f"use cuda.os: {o}") for o in fits])

    def check_flashinfer_on_pypi(self, c: Context) -> None:
        """engine-pin-on-pypi: a release pinning a flashinfer-python PyPI never carried (vLLM
        0.34.0: 0.7.3) cannot be installed from PyPI; from a mirror, it must be there."""
        row = self.flashinfer_row(c)
        if not row or row.get("python_on_pypi", True):
            return
        p = c.p
        text = (f"{p.engine.name} {p.engine.version} requires flashinfer-python=={row['python']}, "
                f"which PyPI does not carry ({row['src']})")
        # PyPI itself, written in full as pip_index_url, is no mirror that may carry it
        mirror = None if is_pypi(p.build.pip_index_url) else p.build.pip_index_url
        index = mirror or p.build.flashinfer_index_url
        if index:
            c.warn(("engine", "version"), f"{text}; the build must find it on {index}",
                   "check that the index carries it before a long build")
            return
        flashinfer = self.facts(c.facts).get("flashinfer", {})
        installable = {v: row for v, row in self.facts(c.facts)["releases"].items()
                       if (flashinfer.get(v) or {}).get("python_on_pypi", True)}
        c.error(("engine", "version"), f"{text}: the engine cannot be installed from PyPI",
                edits=release_edits(c, installable))

    def check_quantization(self, c: Context) -> None:
        """Weight and KV-cache methods exist for this engine and run on the targets."""
        p = c.p
        for kind, value, path in (("quantization", p.quantization.weights,
                                   ("quantization", "weights")),
                                  ("kv_cache", p.quantization.kv_cache,
                                   ("quantization", "kv_cache"))):
            entry = self.quant(c.facts, kind, value)
            if entry is None:
                field = "kv_cache" if kind == "kv_cache" else "weights"
                c.error(path, f"{p.engine.name} has no {value} "
                        f"{'KV cache' if kind == 'kv_cache' else 'weight quantization'}",
                        edits=[Edit.set(dotted(path), k, f"use {field}: {k}")
                               for k in self.facts(c.facts)[kind]])
                continue
            floor, unverified = min_cc(entry, p.engine.version)
            if floor is None:  # a per-release row that has not read this release
                c.warn(path, f"no minimum compute capability of {value} has been read for "
                       f"{p.engine.name} {p.engine.version} (known: "
                       f"{', '.join(entry['min_cc'])}; {entry['src']})",
                       f"check {value} on each target GPU before serving it, or pin a "
                       "release whose range is known (dockergen outdated lists them)")
            # a per-release floor names the release it was read from
            engine = p.engine.name + (f" {p.engine.version}"
                                      if isinstance(entry["min_cc"], Mapping) else "")
            too_old = [t for t in c.gpus
                       if floor is not None and cc_tuple(t.cc) < cc_tuple(floor)]
            if too_old and unverified:  # a floor no artefact confirmed: warn
                c.warn(path, f"{value} may need compute capability >= {floor} on "
                       f"{engine} (unverified: {entry['src']}), "
                       f"and gpu.targets includes {describe_all(too_old)}",
                       "test it on that GPU first")
            elif too_old:
                c.error(path, f"{value} needs compute capability >= {floor} on "
                        f"{engine}, but gpu.targets includes "
                        f"{describe_all(too_old)}",
                        edits=_quant_fix(c, self.facts(c.facts)[kind], kind, value, too_old))
                continue
            fast = entry.get("fast_cc")
            slow = [t for t in c.gpus if fast and cc_tuple(t.cc) < cc_tuple(fast)]
            if slow:
                what = ("runs weight-only (W8A16 FP8-Marlin): memory savings, no FP8 speedup"
                        if kind == "quantization" else
                        "is stored in fp8 but attention runs without FP8 kernels")
                c.warn(path, f"{value} on {describe_all(slow)} {what} (FP8 compute needs "
                       f"compute capability >= {fast})",
                       "expected on Ampere; use bf16 for full speed")

    def check_scheduler(self, c: Context) -> None:
        """vllm-batched-tokens: limits the server's scheduler would reject at start-up."""
        s = c.p.serving
        if s.max_num_batched_tokens is None:
            return
        if (s.enable_chunked_prefill is False and s.max_model_len is not None
                and s.max_num_batched_tokens < s.max_model_len):
            c.error(("serving", "max_num_batched_tokens"), f"{s.max_num_batched_tokens} is "
                    f"below max_model_len ({s.max_model_len}) with chunked prefill disabled; "
                    "the server refuses to start",
                    "raise it to >= max_model_len or enable chunked prefill")
        if s.max_num_seqs is not None and s.max_num_batched_tokens < s.max_num_seqs:
            c.error(("serving", "max_num_batched_tokens"), f"{s.max_num_batched_tokens} is "
                    f"below max_num_seqs ({s.max_num_seqs}); the server refuses to start",
                    "raise max_num_batched_tokens or lower max_num_seqs")

    def check_server_args(self, c: Context) -> None:
        """Engine-specific checks of the server arguments (none by default)."""

    def check_model_path(self, c: Context) -> None:
        """A local ``serving.model`` is a normalised path whose mount hides nothing."""
        model = c.p.serving.model
        if not model.startswith("/"):
            return  # a Hugging Face id: downloaded, not mounted
        problem = model_mount_problem(model)
        if problem:
            name = next((part for part in reversed(model.split("/"))
                         if part not in ("", ".", "..")), "model")
            fix = MODEL_FOLDER_EXAMPLE.format(name=name)
            c.error(("serving", "model"), problem, "put the model in a folder of its own, "
                    f"e.g. serving.model: {fix}")

    def check_packages(self, c: Context) -> None:
        """packages.pip/apt go through the same pins and checks as dockergen's own.

        A pip pin of something dockergen pins itself (torch, the engine, packages in its
        lockstep, flash-attn) would replace that pin; a compiler in the runtime image would
        fail the no-compilers smoke check unless runtime.jit_toolchain keeps them.
        """
        ours: dict[str, str] = {canonicalize_name(r.split("==")[0]): r
                                for r in self.requirements(c)}
        ours.setdefault("torch", f"torch=={c.torch_pin}")
        if c.p.flash_attn.build == "source":
            ours.setdefault("flash-attn", f"flash-attn=={c.p.flash_attn.version}")
        seen: dict[str, int] = {}
        for i, pin in enumerate(c.p.packages.pip):
            name = canonicalize_name(pin.split("[")[0].split("==")[0])
            if name in ours:
                c.error(("packages", "pip", i), f"{name} is pinned by dockergen ({ours[name]}, "
                        "derived from the profile); a second pin would replace it",
                        "remove it; change the field that derives it instead")
            elif name == "flash-attn":
                # from PyPI it is an sdist: built inside the engine install for every arch,
                # with no MAX_JOBS cap and no C++-standard check (flash_attn.py has those)
                c.error(("packages", "pip", i), "flash-attn is built by dockergen's flash-attn "
                        "stage (arch list, MAX_JOBS and C++ standard checked), not by pip",
                        "remove it and set flash_attn.build: source with flash_attn.version")
            elif name in seen:
                c.error(("packages", "pip", i), f"{name} is already pinned at packages.pip"
                        f"[{seen[name]}]", "keep one pin")
            seen.setdefault(name, i)
        url = c.p.build.flashinfer_index_url
        if url and url not in self.indexes(c):
            c.warn(("build", "flashinfer_index_url"), f"unused: {c.p.engine.name} "
                   f"{c.p.engine.version} takes no FlashInfer kernels from an extra index",
                   "remove build.flashinfer_index_url")
        # the runtime carries no compiler, or only the C compiler Triton needs where the
        # engine's kernels build at run time; the smoke test checks the same lists
        if not c.p.runtime.jit_toolchain:
            keeps_c = bool(self.facts(c.facts).get("runtime_c_compiler"))
            for i, apt in enumerate(c.p.packages.apt):
                if keeps_c and apt in python.C_COMPILER_PACKAGES:
                    continue
                if python.is_compiler_package(apt):
                    carries = ("only the C compiler its Triton kernels need (" +
                               ", ".join(python.C_COMPILER_PACKAGES) + ")") if keeps_c \
                        else "none"
                    c.error(("packages", "apt", i), f"{apt} is a compiler; the runtime image "
                            f"carries {carries} (a smoke check fails the build)",
                            "set runtime.jit_toolchain: true if the server compiles at run "
                            "time, or remove it")

    def lock_inputs(self, c: Context) -> pylockfile.LockInputs:
        """What a Python lock of this profile is made from (``dockergen lock --python``
        reads them from the resolution) and must have been made from (the check)."""
        p = c.p
        indexes = self.indexes(c)
        torch_extra = p.build.torch_from != "main-index"
        main = p.build.pip_index_url or MAIN_INDEX
        return pylockfile.LockInputs(
            engine=self.requirements(c)[0], torch=c.torch_pin or "",
            torch_index=indexes[0] if torch_extra else main, main_index=main,
            engine_index=next((i for i in indexes[1 if torch_extra else 0:]
                               if i != p.build.flashinfer_index_url), None),
            python=p.python, platform=python_platform.wheel_platform(p.cuda.os, p.cuda.devel_image,
                                                             c.machine),
            extra=tuple(p.packages.pip),
            flashinfer_cubin=next((r for r in self.requirements(c)
                                   if r.startswith("flashinfer-cubin==")), None),
            flashinfer_index=(p.build.flashinfer_index_url
                              if p.build.flashinfer_index_url in indexes else None),
            constraints=cuda.major_constraints(c.facts, p.cuda.version))

    def check_python_lock(self, c: Context) -> None:
        """python-lock: a lock beside the profile must match it; the engine stage uses it."""
        path = pylockfile.path_of(c.loaded.path)
        if c.release is None or not os.path.lexists(path):
            return
        fix = f"run `dockergen lock --python {c.loaded.path}` to refresh it, or delete it"
        try:
            text = inputs.read_text(path, "lock")
        except (FileNotFoundError, inputs.InputError) as exc:  # a device, FIFO, loop, huge
            what = exc.problem if isinstance(exc, inputs.InputError) else "vanished"
            c.error(("engine", "version"), f"{path.name} {what}", fix)
            return
        try:
            had = pylockfile.read_inputs(text)
        except pylockfile.LockHeaderError as exc:
            c.error(("engine", "version"), f"{path.name}: {exc}", fix)
            return
        if had is None:
            c.error(("engine", "version"), f"{path.name} is not a dockergen Python lock", fix)
            return
        # the OS's wheels; with an explicit devel image dockergen cannot see the OS, so a
        # lock made for a chosen platform (--python-platform) is taken as is
        differs = sorted(pylockfile.differences(
            had, self.lock_inputs(c), ("platform",) if c.p.cuda.devel_image else ()))
        if differs:
            # point at the field that moved: packages.pip when only the extras differ
            where = (("packages", "pip") if [k for k, _, _ in differs] == ["extra"]
                     else ("engine", "version"))
            c.error(where, f"{path.name} no longer matches the profile ("
                    + "; ".join(f"{k}: lock {was!r}, profile {now!r}"
                                for k, was, now in differs) + ")", fix)
            return
        c.python_lock = text

    def indexes(self, c: Context) -> list[str]:
        """The extra indexes of the engine install: the CUDA-matched torch index (unless
        torch comes from the main index), then the engine's own index if it has one."""
        p = c.p
        # torch from the main index needs no extra index of its own
        out = [] if p.build.torch_from == "main-index" else [
            torch_component.index_url(p.build.torch_index_url, p.cuda.version)]
        if p.build.engine_index_url:
            out.append(p.build.engine_index_url)
        elif self.facts(c.facts).get("extra_index_url"):
            out.append(self.facts(c.facts)["extra_index_url"])
        return out + self.extra_indexes(c)

    # --- FlashInfer's precompiled kernels, for every engine whose release pins FlashInfer ---
    def flashinfer_row(self, c: Context) -> dict[str, Any] | None:
        """The release's FlashInfer facts: ``python`` (the flashinfer-python version it
        installs), ``cubin`` (the release pulls flashinfer-cubin itself), ``cubin_on_pypi``,
        ``src``; None for an engine or release without FlashInfer."""
        return None

    def _flashinfer(self, c: Context) -> tuple[str | None, bool]:
        """(flashinfer-cubin pin the image needs, whether it comes from the FlashInfer index).

        A release that pulls flashinfer-python but not flashinfer-cubin leaves FlashInfer
        without its precompiled kernels; it then downloads them at first use or JIT-builds
        them with nvcc (none in the runtime image). The cubin must be the same version as
        flashinfer-python (flashinfer/jit/env.py _check_cubin_version ignores or refuses
        another).
        """
        row = self.flashinfer_row(c)
        if not row or row.get("cubin"):
            return None, False
        return f"flashinfer-cubin=={row['python']}", not row.get("cubin_on_pypi", False)

    def own_requirements(self, c: Context) -> tuple[str, ...]:
        """What the engine stage installs for the engine: the engine, then packages pinned
        in lockstep with it."""
        return (f"{self.facts(c.facts)['package']}=={c.p.engine.version}",)

    def requirements(self, c: Context) -> tuple[str, ...]:
        """The engine's own requirements, and FlashInfer's kernels where the release leaves
        them out and they can be had (PyPI, or build.flashinfer_index_url)."""
        pin, needs_index = self._flashinfer(c)
        base = self.own_requirements(c)
        if pin and (not needs_index or c.p.build.flashinfer_index_url):
            return (*base, pin)
        return base

    def extra_indexes(self, c: Context) -> list[str]:
        """Indexes for packages the engine stage adds beside the engine: FlashInfer's, when
        the kernels the release needs are only there."""
        pin, needs_index = self._flashinfer(c)
        url = c.p.build.flashinfer_index_url
        return [url] if pin and needs_index and url else []

    def explain_requirements(self, c: Context, d: list[Derivation]) -> None:
        """Derivations for what requirements() adds beside the engine: FlashInfer's kernels,
        installed or why not."""
        pin, needs_index = self._flashinfer(c)
        row = self.flashinfer_row(c)
        if pin is None or row is None:
            return
        why = (f"{self.name} {c.p.engine.version} pulls flashinfer-python {row['python']} "
               "without its precompiled kernels; the same version of flashinfer-cubin "
               "carries them")
        if pin in self.requirements(c):
            where = c.p.build.flashinfer_index_url if needs_index else "the main index (PyPI)"
            d.append(Derivation("FlashInfer kernels", pin, f"{why} (from {where})",
                                row["src"]))
        else:
            d.append(Derivation("FlashInfer kernels", "not installed", f"{why}; PyPI lacks "
                                "that version (FlashInfer publishes it on "
                                f"{FLASHINFER_INDEX['url']}): set build.flashinfer_index_url "
                                "to install them, else FlashInfer downloads them at first use "
                                f"or JIT-builds them with nvcc{self._aot_note(c)}",
                                FLASHINFER_INDEX["src"]))

    @staticmethod
    def _aot_note(c: Context) -> str:
        """Where the image builds FlashInfer's start-up modules ahead of time, the
        "not installed" line must not read as if the first start compiled them."""
        if not (c.flashinfer_aot and c.p.build.flashinfer_aot):
            return ""
        return ("; the modules it loads at start-up are built ahead of time instead "
                "(FlashInfer kernels ahead of time, below)")

    def flashinfer_smoke_imports(self, c: Context) -> tuple[SmokeImport, ...]:
        """FlashInfer's kernels at flashinfer-python's version, when the image installs them.

        ``import flashinfer`` counts as needing a GPU: some releases read the device's
        properties at import and fail on a build host without one (flashinfer-ai/flashinfer
        #3262, #4143); there the installed version is checked instead. The kernels' own
        module imports anywhere, so a kernel wheel of another version always fails the check.
        """
        pin, _ = self._flashinfer(c)
        if pin is None or pin not in self.requirements(c):
            return ()
        version = pin.split("==", 1)[1]
        return (SmokeImport("flashinfer_cubin", "flashinfer-cubin", version),
                SmokeImport("flashinfer", "flashinfer-python", version, needs_gpu=True))

    def extra_args(self, c: Context, d: list[Derivation], src: str) -> tuple[str, ...]:
        """serving.extra_args, appended to the server command as given, one derivation per
        flag (with its value: ``--a=1`` or ``--a 1``) or plain argument, so that `explain`
        shows every argument the server gets."""
        args = c.p.serving.extra_args
        skip = False
        for i, arg in enumerate(args):
            if skip:
                skip = False
                continue
            if arg.startswith("-") and not arg[1:2].isdigit():
                name, sep, value = arg.partition("=")
                if not sep and i + 1 < len(args) and (not args[i + 1].startswith("-")
                                                      or args[i + 1][1:2].isdigit()):
                    value, skip = args[i + 1], True
                d.append(Derivation(f"serve {name}", value, EXTRA_ARGS_REASON
                                    + (f" (given as {arg})" if sep else ""), src))
            else:
                d.append(Derivation("serve ARG", arg, f"{EXTRA_ARGS_REASON} (a plain "
                                    "argument)", src))
        return args

    # --- derivations ----------------------------------------------------------------------
    def serve(self, c: Context, d: list[Derivation]) -> ServeCommand:
        """The server command of a checked profile (entrypoint, arguments, option files)."""
        raise NotImplementedError

    def extra_env(self, c: Context) -> dict[str, str]:
        """Engine-specific environment of the runtime image."""
        return {}

    def extra_smoke_imports(self, c: Context) -> tuple[SmokeImport, ...]:
        """Imports the built image must pass for what requirements() adds beside the engine."""
        return self.flashinfer_smoke_imports(c)

    def _explain_engine_index(self, c: Context, d: list[Derivation], indexes: list[str]
                              ) -> None:
        """Where the engine's wheels come from, when not from the main index."""
        p = c.p
        engine_index = p.build.engine_index_url or self.facts(c.facts).get("extra_index_url")
        if engine_index:
            assert engine_index in indexes, (engine_index, indexes)
            d.append(Derivation("engine index", engine_index, "from build.engine_index_url "
                                f"(replaces {p.engine.name}'s own index)"
                                if p.build.engine_index_url else
                                f"{p.engine.name}'s own wheel index (an extra index of the "
                                "engine install)", "" if p.build.engine_index_url
                                else f"{self.facts_file}.yaml extra_index_url"))

    def _locked_install(self, c: Context, d: list[Derivation], indexes: list[str],
                        files: dict[str, bytes]) -> tuple[str, ...]:
        """uv's arguments for an install from the profile's hashed Python lock (which joins
        the context files), or none without a lock."""
        if c.python_lock is None:
            return ()
        # every artifact is pinned by its sha256, so index order decides nothing: the
        # best-match strategy only lets uv find each pinned file wherever it is served.
        files[LOCK_IN_CONTEXT] = c.python_lock.encode("utf-8")
        d.append(Derivation("python lock", LOCK_IN_IMAGE, "the profile's hashed Python "
                            "lock (dockergen lock --python) matches it",
                            pylockfile.path_of(c.loaded.path).name))
        return pylockfile.install_args(self.lock_inputs(c).main_index, indexes)

    def _constraints(self, c: Context, d: list[Derivation], files: dict[str, bytes],
                     locked: bool) -> tuple[str, ...]:
        """The install's constraints (none with a lock, which pins every file; they join the
        context files), and the derivations of the packages the profile adds."""
        p = c.p
        constraints = () if locked else cuda.major_constraints(c.facts, p.cuda.version)
        if constraints:
            files[CONSTRAINTS_IN_CONTEXT] = "".join(f"{c}\n" for c in constraints).encode()
            d.append(Derivation("install constraints", ", ".join(constraints),
                                "CUDA Python bindings of the image's CUDA major only: an "
                                "older major's cuda-python overwrote cuda-bindings' files",
                                "cuda.yaml same_major_packages"))
        for pin in p.packages.pip:
            d.append(Derivation("extra pip", pin, "from packages.pip: installed with the "
                                "engine, torch pin kept (verified after install)", ""))
        for apt in p.packages.apt:
            d.append(Derivation("extra apt", apt, "from packages.apt: installed in the "
                                "runtime image", ""))
        return tuple(constraints)

    def _runtime_apt(self, c: Context) -> tuple[tuple[str, ...], bool]:
        """The runtime image's apt packages, and whether it keeps a C compiler (Triton's
        launcher build needs one, libc and the Python headers)."""
        p, facts = c.p, self.facts(c.facts)
        runtime_apt = list(facts.get("runtime_apt", [])) + list(p.packages.apt)
        c_compiler = bool(facts.get("runtime_c_compiler"))
        if c_compiler:
            runtime_apt += list(python.C_COMPILER_PACKAGES)
            if p.build.python_from == "image":
                runtime_apt.append("python3-dev")  # uv's CPython carries its own headers
        return tuple(runtime_apt), c_compiler

    # --- capacity (dockergen plan) ----------------------------------------------------------
    def kv_budget(self, mem: int, weights: int, overhead: int, utilization: float | None
                  ) -> tuple[int, float, str]:
        """How much of one GPU (``mem`` bytes, holding ``weights`` bytes of weights and an
        estimated ``overhead`` besides) the engine gives its KV cache, with
        ``serving.gpu_memory_utilization`` (None: the engine's default): (bytes, the
        fraction used, the rule in words)."""
        raise NotImplementedError(f"{self.name}: no KV-cache budget rule")

    def context_limit(self, model: ModelContext, env: Mapping[str, str]
                      ) -> ContextLimit | None:
        """The longest max_model_len the engine starts with for ``model`` (with the
        profile's ``serving.env``), as its start-up check derives it; None where
        dockergen has not read the engine's rule (plan then bounds lengths by
        max_position_embeddings and refuses none)."""
        return None

    def _serve_parser(self, f: Facts) -> str:
        """The text of the engine's server-parser script (facts ``serve_parser``, a file of
        its folder); empty when it has none."""
        name = self.facts(f).get("serve_parser")
        return (self.folder() / str(name)).read_text(encoding="utf-8") if name else ""

    def derive(self, c: Context, d: list[Derivation], torch: TorchInstall,
               flash_attn: bool, mode: Mode) -> ServingPart:
        """The engine stage, the server command and the runtime contributions."""
        p = c.p
        indexes = self.indexes(c)
        assert torch.from_main_index or indexes[0] == torch.index, (indexes, torch.index)
        self.explain_requirements(c, d)
        files: dict[str, bytes] = {}
        self._explain_engine_index(c, d, indexes)
        # uv's default first-index takes every name from the first index that has it, and
        # the PyTorch index carries requests, pillow, certifi, setuptools at older versions
        # than the engine needs: "requests was found on .../cu130, but not at the requested
        # version" (knowledge audit; astral-sh/uv#2683). best-match looks at every index;
        # torch stays the CUDA index's (2.14.0+cu130 sorts above PyPI's 2.14.0 for the exact
        # pin), and the build checks the CUDA the installed torch reports. vLLM's own
        # docker/Dockerfile sets UV_INDEX_STRATEGY=unsafe-best-match for the same reason.
        strategy = "unsafe-best-match"
        if c.python_lock is None and indexes:
            d.append(Derivation("uv index strategy", strategy, "the PyTorch index carries "
                                "older copies of shared dependencies; a hashed lock "
                                "(dockergen lock --python) pins every file instead",
                                "VLLM:docker/Dockerfile@0000977 ENV UV_INDEX_STRATEGY; "
                                "astral-sh/uv#2683"))
        lock_args = self._locked_install(c, d, indexes, files)
        constraints = self._constraints(c, d, files, locked=bool(lock_args))
        stage = EngineStage(name=p.engine.name,
                            requirements=self.requirements(c) + tuple(p.packages.pip),
                            torch=torch.version, indexes=tuple(indexes), venv=VENV, mode=mode,
                            flash_attn=flash_attn,
                            lock=LOCK_IN_IMAGE if lock_args else "", lock_args=lock_args,
                            index_strategy=strategy, torch_cuda=torch.cuda,
                            torch_cuda_major_only=torch.from_main_index,
                            constraints=CONSTRAINTS_IN_IMAGE if constraints else "",
                            bytecode=python.bytecode_mode(c.facts, d),
                            bytecode_env=python.BYTECODE_ENV,
                            local_install_records=reproducible.UV_LOCAL_INSTALL_RECORDS
                            if flash_attn else ())
        serve = self.serve(c, d)
        env = {"HF_HOME": f"{APP_HOME}/.cache/huggingface", "HOME": APP_HOME,
               **{name: value for name, value, _ in IMAGE_ENV}, **self.extra_env(c)}
        facts = self.facts(c.facts)
        health_path = self.probe_path(c.facts)
        health = (f"import urllib.request; urllib.request.urlopen("
                  f"'http://127.0.0.1:{p.serving.port}{health_path}', timeout=5)")
        runtime_apt, c_compiler = self._runtime_apt(c)
        return ServingPart(
            stage=stage, serve=serve, runtime_apt=runtime_apt, c_compiler=c_compiler,
            copies=tuple(RuntimeCopy(name, f"{OPTIONS_DIR}/{name}")
                         for name in sorted(serve.context_files)),
            env=env, health_cmd=(f"{VENV}/bin/python", "-c", health),
            smoke=(SmokeImport(self.module, facts["package"], p.engine.version,
                               bool(facts.get("import_needs_gpu", self.imports_need_gpu))),
                   *self.extra_smoke_imports(c)),
            arch_scopes=tuple((glob, tuple(ccs)) for glob, ccs in sorted(
                facts.get("arch_scoped_libraries", {}).items())),
            context_files=files, serve_parser=self._serve_parser(c.facts),
            startup_import=str(facts.get("startup_import", "")),
            layer_packages=tuple((facts.get("layer_packages") or {}).get("names", ())),
        )


def min_cc(row: Mapping[str, Any], release: str) -> tuple[str | None, bool]:
    """(minimum compute capability of a quantization row for an engine release, unverified).

    ``min_cc`` is one value, or a map of inclusive release ranges (``"0.9.1..0.12.0"``, or
    one release) to the value read from those releases: the floor moved between releases
    (vLLM's fp8 needed 8.0 up to 0.12.0 and 7.5 from 0.14.1). A release outside every range
    has no floor (None): nothing was read from it, and guessing the neighbour's would hide
    exactly the change this shape exists for.
    """
    value = row["min_cc"]
    unverified = is_unverified(dict(row), "min_cc")
    if isinstance(value, str):
        return value, unverified
    version = Version(release)
    for span, cc in value.items():
        first, _, last = span.partition("..")
        if Version(first) <= version <= Version(last or first):
            return str(cc), unverified
    return None, unverified


def _quant_fix(c: Context, rows: dict[str, Any], kind: str, value: str,
               too_old: list[GpuTarget]) -> list[Edit]:
    """Methods that run on every target (never the failing one), or drop the old GPUs.

    Only floors read from an artefact count: an unverified row may not run there at all.
    """
    lowest = min((cc_tuple(t.cc) for t in c.gpus), default=(0, 0))
    floors = {name: min_cc(row, c.p.engine.version) for name, row in rows.items()}
    works = [name for name, (floor, doubt) in floors.items()
             if name != value and floor is not None and not doubt
             and cc_tuple(floor) <= lowest]
    # explicit choices first (facts-file order); auto last
    works = sorted(works, key=lambda w: w == "auto")
    field = "kv_cache" if kind == "kv_cache" else "weights"
    path = "quantization." + field
    floor = min_cc(rows[value], c.p.engine.version)[0] or "0.0"
    return [*(Edit.set(path, w, f"use {field}: {w}") for w in works), *c.drop(*too_old),
            *cuda.retarget(c, too_old, lambda t: cc_tuple(t.cc) >= cc_tuple(floor))]

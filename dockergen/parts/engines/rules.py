"""The rules on a serving engine's release, quantization, server and packages.

:class:`EngineRules` holds the checks that read only an engine's own facts file: the
release is known, its Python range and CUDA major match the profile, the quantization
methods exist and run on the targets, the scheduler limits the server would refuse at
start-up, the model path, the packages and the Python lock.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import Version

from dockergen.errors import Edit
from dockergen.files import inputs
from dockergen.input import pylockfile
from dockergen.knowledge.facts import in_range, is_unverified
from dockergen.parts import cuda, python
from dockergen.parts.engines.identity import OPTIONS_DIR, min_cc
from dockergen.parts.engines.rules_wheels import EngineWheelRules
from dockergen.resolve.context import Context, describe_all, dotted, release_edits
from dockergen.resolve.model import (
    APP_HOME,
    PYTHON_HOME,
    VENV,
    GpuTarget,
    cc_tuple,
)

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


class EngineRules(EngineWheelRules):
    """The checks on the release and what the profile asks of the server."""

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

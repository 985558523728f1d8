"""How a serving engine is installed: its requirements, indexes, lock and constraints.

:class:`EngineInstall` derives what the engine stage installs from the profile and the
engine's facts (the release's pins, FlashInfer's kernels where the release pins FlashInfer,
the profile's Python lock or the CUDA-major constraints) and the system packages its
runtime keeps.
"""

from __future__ import annotations

from typing import Any

from dockergen.input import pylockfile
from dockergen.parts import cuda, python, python_platform
from dockergen.parts import torch as torch_component
from dockergen.parts.engines.identity import EngineIdentity
from dockergen.resolve.context import Context
from dockergen.resolve.model import (
    MAIN_INDEX,
    Derivation,
    SmokeImport,
)

LOCK_IN_CONTEXT = "python.lock"
LOCK_IN_IMAGE = "/opt/dockergen/python.lock"
CONSTRAINTS_IN_CONTEXT = "constraints.txt"
CONSTRAINTS_IN_IMAGE = "/opt/dockergen/constraints.txt"

# Where FlashInfer publishes flashinfer-cubin releases PyPI lacks (its own installer's index;
# not reachable from the machines that check the knowledge, hence unverified), for every
# engine that installs FlashInfer. dockergen installs from it only when
# build.flashinfer_index_url is set (this URL or a mirror).
FLASHINFER_INDEX: dict[str, str] = {
    "url": "https://flashinfer.ai/whl",
    "src": "flashinfer-python 0.7.2.post1 wheel flashinfer/__main__.py _build_cubin_index_url "
           "(non-nightly); _install_cubin_wheel"}


class EngineInstall(EngineIdentity):
    """The engine stage's requirements, indexes and lock."""

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

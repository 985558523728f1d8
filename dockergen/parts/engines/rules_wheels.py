"""The rules on a serving engine's wheels: kernels, platforms, closure, FlashInfer on PyPI.

:class:`EngineWheelRules` checks that the release's compiled kernels run on the targets,
that it publishes wheels for the image's machine and glibc, and that what it pins can be
installed from the profile's index.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dockergen.errors import Edit
from dockergen.input.profile import MACHINE_OF_PLATFORM
from dockergen.knowledge import kernels
from dockergen.knowledge.facts import Facts
from dockergen.parts import cuda, python_platform
from dockergen.parts.engines.install import EngineInstall
from dockergen.resolve.context import Context, describe_all, release_edits
from dockergen.resolve.model import (
    GpuTarget,
    is_pypi,
)


def _glibc(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)

def _on(machine: str) -> str:
    """How a message names the image's machine: x86_64, the default, goes unsaid."""
    return "" if machine == "x86_64" else f" on {machine}"


class EngineWheelRules(EngineInstall):
    """The checks on the release's wheels and the kernels they carry."""

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

"""What every component shares: the check context and the message helpers.

A check appends :class:`~dockergen.errors.Problem` objects (errors stop the render,
warnings explain a legal but surprising choice); each message says what is wrong and a
fix that is itself valid. The context also carries the few facts one component
establishes for the next (the GPU targets, the engine release, the torch pin), so that
components never call each other back and forth, and the knowledge of this resolution
(:class:`~dockergen.knowledge.facts.Facts`: the shipped facts with the profile's own files), built
once from the profile and read by every rule through the context.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from dockergen.errors import Edit, Location, Problem, Severity, compose_fix
from dockergen.input.loader import LoadedProfile
from dockergen.input.pins import BasePins
from dockergen.input.profile import MACHINE_OF_PLATFORM, Profile
from dockergen.knowledge import facts as knowledge
from dockergen.resolve.model import GpuTarget, Inputs

# How the unused-field warning begins: a fix that switches a feature off leaves the
# feature's settings without effect, and this warning (remove them) is that fix's own
# consequence, not another rule's problem (the fold's proof of fixes reads it).
UNUSED = "has no effect with the rest of the profile"


@dataclass
class Context:
    """What the checks share: the profile, where its values are, and what was established."""

    loaded: LoadedProfile
    inputs: Inputs = field(default_factory=Inputs)
    problems: list[Problem] = field(default_factory=list)
    gpus: list[GpuTarget] = field(default_factory=list)  # gpu.targets, looked up
    release: dict[str, Any] | None = None  # the serving engine release row, once known
    torch_pin: str | None = None  # engine.torch, or the release's pin
    # Why (or whether) this engine needs a FlashAttention-2 build: set by the serving
    # engine, shown by the flash-attn checks once the build itself is valid.
    flash_attn_note: str | None = None
    # Why the engine serves without a FlashAttention-2 build (None: it may need one): a fix
    # may then drop the build.
    flash_attn_unneeded: str | None = None
    # The profile's Python lock (dockergen lock --python), once checked against the profile.
    python_lock: str | None = None
    # build.ca_certificates as read (once) by their check: the build context copies these bytes
    certificates: list[bytes] = field(default_factory=list)
    # The FlashInfer modules the engine release runs at start-up, once the release is known
    # (its facts' ``flashinfer_aot`` row; None: none known, nothing is built ahead of time).
    flashinfer_aot: Mapping[str, Any] | None = None
    # The kernels the engine release JIT-builds at start-up (its facts' ``startup_jit`` row;
    # None: none known); seeded in the build where serving.hf_config names the model.
    startup_jit: Mapping[str, Any] | None = None
    # The knowledge of this resolution: the shipped facts with the profile's user knowledge
    facts: knowledge.Facts = field(init=False)

    def __post_init__(self) -> None:
        self.facts = knowledge.facts(self.loaded.user_facts)

    @property
    def p(self) -> Profile:
        return self.loaded.profile

    @property
    def machine(self) -> str:
        """The machine the image runs on (``x86_64``, ``aarch64``): build.platform's."""
        return MACHINE_OF_PLATFORM[self.p.build.platform]

    @property
    def pins(self) -> BasePins | None:
        """The base-image lock beside the profile (None: none, or resolved without it)."""
        return self.inputs.pins

    def at(self, *path: str | int) -> Location:
        return self.loaded.at(*path)

    def error(self, path: tuple[str | int, ...], message: str, fix: str = "",
              edits: tuple[Edit, ...] | list[Edit] = (), where: Location | None = None
              ) -> None:
        """An error; ``edits`` are candidate fixes (resolution keeps those that work) and
        ``fix`` the advice beside them; ``where``: a source other than the profile's field
        (a command-line option)."""
        self.problems.append(Problem(where or self.at(*path), dotted(path), message,
                                     compose_fix(tuple(edits), fix), edits=tuple(edits),
                                     advice=fix))

    def drop(self, *targets: GpuTarget) -> list[Edit]:
        """"drop TARGET" as an edit; none when nothing would be left to target."""
        gone = {t.given for t in targets}
        rest = [given for given in self.p.gpu.targets if given not in gone]
        if not rest:
            return []
        return [Edit(f"drop {' and '.join(sorted(gone))}",
                     (("gpu.targets", "[" + ", ".join(rest) + "]"),))]

    def warn(self, path: tuple[str | int, ...], message: str, fix: str = "") -> None:
        self.problems.append(Problem(self.at(*path), dotted(path), message, fix,
                                     Severity.WARNING))


def nearest(values: list[str], current: str) -> list[str]:
    """``values`` (versions) other than ``current``, the closest to it first, the newer of
    two equally close first: the smallest change a fix can propose comes first."""
    ordered = sorted({*values, current}, key=Version)
    here = ordered.index(current)
    return sorted((v for v in ordered if v != current),
                  key=lambda v: (abs(ordered.index(v) - here), -ordered.index(v)))


def release_edits(c: Context, rows: Mapping[str, Mapping[str, Any]],
                  keep: Callable[[Mapping[str, Any]], bool] = lambda row: True) -> list[Edit]:
    """Candidate fixes of engine.version: the releases of the profile's engine (``rows``,
    its ``releases`` table) that ``keep`` accepts, the closest first; an engine.torch the
    profile sets moves with the release."""
    name = c.p.engine.name
    return [Edit(f"use {name} {v}", (("engine.version", v),
                                     *((("engine.torch", str(rows[v]["torch"])),)
                                       if c.p.engine.torch else ())))
            for v in nearest(list(rows), c.p.engine.version) if keep(rows[v])]


def dotted(path: tuple[str | int, ...]) -> str:
    """``("serving", "env", "X")`` -> ``serving.env.X``; ints become ``[i]``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def describe(t: GpuTarget) -> str:
    """``h100 (9.0)``, or just the compute capability."""
    return f"{t.name} ({t.cc})" if t.name else t.cc


def describe_all(targets: list[GpuTarget]) -> str:
    return ", ".join(describe(t) for t in targets)

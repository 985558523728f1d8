"""The Part contract: what each piece of an image gives the fold, and the order parts run in.

A part has a ``name``, the names of the parts whose results it ``reads``, its ``rules`` (each
checks the profile in a :class:`~dockergen.resolve.context.Context` and records problems
there, in order) and ``derive``, which turns a checked profile into a :class:`Contribution`:
the part's typed ``value`` (what the parts reading it get) and what the fold merges without
knowing the part (apt packages, environment, copies into the runtime image, labels, smoke
checks, build-context files). :func:`ordered` sorts parts so that each runs after what it
reads; the fold (:mod:`dockergen.resolve.fold`) is handed the parts and never names one.

A part, in the manner of cog's and hpccm's building blocks::

    def _derive(ctx, derivations, got, mode):
        arch_list = got["cuda"].arch_list
        derivations.append(Derivation("FA archs", arch_list, "from the GPU targets", ""))
        return Contribution(value=arch_list, runtime_apt=("libgomp1",),
                            labels={"example.archs": arch_list})

    EXAMPLE = Part("example", reads=("cuda",), rules=(check_example,), derive=_derive)
    ordered([EXAMPLE, CUDA])  # -> [CUDA, EXAMPLE]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dockergen.resolve.context import Context
from dockergen.resolve.model import Derivation, Mode, RuntimeCopy, SmokeImport

Rule = Callable[[Context], None]


@dataclass(frozen=True)
class Contribution:
    """What one part derives: its typed value and its share of the image."""

    value: Any = None  # what the parts that read this one get (CudaPart, TorchInstall, ...)
    build_apt: tuple[str, ...] = ()  # Debian packages of the build-base stage
    runtime_apt: tuple[str, ...] = ()  # Debian packages of the runtime stage
    env: Mapping[str, str] = field(default_factory=dict)  # the runtime image's ENV
    copies: tuple[RuntimeCopy, ...] = ()  # into the runtime image, before the venv
    after_venv: tuple[RuntimeCopy, ...] = ()  # into the runtime image, after the venv
    labels: Mapping[str, str] = field(default_factory=dict)
    smoke: tuple[SmokeImport, ...] = ()  # imports the built image must pass
    context_files: Mapping[str, bytes] = field(default_factory=dict)  # of the build context


Derive = Callable[[Context, list[Derivation], Mapping[str, Any], Mode], Contribution]


def no_contribution(ctx: Context, derivations: list[Derivation], got: Mapping[str, Any],
                    mode: Mode) -> Contribution:
    """The derivation of a part that only checks."""
    return Contribution()


@dataclass(frozen=True)
class Part:
    """One piece of an image: its rules, in order, and its derivation."""

    name: str
    reads: tuple[str, ...] = ()  # the parts whose values ``derive`` gets in ``got``
    rules: tuple[Rule, ...] = ()
    derive: Derive = no_contribution


def ordered(parts: Iterable[Part]) -> list[Part]:
    """``parts`` with each after the parts it reads; parts that do not depend on each other
    keep their listed order. Raises :class:`ValueError` naming a part that reads a name no
    part has, a name two parts share, or the parts of a cycle."""
    listed = list(parts)
    names = [p.name for p in listed]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"parts named twice: {', '.join(twice)}")
    unknown = [f"{p.name} reads {r}" for p in listed for r in p.reads if r not in names]
    if unknown:
        raise ValueError(f"parts read what no part is: {'; '.join(unknown)}")
    done: set[str] = set()
    out: list[Part] = []
    waiting = listed
    while waiting:
        ready = next((p for p in waiting if all(r in done for r in p.reads)), None)
        if ready is None:
            raise ValueError("parts read each other in a cycle: "
                             + ", ".join(p.name for p in waiting))
        out.append(ready)
        done.add(ready.name)
        waiting = [p for p in waiting if p is not ready]
    return out

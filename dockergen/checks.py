"""The one list of what a profile must pass, whoever owns the check.

A profile is resolved first (:data:`RESOLUTION`: the rules of every component and of the
serving engine, ``dockergen.resolve.checks``); then each command that takes a resolved
profile may refuse it for reasons of its own output: the bake file's cache references and
shared tags, observe's settings, the capacity plan of a model the profile names. Each such
check registers here (:data:`CHECKS`) with the commands that refuse on it, and ``validate``
runs them all (:func:`validate_profile`), so a profile that validates is one every command
takes: ``tests/cli/test_validate_agrees.py`` enumerates this registry and runs an example of
each entry through its commands and through ``validate``. ``docs/reference/checks.md`` is
written from it (:func:`checks_reference`).

May import: :mod:`dockergen.components.serving`, :mod:`dockergen.errors`,
:mod:`dockergen.fleet.project`, :mod:`dockergen.observe.generate`, :mod:`dockergen.plan`,
:mod:`dockergen.resolve`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dockergen.errors import Problem, ProfileError

if TYPE_CHECKING:
    from dockergen.fleet.project import Fleet


@dataclass(frozen=True)
class ProfileCheck:
    """One check every profile must pass: what it refuses and which commands refuse on it."""

    name: str
    commands: tuple[str, ...]  # the commands that refuse a profile this check fails
    what: str
    owner: str  # the module that holds it
    # raises ProfileError with every problem it finds (RESOLUTION has none: collect runs it)
    run: Callable[[Fleet, Path, tuple[str, ...]], None] | None = None


def _bake(fleet: Fleet, path: Path, overrides: tuple[str, ...]) -> None:
    from dockergen.fleet.project import check_bake

    check_bake(fleet)


def _observe(fleet: Fleet, path: Path, overrides: tuple[str, ...]) -> None:
    from dockergen.observe.generate import settings_problems, source_of

    found = {str(pr): pr for t in fleet.targets if t.view.observe is not None
             for pr in settings_problems(t.view.observe, source_of(path))}
    if found:
        raise ProfileError(list(found.values()))


def _capacity(fleet: Fleet, path: Path, overrides: tuple[str, ...]) -> None:
    # a matrix's variants are not planned yet: each may name another model
    if not fleet.matrices and fleet.targets[0].view.hf_config:
        from dockergen.plan import validate_capacity

        validate_capacity(path, overrides)


RESOLUTION = ProfileCheck(
    "resolution", ("render", "build", "deploy", "explain", "lock", "plan", "observe"),
    "every rule of the components and the serving engine (docs/knowledge.md lists them): "
    "GPUs, CUDA, the base-image lock, the engine release, its kernels and pins, torch, "
    "Python, FlashAttention-2, quantization, the server's flags and scheduler limits, the "
    "model mount, extra packages, tags, certificates, the Python lock",
    "dockergen.resolve")
CHECKS: tuple[ProfileCheck, ...] = (
    ProfileCheck("bake", ("render -o",),
                 "the bake file's targets: cache references and tags no two targets share",
                 "dockergen.fleet.project", _bake),
    ProfileCheck("observe", ("observe",),
                 "the observe: section: rate window, budgets and scrape settings a "
                 "Prometheus accepts", "dockergen.observe.generate", _observe),
    ProfileCheck("capacity", ("plan",),
                 "with serving.hf_config: the model's weights and KV cache fit the GPUs at "
                 "serving.max_model_len, and its heads divide by the tensor-parallel size",
                 "dockergen.plan", _capacity),
)


def validate_profile(path: Path, overrides: tuple[str, ...]) -> tuple[Fleet, list[Problem]]:
    """Resolve one profile (raises ProfileError when it does not resolve), then run every
    registered check: the fleet and every problem they found (each check runs, so all are
    reported at once)."""
    from dockergen.fleet.project import collect

    fleet = collect([path], overrides, render=False)
    problems: list[Problem] = []
    for check in CHECKS:
        assert check.run is not None
        try:
            check.run(fleet, path, overrides)
        except ProfileError as exc:
            problems.extend(exc.problems)
    return fleet, problems


def rule_docs() -> list[tuple[str, tuple[str, ...], str]]:
    """(rule function, the engines whose profiles it checks, its docstring's summary) of
    every resolution rule, in the order they run (an engine's own version of a rule is
    listed under its own name)."""
    from dockergen.components.serving import ENGINES
    from dockergen.resolve import rules

    seen: dict[str, tuple[list[str], str]] = {}
    for engine in ENGINES.values():
        for rule in rules(engine):
            name = f"{rule.__module__.removeprefix('dockergen.components.')}.{rule.__qualname__}"
            summary = " ".join((rule.__doc__ or "").strip().split("\n\n")[0].split())
            seen.setdefault(name, ([], summary))[0].append(engine.name)
    every = len(ENGINES)
    return [(name, () if len(engines) == every else tuple(engines), summary)
            for name, (engines, summary) in seen.items()]


HEADER = ("<!-- Generated by `dockergen reference --checks` from dockergen/checks.py and the "
          "rules' docstrings; do not edit. -->\n")


def checks_reference() -> str:
    """The Markdown page of every check ``validate`` runs (``docs/reference/checks.md``)."""
    lines = [HEADER, "# Checks", "",
             "`dockergen validate` runs every check below; each command refuses a profile "
             "for the checks it names, so a profile that validates is one every command "
             "takes.", "", "| check | refused by | what | where |", "| --- | --- | --- | --- |"]
    for c in (RESOLUTION, *CHECKS):
        lines.append(f"| {c.name} | {', '.join(f'`{x}`' for x in c.commands)} | {c.what} | "
                     f"`{c.owner}` |")
    lines += ["", "## The resolution rules", "",
              "In the order they run for the first engine, with each function's own "
              "summary (in `dockergen/components/`); the rules another engine does its own "
              "way follow, and a rule not every engine runs names its engines:", "",
              "| rule | engines | checks |", "| --- | --- | --- |"]
    lines += [f"| `{name}` | {', '.join(engines) or 'all'} | {doc.replace('|', '/')} |"
              for name, engines, doc in rule_docs()]
    return "\n".join(lines) + "\n"


def is_checks_reference(head: bytes) -> bool:
    """``head`` (the start of a file) is a checks page dockergen wrote."""
    return head.startswith(HEADER.split(";", 1)[0].encode())

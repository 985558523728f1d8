"""Check a loaded profile with the parts it is handed, then fold their derivations together.

The parts (:class:`~dockergen.resolve.part.Part`, listed for a profile by
:func:`dockergen.parts.lineup.for_engine`) each check and derive their own piece; this
module runs their rules in their order (:func:`~dockergen.resolve.part.ordered`: each after
the parts it reads), proves each error's candidate fixes, derives every part with the values
of the parts it reads, and merges their shares without naming any (:func:`fold`). The
assembly it is handed builds the :class:`~dockergen.resolve.model.Resolved` from the parts'
values: the stages the templates format, the lock data written next to the Dockerfile, the
derivations ``dockergen explain`` prints. The base-image lock beside the profile
(``PROFILE.lock.json``) is an input of resolution, read here and nowhere else, so that every
output resolves the same pinned images.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from dockergen.errors import Edit, Problem, ProfileError, Severity
from dockergen.input.loader import LoadedProfile, with_overrides
from dockergen.input.pins import read_pins
from dockergen.resolve.context import UNUSED, Context
from dockergen.resolve.model import Derivation, GivenCertificate, Inputs, Mode, Resolved
from dockergen.resolve.part import Contribution, Part, Rule, ordered


def rules(parts: Sequence[Part]) -> list[Rule]:
    """The rules of ``parts``, in the order they run (the resolution entry of the check
    registry, :mod:`dockergen.checks`, lists them)."""
    return [rule for part in ordered(parts) for rule in part.rules]


def check(loaded: LoadedProfile, parts: Sequence[Part], inputs: Inputs | None = None,
          prove: bool = True) -> Context:
    """Run the rules of every part; the returned context holds all problems and the GPU
    targets.

    Each error's candidate fixes are tried (``prove``): only those that leave no error and
    no warning the profile did not already have are offered, so following a fix never
    leads into the next rule's error or warning.
    """
    inputs = inputs or Inputs()
    ctx = Context(loaded, inputs)
    for rule in rules(parts):
        rule(ctx)
    if prove:
        ctx.problems = _proven(ctx.problems, loaded, parts, inputs)
    return ctx


# how many working alternatives a fix offers per field it changes ("use CUDA 13.0.2 or
# 13.2.2, or use vllm 0.19.1"); the candidates come closest first
ALTERNATIVES_PER_FIELD = 2
# a candidate that fixes its problem but trips another rule is tried together with that
# rule's own candidates, up to this many pairs per problem
PAIRS_PER_PROBLEM = 24

Key = tuple[str, str]
# what an error says when every candidate fix broke another rule
NO_ONE_CHANGE = ("no single change fixes this with the rest of the profile as it is (each "
                 "candidate broke another rule): fix the other errors first, then validate "
                 "again")


def _proven(problems: list[Problem], loaded: LoadedProfile, parts: Sequence[Part],
            inputs: Inputs) -> list[Problem]:
    """``problems`` with each error's edits cut to those that work when applied: no error
    the profile did not have and, where any candidate manages it, no new warning either
    (a fix that trades an error for "torch has no wheels for that CUDA" is a poor fix; it
    is offered only where every working one warns)."""
    before = {p.identity() for p in problems if p.severity is Severity.ERROR}
    # a warning is new where no warning was on its field: the same rule warning with the
    # values the fix changed (torch 2.13 -> 2.14 "has no wheels for CUDA 13.1") is not, nor
    # is a switched-off feature's setting left without effect (the fix's own consequence)
    warned = {p.field for p in problems if p.severity is Severity.WARNING}
    tried: dict[Edit, list[Problem] | None] = {}

    def problems_with(edit: Edit) -> list[Problem] | None:
        if edit not in tried:
            tried[edit] = _problems_with(edit, loaded, parts, inputs)
        return tried[edit]

    def works(edit: Edit, fixes: Key, quiet: bool) -> bool:
        after = problems_with(edit)
        return after is not None and all(
            p.identity() != fixes and (
                p.identity() in before if p.severity is Severity.ERROR
                else not quiet or p.field in warned or p.message.startswith(UNUSED))
            for p in after)

    def kept_of(problem: Problem, drastic: bool, quiet: bool) -> list[Edit]:
        edits = [e for e in problem.edits if e.drastic == drastic]
        kept = _first_per_field(e for e in edits if works(e, problem.identity(), quiet))
        if kept:
            return kept
        # no one change does it: a change and what the next rule then asks for
        pairs = (Edit(f"{edit.text} and {then.text}", edit.sets + then.sets,
                      edit.drastic or then.drastic)
                 for edit in problem.edits if edit.drastic <= drastic
                 for new in (problems_with(edit) or ())
                 if new.severity is Severity.ERROR and new.identity() not in before
                 for then in new.edits if (edit.drastic or then.drastic) == drastic)
        return _first_per_field(pair for pair in itertools.islice(pairs, PAIRS_PER_PROBLEM)
                                if works(pair, problem.identity(), quiet))

    out = []
    for problem in problems:
        if not problem.edits:
            out.append(problem)
            continue
        # software first: other hardware only where no change of the software does it
        kept = next((k for drastic in (False, True) for quiet in (True, False)
                     if (k := kept_of(problem, drastic, quiet))), [])
        proven = problem.keeping(tuple(kept))
        out.append(proven if proven.fix else dataclasses.replace(proven, fix=NO_ONE_CHANGE))
    return out


def _first_per_field(edits: Iterable[Edit]) -> list[Edit]:
    """The first :data:`ALTERNATIVES_PER_FIELD` edits of each field set first."""
    kept: list[Edit] = []
    for edit in edits:
        if sum(e.sets[0][0] == edit.sets[0][0] for e in kept) < ALTERNATIVES_PER_FIELD:
            kept.append(edit)
    return kept


def _problems_with(edit: Edit, loaded: LoadedProfile, parts: Sequence[Part],
                   inputs: Inputs) -> list[Problem] | None:
    """The problems (errors and warnings) of ``loaded`` with ``edit`` applied, each with
    its candidate edits unproven (None: the edit is not a profile)."""
    try:
        edited = with_overrides(loaded, edit.overrides())
    except ProfileError:
        return None
    return check(edited, parts, inputs, prove=False).problems




@dataclass(frozen=True)
class Folded:
    """What the parts derived: each part's value by its name, and their shares merged (apt
    packages sorted and once each; environment, labels and context files merged in the
    parts' order, a later part's value winning; copies and smoke checks in that order)."""

    values: Mapping[str, Any]
    merged: Contribution


# builds the Resolved from the parts' values and their merged shares (the part side owns
# what needs specific parts: the record, the profile hash, the runtime stage)
Assemble = Callable[[Context, Folded, list[Derivation], Mode], Resolved]


def fold(contributions: Mapping[str, Contribution]) -> Folded:
    """The parts' contributions (in the order they ran) merged into one."""
    shares = list(contributions.values())
    return Folded(
        values=MappingProxyType({name: c.value for name, c in contributions.items()}),
        merged=Contribution(
            build_apt=tuple(sorted({a for c in shares for a in c.build_apt})),
            runtime_apt=tuple(sorted({a for c in shares for a in c.runtime_apt})),
            env={k: v for c in shares for k, v in c.env.items()},
            copies=tuple(x for c in shares for x in c.copies),
            after_venv=tuple(x for c in shares for x in c.after_venv),
            labels={k: v for c in shares for k, v in c.labels.items()},
            smoke=tuple(x for c in shares for x in c.smoke),
            context_files={k: v for c in shares for k, v in c.context_files.items()}))


def resolve(loaded: LoadedProfile, parts: Sequence[Part], assemble: Assemble,
            mode: Mode = "buildkit", pin: bool = True,
            certificates: tuple[GivenCertificate, ...] = ()) -> Resolved:
    """Check a loaded profile with ``parts`` and derive everything; raise
    :class:`ProfileError` on errors.

    The parts derive in their order (:func:`~dockergen.resolve.part.ordered`), each given
    the values of the parts it reads; ``assemble`` builds the resolved model from their
    values and merged shares. The profile's user knowledge (``knowledge:`` files) joins the
    shipped facts for this resolve only, and every user fact is listed in the derivations
    (``explain``). The base images are pinned from the lock beside the profile, if there is
    one; ``pin=False`` leaves it out (``dockergen lock`` resolves the unpinned images it is
    about to pin). ``certificates``: CA certificates the command was given (``build
    --ca-cert``), beside the profile's own.
    """
    inputs = Inputs(read_pins(loaded.path) if pin else None, certificates)
    ctx = check(loaded, parts, inputs)
    if any(pr.severity is Severity.ERROR for pr in ctx.problems):
        raise ProfileError(ctx.problems)
    d: list[Derivation] = []
    contributions: dict[str, Contribution] = {}
    for part in ordered(parts):
        got = {name: contributions[name].value for name in part.reads}
        contributions[part.name] = part.derive(ctx, d, got, mode)
    resolved = assemble(ctx, fold(contributions), d, mode)
    added = tuple(Derivation(f"user fact {component}", f"{table} {key}",
                             f"added by {row['user']}, not shipped with dockergen", row["src"])
                  for component, tables in sorted(loaded.user_facts.items())
                  for table, rows in sorted(tables.items())
                  for key, row in sorted(rows.items()))
    return dataclasses.replace(resolved, derivations=resolved.derivations + added)

"""Load a profile file (with ``extends`` and ``--set`` overrides) into a :class:`Profile`.

The staged entry of the input side: locate the file (:mod:`dockergen.input.locate`), read
and merge its chain (:mod:`dockergen.input.merge`), apply overrides
(:mod:`dockergen.input.overrides`), validate (:mod:`dockergen.input.validate`) and read
its user knowledge (:mod:`dockergen.input.overlay`). Every problem found is collected and
raised at once as a :class:`ProfileError` whose lines read
``FILE:LINE:COL: field.path: what is wrong; what to do``.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dockergen.errors import SET, Location, Problem, ProfileError
from dockergen.input.fields import expects_mapping, is_field
from dockergen.input.merge import RawProfile, read_raw
from dockergen.input.overlay import read_user_knowledge
from dockergen.input.overrides import (
    Override,
    Overrides,
    apply_overrides,
    parse_set,
    set_field_paths,
    unknown_set_fields,
)
from dockergen.input.profile import Profile
from dockergen.input.validate import problems_from_validation, validate
from dockergen.input.yamlsource import Positions

# the stages callers use, whichever module of the input side holds them
__all__ = ["LoadedProfile", "Override", "Overrides", "RawProfile", "apply_overrides",
           "check_abstract", "expects_mapping", "is_field", "load_profile", "load_raw",
           "parse_set", "problems_from_validation", "read_raw", "read_user_knowledge",
           "set_field_paths", "unknown_set_fields", "with_overrides"]


@dataclass(frozen=True)
class LoadedProfile:
    """A validated profile and where each of its values came from."""

    profile: Profile
    positions: Positions
    path: Path
    display: str
    chain: tuple[str, ...]  # the files it was built from, child first
    overrides: Overrides = field(default=())
    # the profile's `knowledge:` files: {component: {table: {key: row}}}, rows marked
    user_facts: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # the merged document the profile was validated from (a fix is tried on a copy of it)
    data: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def at(self, *path: str | int) -> Location:
        """Location of a field, for problems about it."""
        return self.positions.of(path)

    def sets(self, *path: str | int) -> bool:
        """Whether the profile's own file or a ``--set`` writes this field (a value only
        inherited from a parent profile is one of the defaults it provides for others)."""
        where = self.positions.exact(path)
        return where is not None and (where.origin == SET or where.file == self.display)


def load_profile(path: str | Path, overrides: Overrides = ()) -> LoadedProfile:
    """Read, merge and validate a profile file; raise :class:`ProfileError` on any problem."""
    return load_raw(read_raw(path), overrides)


def load_raw(raw: RawProfile, overrides: Overrides = ()) -> LoadedProfile:
    """Validate a profile already read, ``--set`` overrides applied first (``raw`` itself
    is left as it was); raise :class:`ProfileError` on any problem."""
    data, pos = copy.deepcopy(raw.data), raw.positions.copy()
    if data.pop("abstract", None) is True:
        raise ProfileError([Problem(pos.of(("abstract",)), "abstract",
                                    "this profile only provides defaults for others",
                                    f"render a profile that says `extends: {raw.path.stem}`")])
    data = apply_overrides(data, pos, overrides)
    if data.get("matrix"):  # variants are expanded by dockergen/outputs/fleet/matrix.py
        raise ProfileError([Problem(pos.of(("matrix",)), "matrix",
                                    "this profile is a matrix of variants",
                                    "write them all with `dockergen render PROFILE -o DIR` "
                                    "(each variant's dockergen.resolved.json holds what it "
                                    "derived) and build with `docker buildx bake`; "
                                    "`dockergen validate PROFILE` lists the variants")])
    # the secret scan first (a type error never hides it), then the model; and the
    # profile's user knowledge files
    profile = validate(data, pos)
    assert profile is not None
    facts = read_user_knowledge(profile.knowledge, raw.path.parent, pos)
    return LoadedProfile(profile, pos, raw.path, raw.display, raw.chain, overrides, facts, data)


def check_abstract(raw: RawProfile, overrides: Overrides) -> bool:
    """Check an abstract profile as far as it goes; False if the profile is not abstract.

    Its fields are checked for shape, type, unknown keys and secrets; the compatibility
    rules need a whole profile and run on the profiles that extend it.
    """
    if raw.data.get("abstract") is not True:
        return False
    data, pos = copy.deepcopy(raw.data), raw.positions.copy()
    data.pop("abstract", None)
    validate(apply_overrides(data, pos, overrides), pos, partial=True)
    return True


def with_overrides(loaded: LoadedProfile, overrides: tuple[str, ...]) -> LoadedProfile:
    """``loaded`` as if ``--set`` had also been given ``overrides``: the document is not
    read again (a fix is tried on what was read; raises :class:`ProfileError`)."""
    data = copy.deepcopy(loaded.data)
    pos = loaded.positions.copy()
    apply_overrides(data, pos, overrides)
    profile = validate(data, pos)
    assert profile is not None
    return dataclasses.replace(loaded, profile=profile, positions=pos,
                               overrides=(*loaded.overrides, *overrides), data=data)

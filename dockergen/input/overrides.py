"""``--set FIELD=VALUE`` items and the other overrides, applied to a profile's document
before it is validated, each value's origin recorded for the problems about it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dockergen.errors import SET, Location, Problem, ProfileError, dotted
from dockergen.input.fields import expects_text, fields_at, unknown_key
from dockergen.input.yamlsource import FieldPath, Positions, parse_yaml

_READ_BEFORE_OVERRIDES = {
    "extends": ("chooses the parent profile", "edit extends: in the profile file, or give "
                "the profile you want as PROFILE"),
    "abstract": ("marks a profile that only provides defaults",
                 "edit abstract: in the profile file"),
}


@dataclass(frozen=True)
class Override:
    """A field set from outside the profile file before validation, and where it came from.

    ``--set FIELD=VALUE`` items (the command line's, and the ones a fix tries) are given
    as their text and read by :func:`parse_set`. What a command gives
    besides the profile (``build --ca-cert``, the base-image lock) is a typed input of
    resolution instead (:class:`dockergen.resolve.context.Inputs`), never an override.
    """

    field: str  # dotted path, e.g. cuda.devel_image
    value: Any  # as the profile data would hold it
    origin: Location
    raw: str | None = None  # the text as typed (--set), to quote numbers back


Overrides = tuple["str | Override", ...]

def parse_set(item: str) -> Override:
    """One ``--set FIELD=VALUE`` item as an :class:`Override` (``dockergen.cli.SET_HELP``
    documents the reading)."""
    key, sep, raw = item.partition("=")
    parts = tuple(key.split(".")) if key else ()
    if not sep or not parts or any(not p for p in parts):
        raise ProfileError([Problem(Location(f"--set {item}", origin=SET), "",
                                    "expected FIELD.PATH=VALUE",
                                    "e.g. --set serving.max_model_len=16384")])
    loc = Location(f"--set {key}", origin=SET)
    value: Any
    if expects_text(parts):
        value = raw  # `--set python=3.10` means the text "3.10", not a float
    else:
        try:
            value, _ = parse_yaml(raw, str(loc))
        except ProfileError:
            value = raw
    return Override(key, value, loc, raw)


def _as_override(item: str | Override) -> Override:
    return item if isinstance(item, Override) else parse_set(item)


def apply_overrides(data: dict[str, Any], pos: Positions,
                    overrides: Overrides) -> dict[str, Any]:
    """Apply overrides (``--set`` items, options, lock pins) to ``data`` before validation."""
    problems: list[Problem] = []
    for item in overrides:
        try:
            override = _as_override(item)
        except ProfileError as exc:
            problems += exc.problems
            continue
        parts = tuple(override.field.split("."))
        loc = override.origin
        if parts[0] in _READ_BEFORE_OVERRIDES:
            # the chain is read before overrides apply: an override of it changed nothing
            what, fix = _READ_BEFORE_OVERRIDES[parts[0]]
            problems.append(Problem(loc, parts[0], f"{what}, read before --set applies",
                                    fix))
            continue
        node = data
        for depth, part in enumerate(parts[:-1], 1):
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
                # the override created this mapping: problems about it (an unknown
                # section name) point at the --set, not at line 1 of some file
                pos.drop(parts[:depth])
                pos.set(parts[:depth], loc, loc)
            node = child
        _assign(node, parts, override, pos)
    if problems:
        raise ProfileError(problems)
    return data


def _assign(node: dict[str, Any], parts: FieldPath, override: Override,
            pos: Positions) -> None:
    """Set the last field of ``parts`` in ``node``; record where each new value came from."""
    loc, last = override.origin, str(parts[-1])
    node[last] = override.value
    pos.drop(parts)
    pos.set(parts, loc, loc, override.raw)


def unknown_set_fields(items: tuple[str, ...]) -> list[Problem]:
    """The problems of ``--set`` items whose FIELD is no field path of the profile model,
    found before any profile is read: the same problem validation reports for such a key
    (a mapping such as ``serving.env`` takes any key; a malformed item is left to
    :func:`parse_set`)."""
    problems = []
    for item in items:
        key, sep, _ = item.partition("=")
        parts = tuple(key.split("."))
        if not sep or not all(parts):
            continue
        for depth, part in enumerate(parts):
            allowed = fields_at(parts[:depth])
            if not allowed:
                break  # not a model here (a mapping, a list, a value): the loader decides
            if part not in allowed:
                msg, fix = unknown_key(part, allowed)
                problems.append(Problem(Location(f"--set {key}", origin=SET),
                                        dotted(parts[:depth + 1]), msg, fix))
                break
    return problems


def set_field_paths() -> list[str]:
    """Every field path of the profile model, for completing ``--set FIELD``."""
    paths: list[str] = []
    pending: list[FieldPath] = [()]
    while pending:
        loc = pending.pop(0)
        for name in fields_at(loc):
            paths.append(dotted((*loc, name)))
            pending.append((*loc, name))
    return paths

"""Every message that sends the reader to `dockergen schema` for the allowed form finds it
there: the field's schema entry has a `pattern` (or `format`/`enum`) that accepts the
example the fix gives and rejects the value that was refused.

The messages are found, not listed: every text field of the profile model (items of lists
and the keys and values of mappings included) is given a value no shape allows, and each
problem whose fix points at the schema is checked against the generated schema with the
`jsonschema` package.
"""

from __future__ import annotations

import copy
import re
import typing
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

from dockergen.errors import ProfileError
from dockergen.input.fields import unwrap
from dockergen.input.profile import Profile
from dockergen.input.validate import validate
from dockergen.input.yamlsource import FieldPath, parse_yaml
from dockergen.outputs.schema import profile_schema
from tests.support.bad_profile_cases import VALID

BAD = "bad\tvalue;$(x)"  # a control character, a space, shell syntax: no shape allows it
# a valid item of each list of sections, to give one field of it a bad value
ITEMS: dict[FieldPath, dict[str, Any]] = {
    ("smoke", "commands"): {"name": "t", "command": ("true",)},
    ("smoke", "files"): {"path": "/opt"},
}
KEYS = {("image", "labels"): "com.example.x"}  # a valid key of each mapping (default KEYX)
SKIP = {("matrix",), ("extends",)}  # expanded or read before the model (own messages)


def _paths(model: type[BaseModel], prefix: FieldPath = ()) -> Iterator[FieldPath]:
    """Every text leaf of the model: list items as index 0, mapping values under KEYX,
    mapping keys as (..., KEY, "[key]")."""
    for name, info in model.model_fields.items():
        path = (*prefix, name)
        if path[:1] in SKIP or path in SKIP:
            continue
        annotation = unwrap(info.annotation)
        origin = typing.get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _paths(annotation, path)
        elif origin is tuple:
            item = unwrap(typing.get_args(annotation)[0])
            if isinstance(item, type) and issubclass(item, BaseModel):
                yield from _paths(item, (*path, 0))
            else:
                yield (*path, 0)
        elif origin is dict:
            yield (*path, KEYS.get(path, "KEYX"))
            yield (*path, BAD, "[key]")
        else:
            yield path


def _with(data: dict[str, Any], path: FieldPath, value: str) -> dict[str, Any]:
    """``data`` with ``value`` at ``path`` (a list gets one item, a mapping one entry)."""
    out = copy.deepcopy(data)
    if path[-1] == "[key]":
        path, value = path[:-2], {value: "x"}  # type: ignore[assignment]
    node: Any = out
    for depth, part in enumerate(path[:-1]):
        if isinstance(path[depth + 1], int):  # a list of one item (YAML lists are tuples)
            item = copy.deepcopy(ITEMS.get(path[:depth + 1], {}))
            if depth + 2 == len(path):
                node[part] = (value,)
                return out
            node[part] = (item,)
            node = item
        elif not isinstance(part, int):
            node = node.setdefault(part, {})
    node[path[-1]] = value
    if path[:2] == ("flash_attn", "source") and path[-1] in ("url", "git", "sha256", "commit"):
        partner = {"url": "sha256", "git": "commit", "sha256": "url", "commit": "git"}
        example = {"sha256": "0" * 64, "commit": "0" * 40, "url": "https://example.com/a",
                   "git": "https://example.com/a"}
        other = partner[str(path[-1])]
        node[other] = example[other]
    return out


def _base() -> dict[str, Any]:
    data, _ = parse_yaml(VALID, "profile.yaml")
    return typing.cast(dict[str, Any], data)


def _problems() -> list[tuple[FieldPath, str, str]]:
    """(path, field, fix) of every problem about a bad text value that points at the schema."""
    found = []
    for path in _paths(Profile):
        data = _with(_base(), path, BAD)
        _, pos = parse_yaml(VALID, "profile.yaml")
        try:
            validate(data, pos)
        except ProfileError as exc:
            for p in exc.problems:
                if "dockergen schema" in p.fix:
                    found.append((path, p.field, p.fix))
    return found


PROBLEMS = _problems()


def test_the_fields_that_point_at_the_schema_were_found() -> None:
    assert len({field for _, field, _ in PROBLEMS}) >= 25, PROBLEMS


def _entry(schema: dict[str, Any], path: FieldPath) -> dict[str, Any]:
    """The schema entry describing ``path`` (the complete profile's definitions)."""
    defs = schema["$defs"]

    def deref(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[1]]
        if "anyOf" in node:  # X | None: the X
            node = next(n for n in node["anyOf"] if n.get("type") != "null")
            return deref(node)
        return node

    node = deref(schema["else"])
    for i, part in enumerate(path):
        if path[i + 1:] == ("[key]",):
            return typing.cast(dict[str, Any], node["propertyNames"])
        if isinstance(part, int):
            node = deref(node["items"])
        elif "additionalProperties" in node and "properties" not in node:
            node = deref(node["additionalProperties"])
        else:
            node = deref(node["properties"][part])
    return node


def _example(fix: str) -> str:
    """The value the fix shows: `key: value` (YAML; a list: its first item), or a key."""
    shown = re.search(r"e\.g\. `([^`]*)`", fix)
    if shown is None:
        key = re.search(r"e\.g\. (\S+) \(", fix)
        assert key, fix
        return key.group(1)
    value, _ = parse_yaml(shown.group(1), "fix")
    (item,) = value.values()
    return item[0] if isinstance(item, tuple) else item


@pytest.mark.parametrize(("path", "field", "fix"), PROBLEMS, ids=[f for _, f, _ in PROBLEMS])
def test_the_schema_has_the_form_the_message_promises(path: FieldPath, field: str,
                                                      fix: str) -> None:
    schema = profile_schema()
    entry = _entry(schema, path)
    assert {"pattern", "format", "enum"} & set(entry), (field, entry)
    check = jsonschema.Draft202012Validator(
        {**entry, "$defs": schema["$defs"]},
        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    example = _example(fix)
    assert check.is_valid(example), (field, example, entry)
    assert not check.is_valid(BAD), (field, entry)
    # and the model takes the example where it refused the bad value
    try:
        validate(_with(_base(), path, example), parse_yaml(VALID, "profile.yaml")[1])
    except ProfileError as exc:
        assert not [p for p in exc.problems if p.field == field], exc.problems

"""The JSON Schema of profile files, for editors (``dockergen schema``).

Generated from the pydantic model, then adapted to how profiles are written: a profile
that says ``extends:`` (every shipped one) or ``abstract: true`` may leave out any field
it inherits or leaves to its children, so only a standalone profile must have every
required field. Before, the plain model schema required ``cuda``, ``python``, ``engine``
and ``image`` at the top level and flagged every extending profile in the editor.

Shapes, types, choices and unknown keys are checked in both cases. Items of lists keep
their required fields: lists are replaced whole by ``extends``, never merged.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from dockergen.input.profile import Profile

_COMPLETE = "Complete"
DRAFT = "https://json-schema.org/draft/2020-12/schema"


# The schema's title: how `schema -o` recognises a file it wrote (JSON has no comments).
TITLE = "dockergen deployment profile"


def is_schema_text(head: bytes) -> bool:
    """``head`` (the start of a file) is a schema ``dockergen schema`` wrote."""
    try:
        data = json.loads(head)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and data.get("title") == TITLE and "$schema" in data


def _rename_refs(node: Any, prefix: str) -> Any:
    """Point every ``#/$defs/X`` reference at ``#/$defs/<prefix>X``."""
    if isinstance(node, dict):
        return {k: (v.replace("#/$defs/", f"#/$defs/{prefix}") if k == "$ref" else
                    _rename_refs(v, prefix)) for k, v in node.items()}
    if isinstance(node, list):
        return [_rename_refs(v, prefix) for v in node]
    return node


def _item_models(node: Any, found: set[str]) -> set[str]:
    """Names of the models used as list items (they keep their required fields)."""
    if isinstance(node, dict):
        items = node.get("items")
        if isinstance(items, dict) and "$ref" in items:
            found.add(items["$ref"].rsplit("/", 1)[1])
        for value in node.values():
            _item_models(value, found)
    elif isinstance(node, list):
        for value in node:
            _item_models(value, found)
    return found


def _closed_keys(node: Any) -> Any:
    """A mapping whose keys have a form (``serving.env``, ``image.labels``): pydantic writes
    ``patternProperties``, which lets any other key through; the model refuses them, so
    the schema says ``propertyNames`` (the key's pattern) and ``additionalProperties``."""
    if isinstance(node, list):
        return [_closed_keys(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _closed_keys(v) for k, v in node.items()}
    keyed = out.get("patternProperties")
    if isinstance(keyed, dict) and len(keyed) == 1 and "additionalProperties" not in out:
        ((pattern, value),) = keyed.items()
        del out["patternProperties"]
        out["propertyNames"] = {"pattern": pattern}
        out["additionalProperties"] = value
    return out


def profile_schema() -> dict[str, Any]:
    """The schema document: relaxed for extending/abstract profiles, complete otherwise."""
    model = _closed_keys(Profile.model_json_schema())
    defs: dict[str, Any] = model.pop("$defs")
    whole = _item_models(model, _item_models(defs, set()))

    relaxed = copy.deepcopy(model)
    relaxed.pop("required", None)
    relaxed_defs = copy.deepcopy(defs)
    for name, definition in relaxed_defs.items():
        if name not in whole:
            definition.pop("required", None)

    complete_defs = {f"{_COMPLETE}{name}": _rename_refs(d, _COMPLETE) for name, d in defs.items()}
    complete_defs[f"{_COMPLETE}Profile"] = _rename_refs(model, _COMPLETE)

    schema = dict(relaxed)
    schema["$defs"] = {**relaxed_defs, **complete_defs}
    schema["$schema"] = DRAFT
    schema["title"] = TITLE
    # A profile that extends another, or only provides defaults, may omit inherited
    # fields; any other profile must be complete.
    schema["if"] = {"anyOf": [{"required": ["extends"]},
                              {"required": ["abstract"],
                               "properties": {"abstract": {"const": True}}}]}
    schema["else"] = {"$ref": f"#/$defs/{_COMPLETE}Profile"}
    return schema

"""What the profile model says about a field path: whether it exists, what it holds,
which keys a section takes (for ``--set`` items and for the fixes of problems).
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from dockergen.input.profile import Profile
from dockergen.input.yamlsource import FieldPath


def field_annotation(path: FieldPath) -> Any:
    """The model's annotation of the field at ``path`` (list items by index), or None
    when the model has no such field."""
    model: Any = Profile
    annotation: Any = None
    for part in path:
        if isinstance(part, int):
            args = typing.get_args(annotation)
            annotation = args[0] if args else None
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        info = model.model_fields.get(part)
        if info is None:
            return None
        annotation = info.annotation
        model = unwrap(annotation)
    return annotation


def shape_problem(path: FieldPath, text: str) -> str | None:
    """Why ``text`` would still be refused by the field at ``path`` (its shape check), or
    None: `scrape_interval: 15` quoted is "15", still not a duration like "15s"."""
    if not path or not isinstance(path[-1], str):
        return None
    parent = unwrap(field_annotation(path[:-1])) if len(path) > 1 else Profile
    if not (isinstance(parent, type) and issubclass(parent, BaseModel)):
        return None
    info = parent.model_fields.get(path[-1])
    if info is None:
        return None
    form: Any = (typing.Annotated[(info.annotation, *info.metadata)] if info.metadata
                 else info.annotation)
    try:
        TypeAdapter(form).validate_python(text)
    except ValidationError as exc:
        return str(exc.errors()[0].get("ctx", {}).get("error", exc.errors()[0]["msg"]))
    except Exception:  # noqa: BLE001 - an annotation TypeAdapter cannot take: no advice
        return None
    return None


def unwrap(annotation: Any) -> Any:
    """Remove Optional[...] and Annotated[...] wrappers."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def is_field(path: FieldPath) -> bool:
    """Whether a dotted profile field exists in the model."""
    return field_annotation(path) is not None


def expects_mapping(path: FieldPath) -> bool:
    """Whether a profile field holds a section (a mapping merged like ``extends`` does)."""
    annotation = unwrap(field_annotation(path))
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def expects_text(path: FieldPath) -> bool:
    """Whether the field at ``path`` holds text (``--set python=3.10`` means "3.10")."""
    return unwrap(field_annotation(path)) is str


def unknown_key(last: str, allowed: list[str]) -> tuple[str, str]:
    """The message and fix of a key that is no field here (the closest one suggested)."""
    guess = difflib.get_close_matches(last, allowed, n=1, cutoff=0.6)
    return (f"unknown key {last!r}" + (f" (did you mean {guess[0]!r}?)" if guess else ""),
            "allowed keys here: " + ", ".join(allowed))


def fields_at(loc: FieldPath) -> list[str]:
    """The keys the section at ``loc`` takes (none where ``loc`` is no section)."""
    annotation = unwrap(field_annotation(loc)) if loc else Profile
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return list(annotation.model_fields)
    return []


def schema_field(loc: FieldPath) -> FieldPath:
    """The profile field whose schema entry describes ``loc``: a list item or a mapping's
    entry is described by its list's or mapping's entry."""
    names = tuple(part for part in loc if isinstance(part, str))
    while names and field_annotation(names) is None:
        names = names[:-1]
    return names

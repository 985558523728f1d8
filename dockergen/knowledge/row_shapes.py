"""The shapes a user knowledge file's rows must have, read from the shipped rows.

A profile's ``knowledge:`` files may add rows to the tables each facts file lists
(:func:`dockergen.knowledge.facts.addable`); a row's fields must have the shapes the shipped rows of
the same table have (:func:`row_problems`), and a row for a key dockergen ships may only add
releases to its per-release ``min_cc`` map (:func:`extension_problems`). The loader and
``dockergen upgrade`` check rows with these before any reaches a resolution.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from dockergen.knowledge.facts import addable, builtin_facts, newest

# Shapes of the strings in shipped rows, narrowest first: a user's value must have the
# narrowest shape that every shipped value of the same field has. Each is a strict pattern
# (no spaces, quotes or shell characters), so nothing a user row adds can carry a command
# into the Dockerfile.
_VERSION = r"[0-9]+(?:\.[0-9]+)*(?:(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?"
_OP = r"(?:~=|==|!=|<=|>=|<|>)"
_RANGE = rf"{_OP}{_VERSION}(?:\.\*)?"
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"


def _parses(check: Callable[[str], object]) -> Callable[[str], bool]:
    """A test that ``check`` accepts a text (parses as a Version, a SpecifierSet)."""
    def ok(text: str) -> bool:
        try:
            check(text)
        except (InvalidVersion, InvalidSpecifier):
            return False
        return True
    return ok


_STRING_SHAPES: tuple[tuple[str, str, Callable[[str], bool]], ...] = (
    ("number", "a number in quotes", lambda t: bool(re.fullmatch(r"[0-9]+", t))),
    ("major.minor", "MAJOR.MINOR", lambda t: bool(re.fullmatch(r"[0-9]+\.[0-9]+", t))),
    ("version", "a release version (PEP 440)",
     lambda t: bool(re.fullmatch(_VERSION, t)) and _parses(Version)(t)),
    ("span", "a span of releases FIRST..LAST",
     lambda t: bool(re.fullmatch(rf"{_VERSION}\.\.{_VERSION}", t))),
    ("range", "a version range (PEP 440)",
     lambda t: bool(re.fullmatch(rf"{_RANGE}(?:,{_RANGE})*", t)) and _parses(SpecifierSet)(t)),
    ("pin", "a pinned requirement NAME[EXTRAS]==VERSION",
     lambda t: bool(re.fullmatch(rf"{_NAME}(?:\[{_NAME}(?:,{_NAME})*\])?=={_VERSION}", t))),
    ("kernel code", "GPU code like sass_90a or ptx_80",
     lambda t: bool(re.fullmatch(r"(?:sass|ptx)_[0-9]+a?", t))),
    ("option", "a command-line option like --max-model-len or -tp",
     lambda t: bool(re.fullmatch(r"--?[A-Za-z0-9][A-Za-z0-9_.-]*", t))),
)


@dataclass(frozen=True)
class Shape:
    """What the shipped values of one field (or key, or list item) look like.

    ``types``: the YAML types seen (``str``, ``int``, ``bool``, ``null``, ``list``,
    ``dict``); ``string``: the name of the narrowest string shape of every shipped string,
    or None when they share none: then only ``vocabulary`` (the shipped strings) is allowed;
    ``example``: a shipped value to quote in a fix; ``item``/``key``/``value``: the shapes
    inside lists and mappings.
    """

    types: frozenset[str]
    string: str | None = None
    vocabulary: tuple[str, ...] = ()
    example: Any = None
    item: Shape | None = None
    key: Shape | None = None
    value: Shape | None = None

    def describe(self, *, fix: bool = False) -> str:
        """The shape in words; ``fix``: with a shipped example and the allowed words."""
        words = []
        if "str" in self.types:
            if self.string is None:
                words.append("one of: " + ", ".join(self.vocabulary) if fix
                             else "a value the shipped rows use")
            else:
                text = next(d for n, d, _ in _STRING_SHAPES if n == self.string)
                words.append(f"{text} such as \"{self.example}\"" if fix else text)
        for kind in sorted(self.types - {"str"}):
            if kind == "list" and self.item is not None:
                words.append(f"a list of ({self.item.describe(fix=fix)})")
            elif kind == "dict" and self.key is not None and self.value is not None:
                words.append(f"a mapping of ({self.key.describe(fix=fix)}) to "
                             f"({self.value.describe(fix=fix)})")
            else:
                words.append({"int": "a whole number", "bool": "true or false",
                              "null": "null", "list": "a list", "dict": "a mapping"}[kind])
        return " or ".join(words)


def _type_of(value: object) -> str:
    """The YAML type name of a value (a loaded file gives tuples for lists)."""
    return ("null" if value is None else "bool" if isinstance(value, bool)
            else "int" if isinstance(value, int) else "str" if isinstance(value, str)
            else "list" if isinstance(value, (list, tuple)) else "dict" if isinstance(value, dict)
            else type(value).__name__)


def _infer(values: list[Any], vocabulary: tuple[str, ...] = ()) -> Shape:
    """The shape of shipped ``values``; ``vocabulary``: strings other components accept."""
    strings = [v for v in values if isinstance(v, str)]
    string = next((name for name, _, fits in _STRING_SHAPES
                   if strings and all(fits(v) for v in strings)), None)
    lists = [x for v in values if isinstance(v, list) for x in v]
    dicts = [v for v in values if isinstance(v, dict)]
    return Shape(
        frozenset(_type_of(v) for v in values), string,
        tuple(sorted({*strings, *vocabulary})) if strings and string is None else (),
        strings[0] if strings else values[0],
        _infer(lists) if lists else None,
        _infer([k for d in dicts for k in d]) if dicts else None,
        _infer([x for d in dicts for x in d.values()]) if dicts else None)


def _check(shape: Shape, value: Any, path: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], str]]:
    """``(path, what is wrong)`` for every part of ``value`` that does not fit ``shape``."""
    kind = _type_of(value)
    if kind not in shape.types or kind == "str" and not (
            value in shape.vocabulary if shape.string is None
            else next(f for n, _, f in _STRING_SHAPES if n == shape.string)(value)):
        return [(path, f"{_yaml(value)} is not {shape.describe()}")]
    found: list[tuple[tuple[Any, ...], str]] = []
    if kind == "list" and shape.item is not None:
        for i, item in enumerate(value):
            found += _check(shape.item, item, (*path, i))
    if kind == "dict" and shape.key is not None and shape.value is not None:
        for k, v in value.items():
            found += _check(shape.key, k, (*path, k)) + _check(shape.value, v, (*path, k))
    return found


@dataclass(frozen=True)
class RowShape:
    """The shape of the rows of one addable table, read from its shipped rows."""

    key: Shape
    fields: Mapping[str, Shape]
    required: tuple[str, ...]
    example: Mapping[str, Any] = field(default_factory=dict)


@functools.cache
def row_shape(name: str, table: str) -> RowShape:
    """The shape of the rows of ``name``'s ``table`` (one of :func:`addable`).

    The fields every shipped row has are required (``unverified`` never is); a field's
    values must fit what its shipped values look like; strings that fit no pattern are
    limited to the values the same table of any component ships (a ``--kv-cache-dtype``
    flag another engine uses, never a new word).
    """
    rows = builtin_facts(name)[table]
    others = [builtin_facts(n)[table] for n, tables in addable().items()
              if table in tables and n != name]
    names = sorted({f for row in rows.values() for f in row} - {"src", "unverified"})
    fields = {f: _infer([row[f] for row in rows.values() if f in row],
                        tuple(v for o in others for r in o.values()
                              if isinstance(v := r.get(f), str)))
              for f in names}
    required = tuple(f for f in names if all(f in row for row in rows.values()))
    keys = _infer(list(rows), tuple(k for o in others for k in o))
    return RowShape(keys, fields, required, next(iter(rows.values())))


def row_problems(name: str, table: str, key: object, row: Mapping[str, Any]
                 ) -> list[tuple[tuple[Any, ...], str, str]]:
    """What is wrong with a user's row: ``(path below the table, message, fix)`` each.

    ``path`` starts with the key; ``src`` is checked by the caller (it is the user's own
    words and never reaches the Dockerfile).
    """
    shape = row_shape(name, table)
    found: list[tuple[tuple[Any, ...], str, str]] = []
    for path, wrong in _check(shape.key, key, (key,)):
        found.append((path, wrong, f"key the row by {shape.key.describe(fix=True)}"))
    missing = [f for f in shape.required if f not in row]
    if missing:
        found.append(((key,), "missing " + ", ".join(missing),
                      "give every field the shipped rows have, e.g. " + ", ".join(
                          f"{f}: {_yaml(shape.example.get(f))}" for f in missing)))
    allowed = sorted({*shape.fields, "src", "unverified"})
    for f, value in row.items():
        if f == "src":
            continue
        if f == "unverified":
            if value is not True and not (_type_of(value) == "list" and value
                                          and all(v in shape.fields for v in value)):
                found.append(((key, f), f"{_yaml(value)} is not true or a list of fields",
                              "write `unverified: true` or list the fields no artefact "
                              "confirms, one of: " + ", ".join(shape.fields)))
        elif f not in shape.fields:
            found.append(((key, f), f"not a field of {name}.{table} rows",
                          "use one of: " + ", ".join(allowed)))
        else:
            found += [(path, wrong, f"write {shape.fields[f].describe(fix=True)}")
                      for path, wrong in _check(shape.fields[f], value, (key, f))]
    return found


def extension_problems(name: str, table: str, key: object, row: Mapping[str, Any]
                       ) -> list[tuple[tuple[Any, ...], str, str]]:
    """What is wrong with a user's row for a key the shipped ``table`` already has, like
    :func:`row_problems`. Shipped facts are never replaced; the one thing such a row may do
    is add releases to a per-release ``min_cc`` map (a quantization floor read from a
    release dockergen does not ship), at releases none of the shipped spans covers."""
    shipped = builtin_facts(name)[table][key]
    spans = shipped.get("min_cc")
    if not isinstance(spans, dict):
        return [((key,), "dockergen already knows this; shipped facts are not replaced",
                 "remove it from the knowledge file")]
    last = Version(newest([s.partition("..")[2] or s for s in spans]))
    example = f'min_cc: {{"{last.major}.{last.minor + 1}.0": "8.0"}}'
    found: list[tuple[tuple[Any, ...], str, str]] = [
        ((key, f), "a row for a method dockergen knows only adds releases to its min_cc",
         f"remove {f}; keep {example} and src") for f in row if f not in ("min_cc", "src")]
    added = row.get("min_cc")
    if not isinstance(added, dict) or not added:
        return [*found, ((key, "min_cc"), "not a mapping of releases to compute capabilities",
                         f"write e.g. {example}")]
    taken = [_span(s) for s in spans]
    for span, cc in added.items():
        where = (key, "min_cc", span)
        if not (isinstance(span, str) and re.fullmatch(rf"{_VERSION}(?:\.\.{_VERSION})?", span)
                and _parses(Version)(span.partition("..")[0])
                and _parses(Version)(span.partition("..")[2] or span)):
            found.append((where, f"{_yaml(span)} is not a release or a span FIRST..LAST",
                          f"write e.g. {example}"))
            continue
        if not (isinstance(cc, str) and re.fullmatch(r"[0-9]+\.[0-9]+", cc)):
            found.append((where, f"{_yaml(cc)} is not a compute capability MAJOR.MINOR",
                          f"write e.g. {example}"))
        first, last = _span(span)
        covered = [s for s, (a, b) in zip(spans, taken, strict=True)
                   if a <= last and first <= b]
        if covered:
            found.append((where, f"dockergen already has the floor of {span} "
                          f"({', '.join(covered)}); shipped facts are not replaced",
                          "add only releases outside the shipped spans: " + ", ".join(spans)))
    return found


def _span(text: str) -> tuple[Version, Version]:
    first, _, last = text.partition("..")
    return Version(first), Version(last or first)


def _yaml(value: object) -> str:
    """``value`` as YAML flow text, to quote in a message."""
    plain = list(value) if isinstance(value, tuple) else value
    return yaml.safe_dump(plain, default_flow_style=True, default_style='"' if isinstance(
        value, str) else None, width=1000).strip().removesuffix("...").strip()

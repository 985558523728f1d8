"""Load a profile file (with ``extends`` and ``--set`` overrides) into a :class:`Profile`.

Every problem found is collected and raised at once as a :class:`ProfileError` whose
lines read ``FILE:LINE:COL: field.path: what is wrong; what to do``.
May import: :mod:`dockergen.credentials`, :mod:`dockergen.errors`, :mod:`dockergen.knowledge`
(which facts tables exist, for user knowledge files), :mod:`dockergen.profile`,
:mod:`dockergen.resources`, :mod:`dockergen.yamlsource`.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import math
import os
import re
import shlex
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from dockergen import credentials, knowledge, knowledge_shapes
from dockergen.errors import LOCK, OPTION, SET, Location, Problem, ProfileError, redact
from dockergen.profile import Profile
from dockergen.resources import profiles_dir
from dockergen.yamlsource import FieldPath, Positions, parse_yaml, read_yaml_file

MAX_EXTENDS_DEPTH = 8


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


def display_path(path: Path) -> str:
    """A path as the user should see it: relative to the working directory if inside."""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


# a parent profile's file name without .yaml: no folder, no leading dot, no control
# characters (names land in the Dockerfile's header comments)
_PARENT = re.compile(r"[^/.\x00-\x1f\x7f][^/\x00-\x1f\x7f]{0,254}")


def _find_parent(name: str, child: Path, loc: Location) -> Path:
    if not _PARENT.fullmatch(name):
        raise ProfileError([Problem(loc, "extends", f"{name!r} is not a profile name",
                                    "use the name of a profile without .yaml, e.g. base")])
    for folder in (child.parent, profiles_dir()):
        candidate = folder / f"{name}.yaml"
        # anything of that name is the parent (a FIFO or a link loop is refused when read,
        # by its name); realpath, unlike Path.resolve, does not raise on a link loop
        if os.path.lexists(candidate):
            real = Path(os.path.realpath(candidate))
            return real if real.exists() else candidate.absolute()
    shipped = sorted(p.stem for p in profiles_dir().glob("*.yaml"))
    raise ProfileError([Problem(loc, "extends", f"no profile named {name!r} next to "
                                f"{display_path(child)} or among the shipped profiles",
                                "use one of: " + ", ".join(shipped))])


def _merge(base: Any, top: Any, base_pos: Positions, path: FieldPath = ()) -> Any:
    """Deep-merge mappings (``top`` wins); lists and scalars are replaced whole."""
    if isinstance(base, dict) and isinstance(top, dict):
        out = dict(base)
        for key, value in top.items():
            if key in out:
                out[key] = _merge(out[key], value, base_pos, path + (key,))
            else:
                out[key] = value
        return out
    base_pos.drop(path)
    return top


def _load_raw(path: Path, seen: tuple[Path, ...]) -> tuple[dict[str, Any], Positions,
                                                          tuple[str, ...]]:
    display = display_path(path)
    data, pos = read_yaml_file(path, display)
    if data is None:
        raise ProfileError([Problem(Location(display, 1, 1), "", "the profile is empty",
                                    "start from a shipped profile: dockergen profiles")])
    if not isinstance(data, dict):
        raise ProfileError([Problem(Location(display, 1, 1), "",
                                    "a profile must be a mapping of keys to values",
                                    "write `key: value` lines, e.g. `name: h100-fp8`")])
    parent_name = data.get("extends")
    if parent_name is None:
        return data, pos, (display,)
    loc = pos.of(("extends",))
    if not isinstance(parent_name, str):
        raise ProfileError([Problem(loc, "extends", "expected a profile name",
                                    "write e.g. `extends: base`")])
    parent = _find_parent(parent_name, path, loc)
    if parent in seen or len(seen) >= MAX_EXTENDS_DEPTH:
        chain = " -> ".join(display_path(p) for p in (*seen, parent))
        raise ProfileError([Problem(loc, "extends", f"circular or too deep extends chain: {chain}",
                                    "remove the loop")])
    pdata, ppos, pchain = _load_raw(parent, (*seen, parent))
    pdata = {k: v for k, v in pdata.items() if k not in ("extends", "abstract")}
    for key in ("extends", "abstract"):
        ppos.drop((key,))
    merged = _merge(pdata, data, ppos)
    ppos.merge_from(pos)
    # A problem with no position of its own (a missing field, a key only an override
    # added) belongs to the file the user asked for, not to the base profile.
    ppos.default = pos.default
    return merged, ppos, (display, *pchain)


# --- --set overrides ----------------------------------------------------------------

def _field_annotation(path: FieldPath) -> Any:
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
        model = _strip(annotation)
    return annotation


def _shape_problem(path: FieldPath, text: str) -> str | None:
    """Why ``text`` would still be refused by the field at ``path`` (its shape check), or
    None: `scrape_interval: 15` quoted is "15", still not a duration like "15s"."""
    if not path or not isinstance(path[-1], str):
        return None
    parent = _strip(_field_annotation(path[:-1])) if len(path) > 1 else Profile
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


def _strip(annotation: Any) -> Any:
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
    return _field_annotation(path) is not None


def expects_mapping(path: FieldPath) -> bool:
    """Whether a profile field holds a section (a mapping merged like ``extends`` does)."""
    annotation = _strip(_field_annotation(path))
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _expects_text(path: FieldPath) -> bool:
    return _strip(_field_annotation(path)) is str


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
    resolution instead (:class:`dockergen.components.base.Inputs`), never an override.
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
    if _expects_text(parts):
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


# --- pydantic errors -> problems ------------------------------------------------------

def _unknown_key(last: str, allowed: list[str]) -> tuple[str, str]:
    """The message and fix of a key that is no field here (the closest one suggested)."""
    guess = difflib.get_close_matches(last, allowed, n=1, cutoff=0.6)
    return (f"unknown key {last!r}" + (f" (did you mean {guess[0]!r}?)" if guess else ""),
            "allowed keys here: " + ", ".join(allowed))


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
            allowed = _fields_at(parts[:depth])
            if not allowed:
                break  # not a model here (a mapping, a list, a value): the loader decides
            if part not in allowed:
                msg, fix = _unknown_key(part, allowed)
                problems.append(Problem(Location(f"--set {key}", origin=SET),
                                        _dotted(parts[:depth + 1]), msg, fix))
                break
    return problems


def set_field_paths() -> list[str]:
    """Every field path of the profile model, for completing ``--set FIELD``."""
    paths: list[str] = []
    pending: list[FieldPath] = [()]
    while pending:
        loc = pending.pop(0)
        for name in _fields_at(loc):
            paths.append(_dotted((*loc, name)))
            pending.append((*loc, name))
    return paths


def _fields_at(loc: FieldPath) -> list[str]:
    annotation = _strip(_field_annotation(loc)) if loc else Profile
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return list(annotation.model_fields)
    return []


def _dotted(loc: FieldPath) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (tuple, list)):
        return "a list"
    if value is None:
        return "empty"
    if isinstance(value, str):
        return "text"
    return f"a YAML {type(value).__name__}"


def _flow(value: str) -> str:
    """``value`` as a YAML flow scalar: plain where YAML reads it back as that text."""
    try:
        back, _ = parse_yaml(f"[{value}]", "")
    except ProfileError:
        back = None
    same = isinstance(back, (list, tuple)) and list(back) == [value]
    return value if same else json.dumps(value)


def _text_of(flow: str) -> str:
    """The text a YAML flow scalar stands for (``"3.10"`` -> ``3.10``)."""
    try:
        back, _ = parse_yaml(flow, "")
    except ProfileError:
        return flow
    return back if isinstance(back, str) else flow


_LOCK_FIX = ("{file} pins this image: correct its entry there, or delete the entry and "
             "pin it again with `dockergen lock` on the profile beside the lock")


def in_form(where: Location, loc: FieldPath, flow: str) -> str:
    """``flow`` (YAML flow text) as the value of the field at ``loc``, written in the form
    the wrong value was given in: a YAML line for a file, ``--set FIELD=VALUE`` for an
    override (text fields take the text as it is, the others YAML), the option itself for
    an option, the lock entry for a pin. A list item is shown as its whole list: YAML and
    ``--set`` both replace a list whole."""
    if where.origin == LOCK:
        return _LOCK_FIX.format(file=where.file)
    if where.origin == OPTION:
        return f"{where.file.split(' ', 1)[0]} {shlex.quote(_text_of(flow))}"
    if loc and isinstance(loc[-1], int):
        loc, flow = loc[:-1], f"[{flow}]"
    if where.origin == SET and loc and "." in str(loc[-1]):  # a key such as com.example.team
        loc, flow = loc[:-1], f"{{{_flow(str(loc[-1]))}: {flow}}}"
    if where.origin == SET:
        text = _text_of(flow) if _expects_text(loc) else flow
        return "--set " + shlex.quote(f"{_dotted(loc)}={text}")
    return f"{loc[-1] if loc else 'value'}: {flow}"


def _quoted_example(loc: FieldPath, raw: str, pos: Positions, where: Location) -> str:
    """The value with the number quoted: ``python: "3.10"``, ``targets: [h100, "8.0"]``,
    ``--set 'gpu.targets=[h100, "8.0"]'``.

    A list item has no key of its own, so the example is its whole list, each item as
    written and the numbers quoted.
    """
    if not loc or not isinstance(loc[-1], int) or len(loc) < 2:
        return in_form(where, loc, json.dumps(raw))
    items = []
    whole = pos.raw(loc[:-1])  # a --set list: its items' text is inside the override's
    ipos = parse_yaml(whole, "")[1] if where.origin == SET and whole is not None else pos
    prefix: FieldPath = () if ipos is not pos else loc[:-1]
    i = 0
    while (text := ipos.raw((*prefix, i))) is not None:
        items.append(f'"{text}"' if _NUMBER.fullmatch(text) or i == loc[-1] else text)
        i += 1
    listed = f"[{', '.join(items) or json.dumps(raw)}]"
    return in_form(where, loc[:-1], listed)


_NUMBER = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def problems_from_validation(exc: ValidationError, pos: Positions) -> list[Problem]:
    """Turn pydantic's errors into reader-facing problems with positions and fixes.

    A fix that shows a value is written in the form the wrong value came in
    (:func:`in_form`): YAML for a profile file, ``--set FIELD=VALUE`` for an override.
    """
    problems = []
    for err in exc.errors(include_url=False):
        loc: FieldPath = tuple(p for p in err["loc"] if isinstance(p, (str, int)))
        kind = err["type"]
        if kind == "too_short" and err.get("input"):
            continue  # its items were rejected (each reported); the list was not empty
        where = pos.of(loc)
        if kind == "extra_forbidden":
            where = pos.key_of(loc)
        elif kind == "missing":
            where = pos.of(loc[:-1]) if len(loc) > 1 else pos.default
        msg, fix = _describe(err, loc, pos, where)
        if where.origin == LOCK:  # the user never typed it: the fix is in the lock
            fix = in_form(where, loc, "")
        problems.append(Problem(where, _dotted(loc), msg, fix))
    return problems


def _describe(err: Any, loc: FieldPath, pos: Positions, where: Location) -> tuple[str, str]:
    """The message and fix of one pydantic error at ``loc`` (value from ``where``)."""
    kind, value = err["type"], err.get("input")
    last = str(loc[-1]) if loc else ""
    if kind == "extra_forbidden":
        return _unknown_key(last, _fields_at(loc[:-1]))
    if kind == "missing":
        return _MISSING, (f"add `{last}:` under `{_dotted(loc[:-1])}`" if len(loc) > 1
                          else f"add `{last}:` at the top level")
    if kind == "string_type" and isinstance(value, (int, float)) and not isinstance(
            value, bool):
        raw = pos.raw(loc) or str(value)
        wrong = _shape_problem(loc, raw)  # quoted, is it of the field's form?
        return (f"{raw} is a number in YAML (read as {value!r}), not text",
                f"quote it: {_quoted_example(loc, raw, pos, where)}" if wrong is None
                else f"write it as quoted text of the field's form ({wrong})")
    if kind in _TYPE_PROBLEMS:
        what, fix = _TYPE_PROBLEMS[kind]
        shown = (repr(value) if isinstance(value, (int, float, str)) and not isinstance(
            value, bool) and kind.startswith(("int", "float")) else _kind(value))
        return f"expected {what}, got {shown}", fix
    if kind == "bool_type":
        return (f"expected true or false, got {_kind(value)}",
                f"write `{in_form(where, loc, 'true')}` or `{in_form(where, loc, 'false')}`")
    if kind == "literal_error":
        return _literal(err, value)
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return _out_of_range(kind, err, value)
    if kind == "too_short":
        return "must not be empty", "list at least one entry" + (
            f", e.g. {in_form(where, loc, '[h100]')}" if last == "targets" else "")
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return (f"expected a mapping (indented `key: value` lines), got {_kind(value)}",
                f"write `{last}:` followed by indented keys" if where.origin != SET else
                f"set its keys one by one ({in_form(where, (*loc, 'KEY'), 'VALUE')}) or "
                f"as a flow mapping ({in_form(where, loc, '{KEY: VALUE}')})")
    if kind in ("tuple_type", "list_type"):
        items = _flow(value) if isinstance(value, str) and value else "a, b"
        return (f"expected a list, got {_kind(value)}",
                f"write `{in_form(where, loc, f'[{items}]')}`")
    if kind == "value_error":
        return _value_problem(err, loc, where)
    return err["msg"], "see `dockergen schema`"  # a new pydantic error type still reads


_TYPE_PROBLEMS = {
    "string_type": ("text", "write a quoted string"),
    "int_type": ("a whole number", "write a whole number without quotes"),
    "int_parsing": ("a whole number", "write a whole number without quotes"),
    "int_from_float": ("a whole number", "write a whole number without quotes"),
    "float_type": ("a number", "write a number without quotes, e.g. 0.9"),
    "float_parsing": ("a number", "write a number without quotes, e.g. 0.9"),
}


def _literal(err: Any, value: Any) -> tuple[str, str]:
    expected = err.get("ctx", {}).get("expected", "")
    choices = [c.strip().strip("'") for c in expected.replace(" or ", ",").split(",")]
    choices = [c for c in choices if c]
    shown = repr(value) if isinstance(value, str) else _kind(value)
    guess = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.6)
    return (f"{shown} is not one of: {', '.join(choices)}",
            f"did you mean {guess[0]!r}?" if guess else f"use one of: {', '.join(choices)}")


def _out_of_range(kind: str, err: Any, value: Any) -> tuple[str, str]:
    ctx = err.get("ctx", {})
    op = {"greater_than": "> ", "greater_than_equal": ">= ", "less_than": "< ",
          "less_than_equal": "<= "}[kind]
    bound = next(iter(ctx.values())) if ctx else "?"
    if isinstance(value, float) and math.isnan(value):  # .nan compares as false
        return "nan is not a number", f"write a number {op}{bound}"
    return f"{value!r} is out of range: must be {op}{bound}", f"use a value {op}{bound}"


SCHEMA_POINTER = "the allowed form is the {part} of {field} in `dockergen schema`"


def _value_problem(err: Any, loc: FieldPath, where: Location) -> tuple[str, str]:
    """A value the model's own check refused: a text field of the wrong shape gets an
    example in the form it was given in and a pointer to the schema's pattern; model-wide
    checks (a smoke section without checks, ...) get their own fix."""
    error = err.get("ctx", {}).get("error")
    msg = str(error if error is not None else err["msg"])
    named = next((str(part) for part in reversed(loc) if isinstance(part, str)), "")
    fix = _VALUE_FIX.get(_dotted(loc), _VALUE_FIX.get(named))
    example = None if fix else getattr(error, "example", None)
    if isinstance(example, str) and loc and loc[-1] == "[key]":  # a mapping's key
        field_name = _dotted(loc[:-2])
        return msg, (f"use a key of that form, e.g. {example} ("
                     + SCHEMA_POINTER.format(part="propertyNames pattern", field=field_name)
                     + ")")
    if isinstance(example, str):
        field_name = _dotted(_schema_field(loc))
        return msg, (f"write it in that form, e.g. `{in_form(where, loc, _flow(example))}` ("
                     + SCHEMA_POINTER.format(part="pattern", field=field_name) + ")")
    return msg, fix or "see `dockergen schema`"


def _schema_field(loc: FieldPath) -> FieldPath:
    """The profile field whose schema entry describes ``loc``: a list item or a mapping's
    entry is described by its list's or mapping's entry."""
    names = tuple(part for part in loc if isinstance(part, str))
    while names and _field_annotation(names) is None:
        names = names[:-1]
    return names


_MISSING = "required field is missing"

# fixes of the model-wide checks (a shape error carries its own example instead)
_VALUE_FIX = {
    "expected_output": "write a Python regular expression; escape ( [ { * + ? . with a backslash",
    "excluded_output": "write a Python regular expression; escape ( [ { * + ? . with a backslash",
    "smoke": "keep `defaults: true`, or add `commands:` or `files:`",
    "source": "e.g. `source: {git: https://github.com/Dao-AILab/flash-attention, "
              "commit: <40 hex>}`",
    "max_jobs": "write max_jobs: auto or a number such as 4",
    "axes": "give each axis a list of values, e.g. `quantization.weights: [bf16, fp8]`, or "
            "a mapping NAME: VALUE",
}


_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def locate_profile(path: Path) -> Path:
    """A profile file by path, or by the name of a shipped profile (``h100-fp8``).

    Names work wherever a path does, also after a plain ``pip install`` where the shipped
    profiles live inside site-packages. An existing file of that name wins.
    """
    text = str(path)
    if _CONTROL.search(text):  # the name is written into the Dockerfile's header comments
        raise ProfileError([Problem(Location(repr(text)[1:-1]), "", "the file name holds a "
                                    "control character (a newline, a tab...)",
                                    "rename the file to letters, digits, '-', '_' and '.'")])
    try:
        exists = path.exists() or path.is_symlink()  # a dangling link or a loop is named
    except OSError as exc:  # e.g. ENAMETOOLONG: exists() only absorbs "no such file"
        raise ProfileError([Problem(Location(text[:80] + "..."), "",
                                    f"cannot read the file: {exc.strerror}",
                                    "give a shorter path")]) from None
    if exists or not _NAME.fullmatch(text):
        return path
    shipped = profiles_dir() / f"{text}.yaml"
    if shipped.is_file():
        return shipped
    names = ", ".join(sorted(p.stem for p in profiles_dir().glob("*.yaml")))
    raise ProfileError([Problem(Location(text), "", "no such file, and no shipped profile of "
                                "that name", f"give a path, or one of: {names}")])


def profile_file(path: Path) -> Path:
    """The file a profile argument names (:func:`locate_profile`), links followed.

    ``realpath``, not ``Path.resolve``: that raises RuntimeError on a link loop. A dangling
    link or a loop is kept as given, so that reading it names it.
    """
    located = locate_profile(path)
    resolved = Path(os.path.realpath(located))
    if not resolved.exists() and located.is_symlink():
        return located.absolute()
    return resolved


@dataclass(frozen=True)
class RawProfile:
    """A profile file merged with its ``extends`` chain, not yet validated."""

    path: Path
    data: dict[str, Any]
    positions: Positions
    chain: tuple[str, ...]  # the files it was built from, child first

    @property
    def display(self) -> str:
        return self.chain[0]

    def at(self, *path: str | int) -> Location:
        return self.positions.of(path)

    def key_at(self, *path: str | int) -> Location:
        return self.positions.key_of(path)

    def with_data(self, data: dict[str, Any], positions: Positions) -> RawProfile:
        """The same file's profile with another document (a matrix point's values set)."""
        return dataclasses.replace(self, data=data, positions=positions)


def read_raw(path: str | Path) -> RawProfile:
    """Read a profile and its parents (mappings merged), keeping every value's position.

    ``path`` may also name a shipped profile (``h100-fp8``), as everywhere else.
    """
    resolved = profile_file(Path(path))
    data, pos, chain = _load_raw(resolved, (resolved,))
    return RawProfile(resolved, data, pos, chain)


def _validate(data: dict[str, Any], pos: Positions, *, partial: bool = False) -> Profile | None:
    """The model of ``data``; every problem (secrets included) at once as a ProfileError.

    ``partial``: only check the fields that are there (an abstract profile leaves fields
    to the profiles that extend it), so a missing field is not a problem.
    """
    secrets = credentials.scan(data, pos)
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        problems = [p for p in problems_from_validation(exc, pos)
                    if not (partial and p.message == _MISSING)]
        # one problem per field: a value the schema already rejects is not repeated
        rejected = {p.field for p in problems}
        problems += [p for p in secrets if p.field not in rejected]
        if problems:
            raise ProfileError(problems) from None
        return None
    if secrets:
        raise ProfileError(secrets)
    return profile


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
    if data.get("matrix"):  # variants are expanded by dockergen/fleet/matrix.py
        raise ProfileError([Problem(pos.of(("matrix",)), "matrix",
                                    "this profile is a matrix of variants",
                                    "write them all with `dockergen render PROFILE -o DIR` "
                                    "(each variant's dockergen.resolved.json holds what it "
                                    "derived) and build with `docker buildx bake`; "
                                    "`dockergen validate PROFILE` lists the variants")])
    # the secret scan first (a type error never hides it), then the model; and the
    # profile's user knowledge files
    profile = _validate(data, pos)
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
    _validate(apply_overrides(data, pos, overrides), pos, partial=True)
    return True


def with_overrides(loaded: LoadedProfile, overrides: tuple[str, ...]) -> LoadedProfile:
    """``loaded`` as if ``--set`` had also been given ``overrides``: the document is not
    read again (a fix is tried on what was read; raises :class:`ProfileError`)."""
    data = copy.deepcopy(loaded.data)
    pos = loaded.positions.copy()
    apply_overrides(data, pos, overrides)
    profile = _validate(data, pos)
    assert profile is not None
    return dataclasses.replace(loaded, profile=profile, positions=pos,
                               overrides=(*loaded.overrides, *overrides), data=data)


def read_user_knowledge(files: tuple[str, ...], folder: Path, pos: Positions
                        ) -> dict[str, dict[str, dict[str, Any]]]:
    """Read a profile's user knowledge files: additions to the shipped fact tables.

    A file maps a component's facts name (``serving/vllm``, ``flash_attn``, ``torch``, ...)
    to tables of it to new rows keyed like the shipped ones. Only the tables of
    :func:`dockergen.knowledge.addable` take rows (releases, quantization methods); each
    row needs a non-empty one-line ``src`` and must have the shape of the shipped rows of
    its table (:func:`dockergen.knowledge_shapes.row_problems`: required and unknown fields,
    versions, ranges, pins, flags from the shipped vocabulary), so nothing a user writes
    reaches the Dockerfile unchecked. Shipped facts are never replaced: a key dockergen
    already knows is an error, except that a quantization method's per-release ``min_cc``
    map takes releases none of its spans covers
    (:func:`dockergen.knowledge_shapes.extension_problems`). Each row's ``src`` is marked as the
    user's.
    """
    problems: list[Problem] = []
    overlay: dict[str, dict[str, dict[str, Any]]] = {}
    for i, name in enumerate(files):
        path = folder / name
        try:
            found, folder_there = os.path.lexists(path), path.is_dir()
        except OSError:  # ENAMETOOLONG: is_dir() only absorbs "no such file"
            found = folder_there = False
        if not found or folder_there:
            problems.append(Problem(pos.of(("knowledge", i)), f"knowledge[{i}]",
                                    f"{name} is a folder" if folder_there else
                                    f"{name} does not exist next to the profile",
                                    "give the path of a knowledge file relative to the profile"))
            continue
        shown = display_path(path)
        try:  # a device, FIFO, link loop or huge file is a problem of this file
            data, fpos = read_yaml_file(path, shown)
        except ProfileError as exc:
            problems += exc.problems
            continue
        if not isinstance(data, dict):
            problems.append(Problem(fpos.default, "", "a knowledge file maps component names "
                                    "to tables of facts", "e.g. `serving/vllm: {releases: "
                                    "{\"0.32.0\": {torch: ..., src: ...}}}`"))
            continue
        for component, tables in data.items():
            where = fpos.key_of((component,))
            if not knowledge.has_facts(str(component)):
                problems.append(Problem(where, str(component), "not a component's facts",
                                        "use one of: " + ", ".join(knowledge.fact_names())))
                continue
            if not isinstance(tables, dict):
                problems.append(Problem(where, str(component), "not a mapping of tables",
                                        "e.g. `serving/vllm: {releases: {...}}`"))
                continue
            for table, rows in tables.items():
                # keys of a loaded file are always strings (yamlsource)
                problems += _user_rows(shown, fpos, component, str(table), rows, overlay)
    if problems:
        raise ProfileError(problems)
    return overlay


def _user_rows(shown: str, fpos: Positions, component: str, table: str, rows: object,
               overlay: dict[str, dict[str, dict[str, Any]]]) -> list[Problem]:
    """Check the rows a knowledge file adds to one table; add the good ones to ``overlay``."""
    at = (component, table)
    addable = knowledge.addable().get(component, ())
    if table not in addable:
        fix = ("add rows to one of: " + ", ".join(addable) if addable else
               f"{component}'s facts take no rows; rows can be added to: " + ", ".join(
                   f"{n}.{t}" for n, ts in knowledge.addable().items() for t in ts))
        return [Problem(fpos.key_of(at), f"{component}.{table}",
                        "not a table of rows that can be added to", fix)]
    if not isinstance(rows, dict):
        return [Problem(fpos.of(at), f"{component}.{table}", "not a mapping of rows",
                        f"key each row like the shipped {table}, e.g. "
                        f"`{table}: {{\"{next(iter(knowledge.facts().of(component)[table]))}"
                        "\": {..., src: ...}}`")]
    problems: list[Problem] = []
    for key, row in rows.items():
        loc = fpos.key_of((*at, key))
        field_name = f"{component}.{table}.{key}"
        shipped = key in knowledge.facts().of(component)[table]
        if shipped and not isinstance(knowledge.facts().of(component)[table][key].get(
                "min_cc"), dict):  # only a per-release floor map takes added releases
            problems.append(Problem(loc, field_name, "dockergen already knows this; shipped "
                                    "facts are not replaced", "remove it from the knowledge file"))
            continue
        src = row.get("src") if isinstance(row, dict) else None
        if not isinstance(src, str) or not src.strip() or not src.isprintable():
            problems.append(Problem(loc, field_name, "a fact needs its source",
                                    "write it as a mapping with `src:` on one line (where you "
                                    "read it: wheel METADATA, release notes, ...)"))
            continue
        if redact(src) != src:  # explain prints every fact's source
            problems.append(Problem(fpos.of((*at, key, "src")), f"{field_name}.src",
                                    "holds something shaped like a credential (a token, or a "
                                    "password in a URL)", "cite the source without it"))
            continue
        judge = knowledge_shapes.extension_problems if shipped else knowledge_shapes.row_problems
        found = judge(component, table, key, row)
        problems += [Problem(fpos.key_of((*at, *path)), ".".join(map(str, (*at, *path))),
                             message, fix) for path, message, fix in found]
        earlier = overlay.get(component, {}).get(table, {}).get(key)
        if earlier is not None:  # two files, one row: which one wins must not be silent
            problems.append(Problem(loc, field_name, f"{earlier['user']} adds this row too",
                                    "keep it in one knowledge file"))
        elif not found:
            overlay.setdefault(component, {}).setdefault(table, {})[key] = {
                **row, "src": f"user knowledge {shown}: {src}", "user": shown}
    return problems

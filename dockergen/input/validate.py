"""Validate a profile's document against the model, and turn pydantic's errors into
problems with positions and fixes written in the form the wrong value came in.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import shlex
from typing import Any

from pydantic import ValidationError

from dockergen.errors import LOCK, OPTION, SET, Location, Problem, ProfileError, dotted
from dockergen.input import credentials
from dockergen.input.fields import (
    expects_text,
    fields_at,
    schema_field,
    shape_problem,
    unknown_key,
)
from dockergen.input.profile import Profile
from dockergen.input.yamlsource import FieldPath, Positions, parse_yaml


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
        text = _text_of(flow) if expects_text(loc) else flow
        return "--set " + shlex.quote(f"{dotted(loc)}={text}")
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
        problems.append(Problem(where, dotted(loc), msg, fix))
    return problems


def _describe(err: Any, loc: FieldPath, pos: Positions, where: Location) -> tuple[str, str]:
    """The message and fix of one pydantic error at ``loc`` (value from ``where``)."""
    kind, value = err["type"], err.get("input")
    last = str(loc[-1]) if loc else ""
    if kind == "extra_forbidden":
        return unknown_key(last, fields_at(loc[:-1]))
    if kind == "missing":
        return MISSING, (f"add `{last}:` under `{dotted(loc[:-1])}`" if len(loc) > 1
                          else f"add `{last}:` at the top level")
    if kind == "string_type" and isinstance(value, (int, float)) and not isinstance(
            value, bool):
        raw = pos.raw(loc) or str(value)
        wrong = shape_problem(loc, raw)  # quoted, is it of the field's form?
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
    fix = _VALUE_FIX.get(dotted(loc), _VALUE_FIX.get(named))
    example = None if fix else getattr(error, "example", None)
    if isinstance(example, str) and loc and loc[-1] == "[key]":  # a mapping's key
        field_name = dotted(loc[:-2])
        return msg, (f"use a key of that form, e.g. {example} ("
                     + SCHEMA_POINTER.format(part="propertyNames pattern", field=field_name)
                     + ")")
    if isinstance(example, str):
        field_name = dotted(schema_field(loc))
        return msg, (f"write it in that form, e.g. `{in_form(where, loc, _flow(example))}` ("
                     + SCHEMA_POINTER.format(part="pattern", field=field_name) + ")")
    return msg, fix or "see `dockergen schema`"


MISSING = "required field is missing"

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


def validate(data: dict[str, Any], pos: Positions, *, partial: bool = False) -> Profile | None:
    """The model of ``data``; every problem (secrets included) at once as a ProfileError.

    ``partial``: only check the fields that are there (an abstract profile leaves fields
    to the profiles that extend it), so a missing field is not a problem.
    """
    secrets = credentials.scan(data, pos)
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        problems = [p for p in problems_from_validation(exc, pos)
                    if not (partial and p.message == MISSING)]
        # one problem per field: a value the schema already rejects is not repeated
        rejected = {p.field for p in problems}
        problems += [p for p in secrets if p.field not in rejected]
        if problems:
            raise ProfileError(problems) from None
        return None
    if secrets:
        raise ProfileError(secrets)
    return profile

"""Read YAML into plain data while remembering where every value came from.

PyYAML's C composer builds the node tree (fast, and each node knows its line and column);
dockergen then makes the values itself with YAML 1.2 core-schema rules, so ``no`` stays
text instead of becoming ``False``, dates stay text, and duplicate keys are reported
instead of silently keeping the last one. Those positions let each problem name
``FILE:LINE:COL``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from dockergen.errors import Location, Problem, ProfileError
from dockergen.files import inputs

FieldPath = tuple[str | int, ...]

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution)
_NULL = re.compile(r"~|null|Null|NULL|")
_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False,
         "FALSE": False}
_INT = re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_SPECIAL_FLOAT = {".inf": float("inf"), "+.inf": float("inf"), "-.inf": float("-inf"),
                  ".nan": float("nan")}


class Positions:
    """Source location of every key and value of a loaded document, by field path."""

    def __init__(self, default: Location) -> None:
        self.default = default
        self._keys: dict[FieldPath, Location] = {}
        self._values: dict[FieldPath, Location] = {}
        self._raw: dict[FieldPath, str] = {}

    def set(self, path: FieldPath, key: Location | None, value: Location,
            raw: str | None = None) -> None:
        if key is not None:
            self._keys[path] = key
        self._values[path] = value
        if raw is not None:
            self._raw[path] = raw

    def of(self, path: FieldPath) -> Location:
        """The best location for ``path``: its value, else its nearest known parent."""
        probe = tuple(path)
        while probe:
            if probe in self._values:
                return self._values[probe]
            probe = probe[:-1]
        return self.default

    def exact(self, path: FieldPath) -> Location | None:
        """Where ``path`` itself was written; None when it was not (no parent fallback)."""
        return self._values.get(tuple(path))

    def key_of(self, path: FieldPath) -> Location:
        """Location of the key itself (for unknown-key problems), else :meth:`of`."""
        return self._keys.get(tuple(path)) or self.of(path)

    def raw(self, path: FieldPath) -> str | None:
        """The value's text as written in the file (to quote ``3.10`` back at the user)."""
        return self._raw.get(tuple(path))

    def copy(self) -> Positions:
        """An independent copy (overrides applied to it leave this one as it was)."""
        twin = Positions(self.default)
        twin.merge_from(self)
        return twin

    def merge_from(self, other: Positions, prefix: FieldPath = ()) -> None:
        """Take every position of ``other`` (a parent profile or an override)."""
        for k, v in other._values.items():
            self._values[prefix + k] = v
        for k, v in other._keys.items():
            self._keys[prefix + k] = v
        for k, r in other._raw.items():
            self._raw[prefix + k] = r

    def move(self, source: FieldPath, target: FieldPath) -> None:
        """Point ``target``'s subtree at where ``source``'s subtree was written (a value
        written in one place that becomes another field keeps its line)."""
        n = len(source)
        for table in (self._values, self._keys):
            for k in [k for k in table if k[:n] == source]:
                table[target + k[n:]] = table[k]
        for k in [k for k in self._raw if k[:n] == source]:
            self._raw[target + k[n:]] = self._raw[k]

    def drop(self, path: FieldPath) -> None:
        """Forget ``path`` and everything below it (a child replaced that subtree)."""
        n = len(path)
        for table in (self._values, self._keys, self._raw):
            for k in [k for k in table if k[:n] == path]:
                del table[k]


def _scalar(node: yaml.ScalarNode) -> Any:
    """The value of a scalar under YAML 1.2 core-schema rules."""
    text = node.value
    if node.style:  # quoted or block scalar: always text
        return text
    if node.tag not in ("tag:yaml.org,2002:null", "tag:yaml.org,2002:bool",
                        "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
                        "tag:yaml.org,2002:str", "tag:yaml.org,2002:timestamp"):
        return text  # explicit tags are not part of a profile: keep the text
    if _NULL.fullmatch(text):
        return None
    if text in _BOOL:
        return _BOOL[text]
    if _INT.fullmatch(text):
        return int(text, 0) if text[:2] in ("0o", "0x") else int(text)
    if _FLOAT.fullmatch(text) and any(ch.isdigit() for ch in text):
        return float(text)
    if text.lower() in _SPECIAL_FLOAT:
        return _SPECIAL_FLOAT[text.lower()]
    return text


def _loc(file: str, mark: Any) -> Location:
    return Location(file, mark.line + 1, mark.column + 1)


# A profile is a few hundred values. Aliases (``*name``) make the composed tree a graph whose
# expansion can be exponential in the file size (a 342-byte "billion laughs" file expands
# to 387 million values), so the number of values produced and the nesting are capped, and
# an alias that refers to itself is refused instead of recursing forever.
MAX_VALUES = 10_000
MAX_DEPTH = 64


class _Budget:
    """How many values the conversion has produced, and which nodes are being expanded."""

    def __init__(self) -> None:
        self.values = 0
        self.active: set[int] = set()


def _too_big(file: str, node: yaml.Node, path: FieldPath, pos: Positions,
             what: str) -> ProfileError:
    # An aliased node's own mark is where its anchor was defined; the top-level key whose
    # value is being expanded says better where the problem is.
    loc = pos.of(path[:1]) if path else _loc(file, node.start_mark)
    return ProfileError([Problem(loc, ".".join(str(p) for p in path[:1]), what,
                                 "write the values out; a profile needs no alias tricks")])


def _plain(node: yaml.Node, path: FieldPath, pos: Positions, file: str,
           problems: list[Problem], budget: _Budget | None = None) -> Any:
    """Convert composed nodes to dict / tuple / scalars, recording positions."""
    budget = budget or _Budget()
    budget.values += 1
    if budget.values > MAX_VALUES:
        raise _too_big(file, node, path, pos, f"the document expands to more than "
                       f"{MAX_VALUES} values (aliases repeating aliases)")
    if len(path) > MAX_DEPTH:
        raise _too_big(file, node, path, pos, f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        if id(node) in budget.active:
            raise _too_big(file, node, path, pos, "an alias refers to the collection that "
                           "contains it (an endless value)")
        budget.active.add(id(node))
        try:
            return _collection(node, path, pos, file, problems, budget)
        finally:
            budget.active.discard(id(node))
    assert isinstance(node, yaml.ScalarNode)
    return _scalar(node)


def _collection(node: yaml.MappingNode | yaml.SequenceNode, path: FieldPath, pos: Positions,
                file: str, problems: list[Problem], budget: _Budget) -> Any:
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            # keys are text in every file dockergen reads: as written, so `0.40:` stays
            # "0.40" (str(0.4) lost the zero) and `~:`/`true:` are not "None"/"True"
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else "?"
            if key in first_line:
                problems.append(Problem(_loc(file, key_node.start_mark), key,
                                        f"duplicate key (first defined on line "
                                        f"{first_line[key]})", "keep only one of them"))
                continue
            first_line[key] = key_node.start_mark.line + 1
            child = path + (key,)
            raw = value_node.value if isinstance(value_node, yaml.ScalarNode) else None
            pos.set(child, _loc(file, key_node.start_mark), _loc(file, value_node.start_mark),
                    raw)
            out[key] = _plain(value_node, child, pos, file, problems, budget)
        return out
    items = []
    for i, item in enumerate(node.value):
        raw = item.value if isinstance(item, yaml.ScalarNode) else None
        pos.set(path + (i,), None, _loc(file, item.start_mark), raw)
        items.append(_plain(item, path + (i,), pos, file, problems, budget))
    return tuple(items)


def _char(character: object) -> str:
    code = character if isinstance(character, int) else ord(str(character)[:1] or "?")
    return f"U+{code:04X}"


def parse_yaml(text: str, display_name: str) -> tuple[Any, Positions]:
    """Parse YAML text into plain data plus the position of every value.

    Raises :class:`ProfileError` for syntax errors and duplicate keys, naming the line.
    """
    try:
        node = yaml.compose(text, Loader=_Loader)  # noqa: S506 - compose builds no objects
    except yaml.reader.ReaderError as exc:
        before = text[:exc.position]
        loc = Location(display_name, before.count("\n") + 1,
                       len(before) - (before.rfind("\n") + 1) + 1)
        raise ProfileError([Problem(loc, "", f"character {_char(exc.character)} is not "
                                    "allowed in YAML", "remove it or write it as an escape "
                                    "in a double-quoted string")]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = _loc(display_name, mark) if mark else Location(display_name)
        what = (exc.problem or exc.context or "invalid YAML").strip()
        fix = "fix the YAML syntax at this position"
        lines = text.splitlines()
        if mark and mark.line < len(lines) and lines[mark.line][mark.column:][:1] == "\t":
            what, fix = "a tab character", "indent with spaces; YAML does not allow tabs"
        raise ProfileError([Problem(loc, "", f"YAML syntax error: {what}", fix)]) from None
    except yaml.YAMLError as exc:
        raise ProfileError([Problem(Location(display_name), "", f"invalid YAML: {exc}",
                                    "fix the YAML syntax")]) from None
    pos = Positions(Location(display_name, 1, 1))
    if node is None:
        return None, pos
    problems: list[Problem] = []
    data = _plain(node, (), pos, display_name, problems)
    if problems:
        raise ProfileError(problems)
    return data, pos


def read_yaml_file(path: Path, display_name: str) -> tuple[Any, Positions]:
    """Read and parse a YAML file; unreadable files become a :class:`ProfileError`."""
    try:
        text = inputs.read_text(path, "profile")
    except FileNotFoundError:
        raise ProfileError([Problem(Location(display_name), "", "file not found",
                                    "check the path")]) from None
    except inputs.InputError as exc:
        raise ProfileError([Problem(Location(display_name), "", exc.problem, exc.fix)]
                           ) from None
    return parse_yaml(text, display_name)

"""Read YAML into plain data while remembering where every value came from.

ruamel.yaml (YAML 1.2, round-trip mode) is used rather than PyYAML because it rejects
duplicate keys, does not turn ``no`` into ``False``, and knows the line and column of
every key and value; those positions let each problem name ``FILE:LINE:COL``.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.reader import ReaderError

from dockergen.errors import Location, Problem, ProfileError

FieldPath = tuple[str | int, ...]


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

    def key_of(self, path: FieldPath) -> Location:
        """Location of the key itself (for unknown-key problems), else :meth:`of`."""
        return self._keys.get(tuple(path)) or self.of(path)

    def raw(self, path: FieldPath) -> str | None:
        """The value's text as written in the file (to quote ``3.10`` back at the user)."""
        return self._raw.get(tuple(path))

    def merge_from(self, other: Positions, prefix: FieldPath = ()) -> None:
        """Take every position of ``other`` (a parent profile or an override)."""
        for k, v in other._values.items():
            self._values[prefix + k] = v
        for k, v in other._keys.items():
            self._keys[prefix + k] = v
        for k, r in other._raw.items():
            self._raw[prefix + k] = r

    def drop(self, path: FieldPath) -> None:
        """Forget ``path`` and everything below it (a child replaced that subtree)."""
        n = len(path)
        for table in (self._values, self._keys, self._raw):
            for k in [k for k in table if k[:n] == path]:
                del table[k]


def _loc(file: str, line0: int, col0: int) -> Location:
    return Location(file, line0 + 1, col0 + 1)


def _raw_token(lines: list[str], line0: int, col0: int) -> str:
    """The plain scalar starting at a position, up to a comment, comma or bracket."""
    if line0 >= len(lines):
        return ""
    text = lines[line0][col0:]
    out = []
    for ch in text:
        if ch in "#,]}\n":
            break
        out.append(ch)
    return "".join(out).strip()


def _plain(node: Any, path: FieldPath, pos: Positions, file: str, lines: list[str]) -> Any:
    """Convert ruamel nodes to dict / tuple / scalars, recording positions."""
    if isinstance(node, CommentedMap):
        out: dict[Any, Any] = {}
        for key in node:
            child_path = path + (str(key),)
            kl, kc = node.lc.key(key)
            vl, vc = node.lc.value(key)
            value = node[key]
            raw = _raw_token(lines, vl, vc) if not isinstance(value, (Mapping, list)) else None
            pos.set(child_path, _loc(file, kl, kc), _loc(file, vl, vc), raw)
            out[key if isinstance(key, str) else str(key)] = _plain(value, child_path, pos, file,
                                                                    lines)
        return out
    if isinstance(node, CommentedSeq):
        items = []
        for i, value in enumerate(node):
            il, ic = node.lc.item(i)
            raw = _raw_token(lines, il, ic) if not isinstance(value, (Mapping, list)) else None
            pos.set(path + (i,), None, _loc(file, il, ic), raw)
            items.append(_plain(value, path + (i,), pos, file, lines))
        return tuple(items)
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    if isinstance(node, (datetime.date, datetime.datetime)):
        return node  # rejected later by the model with a "quote it" hint
    return node


def _char(character: object) -> str:
    code = character if isinstance(character, int) else ord(str(character)[:1] or "?")
    return f"U+{code:04X}"


def _first_definition(text: str, key: str, line0: int, col0: int) -> int | None:
    """1-based line of the earlier ``key:`` at the same indentation as the duplicate."""
    lines = text.splitlines()
    for i in range(line0 - 1, -1, -1):
        line = lines[i]
        indent = len(line) - len(line.lstrip(" "))
        if line.strip() and indent < col0:
            return None  # left the enclosing mapping
        if indent == col0 and line[col0:].startswith(f"{key}:"):
            return i + 1
    return None


def parse_yaml(text: str, display_name: str) -> tuple[Any, Positions]:
    """Parse YAML text into plain data plus the position of every value.

    Raises :class:`ProfileError` for syntax errors and duplicate keys, naming the line.
    """
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    try:
        node = yaml.load(text)
    except DuplicateKeyError as exc:
        mark = exc.problem_mark
        key = str(exc.problem).split('"')[1] if '"' in str(exc.problem) else "key"
        first = _first_definition(text, key, mark.line, mark.column) if mark else None
        where = f" (first defined on line {first})" if first else ""
        loc = _loc(display_name, mark.line, mark.column) if mark else Location(display_name)
        raise ProfileError([Problem(loc, key, f"duplicate key{where}",
                                    "keep only one of them")]) from None
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = _loc(display_name, mark.line, mark.column) if mark else Location(display_name)
        what = (exc.problem or exc.context or "invalid YAML").strip()
        raise ProfileError([Problem(loc, "", f"YAML syntax error: {what}",
                                    "fix the YAML syntax at this position")]) from None
    except ReaderError as exc:
        before = text[:exc.position]
        loc = Location(display_name, before.count("\n") + 1,
                       len(before) - (before.rfind("\n") + 1) + 1)
        raise ProfileError([Problem(loc, "", f"character {_char(exc.character)} is not allowed "
                                    "in YAML", "remove it or write it as an escape in a "
                                    "double-quoted string")]) from None
    except YAMLError as exc:  # any other reader/scanner failure without a position
        raise ProfileError([Problem(Location(display_name), "", f"invalid YAML: {exc}",
                                    "fix the YAML syntax")]) from None
    pos = Positions(Location(display_name, 1, 1))
    lines = text.splitlines()
    return _plain(node, (), pos, display_name, lines), pos


def read_yaml_file(path: Path, display_name: str) -> tuple[Any, Positions]:
    """Read and parse a YAML file; unreadable files become a :class:`ProfileError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileError([Problem(Location(display_name), "", "file not found",
                                    "check the path")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ProfileError([Problem(Location(display_name), "", f"cannot read file: {reason}",
                                    "make it a readable UTF-8 file")]) from None
    return parse_yaml(text, display_name)

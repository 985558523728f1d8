"""Read a profile file and the ``extends`` chain above it into one document, keeping
where each value came from (parents' mappings merged, the child's values winning).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dockergen.errors import Location, Problem, ProfileError
from dockergen.input.locate import display_path, find_parent, profile_file
from dockergen.input.yamlsource import FieldPath, Positions, read_yaml_file

MAX_EXTENDS_DEPTH = 8


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
    parent = find_parent(parent_name, path, loc)
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


@dataclass(frozen=True)
class RawProfile:
    """A profile file merged with its ``extends`` chain, not yet validated."""

    path: Path
    data: dict[str, Any]
    positions: Positions
    chain: tuple[str, ...]  # the files it was built from, child first

    @property
    def display(self) -> str:
        """The file's name as the user sees it (the child of the chain)."""
        return self.chain[0]

    def at(self, *path: str | int) -> Location:
        """Where the value of a field was written."""
        return self.positions.of(path)

    def key_at(self, *path: str | int) -> Location:
        """Where the key of a field was written (for an unknown key)."""
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

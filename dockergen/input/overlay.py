"""A profile's user knowledge files: rows added to the shipped fact tables, each checked
against the shape of the shipped rows of its table.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dockergen.errors import Problem, ProfileError, redact
from dockergen.input.locate import display_path
from dockergen.input.yamlsource import Positions, read_yaml_file
from dockergen.knowledge import facts as knowledge
from dockergen.knowledge import row_shapes as knowledge_shapes


def read_user_knowledge(files: tuple[str, ...], folder: Path, pos: Positions
                        ) -> dict[str, dict[str, dict[str, Any]]]:
    """Read a profile's user knowledge files: additions to the shipped fact tables.

    A file maps a component's facts name (``serving/vllm``, ``flash_attn``, ``torch``, ...)
    to tables of it to new rows keyed like the shipped ones. Only the tables of
    :func:`dockergen.knowledge.facts.addable` take rows (releases, quantization methods); each
    row needs a non-empty one-line ``src`` and must have the shape of the shipped rows of
    its table (:func:`dockergen.knowledge.row_shapes.row_problems`: required and unknown fields,
    versions, ranges, pins, flags from the shipped vocabulary), so nothing a user writes
    reaches the Dockerfile unchecked. Shipped facts are never replaced: a key dockergen
    already knows is an error, except that a quantization method's per-release ``min_cc``
    map takes releases none of its spans covers
    (:func:`dockergen.knowledge.row_shapes.extension_problems`). Each row's ``src`` is marked as the
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
        found = (knowledge_shapes.extension_problems if shipped else knowledge_shapes.row_problems)(
            component, table, key, row)
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

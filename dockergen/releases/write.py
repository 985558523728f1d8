"""What ``dockergen upgrade`` shows (text, JSON) and writes (``--write``).

``--write`` writes two files next to the profile, never the profile itself: the knowledge
file with the derived rows, and a profile that extends the user's with exactly the changed
fields and that knowledge file (so ``git diff`` shows the change and the user decides).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from dockergen.errors import ProfileError
from dockergen.files import atomic
from dockergen.input.loader import load_profile
from dockergen.knowledge import facts as knowledge
from dockergen.parts.engines import engine_for
from dockergen.releases.derive import UpgradeError

if TYPE_CHECKING:
    from dockergen.releases.upgrade import Plan

_HEADER = "# Written by dockergen upgrade"


def to_text(result: Plan) -> str:
    """The plan for people."""
    lines = [f"{result.profile}: {result.engine} {result.current} (index {result.index})"]
    if not result.moves:
        lines.append("  no newer release")
    for m in result.moves:
        state = "ok" if m.ok else "refused"
        lines.append(f"  {m.version:<10} {'known' if m.known else 'derived':<8} {state}")
        lines += [f"      {f}: {a} -> {b}" for f, a, b in m.changes]
        lines += [f"      note: {n}" for n in m.notes]
        lines += [f"      because {r}" for r in m.reasons]
    chosen = result.proposal
    lines.append(f"proposal: {result.engine} {chosen.version}" if chosen else
                 "proposal: none (no newer release passes every rule on these GPUs)")
    return "\n".join(lines) + "\n"


def to_json(result: Plan) -> str:
    """The plan for machines."""
    data = dataclasses.asdict(result)
    data["proposal"] = result.proposal.version if result.proposal else None
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def write(result: Plan, path: Path) -> list[Path]:
    """Write the knowledge file and the extending profile of the proposal next to ``path``;
    the user's profile is never rewritten. Returns what was written."""
    chosen = result.proposal
    if chosen is None:
        raise UpgradeError("nothing to write: no newer release passes every rule")
    stem = f"{path.stem}-{result.engine}-{chosen.version}"
    written = []
    lists = list(result.knowledge)
    if chosen.version in result.derived:
        row = result.derived[chosen.version]
        engine = engine_for(result.engine)
        tables: dict[str, Any] = {"releases": {chosen.version: row}}
        known = knowledge.facts()
        kernel_version = (engine.kernel_version(known, chosen.version, row)
                          if "kernel_libraries" in engine.facts(known) else None)
        if kernel_version in result.derived_kernels:
            tables["kernels"] = {kernel_version: result.derived_kernels[kernel_version]}
        if chosen.version in result.derived_flags:
            tables["serve_flags"] = {chosen.version: result.derived_flags[chosen.version]}
        if chosen.version in result.derived_floors:
            tables["quantization"] = result.derived_floors[chosen.version]
        kfile = path.with_name(f"{stem}.knowledge.yaml")
        body = yaml.safe_dump({engine.facts_file: tables}, sort_keys=True, width=100)
        atomic.write_file(kfile, f"{_HEADER} (knowledge)\n{body}", ours=_ours)
        written.append(kfile)
        lists.append(kfile.name)
    doc: dict[str, Any] = {"extends": path.stem}
    for name, _, value in chosen.changes:
        node = doc
        *parents, last = name.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    if lists != list(result.knowledge):
        doc["knowledge"] = lists
    out = path.with_name(f"{stem}.yaml")
    atomic.write_file(out, f"{_HEADER} (profile: {path.name} moved to {result.engine} "
                      f"{chosen.version})\n" + yaml.safe_dump(doc, sort_keys=False, width=100),
                      ours=_ours)
    written.append(out)
    try:  # what was written resolves as the plan said (else nothing stays)
        load_profile(out)
    except ProfileError:
        for f in written:
            f.unlink()
        raise
    return written


def _ours(head: bytes) -> bool:
    return head.startswith(_HEADER.encode())

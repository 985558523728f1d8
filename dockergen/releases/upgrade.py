"""Move a profile to a newer release of its serving engine, with facts read from the index.

For each release newer than the profile's on the index (or the one ``--to`` names), newest
first: a release dockergen does not know gets its facts derived from the wheel's own
``METADATA`` (the PEP 658 file the index serves beside the wheel, else the wheel itself when
it is small): the torch pin, ``Requires-Python``, the CUDA major (from the CUDA library
dependencies, else from the PyPI wheel of the torch it pins), and SGLang's kernel and
FlashInfer pins. Those rows join the profile's knowledge for this check only, marked as
observed from that index on that date. Then the profile is moved there and every rule runs;
where a rule fails, the first of its proven fixes that keeps the profile's GPUs (no other
hardware, no other engine) is taken, up to a few rounds. The newest release that passes is
the proposal, with what changes: the fields, torch, CUDA, Python, and what was read from
the release's Python source: vLLM's server options and quantization floors
(:mod:`dockergen.parts.engines.vllm.wheel`), so the flag and floor rules judge the move,
and whether the metric families the dashboard and alerts use are still defined
(:mod:`dockergen.outputs.observe.families`). What is not read is said; the image's smoke test runs
the release's own parser.

The profile is loaded by the loader (:func:`dockergen.releases.outdated.one_image`) and judged by
the one pipeline (:func:`dockergen.pipeline.resolution_of`), as every command's is; the
facts are derived in :mod:`dockergen.releases.derive`; the plan is shown and written
(``--write``: a knowledge file and a profile extending the user's, never the profile
itself) by :mod:`dockergen.releases.write`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import Version

from dockergen.errors import Problem, ProfileError, Severity, redact
from dockergen.input.loader import LoadedProfile, with_overrides
from dockergen.knowledge import facts as knowledge
from dockergen.knowledge import row_shapes as knowledge_shapes
from dockergen.net import index as outdated_index
from dockergen.parts import cuda
from dockergen.parts.engines import engine_for
from dockergen.pipeline import resolution_of
from dockergen.releases import outdated
from dockergen.releases.derive import UpgradeError, derive_kernels, derive_row, derive_source
from dockergen.resolve.model import MAIN_INDEX

# rounds of "take the first proven fix of each failing rule" before a move is refused
ROUNDS = 4
# fields a fix may change on the way to a release: never the GPUs or the engine itself,
# nor the quantization (fp8 -> fp16 doubles the weights' memory: a release that cannot run
# the profile's method on its GPUs is refused, not proposed with another method), nor drop
# a FlashAttention-2 build the profile asks for
_KEEP = ("gpu.", "engine.", "quantization.", "flash_attn.build")


@dataclass(frozen=True)
class Move:
    """The profile moved to one release: accepted with its changes, or refused with why."""

    version: str
    known: bool
    ok: bool
    changes: tuple[tuple[str, str, str], ...] = ()  # (field, from, to)
    reasons: tuple[str, ...] = ()  # the errors left, when refused
    notes: tuple[str, ...] = ()  # what else changes in the image and around it


@dataclass(frozen=True)
class Plan:
    """What ``dockergen upgrade`` found for one profile."""

    profile: str
    engine: str
    current: str
    index: str
    moves: tuple[Move, ...]  # newest first
    derived: dict[str, dict[str, Any]] = field(default_factory=dict)  # version -> row
    # kernel-package version -> its `kernels` row, for releases whose kernels were read here
    derived_kernels: dict[str, dict[str, Any]] = field(default_factory=dict)
    # version -> its `serve_flags` row, for releases whose server options were read here
    derived_flags: dict[str, dict[str, Any]] = field(default_factory=dict)
    # version -> method -> the `quantization` row adding that release's floor
    derived_floors: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    knowledge: tuple[str, ...] = ()  # the profile's own knowledge files

    @property
    def proposal(self) -> Move | None:
        """The newest release every rule accepts, if any."""
        return next((m for m in self.moves if m.ok), None)


# --- moves ---------------------------------------------------------------------------------

def _value(loaded: LoadedProfile, dotted: str) -> str:
    node: Any = loaded.profile
    for part in dotted.split("."):
        node = getattr(node, part, None)
    if isinstance(node, (list, tuple)):
        return "[" + ", ".join(str(v) for v in node) + "]"
    return "" if node is None else str(node)


def _move(loaded: LoadedProfile, version: str, known: bool, driver: str | None,
          notes: tuple[str, ...] = (), index: dict[str, str] | None = None) -> Move:
    """The profile moved to ``version``, with the fixes the rules ask for on the way;
    ``notes``: what deriving the release's facts could not read; ``index``: the fields that
    make ``--index`` the profile's index (the release was read there, and a written
    profile must install from where it was judged)."""
    fields: dict[str, str] = {"engine.version": version, **(index or {})}
    reasons: list[str] = []
    for _ in range(ROUNDS):
        try:
            edited = with_overrides(loaded, tuple(f"{k}={v}" for k, v in fields.items()))
        except ProfileError as exc:
            return Move(version, known, False, reasons=tuple(str(p) for p in exc.problems),
                        notes=notes)
        errors, torch_pin = _judged(edited)
        known_facts = knowledge.facts(edited.user_facts)
        reasons = [f"{p.field}: {p.message}" for p in errors]
        taken = False
        if driver and not _driver_ok((("cuda.version", edited.profile.cuda.version),), driver,
                                     known_facts):
            need = (cuda.toolkit(known_facts, edited.profile.cuda.version) or {})["min_driver"]
            reasons.append(f"cuda.version: CUDA {edited.profile.cuda.version} needs driver >= "
                           f"{need}, but --driver is {driver}")
            major = Version(edited.profile.cuda.version).major
            fits = [v for v in cuda.versions(known_facts) if Version(v).major == major
                    and _driver_ok((("cuda.version", v),), driver, known_facts)]
            if fits:
                fields["cuda.version"] = fits[-1]
                taken = True
        elif not errors:
            return _accepted(loaded, edited, torch_pin, version, known, fields, notes)
        for problem in errors:
            edit = next((e for e in problem.edits if not e.drastic
                         and not any(k.startswith(_KEEP) for k, _ in e.sets)
                         and _driver_ok(e.sets, driver, known_facts)), None)
            if edit is not None:
                fields.update(edit.sets)
                taken = True
        if not taken:
            break
    return Move(version, known, False, reasons=tuple(reasons), notes=notes)


def _judged(edited: LoadedProfile) -> tuple[list[Problem], str | None]:
    """The errors of the moved profile as the pipeline resolves it (without the base-image
    and Python locks, which are the old release's) and, when there are none, its torch."""
    try:
        res = resolution_of(edited, python_lock=False, pin=False)
    except ProfileError as exc:
        return [p for p in exc.problems if p.severity is Severity.ERROR], None
    return [], res.resolved.engine.torch or None


def _driver_ok(sets: tuple[tuple[str, str], ...], driver: str | None,
               known: knowledge.Facts) -> bool:
    """Whether every CUDA version ``sets`` names runs on ``driver`` (its minimum driver in
    the knowledge ``known``)."""
    for name, value in sets:
        if name == "cuda.version" and driver:
            need = (cuda.toolkit(known, value) or {}).get("min_driver", "0")
            if Version(str(need)) > Version(driver):
                return False
    return True


def _accepted(loaded: LoadedProfile, edited: LoadedProfile, torch_pin: str | None,
              version: str, known: bool, fields: dict[str, str],
              unread: tuple[str, ...]) -> Move:
    changes = tuple((k, _value(loaded, k), v) for k, v in sorted(fields.items())
                    if _value(loaded, k) != v)
    before = resolution_of(loaded, python_lock=False, pin=False).resolved
    notes = []
    if before.engine.torch != torch_pin:
        notes.append(f"torch {before.engine.torch} -> {torch_pin} (pinned by the release)")
    if loaded.profile.cuda.version != edited.profile.cuda.version:
        notes.append(f"CUDA {loaded.profile.cuda.version} -> {edited.profile.cuda.version}: "
                     "the base images and every CUDA wheel change")
    if not known:
        notes += [*unread, *_flag_changes(loaded, edited, version),
                  *_floor_notes(loaded, edited, version)]
        notes.append("not in dockergen's knowledge: the image's smoke test runs the "
                     "release's own argument parser on the exact command")
    return Move(version, known, True, changes=changes, notes=tuple(notes))


def _flag_changes(loaded: LoadedProfile, edited: LoadedProfile, version: str) -> list[str]:
    """What the release's server options (read from its wheel) change against the
    profile's release: the flag rule has checked the profile's own against them."""
    engine = engine_for(loaded.profile.engine.name)
    new = engine.flag_list(knowledge.facts(edited.user_facts), version)
    if new is None:
        return []
    old = engine.flag_list(knowledge.facts(loaded.user_facts), loaded.profile.engine.version)
    if old is None:
        return [f"serve flags read from its wheel ({len(new)}): the profile's are checked "
                "against them"]
    gone, added = sorted(old - new), sorted(new - old)
    return [f"serve flags read from its wheel ({len(new)}; the profile's are checked against "
            f"them): {len(gone)} gone since {loaded.profile.engine.version}"
            + (f" ({_few(gone)})" if gone else "") + f", {len(added)} new"
            + (f" ({_few(added)})" if added else "")]


def _floor_notes(loaded: LoadedProfile, edited: LoadedProfile, version: str) -> list[str]:
    """The quantization floors read from the release's wheel, beside the profile's
    release's where one changed: the floor rule has judged the profile's GPUs by them."""
    engine = engine_for(loaded.profile.engine.name)
    rows = edited.user_facts.get(engine.facts_file, {}).get("quantization", {})
    new = {m: str(row["min_cc"][version]) for m, row in rows.items()
           if isinstance(row.get("min_cc"), dict) and version in row["min_cc"]}
    if not new:
        return []
    known = knowledge.facts(loaded.user_facts)
    old = {m: engine.floor_of(known, m, loaded.profile.engine.version) for m in new}
    return ["quantization floors read from its wheel: " + ", ".join(
        f"{m} {cc}" + (f" (was {old[m]})" if old[m] not in (None, cc) else "")
        for m, cc in sorted(new.items()))]


def _few(items: list[str], shown: int = 8) -> str:
    return ", ".join(items[:shown]) + (f", and {len(items) - shown} more"
                                        if len(items) > shown else "")


def plan(path: Path, overrides: tuple[str, ...] = (), index: str | None = None,
         to: str | None = None, driver: str | None = None) -> Plan:
    """The moves of the profile at ``path`` to each newer release (or ``to``)."""
    loaded = outdated.one_image(path, overrides, "upgrade")
    resolution_of(loaded, python_lock=False)  # the profile's own errors first
    # the releases it knows are validate's: the built-in ones and the user's files'
    facts = knowledge.facts(loaded.user_facts)
    p = loaded.profile
    engine = engine_for(p.engine.name)
    known_versions = set(engine.versions(facts))
    package = str(engine.facts(facts)["package"])
    where = index or p.build.pip_index_url or MAIN_INDEX
    listed = [v for v in outdated_index.releases(where, package)
              if not (v.is_prerelease or v.is_devrelease)]
    if to is not None:
        if Version(to) not in {*listed, *(Version(v) for v in known_versions)}:
            raise UpgradeError(f"{package} {to} is neither on {redact(where)} nor in "
                               "dockergen's knowledge")
        wanted = [Version(to)]
    else:
        wanted = sorted((v for v in listed if v > Version(p.engine.version)), reverse=True)
    facts_name = engine.facts_file
    derived: dict[str, dict[str, dict[str, Any]]] = {"releases": {}, "kernels": {},
                                                     "serve_flags": {}, "floors": {}}
    moves = []
    for v in wanted:
        known = str(v) in known_versions
        unread: tuple[str, ...] = ()
        if not known:
            refused, unread = _derive(where, p.engine.name, package, str(v), derived)
            if refused:
                moves.append(Move(str(v), False, False, reasons=refused))
                continue
        # only the tables something was derived into: an engine keeps only its own
        # tables (TensorRT-LLM has no kernels table), and an empty one would add it
        overlay = _with_rows(loaded.user_facts, facts_name,
                             {t: r for t, r in derived.items() if t != "floors" and r})
        for release in derived["floors"]:  # each adds its floors to the methods' maps
            overlay = _with_rows(overlay, facts_name,
                                 {"quantization": derived["floors"][release]})
        moves.append(_move(dataclasses.replace(loaded, user_facts=overlay), str(v), known,
                           driver, unread, outdated.index_fields(loaded, index)))
    return Plan(str(path), p.engine.name, p.engine.version, redact(where), tuple(moves),
                derived["releases"], derived["kernels"], derived["serve_flags"],
                derived["floors"], tuple(p.knowledge))


def _derive(index: str, engine: str, package: str, version: str,
            derived: dict[str, dict[str, dict[str, Any]]]
            ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Derive the release row, kernel code and server options of ``version`` into
    ``derived``: (the reasons the move is refused when the row or the code cannot be read,
    nothing kept then; notes on what else could not be read)."""
    facts_name = engine_for(engine).facts_file
    try:
        row = derive_row(index, engine, package, version)
        problems = knowledge_shapes.row_problems(facts_name, "releases", version, row)
        code = None if problems else derive_kernels(index, engine, version, row)
    except (UpgradeError, outdated_index.IndexReadError) as exc:
        return (str(exc),), ()
    if code is not None:
        problems += knowledge_shapes.row_problems(facts_name, "kernels", code[0], code[1])
    if problems:
        return tuple(f"derived row: {m}" for _, m, _ in problems), ()
    source, unread = derive_source(index, engine, package, version)
    shipped = knowledge.facts().of(facts_name)
    for table, rows in list(source.items()):  # a row a user file could not hold: not kept
        for key, value in rows.items():
            check_row = (knowledge_shapes.extension_problems if key in shipped[table]
                         else knowledge_shapes.row_problems)
            wrong = check_row(facts_name, table, key, value)
            if wrong:
                unread += (f"{table} read but not kept: {wrong[0][1]}",)
                del source[table]
                break
    derived["releases"][version] = row
    if code is not None:
        derived["kernels"][code[0]] = code[1]
    derived["serve_flags"].update(source.get("serve_flags", {}))
    if source.get("quantization"):
        derived["floors"][version] = source["quantization"]
    return (), unread


def _with_rows(user: dict[str, dict[str, dict[str, Any]]], facts_name: str,
               tables: dict[str, dict[str, dict[str, Any]]]
               ) -> dict[str, dict[str, dict[str, Any]]]:
    merged = {k: {t: dict(r) for t, r in v.items()} for k, v in user.items()}
    for name, rows in tables.items():
        table = merged.setdefault(facts_name, {}).setdefault(name, {})
        for key, row in rows.items():
            had = table.get(key)  # floors of other releases (the user's, derived) stay
            if had is not None and isinstance(had.get("min_cc"), dict):
                row = {**row, "min_cc": {**had["min_cc"], **row["min_cc"]}}
            table[key] = {**row, "user": "dockergen upgrade"}
    return merged

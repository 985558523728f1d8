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
(:mod:`dockergen.components.serving.vllm.wheel`), so the flag and floor rules judge the move,
and whether the metric families the dashboard and alerts use are still defined
(:mod:`dockergen.observe.families`). What is not read is said; the image's smoke test runs
the release's own parser.

``--write`` writes two files next to the profile, never the profile itself: the knowledge
file with the derived rows, and a profile that extends the user's with exactly the changed
fields and that knowledge file (so ``git diff`` shows the change and the user decides).
May import: :mod:`dockergen.atomic`, :mod:`dockergen.components`, :mod:`dockergen.errors`,
:mod:`dockergen.kernels`, :mod:`dockergen.knowledge`, :mod:`dockergen.loader`,
:mod:`dockergen.model`, :mod:`dockergen.observe.families`, :mod:`dockergen.observe.metrics`,
:mod:`dockergen.outdated`, :mod:`dockergen.resolve`.
"""

from __future__ import annotations

import dataclasses
import datetime
import email.parser
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from dockergen import atomic, kernels, knowledge, knowledge_shapes, outdated
from dockergen.components import cuda
from dockergen.components.serving import engine_for
from dockergen.errors import (
    DockergenError,
    ExitCode,
    ProfileError,
    Severity,
    redact,
    shown_value,
)
from dockergen.loader import LoadedProfile, load_profile, with_overrides
from dockergen.model import MAIN_INDEX, Inputs
from dockergen.observe import families, metrics
from dockergen.resolve import check, resolve

# the torch family comes from PyTorch's CUDA index, not the main one: not looked up there
_INDEX_PINNED = {"torch", "torchaudio", "torchvision"}
# rounds of "take the first proven fix of each failing rule" before a move is refused
ROUNDS = 4
_HEADER = "# Written by dockergen upgrade"
# fields a fix may change on the way to a release: never the GPUs or the engine itself,
# nor the quantization (fp8 -> fp16 doubles the weights' memory: a release that cannot run
# the profile's method on its GPUs is refused, not proposed with another method), nor drop
# a FlashAttention-2 build the profile asks for
_KEEP = ("gpu.", "engine.", "quantization.", "flash_attn.build")


class UpgradeError(DockergenError, code=ExitCode.INVALID_PROFILE):
    """No newer release could be read or derived (the reason says which)."""


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


# --- facts from the index ------------------------------------------------------------------

def _metadata(url: str, filename: str) -> str:
    meta = outdated.read_file(url + ".metadata")
    if meta is not None:
        return meta.decode("utf-8", "replace")
    try:
        return outdated.wheel_member(url, r"[^/]+\.dist-info/METADATA", filename)
    except outdated.IndexReadError as exc:
        raise UpgradeError(str(exc)) from None


def _requirements(text: str) -> list[Requirement]:
    out = []
    for line in email.parser.HeaderParser().parsestr(text).get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        # packaging's parser recurses into nested markers, and a version past int's digit
        # limit is a plain ValueError: a line no installer reads, skipped as invalid ones are
        except (InvalidRequirement, ValueError, RecursionError):
            continue
        if req.marker is None or "extra" not in str(req.marker):  # what a plain install gets
            out.append(req)
    return out


def _pin(reqs: list[Requirement], name: str) -> tuple[str, str] | None:
    """(extras as ``[a,b]`` or "", the exact version) of ``name``'s ``==`` pin."""
    for req in reqs:
        if req.name.lower().replace("_", "-") == name:
            exact = [s.version for s in req.specifier if s.operator == "=="]
            if exact:
                return ("[" + ",".join(sorted(req.extras)) + "]" if req.extras else ""), exact[0]
    return None


def _missing_pins(index: str, reqs: list[Requirement]) -> list[str]:
    """The exact (``==``) pins of ``reqs`` whose version the index does not list (vLLM
    0.34.0 pins flashinfer-python==0.7.3, which PyPI never carried: no install resolves)."""
    missing = []
    for req in reqs:
        exact = [s.version for s in req.specifier if s.operator == "=="]
        if not exact or "*" in exact[0] or req.name.lower() in _INDEX_PINNED:
            continue
        try:
            listed = {str(v) for v in outdated.releases(index, req.name)}
        except outdated.IndexReadError as exc:
            if exc.status == 404:
                listed = set()
            else:
                raise
        if str(_version(exact[0], f"the pin of {req.name}")) not in listed:
            missing.append(f"{req.name}=={exact[0]}")
    return missing


def python_from_wheels(requires_python: str, wheels: list[str]) -> str:
    """``requires_python`` with the upper bound the release's wheels set: when every wheel is
    built for one CPython (``cp311-cp311``: no ``abi3``, no ``py3-none``), no install exists
    past the newest of them, whatever Requires-Python says (SGLang 0.5.23: ``>=3.11``, wheels
    cp311 to cp313, so ``<3.14``)."""
    from packaging.specifiers import SpecifierSet
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    minors = set()
    for wheel in wheels:
        try:
            tags = parse_wheel_filename(wheel)[3]
        except InvalidWheelFilename:
            return requires_python
        for tag in tags:
            match = re.fullmatch(r"cp3(\d{1,2})", tag.interpreter)
            if not match or tag.abi != tag.interpreter:
                return requires_python  # abi3 or pure Python: newer CPythons install it
            minors.add(int(match.group(1)))
    if not minors:
        return requires_python
    bound = f"<3.{max(minors) + 1}"
    spec = SpecifierSet(requires_python)
    if any(s.operator in ("<", "<=") and Version(s.version) <= Version(bound[1:])
           for s in spec):
        return requires_python  # Requires-Python already stops there or earlier
    lower = [str(s) for s in spec if s.operator not in ("<", "<=")]
    return ",".join(sorted(lower) + [bound])


def _engine_wheel(index: str, package: str, version: str) -> tuple[str, str]:
    """(file name, URL) of the release's wheel the image installs: Linux x86_64 first."""
    wheels = [(f.name, f.url) for f in outdated.files(index, package)
              if str(f.version) == version and f.name.endswith(".whl")]
    if not wheels:
        raise UpgradeError(f"{package} {version}: the index lists no wheel of it")
    return sorted(wheels, key=lambda w: ("x86_64" not in w[0], w[0]))[0]


def _observed(index: str, what: str) -> str:
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    return f"observed by dockergen upgrade from {redact(index)} on {today}: {what}"


def derive_row(index: str, engine: str, package: str, version: str) -> dict[str, Any]:
    """The knowledge row of an engine release, read from its wheel's METADATA on ``index``,
    its Python range narrowed to the CPythons its wheels are built for."""
    name, url = _engine_wheel(index, package, version)
    out, reqs, source = metadata_row(engine, name, _metadata(url, name))
    wheels = [f.name for f in outdated.files(index, package)
              if str(f.version) == version and f.name.endswith(".whl")]
    narrowed = python_from_wheels(out["python"], wheels)
    if narrowed != out["python"]:
        source += f"; Python {narrowed}: its wheels' tags"
        out["python"] = narrowed
    missing = _missing_pins(index, reqs)
    if missing:
        raise UpgradeError(f"{name} pins {', '.join(missing)}, which {redact(index)} does not "
                           "carry: the release cannot be installed from this index")
    out["src"] = _observed(index, source)
    return out


def _version(text: str, where: str) -> Version:
    """``text`` as a version, or :class:`UpgradeError` naming where it came from (a pin of
    ``==2.*`` or a number past int's digit limit is no version)."""
    try:
        return Version(text)
    except ValueError:  # InvalidVersion is one
        raise UpgradeError(f"{where}: {shown_value(text[:40])} is not a version") from None


def metadata_row(engine: str, name: str, text: str
                 ) -> tuple[dict[str, Any], list[Requirement], str]:
    """(the release's row without its source, the requirements a plain install gets, what
    it was read from) of a wheel's METADATA; :class:`UpgradeError` for METADATA that does
    not give the row (METADATA is bytes from the index: anything may be in it)."""
    head = email.parser.HeaderParser().parsestr(text)
    reqs = _requirements(text)
    torch_pin = _pin(reqs, "torch")
    python = head.get("Requires-Python")
    if torch_pin is None or not python:
        raise UpgradeError(f"{name}: METADATA pins no torch (==) or gives no Requires-Python")
    torch = _version(torch_pin[1], f"{name}: METADATA's torch pin")
    source = f"{name} METADATA"
    majors = {int(m.group(1)) for r in reqs
              if (m := re.fullmatch(r"nvidia-.*-cu(\d{1,3})", r.name.lower()))}
    majors |= {int(m.group(1)) for r in reqs for e in r.extras
               if (m := re.fullmatch(r"cu(\d{1,3})", e))}
    toolkit = _pin(reqs, "cuda-toolkit")
    if toolkit:
        majors.add(_version(toolkit[1], f"{name}: METADATA's cuda-toolkit pin").major)
    if len(majors) > 1:
        raise UpgradeError(f"{name}: METADATA names CUDA {sorted(majors)}: not one CUDA major")
    if not majors:  # the engine's wheel is built for the CUDA of the torch wheel it pins
        row = knowledge.facts().torch["releases"].get(f"{torch.major}.{torch.minor}") or {}
        if row.get("pypi_cuda_major") is None:
            raise UpgradeError(f"{name}: no CUDA library in METADATA, and torch {torch_pin[1]} "
                               "is not in the knowledge (its CUDA cannot be derived)")
        majors.add(int(row["pypi_cuda_major"]))
        source += f"; CUDA: PyPI's torch {torch_pin[1]} wheel (torch.yaml pypi_cuda_major)"
    out: dict[str, Any] = {"torch": torch_pin[1], "python": python, "cuda_major": majors.pop()}
    lockstep = engine_for(engine).lockstep_pins  # its release rows' own pins
    pins = {key: (package, _pin(reqs, package)) for key, package in lockstep.items()}
    if any(pin is None for _, pin in pins.values()):
        raise UpgradeError(f"{name}: METADATA pins no {' or '.join(lockstep.values())}")
    for key, (package, pin) in pins.items():
        assert pin is not None
        out[key] = f"{package}{pin[0]}=={pin[1]}"
    return out, reqs, source


def derive_source(index: str, engine: str, package: str, version: str
                  ) -> tuple[dict[str, dict[str, Any]], tuple[str, ...]]:
    """What the release's Python source says, read from its wheel on ``index``: its
    ``serve_flags`` row and the ``quantization`` rows that add it to the shipped per-release
    floors (``{table: {key: row}}``), and notes on what could not be read (an engine whose
    source dockergen does not read, a layout it does not understand, a wheel it cannot
    read). Never a refusal: the rules then warn as for any release without those facts,
    and the image's smoke test runs the real parser."""
    serving = engine_for(engine)
    wanted = [*serving.flag_members, *serving.floor_members, *metrics.read_modules(engine)[0]]
    try:
        name, url = _engine_wheel(index, package, version)
        members = outdated.wheel_members(url, wanted, name, outdated.SOURCE_LIMIT,
                                         "one source file") if wanted else {}
    except (UpgradeError, outdated.IndexReadError) as exc:
        return {}, (f"serve flags and quantization floors not read: {exc}",)
    tables: dict[str, dict[str, Any]] = {}
    notes = []
    try:
        flags = serving.read_serve_flags(members, name)
        tables["serve_flags"] = {version: {"flags": flags, "src": _observed(
            index, f"{name} python source (the options its server registers)")}}
    except ValueError as exc:
        notes.append(f"serve flags not read: {exc}")
    try:
        floors = serving.read_floors(members, name)
        shipped = serving.facts(knowledge.facts())["quantization"]
        src = _observed(index, f"{name} quantization get_min_capability")
        tables["quantization"] = {
            method: {"min_cc": {version: cc}, "src": src} for method, cc in floors.items()
            if isinstance(shipped.get(method, {}).get("min_cc"), dict)}
    except ValueError as exc:
        notes.append(f"quantization floors not read: {exc}")
    notes.append(_metric_note(engine, version, members))
    return tables, tuple(notes)


def _metric_note(engine: str, version: str, members: dict[str, bytes]) -> str:
    """Whether the metric families the dashboard and alerts use (those of the newest
    release the engine's ``metrics.yaml`` knows) are in the release's metrics module, same
    name and type: a renamed family gives panels and alerts that silently show nothing."""
    modules, prefix = metrics.read_modules(engine)
    module = next((m for m in modules if m in members), None)
    if module is None:
        return "metric names not read: no metrics module of its engine in the wheel"
    try:
        found = families.extract_source(prefix, members[module].decode("utf-8", "replace"))
    except ValueError as exc:
        return f"metric names not read: {module}: {exc}"
    known = [r for r in metrics.load_table()["engines"][engine]["releases"]
             if Version(r) < Version(version)]
    if not known:
        return "metric names read, but no earlier release's are known to compare with"
    newest = knowledge.newest(known)
    roles = metrics.engine_metrics(engine, newest).roles.values()
    changed = [f"{m.role} {m.name} ({m.type})" for m in roles
               if found.get(m.name, {}).get("type") != m.type]
    tail = ("" if version in metrics.load_table()["engines"][engine]["releases"] else
            f"; `observe` needs the release added to the {engine} metrics.yaml "
            "(scripts/extract_metrics.py)")
    if changed:
        return (f"metric names the dashboard and alerts use, gone or changed in its "
                f"{module} since {newest}: {', '.join(changed)}: their panels and alerts "
                "would show nothing" + tail)
    return (f"metric names the dashboard and alerts use: all {len(roles)} in its {module}, "
            f"as in {newest}" + tail)


def derive_kernels(index: str, engine: str, version: str, row: dict[str, Any]
                   ) -> tuple[str, dict[str, Any]] | None:
    """(kernel-package version, its ``kernels`` row) for a release dockergen lacks, read
    from the kernel package's wheel on ``index``: the fatbin code of the libraries every
    model loads (the engine's ``kernel_libraries``). None when the engine keeps no such
    facts, the facts already know that version, or the wheel holds none of the libraries
    (a pure-Python build: the kernel rule then warns that nothing was read)."""
    serving = engine_for(engine)
    known = knowledge.facts()
    facts = serving.facts(known)
    spec = facts.get("kernel_libraries")
    kernel_version = serving.kernel_version(known, version, row) if spec else None
    if spec is None or kernel_version is None or kernel_version in facts.get("kernels", {}):
        return None
    package = str(spec["package"])
    wheels = sorted((f.name, f.url) for f in outdated.files(index, package)
                    if str(f.version) == kernel_version and f.name.endswith("x86_64.whl"))
    if not wheels:
        raise UpgradeError(f"{package} {kernel_version}: the index lists no x86_64 wheel "
                           "of it, so the GPUs its kernels run on cannot be read")
    name, url = wheels[-1]
    wanted = sorted({m for members in spec["select"].values() for m in members})
    found = outdated.wheel_members(url, wanted, name)
    if not found:
        return None
    code = {}
    for member, data in sorted(found.items()):
        try:
            code[member] = list(kernels.code_of(data))
        except kernels.KernelCodeError as exc:
            raise UpgradeError(f"{name} {member}: cannot be read as a shared object ({exc}), "
                               "so the GPUs its kernels run on are unknown") from None
    return kernel_version, {"code": code, "src": _observed(index, f"{name} .nv_fatbin")}


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
        ctx = check(edited, Inputs(python_lock=False))
        errors = [p for p in ctx.problems if p.severity is Severity.ERROR]
        reasons = [f"{p.field}: {p.message}" for p in errors]
        taken = False
        if driver and not _driver_ok((("cuda.version", edited.profile.cuda.version),), driver,
                                     ctx.facts):
            need = (cuda.toolkit(ctx.facts, edited.profile.cuda.version) or {})["min_driver"]
            reasons.append(f"cuda.version: CUDA {edited.profile.cuda.version} needs driver >= "
                           f"{need}, but --driver is {driver}")
            major = Version(edited.profile.cuda.version).major
            fits = [v for v in cuda.versions(ctx.facts) if Version(v).major == major
                    and _driver_ok((("cuda.version", v),), driver, ctx.facts)]
            if fits:
                fields["cuda.version"] = fits[-1]
                taken = True
        elif not errors:
            return _accepted(loaded, edited, ctx.torch_pin, version, known, fields, notes)
        for problem in errors:
            edit = next((e for e in problem.edits if not e.drastic
                         and not any(k.startswith(_KEEP) for k, _ in e.sets)
                         and _driver_ok(e.sets, driver, ctx.facts)), None)
            if edit is not None:
                fields.update(edit.sets)
                taken = True
        if not taken:
            break
    return Move(version, known, False, reasons=tuple(reasons), notes=notes)


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
    before = resolve(loaded, python_lock=False, pin=False)
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
    resolve(loaded, python_lock=False)  # the profile's own errors first
    # the releases it knows are validate's: the built-in ones and the user's files'
    facts = knowledge.facts(loaded.user_facts)
    p = loaded.profile
    engine = engine_for(p.engine.name)
    known_versions = set(engine.versions(facts))
    package = str(engine.facts(facts)["package"])
    where = index or p.build.pip_index_url or MAIN_INDEX
    listed = [v for v in outdated.releases(where, package)
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
    except (UpgradeError, outdated.IndexReadError) as exc:
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


# --- output --------------------------------------------------------------------------------

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

"""Facts about an engine release the knowledge lacks, read from the index for ``upgrade``.

The release row from the wheel's own ``METADATA`` (the PEP 658 file the index serves beside
the wheel, else the wheel itself when it is small): the torch pin, ``Requires-Python``
(narrowed to the CPythons its wheels are built for), the CUDA major (from the CUDA library
dependencies, else from the PyPI wheel of the torch it pins) and the engine's lockstep pins;
what its Python source says (server options, quantization floors, metric families); and
the fatbin code of its kernel package's libraries. Each row is marked as observed from
that index on that date.
"""

from __future__ import annotations

import datetime
import email.parser
import re
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import Version

from dockergen.errors import DockergenError, ExitCode, redact, shown_value
from dockergen.knowledge import facts as knowledge
from dockergen.knowledge import kernels
from dockergen.net import index as outdated_index
from dockergen.outputs.observe import families, metrics
from dockergen.parts.engines import engine_for

# the torch family comes from PyTorch's CUDA index, not the main one: not looked up there
_INDEX_PINNED = {"torch", "torchaudio", "torchvision"}


class UpgradeError(DockergenError, code=ExitCode.INVALID_PROFILE):
    """No newer release could be read or derived (the reason says which)."""


def _metadata(url: str, filename: str) -> str:
    meta = outdated_index.read_file(url + ".metadata")
    if meta is not None:
        return meta.decode("utf-8", "replace")
    try:
        return outdated_index.wheel_member(url, r"[^/]+\.dist-info/METADATA", filename)
    except outdated_index.IndexReadError as exc:
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
            listed = {str(v) for v in outdated_index.releases(index, req.name)}
        except outdated_index.IndexReadError as exc:
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
    wheels = [(f.name, f.url) for f in outdated_index.files(index, package)
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
    wheels = [f.name for f in outdated_index.files(index, package)
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
        members = outdated_index.wheel_members(url, wanted, name, outdated_index.SOURCE_LIMIT,
                                         "one source file") if wanted else {}
    except (UpgradeError, outdated_index.IndexReadError) as exc:
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
    wheels = sorted((f.name, f.url) for f in outdated_index.files(index, package)
                    if str(f.version) == kernel_version and f.name.endswith("x86_64.whl"))
    if not wheels:
        raise UpgradeError(f"{package} {kernel_version}: the index lists no x86_64 wheel "
                           "of it, so the GPUs its kernels run on cannot be read")
    name, url = wheels[-1]
    wanted = sorted({m for members in spec["select"].values() for m in members})
    found = outdated_index.wheel_members(url, wanted, name)
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

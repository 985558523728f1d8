"""The image's CycloneDX 1.6 SBOM, from what dockergen knows for certain.

Every component has one source, named in its ``dockergen:source`` property:

- ``python-lock``: each distribution of the hashed Python lock (name, version, every sha256
  the lock pins, the index it comes from as the purl's ``repository_url``). The lock holds
  no licences, so none is claimed;
- ``dpkg``: each package the runtime stage's ``/var/lib/dpkg/status`` lists as installed,
  read from the built image (never from a container that ran);
- ``source-build``: FlashAttention built from source (version, where its source comes
  from, ``FLASH_ATTN_CUDA_ARCHS``);
- ``base-image``: each image the Dockerfile starts from, by digest.

The CUDA libraries are not a kind of their own: they are Python distributions of the lock
(``nvidia-*``, ``cuda-*``) or packages of the CUDA runtime base (``cuda-*``, ``libcu*``,
``libnccl*``, ...), and carry ``dockergen:cuda`` = ``python-lock`` or ``base-image`` to say
which. Output is deterministic: sorted components, a serial number derived from the image
digest, no timestamp unless ``SOURCE_DATE_EPOCH`` gives one.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from dockergen import __version__, refs

SPEC = "1.6"
SOURCE = "dockergen:source"
CUDA = "dockergen:cuda"
# distributions and packages that are CUDA libraries (NVIDIA's wheels and Debian/Ubuntu
# packages of the CUDA repository)
_CUDA_DIST = re.compile(r"(nvidia-|cuda-)")
_CUDA_DEB = re.compile(r"(cuda-|libcu(blas|dnn|fft|file|rand|solver|sparse|pti|tensor)|libnccl"
                       r"|libnpp|libnvjitlink|libnvjpeg|libnvrtc|libnvtx|libnvidia-)")
_REQ = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
_TORCH_FAMILY = ("torch", "torchvision", "torchaudio", "triton")


@dataclass(frozen=True)
class LockedDist:
    """One distribution of the Python lock: its hashes and the index it is installed from."""

    name: str  # normalized (PEP 503)
    version: str
    hashes: tuple[str, ...]
    index: str = ""


@dataclass(frozen=True)
class SourceBuild:
    """FlashAttention as the profile builds it from source."""

    name: str
    version: str
    source: str  # the URL its source comes from (an sdist page, an archive, a git URL)
    archs: str  # FLASH_ATTN_CUDA_ARCHS


@dataclass(frozen=True)
class SbomInputs:
    """What the SBOM is made from (all read before: this module reads no file)."""

    image: str  # repository of the pushed image
    digest: str  # sha256:... of the pushed image
    lock: tuple[LockedDist, ...] = ()
    dpkg_status: str = ""
    os_release: str = ""
    source_builds: tuple[SourceBuild, ...] = ()
    bases: Mapping[str, str] = field(default_factory=dict)  # reference -> digest
    epoch: int | None = None  # SOURCE_DATE_EPOCH


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(text: str, indexes: Mapping[str, str], default_index: str
              ) -> tuple[LockedDist, ...]:
    """The distributions of a ``uv pip compile --generate-hashes`` lock: ``name==version``
    requirements, each with its ``--hash`` continuation lines and uv's ``# from INDEX``
    comment. Without that comment ``indexes`` (normalized name -> index) decides, then
    ``default_index``."""
    entries: list[tuple[str, str, list[str], str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        match = _REQ.match(line) if raw[:1] not in (" ", "\t", "#") else None
        if match:
            entries.append((normalize(match.group(1)), match.group(2), [], ""))
        elif entries and line.startswith("# from "):
            name, version, hashes, _ = entries[-1]
            entries[-1] = (name, version, hashes, line[len("# from "):].strip())
        if entries and raw[:1] in (" ", "\t") or match:
            entries[-1][2].extend(_HASH.findall(line))
    found = {name: LockedDist(name, version, tuple(sorted(set(hashes))),
                              index or indexes.get(name, default_index))
             for name, version, hashes, index in entries}
    return tuple(found[n] for n in sorted(found))


def lock_indexes(main: str, torch: str, engine: tuple[str, str | None],
                 extra: Mapping[str, str | None]) -> dict[str, str]:
    """Which index each special distribution of a lock comes from (pylockfile's
    explicit indexes: the torch family from the CUDA-matched one, the engine from its own)."""
    out = {name: torch for name in _TORCH_FAMILY[:3]}
    if engine[1]:
        out[normalize(engine[0])] = engine[1]
    out.update((normalize(n), i) for n, i in extra.items() if i)
    return out


def _purl(kind: str, name: str, version: str, namespace: str = "",
          qualifiers: Mapping[str, str] | None = None) -> str:
    from packageurl import PackageURL

    return str(PackageURL(type=kind, namespace=namespace or None, name=name, version=version,
                          qualifiers=dict(qualifiers or {})).to_string())


def _props(**values: str) -> list[dict[str, str]]:
    return [{"name": f"dockergen:{k.replace('_', '-')}", "value": v}
            for k, v in sorted(values.items()) if v]


def python_component(dist: LockedDist) -> dict[str, Any]:
    """A locked distribution: purl ``pkg:pypi/NAME@VERSION`` with its index."""
    quals = {"repository_url": dist.index} if dist.index else {}
    purl = _purl("pypi", dist.name, dist.version, qualifiers=quals)
    comp: dict[str, Any] = {
        "type": "library", "bom-ref": purl, "name": dist.name, "version": dist.version,
        "purl": purl, "hashes": [{"alg": "SHA-256", "content": h} for h in dist.hashes],
        "properties": _props(source="python-lock",
                             cuda="python-lock" if _CUDA_DIST.match(dist.name) else "")}
    if dist.index:
        comp["externalReferences"] = [{"type": "distribution", "url": dist.index}]
    return comp


def read_dpkg_status(text: str) -> list[dict[str, str]]:
    """The installed packages of a dpkg status file (one paragraph each)."""
    packages = []
    for para in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in para.splitlines():
            if line[:1] not in (" ", "\t") and ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields.get("Package") and fields.get("Status", "").endswith(" installed"):
            packages.append(fields)
    return sorted(packages, key=lambda f: (f["Package"], f.get("Architecture", "")))


def _os_id(os_release: str) -> str:
    match = re.search(r'^ID="?([a-z0-9._-]+)"?', os_release, re.MULTILINE)
    return match.group(1) if match else "debian"


def deb_component(pkg: Mapping[str, str], distro: str) -> dict[str, Any]:
    """A dpkg package: purl ``pkg:deb/<distro>/NAME@VERSION?arch=ARCH``."""
    quals = {"arch": pkg.get("Architecture", "")}
    if pkg.get("Source"):
        quals["upstream"] = pkg["Source"].split()[0]
    purl = _purl("deb", pkg["Package"], pkg.get("Version", ""), namespace=distro,
                 qualifiers={k: v for k, v in quals.items() if v})
    return {"type": "library", "bom-ref": purl, "name": pkg["Package"],
            "version": pkg.get("Version", ""), "purl": purl,
            "properties": _props(source="dpkg",
                                 cuda="base-image" if _CUDA_DEB.match(pkg["Package"]) else "")}


def image_purl(ref: str, digest: str) -> str:
    """``pkg:docker/NAMESPACE/NAME@sha256:...?repository_url=REGISTRY`` of an image."""
    parsed = refs.parse(ref)
    namespace, _, name = parsed.path.rpartition("/")
    quals = {"repository_url": parsed.domain} if parsed.domain else {}
    if parsed.tag:
        quals["tag"] = parsed.tag
    return _purl("docker", name, digest, namespace=namespace, qualifiers=quals)


def base_component(ref: str, digest: str) -> dict[str, Any]:
    """A base image the Dockerfile starts from, by digest."""
    purl = image_purl(ref, digest)
    return {"type": "container", "bom-ref": purl, "name": refs.parse(ref).name,
            "version": digest, "purl": purl,
            "hashes": [{"alg": "SHA-256", "content": digest.removeprefix("sha256:")}],
            "properties": _props(source="base-image")}


def source_component(build: SourceBuild) -> dict[str, Any]:
    """A distribution dockergen builds from source in the image."""
    purl = _purl("pypi", normalize(build.name), build.version)
    return {"type": "library", "bom-ref": purl, "name": normalize(build.name),
            "version": build.version, "purl": purl,
            "externalReferences": [{"type": "source-distribution", "url": build.source}],
            "properties": _props(source="source-build", cuda_archs=build.archs)}


def sbom(inp: SbomInputs) -> dict[str, Any]:
    """The CycloneDX document (a JSON object) of the inputs."""
    distro = _os_id(inp.os_release)
    components = [python_component(d) for d in inp.lock]
    components += [deb_component(p, distro) for p in read_dpkg_status(inp.dpkg_status)]
    components += [source_component(b) for b in inp.source_builds]
    components += [base_component(r, d) for r, d in sorted(inp.bases.items())]
    unique = {c["bom-ref"]: c for c in components}  # a package listed twice counts once
    subject = image_purl(inp.image, inp.digest)
    metadata: dict[str, Any] = {
        "tools": {"components": [{"type": "application", "name": "dockergen",
                                  "version": __version__}]},
        "component": {"type": "container", "bom-ref": subject, "name": inp.image,
                      "version": inp.digest, "purl": subject}}
    if inp.epoch is not None:
        metadata["timestamp"] = datetime.fromtimestamp(inp.epoch, timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ")
    return {"bomFormat": "CycloneDX", "specVersion": SPEC,
            "serialNumber": uuid.uuid5(uuid.NAMESPACE_URL, subject).urn, "version": 1,
            "metadata": metadata,
            "components": [unique[k] for k in sorted(unique)],
            "dependencies": [{"ref": subject, "dependsOn": sorted(unique)}]}


def problems(document: object) -> str | None:
    """What makes ``document`` invalid CycloneDX 1.6 JSON (the schema cyclonedx-python-lib
    ships, strict: no property the schema does not name; the schema takes any
    ``specVersion`` string, so that is checked here); None: valid."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(json.dumps(document))
    if error is not None:
        return str(error).splitlines()[0]
    if isinstance(document, dict) and document.get("specVersion") != SPEC:  # a free string there
        return f"specVersion is {str(document.get('specVersion'))[:20]!r}, not {SPEC!r}"
    return None


def dumps(document: Mapping[str, Any]) -> str:
    """The file's text: sorted keys, two-space indent, one final newline."""
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def python_dists(document: Mapping[str, Any]) -> dict[str, tuple[str, frozenset[str]]]:
    """name -> (version, sha256 hashes) of an SBOM's Python-lock components."""
    out: dict[str, tuple[str, frozenset[str]]] = {}
    for comp in document.get("components") or ():
        if not isinstance(comp, dict):
            continue
        props = {p.get("name"): p.get("value") for p in comp.get("properties") or ()
                 if isinstance(p, dict)}
        if props.get(SOURCE) == "python-lock":
            hashes = frozenset(h.get("content", "") for h in comp.get("hashes") or ()
                               if isinstance(h, dict))
            out[normalize(str(comp.get("name", "")))] = (str(comp.get("version", "")), hashes)
    return out

"""The build's provenance: an in-toto Statement v1 with a SLSA provenance v1 predicate.

Shapes from the published specifications (in-toto attestation framework, Statement v1:
https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md; SLSA provenance v1:
https://slsa.dev/spec/v1.0/provenance). :func:`shape_problems` checks their required fields,
so the file dockergen writes and the predicate ``verify`` reads are held to the same rules.

- ``buildDefinition.buildType``: :data:`BUILD_TYPE`;
- ``externalParameters``: the profile's path and the sha256 of its bytes, the resolved
  profile hash (the build record's ``profile_hash``), the command-line inputs;
- ``resolvedDependencies``: the Python lock (its sha256) and each base image by digest;
- ``runDetails.builder.id``: dockergen and its version; ``metadata.invocationId``: the
  immutable ``dg-<hash>`` tag.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dockergen import __version__, refs

STATEMENT = "https://in-toto.io/Statement/v1"
SLSA_V1 = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "https://dockergen.dev/build/image/v1"  # names this document's parameters


def builder_id() -> str:
    """The builder: dockergen at this version (a purl is a URI)."""
    return f"pkg:pypi/dockergen@{__version__}"


@dataclass(frozen=True)
class ProvenanceInputs:
    """What the provenance says (read before: this module reads no file)."""

    image: str  # repository of the pushed image
    digest: str  # sha256:... of the pushed image
    profile_path: str
    profile_sha256: str  # of the profile file's bytes
    profile_hash: str  # the resolved profile hash (the record's profile_hash)
    invocation: str  # the immutable tag
    bases: Mapping[str, str] = field(default_factory=dict)  # reference -> digest
    lock_name: str = ""  # the Python lock's file name ("" : no lock)
    lock_sha256: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)  # build options that count


def _digest_set(digest: str) -> dict[str, str]:
    algorithm, _, value = digest.partition(":")
    return {algorithm: value}


def predicate(inp: ProvenanceInputs) -> dict[str, Any]:
    """The SLSA provenance v1 predicate (what ``cosign attest --type slsaprovenance1``
    takes)."""
    deps: list[dict[str, Any]] = []
    if inp.lock_name:
        deps.append({"name": inp.lock_name, "uri": f"file:{inp.lock_name}",
                     "digest": {"sha256": inp.lock_sha256}})
    for ref, digest in sorted(inp.bases.items()):
        name = refs.parse(ref).name
        deps.append({"name": ref, "uri": f"pkg:docker/{name}@{digest}",
                     "digest": _digest_set(digest)})
    return {
        "buildDefinition": {
            "buildType": BUILD_TYPE,
            "externalParameters": {
                "profile": {"path": inp.profile_path,
                            "digest": {"sha256": inp.profile_sha256}},
                "profileHash": inp.profile_hash,
                "options": dict(sorted(inp.options.items()))},
            "resolvedDependencies": deps},
        "runDetails": {"builder": {"id": builder_id(), "version": {"dockergen": __version__}},
                       "metadata": {"invocationId": inp.invocation}}}


def statement(inp: ProvenanceInputs) -> dict[str, Any]:
    """The in-toto Statement v1 whose subject is the pushed image."""
    return {"_type": STATEMENT,
            "subject": [{"name": inp.image, "digest": _digest_set(inp.digest)}],
            "predicateType": SLSA_V1, "predicate": predicate(inp)}


def _need(obj: object, path: str, kind: type, out: list[str]) -> Any:
    if not isinstance(obj, kind):
        out.append(f"{path}: missing or not a {kind.__name__}")
        return None
    return obj


def predicate_problems(pred: object) -> list[str]:
    """The SLSA provenance v1 fields the specification requires, each one missing or of
    the wrong type (buildDefinition.buildType, .externalParameters; runDetails.builder.id;
    every resolved dependency a ResourceDescriptor with a uri, digest or content)."""
    out: list[str] = []
    if _need(pred, "predicate", dict, out) is None:
        return out
    assert isinstance(pred, dict)
    build = _need(pred.get("buildDefinition"), "buildDefinition", dict, out) or {}
    _need(build.get("buildType"), "buildDefinition.buildType", str, out)
    _need(build.get("externalParameters"), "buildDefinition.externalParameters", dict, out)
    for n, dep in enumerate(build.get("resolvedDependencies") or ()):
        where = f"buildDefinition.resolvedDependencies[{n}]"
        if not isinstance(dep, dict) or not ({"uri", "digest", "content"} & dep.keys()):
            out.append(f"{where}: a ResourceDescriptor needs uri, digest or content")
    run = _need(pred.get("runDetails"), "runDetails", dict, out) or {}
    builder = _need(run.get("builder"), "runDetails.builder", dict, out) or {}
    _need(builder.get("id"), "runDetails.builder.id", str, out)
    return out


def shape_problems(doc: object) -> list[str]:
    """What the in-toto Statement v1 specification requires and ``doc`` lacks: ``_type``,
    a non-empty ``subject`` of name/digest descriptors, ``predicateType``, and the
    predicate's own required fields (:func:`predicate_problems`)."""
    out: list[str] = []
    if _need(doc, "statement", dict, out) is None:
        return out
    assert isinstance(doc, dict)
    if doc.get("_type") != STATEMENT:
        out.append(f"_type: {doc.get('_type')!r}, not {STATEMENT}")
    subjects = doc.get("subject")
    if not isinstance(subjects, list) or not subjects:
        out.append("subject: missing or empty (the image by digest)")
    for n, subject in enumerate(subjects if isinstance(subjects, list) else ()):
        digest = subject.get("digest") if isinstance(subject, dict) else None
        if not isinstance(digest, dict) or not digest or not all(
                isinstance(v, str) for v in digest.values()):
            out.append(f"subject[{n}].digest: missing (a map of algorithm to hex)")
    _need(doc.get("predicateType"), "predicateType", str, out)
    if doc.get("predicateType") == SLSA_V1:
        out += predicate_problems(doc.get("predicate"))
    return out

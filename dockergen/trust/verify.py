"""``dockergen verify IMAGE``: the image's signature, its SBOM and provenance attestations,
and what they say, checked against a public key (and a lock and a build record).

Each check is one line of a report, ``ok`` or ``FAILED`` with what is wrong, named
``signature``, ``sbom`` or ``provenance``; any failure makes the command end with
:attr:`~dockergen.errors.ExitCode.VERIFY_FAILED`. cosign does the cryptography
(:mod:`.cosign`); this module decides what the verified documents must say:

- the signature: ``cosign verify`` with the key, for the digest the reference names now;
- the SBOM (``cyclonedx``): verified with the key, about that digest, valid CycloneDX, and
  with ``--lock``: every locked distribution present with its version and exactly its
  hashes, and no Python-lock component the lock does not have (each named);
- the provenance (``slsaprovenance1``): verified with the key, about that digest, with
  the SLSA v1 required fields; with ``--record``: the record's profile hash, every base
  digest and the pushed digest.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dockergen import refs
from dockergen.errors import DockergenError, ExitCode, UsageError, shown_value
from dockergen.files import inputs
from dockergen.input.buildrecord import BuildRecord, RecordProblem, read_record
from dockergen.trust import cosign, provenance, sbom

_SHOWN = 8  # names listed per problem before "and N more"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


class VerifyFailed(DockergenError, code=ExitCode.VERIFY_FAILED):
    """A check of ``dockergen verify`` failed (the report names which)."""



class VerifyInputError(DockergenError, code=ExitCode.INVALID_PROFILE):
    """A --lock or --record file that cannot be used."""


@dataclass
class Report:
    """The checks of one image, in order: (name, ok, detail)."""

    image: str
    checks: list[tuple[str, bool, str]] = field(default_factory=list)

    def add(self, name: str, problems: list[str], ok_text: str) -> None:
        self.checks.append((name, not problems, "; ".join(problems) if problems else ok_text))

    @property
    def failed(self) -> list[str]:
        return [name for name, ok, _ in self.checks if not ok]

    def lines(self) -> list[str]:
        out = [f"verify {self.image}"]
        out += [f"  {'ok    ' if ok else 'FAILED'} {name}: {detail}"
                for name, ok, detail in self.checks]
        return out


def _listed(names: list[str]) -> str:
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return ", ".join(names[:_SHOWN]) + more


def current_digest(image: str) -> str | None:
    """The digest ``image`` names in its registry now (cosign triangulate: the tag its
    signature would have, ``sha256-<hex>.sig``); None: cosign cannot tell."""
    parsed = refs.parse(image)
    if parsed.digest:
        return parsed.digest
    found = cosign.run(["triangulate", image])
    match = re.search(r":sha256-([0-9a-f]{64})\.sig\s*$", found.out) if found.ok else None
    return f"sha256:{match.group(1)}" if match else None


def check_signature(report: Report, key: str, image: str, digest: str | None) -> None:
    """The image's digest carries a signature the key verifies."""
    outcome, payloads = cosign.verify(key, image)
    signed = {str(p.get("critical", {}).get("image", {}).get("docker-manifest-digest"))
              for p in payloads}
    problems = []
    if not outcome.ok:
        problems.append(f"no signature verified by the key for {digest or image} "
                        f"(cosign: {outcome.error})")
    elif digest is not None and digest not in signed:
        problems.append(f"the verified signatures name {_listed(sorted(signed))}, not "
                        f"{digest}")
    report.add("signature", problems, f"{digest} is signed by the key")


def _statement(report: Report, name: str, key: str, image: str, kind: str,
               digest: str | None) -> dict[str, Any] | None:
    """The verified statement of ``kind`` about ``digest``, or None (the failure added)."""
    outcome, statements = cosign.verify_attestation(key, image, kind)
    if not outcome.ok:
        report.add(name, [f"no {kind} attestation verified by the key for "
                          f"{digest or image} (cosign: {outcome.error})"], "")
        return None
    hexdigest = (digest or "").removeprefix("sha256:")
    about = [s for s in statements if any(
        isinstance(sub, dict) and sub.get("digest", {}).get("sha256") == hexdigest
        for sub in s.get("subject") or ())]
    if not about:
        report.add(name, [f"the verified {kind} attestations are about another image, not "
                          f"{digest}"], "")
        return None
    return about[-1]


def _check(report: Report, name: str, key: str, image: str, kind: str, digest: str | None,
           judge: Callable[[Any], tuple[list[str], str]]) -> None:
    """One attestation check: the verified statement of ``kind`` about ``digest``, its
    predicate judged (the problems, and the line shown when there are none)."""
    statement = _statement(report, name, key, image, kind, digest)
    if statement is not None:
        report.add(name, *judge(statement.get("predicate")))


def lock_problems(document: dict[str, Any], lock_text: str) -> list[str]:
    """What the SBOM says otherwise than the lock (missing, other version or hashes, extra)."""
    locked = {d.name: d for d in sbom.read_lock(lock_text, {}, "")}
    listed = sbom.python_dists(document)
    missing = sorted(n for n in locked if n not in listed)
    other = sorted(f"{n} ({listed[n][0]} in the SBOM, {d.version} locked)"
                   for n, d in locked.items() if n in listed and listed[n][0] != d.version)
    hashes = sorted(n for n, d in locked.items() if n in listed
                    and listed[n][0] == d.version and listed[n][1] != frozenset(d.hashes))
    extra = sorted(n for n in listed if n not in locked)
    out = []
    if missing:
        out.append(f"{len(missing)} locked distribution(s) missing: {_listed(missing)}")
    if other:
        out.append(f"other versions: {_listed(other)}")
    if hashes:
        out.append(f"other sha256 hashes than the lock's: {_listed(hashes)}")
    if extra:
        out.append(f"{len(extra)} distribution(s) the lock does not have: {_listed(extra)}")
    return out


def check_sbom(report: Report, key: str, image: str, digest: str | None,
               lock_text: str | None) -> None:
    """The SBOM attestation: verified, about this digest, valid, and matching the lock."""
    def judge(document: Any) -> tuple[list[str], str]:
        invalid = sbom.problems(document)
        if invalid is not None or not isinstance(document, dict):
            return [f"not valid CycloneDX {sbom.SPEC}: {invalid}"], ""
        problems = lock_problems(document, lock_text) if lock_text is not None else []
        count = len(sbom.python_dists(document))
        return problems, (f"signed CycloneDX {sbom.SPEC}, {count} Python distribution(s)"
                          + (", each as the lock pins it" if lock_text else ""))

    _check(report, "sbom", key, image, cosign.SBOM_TYPE, digest, judge)


def record_problems(pred: dict[str, Any], record: BuildRecord, digest: str | None
                    ) -> list[str]:
    """What the provenance says otherwise than the build record."""
    build = pred.get("buildDefinition") or {}
    params = build.get("externalParameters") or {}
    out = []
    named_hash = params.get("profileHash")
    if named_hash != record.profile_hash:
        shown = named_hash if isinstance(named_hash, str) and _DIGEST.fullmatch(named_hash) \
            else shown_value(str(named_hash))
        out.append(f"names the profile hash {shown}, the record {record.profile_hash}")
    named = {str(d.get("name")): d.get("digest", {}) for d in
             build.get("resolvedDependencies") or () if isinstance(d, dict)}
    for ref, base in sorted((record.bases or {}).items()):
        if named.get(ref, {}).get("sha256") != base.removeprefix("sha256:"):
            out.append(f"does not name the base image {ref} as {base}")
    if record.pushed and digest is not None and digest not in record.pushed.values():
        out.append(f"the record's pushed digest is {_listed(sorted(set(record.pushed.values())))}"
                   f", the image's is {digest}")
    return out


def check_provenance(report: Report, key: str, image: str, digest: str | None,
                     record: BuildRecord | None) -> None:
    """The provenance attestation: verified, about this digest, SLSA v1, as the record."""
    def judge(pred: Any) -> tuple[list[str], str]:
        problems = provenance.predicate_problems(pred)
        if not problems and record is not None and isinstance(pred, dict):
            problems = record_problems(pred, record, digest)
        return problems, "signed SLSA provenance v1" + (
            ", naming the record's profile hash, base digests and image digest"
            if record is not None else "")

    _check(report, "provenance", key, image, cosign.PROVENANCE_TYPE, digest, judge)


def read_lock_file(path: Path) -> str:
    """The text of a --lock file (a Python lock)."""
    try:
        return inputs.read_text(path, "lock")
    except FileNotFoundError:
        raise VerifyInputError(f"--lock {path}: no such file; give the PROFILE.python.lock "
                               "the image was built from") from None
    except OSError as exc:
        raise VerifyInputError(f"--lock {path}: cannot read it ({exc.strerror})") from None


def read_record_file(path: Path) -> BuildRecord:
    """The build record of a --record file."""
    again = "pass the build-record.json that `dockergen build --push` wrote"
    try:
        return read_record(inputs.loads_json(inputs.read_bytes(path, "record")))
    except FileNotFoundError:
        raise VerifyInputError(f"--record {path}: no such file; {again}") from None
    except RecordProblem as exc:
        raise VerifyInputError(f"--record {path}: {exc}; {again}") from None
    except (OSError, ValueError) as exc:
        raise VerifyInputError(f"--record {path}: not a build record ({str(exc)[:120]}); "
                               f"{again}") from None


def verify(image: str, key: str, lock: Path | None = None, record: Path | None = None
           ) -> Report:
    """Every check of ``image``; raises for unusable inputs, never for a failed check."""
    try:
        refs.check(image)
    except refs.InvalidReference as exc:
        raise UsageError(f"{shown_value(image)}: not an image reference ({exc}); write "
                         "REGISTRY/REPOSITORY[:TAG][@DIGEST]") from None
    cosign.check_key("--key", key)
    lock_text = read_lock_file(lock) if lock is not None else None
    built = read_record_file(record) if record is not None else None
    cosign.find()
    report = Report(image)
    digest = current_digest(image)
    check_signature(report, key, image, digest)
    check_sbom(report, key, image, digest, lock_text)
    check_provenance(report, key, image, digest, built)
    return report

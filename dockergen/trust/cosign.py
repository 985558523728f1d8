"""The one module that runs cosign (a program: Sigstore's signing tool, 2.x).

Key-based only: ``--key`` takes what cosign takes (a key file, ``env://VAR``, or a KMS
reference ``awskms://``, ``gcpkms://``, ``hashivault://``, ``azurekms://``, ``k8s://``,
``pkcs11:``). An encrypted key's password comes from ``COSIGN_PASSWORD`` in the
environment, which cosign reads itself: dockergen never puts it on a command line, in a
file, a build arg or a message (cosign's own output is redacted before it is shown, the
password's value too). Nothing goes to a transparency log (``--tlog-upload=false``; verify:
``--insecure-ignore-tlog``), so no network is needed beyond the registry.

Signatures and attestations are stored with cosign's tag scheme (``sha256-<hex>.sig`` and
``.att`` in the image's repository): registries without the OCI referrers API (distribution
2.x) hold them, and cosign 2.x reads them there by default.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dockergen.errors import (
    DockergenError,
    ExitCode,
    MissingToolError,
    UsageError,
    redact,
    shown_value,
)

ENV = "DOCKERGEN_COSIGN"  # the cosign to run (default: `cosign` on PATH)
PASSWORD = "COSIGN_PASSWORD"
KEY_SCHEMES = ("env://", "awskms://", "gcpkms://", "hashivault://", "azurekms://", "k8s://",
               "pkcs11:")
# cosign attest --type: the predicate types dockergen attaches
SBOM_TYPE = "cyclonedx"
PROVENANCE_TYPE = "slsaprovenance1"
PREDICATE_URI = {SBOM_TYPE: "https://cyclonedx.org/bom",
                 PROVENANCE_TYPE: "https://slsa.dev/provenance/v1"}
_TIMEOUT_S = 300


class SigningFailed(DockergenError, code=ExitCode.PUSH_FAILED):
    """cosign could not sign or attach an attestation (the image is pushed, unsigned)."""


def find() -> str:
    """The cosign program: ``$DOCKERGEN_COSIGN``, else ``cosign`` on PATH."""
    named = os.environ.get(ENV)
    found = shutil.which(named) if named else shutil.which("cosign")
    if not found:
        where = f"{ENV}={shown_value(named)} is not a program" if named else \
            "no cosign on PATH"
        raise MissingToolError(f"{where}; install cosign 2.x (Debian trixie: the cosign "
                               f"package; or sigstore's release) or set {ENV} to its path")
    return found


def check_key(option: str, key: str) -> None:
    """``key`` is one cosign takes; a file must exist (checked before anything is built)."""
    if key.startswith("env://"):
        if not os.environ.get(key[len("env://"):]):
            raise UsageError(f"{option} {key}: the variable {key[len('env://'):]} is not "
                             "set (it holds the PEM key itself)")
        return
    if key.startswith(KEY_SCHEMES):
        return
    if "://" in key:
        raise UsageError(f"{option} {shown_value(key)}: not a key reference cosign takes; "
                         "use a key file, env://VAR or one of " + ", ".join(KEY_SCHEMES[1:]))
    if not Path(key).is_file():
        raise UsageError(f"{option} {shown_value(key)}: no such key file; make a pair with "
                         "`cosign generate-key-pair` (or give env://VAR or a KMS reference)")


@dataclass(frozen=True)
class Outcome:
    """One cosign run: whether it succeeded, its standard output, and its error (redacted,
    the last lines that say why)."""

    ok: bool
    out: str
    error: str


def run(args: list[str]) -> Outcome:
    """Run cosign with ``args``; stdin is closed (never a password prompt)."""
    program = find()
    try:
        proc = subprocess.run([program, *args], stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return Outcome(False, "", f"cosign {args[0]} ran past {_TIMEOUT_S}s")
    return Outcome(proc.returncode == 0, proc.stdout, _error_of(proc.stderr))


def _error_of(stderr: str) -> str:
    """cosign's reason: its ``Error:`` lines (else the last line), without the password."""
    password = os.environ.get(PASSWORD)
    text = stderr.replace(password, "(not shown)") if password else stderr
    lines = [line.strip() for line in redact(text).splitlines() if line.strip()]
    errors = [line.removeprefix("Error: ") for line in lines if line.startswith("Error:")]
    return "; ".join(errors[-2:]) or (lines[-1] if lines else "")


def sign(key: str, image: str) -> None:
    """Sign ``image`` (``NAME@sha256:...``) with the key; no transparency log."""
    result = run(["sign", "--key", key, "--tlog-upload=false", "--yes", image])
    if not result.ok:
        raise SigningFailed(f"cosign could not sign {image}: {result.error}")


def attest(key: str, image: str, predicate: Path, kind: str) -> None:
    """Attach ``predicate`` to ``image`` as a signed in-toto attestation of ``kind``,
    replacing one of the same type (``--replace``)."""
    result = run(["attest", "--key", key, "--type", kind, "--predicate",
                  str(predicate), "--replace", "--tlog-upload=false", "--yes", image])
    if not result.ok:
        raise SigningFailed(f"cosign could not attach the {kind} attestation to {image}: "
                            f"{result.error}")


def verify(key: str, image: str) -> tuple[Outcome, list[dict[str, Any]]]:
    """``cosign verify``: the outcome and the verified signature payloads."""
    result = run(["verify", "--key", key, "--insecure-ignore-tlog=true",
                  "--output", "json", image])
    if not result.ok:
        return result, []
    try:
        payloads = json.loads(result.out or "[]")
    except ValueError:
        return Outcome(False, "", "cosign printed no JSON payloads"), []
    return result, [p for p in payloads if isinstance(p, dict)]


def verify_attestation(key: str, image: str, kind: str
                       ) -> tuple[Outcome, list[dict[str, Any]]]:
    """``cosign verify-attestation --type KIND``: the outcome and the in-toto statements
    of the verified attestations of that type (decoded from their DSSE envelopes)."""
    result = run(["verify-attestation", "--key", key, "--type", kind,
                  "--insecure-ignore-tlog=true", image])
    if not result.ok:
        return result, []
    statements = []
    for line in result.out.splitlines():
        try:
            envelope = json.loads(line)
            statement = json.loads(base64.b64decode(envelope["payload"]))
        except (ValueError, KeyError, TypeError):
            continue
        if isinstance(statement, dict) and statement.get("predicateType") == \
                PREDICATE_URI[kind]:
            statements.append(statement)
    if not statements:
        return Outcome(False, "", f"no verified {kind} attestation"), []
    return result, statements

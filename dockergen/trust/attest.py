"""The step after a push: the SBOM and the provenance, written beside the build record
and, with ``build --sign``, signed and attached to the pushed image with cosign.

What each document holds is read here, once: the Python lock of the build context, the
runtime image's dpkg status and os-release (through the daemon's archive endpoint, from a
container that never starts), the base images by digest, the profile's bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from dockergen import refs
from dockergen.files import atomic
from dockergen.input.buildrecord import BuildRecord
from dockergen.trust import cosign, provenance, sbom

if TYPE_CHECKING:
    from dockergen.build.daemon import ContainerDaemon
    from dockergen.pipeline import Resolution

SBOM_FILE = "sbom.cdx.json"
PROVENANCE_FILE = "provenance.intoto.json"
_STATUS = "/var/lib/dpkg/status"
_OS_RELEASE = ("/usr/lib/os-release", "/etc/os-release")  # /etc's is a link on Debian
_READ_LIMIT = 64 * 1024 * 1024  # a dpkg status of thousands of packages is a few MB


@dataclass(frozen=True)
class Evidence:
    """The two documents of one pushed image, as written."""

    sbom: dict[str, object]
    statement: dict[str, object]


def base_digests(daemon: ContainerDaemon, bases: list[str]) -> dict[str, str]:
    """Each base image by digest: the one the reference pins, else the registry digest the
    engine holds for its repository, else the local image's id (a content digest: the
    manifest's with the containerd image store)."""
    out: dict[str, str] = {}
    for ref in bases:
        parsed = refs.parse(ref)
        if parsed.digest:
            out[ref] = parsed.digest
            continue
        info = daemon.inspect(ref)
        pinned = [d.split("@", 1)[1] for d in info.get("RepoDigests") or ()
                  if d.split("@", 1)[0] == parsed.name]
        out[ref] = pinned[0] if pinned else str(info.get("Id") or daemon.image_id(ref))
    return out


def _read_text(daemon: ContainerDaemon, image: str, paths: tuple[str, ...]) -> str:
    for path in paths:
        data = daemon.read_file(image, path, _READ_LIMIT)
        if data is not None:
            return data.decode("utf-8", "replace")
    return ""


def _source_builds(res: Resolution) -> tuple[sbom.SourceBuild, ...]:
    fa = res.resolved.flash_attn
    if fa is None:
        return ()
    if fa.source_kind == "pypi":  # the sdist of the main index's project page
        source = f"{res.resolved.main_index.rstrip('/')}/flash-attn/"
    else:  # "flash-attn @ URL [--hash=...]"
        source = fa.requirement.split("@", 1)[1].split()[0] if "@" in fa.requirement else ""
    return (sbom.SourceBuild("flash-attn", fa.version, source, fa.archs),)


def _lock(res: Resolution, files: dict[str, bytes]) -> tuple[sbom.LockedDist, ...]:
    from dockergen.parts.engines.base import LOCK_IN_CONTEXT

    text = files.get(LOCK_IN_CONTEXT)
    if text is None:
        return ()
    inp = res.resolved.python_lock_inputs
    engine = inp.engine.split("==")[0]
    extra = {inp.flashinfer_cubin.split("==")[0]: inp.flashinfer_index} \
        if inp.flashinfer_cubin else {}
    indexes = sbom.lock_indexes(inp.main_index, inp.torch_index, (engine, inp.engine_index),
                                extra)
    return sbom.read_lock(text.decode("utf-8"), indexes, inp.main_index)


def evidence(res: Resolution, daemon: ContainerDaemon, record: BuildRecord,
             bases: dict[str, str], files: dict[str, bytes]) -> Evidence:
    """The SBOM and the provenance statement of the pushed image of ``record``."""
    from dockergen.input.pylockfile import path_of
    from dockergen.parts.engines.base import LOCK_IN_CONTEXT

    assert record.pushed and record.image_id
    repo = refs.parse(record.immutable_tag).name
    digest = record.pushed[record.immutable_tag]
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    doc = sbom.sbom(sbom.SbomInputs(
        repo, digest, _lock(res, files),
        _read_text(daemon, record.image_id, (_STATUS,)),
        _read_text(daemon, record.image_id, _OS_RELEASE), _source_builds(res), bases,
        int(epoch) if epoch and epoch.isdigit() else None))
    lock = files.get(LOCK_IN_CONTEXT)
    statement = provenance.statement(provenance.ProvenanceInputs(
        repo, digest, res.path.name, hashlib.sha256(res.path.read_bytes()).hexdigest(),
        record.profile_hash, record.immutable_tag, bases,
        path_of(res.path).name if lock is not None else "",
        hashlib.sha256(lock).hexdigest() if lock is not None else "",
        {"builder": record.builder, "mode": res.resolved.mode}))
    return Evidence(doc, statement)


def _is_sbom(head: bytes) -> bool:
    """An SBOM dockergen wrote: sorted keys put ``bomFormat`` first."""
    return head.startswith(b'{\n  "bomFormat": "CycloneDX"')


def _is_statement(head: bytes) -> bool:
    """A statement dockergen wrote: sorted keys put ``_type`` first."""
    return head.startswith(b'{\n  "_type": "' + provenance.STATEMENT.encode())


def write(folder: Path, ev: Evidence) -> None:
    """Write both documents beside the build record (only over files dockergen wrote)."""
    atomic.write_file(folder / SBOM_FILE, sbom.dumps(ev.sbom), ours=_is_sbom)
    atomic.write_file(folder / PROVENANCE_FILE,
                      json.dumps(ev.statement, indent=2, sort_keys=True) + "\n",
                      ours=_is_statement)


def sign(key: str, record: BuildRecord, folder: Path, ev: Evidence,
         echo: Callable[[str], None]) -> tuple[str, ...]:
    """Sign every pushed repository's digest and attach both documents as signed
    attestations; return the references signed."""
    assert record.pushed
    signed = sorted({f"{refs.parse(r).name}@{d}" for r, d in record.pushed.items()})
    with tempfile.TemporaryDirectory(prefix="dockergen-attest-") as tmp:
        predicate = Path(tmp) / "slsa-predicate.json"  # cosign wraps it in its own statement
        predicate.write_text(json.dumps(ev.statement["predicate"], sort_keys=True))
        for image in signed:
            cosign.sign(key, image)
            cosign.attest(key, image, folder / SBOM_FILE, cosign.SBOM_TYPE)
            cosign.attest(key, image, predicate, cosign.PROVENANCE_TYPE)
            echo(f"signed {image} (signature, {cosign.SBOM_TYPE} SBOM and "
                 f"{cosign.PROVENANCE_TYPE} provenance attestations)")
    return tuple(signed)


def publish(res: Resolution, files: dict[str, bytes], daemon: ContainerDaemon,
            record: BuildRecord, bases: list[str], record_path: Path, sign_key: str | None,
            echo: Callable[[str], None]) -> BuildRecord:
    """After a push: write the SBOM and provenance, sign with ``sign_key`` (None: unsigned),
    and keep the record's ``bases`` and ``signed`` current."""
    digests = base_digests(daemon, bases)
    ev = evidence(res, daemon, record, digests, files)
    folder = record_path.parent
    problem = sbom.problems(ev.sbom)
    if problem is not None:  # dockergen wrote it: a bug, never a file for the user
        raise AssertionError(f"the SBOM dockergen made is not valid CycloneDX: {problem}")
    write(folder, ev)
    record = replace(record, bases=digests)
    record.write(record_path)
    if sign_key is not None:
        record = replace(record, signed=sign(sign_key, record, folder, ev, echo))
        record.write(record_path)
    return record

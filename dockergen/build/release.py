"""After a build: the context and build record written, the smoke tests, the push.

The build record is kept current at each step (built, smoke-failed, pushed or failed), and
written before anything is printed: a reader that went away must never cost the digests.
A push counts only when the registry confirmed a digest, and the immutable tag is never
moved.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from dockergen import refs as image_refs
from dockergen.build.run import BuildPlan, run_build
from dockergen.errors import DockergenError
from dockergen.input.buildrecord import BuildRecord, Status

if TYPE_CHECKING:
    from dockergen.build.daemon import ContainerDaemon
    from dockergen.build.options import BuildOptions
    from dockergen.pipeline import Resolution


def build_and_record(daemon: ContainerDaemon, res: Resolution, plan: BuildPlan,
                     options: BuildOptions, stage: str | None, immutable: str,
                     folder: Path, echo: Callable[[str], None],
                     out: Callable[[str], None]) -> BuildRecord:
    """Write the context, build, smoke-test and push, keeping the build record current at
    each step; return the record."""
    from dockergen.files import atomic
    from dockergen.outputs.dockerfile import LOG_FILE, RECORD_FILE, write_context
    from dockergen.trust.attest import PROVENANCE_FILE, SBOM_FILE

    # the evidence of a push is written beside the record after it (trust.attest)
    write_context(folder, res.files(),
                  later=(RECORD_FILE, LOG_FILE, SBOM_FILE, PROVENANCE_FILE))
    record = BuildRecord(res.resolved.profile.name, res.resolved.profile_hash, plan.builder,
                         tuple(plan.tags), immutable, stage=stage)
    record_path = folder / RECORD_FILE
    with atomic.open_new(folder / LOG_FILE) as log:  # the context was just swapped in
        try:
            result = run_build(daemon, res.files(), plan, options, log, sys.stderr)
        except DockergenError as exc:
            replace(record, status=Status.FAILED, error=str(exc).splitlines()[0]).write(record_path)
            raise
    record = replace(record, status=Status.BUILT, image_id=result.image_id,
                     seconds=result.seconds, counts=result.counts)
    echo(f"built {result.image_id} in {result.seconds:.1f}s "
         f"({result.counts.cached_steps} cached, {result.counts.executed_steps} run)")
    if options.smoke and stage is None:  # the smoke tests check the runtime stage
        record = _smoke(daemon, res, record, options.gpus, record_path, echo)
    elif stage is not None:
        record = replace(record, smoke_not_run=f"not run: --target {stage} is an "
                                               "intermediate stage")
    if options.push:  # it writes the record before it prints the digests
        return push(daemon, record, result.image_id, record_path, echo, out)
    # the record first: a reader that went away (a closed stdout) must not cost it
    record.write(record_path)
    out(result.image_id)
    return record


def _smoke(daemon: ContainerDaemon, res: Resolution, record: BuildRecord, gpus: bool,
           record_path: Path, echo: Callable[[str], None]) -> BuildRecord:
    """Run the smoke tests; on failure keep only the immutable tag, record and raise."""
    from dockergen.build.smoke import SmokeFailed, gpu_checks, smoke_test

    report = smoke_test(daemon, record.tags[0], res.resolved, gpus=gpus)
    if gpus:
        gpu_checks(daemon, record.tags[0], res.resolved, report)
    record = replace(record, smoke=tuple(report.checks))
    for check in report.checks:
        echo(f"smoke {'ok    ' if check.ok else 'FAILED'} {check.name}"
             + ("" if check.ok else f": {check.detail}"))
    if report.ok:
        return record
    keep = record.immutable_tag
    for ref in record.tags:  # keep only the immutable dg-<hash> tag
        if ref != keep:
            daemon.remove_image(ref)
    replace(record, status=Status.SMOKE_FAILED).write(record_path)
    failed = [c.name for c in report.checks if not c.ok]
    raise SmokeFailed(f"{len(failed)} smoke test(s) failed: {'; '.join(failed)}; nothing was "
                      f"pushed; the image stays as {keep} for inspection")


def push(daemon: ContainerDaemon, record: BuildRecord, image_id: str, record_path: Path,
         echo: Callable[[str], None], out: Callable[[str], None]) -> BuildRecord:
    """Push every tag; record the digests (or the failure) before returning or raising.

    The immutable tag is never moved: if the registry already has it under a digest that is
    not this image's, nothing is pushed (the same inputs built again, e.g. --no-cache, give
    another image; the tag keeps naming the first one).
    """
    from dockergen.build.daemon import PushError

    immutable = record.immutable_tag
    digests: dict[str, str] = {}
    try:
        existing = daemon.registry_digest(immutable)
        if existing is not None:
            repo = image_refs.parse(immutable).name
            if f"{repo}@{existing}" not in daemon.inspect(image_id).get("RepoDigests", []):
                raise PushError(
                    f"{immutable} already names {existing} in the registry and this build's "
                    f"image {image_id} is another one (the same inputs built again, e.g. with "
                    "--no-cache); nothing was pushed, the immutable tag is never moved; "
                    f"pull {immutable} to use the released image, or change an input")
        for ref in record.tags:
            digests[ref] = daemon.push(ref, on_status=echo)
            echo(f"pushed {ref}@{digests[ref]}")
    except DockergenError as exc:
        failed = replace(record, status=Status.PUSH_FAILED, pushed=digests, error=str(exc))
        failed.write(record_path)
        raise
    record = replace(record, status=Status.PUSHED, pushed=digests)
    record.write(record_path)  # before printing: the digests must never be lost
    for ref, digest in digests.items():
        out(f"{ref}@{digest}")
    return record

"""``dockergen build``: render, pull bases, build through the Engine API, tag, push, record.

The orchestration is here, one job per module beside it: the command line's values and
their checks (:mod:`dockergen.build.options`), one build through the engine
(:mod:`dockergen.build.run`), and what follows it: the record, the smoke tests and the push
(:mod:`dockergen.build.release`); several platforms make one image index
(:mod:`dockergen.build.multiplatform`). What a build pulls and which stages it has are read from
the resolved model (:func:`dockergen.outputs.dockerfile.stages`), never from the rendered text.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING

from dockergen.build.options import (
    BuildOptions,
    check_declared_args,
    check_options,
    check_stage,
    given_certificates,
    platforms_judged,
)
from dockergen.build.release import build_and_record
from dockergen.build.run import BuildPlan, run_build
from dockergen.errors import UsageError
from dockergen.knowledge import layers
from dockergen.resolve.buildid import content_tag

if TYPE_CHECKING:
    from dockergen.build.daemon import ContainerDaemon
    from dockergen.input.buildrecord import BuildRecord
    from dockergen.input.loader import Overrides
    from dockergen.pipeline import Resolution



def build_profile(path: Path, overrides: Overrides, options: BuildOptions, *,
                  output: Path | None = None, dry_run: bool = False,
                  ca_certs: tuple[Path, ...] = (), quiet: bool = False,
                  echo: Callable[[str], None] = print,
                  out: Callable[[str], None] = print,
                  daemon: ContainerDaemon | None = None) -> BuildRecord | None:
    """Render, build, smoke-test and (optionally) push a profile; return the build record.

    The profile is loaded once and resolved once (in the mode of the builder); ``echo``
    receives progress lines for people, ``out`` the result (digests or image id).
    ``daemon`` defaults to the local Docker engine (tests pass a fake).
    """
    from dockergen.pipeline import resolution, resolution_of

    check_options(options, ca_certs)
    builder = options.builder
    certificates = given_certificates(ca_certs)
    res = resolution(path, overrides, "classic" if builder == "classic" else "buildkit",
                     certificates=certificates)
    if builder == "auto" and not dry_run:
        if options.build_args:  # refused before the engine is asked anything
            check_declared_args(options.build_args, res.files()["Dockerfile"].decode())
        daemon = daemon or _connect()
        if not daemon.has_buildkit():  # the same loaded profile, resolved for classic
            res = resolution_of(res.loaded, "classic", certificates=certificates)
    return build(res, options, output=output, dry_run=dry_run, quiet=quiet, echo=echo,
                 out=out, daemon=daemon)


def _connect() -> ContainerDaemon:
    from dockergen.build.daemon import connect

    return connect()


def build(res: Resolution, options: BuildOptions, *, output: Path | None = None,
          dry_run: bool = False, quiet: bool = False, echo: Callable[[str], None] = print,
          out: Callable[[str], None] = print,
          daemon: ContainerDaemon | None = None) -> BuildRecord | None:
    """Build, smoke-test and (optionally) push a resolved profile's context in the mode it
    was resolved for; return the build record (None for a dry run)."""
    from dockergen.build.daemon import DaemonError

    builder = res.resolved.mode
    options = replace(options, platform=platforms_judged(res, options.platform))
    check_stage(options.stage, res.resolved)
    check_declared_args(options.build_args, res.files()["Dockerfile"].decode())
    if not quiet:
        for warning in res.resolved.warnings:
            echo(str(warning))
    plan, stage, immutable = _plan_of(res, options, builder)
    if dry_run:
        for line in plan.lines():
            out(line)
        return None
    if daemon is None:
        daemon = _connect()
        if builder == "buildkit" and not daemon.has_buildkit():
            raise DaemonError("this Docker engine has no BuildKit; use --builder classic")
    problem = layers.engine_problem(plan.compression, builder, daemon.image_store(),
                                    res.at("image", "compression"))
    if problem is not None:  # before anything is written or built
        raise layers.EngineCannotWrite([problem])
    folder = output or Path("build") / res.resolved.profile.name
    if options.platform and "," in options.platform:
        return _build_index(daemon, res, plan, options, stage, immutable, folder, echo, out)
    record = build_and_record(daemon, res, plan, options, stage, immutable, folder, echo, out)
    if options.push:  # the SBOM and provenance of what was pushed; signed with --sign
        from dockergen.outputs.dockerfile import RECORD_FILE
        from dockergen.trust.attest import publish

        record = publish(res, res.files(), daemon, record, plan.pulls, folder / RECORD_FILE,
                         options.sign_key, echo)
    return record


def _build_index(daemon: ContainerDaemon, res: Resolution, plan: BuildPlan,
                 options: BuildOptions, stage: str | None, immutable: str, folder: Path,
                 echo: Callable[[str], None], out: Callable[[str], None]) -> BuildRecord:
    """Several platforms: the one-platform build, once per platform, under
    :mod:`dockergen.build.multiplatform`, which smoke-tests each and writes the index."""
    from dockergen.build import multiplatform
    from dockergen.platforms import parse_list

    if stage is not None:
        raise UsageError(f"--target {stage}: an image index is built of final images only; "
                         "build an intermediate stage for one platform")
    refused = multiplatform.problem(tuple(plan.tags), immutable, plan.builder)
    if refused:
        raise UsageError(refused)

    def build_one(platform: str, tag: str, log: IO[str]) -> tuple[str, float]:
        result = run_build(daemon, res.files(), replace(plan, tags=[tag]),
                           replace(options, platform=platform), log, sys.stderr)
        return result.image_id, result.seconds

    job = multiplatform.IndexBuild(parse_list(options.platform or ""), plan.builder,
                                   tuple(plan.tags), immutable, options.smoke, options.gpus,
                                   options.push)
    return multiplatform.build_index(daemon, res, job, build_one, folder, echo, out)


def _plan_of(res: Resolution, options: BuildOptions, builder: str
             ) -> tuple[BuildPlan, str | None, str]:
    """(the build plan, the intermediate stage built or None, the content tag); the pulls
    and the final stage are the model's (:func:`dockergen.outputs.dockerfile.stages`)."""
    from dockergen.outputs.dockerfile import base_images, stages

    final = stages(res.resolved)[-1].name
    stage = None if options.stage in (None, final) else options.stage
    if stage is not None and options.push:
        raise UsageError(f"--push of the intermediate stage {stage!r} is refused: only the "
                         "final stage is smoke-tested and released; build it without --push")
    files = res.files()
    image = res.resolved.profile.image.name
    immutable = f"{image}:" + content_tag(files, mode=builder, build_args=options.build_args,
                                          stage=stage, platform=options.platform)
    # an intermediate stage is not the release: it never gets the release tags
    refs = [] if stage else [f"{image}:{t}" for t in res.resolved.tags]
    refs += [immutable, *options.tags]
    plan = BuildPlan(res.resolved.profile.name, builder, sorted(files),
                     base_images(res.resolved), refs, options.build_args,
                     res.resolved.profile.image.compression)
    return plan, stage, immutable

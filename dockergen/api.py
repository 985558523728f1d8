"""The programmatic interface: profile path in, resolved profile / Dockerfile / context out.

The CLI and the tests use these functions; they raise :class:`DockergenError` subclasses
for user mistakes and never print.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dockergen.errors import Problem
from dockergen.loader import load_profile
from dockergen.resolve import Mode, Resolved, resolve
from dockergen.resources import shipped_profiles
from dockergen.yamlsource import read_yaml_file


@dataclass(frozen=True)
class RenderedContext:
    """A build context ready to be written or sent to an engine."""

    name: str
    resolved: Resolved
    files: dict[str, bytes]

    @property
    def warnings(self) -> list[Problem]:
        return self.resolved.warnings


def resolve_profile(path: Path, overrides: tuple[str, ...] = (),
                    mode: Mode = "buildkit") -> Resolved:
    """Load, check and resolve a profile file."""
    return resolve(load_profile(path, overrides), mode)


def render_profile(path: Path, overrides: tuple[str, ...] = (), mode: Mode = "buildkit",
                   syntax: str | None = None) -> tuple[Resolved, str]:
    """Resolve a profile and render its Dockerfile text."""
    from dockergen.render import render_dockerfile

    resolved = resolve_profile(path, overrides, mode)
    return resolved, render_dockerfile(resolved, syntax)


def render_context(path: Path, overrides: tuple[str, ...] = (), mode: Mode = "buildkit",
                   syntax: str | None = None) -> RenderedContext:
    """Resolve a profile and assemble its whole build context in memory."""
    from dockergen.render import build_context, render_dockerfile

    loaded = load_profile(path, overrides)
    resolved = resolve(loaded, mode)
    certs = [loaded.path.parent / c for c in resolved.profile.build.ca_certificates]
    files = build_context(resolved, certs)
    files["Dockerfile"] = render_dockerfile(resolved, syntax).encode()
    return RenderedContext(resolved.profile.name, resolved, files)


def _is_abstract(path: Path) -> bool:
    data, _ = read_yaml_file(path, path.name)
    return isinstance(data, dict) and data.get("abstract") is True


def shipped_renderable() -> list[Path]:
    """Shipped profiles that render on their own (not the abstract bases)."""
    return [p for p in shipped_profiles() if not _is_abstract(p)]


def describe_shipped() -> list[tuple[str, str]]:
    """(name, description) of every shipped profile."""
    out = []
    for path in shipped_profiles():
        data, _ = read_yaml_file(path, path.name)
        data = data if isinstance(data, dict) else {}
        if data.get("abstract") is True:
            out.append((path.stem, "(abstract: defaults the others extend)"))
        else:
            out.append((path.stem, str(data.get("description", ""))))
    return out


def build_profile(path: Path, overrides: tuple[str, ...] = (), *, output: Path | None = None,
                  builder: str = "auto", tags: tuple[str, ...] = (), no_cache: bool = False,
                  build_args: dict[str, str] | None = None, target: str | None = None,
                  platform: str | None = None, progress: str = "auto", push: bool = False,
                  dry_run: bool = False, ca_certs: tuple[Path, ...] = (),
                  timeout: float | None = None, network: str | None = None,
                  smoke: bool = True, gpus: bool = False, pull: bool = False,
                  quiet: bool = False,
                  echo: Callable[[str], None] = print,
                  out: Callable[[str], None] = print) -> dict[str, Any] | None:
    """Render, build, tag and (optionally) push a profile; return the build record."""
    import sys

    from dockergen.build import (
        BuildOptions,
        BuildPlan,
        UnsafeInput,
        base_images,
        check_build_args,
        run_build,
        write_record,
    )
    from dockergen.engine import EngineError
    from dockergen.errors import DockergenError
    from dockergen.render import write_context
    from dockergen.smoke import SmokeFailed, gpu_checks, smoke_test

    build_args = dict(build_args or {})
    check_build_args(build_args)
    if push and not smoke:
        raise UnsafeInput("--push needs the smoke tests: drop --no-smoke")
    if ca_certs:
        loaded = load_profile(path, overrides)
        existing = [str((loaded.path.parent / c).resolve())
                    for c in loaded.profile.build.ca_certificates]
        extra = [str(c.resolve()) for c in ca_certs]
        overrides = (*overrides, f"build.ca_certificates=[{', '.join(existing + extra)}]")
    engine = None
    chosen = builder
    if builder == "auto":
        if dry_run:
            chosen = "buildkit"
        else:
            from dockergen.engine import Engine

            engine = Engine()
            chosen = "buildkit" if engine.has_buildkit() else "classic"
    mode = "buildkit" if chosen == "buildkit" else "classic"
    ctx = render_context(path, overrides, mode)  # type: ignore[arg-type]
    if not quiet:
        for w in ctx.warnings:
            echo(str(w))
    repo = ctx.resolved.profile.image.name
    refs = [f"{repo}:{t}" for t in ctx.resolved.tags] + list(tags)
    dockerfile = ctx.files["Dockerfile"].decode()
    plan = BuildPlan(ctx.name, chosen, sorted(ctx.files), base_images(dockerfile, build_args),
                     refs, build_args)
    if dry_run:
        for line in plan.lines():
            out(line)
        return None
    if engine is None:
        from dockergen.engine import Engine

        engine = Engine()
        if chosen == "buildkit" and not engine.has_buildkit():
            raise EngineError("this engine has no BuildKit; use --builder classic")
    folder = output or Path("build") / ctx.name
    write_context(folder, ctx.files)
    record: dict[str, Any] = {
        "profile": ctx.name, "profile_hash": ctx.resolved.profile_hash, "builder": chosen,
        "tags": refs, "status": "started",
    }
    with open(folder / "build.log", "w", encoding="utf-8") as log:
        try:
            result = run_build(engine, ctx.files, plan, BuildOptions(
                builder=chosen, tags=tags, no_cache=no_cache, build_args=build_args,
                target=target, platform=platform, progress=progress, push=push,
                timeout=timeout, network=network, pull=pull), log, sys.stderr)
        except DockergenError as exc:
            record.update(status="failed", error=str(exc).splitlines()[0])
            write_record(folder / "build-record.json", record)
            raise
    record.update(status="built", image_id=result.image_id, seconds=result.seconds,
                  **result.summary)
    echo(f"built {result.image_id} in {result.seconds:.1f}s "
         f"({result.summary['cached_steps']} cached, {result.summary['executed_steps']} run)")
    if smoke:
        report = smoke_test(engine, refs[0], ctx.resolved, gpus=gpus)
        if gpus:
            gpu_checks(engine, refs[0], ctx.resolved, report)
        record["smoke"] = report.as_dict()
        for check in report.checks:
            echo(f"smoke {'ok    ' if check.ok else 'FAILED'} {check.name}"
                 + ("" if check.ok else f": {check.detail}"))
        if not report.ok:
            keep = refs[len(ctx.resolved.tags) - 1]  # the immutable dg-<hash> tag
            for ref in refs:
                if ref != keep:
                    engine.remove_image(ref)
            record.update(status="smoke-failed")
            write_record(folder / "build-record.json", record)
            failed = [c.name for c in report.checks if not c.ok]
            raise SmokeFailed(f"{len(failed)} smoke test(s) failed: {'; '.join(failed)}; "
                              f"nothing was pushed; the image stays as {keep} for inspection")
    if push:
        digests: dict[str, str] = {}
        try:
            for ref in refs:
                digests[ref] = engine.push(ref, on_status=echo)
                echo(f"pushed {ref}@{digests[ref]}")
        except DockergenError as exc:
            record.update(status="push-failed", pushed=digests, error=str(exc))
            write_record(folder / "build-record.json", record)
            raise
        record.update(status="pushed", pushed=digests)
        for ref, digest in digests.items():
            out(f"{ref}@{digest}")
    else:
        out(result.image_id)
    write_record(folder / "build-record.json", record)
    return record

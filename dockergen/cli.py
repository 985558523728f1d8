"""The ``dockergen`` command: the only module that prints or exits.

Every user mistake arrives here as a :class:`DockergenError` and leaves as clear lines on
stderr and a distinct exit code (see :class:`ExitCode`); anything else is a bug and keeps
its traceback.
May import: anything of dockergen (it is the top: nothing imports it).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from dockergen import __version__
from dockergen.errors import (
    DockergenError,
    ExitCode,
    OutputError,
    ProfileError,
    holds_secret,
    redact,
)

if TYPE_CHECKING:  # the loader (pydantic) is imported by the commands that need it
    pass

F = TypeVar("F", bound=Callable[..., Any])

# How dockergen.loader.parse_set reads a --set value; docs/commands.md says the same, and
# tests/test_set_origins.py checks each kind against the parser.
SET_HELP = ("Override a profile field before validation. A text field (python, cuda.version, "
            "serving.model, ...) takes VALUE as it is, without quotes: python=3.10 is the text "
            "\"3.10\". Any other field reads VALUE as YAML: numbers and true/false as such "
            "(serving.max_model_len=16384), lists and mappings in flow style "
            "(gpu.targets=[h100,l40s], serving.env={VLLM_LOGGING_LEVEL: INFO}), null to unset "
            "(matrix=null). FIELD enters mappings (serving.env.NAME=VALUE); a list is "
            "replaced whole.")

_set_option = click.option(
    "--set", "overrides", multiple=True, metavar="FIELD=VALUE", help=SET_HELP)
_mode_option = click.option(
    "--mode", type=click.Choice(["buildkit", "classic"]), default="buildkit", show_default=True,
    help="classic: no BuildKit-only syntax (for engines without BuildKit).")


class _OutputClosed(Exception):
    """The reader of our output went away (``dockergen explain | head``).

    Deliberately not an OSError: click turns a broken pipe into exit 1, the "dockergen bug"
    code, before our handler in :func:`main` could see it.
    """

    def __init__(self, command: str | None) -> None:
        super().__init__(command)
        self.command = command


# the command an interrupt stopped (its context is gone by the time main() sees it)
_interrupted_command: str | None = None


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        global _interrupted_command
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise _OutputClosed(ctx.invoked_subcommand) from None
        except KeyboardInterrupt:
            _interrupted_command = ctx.invoked_subcommand
            raise


class _StdoutFailed(Exception):
    """Writing our standard output failed: a full disk or /dev/full, an I/O error, a closed
    descriptor. Not an OSError, so that no other OSError (a file we write reports its own
    OutputError; a bug keeps its traceback) is ever taken for it."""


class _GuardedStdout(io.TextIOBase):
    """sys.stdout, its write errors told apart (:class:`_StdoutFailed`); also stands in
    for a stdout the process was started without (`>&-`: sys.stdout is None, and click
    would drop everything printed without a word)."""

    def __init__(self, stream: Any) -> None:
        super().__init__()
        self._stream = stream

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", None) or "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return bool(self._stream is not None and self._stream.isatty())

    def write(self, text: str) -> int:
        return int(self._guarded(lambda: self._stream.write(text)))

    def flush(self) -> None:
        if self._stream is not None:
            self._guarded(self._stream.flush)

    def _guarded(self, call: Callable[[], Any]) -> Any:
        if self._stream is None:
            raise _StdoutFailed("standard output is closed")
        try:
            return call()
        except BrokenPipeError:  # the reader went away; click would make --help's exit 1
            ctx = click.get_current_context(silent=True)
            raise _OutputClosed(ctx.info_name if ctx is not None and ctx.parent else None
                                ) from None
        except OSError as exc:
            raise _StdoutFailed(exc.strerror or str(exc)) from None


def _path_given(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """-o '' is no path: it printed to stdout (render, schema) or named the working folder."""
    if value == "":
        raise click.BadParameter("is empty; give a path, or leave -o out to print")
    return value


def _folder_given(ctx: click.Context, param: click.Parameter, value: str | None
                  ) -> str | None:
    """-o of a command that writes a folder: '-' (standard output) cannot hold one."""
    if value == "-":
        raise click.BadParameter("'-' is standard output, which cannot hold a folder; give "
                                 "a folder path")
    return _path_given(ctx, param, value)


def _stdout(output: str | None) -> bool:
    """-o left out or '-': the output goes to standard output."""
    return output is None or output == "-"


# -q also applies to the warnings that come with errors, which main() prints after the
# command has ended; the option's callback records it for that.
_quiet = False
# `build --dry-run` only prints its plan: a reader that stops early is no failure (0, as
# for explain), unlike a real build whose progress stream was cut off (141).
_build_prints_only = False


def _remember_quiet(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    global _quiet
    _quiet = _quiet or value
    return value


_quiet_option = click.option("-q", "--quiet", is_flag=True, callback=_remember_quiet,
                             help="Do not print warnings.")


def _warn(lines: list[str], quiet: bool) -> None:
    if not quiet:
        for line in lines:
            click.echo(line, err=True)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dockergen")
def cli() -> None:
    """Validated, deterministic multi-stage Dockerfiles for GPU LLM-inference images.

    Exit codes: 0 ok, 2 invalid profile, 3 engine, tool or registry unavailable, 4 output
    not written, 5 build failed, 6 smoke test failed, 7 push failed, 8 base-image lock
    stale, 124 timeout, 130 interrupted, 141 build output closed, 64 wrong usage, 1 a
    dockergen bug.

    --set FIELD=VALUE (every command that reads a profile): a text field takes VALUE as it
    is (python=3.10 is the text "3.10"); any other field reads it as YAML
    (gpu.targets=[h100,l40s]). `dockergen render --help` says more.
    """


_strict_option = click.option(
    "--strict", is_flag=True, help="A matrix point that does not validate is an error "
                                   "(default: it is dropped with its problems printed).")


def _check_syntax(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--syntax is an image reference: it becomes line 1 of the Dockerfile, so a newline in
    it would add an instruction (and an empty one would silently emit nothing)."""
    from dockergen.profile import check_reference

    if value is not None:
        try:
            check_reference("image_ref", value)
        except ValueError as exc:
            raise click.BadParameter(f"{exc}; e.g. docker/dockerfile:1") from None
    return value


@cli.command()
@click.argument("profile", required=False, type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(file_okay=False), callback=_path_given,
              help="Write a build context (Dockerfile, .dockerignore, lock file) and a "
                   "docker-bake.hcl to this folder.")
@click.option("--all", "render_all", is_flag=True,
              help="Render every shipped profile into OUTPUT/<name>/ and OUTPUT/docker-bake.hcl.")
@_set_option
@_mode_option
@click.option("--syntax", metavar="IMAGE", callback=_check_syntax,
              help="Emit a '# syntax=IMAGE' parser directive (needs that frontend image).")
@_strict_option
@_quiet_option
def render(profile: str | None, output: str | None, render_all: bool,
           overrides: tuple[str, ...], mode: str, syntax: str | None, strict: bool,
           quiet: bool) -> None:
    """Render PROFILE to a Dockerfile (stdout) or a build context and bake file (-o DIR).

    A profile with a matrix renders one context per valid point into DIR/<variant>/ and
    a DIR/docker-bake.hcl listing them. Base images are pinned by digest when a lock
    (PROFILE.lock.json, see `dockergen lock`) is beside the profile.
    """
    from dockergen.api import shipped_renderable
    from dockergen.fleet import bake
    from dockergen.fleet.project import (
        bake_text,
        check_bake_destination,
        collect,
        previous_variants,
    )
    from dockergen.render import write_context, write_contexts

    if render_all == bool(profile):
        raise click.UsageError("give either PROFILE or --all")
    if render_all and _stdout(output):
        raise click.UsageError("--all needs -o DIR")
    paths = shipped_renderable() if render_all else [Path(profile)]  # type: ignore[arg-type]
    fleet = collect(paths, overrides, mode, syntax, strict=strict)  # type: ignore[arg-type]
    matrix = any(t.group for t in fleet.targets)
    if _stdout(output) and matrix:
        names = ", ".join(t.name for t in fleet.targets)
        raise click.UsageError(f"{profile} is a matrix of {len(fleet.targets)} variants "
                               f"({names}); write them all with -o DIR")
    _warn(fleet.dropped_lines(), quiet)
    _warn(fleet.warnings(), quiet)
    if _stdout(output):
        click.echo(fleet.targets[0].files["Dockerfile"].decode(), nl=False)
        return
    out = Path(output)  # type: ignore[arg-type]
    if render_all or matrix:
        text = bake_text(fleet, single_context=False)  # checks cache refs before any write
        # the variants and the bake file change together; variants an earlier run wrote
        # that this one does not (an excluded point) go with the change
        write_contexts(out, {t.name: t.files for t in fleet.targets},
                       {bake.BAKE_FILE: text.encode()},
                       retired=tuple(sorted(set(previous_variants(out / bake.BAKE_FILE))
                                            - {t.name for t in fleet.targets})),
                       top_ours=check_bake_destination)
        for target in fleet.targets:
            click.echo(f"wrote {out / target.name}", err=True)
        click.echo(f"wrote {out / bake.BAKE_FILE}", err=True)
        return
    target = fleet.targets[0]
    files = {**target.files, bake.BAKE_FILE: bake_text(fleet, single_context=True).encode()}
    write_context(out, dict(sorted(files.items())))
    click.echo(f"wrote {output}", err=True)


_WEEK_S = 7 * 24 * 3600  # the longest --timeout: a longer one is taken for a typo

# What uv's --python-platform accepts for a Linux GPU image: glibc targets only (the
# images are Ubuntu/Debian), src: `uv pip compile --help` of the uv dockergen pins.
_LOCK_PLATFORM = r"(?:x86_64|aarch64)-(?:manylinux2014|manylinux_2_[0-9]{2}|unknown-linux-gnu)"


def _check_python_lock_options(python_platform: str | None, torch_index: str | None) -> None:
    """`lock --python` options, refused before uv runs (it would report them as exit 2)."""
    import re

    from dockergen.profile import _PATTERNS

    if python_platform is not None and not re.fullmatch(_LOCK_PLATFORM, python_platform):
        raise click.UsageError(f"--python-platform {python_platform!r}: expected a Linux glibc "
                               "platform like x86_64-manylinux_2_35 or "
                               "aarch64-manylinux_2_28 (uv pip compile --help lists them)")
    url, _ = _PATTERNS["url"]
    if torch_index is not None and not url.fullmatch(torch_index):
        raise click.UsageError(f"--torch-index {torch_index!r}: expected an http(s) URL "
                               "without credentials or query, e.g. "
                               "https://download.pytorch.org/whl/cu130")


def _python_lock(path: Path, overrides: tuple[str, ...], check: bool,
                 python_platform: str | None, torch_index: str | None) -> None:
    """`dockergen lock --python`: write or check one profile's hashed Python lock."""
    from dockergen import owners, pylock

    inp = pylock.inputs_of(path, overrides, platform=python_platform, torch_index=torch_index)
    target = pylock.default_path(path)
    if check:
        pylock.check_matches(target, inp, path)
        click.echo(f"{target}: matches {path}")
        return
    text = pylock.compile_lock(inp)
    bad = pylock.verify_sources(text, inp)
    if bad:
        raise pylock.LockError("the resolved closure mixes indexes: " + "; ".join(bad))
    unchecked = owners.check(text)  # two wheels writing one file: refused before any build
    if unchecked:
        click.echo("file ownership not checked for what has no wheel on its index (its files "
                   "are known once built; the image's smoke check reads them): "
                   + ", ".join(unchecked), err=True)
    try:
        pylock.write_lock(target, text)
    except OSError as exc:
        raise OutputError(f"{target}: cannot write: {exc.strerror}") from None
    count = sum(1 for line in text.splitlines() if "==" in line and not line.startswith("#"))
    click.echo(f"wrote {target} ({count} packages, torch from {inp.torch_index})")


@cli.command()
@click.argument("profiles", nargs=-1, required=True, type=click.Path(dir_okay=False))
@_set_option
@_strict_option
@_quiet_option
def validate(profiles: tuple[str, ...], overrides: tuple[str, ...], strict: bool,
             quiet: bool) -> None:
    """Check one or more profiles; print every problem found (matrices: every point)."""
    from dockergen.checks import validate_profile
    from dockergen.fleet.matrix import MatrixError
    from dockergen.loader import check_abstract

    problems: list[Any] = []
    dropped: list[Any] = []
    for path in profiles:
        try:
            if check_abstract(Path(path), overrides):
                click.echo(f"{path}: ok (abstract: its fields are checked; the compatibility "
                           "rules run on the profiles that extend it)")
                continue
            # every check any command runs (dockergen/checks.py): never pass what one refuses
            fleet, found = validate_profile(Path(path), overrides)
        except ProfileError as exc:
            problems.extend(exc.problems)
            continue
        dropped += [d for _, d in fleet.dropped]
        if strict and fleet.dropped:
            continue  # reported as errors below
        _warn(fleet.dropped_lines(), quiet)
        _warn(fleet.warnings(), quiet)
        if found:
            problems.extend(found)
            continue
        if fleet.matrices:
            names = next(iter(fleet.matrices.values()))
            extra = [f"{len(fleet.excluded)} excluded"] if fleet.excluded else []
            extra += [f"{len(fleet.dropped)} dropped"] if fleet.dropped else []
            click.echo(f"{path}: ok: {len(names)} variants: {', '.join(names)}"
                       + (f" ({', '.join(extra)})" if extra else ""))
        else:
            click.echo(f"{path}: ok")
    if problems or (strict and dropped):
        raise MatrixError(dropped if strict else [], problems)


@cli.command()
@click.argument("profiles", nargs=-1, required=True, type=click.Path(dir_okay=False))
@_set_option
@click.option("--check", is_flag=True,
              help="Only check (offline) that the lock holds every base image the profiles "
                   "ask for; exit 8 if not.")
@click.option("--remote", is_flag=True,
              help="With --check: also ask the registry whether a locked tag has moved.")
@click.option("--update", is_flag=True, help="Resolve every image again and move the pins.")
@click.option("--mirror", "mirrors", multiple=True, metavar="SRC=DST",
              help="Resolve and pull images of repository SRC from DST instead, e.g. "
                   "nvidia/cuda=registry.example.com/mirror/cuda (repeatable).")
@click.option("--python", "python_lock", is_flag=True,
              help="Instead: resolve each PROFILE's Python closure into a hashed "
                   "PROFILE.python.lock (uv pip compile; the torch family only from the "
                   "CUDA-matched index). With --check: the lock still matches the profile.")
@click.option("--python-platform", metavar="PLATFORM",
              help="With --python: uv --python-platform (default: from cuda.os, e.g. "
                   "x86_64-manylinux_2_35 for ubuntu22.04).")
@click.option("--torch-index", metavar="URL",
              help="With --python: resolve the torch family from this index instead.")
def lock(profiles: tuple[str, ...], overrides: tuple[str, ...], check: bool, remote: bool,
         update: bool, mirrors: tuple[str, ...], python_lock: bool,
         python_platform: str | None, torch_index: str | None) -> None:
    """Pin the base images of PROFILE... by digest in PROFILE.lock.json (registry API v2).

    Credentials come from your docker config (docker login). render then writes
    FROM repo:tag@sha256:... lines. Without --update, images already locked keep their pin.
    With --python: the Python closure instead, in PROFILE.python.lock (dockergen/pylock.py).
    """
    if python_lock:
        if remote or update or mirrors:
            raise click.UsageError("--python goes with --check only")
        _check_python_lock_options(python_platform, torch_index)
        for path in profiles:
            _python_lock(Path(path), overrides, check, python_platform, torch_index)
        return
    from dockergen.fleet import locks
    from dockergen.fleet.project import collect

    if python_platform or torch_index:
        raise click.UsageError("--python-platform and --torch-index go with --python")
    if remote and not check:
        raise click.UsageError("--remote goes with --check")
    if check and (update or mirrors):
        raise click.UsageError("--check only reads the lock; drop --update/--mirror")
    from dockergen.refs import is_reference

    mirror_map: dict[str, str] = {}
    for item in mirrors:
        src, sep, dst = item.partition("=")
        if not sep or not all(is_reference(r, tag=False, digest=False) for r in (src, dst)):
            raise click.UsageError(f"--mirror {item!r}: expected SRC=DST repositories (no "
                                   "scheme, tag, digest or credentials: `docker login` "
                                   "holds those), e.g. "
                                   "nvidia/cuda=registry.example.com/mirror/cuda")
        mirror_map[src] = dst
    stale: list[str] = []
    for path in profiles:
        fleet = collect([Path(path)], overrides, pin=False, render=False)
        images: dict[str, locks.BaseImage] = {}
        for target in fleet.targets:
            for image in target.images:
                images.setdefault(image.ref, image)
        lock_file = locks.lock_path(Path(path))
        if check:
            lines = locks.check_lock(lock_file, list(images.values()), remote=remote)
            stale += lines
            if not lines:
                click.echo(f"{lock_file}: ok ({len(images)} images)")
            continue
        refs = [ref for ref in images if "@" not in ref]
        changed = locks.update_lock(lock_file, refs, update=update, mirrors=mirror_map,
                                    echo=click.echo)
        click.echo(f"wrote {lock_file}" if changed else f"{lock_file}: up to date", err=True)
    if stale:
        raise locks.LockStaleError(stale)


@cli.command()
@click.argument("profiles", nargs=-1, required=True, type=click.Path(dir_okay=False))
@_set_option
@click.option("--index", metavar="URL", default=None,
              help="Simple-API index to read (PEP 691 JSON or PEP 503 HTML); default: the "
                   "profile's build.pip_index_url, else PyPI. Credentials: "
                   "DOCKERGEN_INDEX_USERNAME/DOCKERGEN_INDEX_PASSWORD or netrc.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def outdated(profiles: tuple[str, ...], overrides: tuple[str, ...], index: str | None,
             as_json: bool) -> None:
    """Newer releases of each profile's engine and pinned packages, and the rules' verdict
    on the profile moved to each. Exit 9 when one is valid (for scheduled CI)."""
    from dockergen import outdated as out

    if index is not None and not out.is_index_url(index):
        raise click.BadParameter("give an http(s) URL without credentials (they come from "
                                 f"{out.USER_ENV}/{out.PASSWORD_ENV} or netrc)",
                                 param_hint="--index")
    reports = [out.check(Path(p), overrides, index) for p in profiles]
    click.echo(out.to_json(reports) if as_json else out.to_text(reports), nl=False)
    valid = [f"{name} {version} ({r.profile})" for r in reports
             for name, version in r.valid_newer()]
    if valid:
        raise out.OutdatedError(f"dockergen: {len(valid)} newer release(s) the profile can "
                                f"move to as it is: {', '.join(valid)}")


@cli.command()
@click.argument("profile", type=click.Path(dir_okay=False))
@_set_option
@click.option("--to", "to", metavar="VERSION", default=None,
              help="Check the move to this release only (default: every newer release).")
@click.option("--driver", metavar="VERSION", default=None,
              help="The NVIDIA driver of the fleet (e.g. 570.124.06): CUDA versions that "
                   "need a newer one are not proposed.")
@click.option("--index", metavar="URL", default=None,
              help="Simple-API index to read; default: build.pip_index_url, else PyPI.")
@click.option("--write", is_flag=True,
              help="Write the proposal next to PROFILE: a profile extending it with the "
                   "changed fields, and a knowledge file for a release dockergen lacks. "
                   "PROFILE itself is never rewritten.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
def upgrade(profile: str, overrides: tuple[str, ...], to: str | None, driver: str | None,
            index: str | None, write: bool, as_json: bool) -> None:
    """Propose the newest release of PROFILE's engine that passes every rule on its GPUs,
    deriving the facts of releases dockergen lacks from the index; show what changes."""
    from packaging.version import InvalidVersion, Version

    from dockergen import outdated as out
    from dockergen import upgrade as up

    if index is not None and not out.is_index_url(index):
        raise click.BadParameter("give an http(s) URL without credentials (they come from "
                                 f"{out.USER_ENV}/{out.PASSWORD_ENV} or netrc)",
                                 param_hint="--index")
    for name, value in (("--to", to), ("--driver", driver)):
        try:
            if value is not None:
                Version(value)
        except InvalidVersion:
            raise click.BadParameter(f"{value!r} is not a version like 1.2.3",
                                     param_hint=name) from None
    result = up.plan(Path(profile), overrides, index, to, driver)
    click.echo(up.to_json(result) if as_json else up.to_text(result), nl=False)
    if write:
        for path in up.write(result, Path(profile)):
            click.echo(f"wrote {path}", err=True)


@cli.command()
@click.argument("profile", type=click.Path(dir_okay=False))
@_set_option
@_mode_option
def explain(profile: str, overrides: tuple[str, ...], mode: str) -> None:
    """Show each derived setting of PROFILE and the rule and source that chose it."""
    from dockergen.api import resolve_profile

    resolved = resolve_profile(Path(profile), overrides, mode)  # type: ignore[arg-type]
    click.echo(f"{resolved.profile.name} ({' <- '.join(resolved.chain)}), "
               f"hash {resolved.profile_hash}")
    width = max(len(d.key) for d in resolved.derivations)
    for d in resolved.derivations:
        value = d.value if d.value else "(flag)"
        click.echo(f"  {d.key.ljust(width)}  {value}")
        click.echo(f"  {''.ljust(width)}    why: {d.reason}")
        if d.src:
            click.echo(f"  {''.ljust(width)}    src: {d.src}")
    click.echo("  tags: " + ", ".join([*resolved.tags, "dg-<hash of the build's inputs: context, "
                                       "build args, target, platform, mode, dockergen version> "
                                       "(added by build)"]))
    for w in resolved.warnings:
        click.echo(f"warning: {w}")


@cli.command()
@click.argument("profile", type=click.Path(dir_okay=False))
@_set_option
@click.option("-o", "--output", type=click.Path(file_okay=False), callback=_folder_given,
              help="Build context folder (default: build/<profile name>); the build log and "
                   "build record are written there too.")
@click.option("--builder", type=click.Choice(["auto", "buildkit", "classic"]), default="auto",
              show_default=True, help="classic renders without BuildKit-only syntax.")
@click.option("--tag", "tags", multiple=True, metavar="REF", help="Extra tag (repeatable).")
@click.option("--no-cache", is_flag=True, help="Do not use the build cache.")
@click.option("--build-arg", "build_args", multiple=True, metavar="NAME=VALUE",
              help="Build argument NAME=VALUE (repeatable). Base images are not build args: "
                   "use --set cuda.devel_image=... or a lock with --mirror.")
@click.option("--target", help="Build only up to this stage.")
@click.option("--platform", help="Target platform, e.g. linux/amd64.")
@click.option("--progress", type=click.Choice(["auto", "tty", "plain", "json"]), default="auto",
              show_default=True)
@click.option("--push", is_flag=True, help="Push every tag after a successful build.")
@click.option("--dry-run", is_flag=True,
              help="Print the plan (context, pulls, tags); build nothing.")
@click.option("--ca-cert", "ca_certs", multiple=True, type=click.Path(dir_okay=False),
              help="Extra CA certificate (PEM) for the build stages (repeatable).")
@click.option("--timeout", type=float, help="Cancel the build after this many seconds.")
@click.option("--network", type=click.Choice(["default", "host", "none"]), default="default",
              help="Network of RUN steps (host: reach a mirror on the build host's loopback).")
@click.option("--pull", is_flag=True,
              help="Pull base images even when they exist locally (default: only missing).")
@click.option("--no-smoke", is_flag=True, help="Skip the smoke tests (not with --push).")
@click.option("--gpus", is_flag=True, help="Also run the GPU smoke tests (needs a GPU host).")
@_quiet_option
def build(profile: str, overrides: tuple[str, ...], output: str | None, builder: str,
          tags: tuple[str, ...], no_cache: bool, build_args: tuple[str, ...],
          target: str | None, platform: str | None, progress: str, push: bool, dry_run: bool,
          ca_certs: tuple[str, ...], timeout: float | None, network: str, pull: bool,
          no_smoke: bool, gpus: bool, quiet: bool) -> None:
    """Render PROFILE, build it through the Docker Engine API, and optionally push it."""
    import math

    global _build_prints_only
    _build_prints_only = dry_run
    from dockergen.build import BuildOptions, build_profile

    # nan and -1 cancelled the build at once, 0 meant none, inf crashed the timer thread
    if timeout is not None and not (math.isfinite(timeout) and 0 < timeout <= _WEEK_S):
        raise click.UsageError(f"--timeout {timeout}: expected seconds, more than 0 and at "
                               f"most {_WEEK_S} (a week); leave it out for no limit")
    args: dict[str, str] = {}
    for item in build_args:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.UsageError(f"--build-arg {item!r}: expected NAME=VALUE")
        args[name] = value
    options = BuildOptions(
        builder=builder, tags=tags, no_cache=no_cache, build_args=args, target=target,
        platform=platform, progress=progress, push=push, timeout=timeout,
        network=None if network == "default" else network, pull=pull, smoke=not no_smoke,
        gpus=gpus)
    build_profile(Path(profile), overrides, options, output=Path(output) if output else None,
                  dry_run=dry_run, ca_certs=tuple(Path(c) for c in ca_certs), quiet=quiet,
                  echo=lambda text: click.echo(text, err=True), out=click.echo)


@cli.command()
@click.argument("profile", required=False, type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["compose", "k8s"]), required=True,
              help="compose: a Compose file; k8s: Deployment + Service.")
@click.option("--record", type=click.Path(dir_okay=False),
              help="build-record.json of `dockergen build --push`: pin the image by digest.")
@click.option("-o", "--output", type=click.Path(), callback=_path_given,
              help="Write to this file (with --all: a folder, OUTPUT/<name>/FILE).")
@click.option("--all", "deploy_all", is_flag=True, help="Every shipped profile (examples).")
@click.option("--opt-in", "opt_in", multiple=True,
              type=click.Choice(["ipc-host", "host-network", "memlock-unlimited"]),
              help="Allow a host-sharing or raised-limit setting (prints a warning).")
@click.option("--gpu-ids", help="Compose: explicit GPU indexes, UUIDs (GPU-...) or MIG devices "
              "(MIG-...), comma-separated (default: a count of tensor_parallel_size).")
@click.option("--bind", "bind_address", default="127.0.0.1", show_default=True,
              help="Compose: host IP address the port is published on.")
@click.option("--namespace", default="llm-serving", show_default=True,
              help="Kubernetes namespace (an RFC 1123 label).")
@click.option("--runtime-class", help="Kubernetes runtimeClassName (e.g. nvidia).")
@click.option("--hf-secret", default="hf-token", show_default=True,
              help="Kubernetes secret holding HF_TOKEN under key 'token' (its name, never the "
                   "token).")
@click.option("--model-claim", help="Kubernetes PVC of the model (default <name>-model).")
@click.option("--cpus", type=click.IntRange(1, 1024), default=8, show_default=True,
              help="Kubernetes: CPU request and limit.")
@click.option("--memory-gib", type=click.IntRange(1, 65536), default=64, show_default=True,
              help="Kubernetes: memory request and limit in GiB.")
@_set_option
@_quiet_option
@click.pass_context
def deploy(ctx: click.Context, profile: str | None, fmt: str, record: str | None,
           output: str | None, deploy_all: bool, opt_in: tuple[str, ...], gpu_ids: str | None,
           bind_address: str, namespace: str, runtime_class: str | None, hf_secret: str,
           model_claim: str | None, cpus: int, memory_gib: int, overrides: tuple[str, ...],
           quiet: bool) -> None:
    """Write a hardened Compose file or Kubernetes manifest for PROFILE."""
    from dockergen import atomic
    from dockergen.api import shipped_single_images
    from dockergen.deploy import DeployOptions, DeployUsageError, check_options, deploy_profile
    from dockergen.deploy.write import folder_files, is_deploy_folder, is_generated

    if deploy_all == bool(profile):
        raise click.UsageError("give either PROFILE or --all")
    if deploy_all and (_stdout(output) or record):
        raise click.UsageError("--all needs -o DIR and takes no --record")
    _refuse_other_format(ctx, fmt, _DEPLOY_FORMAT_OPTIONS)
    options = DeployOptions(
        record=Path(record) if record else None, opt_in=opt_in,
        # blanks are kept so `--gpu-ids 0,,1` is refused, not read as 0,1
        gpu_ids=tuple(gpu_ids.split(",")) if gpu_ids is not None else (),
        bind_address=bind_address, namespace=namespace, runtime_class=runtime_class,
        hf_secret=hf_secret, model_claim=model_claim, cpus=cpus, memory_gib=memory_gib)
    try:
        check_options(options)  # before any profile is read
    except DeployUsageError as exc:
        raise click.UsageError(str(exc)) from None
    # one image per profile: a matrix profile's variants are not deployed yet
    paths = shipped_single_images() if deploy_all else [Path(profile or "")]
    outputs = [deploy_profile(p, fmt, overrides, options) for p in paths]
    for out in outputs:
        _warn(out.warnings, quiet)
    if deploy_all:
        # the whole folder at once, as `render`/`observe -o` write theirs: every profile's
        # file appears, or nothing changes
        folder = Path(output or "")
        atomic.write_folder(folder, folder_files(folder, outputs), kind="deploy",
                            legacy=lambda f, names: is_deploy_folder(f))
        for out in outputs:
            click.echo(f"wrote {folder / out.name / out.filename}", err=True)
    elif not _stdout(output):
        atomic.write_file(Path(output or ""), outputs[0].text, ours=is_generated)
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(outputs[0].text, nl=False)


def _refuse_other_format(ctx: click.Context, fmt: str,
                         options: tuple[tuple[str, str, str], ...]) -> None:
    """An option of another --format would be dropped without a word: a usage error. Only
    what the user typed counts (many of these options have defaults)."""
    for name, option, owner in options:
        source = ctx.get_parameter_source(name)
        if owner != fmt and source not in (None, click.core.ParameterSource.DEFAULT):
            raise click.UsageError(f"{option} applies to --format {owner} only; drop it, or "
                                   f"use --format {owner}")


# (parameter, option, the --format it belongs to)
_DEPLOY_FORMAT_OPTIONS = (
    ("gpu_ids", "--gpu-ids", "compose"), ("bind_address", "--bind", "compose"),
    ("namespace", "--namespace", "k8s"), ("runtime_class", "--runtime-class", "k8s"),
    ("hf_secret", "--hf-secret", "k8s"), ("model_claim", "--model-claim", "k8s"),
    ("cpus", "--cpus", "k8s"), ("memory_gib", "--memory-gib", "k8s"),
)


def _finite_gib(ctx: click.Context, param: click.Parameter, value: float) -> float:
    # click.FloatRange lets NaN through (every comparison with NaN is false) and the plan
    # cannot size memory from it: a usage error, before any work.
    if not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number of GiB; give one from 0 to 1024, "
                                 "e.g. 2")
    return value


@cli.command()
@click.argument("profile", type=click.Path(dir_okay=False))
@click.option("--model-config", help="The model's config.json, or a built-in model name "
              "(default: the profile's serving.hf_config).")
@click.option("--model-dir", type=click.Path(file_okay=False, exists=True),
              help="Model folder: config.json + *.safetensors (exact weight bytes).")
@click.option("--overhead-gib", type=click.FloatRange(0, 1024), default=2.0, show_default=True,
              callback=_finite_gib,
              help="Memory besides weights and KV cache per GPU (CUDA graphs, activations).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@_set_option
def plan(profile: str, model_config: str | None, model_dir: str | None, overhead_gib: float,
         as_json: bool, overrides: tuple[str, ...]) -> None:
    """Capacity plan: weights, KV cache per token, tokens per GPU, max concurrency."""
    from dockergen.plan import builtin_models, check_fit, format_table, plan_profile

    if model_config and model_dir:
        raise click.UsageError("give --model-config or --model-dir, not both")
    if model_config is not None and not model_config.strip():
        # Path("") is the working directory: the error would name "." instead of the option
        raise click.UsageError("--model-config is empty; give the model's config.json or one "
                               f"of {', '.join(sorted(builtin_models()))}")
    result, at = plan_profile(Path(profile), overrides, model_config,
                              Path(model_dir) if model_dir else None, overhead_gib)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2, sort_keys=True))
    else:
        click.echo(format_table(result), nl=False)
    check_fit(result, at)  # the plan is printed first: it shows what would fit


@cli.command()
@click.argument("profile", required=False, type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False),
              callback=_folder_given,
              help="Folder for the monitoring files (with --all: OUTPUT/<name>/).")
@click.option("--all", "observe_all", is_flag=True,
              help="Every shipped profile into OUTPUT/<name>/ (how examples/observe is made).")
@click.option("--format", "fmt", type=click.Choice(["prometheus", "k8s"]), default="prometheus",
              show_default=True,
              help="prometheus: prometheus.yml + rule files; k8s: Prometheus Operator "
                   "PodMonitor/ServiceMonitor + PrometheusRule. Both add dashboard.json.")
@click.option("--monitor", type=click.Choice(["PodMonitor", "ServiceMonitor"]),
              default="PodMonitor", show_default=True, help="With --format k8s.")
@click.option("--port-name", default="http", show_default=True,
              help="With --format k8s: the named container/service port serving metrics.")
@click.option("--target", "targets", multiple=True, metavar="HOST:PORT",
              help="Scrape target (repeatable); default observe.targets or localhost:PORT.")
@_set_option
@_quiet_option
def observe(profile: str | None, output: str, observe_all: bool, fmt: str, monitor: str,
            port_name: str, targets: tuple[str, ...], overrides: tuple[str, ...],
            quiet: bool) -> None:
    """Write Prometheus scrape config, recording and alert rules and a Grafana dashboard
    whose queries use the metric names of PROFILE's engine release."""

    import re

    from dockergen.api import shipped_single_images
    from dockergen.observe.generate import observe_profile, write_output, write_outputs
    from dockergen.profile import _PATTERNS

    if observe_all == bool(profile):
        raise click.UsageError("give either PROFILE or --all")
    _refuse_other_format(click.get_current_context(), fmt,
                         (("monitor", "--monitor", "k8s"), ("port_name", "--port-name", "k8s")))
    # a named container port (Kubernetes IANA_SVC_NAME): at most 15 of [a-z0-9-], a letter
    # among them, no '-' at either end or twice in a row (src: k8s.io apimachinery
    # validation.IsValidPortName)
    if not re.fullmatch(r"(?=[a-z0-9-]*[a-z])[a-z0-9](?:-?[a-z0-9]){0,14}", port_name) \
            or len(port_name) > 15:
        raise click.UsageError(f"--port-name {port_name!r}: expected a Kubernetes port name "
                               "like http or metrics (at most 15 of a-z, 0-9 and '-')")
    shape, what = _PATTERNS["scrape_target"]
    for target in targets:
        if holds_secret(target):  # a key is a valid host name: it would be written out
            raise click.UsageError(f"--target: a value shaped like a credential (not shown); "
                                   f"expected {what}")
        if not shape.fullmatch(target):
            raise click.UsageError(f"--target {target!r}: expected {what}")
    # one image per profile: a matrix profile's variants are not observed yet
    paths = shipped_single_images() if observe_all else [Path(profile)]  # type: ignore[arg-type]
    results, problems = [], []
    for path in paths:
        try:
            results.append(observe_profile(path, overrides, fmt, targets,  # type: ignore[arg-type]
                                           monitor, port_name))
        except ProfileError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ProfileError(problems)
    for result in results:
        _warn([str(w) for w in result.warnings], quiet)
    if observe_all:  # every profile's folder changes together
        write_outputs(Path(output), {r.name: r.files for r in results})
    else:
        write_output(Path(output), results[0].files)
    for result in results:
        click.echo(f"wrote {Path(output) / result.name if observe_all else output}", err=True)


@cli.command("profiles")
def list_profiles() -> None:
    """List the shipped profiles."""
    from dockergen.api import describe_shipped

    for name, description in describe_shipped():
        click.echo(f"{name:<18} {description}")


@cli.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False), callback=_path_given,
              help="Write the schema to this file instead of stdout.")
def schema(output: str | None) -> None:
    """Print the JSON Schema of profile files (for editors)."""
    from dockergen import atomic
    from dockergen.schema import is_schema_text, profile_schema

    text = json.dumps(profile_schema(), indent=2, sort_keys=True) + "\n"
    if _stdout(output):
        click.echo(text, nl=False)
    else:
        atomic.write_file(Path(output or ""), text, ours=is_schema_text)


@cli.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False), callback=_path_given,
              help="Write the reference to this file instead of stdout.")
@click.option("--checks", "of_checks", is_flag=True,
              help="Instead: the checks `validate` runs, from the check registry (the "
                   "documentation's docs/reference/checks.md).")
def reference(output: str | None, of_checks: bool) -> None:
    """Print the Markdown reference of profile fields, generated from the same model as
    `dockergen schema` (the documentation's docs/reference/profile.md)."""
    from dockergen import atomic
    from dockergen.checks import checks_reference, is_checks_reference
    from dockergen.reference import is_reference_text, profile_reference

    text = checks_reference() if of_checks else profile_reference()
    if _stdout(output):
        click.echo(text, nl=False)
    else:
        atomic.write_file(Path(output or ""), text,
                          ours=is_checks_reference if of_checks else is_reference_text)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI and turn errors into messages and exit codes."""
    # dockergen uses no pydantic plugins; skipping their entry-point scan saves ~25 ms
    # of start-up on every command.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    sys.stdout = _GuardedStdout(sys.stdout)
    try:
        cli.main(args=argv, prog_name="dockergen", standalone_mode=False)
    except DockergenError as exc:
        # -q: also the warnings beside errors (by severity: an error's text may end in anything)
        lines = exc.lines(warnings=False) if isinstance(exc, ProfileError) and _quiet \
            else exc.lines()
        for line in lines:
            click.echo(redact(line), err=True)
        if isinstance(exc, ProfileError):
            click.echo(f"dockergen: {exc.errors()} problem(s); nothing was written", err=True)
        _exit(int(exc.exit_code))
    except (KeyboardInterrupt, click.exceptions.Abort):
        _interrupted()
    except click.ClickException as exc:
        shown = io.StringIO()  # click's own messages quote the values given: redact them
        exc.show(file=shown)
        click.echo(redact(shown.getvalue()), err=True, nl=False)
        _exit(int(ExitCode.USAGE))
    except _StdoutFailed as exc:
        click.echo(f"cannot write the output: {exc}; redirect it to a writable file with "
                   "room", err=True)
        _silence_output()  # the exit flush would fail once more, with a traceback
        _exit(int(ExitCode.OUTPUT))
    except _OutputClosed as exc:
        # The reader stopped reading (`dockergen explain | head`): what it wanted was
        # printed, so commands that only print end with 0. A build whose progress stream
        # was cut off did not finish its work: 141, as a process killed by SIGPIPE.
        _silence_output()
        cut_work = exc.command == "build" and not _build_prints_only
        _exit(ExitCode.PIPE_CLOSED if cut_work else 0)
    _exit(0)


# Commands whose work ends with their one write (a matrix's folders and bake file are one
# change): once it is complete, an interrupt has nothing left to undo.
_ONE_WRITE = ("render", "deploy", "observe", "schema", "reference")


def _interrupted() -> None:
    """Ctrl-C: the exit code and the message tell what is on disk. Output completely
    written before the interrupt is named; when it was the command's whole output (the
    signal came during or after its final swap) the command succeeded: exit 0."""
    from dockergen import atomic

    written = [str(p) for p in atomic.committed()]
    if written and _interrupted_command in _ONE_WRITE:
        click.echo(f"dockergen: interrupted after the output was complete; in place: "
                   f"{', '.join(written)}", err=True)
        _exit(0)
    if written:
        click.echo(f"dockergen: interrupted; written completely before it: "
                   f"{', '.join(written)}", err=True)
    else:
        click.echo("dockergen: interrupted; nothing was written", err=True)
    _exit(int(ExitCode.INTERRUPTED))


def _exit(code: int) -> NoReturn:
    """Leave with ``code``: what happened is decided and told, so a Ctrl-C from here on
    (during the interpreter's shut-down) must not turn it into a death by SIGINT, which
    reads as "interrupted" although the output is complete."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)


def _silence_output() -> None:
    """Point stdout/stderr at /dev/null so the exit flush does not fail a second time."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # no such stream: nothing to flush
            os.dup2(devnull, stream.fileno())
    os.close(devnull)

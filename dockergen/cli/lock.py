"""``dockergen lock``: base images pinned by digest in PROFILE.lock.json, or with
``--python`` a profile's hashed Python closure in PROFILE.python.lock.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from dockergen.cli.app import network_timeout_option, set_option
from dockergen.errors import OutputError

if TYPE_CHECKING:
    from dockergen.input.pylockfile import LockInputs

# What uv's --python-platform accepts for a Linux GPU image: glibc targets only (the
# images are Ubuntu/Debian), src: `uv pip compile --help` of the uv dockergen pins.
_LOCK_PLATFORM = r"(?:x86_64|aarch64)-(?:manylinux2014|manylinux_2_[0-9]{2}|unknown-linux-gnu)"


def _check_python_lock_options(python_platform: str | None, torch_index: str | None) -> None:
    """`lock --python` options, refused before uv runs (it would report them as exit 2)."""
    import re

    from dockergen.input.values import PATTERNS

    if python_platform is not None and not re.fullmatch(_LOCK_PLATFORM, python_platform):
        raise click.UsageError(f"--python-platform {python_platform!r}: expected a Linux glibc "
                               "platform like x86_64-manylinux_2_35 or "
                               "aarch64-manylinux_2_28 (uv pip compile --help lists them)")
    url, _ = PATTERNS["url"]
    if torch_index is not None and not url.fullmatch(torch_index):
        raise click.UsageError(f"--torch-index {torch_index!r}: expected an http(s) URL "
                               "without credentials or query, e.g. "
                               "https://download.pytorch.org/whl/cu130")


def _python_lock(path: Path, overrides: tuple[str, ...], check: bool,
                 python_platform: str | None, torch_index: str | None,
                 platforms: tuple[str, ...] = ()) -> None:
    """`dockergen lock --python`: write or check one profile's hashed Python lock, or with
    ``platforms`` one lock per platform of a multi-platform image, each resolved for its
    own CPU (a platform's missing wheel stops the command before any build)."""
    from dockergen import platforms as known
    from dockergen.outputs import pylock

    inp = pylock.inputs_of(pylock.lock_resolution(path, overrides), platform=python_platform,
                           torch_index=torch_index)
    if not platforms:
        _one_python_lock(path, inp, pylock.default_path(path), check)
        return
    own = known.platform_of(inp.platform)
    for platform, each in pylock.platform_inputs(inp, platforms):
        _one_python_lock(path, each, pylock.platform_path(path, platform, own), check)


def _one_python_lock(path: Path, inp: LockInputs, lock_file: Path, check: bool) -> None:
    """Write (or check) the lock of one platform's closure in ``lock_file``."""
    from dockergen.outputs import closure, owners, pylock

    if check:
        pylock.check_matches(lock_file, inp, path)
        click.echo(f"{lock_file}: matches {path}")
        return
    text = pylock.compile_lock(inp)
    bad = pylock.verify_sources(text, inp)
    if bad:
        raise pylock.LockError("the resolved closure mixes indexes: " + "; ".join(bad))
    # every distribution installs on the image's Python and machine, before any build
    sources = closure.check(text, inp.python, inp.platform)
    if sources:
        click.echo("built from their sdists in the engine stage (no wheel on the index; pure "
                   "Python): " + ", ".join(sources), err=True)
    unchecked = owners.check(text)  # two wheels writing one file: refused before any build
    if unchecked:
        click.echo("file ownership not checked for what has no wheel on its index (its files "
                   "are known once built; the image's smoke check reads them): "
                   + ", ".join(unchecked), err=True)
    try:
        pylock.write_lock(lock_file, text)
    except OSError as exc:
        raise OutputError(f"{lock_file}: cannot write: {exc.strerror}") from None
    count = sum(1 for line in text.splitlines() if "==" in line and not line.startswith("#"))
    click.echo(f"wrote {lock_file} ({count} packages for {inp.platform}, torch from "
               f"{inp.torch_index})")


def _platforms(text: str | None) -> tuple[str, ...]:
    """The ``--platform`` list (none given: empty), or a usage error."""
    from dockergen.cli.params import platform_list

    return () if text is None else platform_list(text)


@click.command()
@click.argument("profiles", nargs=-1, required=True, type=click.Path(dir_okay=False))
@set_option
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
@click.option("--platform", "platform_list", metavar="OS/ARCH,...",
              help="The platforms of a multi-platform image, e.g. linux/amd64,linux/arm64: "
                   "each base image's index must hold each (the lock keeps each platform's "
                   "digest); with --python one lock per platform (the profile's own in "
                   "PROFILE.python.lock, each other in PROFILE.ARCH.python.lock).")
@click.option("--torch-index", metavar="URL",
              help="With --python: resolve the torch family from this index instead.")
@network_timeout_option
def lock(profiles: tuple[str, ...], overrides: tuple[str, ...], check: bool, remote: bool,
         update: bool, mirrors: tuple[str, ...], python_lock: bool,
         python_platform: str | None, torch_index: str | None,
         platform_list: str | None) -> None:
    """Pin the base images of PROFILE... by digest in PROFILE.lock.json (registry API v2).

    Credentials come from your docker config (docker login). render then writes
    FROM repo:tag@sha256:... lines. Without --update, images already locked keep their pin.
    With --python: the Python closure instead, in PROFILE.python.lock (dockergen/outputs/pylock.py).
    """
    if python_lock:
        if remote or update or mirrors:
            raise click.UsageError("--python goes with --check only")
        _check_python_lock_options(python_platform, torch_index)
        platforms = _platforms(platform_list)
        for path in profiles:
            _python_lock(Path(path), overrides, check, python_platform, torch_index, platforms)
        return
    from dockergen.outputs.fleet import locks
    from dockergen.outputs.fleet.project import collect

    if python_platform or torch_index:
        raise click.UsageError("--python-platform and --torch-index go with --python")
    base_platforms = _platforms(platform_list) or ("linux/amd64",)
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
        for member in fleet.members:
            for image in member.images:
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
                                    echo=click.echo, platforms=base_platforms)
        click.echo(f"wrote {lock_file}" if changed else f"{lock_file}: up to date", err=True)
    if stale:
        raise locks.LockStaleError(stale)

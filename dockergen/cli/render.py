"""``dockergen render``: a profile to a Dockerfile on standard output, or to build contexts
and a bake file in a folder (every shipped profile with ``--all``).
"""

from __future__ import annotations

from pathlib import Path

import click

from dockergen.cli.app import (
    mode_option,
    path_given,
    quiet_option,
    set_option,
    strict_option,
    to_stdout,
    warn,
)


def _check_syntax(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--syntax is an image reference: it becomes line 1 of the Dockerfile, so a newline in
    it would add an instruction (and an empty one would silently emit nothing)."""
    from dockergen.input.values import check_reference

    if value is not None:
        try:
            check_reference("image_ref", value)
        except ValueError as exc:
            raise click.BadParameter(f"{exc}; e.g. docker/dockerfile:1") from None
    return value


def _bake_platforms(text: str | None, output: str | None) -> tuple[str, ...] | None:
    """``--platform``: the bake file's platforms (None: its default), or a usage error."""
    from dockergen.cli.params import platform_list

    if text is None:
        return None
    if to_stdout(output):
        raise click.UsageError("--platform sets the bake file's platforms: give -o DIR")
    return platform_list(text)


@click.command()
@click.argument("profile", required=False, type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(file_okay=False), callback=path_given,
              help="Write a build context (Dockerfile, .dockerignore, lock file) and a "
                   "docker-bake.hcl to this folder.")
@click.option("--all", "render_all", is_flag=True,
              help="Render every shipped profile into OUTPUT/<name>/ and OUTPUT/docker-bake.hcl.")
@set_option
@mode_option
@click.option("--syntax", metavar="IMAGE", callback=_check_syntax,
              help="Emit a '# syntax=IMAGE' parser directive (needs that frontend image).")
@click.option("--platform", "platform_list", metavar="OS/ARCH,...",
              help="The bake file's platforms: one image index of each target, e.g. "
                   "linux/amd64,linux/arm64 (default: linux/amd64).")
@strict_option
@quiet_option
def render(profile: str | None, output: str | None, render_all: bool,
           overrides: tuple[str, ...], mode: str, syntax: str | None, platform_list: str | None,
           strict: bool, quiet: bool) -> None:
    """Render PROFILE to a Dockerfile (stdout) or a build context and bake file (-o DIR).

    A profile with a matrix renders one context per valid point into DIR/<variant>/ and
    a DIR/docker-bake.hcl listing them. Base images are pinned by digest when a lock
    (PROFILE.lock.json, see `dockergen lock`) is beside the profile.
    """
    from dockergen.api import shipped_renderable
    from dockergen.outputs.dockerfile import write_context, write_contexts
    from dockergen.outputs.fleet import bake
    from dockergen.outputs.fleet.project import (
        bake_text,
        check_bake_destination,
        collect,
        previous_variants,
    )

    if render_all == bool(profile):
        raise click.UsageError("give either PROFILE or --all")
    platforms = _bake_platforms(platform_list, output)
    if render_all and to_stdout(output):
        raise click.UsageError("--all needs -o DIR")
    paths = shipped_renderable() if render_all else [Path(profile)]  # type: ignore[arg-type]
    fleet = collect(paths, overrides, mode, syntax, strict=strict)  # type: ignore[arg-type]
    matrix = any(m.group for m in fleet.members)
    if to_stdout(output) and matrix:
        names = ", ".join(m.name for m in fleet.members)
        raise click.UsageError(f"{profile} is a matrix of {len(fleet.members)} variants "
                               f"({names}); write them all with -o DIR")
    warn(fleet.dropped_lines(), quiet)
    warn(fleet.warnings(), quiet)
    if to_stdout(output):
        click.echo(fleet.members[0].files["Dockerfile"].decode(), nl=False)
        return
    out = Path(output)  # type: ignore[arg-type]
    if render_all or matrix:
        # checks cache refs before any write
        text = bake_text(fleet, single_context=False, platforms=platforms)
        # the variants and the bake file change together; variants an earlier run wrote
        # that this one does not (an excluded point) go with the change
        write_contexts(out, {m.name: m.files for m in fleet.members},
                       {bake.BAKE_FILE: text.encode()},
                       retired=tuple(sorted(set(previous_variants(out / bake.BAKE_FILE))
                                            - {m.name for m in fleet.members})),
                       top_ours=check_bake_destination)
        for member in fleet.members:
            click.echo(f"wrote {out / member.name}", err=True)
        click.echo(f"wrote {out / bake.BAKE_FILE}", err=True)
        return
    member = fleet.members[0]
    files = {**member.files, bake.BAKE_FILE: bake_text(fleet, single_context=True,
                                                           platforms=platforms).encode()}
    write_context(out, dict(sorted(files.items())))
    click.echo(f"wrote {output}", err=True)

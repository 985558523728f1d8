"""``dockergen validate``: every check a profile must pass, run on one or more profiles
(a matrix: on every point), every problem printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from dockergen.cli.app import quiet_option, set_option, strict_option, warn
from dockergen.errors import ProfileError


@click.command()
@click.argument("profiles", nargs=-1, required=True, type=click.Path(dir_okay=False))
@set_option
@strict_option
@quiet_option
def validate(profiles: tuple[str, ...], overrides: tuple[str, ...], strict: bool,
             quiet: bool) -> None:
    """Check one or more profiles; print every problem found (matrices: every point)."""
    from dockergen.checks import validate_profile
    from dockergen.outputs.fleet.matrix import MatrixError

    problems: list[Any] = []
    dropped: list[Any] = []
    for path in profiles:
        try:
            # every check any command runs (dockergen/checks.py): never pass what one refuses
            validated = validate_profile(Path(path), overrides)
            if validated is None:
                click.echo(f"{path}: ok (abstract: its fields are checked; the compatibility "
                           "rules run on the profiles that extend it)")
                continue
            fleet, found = validated
        except ProfileError as exc:
            problems.extend(exc.problems)
            continue
        dropped += [d for _, d in fleet.dropped]
        if strict and fleet.dropped:
            continue  # reported as errors below
        warn(fleet.dropped_lines(), quiet)
        warn(fleet.warnings(), quiet)
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

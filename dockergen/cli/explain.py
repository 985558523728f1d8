"""``dockergen explain``: each derived setting of a profile with the rule and source that
chose it.
"""

from __future__ import annotations

from pathlib import Path

import click

from dockergen.cli.app import mode_option, set_option


@click.command()
@click.argument("profile", type=click.Path(dir_okay=False))
@set_option
@mode_option
def explain(profile: str, overrides: tuple[str, ...], mode: str) -> None:
    """Show each derived setting of PROFILE and the rule and source that chose it."""
    from dockergen.api import resolve_profile
    from dockergen.knowledge import layers

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
    compression = resolved.profile.image.compression
    click.echo(f"  layers: {compression} (image.compression)")
    click.echo(f"      why: {layers.WHY[compression]}")
    click.echo(f"      nodes need: {layers.NODE_REQUIREMENT[compression]}")
    click.echo(f"      building needs: {layers.BUILD_REQUIREMENT[compression]}")
    for w in resolved.warnings:
        click.echo(f"warning: {w}")

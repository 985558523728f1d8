"""``dockergen build``: a profile rendered, built through the Docker Engine API, smoke
tested and optionally pushed.
"""

from __future__ import annotations

from pathlib import Path

import click

from dockergen.cli import params
from dockergen.cli.app import folder_given, quiet_option, run_state, set_option

_WEEK_S = 7 * 24 * 3600  # the longest --timeout: a longer one is taken for a typo


@click.command()
@click.argument("profile", type=click.Path(dir_okay=False))
@set_option
@click.option("-o", "--output", type=click.Path(file_okay=False), callback=folder_given,
              help="Build context folder (default: build/<profile name>); the build log and "
                   "build record are written there too.")
@click.option("--builder", type=params.BUILDER, default="auto",
              show_default=True, help="classic renders without BuildKit-only syntax.")
@click.option("--tag", "tags", multiple=True, metavar="REF", help="Extra tag (repeatable).")
@click.option("--no-cache", is_flag=True, help="Do not use the build cache.")
@click.option("--build-arg", "build_args", multiple=True, metavar="NAME=VALUE",
              help="Build argument NAME=VALUE (repeatable). Base images are not build args: "
                   "use --set cuda.devel_image=... or a lock with --mirror.")
@click.option("--target", "stage", help="Build only up to this stage.")
@click.option("--platform", help="Target platform, e.g. linux/amd64.")
@click.option("--progress", type=params.PROGRESS, default="auto",
              show_default=True)
@click.option("--push", is_flag=True, help="Push every tag after a successful build.")
@click.option("--sign", is_flag=True,
              help="Sign the pushed digest with cosign and attach the SBOM and provenance as "
                   "signed attestations (needs --push and --sign-key; password: "
                   "COSIGN_PASSWORD).")
@click.option("--sign-key", metavar="KEY",
              help="The cosign private key: a file, env://VAR, or a KMS reference "
                   "(awskms://, gcpkms://, hashivault://, azurekms://).")
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
@quiet_option
def build(profile: str, overrides: tuple[str, ...], output: str | None, builder: str,
          tags: tuple[str, ...], no_cache: bool, build_args: tuple[str, ...],
          stage: str | None, platform: str | None, progress: str, push: bool, sign: bool,
          sign_key: str | None, dry_run: bool,
          ca_certs: tuple[str, ...], timeout: float | None, network: str, pull: bool,
          no_smoke: bool, gpus: bool, quiet: bool) -> None:
    """Render PROFILE, build it through the Docker Engine API, and optionally push it."""
    import math

    run_state.build_prints_only = dry_run  # main() reads it if the output is cut off
    from dockergen.build.options import BuildOptions
    from dockergen.build.orchestrate import build_profile

    # nan and -1 cancelled the build at once, 0 meant none, inf crashed the timer thread
    if timeout is not None and not (math.isfinite(timeout) and 0 < timeout <= _WEEK_S):
        raise click.UsageError(f"--timeout {timeout}: expected seconds, more than 0 and at "
                               f"most {_WEEK_S} (a week); leave it out for no limit")
    if sign != (sign_key is not None):
        raise click.UsageError("--sign and --sign-key go together: --sign --sign-key "
                               "cosign.key (keyless signing: see docs/trust.md)")
    args: dict[str, str] = {}
    for item in build_args:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.UsageError(f"--build-arg {item!r}: expected NAME=VALUE")
        args[name] = value
    options = BuildOptions(
        builder=builder, tags=tags, no_cache=no_cache, build_args=args, stage=stage,
        platform=platform, progress=progress, push=push, timeout=timeout,
        network=None if network == "default" else network, pull=pull, smoke=not no_smoke,
        gpus=gpus, sign_key=sign_key)
    build_profile(Path(profile), overrides, options, output=Path(output) if output else None,
                  dry_run=dry_run, ca_certs=tuple(Path(c) for c in ca_certs), quiet=quiet,
                  echo=lambda text: click.echo(text, err=True), out=click.echo)

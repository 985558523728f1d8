"""``dockergen outdated`` and ``dockergen upgrade``: newer releases of a profile's engine
and packages on an index, and the move to one that passes every rule.
"""

from __future__ import annotations

from pathlib import Path

import click

from dockergen.cli.app import network_timeout_option, set_option


@click.command()
@click.argument("profiles", nargs=-1, required=True, type=click.Path(dir_okay=False))
@set_option
@click.option("--index", metavar="URL", default=None,
              help="Simple-API index to read (PEP 691 JSON or PEP 503 HTML); default: the "
                   "profile's build.pip_index_url, else PyPI. Credentials: "
                   "DOCKERGEN_INDEX_USERNAME/DOCKERGEN_INDEX_PASSWORD or netrc.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@network_timeout_option
def outdated(profiles: tuple[str, ...], overrides: tuple[str, ...], index: str | None,
             as_json: bool) -> None:
    """Newer releases of each profile's engine and pinned packages, and the rules' verdict
    on the profile moved to each. Exit 9 when one is valid (for scheduled CI)."""
    from dockergen.net.index import PASSWORD_ENV, USER_ENV, is_index_url
    from dockergen.releases import outdated as out

    if index is not None and not is_index_url(index):
        raise click.BadParameter("give an http(s) URL without credentials (they come from "
                                 f"{USER_ENV}/{PASSWORD_ENV} or netrc)",
                                 param_hint="--index")
    reports = [out.check(Path(p), overrides, index) for p in profiles]
    click.echo(out.to_json(reports) if as_json else out.to_text(reports), nl=False)
    valid = [f"{name} {version} ({r.profile})" for r in reports
             for name, version in r.valid_newer()]
    if valid:
        raise out.OutdatedError(f"dockergen: {len(valid)} newer release(s) the profile can "
                                f"move to as it is: {', '.join(valid)}")


@click.command()
@click.argument("profile", type=click.Path(dir_okay=False))
@set_option
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
@network_timeout_option
def upgrade(profile: str, overrides: tuple[str, ...], to: str | None, driver: str | None,
            index: str | None, write: bool, as_json: bool) -> None:
    """Propose the newest release of PROFILE's engine that passes every rule on its GPUs,
    deriving the facts of releases dockergen lacks from the index; show what changes."""
    from packaging.version import InvalidVersion, Version

    from dockergen.net.index import PASSWORD_ENV, USER_ENV, is_index_url
    from dockergen.releases import upgrade as up
    from dockergen.releases import write as shown

    if index is not None and not is_index_url(index):
        raise click.BadParameter("give an http(s) URL without credentials (they come from "
                                 f"{USER_ENV}/{PASSWORD_ENV} or netrc)",
                                 param_hint="--index")
    for name, value in (("--to", to), ("--driver", driver)):
        if value is None:
            continue
        try:
            Version(value)
        except (InvalidVersion, ValueError):  # ValueError: a number past int's digit limit
            raise click.BadParameter(f"{value[:40]!r} is not a version like 1.2.3",
                                     param_hint=name) from None
    result = up.plan(Path(profile), overrides, index, to, driver)
    click.echo(shown.to_json(result) if as_json else shown.to_text(result), nl=False)
    if write:
        for path in shown.write(result, Path(profile)):
            click.echo(f"wrote {path}", err=True)

"""``dockergen profiles``, ``schema`` and ``reference``: what dockergen knows, printed or
written for people and editors (the shipped profiles, the profile JSON Schema, the Markdown
references of profile fields and of the checks).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from dockergen.cli.app import path_given, to_stdout


@click.command("profiles")
def list_profiles() -> None:
    """List the shipped profiles."""
    from dockergen.api import describe_shipped

    for name, description in describe_shipped():
        click.echo(f"{name:<18} {description}")


@click.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False), callback=path_given,
              help="Write the schema to this file instead of stdout.")
def schema(output: str | None) -> None:
    """Print the JSON Schema of profile files (for editors)."""
    from dockergen.files import atomic
    from dockergen.outputs.schema import is_schema_text, profile_schema

    text = json.dumps(profile_schema(), indent=2, sort_keys=True) + "\n"
    if to_stdout(output):
        click.echo(text, nl=False)
    else:
        atomic.write_file(Path(output or ""), text, ours=is_schema_text)


@click.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False), callback=path_given,
              help="Write the reference to this file instead of stdout.")
@click.option("--checks", "of_checks", is_flag=True,
              help="Instead: the checks `validate` runs, from the check registry (the "
                   "documentation's docs/reference/checks.md).")
def reference(output: str | None, of_checks: bool) -> None:
    """Print the Markdown reference of profile fields, generated from the same model as
    `dockergen schema` (the documentation's docs/reference/profile.md)."""
    from dockergen.checks import checks_reference, is_checks_reference
    from dockergen.files import atomic
    from dockergen.outputs.reference import is_reference_text, profile_reference

    text = checks_reference() if of_checks else profile_reference()
    if to_stdout(output):
        click.echo(text, nl=False)
    else:
        atomic.write_file(Path(output or ""), text,
                          ours=is_checks_reference if of_checks else is_reference_text)

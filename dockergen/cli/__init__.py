"""The ``dockergen`` command: the only package that prints or exits.

Every user mistake arrives in :func:`main` as a :class:`~dockergen.errors.DockergenError`
and leaves as clear lines on stderr and a distinct exit code (see
:class:`~dockergen.errors.ExitCode`); anything else is a bug and keeps its traceback.
:mod:`dockergen.cli.app` holds the group, :func:`main` and what the commands share; each
other module holds one command (or a small family of them). The commands import the rest
of dockergen inside their bodies, so each loads only what it uses
(tests/architecture/test_startup.py).
"""

from dockergen.cli import (
    build,
    deploy,
    explain,
    lock,
    observe,
    outdated,
    plan,
    reference,
    render,
    validate,
    verify,
)
from dockergen.cli.app import SET_HELP, cli, main

__all__ = ["SET_HELP", "cli", "main"]

# Registered here, in one place and in this order (the order of `cli.commands`); `--help`
# lists them sorted by name.
for _command in (render.render, validate.validate, lock.lock, outdated.outdated,
                 outdated.upgrade, explain.explain, build.build, deploy.deploy, plan.plan,
                 observe.observe, reference.list_profiles, reference.schema,
                 reference.reference, verify.verify):
    cli.add_command(_command)

"""The command line's parameter types, built from the shapes that decide them: a choice
added to the model, a registry or a Literal appears in the CLI with no edit here.

Each choice is read from its source when click first needs it (parsing, a command's
``--help``, completion), not when the CLI is imported: ``dockergen --help`` and
``profiles`` load no profile model (tests/architecture/test_startup.py). ``--set FIELD=VALUE`` is
checked against the profile model's field paths before any profile is read
(:func:`check_set_fields`); its VALUE is read by :func:`dockergen.input.loader.parse_set`.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable

import click
from click.shell_completion import CompletionItem


class SourcedChoice(click.Choice[str]):
    """A :class:`click.Choice` whose choices are read from their source on first use."""

    def __init__(self, source: Callable[[], Iterable[str]]) -> None:
        # click.Choice.__init__ would need the choices now; they are read on first use
        self._source = source
        self._choices: tuple[str, ...] | None = None
        self.case_sensitive = True

    @property
    def choices(self) -> tuple[str, ...]:  # type: ignore[override]
        """The choices, read from the source once."""
        if self._choices is None:
            self._choices = tuple(self._source())
        return self._choices


def _modes() -> tuple[str, ...]:
    from dockergen.resolve.model import Mode

    return typing.get_args(Mode)


def _builders() -> tuple[str, ...]:
    # auto: buildkit when the engine has it, else classic (dockergen.build.orchestrate)
    return ("auto", *_modes())


def _deploy_formats() -> tuple[str, ...]:
    from dockergen.outputs.deploy import FORMATS

    return FORMATS


def _opt_ins() -> tuple[str, ...]:
    from dockergen.outputs.deploy.facts import OPT_INS

    return tuple(OPT_INS)


def _observe_formats() -> tuple[str, ...]:
    from dockergen.outputs.observe.generate import Format

    return typing.get_args(Format)


def _progress_kinds() -> tuple[str, ...]:
    from dockergen.build.progress import RENDERERS

    return ("auto", *RENDERERS)


MODE = SourcedChoice(_modes)  # render/explain --mode: dockergen.resolve.model.Mode
BUILDER = SourcedChoice(_builders)  # build --builder: auto or a Mode
DEPLOY_FORMAT = SourcedChoice(_deploy_formats)  # deploy --format: dockergen.outputs.deploy.FORMATS
OPT_IN = SourcedChoice(_opt_ins)  # deploy --opt-in: dockergen.outputs.deploy.facts.OPT_INS
OBSERVE_FORMAT = SourcedChoice(_observe_formats)  # observe --format: its Format Literal
PROGRESS = SourcedChoice(_progress_kinds)  # build --progress: dockergen.build.progress.RENDERERS


class SetItem(click.ParamType[str]):
    """``--set FIELD=VALUE``: completes FIELD from the profile model's field paths. The
    FIELDs of all items are checked at once by :func:`check_set_fields` (the option's
    callback), so every unknown one is reported together, as validation did."""

    name = "FIELD=VALUE"

    def shell_complete(self, ctx: click.Context, param: click.Parameter,
                       incomplete: str) -> list[CompletionItem]:
        from dockergen.input.loader import set_field_paths

        return [CompletionItem(f"{path}=") for path in set_field_paths()
                if path.startswith(incomplete)]


def check_set_fields(ctx: click.Context, param: click.Parameter,
                     value: tuple[str, ...]) -> tuple[str, ...]:
    """Refuse a ``--set`` whose FIELD is no field of the profile model before any profile
    is read: the same problems (text, fix, exit code 2) the loader reports for it."""
    if not value:
        return value  # no --set: the loader (and pydantic) stay unloaded
    from dockergen.errors import ProfileError
    from dockergen.input.loader import unknown_set_fields

    problems = unknown_set_fields(value)
    if problems:
        raise ProfileError(problems)
    return value



def platform_list(text: str) -> tuple[str, ...]:
    """A ``--platform`` list of the platforms dockergen builds (:mod:`dockergen.platforms`),
    or a usage error that says what to write."""
    from dockergen.platforms import PlatformError, arch_of, parse_list

    try:
        found = parse_list(text)
    except PlatformError as exc:
        raise click.UsageError(f"--platform: {exc}") from None
    unknown = [p for p in found if arch_of(p) is None]
    if unknown:
        raise click.UsageError(f"--platform {unknown[0]!r}: dockergen builds linux/amd64 "
                               "and linux/arm64")
    return found

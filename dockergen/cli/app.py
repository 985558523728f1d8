"""The ``dockergen`` command group and what its commands share; :func:`main` runs it.

Every user mistake arrives in :func:`main` as a :class:`DockergenError` and leaves as clear
lines on stderr and a distinct exit code (see :class:`ExitCode`); anything else is a bug and
keeps its traceback. Here too: the options and help texts several commands take (``--set``,
``--mode``, ``--strict``, ``-q``), the helpers for their output (``-o``, warnings, a
standard output whose failures are told apart) and the one state :func:`main` reads after
a command has ended (:data:`run_state`).
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, NoReturn

import click

from dockergen import __version__
from dockergen.cli import params
from dockergen.errors import DockergenError, ExitCode, ProfileError, redact

# How dockergen.input.loader.parse_set reads a --set value; docs/commands.md says the same, and
# tests/cli/test_set_origins.py checks each kind against the parser.
SET_HELP = ("Override a profile field before validation. A text field (python, cuda.version, "
            "serving.model, ...) takes VALUE as it is, without quotes: python=3.10 is the text "
            "\"3.10\". Any other field reads VALUE as YAML: numbers and true/false as such "
            "(serving.max_model_len=16384), lists and mappings in flow style "
            "(gpu.targets=[h100,l40s], serving.env={VLLM_LOGGING_LEVEL: INFO}), null to unset "
            "(matrix=null). FIELD enters mappings (serving.env.NAME=VALUE); a list is "
            "replaced whole.")

set_option = click.option(
    "--set", "overrides", multiple=True, type=params.SetItem(), metavar="FIELD=VALUE",
    callback=params.check_set_fields, help=SET_HELP)
mode_option = click.option(
    "--mode", type=params.MODE, default="buildkit", show_default=True,
    help="classic: no BuildKit-only syntax (for engines without BuildKit).")


class _OutputClosed(Exception):
    """The reader of our output went away (``dockergen explain | head``).

    Deliberately not an OSError: click turns a broken pipe into exit 1, the "dockergen bug"
    code, before our handler in :func:`main` could see it.
    """

    def __init__(self, command: str | None) -> None:
        super().__init__(command)
        self.command = command


class _RunState:
    """What :func:`main` reads after the command has ended, recorded while it ran.

    There is one, :data:`run_state`; the command modules write its fields on that object
    (never a copy of a flag of their own, which main would not see).
    """

    def __init__(self) -> None:
        # -q also applies to the warnings that come with errors, which main() prints after
        # the command has ended; the option's callback records it for that.
        self.quiet = False
        # `build --dry-run` only prints its plan: a reader that stops early is no failure
        # (0, as for explain), unlike a real build whose progress stream was cut off (141).
        self.build_prints_only = False
        # the command an interrupt stopped (its context is gone by the time main() sees it)
        self.interrupted_command: str | None = None
        # SIGTERM, when it was that and not Ctrl-C that interrupted the command
        self.terminated = False


def _on_sigterm(_signum: int, _frame: object) -> None:
    """SIGTERM (``kill``, a CI runner's cancel) ends the command as Ctrl-C does: as an
    exception, so every ``finally`` runs and the command's own staging folders and partial
    files go (the default action killed the process with them left behind); the exit code
    is then 143 (128 + SIGTERM)."""
    run_state.terminated = True
    raise KeyboardInterrupt


run_state = _RunState()


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise _OutputClosed(ctx.invoked_subcommand) from None
        except KeyboardInterrupt:
            run_state.interrupted_command = ctx.invoked_subcommand
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

    @property
    def buffer(self) -> Any:
        """The binary stream beneath: click writes shell completions as bytes, which a
        text stream refuses (completion ended in a TypeError)."""
        return getattr(self._stream, "buffer", None)

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


def path_given(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """-o '' is no path: it printed to stdout (render, schema) or named the working folder."""
    if value == "":
        raise click.BadParameter("is empty; give a path, or leave -o out to print")
    return value


def folder_given(ctx: click.Context, param: click.Parameter, value: str | None
                  ) -> str | None:
    """-o of a command that writes a folder: '-' (standard output) cannot hold one."""
    if value == "-":
        raise click.BadParameter("'-' is standard output, which cannot hold a folder; give "
                                 "a folder path")
    return path_given(ctx, param, value)


def to_stdout(output: str | None) -> bool:
    """-o left out or '-': the output goes to standard output."""
    return output is None or output == "-"


def _remember_quiet(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    run_state.quiet = run_state.quiet or value
    return value


quiet_option = click.option("-q", "--quiet", is_flag=True, callback=_remember_quiet,
                             help="Do not print warnings.")


def warn(lines: list[str], quiet: bool) -> None:
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


def _start_network_budget(ctx: click.Context, param: click.Parameter, value: float | None
                          ) -> float | None:
    """--timeout of a command that reads the network: its whole deadline, from now."""
    import math

    if value is not None and not (math.isfinite(value) and 0 < value <= 7 * 24 * 3600):
        raise click.BadParameter(f"{value}: expected seconds, more than 0 and at most a week")
    from dockergen.net import http as net

    net.begin(value)
    return value


network_timeout_option = click.option(
    "--timeout", "network_timeout", type=float, default=None, metavar="SECONDS",
    callback=_start_network_budget, expose_value=False, is_eager=True,
    help="Give up the command's network reads after this many seconds in all (default 600, "
         "or DOCKERGEN_NET_TIMEOUT); exit 124.")


strict_option = click.option(
    "--strict", is_flag=True, help="A matrix point that does not validate is an error "
                                   "(default: it is dropped with its problems printed).")


def refuse_other_format(ctx: click.Context, fmt: str,
                         options: tuple[tuple[str, str, str], ...]) -> None:
    """An option of another --format would be dropped without a word: a usage error. Only
    what the user typed counts (many of these options have defaults)."""
    for name, option, owner in options:
        source = ctx.get_parameter_source(name)
        if owner != fmt and source not in (None, click.core.ParameterSource.DEFAULT):
            raise click.UsageError(f"{option} applies to --format {owner} only; drop it, or "
                                   f"use --format {owner}")


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI and turn errors into messages and exit codes."""
    # dockergen uses no pydantic plugins; skipping their entry-point scan saves ~25 ms
    # of start-up on every command.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    sys.stdout = _GuardedStdout(sys.stdout)
    if threading.current_thread() is threading.main_thread():  # where handlers can be set
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        cli.main(args=argv, prog_name="dockergen", standalone_mode=False)
    except DockergenError as exc:
        # -q: also the warnings beside errors (by severity: an error's text may end in anything)
        lines = exc.lines(warnings=False) if isinstance(exc, ProfileError) and run_state.quiet \
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
        cut_work = exc.command == "build" and not run_state.build_prints_only
        _exit(ExitCode.PIPE_CLOSED if cut_work else 0)
    _exit(0)


# Commands whose work ends with their one write (a matrix's folders and bake file are one
# change): once it is complete, an interrupt has nothing left to undo.
_ONE_WRITE = ("render", "deploy", "observe", "schema", "reference")


def _interrupted() -> None:
    """Ctrl-C: the exit code and the message tell what is on disk. Output completely
    written before the interrupt is named; when it was the command's whole output (the
    signal came during or after its final swap) the command succeeded: exit 0."""
    from dockergen.files import atomic

    written = [str(p) for p in atomic.committed()]
    how = "terminated (SIGTERM)" if run_state.terminated else "interrupted"
    if written and run_state.interrupted_command in _ONE_WRITE:
        click.echo(f"dockergen: {how} after the output was complete; in place: "
                   f"{', '.join(written)}", err=True)
        _exit(0)
    if written:
        click.echo(f"dockergen: {how}; written completely before it: "
                   f"{', '.join(written)}", err=True)
    else:
        click.echo(f"dockergen: {how}; nothing was written", err=True)
    _exit(int(ExitCode.TERMINATED if run_state.terminated else ExitCode.INTERRUPTED))


def _exit(code: int) -> NoReturn:
    """Leave with ``code``: what happened is decided and told, so a Ctrl-C from here on
    (during the interpreter's shut-down) must not turn it into a death by SIGINT, which
    reads as "interrupted" although the output is complete."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(code)


def _silence_output() -> None:
    """Point stdout/stderr at /dev/null so the exit flush does not fail a second time."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # no such stream: nothing to flush
            os.dup2(devnull, stream.fileno())
    os.close(devnull)

"""The one error hierarchy users see, and the exit code of each kind.

Anything raised that is not a :class:`DockergenError` is a bug in dockergen and keeps
its traceback; every user mistake is one of these and becomes a clear message.
May import: nothing of dockergen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum, IntEnum

# Shapes of credentials that must never be echoed back (messages, logs, labels). Token
# prefixes need a left boundary, or `risk-management-prod` and `task-...` log lines read as
# OpenAI `sk-` keys; an `sk-` key must also hold a digit (random base62 of 48 characters
# almost always does; words joined by dashes do not). Every branch starts only at a
# boundary and its repeats are bounded where they can span a long word, so a scan is
# linear: an unbounded branch restarted at every letter and took 20 s on a 200 kB value.
_B = r"(?<![A-Za-z0-9_-])"
SECRET_VALUE = re.compile(
    rf"({_B}hf_[A-Za-z0-9]{{8,}}|{_B}gh[pousr]_[A-Za-z0-9]{{8,}}|{_B}github_pat_[A-Za-z0-9_]{{8,}}"
    rf"|{_B}AKIA[0-9A-Z]{{12,}}|{_B}sk-(?=[A-Za-z0-9_-]{{0,64}}[0-9])[A-Za-z0-9_-]{{8,}}"
    rf"|{_B}xox[abpr]-[A-Za-z0-9-]{{8,}}"
    # scheme://user:password@ (any case; the user may be empty, the password may hold '@')
    r"|(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s]*@"
    # user:password@host/ without a scheme, as pasted in place of an image reference: the
    # '@' must be followed by a registry host and '/' (`name:tag@sha256:...` is a digest
    # pin, `REPO:path@commit` a source citation)
    r"|(?<![^\s'\"=,(\[])[^/\s:@'\"=,(\[]{1,128}:[^/\s'\"]{0,128}@"
    r"(?=(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)(?::[0-9]+)?/|[A-Za-z0-9-]+:[0-9]+/)"
    # credentials in a URL's query (token-in-URL indexes, pre-signed S3/GCS/Azure links)
    r"|[?&](?i:token|access_token|auth|key|api_key|apikey|password|secret|sig|signature"
    r"|x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature"
    r"|x-goog-credential)=[^&\s'\"]+)")

# BuildKit's SecretsUsedInArgOrEnv detector (moby/buildkit dockerfile2llb/validations.go).
SECRET_NAME = re.compile(
    r"(?i)(?:_|^)(?:apikey|auth|credential|credentials|key|password|pword|passwd|secret|token)"
    r"(?:_|$)")


# Userinfo of any shape (`token@`, `user:password@`) in front of a registry host, for
# values that must be image references: no reference carries one, but a copied URL or a
# registry login pasted in its place does. Not part of SECRET_VALUE: in prose and logs
# `admin@example.com` is a mail address.
USERINFO = re.compile(r"^(?:[a-z][a-z0-9+.-]*://)?[^/@\s]*@(?!sha256:)")


def holds_secret(text: str) -> bool:
    """``text`` holds something shaped like a credential: never echo it."""
    return bool(SECRET_VALUE.search(text) or USERINFO.search(text))


def redact(text: str) -> str:
    """Replace anything shaped like a credential with ``<redacted>``."""
    return SECRET_VALUE.sub("<redacted>", text)


class ExitCode(IntEnum):
    """Process exit codes of the ``dockergen`` command (documented in the README)."""

    OK = 0
    BUG = 1  # an unexpected exception: a dockergen bug, traceback shown
    INVALID_PROFILE = 2  # the profile (or a --set override) is wrong
    MISSING_TOOL = 3  # an external tool or service is not available
    OUTPUT = 4  # the output could not be written
    BUILD_FAILED = 5  # the image build (or a base-image pull) failed
    SMOKE_FAILED = 6  # the built image failed its smoke tests; nothing was pushed
    PUSH_FAILED = 7  # the push failed or carried no digest
    LOCK_STALE = 8  # `lock --check`: an image is missing from the lock, or its tag moved
    TIMEOUT = 124  # --timeout expired; the build was cancelled
    INTERRUPTED = 130  # Ctrl-C; the build was cancelled and our tags removed
    PIPE_CLOSED = 141  # `build`: the reader of its output went away (128 + SIGPIPE)
    USAGE = 64  # wrong command-line usage (click's own errors use 2; we remap)


# Where a profile value came from; a problem's fix is written in the same form (YAML for a
# file, `--set FIELD=VALUE` for an override, the option for an option, a new pin for a lock).
FILE = "file"  # a profile file (or one it extends, or a file a field names)
SET = "set"  # a `--set FIELD=VALUE` override
OPTION = "option"  # a command option that sets a field, such as `build --ca-cert PATH`
LOCK = "lock"  # a base-image lock beside the profile (PROFILE.lock.json)


@dataclass(frozen=True, order=True)
class Location:
    """Where a value came from: a file position, or a command-line override.

    ``file`` is what the reader sees first: the file's name, `--set FIELD`, `--ca-cert
    PATH`, or the lock file; ``origin`` says which of them it is (:data:`FILE`,
    :data:`SET`, :data:`OPTION`, :data:`LOCK`), so a fix can be given in that form.
    """

    file: str
    line: int = 0  # 1-based; 0 = unknown
    col: int = 0  # 1-based; 0 = unknown
    origin: str = FILE

    def __str__(self) -> str:
        if self.line:
            return f"{self.file}:{self.line}:{self.col}"
        return self.file


class Severity(str, Enum):
    """How much a problem weighs (the value is the word shown after a warning)."""

    ERROR = "error"  # stops the command: nothing is written
    WARNING = "warning"  # explains a legal but surprising choice

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Problem:
    """One finding about a profile: ``FILE:LINE:COL: field.path: message; fix``."""

    location: Location
    field: str
    message: str
    fix: str = ""
    severity: Severity = Severity.ERROR

    def __str__(self) -> str:
        text = f"{self.location}: {self.field}: {self.message}" if self.field else (
            f"{self.location}: {self.message}"
        )
        if self.fix:
            text += f"; {self.fix}"
        if self.severity is Severity.WARNING:
            text += " [warning]"
        return redact(text)

    def sort_key(self) -> tuple[str, int, int, str, str]:
        return (self.location.file, self.location.line, self.location.col, self.field,
                self.message)


class DockergenError(Exception):
    """Base of every error meant for the user; carries its exit code."""

    exit_code: ExitCode = ExitCode.BUG

    def lines(self) -> list[str]:
        """The message, one line per problem."""
        return [str(self)]


class ProfileError(DockergenError):
    """A profile is invalid; holds every problem found, sorted by position."""

    exit_code = ExitCode.INVALID_PROFILE

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(problems, key=Problem.sort_key)
        super().__init__("\n".join(str(p) for p in self.problems))

    def lines(self, warnings: bool = True) -> list[str]:
        """One line per problem; ``warnings=False`` (``-q``) leaves the warnings out."""
        return [str(p) for p in self.problems if warnings or p.severity is not Severity.WARNING]

    def errors(self) -> int:
        """How many problems are errors (the warnings beside them stop nothing)."""
        return sum(1 for p in self.problems if p.severity is Severity.ERROR)


class MissingToolError(DockergenError):
    """An external program or service dockergen needs is not available."""

    exit_code = ExitCode.MISSING_TOOL


class OutputError(DockergenError):
    """The output could not be written (nothing was changed)."""

    exit_code = ExitCode.OUTPUT

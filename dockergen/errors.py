"""The one error hierarchy users see, and the exit code of each kind.

Anything raised that is not a :class:`DockergenError` is a bug in dockergen and keeps
its traceback; every user mistake is one of these and becomes a clear message.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from enum import Enum, IntEnum
from pathlib import Path

from dockergen.secretscan import SecretScan

# dockergen's own shapes of credentials that must never be echoed back (messages,
# logs, labels), beside the vendored rules of a secret scanner (SecretScan). Token
# prefixes need a left boundary, or `risk-management-prod` and `task-...` log lines read as
# OpenAI `sk-` keys; an `sk-` key must also hold a digit (random base62 of 48 characters
# almost always does; words joined by dashes do not). Every branch starts only at a
# boundary and its repeats are bounded where they can span a long word, so a scan is
# linear: an unbounded branch restarted at every letter and took 20 s on a 200 kB value.
_B = r"(?<![A-Za-z0-9_-])"
_OWN = re.compile(
    rf"({_B}hf_[A-Za-z0-9]{{8,}}|{_B}gh[pousr]_[A-Za-z0-9]{{8,}}|{_B}github_pat_[A-Za-z0-9_]{{8,}}"
    rf"|{_B}AKIA[0-9A-Z]{{12,}}|{_B}sk-(?=[A-Za-z0-9_-]{{0,64}}[0-9])[A-Za-z0-9_-]{{8,}}"
    rf"|{_B}xox[abpr]-[A-Za-z0-9-]{{8,}}"
    # scheme://user:password@ (any case; the user may be empty, the password may hold '@';
    # one '/' too: a URL taken for a path comes back as https:/user:password@...)
    r"|(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*:/{1,2}[^/\s:@]*:[^/\s]*@"
    # user:password@host/ without a scheme, as pasted in place of an image reference: the
    # '@' must be followed by a registry host and '/' (`name:tag@sha256:...` is a digest
    # pin, `REPO:path@commit` a source citation)
    r"|(?<![^\s'\"=,(\[])[^/\s:@'\"=,(\[]{1,128}:[^/\s'\"]{0,128}@"
    r"(?=(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)(?::[0-9]+)?/|[A-Za-z0-9-]+:[0-9]+/)"
    # credentials in a URL's query (token-in-URL indexes, pre-signed S3/GCS/Azure links)
    r"|[?&](?i:token|access_token|auth|key|api_key|apikey|password|secret|sig|signature"
    r"|x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature"
    r"|x-goog-credential)=[^&\s'\"]+)")


_RULES_FILE = Path(__file__).parent / "data" / "secret_rules.json"


SECRET_VALUE = SecretScan(_OWN, _RULES_FILE)

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


def shown_value(value: str) -> str:
    """A refused value for a message: quoted with control characters escaped, short, and
    never a credential (the reader learns what was wrong without it reaching a log)."""
    if holds_secret(value):
        return "(a value shaped like a credential, not shown)"
    return repr(value if len(value) <= 60 else value[:57] + "...")


def _part_holds_secret(part: str) -> bool:
    # a token rule ends at a boundary that '.' is not (gitleaks' stripe, npm, JWT rules):
    # the name without its suffix is scanned as well
    return bool(SECRET_VALUE.search(part) or SECRET_VALUE.search(part.rsplit(".", 1)[0]))


def path_holds_secret(path: str) -> bool:
    """A component of the file path ``path`` (``glpat-....yaml``) is shaped like a
    credential: dockergen writes the paths it reads and writes into output and messages."""
    return any(_part_holds_secret(part) for part in path.split("/"))


def redact_path(path: str) -> str:
    """``path`` with each component shaped like a credential replaced by ``<redacted>``."""
    return "/".join("<redacted>" if _part_holds_secret(part) else part
                    for part in path.split("/"))


def redact(text: str) -> str:
    """Replace anything shaped like a credential with ``<redacted>``."""
    return SECRET_VALUE.sub("<redacted>", text)


def dotted(path: tuple[str | int, ...]) -> str:
    """A field path as the reader writes it: ``("serving", "env", "X")`` ->
    ``serving.env.X``, list items as ``[i]`` (``gpu.targets[1]``)."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


class ExitCode(IntEnum):
    """Process exit codes of the ``dockergen`` command (the README's exit-code table)."""

    OK = 0
    BUG = 1  # an unexpected exception: a dockergen bug, traceback shown
    INVALID_PROFILE = 2  # the profile (or a --set override) is wrong
    MISSING_TOOL = 3  # an external tool or service is not available
    OUTPUT = 4  # the output could not be written
    BUILD_FAILED = 5  # the image build (or a base-image pull) failed
    SMOKE_FAILED = 6  # the built image failed its smoke tests; nothing was pushed
    PUSH_FAILED = 7  # the push failed or carried no digest
    LOCK_STALE = 8  # `lock --check`: an image is missing from the lock, or its tag moved
    OUTDATED = 9  # `outdated`: a newer release exists that the profile can move to as it is
    VERIFY_FAILED = 10  # `verify`: a signature, attestation or its content does not hold
    TIMEOUT = 124  # --timeout expired; the build was cancelled
    INTERRUPTED = 130  # Ctrl-C; the build was cancelled and our tags removed
    TERMINATED = 143  # SIGTERM (128 + 15): as Ctrl-C, the command's own staging removed
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
        shown = redact_path(self.file)  # a token in a file name (gitleaks' '.'-less rules)
        if self.line:
            return f"{shown}:{self.line}:{self.col}"
        return shown


class Severity(str, Enum):
    """How much a problem weighs (the value is the word shown after a warning)."""

    ERROR = "error"  # stops the command: nothing is written
    WARNING = "warning"  # explains a legal but surprising choice

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Edit:
    """One alternative of a fix, in words and as a machine applies it: the fields to set,
    each value written as ``--set FIELD=VALUE`` reads it (YAML for lists, the raw string
    for text). Checks offer candidates; resolution keeps those that, applied, leave a
    profile with no error the original did not have (see :func:`dockergen.resolve.fold.check`).
    """

    text: str  # "use CUDA 13.0.2", "drop v100"
    sets: tuple[tuple[str, str], ...]
    # other hardware ("target a100 instead of t4"): offered only when no change of the
    # software fixes the problem
    drastic: bool = False

    @classmethod
    def set(cls, name: str, value: str, text: str | None = None) -> Edit:
        """Set one field; the words default to ``set FIELD: VALUE``."""
        return cls(text or f"set {name}: {value}", ((name, value),))

    def overrides(self) -> tuple[str, ...]:
        """The edit as ``--set`` arguments."""
        return tuple(f"{k}={v}" for k, v in self.sets)


def compose_fix(edits: tuple[Edit, ...], advice: str = "") -> str:
    """The fix in words: the edits, then the advice no machine can apply, joined by "or".

    Edits of one field whose words end in their value read as one choice:
    "use CUDA 13.0.2", "use CUDA 13.2.2" -> "use CUDA 13.0.2 or 13.2.2".
    """
    phrases: list[str] = []
    last: tuple[str, str] | None = None  # (field, words before the value)
    for edit in edits:
        name, value = edit.sets[0] if len(edit.sets) == 1 else ("", "")
        lead = edit.text[:-len(value)] if value and edit.text.endswith(value) else None
        if lead is not None and last == (name, lead):
            phrases[-1] += f" or {value}"
            continue
        phrases.append(edit.text)
        last = (name, lead) if lead is not None else None
    if advice:
        phrases.append(advice)
    return ", or ".join(phrases)


# one or more targets as components.base.describe writes them: "h100 (9.0)", "9.0"
_GPU_LIST = re.compile(r"(?<![\w.])(?:[a-z][\w-]* \(\d+\.\d+\)|\d+\.\d+)"
                       r"(?:, (?:[a-z][\w-]* \(\d+\.\d+\)|\d+\.\d+))*(?= *[;,)]|$)")


@dataclass(frozen=True)
class Problem:
    """One finding about a profile: ``FILE:LINE:COL: field.path: message; fix``.

    ``edits`` are the fix's applicable alternatives and ``advice`` the part that needs the
    user's judgement ("give a PEM certificate"); ``fix`` is both in words.
    """

    location: Location
    field: str
    message: str
    fix: str = ""
    severity: Severity = Severity.ERROR
    edits: tuple[Edit, ...] = ()
    advice: str = ""

    def identity(self) -> tuple[str, str]:
        """The field and the message without the GPU targets it names ("v100 (7.0), t4
        (7.5)"): a rule that still fails after a change of gpu.targets on fewer or other
        targets is the same problem, not a new one."""
        return (self.field, _GPU_LIST.sub("GPUs", self.message))

    def keeping(self, edits: tuple[Edit, ...]) -> Problem:
        """The problem with only ``edits`` (those proven to work) in its fix."""
        return dataclasses.replace(self, edits=edits, fix=compose_fix(edits, self.advice))

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
    """Base of every error meant for the user; carries its exit code.

    A kind of error is declared in one shape: its class line gives the exit code,
    ``class SmokeFailed(DockergenError, code=ExitCode.SMOKE_FAILED):``, and its docstring
    says when it is raised; a kind declared without ``code`` keeps its base's.
    """

    exit_code: ExitCode = ExitCode.BUG

    def __init_subclass__(cls, code: ExitCode | None = None, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.exit_code = code

    def lines(self) -> list[str]:
        """The message, one line per problem."""
        return [str(self)]


class ProfileError(DockergenError, code=ExitCode.INVALID_PROFILE):
    """A profile is invalid; holds every problem found, sorted by position."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(problems, key=Problem.sort_key)
        super().__init__("\n".join(str(p) for p in self.problems))

    def lines(self, warnings: bool = True) -> list[str]:
        """One line per problem; ``warnings=False`` (``-q``) leaves the warnings out."""
        return [str(p) for p in self.problems if warnings or p.severity is not Severity.WARNING]

    def errors(self) -> int:
        """How many problems are errors (the warnings beside them stop nothing)."""
        return sum(1 for p in self.problems if p.severity is Severity.ERROR)


class MissingToolError(DockergenError, code=ExitCode.MISSING_TOOL):
    """An external program or service dockergen needs is not available."""



class UsageError(DockergenError, code=ExitCode.USAGE):
    """A command-line value that cannot be used (a malformed reference, a secret in a build
    arg, a key cosign would not take); refused before anything is done."""


class OutputError(DockergenError, code=ExitCode.OUTPUT):
    """The output could not be written (nothing was changed)."""

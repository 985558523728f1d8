"""The one error hierarchy users see, and the exit code of each kind.

Anything raised that is not a :class:`DockergenError` is a bug in dockergen and keeps
its traceback; every user mistake is one of these and becomes a clear message.
May import: nothing of dockergen.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from dataclasses import dataclass
from enum import Enum, IntEnum
from pathlib import Path
from typing import Any

# dockergen's own shapes of credentials that must never be echoed back (messages,
# logs, labels), beside the vendored rules of a secret scanner (SecretScan below). Token
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
_LINE = 512
_IDENT = re.compile(r"[\w.-]", re.ASCII)


@dataclass(frozen=True)
class _Rule:
    """One vendored rule: run only when one of its keywords is in the text (as gitleaks
    does), then kept only above its entropy and outside its allowlists."""

    id: str
    pattern: str
    group: int
    entropy: float
    keywords: tuple[str, ...]
    lead: int  # identifier characters gitleaks' match may start with before the pattern's
    allowlists: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...]

    @functools.cached_property
    def regex(self) -> re.Pattern[str]:
        """Compiled on first use: a scan runs only the rules whose keywords it meets, and
        compiling all 200 would cost every command a few hundred milliseconds."""
        return re.compile(self.pattern, re.ASCII)


def _entropy(text: str) -> float:
    """Shannon entropy in bits per character (gitleaks detect/utils.go shannonEntropy)."""
    counts: dict[str, int] = {}
    for ch in text:
        counts[ch] = counts.get(ch, 0) + 1
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _allowed(allow: tuple[str, str, tuple[str, ...], tuple[str, ...]],
             secret: str, match: str, line: str) -> bool:
    scope, condition, regexes, stopwords = allow  # scope: gitleaks' allowlist "target"
    text = {"match": match, "line": line}.get(scope, secret)
    checks = []
    if regexes:
        checks.append(any(re.search(r, text, re.ASCII) for r in regexes))  # re's cache
    if stopwords:
        checks.append(any(w in secret.lower() for w in stopwords))
    return bool(checks) and (all(checks) if condition == "AND" else any(checks))


class SecretScan:
    """Credential shapes: dockergen's own (:data:`_OWN`) and the rules of gitleaks,
    vendored in ``data/secret_rules.json`` with their source, version and licence
    (derived by :mod:`dockergen.maint.secret_rules`). The file is read on the first scan,
    so commands that print nothing pay nothing. Every kept rule's pattern has no nested
    quantifier, so a scan stays linear (tests/unit/input/test_secrets_scan.py times each rule).
    """

    def __init__(self, own: re.Pattern[str], rules_file: Path) -> None:
        self._own = own
        self._file = rules_file
        self._rules: list[_Rule] | None = None
        self._global: tuple[str, str, tuple[str, ...], tuple[str, ...]] | None = None
        self._by_keyword: dict[str, list[int]] = {}  # keyword -> the rules that need it
        self._keywords: tuple[str, ...] = ()
        self._always: set[int] = set()  # rules without keywords

    def rules(self) -> list[_Rule]:
        """The vendored rules, compiled."""
        if self._rules is None:
            data = json.loads(self._file.read_text(encoding="utf-8"))

            def allow(a: dict[str, Any]) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
                return (a.get("target", "secret"), a.get("condition", "OR"),
                        tuple(a.get("regexes", [])), tuple(a.get("stopwords", [])))

            self._global = allow(data["global_allowlist"])
            self._rules = [_Rule(r["id"], r["regex"], r["group"],
                                 r["entropy"], tuple(r["keywords"]), r["lead"],
                                 tuple(allow(a) for a in r["allowlists"]))
                           for r in data["rules"]]
            for i, rule in enumerate(self._rules):
                for k in rule.keywords:
                    self._by_keyword.setdefault(k, []).append(i)
                if not rule.keywords:
                    self._always.add(i)
            self._keywords = tuple(self._by_keyword)
        return self._rules

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, rule id) of every credential in ``text``, in order."""
        found = [(m.start(), m.end(), "dockergen") for m in self._own.finditer(text)]
        lower = text.lower()
        rules = self.rules()
        ids = {i for k in self._keywords if k in lower for i in self._by_keyword[k]}
        for rule in (rules[i] for i in sorted(ids | self._always)):
            for m in rule.regex.finditer(text):
                group = rule.group if m.start(rule.group) >= 0 else 0
                secret = m.group(group)
                if not secret or (rule.entropy and _entropy(secret) < rule.entropy):
                    continue
                # the line around the match, at most _LINE characters each side: a "line"
                # allowlist runs on it, and on a whole 200 kB line it could backtrack
                begin = max(text.rfind("\n", 0, m.start()) + 1, m.start() - _LINE)
                line = text[begin:m.end() + _LINE].split("\n", 1)[0]
                assert self._global is not None
                # the identifier run before the keyword that gitleaks' match starts with
                # (dockergen.maint.secret_rules strip_lead), for allowlists of the match
                lead = m.start()
                while lead > m.start() - rule.lead and lead and _IDENT.match(text, lead - 1):
                    lead -= 1
                if any(_allowed(a, secret, text[lead:m.end()], line)
                       for a in (self._global, *rule.allowlists)):
                    continue
                found.append((m.start(group), m.end(group), rule.id))
        return sorted(found)

    def search(self, text: str) -> tuple[int, int, str] | None:
        """The first credential in ``text`` (truthy), or None."""
        spans = self.spans(text)
        return spans[0] if spans else None

    def sub(self, repl: str, text: str) -> str:
        """``text`` with every credential (overlapping ones merged) replaced by ``repl``."""
        out, at = [], 0
        for start, end, _ in self.spans(text):
            if start < at:  # overlaps the one before: one replacement for both
                at = max(at, end)
                continue
            out.append(text[at:start] + repl)
            at = end
        return "".join(out) + text[at:]


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
    profile with no error the original did not have (see :func:`dockergen.resolve.check`).
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


class UsageError(DockergenError):
    """A command-line value that cannot be used (a malformed reference, a secret in a build
    arg, a key cosign would not take); refused before anything is done."""

    exit_code = ExitCode.USAGE


class OutputError(DockergenError):
    """The output could not be written (nothing was changed)."""

    exit_code = ExitCode.OUTPUT

"""Newer releases on the configured index, and what dockergen's rules say of each.

For a profile: its serving engine and the packages pinned beside it (torch, the engine's kernel
packages, flash-attn when the image builds it), the releases newer than the profile's on the
index the profile installs from (``build.pip_index_url``, else PyPI; ``--index`` replaces it),
whether dockergen's knowledge has each, and, for what the profile itself sets
(``engine.version``, ``flash_attn.version``), the verdict of every rule on the profile moved
to that release: the profile is resolved again with the one field changed, so the verdict is
exactly what ``validate`` would say. Packages the engine release pins move with the engine
and get no verdict of their own. Pre-releases are not listed.

The index is read through its simple API, PEP 691 JSON or PEP 503 HTML, whichever it answers.
Credentials come from ``DOCKERGEN_INDEX_USERNAME``/``DOCKERGEN_INDEX_PASSWORD`` or from netrc
(``$NETRC`` or ``~/.netrc``) for the index's host; they are sent only to that host and never
written or printed. May import: :mod:`dockergen.pipeline` (the profile is read once),
:mod:`dockergen.loader` (each release tried on what was read),
:mod:`dockergen.components.serving`, :mod:`dockergen.errors`, :mod:`dockergen.knowledge`,
:mod:`dockergen.model`, :mod:`dockergen.ranges`, :mod:`dockergen.retry`.
"""

from __future__ import annotations

import base64
import html.parser
import io
import json
import netrc
import os
import re
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from dockergen import retry
from dockergen.components.serving import engine_for
from dockergen.errors import (
    DockergenError,
    ExitCode,
    ProfileError,
    Severity,
    holds_secret,
    redact,
)
from dockergen.knowledge import load_facts
from dockergen.loader import LoadedProfile, with_overrides
from dockergen.model import MAIN_INDEX
from dockergen.pipeline import resolution, resolution_of
from dockergen.ranges import BLOCK, RangeReader

# A simple-API page is read up to this size (PyPI's JSON page of torch is a few MiB).
PAGE_LIMIT = 64 << 20
# A wheel is read whole (an index without range requests) only up to this size: a mirror
# that serves a 400 MB vLLM wheel that way gets a clear refusal, not a long download.
WHEEL_LIMIT = 64 << 20
# One library read out of a wheel (range requests: only its compressed bytes travel) to list
# its GPU code: vLLM 0.9.1's _C.abi3.so is 287 MiB unpacked, newer ones under 100 MiB.
MEMBER_LIMIT = 512 << 20
# One Python source file read out of a wheel and parsed (vLLM 0.34.0's largest the upgrade
# reads, engine/arg_utils.py, is 0.1 MiB): a syntax tree takes tens of times its source in
# memory, so a hostile index must not hand over the library limit's worth of "source".
SOURCE_LIMIT = 4 << 20
TIMEOUT_S = 30
USER_ENV, PASSWORD_ENV = "DOCKERGEN_INDEX_USERNAME", "DOCKERGEN_INDEX_PASSWORD"
_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"


class IndexReadError(DockergenError):
    """The index could not be read (unreachable, refused, not a simple API)."""

    exit_code = ExitCode.MISSING_TOOL

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status, when the index answered with an error


class OutdatedError(DockergenError):
    """A newer release exists that a profile can move to with every rule passing (exit 9,
    for scheduled CI); the report itself is already printed."""

    exit_code = ExitCode.OUTDATED


@dataclass(frozen=True)
class Newer:
    """A release newer than the profile's: known to dockergen, and the rules' verdict."""

    version: str
    known: bool | None  # None: dockergen keeps no list of this package's releases
    verdict: str  # "ok", "ok, N warning(s)", "error", "unknown", "moves with the engine"
    detail: str = ""  # the first error, or what to do


@dataclass(frozen=True)
class PackageReport:
    """One package of a profile: its version there, who sets it, the newer releases."""

    name: str
    current: str
    setting: str | None  # the profile field that moves it; None: pinned by the engine
    newer: tuple[Newer, ...]


@dataclass(frozen=True)
class Report:
    """What ``dockergen outdated`` says of one profile."""

    profile: str
    index: str
    packages: tuple[PackageReport, ...] = field(default_factory=tuple)

    def valid_newer(self) -> list[tuple[str, str]]:
        """(package, release) for every newer release the profile can move to as it is."""
        return [(p.name, n.version) for p in self.packages for n in p.newer
                if n.verdict.startswith("ok")]


# --- the index ----------------------------------------------------------------------------

def is_index_url(url: str) -> bool:
    """An http(s) URL with a host and no credentials in it (those come from the
    environment or netrc, so that no command line or log ever holds them)."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
    except ValueError:
        return False
    return (parts.scheme in ("http", "https") and bool(host) and parts.username is None
            and not holds_secret(url) and not any(ord(ch) < 33 for ch in url))


class _Links(html.parser.HTMLParser):
    """The links of a PEP 503 page: (file name, href)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._href = (dict(attrs).get("href") or "") if tag == "a" else None

    def handle_endtag(self, tag: str) -> None:
        self._href = None

    def handle_data(self, data: str) -> None:
        if self._href is not None and data.strip():
            self.links.append((data.strip(), self._href))


def _credentials(host: str) -> tuple[str, str] | None:
    user, password = os.environ.get(USER_ENV), os.environ.get(PASSWORD_ENV)
    if user and password:
        return user, password
    path = os.environ.get("NETRC") or str(Path.home() / ".netrc")
    try:
        entry = netrc.netrc(path).authenticators(host)
    except (OSError, netrc.NetrcParseError):
        return None
    if entry and entry[0] and entry[2]:
        return entry[0], entry[2]
    return None


def _read(url: str, limit: int = PAGE_LIMIT, span: tuple[int, int] | None = None
          ) -> tuple[bytes, str]:
    """(body, content type) of one simple-API page or file, bounded, credentials attached;
    ``span`` asks for bytes ``[start, end)`` only (the content type is then the
    Content-Range header, ``bytes a-b/total``)."""
    headers = {"Accept": _ACCEPT, "User-Agent": "dockergen-outdated"}
    if span is not None:
        headers["Range"] = f"bytes={span[0]}-{span[1] - 1}"
    request = urllib.request.Request(url, headers=headers)
    host = urllib.parse.urlsplit(url).hostname or ""
    creds = _credentials(host)
    if creds:
        token = base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()
        # never sent on a redirect to another host
        request.add_unredirected_header("Authorization", f"Basic {token}")
    def fetch() -> tuple[bytes, str, int]:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as resp:  # noqa: S310
            return (resp.read(limit + 1),
                    resp.headers.get("Content-Range" if span else "Content-Type", ""),
                    resp.status)

    try:
        body, kind, status = retry.retried(fetch)
        if span is not None and status != 206:
            raise IndexReadError(f"{redact(url)}: the server ignores range requests")
    except urllib.error.HTTPError as exc:
        hint = (f"; give credentials in {USER_ENV}/{PASSWORD_ENV} or netrc"
                if exc.code in (401, 403) else "")
        raise IndexReadError(f"{redact(url)}: HTTP {exc.code}{hint}", exc.code) from None
    except (urllib.error.URLError, TimeoutError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise IndexReadError(f"{redact(url)}: cannot be read ({redact(str(reason))}); check "
                          "the index URL and the network") from None
    if len(body) > limit:
        raise IndexReadError(f"{redact(url)}: larger than {limit >> 20} MiB")
    return body, kind


def _version_of(filename: str, name: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            dist, version, *_ = parse_wheel_filename(filename)
        elif filename.endswith((".tar.gz", ".zip")):
            dist, version = parse_sdist_filename(filename)
        else:
            return None
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return version if dist == canonicalize_name(name) else None


@dataclass(frozen=True)
class IndexFile:
    """One file of a project as the index lists it."""

    name: str  # vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl
    version: Version
    url: str  # absolute
    sha256: str  # "" when the index gives none


def files(index: str, name: str) -> list[IndexFile]:
    """Every file of ``name`` the index lists."""
    url = f"{index.rstrip('/')}/{canonicalize_name(name)}/"
    body, kind = _read(url)
    links: list[tuple[str, str, str]]  # (file name, href, sha256)
    if "json" in kind:
        try:
            page = json.loads(body)
            links = [(str(f["filename"]), str(f["url"]),
                      str((f.get("hashes") or {}).get("sha256", "")))
                     for f in page.get("files", [])]
        except (ValueError, TypeError, KeyError, AttributeError):
            raise IndexReadError(f"{redact(url)}: not a PEP 691 JSON page") from None
    else:
        parser = _Links()
        parser.feed(body.decode("utf-8", "replace"))
        links = [(n, href, href.split("#sha256=", 1)[1] if "#sha256=" in href else "")
                 for n, href in parser.links]
    return [IndexFile(n, v, urllib.parse.urljoin(url, href.split("#", 1)[0]), digest)
            for n, href, digest in links if (v := _version_of(n, name)) is not None]


def releases(index: str, name: str) -> list[Version]:
    """Every release of ``name`` the index lists (its files' versions), sorted."""
    return sorted({f.version for f in files(index, name)})


def read_range(url: str, start: int, end: int) -> tuple[bytes, int]:
    """Bytes ``[start, end)`` of a file the index serves, and the file's whole size."""
    body, content_range = _read(url, max(end - start, 1), (start, end))
    try:
        return body, int(content_range.rsplit("/", 1)[1])
    except (IndexError, ValueError):
        raise IndexReadError(f"{redact(url)}: no Content-Range in a range answer") from None


def _ranges(url: str) -> RangeReader:
    """The file at ``url`` read through range requests, its last MiBs (where a wheel's zip
    directory is) fetched at once."""
    _, size = read_range(url, 0, 1)  # one byte: the answer's Content-Range has the size
    reader = RangeReader(size, lambda lo, hi: read_range(url, lo, hi)[0])
    reader.prefetch(max(0, size - 2 * BLOCK), size)
    return reader


def _wheel(url: str, shown: str) -> zipfile.ZipFile:
    """The wheel at ``url`` as a zip: through range requests, else (an index without them)
    whole up to :data:`WHEEL_LIMIT`."""
    try:
        source: Any = io.BufferedReader(_ranges(url), BLOCK)
    except IndexReadError as exc:
        if exc.status is not None and exc.status != 416:
            raise
        whole = read_file(url, WHEEL_LIMIT)
        if whole is None:
            raise IndexReadError(f"{shown}: the index lists it but does not serve it",
                                 404) from exc
        source = io.BytesIO(whole)
    try:
        return zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError) as exc:
        raise IndexReadError(f"{shown}: not a readable wheel ({exc})") from None


def wheel_member(url: str, pattern: str, shown: str) -> str:
    """The text of the one member of the wheel at ``url`` whose name matches ``pattern``."""
    try:
        with _wheel(url, shown) as zf:
            names = [n for n in zf.namelist() if re.fullmatch(pattern, n)]
            if len(names) != 1:
                raise IndexReadError(f"{shown}: not one member like {pattern} in the wheel")
            return zf.read(names[0]).decode("utf-8", "replace")
    except (zipfile.BadZipFile, OSError) as exc:
        raise IndexReadError(f"{shown}: not a readable wheel ({exc})") from None


def wheel_members(url: str, names: list[str], shown: str, limit: int = MEMBER_LIMIT,
                  what: str = "one library") -> dict[str, bytes]:
    """The members of the wheel at ``url`` among ``names`` (those it holds), each up to
    ``limit`` bytes unpacked (``what`` names such a member in the refusal)."""
    out = {}
    try:
        with _wheel(url, shown) as zf:
            for info in zf.infolist():
                if info.filename not in names:
                    continue
                if info.file_size > limit:
                    raise IndexReadError(f"{shown}: {info.filename} is {info.file_size} bytes "
                                         f"unpacked, more than the {limit >> 20} MiB "
                                         f"dockergen reads of {what}")
                out[info.filename] = zf.read(info)
    except (zipfile.BadZipFile, OSError) as exc:
        raise IndexReadError(f"{shown}: not a readable wheel ({exc})") from None
    return out


def read_file(url: str, limit: int = PAGE_LIMIT) -> bytes | None:
    """A file the index serves (a wheel's PEP 658 ``.metadata``, a small wheel), with the
    index's credentials, up to ``limit`` bytes; None when the index has no such file."""
    try:
        body, _ = _read(url, limit)
    except IndexReadError as exc:
        if exc.status == 404:
            return None
        raise
    return body


# --- verdicts -----------------------------------------------------------------------------

def _verdict(loaded: LoadedProfile, setting: str, version: str) -> tuple[str, str]:
    """What the rules say of the profile as read, with ``setting`` moved to ``version``."""
    try:
        r = resolution_of(with_overrides(loaded, (f"{setting}={version}",))).resolved
    except ProfileError as exc:
        first = next(p for p in exc.problems if p.severity is Severity.ERROR)
        return "error", redact(f"{first.field}: {first.message}" if first.field
                               else first.message)
    warned = len(r.warnings)
    return ("ok", "") if not warned else (f"ok, {warned} warning(s)",
                                          redact(str(r.warnings[0].message)))


def check(path: Path, overrides: tuple[str, ...] = (), index: str | None = None) -> Report:
    """The report for one profile (raises the profile's own errors first)."""
    res = resolution(path, overrides)
    r = res.resolved
    p = r.profile
    where = index or p.build.pip_index_url or MAIN_INDEX
    engine = engine_for(p.engine.name)
    engine_facts = engine.facts()
    pinned = [(q.split("==", 1)[0].split("[", 1)[0], q.split("==", 1)[1])
              for q in r.engine.requirements[1:] if "==" in q and "/" not in q]
    # (package, its version here, the profile field that moves it, its releases dockergen
    # knows: torch's rows are per minor release)
    torch_rows = set(load_facts("torch")["releases"])
    packages: list[tuple[str, str, str | None, Callable[[Version], bool] | None]] = [
        (str(engine_facts["package"]), p.engine.version, "engine.version",
         lambda v: str(v) in engine_facts["releases"]),
        ("torch", r.engine.torch, None, lambda v: f"{v.major}.{v.minor}" in torch_rows),
        *((name, version, None, None) for name, version in pinned)]
    if r.flash_attn is not None:
        fa_releases = set(load_facts("flash_attn")["releases"])
        packages.append(("flash-attn", r.flash_attn.version, "flash_attn.version",
                         lambda v: str(v) in fa_releases))
    reports = []
    for name, current, setting, knows in packages:
        newer = []
        for v in releases(where, name):
            if v.is_prerelease or v.is_devrelease or v <= Version(current):
                continue
            is_known = None if knows is None else knows(v)
            if setting is None:
                newer.append(Newer(str(v), is_known, "moves with the engine",
                                   f"pinned by {r.engine.requirements[0]}"))
            elif is_known is False:
                newer.append(Newer(str(v), False, "unknown", "not in dockergen's knowledge: "
                                   "add its facts in a knowledge file (profile `knowledge:`), "
                                   "or wait for a dockergen release that has them"))
            else:
                verdict, detail = _verdict(res.loaded, setting, str(v))
                newer.append(Newer(str(v), is_known, verdict, detail))
        reports.append(PackageReport(name, current, setting, tuple(newer)))
    return Report(str(path), redact(where), tuple(reports))


def to_json(reports: list[Report]) -> str:
    """The reports for machines (``--json``)."""
    return json.dumps([asdict(r) for r in reports], indent=2, sort_keys=True) + "\n"


def to_text(reports: list[Report]) -> str:
    """The reports for people: each package with its newer releases, a line each."""
    lines = []
    for rep in reports:
        lines.append(f"{rep.profile} (index {rep.index}; pre-releases not listed)")
        for pkg in rep.packages:
            who = pkg.setting or "pinned by the engine release"
            lines.append(f"  {pkg.name} {pkg.current} ({who}): "
                         + ("up to date" if not pkg.newer else
                            f"{len(pkg.newer)} newer"))
            for n in pkg.newer:
                known = {True: "known", False: "not known", None: ""}[n.known]
                lines.append(f"    {n.version:<14} {known:<10} {n.verdict}"
                             + (f": {n.detail}" if n.detail else ""))
    return "\n".join(lines) + "\n"

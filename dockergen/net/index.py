"""A package index read through its simple API, and files read out of the wheels it serves.

Pages are PEP 691 JSON or PEP 503 HTML, whichever the index answers; a wheel's members are
read with HTTP range requests (:mod:`dockergen.net.ranges`), only their compressed bytes
travelling, each up to its limit. Credentials come from ``DOCKERGEN_INDEX_USERNAME``/
``DOCKERGEN_INDEX_PASSWORD`` or from netrc (``$NETRC`` or ``~/.netrc``) for the index's host;
they are bound to its origin (:mod:`dockergen.net.http`) and never written or printed.
"""

from __future__ import annotations

import io
import netrc
import os
import re
import struct
import urllib.parse
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import (
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from dockergen.errors import DockergenError, ExitCode, holds_secret, redact
from dockergen.files import inputs
from dockergen.net import http as net
from dockergen.net.ranges import BLOCK, RangeError, RangeReader

# A wheel's METADATA or RECORD is read unpacked up to this size (vLLM's RECORD: 0.2 MiB).
METADATA_LIMIT = 16 << 20
# One library read out of a wheel (range requests: only its compressed bytes travel) to list
# its GPU code: vLLM 0.9.1's _C.abi3.so is 287 MiB unpacked, newer ones under 100 MiB.
MEMBER_LIMIT = 512 << 20
# One Python source file read out of a wheel and parsed (vLLM 0.34.0's largest the upgrade
# reads, engine/arg_utils.py, is 0.1 MiB): a syntax tree takes tens of times its source in
# memory, so a hostile index must not hand over the library limit's worth of "source".
SOURCE_LIMIT = 4 << 20
USER_ENV, PASSWORD_ENV = "DOCKERGEN_INDEX_USERNAME", "DOCKERGEN_INDEX_PASSWORD"
_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"


class IndexReadError(DockergenError, code=ExitCode.MISSING_TOOL):
    """The index could not be read (unreachable, refused, not a simple API)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status, when the index answered with an error


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


# The credentials of each index a command reads, by its origin: set when its pages are read
# (:func:`files`), and only ever attached to a request to that same origin (dockergen.net.http).
_index_credentials: dict[net.Origin, net.Credential] = {}


def _netrc_entry(host: str) -> tuple[str, str] | None:
    """(login, password) of ``host`` in netrc (``$NETRC`` or ``~/.netrc``), read only when it
    is a regular file of bounded size (a FIFO or a device would block or never end)."""
    path = Path(os.environ.get("NETRC") or Path.home() / ".netrc")
    try:
        text = inputs.read_text(path, "netrc")
    except FileNotFoundError:
        return None
    except inputs.InputError as exc:
        raise IndexReadError(f"netrc: {exc}") from None
    parsed = netrc.netrc.__new__(netrc.netrc)
    parsed.hosts, parsed.macros = {}, {}
    try:
        parsed._parse(str(path), io.StringIO(text), False)  # type: ignore[attr-defined]
    except (netrc.NetrcParseError, ValueError):
        raise IndexReadError(f"{path}: not a netrc file dockergen can read; fix it or point "
                             "NETRC at another one") from None
    entry = parsed.authenticators(host)
    return (entry[0], entry[2]) if entry and entry[0] and entry[2] else None


def _credentials(index: str) -> None:
    """Bind the index's credentials (environment, else netrc for its host) to its origin."""
    origin = net.origin_of(index)
    if origin in _index_credentials:
        return
    user, password = os.environ.get(USER_ENV), os.environ.get(PASSWORD_ENV)
    found = (user, password) if user and password else _netrc_entry(origin.host)
    if found:
        _index_credentials[origin] = net.Credential.basic(
            origin, found[0], found[1], f"the credentials of {origin}")


def _read(url: str, kind: str = "page", span: tuple[int, int] | None = None
          ) -> tuple[bytes, str]:
    """(body, content type) of one simple-API page or file, bounded, credentials attached
    where they belong; ``span`` asks for bytes ``[start, end)`` only (the content type is
    then the Content-Range header, ``bytes a-b/total``)."""
    headers = {"Accept": _ACCEPT}
    if span is not None:
        headers["Range"] = f"bytes={span[0]}-{span[1] - 1}"
    try:
        answer = net.get(url, kind, headers, tuple(_index_credentials.values()),
                         None if span is None else max(span[1] - span[0], 1))
    except (net.DeadlineError, net.BudgetError):
        raise  # the command ends: no release is judged on a read cut short
    except net.NetError as exc:
        if span is not None and exc.status == 200:  # the whole file instead of the span
            raise IndexReadError(f"{redact(url)}: the server ignores range requests") from None
        raise IndexReadError(str(exc), exc.status) from None
    if answer.status >= 300 or answer.status < 200:
        hint = (f"; give credentials in {USER_ENV}/{PASSWORD_ENV} or netrc"
                if answer.status in (401, 403) else "")
        raise IndexReadError(f"{redact(url)}: HTTP {answer.status}{hint}", answer.status)
    if span is not None and answer.status != 206:
        raise IndexReadError(f"{redact(url)}: the server ignores range requests")
    return answer.body, answer.header("Content-Range" if span else "Content-Type")


def _version_of(filename: str, name: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            dist, version, *_ = parse_wheel_filename(filename)
        elif filename.endswith((".tar.gz", ".zip")):
            dist, version = parse_sdist_filename(filename)
        else:
            return None
    except ValueError:  # InvalidVersion and the file-name errors, and an int too long
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
    """Every file of ``name`` the index lists (links to anything but http(s) left out: a
    page never makes dockergen open a local file)."""
    _credentials(index)
    url = f"{index.rstrip('/')}/{canonicalize_name(name)}/"
    body, kind = _read(url)
    return parse_page(body, kind, url, name)


def parse_page(body: bytes, kind: str, url: str, name: str) -> list[IndexFile]:
    """The files of ``name`` on a simple-API page (``kind``: its Content-Type), or an
    IndexReadError: pypi-simple reads PEP 691 JSON and PEP 503 HTML."""
    from pypi_simple import ProjectPage

    try:
        if "json" in kind:
            page = ProjectPage.from_json_data(inputs.loads_json(body), url)
        else:
            page = ProjectPage.from_html(name, body, url)
    except Exception as exc:  # noqa: BLE001 - pypi-simple's parsers raise many kinds
        if not isinstance(exc, (ValueError, TypeError, KeyError, AttributeError, LookupError,
                                AssertionError)) and "pypi_simple" not in type(exc).__module__:
            raise
        raise IndexReadError(f"{redact(url)}: not a PEP 691 JSON or PEP 503 HTML page "
                             f"({type(exc).__name__})") from None
    out = []
    for pkg in page.packages:
        target = urllib.parse.urlsplit(pkg.url).scheme
        version = _version_of(pkg.filename, name)
        if version is not None and target in ("http", "https"):
            out.append(IndexFile(pkg.filename, version, pkg.url.split("#", 1)[0],
                                 str(pkg.digests.get("sha256", ""))))
    return out


def releases(index: str, name: str) -> list[Version]:
    """Every release of ``name`` the index lists (its files' versions), sorted."""
    return sorted({f.version for f in files(index, name)})


def read_range(url: str, start: int, end: int) -> tuple[bytes, int]:
    """Bytes ``[start, end)`` of a file the index serves, and the file's whole size; the
    answer's Content-Range must be the span asked (or its part inside the file)."""
    body, content_range = _read(url, "range", (start, end))
    match = re.fullmatch(r"bytes (\d{1,15})-(\d{1,15})/(\d{1,15})", content_range.strip())
    if match is None:
        raise IndexReadError(f"{redact(url)}: no Content-Range like bytes A-B/SIZE in a "
                             "range answer")
    first, last, size = (int(g) for g in match.groups())
    if first != start or last != min(end, size) - 1 or len(body) != last - first + 1:
        raise IndexReadError(f"{redact(url)}: asked bytes {start}-{end - 1}, the server "
                             f"answered {first}-{last} with {len(body)} bytes", 206)
    return body, size


def _ranges(url: str) -> RangeReader:
    """The file at ``url`` read through range requests, its last MiBs (where a wheel's zip
    directory is) fetched at once."""
    _, size = read_range(url, 0, 1)  # one byte: the answer's Content-Range has the size
    reader = RangeReader(size, lambda lo, hi: read_range(url, lo, hi)[0])
    reader.prefetch(max(0, size - 2 * BLOCK), size)
    return reader


# What zipfile raises on a malformed archive, besides its own BadZipFile.
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError,
               NotImplementedError, RuntimeError, zlib.error, struct.error)


def _wheel(url: str, shown: str) -> zipfile.ZipFile:
    """The wheel at ``url`` as a zip: through range requests, else (an index without them)
    whole up to the ``wheel`` limit."""
    try:
        source: Any = _ranges(url)
    except IndexReadError as exc:
        if exc.status is not None and exc.status != 416:
            raise
        whole = read_file(url, "wheel")
        if whole is None:
            raise IndexReadError(f"{shown}: the index lists it but does not serve it",
                                 404) from exc
        source = io.BytesIO(whole)
    return open_zip(source, shown)


def open_zip(source: Any, shown: str) -> zipfile.ZipFile:
    """``source`` (a seekable file) as a zip, or an IndexReadError naming ``shown``."""
    try:
        return zipfile.ZipFile(source)
    except RangeError as exc:
        raise IndexReadError(f"{shown}: {exc}") from None
    except _ZIP_ERRORS as exc:
        raise IndexReadError(f"{shown}: not a readable wheel ({type(exc).__name__})") from None


def _member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, shown: str,
            what: str) -> bytes:
    """One member, inflated at most to ``limit`` bytes whatever its header claims (a zip
    bomb stops at the limit, never in memory)."""
    if info.file_size > limit:
        raise IndexReadError(f"{shown}: {info.filename} is {info.file_size} bytes unpacked, "
                             f"more than the {limit >> 20} MiB dockergen reads of {what}")
    with zf.open(info) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise IndexReadError(f"{shown}: {info.filename} unpacks to more than the "
                             f"{limit >> 20} MiB dockergen reads of {what} (its header says "
                             f"{info.file_size} bytes)")
    return data


def wheel_member(url: str, pattern: str, shown: str, limit: int = METADATA_LIMIT) -> str:
    """The text of the one member of the wheel at ``url`` whose name matches ``pattern``."""
    try:
        zf = _wheel(url, shown)
    except RangeError as exc:
        raise IndexReadError(f"{shown}: {exc}") from None
    return member_text(zf, pattern, shown, limit)


def member_text(zf: zipfile.ZipFile, pattern: str, shown: str,
                limit: int = METADATA_LIMIT) -> str:
    """The text of the one member of ``zf`` whose name matches ``pattern`` (closes it)."""
    try:
        with zf:
            infos = [i for i in zf.infolist() if re.fullmatch(pattern, i.filename)]
            if len(infos) != 1:
                raise IndexReadError(f"{shown}: not one member like {pattern} in the wheel")
            return _member(zf, infos[0], limit, shown, "a metadata file").decode(
                "utf-8", "replace")
    except RangeError as exc:
        raise IndexReadError(f"{shown}: {exc}") from None
    except _ZIP_ERRORS as exc:
        raise IndexReadError(f"{shown}: not a readable wheel ({type(exc).__name__})") from None


def wheel_members(url: str, names: list[str], shown: str, limit: int = MEMBER_LIMIT,
                  what: str = "one library") -> dict[str, bytes]:
    """The members of the wheel at ``url`` among ``names`` (those it holds), each up to
    ``limit`` bytes unpacked (``what`` names such a member in the refusal)."""
    out = {}
    try:
        with _wheel(url, shown) as zf:
            for info in zf.infolist():
                if info.filename in names:
                    out[info.filename] = _member(zf, info, limit, shown, what)
    except RangeError as exc:
        raise IndexReadError(f"{shown}: {exc}") from None
    except _ZIP_ERRORS as exc:
        raise IndexReadError(f"{shown}: not a readable wheel ({type(exc).__name__})") from None
    return out


def read_file(url: str, kind: str = "metadata") -> bytes | None:
    """A file the index serves (a wheel's PEP 658 ``.metadata``, a small wheel), with the
    index's credentials, up to the limit of ``kind``; None when the index has no such file."""
    try:
        body, _ = _read(url, kind)
    except IndexReadError as exc:
        if exc.status == 404:
            return None
        raise
    return body

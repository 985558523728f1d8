"""Read what PyPI really publishes, without downloading 400 MB wheels.

* the release list and files of a project: the PEP 691 JSON simple API;
* a wheel's ``METADATA``: its PEP 658 ``.metadata`` file when the index serves one, else the
  wheel's zip central directory and that one member, read with HTTP range requests (what
  pip's "lazy wheel" does); the same way, only ``torch/include`` of a torch wheel;
* small sdists (flash-attn ~8 MB, tensorrt-llm's 10 KB stubs) are downloaded whole.

Everything downloaded is kept under the cache folder (``DOCKERGEN_CACHE_DIR``, default
``~/.cache/dockergen``), keyed by the file's sha256 from the index, and verified against it
where the whole file is read.
"""

from __future__ import annotations

import hashlib
import os
import re
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dockergen.errors import DockergenError, ExitCode
from dockergen.files import inputs
from dockergen.net import http as net
from dockergen.net.ranges import BLOCK, RangeReader

PYPI_SIMPLE = "https://pypi.org/simple"


class PyPIError(DockergenError, code=ExitCode.MISSING_TOOL):
    """PyPI could not be read (network, a missing file, a malformed answer)."""


def cache_dir() -> Path:
    """The download cache: ``$DOCKERGEN_CACHE_DIR`` or ``~/.cache/dockergen``."""
    env = os.environ.get("DOCKERGEN_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "dockergen"


def _get(url: str, kind: str = "page", headers: dict[str, str] | None = None,
         limit: int | None = None) -> bytes:
    """One read through dockergen's HTTP layer (bounded, retried when it passes)."""
    try:
        answer = net.get(url, kind, headers, (), limit)
    except net.NetError as exc:
        raise PyPIError(str(exc)) from None
    if answer.status not in (200, 206):
        raise PyPIError(f"{url}: HTTP {answer.status}")
    return answer.body


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


@dataclass(frozen=True)
class DistFile:
    """One file of a release as the simple API lists it."""

    filename: str
    url: str
    sha256: str
    size: int
    requires_python: str | None
    yanked: bool
    has_metadata: bool  # PEP 658/714 core-metadata advertised


def project(name: str, index: str = PYPI_SIMPLE) -> dict[str, Any]:
    """The PEP 691 JSON page of a project (``versions`` and ``files``)."""
    raw = _get(f"{index.rstrip('/')}/{name}/", "page",
               {"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        data = inputs.loads_json(raw)
    except ValueError as exc:
        raise PyPIError(f"{index}/{name}/: not a PEP 691 JSON answer") from exc
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise PyPIError(f"{index}/{name}/: not a PEP 691 JSON answer")
    return data


def files_of(page: dict[str, Any], version: str) -> list[DistFile]:
    """The files of one release (exact version string, as the filenames spell it)."""
    norm = re.sub(r"[-_.]+", "_", page["name"]).lower()
    out = []
    for f in page["files"]:
        fn = f["filename"]
        low = fn.lower()
        if not (low.startswith(f"{norm}-{version}-") or low == f"{norm}-{version}.tar.gz"
                or low.startswith(f"{page['name'].lower()}-{version}-")
                or low == f"{page['name'].lower()}-{version}.tar.gz"):
            continue
        out.append(DistFile(fn, f["url"], f["hashes"].get("sha256", ""), int(f.get("size") or 0),
                            f.get("requires-python"), bool(f.get("yanked")),
                            bool(f.get("core-metadata") or f.get("data-dist-info-metadata"))))
    return sorted(out, key=lambda d: d.filename)


def range_reader(url: str, size: int) -> RangeReader:
    """``url`` (``size`` bytes) read through range requests to PyPI."""
    def fetch(lo: int, hi: int) -> bytes:
        data = _get(url, "range", {"Range": f"bytes={lo}-{hi - 1}"}, hi - lo)
        if len(data) != hi - lo:
            raise PyPIError(f"{url}: the server ignored a range request")
        return data

    return RangeReader(size, fetch)


def wheel_metadata(f: DistFile) -> str:
    """A wheel's ``METADATA`` text (PEP 658 file, else a range read of the wheel; cached)."""
    cached = cache_dir() / "pypi" / "metadata" / f"{f.sha256}.METADATA"
    if cached.is_file():
        return cached.read_text(encoding="utf-8")
    text: str | None = None
    if f.has_metadata:
        text = _get(f.url + ".metadata", "metadata").decode("utf-8", "replace")
    else:
        reader = range_reader(f.url, f.size)
        # The central directory sits at the end; one request for the last 4 MiB usually
        # holds all of it (a torch wheel lists ~15k members).
        reader.prefetch(max(0, f.size - 4 * BLOCK), f.size)
        with zipfile.ZipFile(reader) as zf:
            names = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(names) != 1:
                raise PyPIError(f"{f.filename}: no single .dist-info/METADATA member")
            with zf.open(names[0]) as handle:
                text = handle.read(net.LIMITS["metadata"]).decode("utf-8", "replace")
    _atomic_write(cached, text.encode("utf-8"))
    return text


def download(f: DistFile) -> Path:
    """Download a whole (small) file into the cache, verified against its sha256."""
    path = cache_dir() / "pypi" / "files" / f.sha256[:2] / f.filename
    if path.is_file():
        return path
    data = _get(f.url, "file")
    if hashlib.sha256(data).hexdigest() != f.sha256:
        raise PyPIError(f"{f.filename}: sha256 does not match the index")
    _atomic_write(path, data)
    return path


def sdist_member(f: DistFile, member: str) -> str | None:
    """The text of ``<top>/member`` inside an sdist tarball (None if absent)."""
    with tarfile.open(download(f), "r:gz") as tf:
        for info in tf.getmembers():
            parts = info.name.split("/", 1)
            if len(parts) == 2 and parts[1] == member and info.isfile():
                handle = tf.extractfile(info)
                return handle.read().decode("utf-8") if handle else None
    return None


def extract_prefix(f: DistFile, prefix: str, dest: Path) -> int:
    """Extract only the members under ``prefix`` of a remote wheel into ``dest``.

    Members of one folder are stored together in a wheel, so their byte span is fetched in
    one range request (torch/include is ~30 MB of a ~900 MB wheel). Returns the bytes read.
    """
    reader = range_reader(f.url, f.size)
    reader.prefetch(max(0, f.size - 4 * BLOCK), f.size)
    with zipfile.ZipFile(reader) as zf:
        infos = [i for i in zf.infolist() if i.filename.startswith(prefix) and not i.is_dir()]
        if not infos:
            raise PyPIError(f"{f.filename}: nothing under {prefix}")
        start = min(i.header_offset for i in infos)
        after = sorted({i.header_offset for i in zf.infolist()} | {f.size})
        last = max(i.header_offset for i in infos)
        end = next(o for o in after if o > last)
        reader.prefetch(start, end)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        for info in infos:
            member_path = tmp / info.filename
            if ".." in Path(info.filename).parts:
                raise PyPIError(f"{f.filename}: unsafe member {info.filename}")
            member_path.parent.mkdir(parents=True, exist_ok=True)
            member_path.write_bytes(zf.read(info))
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp.replace(dest)
    return reader.fetched

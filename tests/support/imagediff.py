"""Why two images differ: their configs and their layers compared file by file.

Two builds that should be reproducible but got two digests leave the question "what
differs?"; the digests alone cannot answer it. This tool saves both images (``docker save``
through docker-py, or reads saved tars), pairs their layers in order, reads each layer tar
(gzip, zstd or plain) and names every file that differs and how: its content (sha256), its
mtime, its mode, its owner, its type or link target, or that only one image has it. Config
fields that differ (dates, labels, history) are named too, and layers that are equal once
uncompressed but differ as blobs (a compressor that is not deterministic) are said as such.

zstd layers are read through the ``zstd`` command (Debian's ``zstd`` package): Python 3.11's
tarfile reads gzip only, and no zstd module is a dependency of the project.

By hand, from the repository root (with the engine)::

    python -m tests.support.imagediff IMAGE_A IMAGE_B        # two local images
    python -m tests.support.imagediff A.tar B.tar            # two `docker save` tars

Exit status 0 when nothing differs, 1 when something does (the differences printed).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
MAX_LINES = 40  # enough to see the pattern; the count of the rest is printed


@dataclass(frozen=True)
class Entry:
    """One member of a layer tar, as far as a layer digest depends on it."""

    kind: str  # file, dir, symlink, hardlink, other
    mode: int
    owner: tuple[int, int]
    mtime: int
    sha256: str  # of the content (files), else ""
    link: str  # symlink or hardlink target


@dataclass(frozen=True)
class Layer:
    """A layer blob: its digest and its members by path."""

    digest: str
    entries: dict[str, Entry]


@dataclass(frozen=True)
class Image:
    """A saved image: its config and its layers in order."""

    config: dict[str, Any]
    layers: tuple[Layer, ...]


def _kind(member: tarfile.TarInfo) -> str:
    if member.isreg():
        return "file"
    if member.isdir():
        return "dir"
    if member.issym():
        return "symlink"
    return "hardlink" if member.islnk() else "other"


def read_layer(stream: IO[bytes], digest: str) -> Layer:
    """The members of one uncompressed layer tar, read as a stream."""
    entries: dict[str, Entry] = {}
    try:
        tar = tarfile.open(fileobj=stream, mode="r|")  # noqa: SIM115 - closed below
    except tarfile.ReadError as exc:  # an empty layer (e.g. of WORKDIR) has no header
        if "empty file" in str(exc):
            return Layer(digest, entries)
        raise
    with tar:
        for member in tar:
            content = _sha256(tar.extractfile(member)) if member.isreg() else ""
            entries[member.name.removeprefix("./")] = Entry(
                _kind(member), member.mode, (member.uid, member.gid), int(member.mtime),
                content, member.linkname)
    return Layer(digest, entries)


def _sha256(data: IO[bytes] | None) -> str:
    h = hashlib.sha256()
    while data is not None and (chunk := data.read(1 << 20)):
        h.update(chunk)
    return h.hexdigest()


@contextmanager
def _uncompressed(blob: IO[bytes]) -> Iterator[IO[bytes]]:
    """``blob`` (a seekable file) as an uncompressed stream, whatever its compression."""
    magic = blob.read(4)
    blob.seek(0)
    if magic.startswith(GZIP_MAGIC):
        import gzip

        with gzip.GzipFile(fileobj=blob) as plain:
            yield plain  # type: ignore[misc]
    elif magic == ZSTD_MAGIC:
        zstd = shutil.which("zstd")
        if zstd is None:
            raise SystemExit("a zstd layer needs the zstd command (apt-get install zstd)")
        # the child reads the file descriptor: its offset, not the buffer's (a seek within
        # the read buffer leaves the descriptor where the buffered read left it)
        os.lseek(blob.fileno(), 0, os.SEEK_SET)
        with subprocess.Popen([zstd, "-dcq"], stdin=blob, stdout=subprocess.PIPE) as proc:
            assert proc.stdout is not None
            yield proc.stdout
            while proc.stdout.read(1 << 20):  # the tar's padding after its end marker
                pass
        if proc.returncode:
            raise ValueError(f"zstd could not decompress a layer (exit {proc.returncode})")
    else:
        yield blob


def read_saved(path: Path) -> Image:
    """An image from a ``docker save`` tar (Docker's manifest.json, OCI or classic)."""
    with tarfile.open(path) as outer:
        def member(name: str) -> IO[bytes]:
            found = outer.extractfile(name)
            if found is None:
                raise ValueError(f"{path}: {name} is not a file")
            return found

        manifest = json.load(member("manifest.json"))[0]
        config = json.load(member(manifest["Config"]))
        layers = []
        for name in manifest["Layers"]:
            with tempfile.TemporaryFile() as blob:  # tarfile's streams cannot seek
                shutil.copyfileobj(member(name), blob)
                blob.seek(0)
                with _uncompressed(blob) as plain:
                    layers.append(read_layer(plain, name.rsplit("/", 1)[-1]))
    return Image(config, tuple(layers))


def save(api: Any, ref: str, dest: Path) -> Path:
    """``docker save`` of one local image through docker-py's low-level client."""
    with dest.open("wb") as out:
        for chunk in api.get_image(ref):
            out.write(chunk)
    return dest


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list):
        out = {}
        for i, item in enumerate(value):
            out.update(_flat(item, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def _entry_diff(path: str, a: Entry | None, b: Entry | None) -> str | None:
    if a is None or b is None:
        return f"{path}: only in {'B' if a is None else 'A'}"
    parts = []
    if a.kind != b.kind:
        parts.append(f"type {a.kind} vs {b.kind}")
    if a.sha256 != b.sha256:
        parts.append(f"content sha256 {a.sha256[:12]} vs {b.sha256[:12]}")
    if a.link != b.link:
        parts.append(f"link {a.link!r} vs {b.link!r}")
    if a.mode != b.mode:
        parts.append(f"mode {a.mode:o} vs {b.mode:o}")
    if a.owner != b.owner:
        parts.append(f"owner {a.owner[0]}:{a.owner[1]} vs {b.owner[0]}:{b.owner[1]}")
    if a.mtime != b.mtime:
        parts.append(f"mtime {a.mtime} vs {b.mtime}")
    return f"{path}: " + ", ".join(parts) if parts else None


def compare(a: Image, b: Image) -> list[str]:
    """Every difference between two images, one line each; empty when they are equal."""
    lines = []
    fa, fb = _flat(a.config), _flat(b.config)
    for key in sorted(set(fa) | set(fb)):
        if key.startswith("rootfs.diff_ids"):
            continue  # said per layer below, with the files that make it
        if fa.get(key) != fb.get(key):
            lines.append(f"config {key}: {fa.get(key)!r} vs {fb.get(key)!r}")
    if len(a.layers) != len(b.layers):
        lines.append(f"layer count: {len(a.layers)} vs {len(b.layers)}")
    diff_a = a.config.get("rootfs", {}).get("diff_ids", [])
    diff_b = b.config.get("rootfs", {}).get("diff_ids", [])
    for i, (la, lb) in enumerate(zip(a.layers, b.layers, strict=False)):
        if la.digest == lb.digest:
            continue
        files = [d for path in sorted(set(la.entries) | set(lb.entries))
                 if (d := _entry_diff(path, la.entries.get(path), lb.entries.get(path)))]
        same_tar = i < min(len(diff_a), len(diff_b)) and diff_a[i] == diff_b[i]
        if not files and same_tar:
            lines.append(f"layer {i + 1}: equal once uncompressed, the compressed blobs differ "
                         f"({la.digest[:12]} vs {lb.digest[:12]}): the compression is not "
                         "deterministic")
        elif not files:
            lines.append(f"layer {i + 1}: the same files with the same metadata, another "
                         "tar (member order or headers)")
        lines += [f"layer {i + 1}: {d}" for d in files]
    return lines


def report(lines: list[str], limit: int = MAX_LINES) -> str:
    """The differences for people: the first ``limit`` lines and how many more."""
    if not lines:
        return "the two images are identical"
    shown = lines[:limit]
    if len(lines) > limit:
        shown.append(f"... and {len(lines) - limit} more difference(s)")
    return "\n".join(shown)


def compare_refs(api: Any, ref_a: str, ref_b: str) -> list[str]:
    """Save two local images and compare them."""
    with tempfile.TemporaryDirectory(prefix="imagediff-") as tmp:
        a = read_saved(save(api, ref_a, Path(tmp) / "a.tar"))
        b = read_saved(save(api, ref_b, Path(tmp) / "b.tar"))
    return compare(a, b)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="an image reference, or a `docker save` tar")
    parser.add_argument("b", help="the image to compare it with (reference or tar)")
    parser.add_argument("--limit", type=int, default=MAX_LINES,
                        help="differences printed at most")
    args = parser.parse_args(argv)
    if Path(args.a).is_file() and Path(args.b).is_file():
        lines = compare(read_saved(Path(args.a)), read_saved(Path(args.b)))
    else:
        import docker

        lines = compare_refs(docker.from_env(timeout=600).api, args.a, args.b)
    print(report(lines, args.limit))
    return 1 if lines else 0


def layer_tar(files: dict[str, tuple[bytes, int]]) -> bytes:
    """A small layer tar of ``path: (content, mtime)`` (the comparer's own tests)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, (content, mtime) in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(content), mtime, 0o644
            tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


if __name__ == "__main__":
    sys.exit(main())

"""The image comparer (tests/support/imagediff.py) names the file that differs, and how.

Two ``docker save`` tars are written here with the layout Engine 28 writes (manifest.json,
the config and layer blobs): the comparer must say which file of which layer differs in
content, mtime, mode or owner, which exists in one image only, which config field differs,
and nothing at all for two equal images. The reproducibility tests print its answer.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

from tests.support import imagediff


def _saved(path: Path, layers: list[bytes], created: str, gz: bool = True) -> Path:
    """A `docker save` tar of these uncompressed layer tars."""
    blobs, names = {}, []
    for layer in layers:
        blob = gzip.compress(layer, mtime=0) if gz else layer
        name = f"blobs/sha256/{hashlib.sha256(blob).hexdigest()}"
        blobs[name] = blob
        names.append(name)
    config = json.dumps({"created": created, "rootfs": {"diff_ids": [
        "sha256:" + hashlib.sha256(layer).hexdigest() for layer in layers]}}).encode()
    config_name = f"blobs/sha256/{hashlib.sha256(config).hexdigest()}"
    blobs[config_name] = config
    blobs["manifest.json"] = json.dumps([{"Config": config_name, "Layers": names}]).encode()
    with tarfile.open(path, "w") as tar:
        for name, data in blobs.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _layer(files: dict[str, tuple[bytes, int]], mode: int = 0o644, uid: int = 0) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, (content, mtime) in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode, info.uid = len(content), mtime, mode, uid
            tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


BASE = _layer({"etc/os-release": (b"bookworm\n", 0)})


def test_equal_images_have_no_difference(tmp_path: Path) -> None:
    layer = _layer({"opt/venv/x.py": (b"x = 1\n", 0)})
    a = imagediff.read_saved(_saved(tmp_path / "a.tar", [BASE, layer], "1970-01-01T00:00:00Z"))
    assert imagediff.compare(a, a) == []
    assert imagediff.report([]) == "the two images are identical"


def test_equal_files_in_other_blobs_blame_the_compression(tmp_path: Path) -> None:
    layer = _layer({"opt/venv/x.py": (b"x = 1\n", 0)})
    a = imagediff.read_saved(_saved(tmp_path / "a.tar", [BASE, layer], "1970-01-01T00:00:00Z"))
    b = imagediff.read_saved(_saved(tmp_path / "b.tar", [BASE, layer], "1970-01-01T00:00:00Z",
                                    gz=False))
    lines = imagediff.compare(a, b)
    assert len(lines) == 2
    assert all("equal once uncompressed" in line and "not deterministic" in line
               for line in lines)


def test_the_differing_file_is_named_with_how_it_differs(tmp_path: Path) -> None:
    a = imagediff.read_saved(_saved(tmp_path / "a.tar", [BASE, _layer({
        "var/log/dpkg.log": (b"2026-12-06 11:00 install\n", 1765018800),
        "opt/venv/x.pyc": (b"pyc", 0),
        "etc/shadow": (b"app:!:20428:0\n", 0)})], "2026-12-06T11:00:00Z"))
    b = imagediff.read_saved(_saved(tmp_path / "b.tar", [BASE, _layer({
        "var/log/dpkg.log": (b"2026-12-06 11:00 install\n", 1765018860),
        "opt/venv/x.pyc": (b"pyc", 0),
        "etc/shadow": (b"app:!:20429:0\n", 0),
        "var/cache/ldconfig/aux-cache": (b"\x01", 0)})], "2026-12-06T11:01:00Z"))
    lines = imagediff.compare(a, b)
    assert "config created: '2026-12-06T11:00:00Z' vs '2026-12-06T11:01:00Z'" in lines
    assert "layer 2: var/log/dpkg.log: mtime 1765018800 vs 1765018860" in lines
    assert any(line.startswith("layer 2: etc/shadow: content sha256 ") for line in lines)
    assert "layer 2: var/cache/ldconfig/aux-cache: only in B" in lines
    assert not any("x.pyc" in line or "os-release" in line for line in lines)  # equal ones
    assert not any(line.startswith("layer 1") for line in lines)


def test_mode_and_owner_differences_are_named(tmp_path: Path) -> None:
    a = imagediff.read_saved(_saved(tmp_path / "a.tar", [_layer({"home/app": (b"", 0)})], "x"))
    b = imagediff.read_saved(_saved(tmp_path / "b.tar", [_layer({"home/app": (b"", 0)},
                                                                mode=0o664, uid=10001)], "x"))
    assert imagediff.compare(a, b) == ["layer 1: home/app: mode 644 vs 664, owner 0:0 vs 10001:0"]


def test_the_report_is_cut_with_a_count(tmp_path: Path) -> None:
    text = imagediff.report([f"layer 1: f{i}: only in A" for i in range(50)], limit=3)
    assert text.splitlines()[-1] == "... and 47 more difference(s)"
    assert len(text.splitlines()) == 4

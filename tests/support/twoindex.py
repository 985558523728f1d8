"""Two local PEP 503 package indexes shaped like PyPI and the PyTorch CUDA index.

The PyTorch index (download.pytorch.org/whl/cuXYZ) also carries common dependencies at
older versions (requests, pillow, certifi, setuptools); uv's default ``first-index``
strategy takes a name from the first index that has it and looks nowhere else. This fixture
reproduces exactly that shape with tiny real wheels (built here, installed by the real uv):

* ``pytorch``: ``torch 2.14.0+cu130`` (reports the CUDA of the index it came from) and OLD
  ``requests 2.31.0``, ``pillow 10.0.0``, ``certifi 2024.2.2``, ``setuptools 70.0.0``;
* ``pypi``: ``torch 2.14.0`` (the PyPI build: a different CUDA), ``vllm 0.33.0`` requiring
  ``requests>=2.33.0``, ``certifi>=2026.10.19``, ``pillow>=13.0.0``, ``setuptools>=78.1.1``
  and ``torch==2.14.0`` (as vLLM 0.33.0's real METADATA does), and those newer versions.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import re
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

TORCH_INIT = '__version__ = "{version}"\nclass version:  # noqa: N801\n    cuda = "{cuda}"\n'

# name, version, requires, files   (per index)
PYTORCH_LIKE = [
    ("torch", "2.14.0+cu130", [], {"torch/__init__.py": TORCH_INIT.format(
        version="2.14.0+cu130", cuda="13.0")}),
    ("requests", "2.31.0", [], {}), ("pillow", "10.0.0", [], {}),
    ("certifi", "2024.2.2", [], {}), ("setuptools", "70.0.0", [], {}),
]
PYPI_LIKE = [
    ("torch", "2.14.0", [], {"torch/__init__.py": TORCH_INIT.format(
        version="2.14.0", cuda="12.8")}),
    ("vllm", "0.33.0", ["requests>=2.33.0", "certifi>=2026.10.19", "pillow>=13.0.0",
                        "setuptools>=78.1.1", "torch==2.14.0"], {}),
    ("requests", "2.33.0", [], {}), ("pillow", "13.0.0", [], {}),
    ("certifi", "2026.10.19", [], {}), ("setuptools", "78.1.1", [], {}),
]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel(out: Path, name: str, version: str, requires: list[str],
          files: dict[str, str]) -> Path:
    """A minimal, valid pure-Python wheel."""
    dist = f"{name}-{version}.dist-info"
    files = dict(files) or {f"{name}/__init__.py": f'__version__ = "{version}"\n'}
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    contents = {**files, f"{dist}/METADATA": "\n".join(meta) + "\n",
                f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: dockergen-tests\n"
                                 "Root-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for path, text in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    contents[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    path = out / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for arc, text in sorted(contents.items()):
            info = zipfile.ZipInfo(arc, date_time=(2026, 1, 1, 0, 0, 0))
            zf.writestr(info, text)
    return path


def build_index(root: Path, packages: list[tuple[str, str, list[str], dict[str, str]]]) -> Path:
    """A PEP 503 tree: ``root/<name>/index.html`` linking ``root/files/*.whl`` with sha256."""
    files = root / "files"
    files.mkdir(parents=True, exist_ok=True)
    by_name: dict[str, list[Path]] = {}
    for name, version, requires, extra in packages:
        by_name.setdefault(_norm(name), []).append(wheel(files, name, version, requires, extra))
    for name, wheels in by_name.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        links = "".join(
            f'<a href="../files/{w.name}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">'
            f"{w.name}</a>\n" for w in wheels)
        (root / name / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
    (root / "index.html").write_text("".join(f'<a href="{n}/">{n}</a>\n'
                                             for n in sorted(by_name)))
    return root


@dataclass(frozen=True)
class Indexes:
    pypi: str  # the main index (PEP 503 simple URL), like https://pypi.org/simple
    pytorch_base: str  # like https://download.pytorch.org/whl (build.torch_index_url)

    @property
    def pytorch(self) -> str:
        """The CUDA-matched index, like https://download.pytorch.org/whl/cu130."""
        return f"{self.pytorch_base}/cu130"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve ``root`` on 127.0.0.1 (a free port) for the duration of the block."""
    handler = lambda *a, **k: _Quiet(*a, directory=str(root), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def two_indexes(tmp: Path) -> Iterator[Indexes]:
    """Both indexes, built under ``tmp`` and served over HTTP."""
    build_index(tmp / "pypi" / "simple", PYPI_LIKE)
    build_index(tmp / "whl" / "cu130", PYTORCH_LIKE)
    with serve(tmp) as base:
        yield Indexes(pypi=f"{base}/pypi/simple", pytorch_base=f"{base}/whl")

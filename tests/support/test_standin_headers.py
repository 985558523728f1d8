"""The torch stand-in's headers refuse C++17 exactly where the real torch headers do.

The verdicts of the real headers come from the compile probe (dockergen/maint/probe.py),
recorded in dockergen/data/pypi-snapshot.json; the stand-in (tests/support/standin.py) must give
the same verdict for every torch version the stand-in index serves, or the build tests
could pass a flash-attn build that fails on the real packages.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dockergen.maint.knowledge_check import load_snapshot
from tests.support.standin import FA_API, torch_headers

SERVED = ("2.13.0", "2.14.0", "2.14.1")  # the torch stand-ins build_index serves (besides 2.9)


def _compile(tmp: Path, version: str, std: str) -> subprocess.CompletedProcess[str]:
    gxx = shutil.which("g++")
    assert gxx, "g++ is needed (Debian: apt-get install g++)"
    for name, text in torch_headers(version).items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text)
    (tmp / "flash_api.cpp").write_text(FA_API)
    return subprocess.run([gxx, "-O3", f"-std={std}", "-fsyntax-only", "-I",
                           str(tmp / "torch" / "include"), str(tmp / "flash_api.cpp")],
                          capture_output=True, text=True, check=False)


@pytest.mark.parametrize("version", SERVED)
def test_standin_headers_match_the_real_headers_verdict(version: str, tmp_path: Path) -> None:
    real = load_snapshot()["compile_probe"]["torch"][version]
    c17 = _compile(tmp_path, version, "c++17")
    assert ("accepted" if c17.returncode == 0 else "rejected") == real["cxx17"]
    if real["cxx17"] == "rejected":
        assert "C++20 or later compatible compiler is required to use ATen" in c17.stderr
    assert _compile(tmp_path, version, "c++20").returncode == 0

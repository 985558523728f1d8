"""The product and its maintainer tools pass the linter and the strict type checker.

The tools in ``tools/`` run only against PyPI (network-marked tests), so a change in a
module they import (e.g. a new signature) would otherwise show up only there, late; the
type checker sees it at once, without the network.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECKED = ["dockergen", "tools"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, check=False, timeout=600)


def test_ruff_finds_nothing() -> None:
    out = _run("ruff", "check", *CHECKED, "tests", "benchmarks")
    assert out.returncode == 0, out.stdout + out.stderr


def test_strict_mypy_finds_nothing() -> None:
    out = _run("mypy", "--no-incremental", *CHECKED)
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_sees_a_call_with_the_wrong_types(tmp_path: Path) -> None:
    # The class of mistake this guards: a tool calling a product function the old way.
    bad = tmp_path / "bad_tool.py"
    bad.write_text("from dockergen.ranges import RangeReader\n\n"
                   "RangeReader('https://example/x.whl', 10)\n", encoding="utf-8")
    out = _run("mypy", "--no-incremental", "--strict", str(bad))
    assert out.returncode == 1 and "arg-type" in out.stdout, out.stdout

"""The product and its maintainer tools pass the linter and the strict type checker.

The tools in ``tools/`` run only against PyPI (network-marked tests), so a change in a
module they import (e.g. a new signature) would otherwise show up only there, late; the
type checker sees it at once, without the network.
"""

from __future__ import annotations

import re
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
    bad.write_text("from dockergen.net.ranges import RangeReader\n\n"
                   "RangeReader('https://example/x.whl', 10)\n", encoding="utf-8")
    out = _run("mypy", "--no-incremental", "--strict", str(bad))
    assert out.returncode == 1 and "arg-type" in out.stdout, out.stdout


# "issue 7", "Issue 12:", "(issue 6)": a tracker's number says nothing to a reader of the
# code; the behaviour it names does. Upstream references ("flashinfer-ai/flashinfer#3262",
# ".../issues/123") stay: they name where a fact was read.
_ISSUE_NUMBER = re.compile(r"(?<![\w/])[Ii]ssues? ?#?\d+")


def _issue_numbers(text: str) -> list[str]:
    return [m.group(0) for m in _ISSUE_NUMBER.finditer(text)]


def test_code_and_tests_name_behaviour_not_issue_numbers() -> None:
    found = []
    for folder in ("dockergen", "tests", "templates", "tools", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in {".py", ".j2", ".yaml", ".sh"} or "__pycache__" in path.parts:
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if _issue_numbers(line) and path.name != "test_static.py":
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_issue_number_rule_bites() -> None:
    assert _issue_numbers('"""Issue 7: the tag hashed the profile only."""') == ["Issue 7"]
    assert _issue_numbers("# before the fix (issue 12)") == ["issue 12"]
    assert _issue_numbers("flashinfer-ai/flashinfer#3262 and .../issues/123") == []

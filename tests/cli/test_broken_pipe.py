"""A reader that stops reading (`dockergen explain | head`) is not a dockergen bug (exit 1)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.parametrize("args", [("explain", "profiles/h100-fp8.yaml"),
                                  ("render", "-q", "profiles/h100-fp8.yaml"),
                                  ("profiles",), ("schema",),
                                  # group options: click ended them with 1 ("a bug")
                                  ("--version",), ("--help",),
                                  # only prints its plan (it ended with 141, a cut-off build)
                                  ("build", "--dry-run", "profiles/h100-fp8.yaml")])
def test_closed_pipe_ends_quietly_with_0(args: tuple[str, ...]) -> None:
    """The read end is closed before dockergen writes: every write gets EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "dockergen", *args], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, check=False)
    finally:
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no traceback, no "Exception ignored" from the exit flush


def test_explain_piped_to_head() -> None:
    """The issue's own command line, through a real shell pipe with pipefail."""
    script = (f"set -o pipefail; {sys.executable} -m dockergen explain profiles/h100-fp8.yaml"
              " | head -1")
    for _ in range(3):  # head may exit before or after dockergen's later writes
        proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=ROOT,
                              check=False)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("h100-fp8 (h100-fp8.yaml <- base.yaml), hash sha256:")
        assert proc.stderr == ""

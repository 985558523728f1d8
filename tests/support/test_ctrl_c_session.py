"""A test session started with SIGINT ignored still delivers Ctrl-C to what it starts.

A shell without job control starts a background job with SIGINT ignored, and every process
inherits that through exec; tests/conftest.py's pytest_configure gives the session the default
handler back. Shown on a test that presses Ctrl-C on dockergen, in a session started under
``trap '' INT``: without the hook it fails (Ctrl-C never arrives).
"""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

CASE = ("tests/unit/render/test_atomic_write.py::"
        "test_ctrl_c_after_a_file_is_written_is_no_failure")


def test_a_session_started_with_ctrl_c_ignored_still_delivers_it() -> None:
    proc = subprocess.run(
        ["sh", "-c", "trap '' INT; exec \"$@\"", "sh", sys.executable, "-m", "pytest", "-q",
         "-p", "no:cacheprovider", "-p", "no:randomly", CASE],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout

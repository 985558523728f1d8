"""A smoke command whose executable is missing is a failed check, not a docker traceback."""

from __future__ import annotations

import pytest

from dockergen.api import resolve_profile
from dockergen.build.smoke import smoke_test
from tests.conftest import ROOT, _engine_or_skip

pytestmark = pytest.mark.daemon


def test_missing_executable_is_a_failed_check_on_the_real_engine() -> None:
    """Before the fix: the docker error escaped uncaught, and no build record was written."""
    _engine_or_skip()
    from dockergen.build.daemon import connect

    resolved = resolve_profile(ROOT / "tests" / "profiles" / "standin.yaml", (
        "smoke.defaults=false",
        "smoke.commands=[{name: tool runs, command: [/nonexistent/tool, --version]},"
        " {name: shell runs, command: [sh, -c, 'echo ok'], expected_output: [ok]}]"))
    report = smoke_test(connect(), "local/debian:bookworm", resolved)
    by_name = {c.name: c for c in report.checks}
    assert not by_name["tool runs"].ok
    assert "no such file or directory" in by_name["tool runs"].detail.lower()
    assert by_name["shell runs"].ok  # the next check still ran
    assert not report.ok

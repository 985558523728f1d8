"""build.log is redacted like every other output, for both builders (real engine)."""

from __future__ import annotations

import io

import pytest

from dockergen.build.options import BuildOptions
from dockergen.build.run import BuildPlan, run_build
from tests.conftest import _engine_or_skip

pytestmark = pytest.mark.daemon

TOKEN = "hf_AbCdEf0123456789GhIjKl"
PASSWORD = "hunter2pass"


@pytest.mark.parametrize("builder", ["buildkit", "classic"])
def test_build_log_holds_no_credentials(builder: str) -> None:
    """Before the fix: build.log kept the raw stream (BuildKit's output even base64-encoded)."""
    _engine_or_skip()
    from dockergen.build.daemon import connect

    dockerfile = ("FROM local/debian:bookworm\n"
                  f"RUN echo 'token {TOKEN}' && echo 'https://bob:{PASSWORD}@example.com/x'\n")
    plan = BuildPlan("log", builder, ["Dockerfile"], [], [f"dockergen-test/log:{builder}"], {})
    log = io.StringIO()
    run_build(connect(), {"Dockerfile": dockerfile.encode()}, plan,
              BuildOptions(progress="plain", no_cache=True), log, io.StringIO())
    text = log.getvalue()
    assert "echo 'token <redacted>'" in text  # the step's name and its output, as text
    assert "<redacted>example.com/x" in text
    assert TOKEN not in text and PASSWORD not in text


def test_a_token_cut_between_two_chunks_is_redacted_in_build_log() -> None:
    """BuildKit sends output in chunks; the log records whole lines, so redaction sees it."""
    _engine_or_skip()
    from dockergen.build.daemon import connect

    head, tail = TOKEN[:10], TOKEN[10:]
    dockerfile = ("FROM local/debian:bookworm\n"
                  f"RUN printf 'x={head}'; sleep 2; printf '{tail}\\n'\n")
    plan = BuildPlan("log", "buildkit", ["Dockerfile"], [], ["dockergen-test/log:split"], {})
    log = io.StringIO()
    run_build(connect(), {"Dockerfile": dockerfile.encode()}, plan,
              BuildOptions(progress="plain", no_cache=True), log, io.StringIO())
    text = log.getvalue()
    assert '"line": "x=<redacted>"' in text
    assert tail not in text.replace(f"printf '{tail}", "")  # only in the step's own name

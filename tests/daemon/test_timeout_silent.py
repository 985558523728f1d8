"""`--timeout` interrupts a build step that prints nothing, and the daemon cancels it.

Against the real engine: a RUN step that only sleeps sends no byte for its whole run, so
the timer must wake the blocked read itself (before the fix the read woke only when the next
byte came, 15 s late, and the daemon never saw a disconnect).
"""

from __future__ import annotations

import io
import random
import subprocess
import threading
import time

import pytest

from dockergen.build.options import BuildOptions
from dockergen.build.run import BuildPlan, BuildTimeout, run_build
from tests.conftest import _engine_or_skip

pytestmark = pytest.mark.daemon


def _running(pattern: str) -> bool:
    """Is the step's process alive? Build containers share the host's process table."""
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True,
                          check=False).returncode == 0


def test_timeout_cancels_a_silent_step_and_the_daemon_sees_it() -> None:
    _engine_or_skip()
    from dockergen.build.daemon import connect

    seconds = f"{random.randint(300, 399)}.{random.randint(100, 999)}"  # unique to this run
    files = {"Dockerfile": f"FROM local/debian:bookworm\nRUN sleep {seconds}\n".encode()}
    plan = BuildPlan("silent", "buildkit", ["Dockerfile"], [], ["dockergen-test/silent:1"], {})
    seen_running = threading.Event()

    def watch() -> None:
        for _ in range(200):
            if _running(f"sleep {seconds}"):
                seen_running.set()
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    started = time.monotonic()
    with pytest.raises(BuildTimeout):
        run_build(connect(), files, plan, BuildOptions(progress="plain", timeout=4,
                                                       no_cache=True), io.StringIO(),
                  io.StringIO())
    noticed = time.monotonic() - started
    watcher.join()
    assert seen_running.is_set(), "the silent step never started; the test proves nothing"
    assert noticed < 8, f"the timeout was noticed after {noticed:.1f} s"
    deadline = time.monotonic() + 10
    while _running(f"sleep {seconds}") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _running(f"sleep {seconds}"), "the daemon kept running the cancelled step"

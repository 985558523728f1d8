"""Output paths at the edges: a signal in the middle of a write, a name that is not UTF-8,
a name too long to stage. The command removes its own staging folders, says what is on
disk, and exits with its code; a name it cannot write is refused with the path and why."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import PROFILES, ROOT, run_cli

# dockergen with its staging slowed down after the first folder: the test's signal then
# arrives mid-write, every time (the marker says a staging folder exists)
SLOW_STAGING = """
import pathlib, sys, time
from dockergen.files import atomic
from dockergen.cli import main
real = atomic._stage
def slow(staging, *args, **kwargs):
    real(staging, *args, **kwargs)
    pathlib.Path(sys.argv[1]).write_text(str(staging))
    time.sleep(30)
atomic._stage = slow
main(sys.argv[2:])
"""
STAGING = re.compile(r"^\..+\.[0-9a-f]{12}$")  # dockergen.files.atomic._staging_name


def _staging_left(folder: Path) -> list[str]:
    return [str(p) for p in folder.rglob(".*") if STAGING.match(p.name)]


@pytest.mark.parametrize(("sig", "code", "said"), [
    (signal.SIGTERM, 143, "dockergen: terminated (SIGTERM); nothing was written"),
    (signal.SIGINT, 130, "dockergen: interrupted; nothing was written"),
])
def test_a_signal_mid_write_removes_the_staging_folders(tmp_path: Path, sig: int, code: int,
                                                         said: str) -> None:
    """SIGTERM killed the process with its `.NAME.<hex>` staging folders left behind."""
    marker, out = tmp_path / "staged", tmp_path / "work" / "out"
    out.parent.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_STAGING, str(marker), "render", "--all", "-q", "-o",
         str(out)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 60
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), proc.communicate()
    assert Path(marker.read_text()).exists()  # a staging folder is there, mid-write
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert said in err and "Traceback" not in err
    assert _staging_left(tmp_path) == []
    assert list(out.parent.iterdir()) == []  # nothing new: the folder it made is gone too


def test_an_output_name_too_long_to_stage_is_refused(tmp_path: Path) -> None:
    """A 243-character name was an ENAMETOOLONG traceback (its staging name is longer)."""
    out = tmp_path / ("a" * 243)
    run = run_cli("render", "-q", str(PROFILES / "h100-fp8.yaml"), "-o", str(out))
    assert run.rc == 4, run.err
    assert "a name of 243 bytes, over the 241 an output may have" in run.err
    assert "Traceback" not in run.err and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [
    ["render", "-q", str(PROFILES / "h100-fp8.yaml"), "-o"],
    ["deploy", "-q", str(PROFILES / "h100-fp8.yaml"), "--format", "compose", "-o"]])
def test_an_output_name_that_is_not_utf8_is_refused(tmp_path: Path, command: list[str]
                                                    ) -> None:
    """Such a name was written, then printed and put into manifests as it could be."""
    out = os.fsdecode(bytes(tmp_path) + b"/out\xff")
    run = run_cli(*command, out)
    assert run.rc == 4, run.err
    assert f"{tmp_path}/out\\xff: the name is not UTF-8" in run.err
    assert "Traceback" not in run.err and list(tmp_path.iterdir()) == []

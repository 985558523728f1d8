"""The stand-in package index has a documented entry point:
`python -m tests.support.standin serve`."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[str, str]]:
    log = tmp_path / "serve.log"
    with open(log, "w") as err, subprocess.Popen(
            [sys.executable, "-m", "tests.support.standin", "serve", "--port", "0", "--root",
             str(tmp_path / "index")], cwd=ROOT, text=True, stdout=subprocess.PIPE,
            stderr=err) as proc:
        try:
            assert proc.stdout is not None
            first, second = proc.stdout.readline(), proc.stdout.readline()
            match = re.fullmatch(r"serving \S+ on (http://127\.0\.0\.1:\d+)\n", first)
            assert match, (first, log.read_text())
            yield match.group(1), second
        finally:
            proc.send_signal(signal.SIGINT)  # Ctrl-C ends it cleanly
            try:
                code = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()  # never left to Popen's exit, which waits without end
                proc.wait()
                pytest.fail("the stand-in index did not end within 30 s of Ctrl-C")
            assert code == 0, log.read_text()


def test_serve_answers_like_a_package_index(served: tuple[str, str]) -> None:
    url, hint = served
    for page, wheel in (("simple/vllm/", "vllm-0.33.0-py3-none-any.whl"),
                        ("cu130/torch/", "torch-2.14.0-py3-none-any.whl"),
                        ("simple/flash-attn/", "flash_attn-2.8.3.tar.gz")):
        with urllib.request.urlopen(f"{url}/{page}", timeout=10) as response:
            assert wheel in response.read().decode()
    assert hint == ("build with: dockergen build tests/profiles/standin.yaml --network host "
                    f"--set build.pip_index_url={url}/simple --set build.torch_index_url={url}\n")


def test_the_docs_document_it() -> None:
    page = (ROOT / "docs" / "testing.md").read_text()
    assert "python -m tests.support.standin serve --port 8777" in page
    assert "python -m tests.support.standin images" in page


@pytest.mark.daemon
def test_a_contributor_builds_an_image_by_hand(served: tuple[str, str], tmp_path: Path) -> None:
    """The printed command, run as printed, builds the stand-in image."""
    from tests.conftest import _engine_or_skip

    _engine_or_skip()
    images = subprocess.run([sys.executable, "-m", "tests.support.standin", "images"], cwd=ROOT,
                            capture_output=True, text=True, check=False)
    assert images.returncode == 0, images.stderr
    _, hint = served
    command = shlex.split(hint.removeprefix("build with: "))
    assert command[:2] == ["dockergen", "build"]
    result = subprocess.run([sys.executable, "-m", "dockergen", *command[1:], "--no-smoke",
                             "-q", "--progress", "plain", "-o", str(tmp_path / "ctx")],
                            cwd=ROOT, capture_output=True, text=True, check=False,
                            env={**os.environ})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "arch audit: ok: sm_80, sm_90" in result.stderr

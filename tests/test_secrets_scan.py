"""Credential patterns: a left boundary, every field scanned, and type errors hide nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from dockergen.errors import redact
from tests.bad_profile_cases import VALID
from tests.conftest import run_cli

TOKEN = "hf_AbCdEf0123456789GhIjKlMnOpQr"


@pytest.mark.parametrize("text", [
    "risk-management-prod",
    "#7 task-4f3a9c21d0 finished",  # a BuildKit log line
    "disk-usage-report-2026",
    "shf_abcdefghijkl",  # hf_ inside a word
    "sk-team-inference-prod",  # words joined by dashes: no digit, not a key
    "nvidia/cuda:13.0.2-devel-ubuntu22.04@sha256:" + "a" * 64,  # a digest pin
    "ubuntu:24.04@sha256:" + "b" * 64,
    "localhost:5000/llm/vllm:1",
    "git@github.com:org/repo.git",
    "mail admin@example.com at 12:30",
    "https://example.com/file?raw=true",
    "(TRTLLM:requirements.txt@000867d)",  # a source citation REPO:path@commit
    "VLLM:vllm/config.py@v0.9.1",
])
def test_words_that_contain_a_token_prefix_are_not_redacted(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize("secret", [TOKEN, "sk-proj-4hT9xQ2mZ8vL1nB6cR3w",
                                    "ghp_0123456789abcdefghij", "AKIAIOSFODNN7EXAMPLE",
                                    "https://bob:hunter2@example.com",
                                    # no scheme: what a user pastes as an image reference
                                    "bob:hunter2@registry.example.com/cuda:13",
                                    # credentials in a query: token indexes, pre-signed links
                                    "https://pypi.example.com/simple?token=hunter2secret",
                                    "https://blob.example.com/f.whl?sv=1&sig=hunter2secret",
                                    "https://:hunter2@mirror.example.com/",  # no user name
                                    "https://bob:p@hunter2@x.example.com/simple",  # '@' in it
                                    "bob:p@hunter2@registry.example.com/cuda:13",
                                    "HTTPS://bob:hunter2@example.com/",  # any case
                                    "https://b.example.com/f?X-Amz-Signature=hunter2sig",
                                    "https://pypi.example.com/simple?Token=hunter2tok"])
def test_real_token_shapes_are_redacted(secret: str) -> None:
    assert "<redacted>" in redact(f"log: {secret} end")
    assert secret not in redact(f"log: {secret} end")
    assert "hunter2" not in redact(f"log: {secret} end")


def test_label_risk_management_prod_is_accepted(tmp_path: Path) -> None:
    """Issue 7: the label value `risk-management-prod` was rejected as an `sk-` key."""
    text = VALID.replace("  name: registry.example.com/llm/vllm",
                         "  name: registry.example.com/llm/vllm\n  labels:\n"
                         "    com.example.team: risk-management-prod")
    (tmp_path / "profile.yaml").write_text(text)
    result = run_cli("render", "-q", "profile.yaml", cwd=tmp_path)
    assert result.rc == 0, result.err
    assert 'com.example.team="risk-management-prod"' in result.out


def test_token_in_description_is_rejected(tmp_path: Path) -> None:
    """Issue 7: `description` becomes a label, and an hf_ token rendered into it."""
    (tmp_path / "profile.yaml").write_text(VALID.replace(
        "name: test", f"name: test\ndescription: serving with {TOKEN}"))
    result = run_cli("render", "profile.yaml", cwd=tmp_path)
    assert result.rc == 2
    assert result.err.splitlines() == [
        "profile.yaml:2:14: description: the value looks like a credential and would be "
        "readable by anyone who pulls the image (it becomes a label); never put credentials "
        "in labels or the description",
        "dockergen: 1 problem(s); nothing was written"]
    assert TOKEN not in result.err + result.out


def test_type_errors_do_not_hide_the_secret_checks(tmp_path: Path) -> None:
    """Issue 7: a wrong type anywhere used to stop validation before the secret checks."""
    text = VALID.replace("  max_model_len: 8192", "  max_model_len: lots\n  env:\n"
                                                   "    HF_TOKEN: abc\n"
                                                   f"    LOG_SINK: {TOKEN}")
    (tmp_path / "profile.yaml").write_text(text)
    result = run_cli("render", "profile.yaml", cwd=tmp_path)
    assert result.rc == 2
    assert result.err.splitlines() == [
        "profile.yaml:19:18: serving.max_model_len: expected a whole number, got 'lots'; "
        "write a whole number without quotes",
        "profile.yaml:21:15: serving.env.HF_TOKEN: HF_TOKEN looks like a secret and would be "
        "readable by anyone who pulls the image; pass it when the container starts (docker run "
        "-e HF_TOKEN) instead",
        "profile.yaml:22:15: serving.env.LOG_SINK: the value looks like a credential and would "
        "be readable by anyone who pulls the image; pass it when the container starts (docker "
        "run -e LOG_SINK) instead",
        "dockergen: 3 problem(s); nothing was written"]


def test_a_token_in_any_other_field_is_rejected(tmp_path: Path) -> None:
    """Smoke commands end up in logs and build records: scanned like everything else."""
    text = VALID + f"smoke:\n  commands:\n    - name: x\n      command: [curl, {TOKEN}]\n"
    (tmp_path / "profile.yaml").write_text(text)
    result = run_cli("render", "profile.yaml", cwd=tmp_path)
    assert result.rc == 2
    assert result.err.splitlines()[0] == (
        "profile.yaml:27:23: smoke.commands[0].command[1]: the value looks like a credential; "
        "profiles are copied into images, logs and build records; pass credentials at run "
        "time, never in a profile")


@pytest.mark.parametrize("args", [
    # usage errors quote the refused value: click's messages are redacted like ours
    ("lock", "--mirror", "nvidia/cuda=https://bob:hunter2@registry.example.com/x", "h100-fp8"),
    ("observe", "h100-fp8", "--target", f"{TOKEN}:80"),
    ("render", "h100-fp8", "--set", "build.pip_index_url=https://x.example/simple?token=hunter2x"),
    ("render", "h100-fp8", "--set", "cuda.devel_image=bob:hunter2@registry.example.com/c:13"),
    ("build", "--dry-run", "h100-fp8", "--tag", f"registry.example.com/x:{TOKEN}"),
])
def test_no_error_message_echoes_a_secret(args: tuple[str, ...]) -> None:
    result = run_cli(*args)
    assert result.rc in (2, 64), result.err
    assert "Traceback" not in result.err
    assert "hunter2" not in result.out + result.err
    assert TOKEN not in result.out + result.err


def test_a_huge_value_is_scanned_in_linear_time(tmp_path: Path) -> None:
    """The URL branch restarted at every letter of a long word: 20 s for a 200 kB
    description (quadratic); a hang guard, not a speed target (linear takes ~0.1 s)."""
    profile = tmp_path / "p.yaml"
    profile.write_text("extends: h100-fp8\nname: p\ndescription: " + "x" * 200_000 + "\n")
    import subprocess
    import sys

    from tests.conftest import ROOT

    proc = subprocess.run([sys.executable, "-m", "dockergen", "validate", str(profile)],
                          capture_output=True, text=True, cwd=ROOT, timeout=15, check=False)
    assert proc.returncode in (0, 2), proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("text", ["x" * 200_000, "=a:" * 70_000, ",a:" * 70_000,
                                  "=a:@" * 50_000, "sk-" * 70_000, "(a:" * 70_000,
                                  "http://" + "a" * 200_000])
def test_no_shape_makes_the_scan_quadratic(text: str) -> None:
    """Each of these took 20-46 s (a branch restarted at every '=', ',' or 'sk-' and ran
    to the end of the text); linear, each is well under a second. A hang guard with 20x
    headroom, not a speed target."""
    import time

    from dockergen.errors import SECRET_VALUE

    start = time.perf_counter()
    SECRET_VALUE.search(text)
    assert time.perf_counter() - start < 2.0

"""Where a value came from is part of its problem, and the fix is given in that form.

A base-image lock's pins and `build --ca-cert` were applied as `--set` strings, so their
problems read `--set cuda.devel_image` / `--set build.ca_certificates[0]`; a `--set` value
got a YAML fix meant for a file. And the way `--set` reads its value is documented
(docs/commands.md, `--help`) and checked here against the parser, kind by kind.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from dockergen.cli import SET_HELP
from dockergen.input.loader import parse_set
from tests.conftest import PROFILES, ROOT, run_cli

NO_ENGINE = {"DOCKER_HOST": "unix:///nonexistent/dockergen-test.sock"}


def test_a_lock_pin_problem_names_the_lock_file(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text((PROFILES / "h100-fp8.yaml").read_text())
    (tmp_path / "p.lock.json").write_text(json.dumps({"lockfile": 1, "images": {
        "nvidia/cuda:13.0.2-devel-ubuntu22.04": {"digest": "sha256:NOT-HEX"},
        "nvidia/cuda:13.0.2-base-ubuntu22.04": {"digest": "sha256:" + "0" * 64}}}))
    for command in (("render", "-q", "p.yaml"), ("build", "--dry-run", "-q", "p.yaml")):
        result = run_cli(*command, cwd=tmp_path, env=NO_ENGINE)
        assert result.rc == 2, result.err
        first = result.err.splitlines()[0]
        # the lock file and its entry, never a --set the user did not type
        assert first.split(": ", 1)[0].endswith("p.lock.json:1:1"), first
        assert (": images['nvidia/cuda:13.0.2-devel-ubuntu22.04']: the digest is not "
                "sha256:<64 hex digits>; regenerate it: dockergen lock --update") in first
        assert "--set" not in result.err


def test_a_ca_cert_option_problem_names_the_option(tmp_path: Path) -> None:
    key = tmp_path / "not-a-cert.pem"
    key.write_text("just text\n")
    result = run_cli("build", "--dry-run", "-q", str(PROFILES / "h100-fp8.yaml"),
                     "--ca-cert", str(key), env=NO_ENGINE)
    assert result.rc == 2, result.err
    assert result.err.splitlines()[0] == (
        f"--ca-cert {key}: build.ca_certificates[0]: {key} is not a PEM certificate; give a "
        "PEM certificate (-----BEGIN CERTIFICATE-----), never a key")


def test_a_ca_cert_path_with_a_newline_stays_on_its_line(tmp_path: Path) -> None:
    odd = tmp_path / "a\nb.pem"
    odd.write_text("just text\n")
    result = run_cli("build", "--dry-run", "-q", str(PROFILES / "h100-fp8.yaml"),
                     "--ca-cert", str(odd), env=NO_ENGINE)
    assert result.rc == 2, result.err
    assert result.err.splitlines()[0].startswith(f"--ca-cert {str(odd)!r}: ")


def _fix_of(err: str) -> list[str]:
    """The `--set ...` of a fix, as arguments."""
    shown = re.search(r"`(--set [^`]*)`", err)
    assert shown, err
    return shlex.split(shown.group(1))


@pytest.mark.parametrize(("bad", "fix"), [
    ("gpu.targets=h100", "write `--set 'gpu.targets=[h100]'`"),
    ("gpu.targets=[h100, 8.0]", "quote it: --set 'gpu.targets=[h100, \"8.0\"]'"),
    ("serving.host=a.b", "e.g. `--set serving.host=0.0.0.0`"),
    ("serving.enable_chunked_prefill=maybe", "write `--set serving.enable_chunked_prefill=true`"),
    ("serving.env.VLLM_X=a%b", "e.g. `--set serving.env.VLLM_X=INFO`"),
    ("python=3.1x", "e.g. `--set python=3.12`"),
])
def test_a_set_value_gets_a_fix_that_is_a_valid_set(bad: str, fix: str) -> None:
    result = run_cli("validate", "h100-fp8", "--set", bad)
    assert result.rc == 2 and result.err.startswith(f"--set {bad.split('=')[0]}: "), result.err
    assert fix in result.err, result.err
    if "`--set" in result.err:
        again = run_cli("validate", "h100-fp8", *_fix_of(result.err))
        assert again.rc == 0, again.err


def test_the_same_mistake_in_a_file_gets_the_yaml_fix(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("extends: h100-fp8\ngpu:\n  targets: h100\n")
    result = run_cli("validate", "p.yaml", cwd=tmp_path)
    assert result.err.splitlines()[0] == (
        "p.yaml:3:12: gpu.targets: expected a list, got text; write `targets: [h100]`")


@pytest.mark.parametrize(("item", "value"), [
    ("python=3.10", "3.10"),  # text: as it is (YAML would read the float 3.1)
    ("serving.model=/models/x y", "/models/x y"),
    ("cuda.devel_image=null", "null"),  # a text field keeps "null" as text
    ("serving.max_model_len=16384", 16384),
    ("serving.enable_chunked_prefill=true", True),
    ("gpu.targets=[h100,l40s]", ("h100", "l40s")),
    ('gpu.targets=[h100, "8.0"]', ("h100", "8.0")),
    ("serving.env={VLLM_LOGGING_LEVEL: INFO}", {"VLLM_LOGGING_LEVEL": "INFO"}),
    ("serving.env.VLLM_LOGGING_LEVEL=INFO", "INFO"),
    ("matrix=null", None),
])
def test_set_reads_each_kind_as_documented(item: str, value: object) -> None:
    assert parse_set(item).value == value


def test_set_reading_is_documented_in_help_and_docs() -> None:
    def flat(text: str) -> str:
        return " ".join(text.split())

    help_text = run_cli("render", "--help").out
    assert flat(SET_HELP) in flat(help_text)
    assert 'a text field takes VALUE as it is (python=3.10 is the text "3.10")' in flat(
        run_cli("--help").out)
    page = (ROOT / "docs" / "commands.md").read_text()
    section = page[page.index("How `--set` reads VALUE"):]
    for example in ("--set python=3.10", "--set serving.max_model_len=16384",
                    "--set 'gpu.targets=[h100,l40s]'", "--set matrix=null",
                    "--set 'serving.env={VLLM_LOGGING_LEVEL: INFO}'",
                    "--set serving.env.VLLM_LOGGING_LEVEL=INFO"):
        assert example in section
        args = shlex.split(example)
        assert parse_set(args[1]) is not None

"""The command line as users drive it: outputs, exit codes, overrides, atomic writes."""

from __future__ import annotations

import json
from pathlib import Path

import dockerfile
import pytest

from tests.conftest import PROFILES, a_pem_certificate, run_cli
from tests.support.bad_profile_cases import VALID


def test_profiles_lists_shipped_ones() -> None:
    result = run_cli("profiles")
    assert result.rc == 0
    names = [line.split()[0] for line in result.out.splitlines()]
    assert names == ["a100-bf16", "a100-h100", "base", "fleet", "gh200-vllm", "h100-fp8",
                     "h100-sglang-fp8", "h100-standalone", "h100-trtllm-fp8", "l40s-awq"]
    assert "(abstract" in result.out


def test_schema_is_generated_from_the_model() -> None:
    result = run_cli("schema")
    assert result.rc == 0
    schema = json.loads(result.out)
    assert schema["additionalProperties"] is False
    assert {"gpu", "cuda", "engine", "flash_attn", "quantization", "serving", "image",
            "build", "runtime"} <= set(schema["properties"])
    engine = schema["$defs"]["Engine"]["properties"]["name"]
    assert engine["enum"] == ["vllm", "tensorrt-llm", "sglang"]


def test_render_stdout_is_the_dockerfile() -> None:
    result = run_cli("render", "-q", str(PROFILES / "h100-fp8.yaml"))
    assert result.rc == 0 and result.err == ""
    first = dockerfile.parse_string(result.out)[0]
    assert (first.cmd, first.value) == ("FROM", ("nvidia/cuda:13.0.2-devel-ubuntu22.04", "AS",
                                                 "build-base"))  # literal: no ARG in FROM


def test_warnings_go_to_stderr() -> None:
    result = run_cli("render", str(PROFILES / "a100-h100.yaml"), "--set", "flash_attn.purpose=")
    assert result.rc == 0
    assert "[warning]" in result.err and "[warning]" not in result.out


def test_render_writes_a_build_context(tmp_path: Path) -> None:
    out = tmp_path / "ctx"
    result = run_cli("render", "-q", str(PROFILES / "a100-h100.yaml"), "-o", str(out))
    assert result.rc == 0, result.err
    assert sorted(p.name for p in out.iterdir()) == [
        ".dockergen-files", ".dockerignore", "Dockerfile", "arch_audit.py", "constraints.txt",
        "docker-bake.hcl", "dockergen.resolved.json", "etc-hosts"]
    lock = json.loads((out / "dockergen.resolved.json").read_text())
    resolved = lock["resolved"]
    assert resolved["flash_attn_cuda_archs"] == "80;90"
    assert resolved["torch"] == "2.13.0"  # vLLM 0.32.0: headers accept flash-attn's C++17
    assert resolved["devel_image"] == "nvidia/cuda:13.0.2-devel-ubuntu22.04"
    assert resolved["tags"] == ["0.32.0-cu130-a100-h100"]  # dg-<hash> is added by build
    assert lock["profile_hash"] in (out / "Dockerfile").read_text()


def test_render_refuses_a_folder_it_did_not_write(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    result = run_cli("render", "-q", str(PROFILES / "h100-fp8.yaml"), "-o", str(out))
    assert result.rc == 4
    assert "was not written by dockergen" in result.err and "Traceback" not in result.err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_rerender_replaces_its_own_output(tmp_path: Path) -> None:
    out = tmp_path / "ctx"
    assert run_cli("render", "-q", str(PROFILES / "h100-fp8.yaml"), "-o", str(out)).rc == 0
    assert run_cli("render", "-q", str(PROFILES / "h100-trtllm-fp8.yaml"), "-o",
                   str(out)).rc == 0
    assert "arch_audit.py" not in {p.name for p in out.iterdir()}  # stale file gone
    assert "llm_api_options.yaml" in {p.name for p in out.iterdir()}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left


def test_set_overrides_apply_before_validation(tmp_path: Path) -> None:
    result = run_cli("render", "-q", str(PROFILES / "h100-fp8.yaml"),
                     "--set", "serving.max_model_len=16384", "--set", "python=3.13")
    assert result.rc == 0, result.err
    cmd = [c for c in dockerfile.parse_string(result.out) if c.cmd == "CMD"][0].value
    assert cmd[cmd.index("--max-model-len") + 1] == "16384"
    assert "uv python install 3.13" in result.out


def test_explain_names_rules_and_sources() -> None:
    result = run_cli("explain", str(PROFILES / "a100-h100.yaml"))
    assert result.rc == 0, result.err
    lines = result.out.splitlines()
    fa = next(i for i, line in enumerate(lines) if "FLASH_ATTN_CUDA_ARCHS" in line)
    assert lines[fa].split()[-1] == "80;90"
    assert "src: FA@v2.7.3..v2.8.3:setup.py" in lines[fa + 2]
    assert any("torch" in line and "2.13.0" in line for line in lines)
    assert any("src: VLLM-WHEEL 0.32.0 METADATA" in line for line in lines)
    assert any("MAX_JOBS" in line for line in lines)


def test_usage_errors_have_their_own_exit_code() -> None:
    assert run_cli("render").rc == 64
    assert run_cli("render", "--all").rc == 64  # --all needs -o
    assert run_cli("frobnicate").rc == 64


def test_missing_profile_file(tmp_path: Path) -> None:
    result = run_cli("render", "nope.yaml", cwd=tmp_path)
    assert result.rc == 2
    assert result.err.splitlines()[0] == "nope.yaml: file not found; check the path"


def test_version_and_module_entry_point() -> None:
    result = run_cli("--version")
    assert result.rc == 0 and result.out.startswith("dockergen, version ")


def test_user_profile_extends_a_shipped_one(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(
        "extends: h100-fp8\nname: mine\nserving:\n  max_model_len: 4096\n")
    result = run_cli("render", "-q", "mine.yaml", cwd=tmp_path)
    assert result.rc == 0, result.err
    assert '"--max-model-len", "4096"' in result.out
    assert '"--kv-cache-dtype", "fp8"' in result.out  # inherited


def test_ca_certificates_go_into_build_stages_only(tmp_path: Path) -> None:
    cert = a_pem_certificate()
    (tmp_path / "corp.crt").write_text(cert)
    text = VALID.replace("  memory_gib: 64", "  memory_gib: 64\n  ca_certificates: [corp.crt]")
    (tmp_path / "profile.yaml").write_text(text)
    result = run_cli("render", "-q", "profile.yaml", "-o", "ctx", cwd=tmp_path)
    assert result.rc == 0, result.err
    assert (tmp_path / "ctx" / "certs" / "extra-0.crt").read_text() == cert
    dockerfile_text = (tmp_path / "ctx" / "Dockerfile").read_text()
    runtime = dockerfile_text[dockerfile_text.index("AS runtime"):]
    assert "COPY certs/" in dockerfile_text and "certs" not in runtime
    assert "!certs/" in (tmp_path / "ctx" / ".dockerignore").read_text()


def test_build_dry_run_shows_the_plan_with_extra_ca(tmp_path: Path) -> None:
    cert = a_pem_certificate()
    (tmp_path / "proxy.crt").write_text(cert)
    result = run_cli("build", str(PROFILES / "a100-h100.yaml"), "--dry-run", "-q",
                     "--ca-cert", str(tmp_path / "proxy.crt"), "--tag", "reg.example.com/x:y",
                     env={"DOCKER_HOST": "tcp://127.0.0.1:9"})  # no engine needed
    assert result.rc == 0, result.err
    lines = result.out.splitlines()
    assert "  certs/extra-0.crt" in lines
    assert "  nvidia/cuda:13.0.2-devel-ubuntu22.04" in lines
    assert lines[-1] == "  reg.example.com/x:y"
    assert any(line.startswith("  registry.example.com/llm/vllm:dg-") for line in lines)


def test_build_push_without_smoke_is_refused() -> None:
    result = run_cli("build", str(PROFILES / "h100-fp8.yaml"), "--push", "--no-smoke",
                     "--dry-run", env={"DOCKER_HOST": "tcp://127.0.0.1:9"})
    assert result.rc == 64 and "--push needs the smoke tests" in result.err


def test_ci_runs_the_readme_commands() -> None:
    """The README's two set-up commands exist, and .ci/run runs the test one verbatim."""
    from tests.conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    commands = [line for line in readme.splitlines() if line.startswith("python3 -m venv")]
    render_cmd, test_cmd = commands[:2]
    assert render_cmd.endswith("dockergen render profiles/h100-fp8.yaml")
    # rendering needs none of the test tools (they took 140 s), and pip must stay quiet:
    # its lines were mixed into the Dockerfile on standard output
    assert "pip install -q -e . &&" in render_cmd and "[test]" not in render_cmd
    assert test_cmd.endswith(".venv/bin/python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_cmd in ci


@pytest.mark.parametrize("value", ["nan", "inf", "1e309", "-1", "0", "700000"])
def test_build_timeout_is_a_real_duration(value: str) -> None:
    """nan and -1 cancelled the build at once as a timeout, 0 meant no timeout, and inf
    crashed the timer thread with OverflowError: all are usage errors before any work."""
    result = run_cli("build", "--dry-run", "h100-fp8", "--timeout", value)
    assert result.rc == 64, result.err
    assert "--timeout" in result.err and "more than 0 and at most 604800" in result.err
    assert result.out == "" and "Traceback" not in result.err


@pytest.mark.parametrize("command", [("render", "-q", "h100-fp8"), ("explain", "h100-fp8"),
                                     ("schema",), ("reference",), ("--help",), ("--version",)])
def test_output_that_cannot_be_written_is_exit_4(command: tuple[str, ...]) -> None:
    """/dev/full raised an OSError traceback (exit 1); a closed stdout lost the output with
    exit 0."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    for redirect in ("> /dev/full", ">&-"):
        proc = subprocess.run(f"{sys.executable} -m dockergen {' '.join(command)} {redirect}",
                              shell=True, capture_output=True, text=True, cwd=ROOT, check=False)
        assert proc.returncode == 4, (redirect, proc.stderr)
        assert proc.stderr.startswith("cannot write the output: ")
        assert "Traceback" not in proc.stderr


def test_a_closed_stdout_does_not_matter_when_writing_to_a_folder(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import ROOT

    proc = subprocess.run(f"{sys.executable} -m dockergen render -q h100-fp8 -o {tmp_path / 'o'}"
                          " >&-", shell=True, capture_output=True, text=True, cwd=ROOT,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "o" / "Dockerfile").is_file()


@pytest.mark.parametrize("args", [("render", "h100-fp8", "-o", ""), ("schema", "-o", ""),
                                  ("reference", "-o", ""),
                                  ("render", "h100-fp8", "--syntax", "docker/dockerfile:1\nRUN id"),
                                  ("render", "h100-fp8", "--syntax", ""),
                                  ("render", "h100-fp8", "--syntax", "bob:hunter2@reg.io/df:1")])
def test_option_values_that_would_change_the_output_are_usage_errors(
        args: tuple[str, ...]) -> None:
    result = run_cli(*args)
    assert result.rc == 64, result.err
    assert result.out == "" and "hunter2" not in result.err


def test_too_long_paths_are_clear_errors(tmp_path: Path) -> None:
    long = "d" * 300
    for args, code in ((("validate", long), 2), (("validate", f"/tmp/{long}.yaml"), 2),
                       (("render", "h100-fp8", "-o", str(tmp_path / long)), 4),
                       (("schema", "-o", str(tmp_path / long)), 4),
                       (("reference", "-o", str(tmp_path / long)), 4)):
        result = run_cli(*args)
        assert result.rc == code, (args, result.err)
        assert "Traceback" not in result.err


def test_a_profile_file_name_cannot_add_a_dockerfile_line(tmp_path: Path) -> None:
    evil = tmp_path / "evil\nRUN id #.yaml"
    evil.write_text("extends: h100-fp8\nname: evil\n")
    result = run_cli("render", "-q", str(evil), "-o", str(tmp_path / "o"))
    assert result.rc == 2, result.err
    assert "control character" in result.err and not (tmp_path / "o").exists()
    parent = tmp_path / "p.yaml"
    parent.write_text('extends: "h100-fp8\\nRUN id"\nname: p\n')
    result = run_cli("render", "-q", str(parent))
    assert result.rc == 2 and "is not a profile name" in result.err, result.err

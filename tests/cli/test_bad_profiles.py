"""Bad input: exact one-line messages, exit code 2, no traceback, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.bad_profile_cases import CASES, EXPECTED, VALID

IDS = [case[0] for case in CASES]


def test_corpus_is_large_and_complete() -> None:
    assert len(CASES) >= 40
    assert set(IDS) == set(EXPECTED) and len(IDS) == len(set(IDS))


def test_valid_base_renders(tmp_path: Path) -> None:
    (tmp_path / "profile.yaml").write_text(VALID)
    result = run_cli("render", "-q", "profile.yaml", "-o", "out", cwd=tmp_path)
    assert result.rc == 0, result.err
    assert (tmp_path / "out" / "Dockerfile").is_file()


@pytest.mark.parametrize(("case_id", "edits", "overrides"), CASES, ids=IDS)
def test_bad_profile(case_id: str, edits: list[tuple[str, str]], overrides: list[str],
                     tmp_path: Path) -> None:
    text = VALID
    for old, new in edits:
        assert old in text, f"case {case_id}: {old!r} not in VALID"
        text = text.replace(old, new, 1)
    (tmp_path / "profile.yaml").write_text(text)
    args = ["render", "profile.yaml", "-o", "out"]
    for item in overrides:
        args += ["--set", item]
    result = run_cli(*args, cwd=tmp_path)

    assert result.rc == 2, result.err
    assert "Traceback" not in result.err and result.out == ""
    errors = [line for line in result.err.splitlines()
              if not line.endswith("[warning]") and not line.startswith("dockergen:")]
    assert errors == EXPECTED[case_id]
    assert result.err.splitlines()[-1] == (
        f"dockergen: {len(errors)} problem(s); nothing was written")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.yaml"]  # nothing written


def test_failed_render_keeps_previous_output(tmp_path: Path) -> None:
    """A bad profile never touches an existing build context."""
    (tmp_path / "profile.yaml").write_text(VALID)
    assert run_cli("render", "-q", "profile.yaml", "-o", "out", cwd=tmp_path).rc == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    (tmp_path / "profile.yaml").write_text(VALID.replace("h100", "t4"))
    assert run_cli("render", "profile.yaml", "-o", "out", cwd=tmp_path).rc == 2
    after = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    assert after == before


def test_validate_reports_every_file(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text(VALID)
    (tmp_path / "bad1.yaml").write_text(VALID.replace('python: "3.12"', "python: 3.10"))
    (tmp_path / "bad2.yaml").write_text(VALID.replace("name: vllm", "name: vlm"))
    result = run_cli("validate", "-q", "good.yaml", "bad1.yaml", "bad2.yaml", cwd=tmp_path)
    assert result.rc == 2
    assert result.out == "good.yaml: ok\n"
    assert result.err.splitlines() == [
        'bad1.yaml:7:9: python: 3.10 is a number in YAML (read as 3.1), not text; '
        'quote it: python: "3.10"',
        "bad2.yaml:9:9: engine.name: 'vlm' is not one of: vllm, tensorrt-llm, sglang; "
        "did you mean 'vllm'?",
        "dockergen: 2 problem(s); nothing was written",
    ]


@pytest.mark.parametrize("value", ["hf_SeCrEtVaLuE0123456789abcdef",
                                   "'hf_SeCrEtVaLuE0123456789abcdef x'",
                                   "https://bob:hunter2secret@example.com/x"])
def test_secret_values_never_echoed(value: str, tmp_path: Path) -> None:
    """Whether a rule or the schema rejects it, the credential itself is never printed."""
    secret = value.strip("'").split()[0]
    for name in ("HF_TOKEN", "LOG_SINK"):
        text = VALID.replace("  max_model_len: 8192", f"  max_model_len: 8192\n  env:\n"
                                                       f"    {name}: {value}")
        (tmp_path / "profile.yaml").write_text(text)
        result = run_cli("render", "profile.yaml", cwd=tmp_path)
        assert result.rc == 2
        assert "Traceback" not in result.err
        for part in (secret, "SeCrEt", "hunter2"):
            assert part not in result.err and part not in result.out


def test_errors_in_a_parent_profile_point_into_the_parent(tmp_path: Path) -> None:
    (tmp_path / "parent.yaml").write_text("abstract: true\npython: 3.10\n")
    child = VALID.replace('python: "3.12"\n', "").replace("name: test", "extends: parent\n"
                                                          "name: test")
    (tmp_path / "child.yaml").write_text(child)
    result = run_cli("validate", "child.yaml", cwd=tmp_path)
    assert result.rc == 2
    assert result.err.splitlines()[0] == (
        'parent.yaml:2:9: python: 3.10 is a number in YAML (read as 3.1), not text; '
        'quote it: python: "3.10"')


@pytest.mark.parametrize(("profile", "sets", "engine"), [
    ("h100-fp8", ("engine.version=9.9.9",), "vllm"),
    ("h100-trtllm-fp8", ("engine.version=9.9.9",), "tensorrt-llm"),
    ("h100-sglang-fp8", ("engine.version=9.9.9",), "sglang"),
    ("h100-sglang-fp8", ("engine.version=0.33.0",), "sglang"),  # a vLLM release
    ("h100-fp8", ("engine.name=sglang",), "sglang"),  # keeps vLLM's version
])
def test_an_engine_release_outside_the_knowledge_is_an_error_for_every_engine(
        profile: str, sets: tuple[str, ...], engine: str, tmp_path: Path) -> None:
    """SGLang's lockstep pins were read from a release it did not know: KeyError, exit 1."""
    args = [a for s in sets for a in ("--set", s)]
    for command in (["validate", profile], ["render", profile, "-o", str(tmp_path / "o")]):
        result = run_cli(*command, *args)
        assert result.rc == 2, result.err
        assert "Traceback" not in result.err
        assert f"engine.version: {engine} " in result.err and "is not in the knowledge base" \
            in result.err
        assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("override", ["extends=a100-bf16", "extends=[1]", "abstract=true"])
def test_overrides_of_what_is_read_first_are_errors(override: str) -> None:
    """They were dropped silently (exit 0): the chain is read before overrides apply."""
    result = run_cli("validate", "h100-fp8", "--set", override)
    assert result.rc == 2, result.err
    key = override.split("=")[0]
    assert result.err.startswith(f"--set {key}: {key}: ") and "read before --set" in result.err


@pytest.mark.parametrize("field", ["max_model_len", "max_num_batched_tokens", "max_num_seqs"])
def test_token_counts_stop_at_int32(field: str) -> None:
    """A 30-digit number rendered into the server command with exit 0."""
    result = run_cli("render", "-q", "h100-fp8", "--set",
                     f"serving.{field}=123456789012345678901234567890")
    assert result.rc == 2, result.err
    assert f"serving.{field}: " in result.err and "must be <= 2147483647" in result.err
    assert result.out == ""


@pytest.mark.parametrize(("override", "expected", "valid"), [
    # the fix for the profile's name was given for image.name too; a --set gets a --set
    ("image.name=BAD", "e.g. `--set image.name=registry.example.com/llm/vllm`",
     "image.name=registry.example.com/llm/vllm"),
    # nan compares as false with every bound: "use a value <= 1.0" did not say what was wrong
    ("serving.gpu_memory_utilization=.nan", "nan is not a number; write a number <= 1.0",
     "serving.gpu_memory_utilization=0.9"),
])
def test_the_fix_fits_the_field_and_is_itself_valid(override: str, expected: str,
                                                     valid: str) -> None:
    result = run_cli("validate", "h100-fp8", "--set", override)
    assert result.rc == 2 and expected in result.err, result.err
    assert run_cli("validate", "h100-fp8", "--set", valid).rc == 0


def test_a_torch_index_with_its_cuda_folder_is_not_doubled() -> None:
    """.../whl/cu130 rendered as --extra-index-url .../whl/cu130/cu130 without a word."""
    result = run_cli("render", "-q", "h100-fp8", "--set",
                     "build.torch_index_url=https://download.pytorch.org/whl/cu130")
    assert result.rc == 2 and result.out == "", result.err
    assert ("build.torch_index_url: ends in /cu130; dockergen appends the CUDA-matched folder "
            "itself") in result.err
    fix = run_cli("render", "-q", "h100-fp8", "--set",
                  "build.torch_index_url=https://download.pytorch.org/whl")
    assert fix.rc == 0 and "/whl/cu130 " in fix.out and "cu130/cu130" not in fix.out


@pytest.mark.parametrize(("override", "message"), [
    ("cuda.devel_image=nvidia/cuda:12.8.1-devel-ubuntu22.04",
     "is CUDA 12.8.1, but cuda.version is 13.0.2"),
    ("cuda.devel_image=nvidia/cuda:13.0.2-devel-ubuntu24.04",
     "is built on ubuntu24.04, but cuda.os is ubuntu22.04"),
    ("cuda.runtime_image=registry.example.com/mirror/cuda:13.0.2-devel-ubuntu22.04",
     "is a devel image, not runtime or base"),
])
def test_explicit_cuda_images_must_be_what_the_profile_says(override: str, message: str) -> None:
    """They were accepted: a build on another CUDA or glibc, or a runtime with compilers."""
    result = run_cli("validate", "h100-fp8", "--set", override)
    assert result.rc == 2 and message in result.err, result.err
    fixed = override.replace("12.8.1", "13.0.2").replace("24.04", "22.04").replace(
        "13.0.2-devel-ubuntu22.04", "13.0.2-runtime-ubuntu22.04") if "runtime_image" in \
        override else override.replace("12.8.1", "13.0.2").replace("24.04", "22.04")
    assert run_cli("validate", "h100-fp8", "--set", fixed).rc == 0  # the fix: that image

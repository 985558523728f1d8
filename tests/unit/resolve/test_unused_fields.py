"""A profile field that has no effect with the rest of the profile is a warning naming the
field and the field (and value) that would make it count; a value inherited from a parent
profile (the defaults it provides for others) is not the profile's own choice and is not
warned about."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import PROFILES, run_cli

# (the --set that writes the field, the field, what would make it count) on h100-fp8 (vLLM
# 0.33.0, flash_attn.build none, torch from PyTorch's index, runtime image from the tag)
UNUSED = [
    ("flash_attn.version=2.8.3", "flash_attn.version", "flash_attn.build: source"),
    ("flash_attn.max_jobs=4", "flash_attn.max_jobs", "flash_attn.build: source"),
    ("flash_attn.nvcc_threads=2", "flash_attn.nvcc_threads", "flash_attn.build: source"),
    ("flash_attn.purpose=transformers", "flash_attn.purpose", "flash_attn.build: source"),
    ("flash_attn.source={git: 'https://github.com/Dao-AILab/flash-attention', commit: "
     "'0123456789abcdef0123456789abcdef01234567'}", "flash_attn.source",
     "flash_attn.build: source"),
]
# the same fields in profiles where something else makes them count or not
ELSEWHERE = [
    (("build.torch_from=main-index", "build.torch_index_url=https://mirror.example.com/whl"),
     "build.torch_index_url", "build.torch_from: pytorch-index"),
    (("cuda.runtime_image=nvidia/cuda:13.0.2-runtime-ubuntu22.04", "cuda.runtime_flavor=runtime"),
     "cuda.runtime_flavor", "remove cuda.runtime_image"),
    (("engine.name=sglang", "engine.version=0.5.22", "build.flashinfer_aot=false"),
     "build.flashinfer_aot", "an engine release whose FlashInfer start-up kernels are known"),
]


def _warnings(out: str, field: str) -> list[str]:
    return [line for line in out.splitlines() if f": {field}: " in line
            and line.endswith("[warning]")]


@pytest.mark.parametrize(("given", "field", "needs"), UNUSED)
def test_a_flash_attn_field_without_a_source_build_is_a_warning(given: str, field: str,
                                                                needs: str) -> None:
    out = run_cli("validate", "h100-fp8", "--set", given)
    assert out.rc == 0, out.err
    (line,) = _warnings(out.err, field)
    assert "has no effect" in line and needs in line, line
    assert line.startswith(f"--set {field}: {field}: "), line


@pytest.mark.parametrize(("given", "field", "needs"), ELSEWHERE)
def test_other_fields_without_effect_are_warnings(given: tuple[str, ...], field: str,
                                                  needs: str) -> None:
    sets = [a for g in given for a in ("--set", g)]
    out = run_cli("validate", "h100-fp8", *sets)
    assert out.rc == 0, out.err
    (line,) = _warnings(out.err, field)
    assert "has no effect" in line and needs in line, line


def test_the_warning_names_the_profiles_own_line(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("extends: h100-fp8\nname: p\nflash_attn:\n"
                                     "  version: 2.8.3\n")
    out = run_cli("validate", "p.yaml", cwd=tmp_path)
    assert out.rc == 0, out.err
    (line,) = _warnings(out.err, "flash_attn.version")
    assert line.startswith("p.yaml:4:12: flash_attn.version: has no effect"), line


def test_fields_that_count_and_inherited_defaults_give_no_warning() -> None:
    # base.yaml provides flash_attn.version and max_jobs for profiles that build it
    for profile in ("h100-fp8", "h100-sglang-fp8", "h100-trtllm-fp8", "a100-h100",
                    "h100-standalone", "l40s-awq", "a100-bf16"):
        out = run_cli("validate", profile)
        assert out.rc == 0, out.err
        assert "has no effect" not in out.err, (profile, out.err)
    # with a source build the same fields count
    counted = run_cli("validate", str(PROFILES / "a100-h100.yaml"), "--set",
                      "flash_attn.max_jobs=4")
    assert counted.rc == 0 and "has no effect" not in counted.err, counted.err


def test_build_memory_counts_for_the_engines_seeded_jit_cache_only(tmp_path: Path) -> None:
    """SGLang 0.5.23 with FlashInfer's stage off still compiles in the build (its own
    start-up kernels, for the model serving.hf_config names): build.memory_gib bounds those
    jobs; with no model named nothing is compiled and the field has no effect."""
    sets = ["--set", "build.flashinfer_aot=false", "--set", "build.memory_gib=32"]
    seeded = run_cli("validate", "h100-sglang-fp8", *sets)
    assert seeded.rc == 0 and not _warnings(seeded.err, "build.memory_gib"), seeded.err
    (tmp_path / "base.yaml").write_text((PROFILES / "base.yaml").read_text())
    shipped = (PROFILES / "h100-sglang-fp8.yaml").read_text()
    assert "  hf_config: llama-3-8b\n" in shipped
    (tmp_path / "p.yaml").write_text(shipped.replace("  hf_config: llama-3-8b\n", ""))
    unseeded = run_cli("validate", "p.yaml", *sets, cwd=tmp_path)
    assert unseeded.rc == 0, unseeded.err
    (line,) = _warnings(unseeded.err, "build.memory_gib")
    assert "serving.hf_config" in line, line

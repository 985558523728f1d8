"""Arch derivation per GPU family, and the errors and warnings around it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dockergen.api import resolve_profile
from dockergen.errors import ProfileError
from tests.support.bad_profile_cases import VALID


def _resolve(tmp_path: Path, *overrides: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "profile.yaml"
    path.write_text(VALID)
    return resolve_profile(path, overrides)


@pytest.mark.parametrize(("targets", "torch_list", "fa_archs", "sass"), [
    ("[a10g]", "8.6", "80", ["sm_80"]),          # Ampere GA10x runs the sm_80 kernels
    ("[l40s]", "8.9", "80", ["sm_80"]),          # Ada: FA2 ships no sm_89 code; sm_80 runs
    ("[a100]", "8.0", "80", ["sm_80"]),
    ("[h100]", "9.0", "90", ["sm_90"]),
    ("[h200]", "9.0", "90", ["sm_90"]),
    ("[b200]", "10.0", "100", ["sm_100"]),
    ("[a100, h100]", "8.0;9.0", "80;90", ["sm_80", "sm_90"]),
    ("[l40s, a10g, a100]", "8.0;8.6;8.9", "80", ["sm_80"]),
    ('["8.0", "9.0"]', "8.0;9.0", "80;90", ["sm_80", "sm_90"]),
    ("[h100, b200]", "9.0;10.0", "90;100", ["sm_90", "sm_100"]),
])
def test_arch_lists(tmp_path: Path, targets: str, torch_list: str, fa_archs: str,
                    sass: list[str]) -> None:
    r = _resolve(tmp_path, f"gpu.targets={targets}")
    assert r.record["resolved"]["torch_cuda_arch_list"] == torch_list
    assert r.record["resolved"]["flash_attn_cuda_archs"] == fa_archs
    assert r.record["resolved"]["flash_attn_expected_sass"] == sass
    assert r.runtime.labels["dockergen.cuda.archs"] == torch_list
    text = "\n".join(f"{d.key}={d.value}" for d in r.derivations)
    assert f"FLASH_ATTN_CUDA_ARCHS={fa_archs}" in text


def _error_lines(exc: pytest.ExceptionInfo[ProfileError]) -> list[str]:
    return [str(p) for p in exc.value.problems if p.severity == "error"]


def test_blackwell_needs_cuda_12_8(tmp_path: Path) -> None:
    with pytest.raises(ProfileError) as exc:
        _resolve(tmp_path, "gpu.targets=[b200]", "cuda.version=12.4.1", "engine.version=0.19.1")
    lines = _error_lines(exc)
    assert any("CUDA 12.4.1 cannot compile for compute capability 10.0 (CUDA >= 12.8 can), "
               "but gpu.targets includes b200 (10.0); use CUDA 12.8.1 or 12.9.1" in line
               for line in lines)
    assert any("flash-attn skips arch 100 without an error when nvcc < 12.8" in line
               for line in lines)


def test_fa2_on_turing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileError) as exc:
        _resolve(tmp_path, "gpu.targets=[t4]", "quantization.weights=fp16")
    assert _error_lines(exc) == [
        "--set gpu.targets: gpu.targets: FlashAttention-2 needs compute capability >= 8.0 "
        "(Ampere or newer), but gpu.targets includes t4 (7.5); set flash_attn.build: none"]


def test_turing_without_flash_attn_is_fine(tmp_path: Path) -> None:
    r = _resolve(tmp_path, "gpu.targets=[t4]", "quantization.weights=fp16",
                 "flash_attn.build=none")
    assert r.flash_attn is None and r.record["resolved"]["torch_cuda_arch_list"] == "7.5"


def test_fp8_on_ampere_tensorrt_llm_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileError) as exc:
        _resolve(tmp_path, "gpu.targets=[a100]", "engine.name=tensorrt-llm",
                 "engine.version=1.1.0", "flash_attn.build=none", "quantization.weights=fp8")
    assert _error_lines(exc) == [
        "--set quantization.weights: quantization.weights: fp8 needs compute capability >= 8.9 "
        "on tensorrt-llm, but gpu.targets includes a100 (8.0); use weights: fp16 or bf16"]


def test_fp8_on_ampere_vllm_warns_weight_only(tmp_path: Path) -> None:
    r = _resolve(tmp_path, "gpu.targets=[a100, h100]", "quantization.weights=fp8")
    warnings = [str(w) for w in r.warnings]
    assert any("fp8 on a100 (8.0) runs weight-only (W8A16 FP8-Marlin)" in w for w in warnings)
    assert "--quantization" in r.record["resolved"]["cmd"]


def test_fp8_kv_on_ampere_warns(tmp_path: Path) -> None:
    r = _resolve(tmp_path, "gpu.targets=[a100]", "quantization.kv_cache=fp8")
    assert any("quantization.kv_cache: fp8 on a100 (8.0) is stored in fp8" in str(w)
               for w in r.warnings)


def test_old_flash_attn_warns_it_cannot_restrict_archs(tmp_path: Path) -> None:
    r = _resolve(tmp_path, "flash_attn.version=2.7.2.post1")
    assert any("ignores FLASH_ATTN_CUDA_ARCHS (added in 2.7.3)" in str(w) for w in r.warnings)


def test_max_jobs_follows_build_memory(tmp_path: Path) -> None:
    assert _resolve(tmp_path, "build.memory_gib=32").flash_attn.max_jobs == 3  # type: ignore[union-attr]
    assert _resolve(tmp_path, "build.memory_gib=256").flash_attn.max_jobs == 28  # type: ignore[union-attr]
    low = _resolve(tmp_path, "build.memory_gib=8")
    assert low.flash_attn.max_jobs == 1  # type: ignore[union-attr]
    assert any("below the ~9 GiB one flash-attn compile job" in str(w) for w in low.warnings)


def test_tensorrt_llm_floors_of_the_engine_path_only_warn(tmp_path: Path) -> None:
    """int4-awq's 8.0 comes from the TensorRT-engine support matrix; trtllm-serve runs the
    PyTorch backend, whose docs give no floor: unverified, so a T4 is a warning."""
    r = _resolve(tmp_path, "gpu.targets=[t4]", "engine.name=tensorrt-llm",
                 "engine.version=1.1.0", "flash_attn.build=none",
                 "quantization.weights=int4-awq", "quantization.kv_cache=int8")
    warnings = [str(w) for w in r.warnings]
    assert any("quantization.weights: int4-awq may need compute capability >= 8.0 on "
               "tensorrt-llm (unverified: support-matrix.md@9b062a8 int4_awq" in w
               for w in warnings), warnings
    assert any("quantization.kv_cache: int8 may need compute capability >= 8.0" in w
               for w in warnings), warnings

"""Facts per machine: an arm64 image is judged by the aarch64 wheels, not x86_64's.

The aarch64 wheels on the index are builds of their own: vLLM 0.33.0's kernels start at
sm_80 (x86_64: sm_75), sglang-kernel 0.4.10's at sm_90, SGLang's wheels need glibc 2.34,
vLLM 0.9.1 has no aarch64 wheel at all; GH200, GB200 and GB10 exist only in aarch64 hosts.
`build.platform` names the machine, and the rules read that machine's rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dockergen import pipeline
from dockergen.knowledge import kernels
from dockergen.knowledge.facts import builtin_facts
from dockergen.maint import platforms
from tests.conftest import ROOT, run_cli


def _profile(tmp_path: Path, text: str) -> Path:
    for shipped in (ROOT / "profiles").glob("*.yaml"):
        (tmp_path / shipped.name).write_text(shipped.read_text())
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path


def test_a_grace_gpu_on_an_amd64_image_is_an_error_naming_the_platform(tmp_path: Path) -> None:
    """An amd64 image cannot start on GH200's Grace CPU: refused, with the platform as fix."""
    path = _profile(tmp_path, "extends: h100-fp8\nname: g\ngpu:\n  targets: [gh200]\n")
    run = run_cli("validate", str(path))
    assert run.rc == 2, run.err
    assert ("build.platform: gh200 (9.0) exists only in linux/arm64 hosts, but build.platform "
            "is linux/amd64: the image could not start there; use build.platform: "
            "linux/arm64") in run.err, run.err
    assert "Traceback" not in run.err


@pytest.mark.parametrize("gpu", ["gh200", "gb200", "gb10"])
def test_the_superchips_validate_on_arm64(tmp_path: Path, gpu: str) -> None:
    path = _profile(tmp_path, f"extends: gh200-vllm\nname: g\ngpu:\n  targets: [{gpu}]\n")
    run = run_cli("validate", str(path))
    assert run.rc == 0, run.err
    assert "[warning]" not in run.err.replace("unverified", ""), run.err


def test_gb10_needs_the_cuda_that_compiles_sm_121(tmp_path: Path) -> None:
    """ptxas 12.8.93 lists no sm_121; 12.9.86 does (cuda.yaml cuda_archs, PTXAS rows)."""
    path = _profile(tmp_path, "extends: gh200-vllm\nname: g\ngpu:\n  targets: [gb10]\n"
                              "cuda:\n  version: 12.8.1\n")
    run = run_cli("validate", str(path))
    assert run.rc == 2, run.err
    assert ("cuda.version: CUDA 12.8.1 cannot compile for compute capability 12.1 "
            "(CUDA >= 12.9 can), but gpu.targets includes gb10 (12.1)") in run.err, run.err


def test_vllm_on_arm64_reads_the_aarch64_kernels_a_t4_has_none(tmp_path: Path) -> None:
    """x86_64's vLLM 0.33.0 carries sass_75 (a T4 validates); the aarch64 build does not."""
    text = ("extends: h100-fp8\nname: t\ngpu:\n  targets: [t4]\nquantization:\n"
            "  weights: fp16\n  kv_cache: auto\n")
    amd64 = run_cli("validate", str(_profile(tmp_path, text)))
    assert amd64.rc == 0, amd64.err
    arm64 = run_cli("validate", str(_profile(tmp_path, text + "build:\n  platform: linux/arm64\n")))
    assert arm64.rc == 2, arm64.err
    assert ("gpu.targets: vllm 0.33.0 cannot run on t4 (7.5) on aarch64; its compiled kernels "
            "carry no code for that compute capability (vllm/_C_stable_libtorch.abi3.so: "
            "sass_80,") in arm64.err, arm64.err
    assert "vllm-0.33.0-cp38-abi3-manylinux_2_28_aarch64.whl" in arm64.err


def test_sglang_on_arm64_starts_at_sm_90(tmp_path: Path) -> None:
    text = "extends: h100-sglang-fp8\nname: s\nbuild:\n  platform: linux/arm64\n"
    ok = run_cli("validate", str(_profile(tmp_path, text + "gpu:\n  targets: [h100, gb10]\n")))
    assert ok.rc == 0, ok.err
    bad = run_cli("validate", str(_profile(tmp_path, text + "gpu:\n  targets: [a100]\n")))
    assert bad.rc == 2, bad.err
    assert ("sglang 0.5.23 cannot run on a100 (8.0) on aarch64; its compiled kernels carry no "
            "code for that compute capability (sgl_kernel/sm100/common_ops.abi3.so: sass_90, "
            "sass_100, sass_110a, sass_120a, sass_121a; sglang_kernel-0.4.10-cp310-abi3-"
            "manylinux2014_aarch64.whl") in bad.err, bad.err


def test_sglang_needs_a_base_os_with_glibc_2_34(tmp_path: Path) -> None:
    """SGLang publishes manylinux_2_34 wheels only: ubuntu20.04 (glibc 2.31) installs none."""
    path = _profile(tmp_path, "extends: h100-sglang-fp8\nname: s\ncuda:\n  os: ubuntu20.04\n"
                              "  version: 12.9.1\n")
    run = run_cli("validate", str(path))
    assert run.rc == 2, run.err
    assert ("cuda.os: sglang 0.5.23's x86_64 wheels need glibc >= 2.34 (manylinux_2_34; PYPI "
            "sglang 0.5.23 wheel files") in run.err, run.err
    assert "but ubuntu20.04 has glibc 2.31: no wheel installs there" in run.err


def test_a_release_without_an_aarch64_wheel_is_an_error(tmp_path: Path) -> None:
    path = _profile(tmp_path, "extends: h100-fp8\nname: o\nengine:\n  version: \"0.9.1\"\n"
                              "python: \"3.11\"\ncuda:\n  version: 12.9.1\n"
                              "build:\n  platform: linux/arm64\n")
    run = run_cli("validate", str(path))
    assert run.rc == 2, run.err
    assert ("build.platform: vllm 0.9.1 publishes no aarch64 wheel (PYPI vllm 0.9.1 wheel "
            "files") in run.err, run.err
    assert "use build.platform: linux/amd64" in run.err
    assert "GPU code of vllm 0.9.1" not in run.err  # one error, not a second guess


def test_the_python_lock_and_deploy_follow_the_platform() -> None:
    res = pipeline.resolution(ROOT / "profiles" / "gh200-vllm.yaml")
    assert res.resolved.python_lock_inputs.platform == "aarch64-manylinux_2_35"
    amd = pipeline.resolution(ROOT / "profiles" / "h100-fp8.yaml")
    assert amd.resolved.python_lock_inputs.platform == "x86_64-manylinux_2_35"


def test_each_engine_has_aarch64_kernels_rows_for_its_newest_kernel_package() -> None:
    for engine in ("vllm", "sglang"):
        facts = builtin_facts(f"serving/{engine}")
        table = facts[kernels.TABLE_OF_MACHINE["aarch64"]]
        assert set(table) <= set(facts["kernels"]), engine
        newest = max(facts["kernels"], key=lambda v: tuple(int(x) for x in v.split(".")))
        assert newest in table, engine
        for row in table.values():
            assert row["src"].endswith("_aarch64.whl .nv_fatbin (tools/kernel_archs.py)")


@pytest.mark.parametrize(("name", "seen"), [
    ("sglang-0.5.23-cp311-cp311-manylinux_2_34_aarch64.whl", {"aarch64": "2.34"}),
    ("vllm-0.9.1-cp38-abi3-manylinux1_x86_64.whl", {"x86_64": "2.5"}),
    ("sglang_kernel-0.4.10-cp310-abi3-manylinux2014_aarch64.whl", {"aarch64": "2.17"}),
    ("nvidia_cuda_nvcc_cu12-12.9.86-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl",
     {"x86_64": "2.12"}),
    ("tensorrt_llm-1.2.1.tar.gz", {}),
])
def test_a_wheels_glibc_is_read_from_its_platform_tags(name: str, seen: dict[str, str]) -> None:
    assert platforms.wheel_glibc(name) == seen

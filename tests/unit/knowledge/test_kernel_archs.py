"""Which GPUs an engine release can run on at all, from its compiled kernels.

The `kernels:` rows of the engines' facts (the fatbin code of the library every model
loads) are read from the real wheels by tools/kernel_archs.py; the rule
(engine-kernel-archs) refuses a target none of that code runs on, before any build.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from dockergen.knowledge import kernels
from dockergen.knowledge.facts import builtin_facts
from tests.conftest import ROOT, run_cli
from tests.unit.building.test_arch_audit import CUOBJDUMP, NVCC
from tests.unit.building.test_image_audit import _compile, _cuobjdump_code

TOOL = ROOT / "tools" / "kernel_archs.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kernel_archs", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _profile(tmp_path: Path, text: str) -> Path:
    for shipped in (ROOT / "profiles").glob("*.yaml"):
        (tmp_path / shipped.name).write_text(shipped.read_text())
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return path


# --- the rule ------------------------------------------------------------------------------

@pytest.mark.parametrize(("codes", "cc", "runs"), [
    (["sass_80"], "8.6", True),          # SASS runs on newer minors of its major
    (["sass_80"], "9.0", False),         # ... never on another major
    (["sass_90a"], "9.0", True),         # arch-specific code: exactly its arch
    (["sass_100", "sass_120a"], "12.0", True),
    (["sass_100", "sass_120a"], "12.1", False),
    (["ptx_80"], "12.0", True),          # PTX JIT-compiles forward
    (["ptx_80"], "7.5", False),
    (["sass_75", "ptx_80"], "7.0", False),
])
def test_which_code_runs_where(codes: list[str], cc: str, runs: bool) -> None:
    assert kernels.runs_on(codes, cc) is runs


def test_sglang_on_a_turing_gpu_is_an_error_with_the_library_and_its_code(tmp_path: Path) -> None:
    """sglang-kernel 0.4.10 builds common_ops for sm_80 and newer, without PTX: a T4 cannot
    run SGLang at all. Before this rule the profile validated with one unverified warning."""
    path = _profile(tmp_path, "extends: h100-sglang-fp8\nname: t4\ngpu:\n  targets: [t4]\n"
                              "quantization:\n  weights: auto\n")
    run = run_cli("validate", str(path))
    assert run.rc == 2, run.err
    assert ("gpu.targets: sglang 0.5.23 cannot run on t4 (7.5); its compiled kernels carry "
            "no code for that compute capability (sgl_kernel/sm100/common_ops.abi3.so: "
            "sass_80, sass_89, sass_90, sass_90a, sass_100, sass_120a; sglang_kernel-0.4.10-"
            in run.err), run.err
    assert "no kernel image is available" in run.err
    assert "[warning]" not in run.err.split("gpu.targets: sglang")[0]


def test_each_gpu_is_judged_by_the_library_it_loads(tmp_path: Path) -> None:
    """SGLang loads the sm90 build on 9.0 and the sm100 build elsewhere; both run on an
    H100, an A10 (sass_80 on 8.6), a B300 (sass_100 on 10.3), an RTX 5090 (sass_120a)."""
    path = _profile(tmp_path, "extends: h100-sglang-fp8\nname: many\n"
                              "gpu:\n  targets: [h100, a10, b300, rtx5090]\n")
    run = run_cli("validate", str(path))
    assert "cannot run on" not in run.err, run.err


def test_vllm_on_volta_runs_where_the_release_carries_sm_70(tmp_path: Path) -> None:
    """vLLM 0.19.1 (CUDA 12) carries sass_70 in both libraries the platform loads; 0.21.0
    carries sass_75 and ptx_75 at the lowest: a V100 is refused there by this rule alone
    (CUDA 12.9 is given so the CUDA rules agree with the GPU)."""
    base = ("extends: h100-fp8\nname: v\ngpu:\n  targets: [v100]\ncuda:\n  version: \"12.9.1\"\n"
            "quantization:\n  weights: fp16\n  kv_cache: auto\nflash_attn:\n  build: none\n")
    ok = run_cli("validate", str(_profile(tmp_path, base + "engine:\n  version: \"0.19.1\"\n")))
    assert "cannot run on" not in ok.err, ok.err
    bad = run_cli("validate", str(_profile(tmp_path, base + "engine:\n  version: \"0.21.0\"\n")))
    assert ("vllm 0.21.0 cannot run on v100 (7.0); its compiled kernels carry no code for "
            "that compute capability (vllm/_C.abi3.so: sass_75" in bad.err), bad.err
    assert "vllm/_C_stable_libtorch.abi3.so: sass_75" in bad.err


def test_a_release_whose_kernels_were_not_read_warns_and_says_how_to_read_them(
        tmp_path: Path) -> None:
    knowledge = tmp_path / "more.yaml"
    knowledge.write_text(
        'serving/vllm:\n  releases:\n    "0.33.1": {torch: "2.14.0", python: ">=3.11,<3.15", '
        'cuda_major: 13, src: "test"}\n')
    path = _profile(tmp_path, "extends: h100-fp8\nname: n\nknowledge: [more.yaml]\n"
                              "engine:\n  version: \"0.33.1\"\n")
    run = run_cli("validate", str(path))
    assert ("the GPU code of vllm 0.33.1 has not been read: whether"
            in run.err), run.err


# --- the facts against the wheels ------------------------------------------------------------

def test_the_extraction_reads_what_cuobjdump_lists(tmp_path: Path) -> None:
    """The tool's reader on a library built here by the real nvcc, inside a wheel-shaped
    zip, lists the code NVIDIA's cuobjdump lists."""
    assert NVCC and CUOBJDUMP
    lib = _compile(tmp_path, "common_ops.abi3.so", ["arch=compute_80,code=sm_80",
                                                    "arch=compute_90a,code=sm_90a",
                                                    "arch=compute_90,code=compute_90"])
    wheel = tmp_path / "k.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(lib, "sgl_kernel/sm100/common_ops.abi3.so")
    with zipfile.ZipFile(wheel) as zf:
        row = _tool().row_of(zf, wheel.name, _tool().wanted("sglang"))
    listed = {f"{kind}_{arch}{suffix}" for kind, arch, suffix in _cuobjdump_code(lib)}
    assert row["code"] == {"sgl_kernel/sm100/common_ops.abi3.so": sorted(
        listed, key=lambda c: (c.split("_")[0], int(c.split("_")[1].rstrip("a")), c))}
    assert row["code"]["sgl_kernel/sm100/common_ops.abi3.so"] == ["ptx_90", "sass_80",
                                                                   "sass_90a"]


def test_a_stale_row_is_a_difference() -> None:
    tool = _tool()
    have = builtin_facts("serving/sglang")["kernels"]["0.4.10"]
    assert tool.difference("sglang", "0.4.10", have, {"code": dict(have["code"])}) is None
    stale = {"code": {**have["code"], "sgl_kernel/sm100/common_ops.abi3.so": ["sass_75"]}}
    line = tool.difference("sglang", "0.4.10", have, stale)
    assert line is not None and "sglang 0.4.10: the facts have" in line


def test_every_known_release_has_its_kernels_read() -> None:
    tool = _tool()
    for engine in ("vllm", "sglang"):
        rows = builtin_facts(f"serving/{engine}")["kernels"]
        assert sorted(rows) == sorted(tool.package_versions(engine)), engine


@pytest.mark.network
def test_the_newest_rows_equal_the_wheels_on_pypi() -> None:
    """The newest vLLM release and sglang-kernel version, re-read from PyPI (~90 MiB)."""
    newest = [f"{e}=={_tool().package_versions(e)[-1]}" for e in ("vllm", "sglang")]
    out = subprocess.run([sys.executable, str(TOOL), "--check", *newest], capture_output=True,
                         text=True, check=False, timeout=900)
    assert out.returncode == 0, out.stderr

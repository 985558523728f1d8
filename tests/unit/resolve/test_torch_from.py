"""build.torch_from, the CUDA-major install constraints and the image checks' verdicts.

The checks themselves run on real images in tests/network/test_real_images.py; here their verdicts
are tested on the outputs those images give (recorded from the real vLLM 0.33.0 image), and
the rules on the knowledge as it stands.
"""

from __future__ import annotations

import json

import pytest

from dockergen.knowledge.facts import facts as known_facts
from dockergen.parts import cuda, python, torch
from dockergen.resolve.model import TorchInstall
from tests.conftest import run_cli

KNOWN = known_facts()  # the shipped knowledge


def test_torch_from_the_main_index_renders_no_extra_index() -> None:
    result = run_cli("render", "-q", "h100-fp8", "--set", "build.torch_from=main-index")
    assert result.rc == 0, result.err
    assert "download.pytorch.org" not in result.out
    assert "--extra-index-url" not in result.out and "--index-strategy" not in result.out
    # torch's CUDA is checked by its major: PyPI's wheel reports its own minor
    assert "str(torch.version.cuda).split(\".\")[0] == \"13\"" in result.out
    default = run_cli("render", "-q", "h100-fp8")
    assert "--extra-index-url https://download.pytorch.org/whl/cu130" in default.out
    assert "torch.version.cuda == \"13.0\"" in default.out


def test_torch_from_the_main_index_is_refused_where_pypis_torch_is_another_cuda() -> None:
    # TensorRT-LLM 1.1.0 pins torch 2.9.0, whose PyPI wheels depend on nvidia-*-cu12
    result = run_cli("validate", "h100-trtllm-fp8", "--set", "build.torch_from=main-index")
    assert result.rc == 2, result.err
    assert ("PyPI's torch 2.9.0 wheel is built for CUDA 12 (its CUDA 12 library "
            "dependencies), but cuda.version is 13.0.2 (CUDA 13)") in result.err
    assert "set build.torch_from: pytorch-index" in result.err
    assert run_cli("validate", "h100-trtllm-fp8", "--set", "build.torch_from=main-index",
                   "--set", "build.torch_from=pytorch-index").rc == 0  # the fix is valid


def test_explain_names_the_main_index_as_torchs_source() -> None:
    result = run_cli("explain", "h100-fp8", "--set", "build.torch_from=main-index",
                     "--set", "build.pip_index_url=https://mirror.example.com/simple")
    assert result.rc == 0, result.err
    line = next(x for x in result.out.splitlines() if x.strip().startswith("torch index"))
    assert line.split()[-1] == "https://mirror.example.com/simple"
    assert "uv index strategy" not in result.out  # no extra index: nothing to order


def test_the_cuda_bindings_are_constrained_to_the_cuda_major() -> None:
    assert cuda.major_constraints(KNOWN, "13.0.2") == ("cuda-bindings==13.*", "cuda-python==13.*")
    assert cuda.major_constraints(KNOWN, "12.9.1") == ("cuda-bindings==12.*", "cuda-python==12.*")
    result = run_cli("render", "-q", "h100-fp8")
    assert "COPY constraints.txt /opt/dockergen/constraints.txt" in result.out
    assert "--constraint /opt/dockergen/constraints.txt" in result.out


@pytest.mark.parametrize(("archs", "cc", "runs"), [
    ("sm_75 sm_80 sm_86 sm_90 sm_100 sm_120", "8.9", True),   # sm_86 SASS runs on 8.9
    ("sm_75 sm_80 sm_86 sm_90 sm_100 sm_120", "7.0", False),  # Volta: none
    ("sm_80 sm_90a", "9.0", True),
    ("sm_80 sm_90a", "10.0", False),                           # "a" code: its arch only
    ("sm_80 compute_90", "12.0", True),                        # PTX JIT-compiles forward
    ("sm_80 compute_90", "8.6", True),
    ("sm_90", "8.0", False),
])
def test_the_arch_list_rule(archs: str, cc: str, runs: bool) -> None:
    assert torch.runs_on(archs.split(), cc) is runs


REAL_TORCH = json.dumps({"cuda": "13.0", "archs": "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"})


def test_the_torch_check_verdicts() -> None:
    exact = TorchInstall("2.14.0", "https://download.pytorch.org/whl/cu130", "/opt/venv",
                         "buildkit", cuda="13.0")
    assert torch.arch_check(exact, {"h100": "9.0"}).verify(0, REAL_TORCH)[0]
    ok, detail = torch.arch_check(exact, {"v100": "7.0"}).verify(0, REAL_TORCH)
    assert not ok and detail.startswith("no code for v100 (7.0)")
    wrong = TorchInstall("2.14.0", "x", "/opt/venv", "buildkit", cuda="13.2")
    ok, detail = torch.arch_check(wrong, {"h100": "9.0"}).verify(0, REAL_TORCH)
    assert not ok and "torch is built for CUDA 13.0, expected 13.2" in detail
    main = TorchInstall("2.14.0", "https://pypi.org/simple", "/opt/venv", "buildkit",
                        from_main_index=True, cuda="13")
    assert torch.arch_check(main, {"h100": "9.0"}).verify(0, REAL_TORCH)[0]
    assert not torch.arch_check(main, {"h100": "9.0"}).verify(1, "Traceback ...")[0]


def test_the_record_check_verdicts() -> None:
    check = python.record_check(KNOWN, "/opt/venv")
    clean = json.dumps({"paths": 61102, "shared": 1, "bad": {}})
    assert check.verify(0, clean) == (True, "61102 files, 1 shared by two distributions, "
                                            "each a known case (python.yaml shared_files)")
    # what the real vLLM 0.33.0 closure gave before the CUDA-major constraint
    bad = json.dumps({"paths": 61103, "shared": 29, "bad": {
        f"cuda/bindings/{n}": ["cuda-bindings", "cuda-python"] for n in ("a.so", "b.so")}})
    ok, detail = check.verify(0, bad)
    assert not ok
    assert detail == ("cuda-bindings and cuda-python both own 2 file(s): cuda/bindings/a.so, "
                      "cuda/bindings/b.so")
    # the known shared file is passed to the image's script as a fact
    allowed = json.loads(check.command[-1])
    assert {"path": "build_backend.py",
            "dists": ["flashinfer-python", "torch-c-dlpack-ext"]} in allowed


def test_the_triton_check_verdicts() -> None:
    check = python.triton_check("/opt/venv", "# stub\n")
    assert check.command[2].startswith("# stub\n")
    assert check.verify(0, '{"compiled": "3.8.0", "launch": true}') == (
        True, "triton 3.8.0's launcher (driver.c) compiled and loaded")
    assert not check.verify(1, "RuntimeError: Failed to find C compiler")[0]
    assert check.verify(0, '{"compiled": null}')[0]  # a torch that does not pull triton

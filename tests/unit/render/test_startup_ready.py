"""What a first start needs, decided at render time: FlashInfer's start-up kernels built ahead
of time for the GPU targets, and the venv's bytecode compiled in the build.

The stages are read from the rendered Dockerfile and the resolved model; what they build is
proven on the real images (tests/network/test_real_images.py: the kernels load with JIT
disabled, and a module left out fails; 0 modules compiled at start), and the smoke checks'
verdicts here on the outputs those commands print.
"""

from __future__ import annotations

import json

from dockergen.api import resolve_profile
from dockergen.parts import flashinfer, python
from dockergen.resources import templates_dir
from tests.conftest import ROOT, run_cli

STUB = (templates_dir() / "context" / "driver_stub.py").read_text(encoding="utf-8")


def _dockerfile(profile: str, *options: str) -> str:
    result = run_cli("render", str(ROOT / "profiles" / profile), *options)
    assert result.rc == 0, result.err
    return result.out


def test_the_vllm_image_builds_its_sampler_kernels_for_the_targets() -> None:
    text = _dockerfile("h100-fp8.yaml")
    stage = text.split("FROM engine AS flashinfer-aot", 1)[1].split("\nFROM ", 1)[0]
    assert "FLASHINFER_CUDA_ARCH_LIST=9.0a " in stage
    assert "'cuda-toolkit[nvcc,cccl,cudart,curand,cublas]==13.0.2'" in stage
    assert "sampling=flashinfer.jit.sampling:gen_sampling_module" in stage
    assert "topk" not in stage  # the radix top-k is not reached with vLLM's tensor top-k
    runtime = text.split(" AS runtime", 1)[1]
    assert ("COPY --from=flashinfer-aot /flashinfer-aot/ "
            "/opt/venv/lib/python3.12/site-packages/flashinfer/data/aot/") in runtime


def test_every_target_gpu_gets_its_arch_and_hopper_its_arch_specific_variant() -> None:
    r = resolve_profile(ROOT / "profiles" / "h100-fp8.yaml",
                        ("gpu.targets=[a100, l40s, h100]", "quantization.weights=bf16",
                         "quantization.kv_cache=auto"))
    assert r.flashinfer_aot is not None
    assert r.flashinfer_aot.arch_list == "8.0 8.9 9.0a"


def test_a_release_whose_start_up_kernels_were_not_read_gets_no_stage_and_says_why() -> None:
    r = resolve_profile(ROOT / "profiles" / "h100-fp8.yaml", ("engine.version=0.30.0",
                                                               "python=3.12"))
    assert r.flashinfer_aot is None
    why = [d for d in r.derivations if d.key == "FlashInfer kernels ahead of time"]
    assert len(why) == 1 and why[0].value == "none", why
    assert "JIT-build at first use" in why[0].reason
    assert "flashinfer-aot" not in _dockerfile("h100-fp8.yaml", "--set", "engine.version=0.30.0")


def test_the_context_carries_the_stage_script_and_the_driver_stub() -> None:
    r = resolve_profile(ROOT / "profiles" / "h100-fp8.yaml")
    files = dict(r.context_files)
    assert files["flashinfer_aot.py"] == (templates_dir() / "context" /
                                          "flashinfer_aot.py").read_bytes()
    assert files["driver_stub.py"] == STUB.encode()


def test_bytecode_is_compiled_hash_based_and_kept_in_the_runtime_layers() -> None:
    text = _dockerfile("h100-fp8.yaml")
    assert ("force=True, workers=0, invalidation_mode=py_compile.PycInvalidationMode."
            "CHECKED_HASH)' /opt/venv/lib") in text
    assert "__pycache__" not in text.split(" AS runtime", 1)[1]


def test_the_bytecode_check_fails_on_a_compiled_module_and_passes_on_none() -> None:
    check = python.bytecode_check("/opt/venv", "vllm.entrypoints.cli.serve")
    ok = json.dumps({"code": 0, "compiled": [], "cached": 812, "wrote": [], "error": []})
    assert check.verify(0, ok) == (True, "import vllm.entrypoints.cli.serve: 812 modules "
                                         "from bytecode, 0 compiled")
    bad = json.dumps({"code": 0, "compiled": ["/opt/venv/lib/a.py", "/opt/venv/lib/b.py"],
                      "cached": 3, "wrote": ["/opt/venv/lib/__pycache__/a.pyc"], "error": []})
    passed, detail = check.verify(0, bad)
    assert not passed and detail.startswith("2 module(s) compiled at import"), detail
    failed = json.dumps({"code": 1, "compiled": [], "cached": 0, "wrote": [],
                         "error": ["ModuleNotFoundError: No module named 'vllm'"]})
    assert check.verify(0, failed)[0] is False
    assert check.verify(1, "Traceback (most recent call last):")[0] is False


def test_the_kernel_check_fails_on_a_module_that_would_jit() -> None:
    r = resolve_profile(ROOT / "profiles" / "h100-fp8.yaml")
    assert r.flashinfer_aot is not None
    check = flashinfer.load_check(r.flashinfer_aot, STUB)
    assert check.verify(0, json.dumps({"sampling": "loaded"}))[0] is True
    missing = json.dumps({"sampling": "MissingJITCacheError: JIT compilation is disabled"})
    passed, detail = check.verify(0, missing)
    assert not passed and detail.startswith("sampling: MissingJITCacheError"), detail
    assert check.verify(0, json.dumps({}))[0] is False


def test_the_stage_can_be_left_out_and_explain_says_what_then_compiles_at_start() -> None:
    r = resolve_profile(ROOT / "profiles" / "h100-fp8.yaml", ("build.flashinfer_aot=false",))
    assert r.flashinfer_aot is None
    why = [d for d in r.derivations if d.key == "FlashInfer kernels ahead of time"]
    assert [d.value for d in why] == ["off"]
    assert "JIT-compiles sampling at its first start" in why[0].reason
    assert "flashinfer-aot" not in _dockerfile("h100-fp8.yaml", "--set",
                                               "build.flashinfer_aot=false")

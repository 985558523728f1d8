"""Per-release quantization minimums of vLLM.

tools/vllm_quant.py reads them from the wheels into vllm/quant.json; vllm/facts.yaml holds them.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from dockergen.api import resolve_profile
from dockergen.errors import ProfileError
from dockergen.knowledge.facts import builtin_facts
from dockergen.parts.engines.identity import min_cc
from dockergen.parts.engines.vllm import wheel as vllm_wheel
from tests.support.bad_profile_cases import VALID

ROOT = Path(__file__).resolve().parents[3]
TOOL = ROOT / "tools" / "vllm_quant.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vllm_quant", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _resolve(tmp_path: Path, version: str, *overrides: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "profile.yaml"
    path.write_text(VALID)
    # 0.12.0 and 0.14.1 are CUDA 12 releases; flash-attn is beside the point here
    return resolve_profile(path, [f"engine.version={version}", "cuda.version=12.8.1",
                                  "flash_attn.build=none", *overrides])


# --- the rule reads the minimum of the profile's release -------------------------------

def test_fp8_on_turing_is_an_error_on_vllm_0_12_and_runs_on_0_14(tmp_path: Path) -> None:
    """Fp8Config.get_min_capability() is 80 in 0.12.0 and 75 from 0.14.1 (the wheels)."""
    with pytest.raises(ProfileError) as exc:
        _resolve(tmp_path, "0.12.0", "gpu.targets=[t4]", "quantization.weights=fp8")
    assert [str(p) for p in exc.value.problems if p.severity == "error"] == [
        "--set quantization.weights: quantization.weights: fp8 needs compute capability >= "
        "8.0 on vllm 0.12.0, but gpu.targets includes t4 (7.5); use weights: fp16 or "
        "int8"]
    r = _resolve(tmp_path, "0.14.1", "gpu.targets=[t4]", "quantization.weights=fp8")
    warnings = [str(w) for w in r.warnings]
    assert any("fp8 on t4 (7.5) runs weight-only" in w for w in warnings), warnings


def test_the_fix_only_names_methods_that_run_on_that_release(tmp_path: Path) -> None:
    """On a T4 with 0.12.0, fp8 is not offered as a fix for another method."""
    rows = builtin_facts("serving/vllm")["quantization"]
    assert min_cc(rows["fp8"], "0.12.0") == ("8.0", False)
    assert min_cc(rows["fp8"], "0.14.1") == ("7.5", False)
    with pytest.raises(ProfileError) as exc:
        _resolve(tmp_path, "0.12.0", "gpu.targets=[t4]", "quantization.weights=bf16")
    errors = [p for p in exc.value.problems if p.severity == "error"]
    assert [str(p) for p in errors] == [
        "--set quantization.weights: quantization.weights: bf16 needs compute capability >= "
        "8.0 on vllm, but gpu.targets includes t4 (7.5); use weights: fp16 or int8"]
    assert "fp8" not in {v for e in errors[0].edits for _, v in e.sets}


def test_gptq_runs_on_volta_as_vllms_code_says(tmp_path: Path) -> None:
    """GPTQConfig / AutoGPTQConfig: 60 in every release read (plain GPTQ where Marlin cannot)."""
    rows = builtin_facts("serving/vllm")["quantization"]
    for release in builtin_facts("serving/vllm")["releases"]:
        assert min_cc(rows["gptq"], release) == ("6.0", False)


@pytest.mark.parametrize(("row", "release", "want"), [
    ({"min_cc": "7.5"}, "9.9.9", ("7.5", False)),
    ({"min_cc": {"0.9.1..0.12.0": "8.0", "0.14.1": "7.5"}}, "0.10.2", ("8.0", False)),
    ({"min_cc": {"0.9.1..0.12.0": "8.0", "0.14.1": "7.5"}}, "0.14.1", ("7.5", False)),
    # read from neither span: no floor (a warning), never the neighbour's value
    ({"min_cc": {"0.9.1..0.12.0": "8.0", "0.14.1": "7.5"}}, "0.13.0", (None, False)),
    ({"min_cc": {"0.9.1..0.12.0": "8.0", "0.14.1": "7.5"}}, "0.34.0", (None, False)),
    ({"min_cc": "8.0", "unverified": ["min_cc"]}, "1.0.0", ("8.0", True)),
])
def test_min_cc_spans(row: dict[str, object], release: str,
                      want: tuple[str | None, bool]) -> None:
    assert min_cc(row, release) == want


# --- the facts equal what the script read from the wheels (offline) ---------------------

def test_vllm_yaml_minimums_equal_the_extraction() -> None:
    tool = _tool()
    facts = builtin_facts("serving/vllm")
    read = json.loads(tool.OUTPUT.read_text(encoding="utf-8"))["releases"]
    # every release dockergen knows was read, and nothing else
    assert sorted(read) == sorted(facts["releases"])
    for method in tool.METHODS:
        assert facts["quantization"][method]["min_cc"] == tool.ranges(read, method), method
    for release, row in read.items():
        assert row["src"].startswith(f"VLLM-WHEEL {release} vllm-{release}-"), release
        assert "sha256:" in row["src"]


def test_extraction_output_is_deterministic() -> None:
    tool = _tool()
    text = tool.OUTPUT.read_text(encoding="utf-8")
    assert tool.dump(json.loads(text)) == text


def test_extraction_reads_the_ast_and_refuses_what_it_cannot_read() -> None:
    src = (b"class Fp8Config:\n    @classmethod\n"
           b"    def get_min_capability(cls):\n        return 89\n")
    assert vllm_wheel.min_capability(src, "Fp8Config", "fp8.py") == 89
    assert vllm_wheel.min_capability(src, "Other", "fp8.py") is None
    computed = src.replace(b"return 89", b"return 80 if X else 75")
    with pytest.raises(vllm_wheel.WheelLayoutError, match="not a literal"):
        vllm_wheel.min_capability(computed, "Fp8Config", "fp8.py")
    with pytest.raises(vllm_wheel.WheelLayoutError, match="does not parse"):
        vllm_wheel.min_capability(b"class Fp8Config(:\n", "Fp8Config", "fp8.py")
    # a wheel without any file of a method: no floor is guessed
    with pytest.raises(vllm_wheel.WheelLayoutError, match="none of the files of fp8"):
        vllm_wheel.quant_floors({}, "vllm 9.9.9")


# --- the extraction, re-read from PyPI (CI reaches PyPI) --------------------------------

@pytest.mark.network
def test_extraction_matches_the_wheels_on_pypi() -> None:
    out = subprocess.run([sys.executable, str(TOOL), "--check"], capture_output=True,
                         text=True, check=False, timeout=900)
    assert out.returncode == 0, out.stderr


def test_flashinfer_facts_equal_the_wheels_requirements() -> None:
    """vllm/facts.yaml `flashinfer` rows say what each wheel's Requires-Dist says (0.9.1: none)."""
    tool = _tool()
    facts = builtin_facts("serving/vllm")["flashinfer"]
    read = json.loads(tool.OUTPUT.read_text(encoding="utf-8"))["releases"]
    for release, row in read.items():
        reqs = row["flashinfer"]
        if not reqs:
            assert release not in facts, release
            continue
        fact = facts[release]
        extra = ' ; extra == "flashinfer"' if fact.get("extra_only") else ""
        want = [f"flashinfer-python=={fact['python']}{extra}"]
        if fact["cubin"]:
            want.insert(0, f"flashinfer-cubin=={fact['python']}")
        assert reqs == want, release
    # the audit's finding: from 0.27 on the wheel no longer pulls the precompiled kernels
    assert [v for v, f in facts.items() if f["cubin"]] == ["0.19.1", "0.21.0", "0.24.0"]

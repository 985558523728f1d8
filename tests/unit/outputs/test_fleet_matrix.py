"""Profile matrices: exact expansion (names, order, exclusions), dropped points with the
messages `validate` gives, --strict, and bad matrices reported FILE:LINE:COL."""

from __future__ import annotations

import json
from pathlib import Path

from dockergen.api import resolve_profile
from tests.conftest import PROFILES, run_cli

MX = """\
extends: h100-fp8
name: mx
quantization:
  kv_cache: auto
matrix:
  axes:
    gpu.targets: {t4: [t4], h100: [h100]}
    quantization.weights: [bf16, fp8]
    engine: {vllm: {name: vllm, version: "0.32.0"}, trt: {name: tensorrt-llm, version: "1.1.0"}}
  exclude:
    - {engine: trt, quantization.weights: bf16}
# base.yaml builds no flash-attn; vLLM 0.32.0 (torch 2.13) is the newest whose headers accept
# flash-attn's C++17 (0.33.0 + a flash-attn build is an error of its own)
flash_attn: {build: source}
"""

T4_BF16 = [
    "matrix point mx-t4-bf16-vllm (gpu.targets=t4, quantization.weights=bf16, engine=vllm) "
    "dropped:",
    "  mx.yaml:7:23: gpu.targets: FlashAttention-2 needs compute capability >= 8.0 (Ampere or "
    "newer), but gpu.targets includes t4 (7.5); set flash_attn.build: none",
    "  mx.yaml:8:28: quantization.weights: bf16 needs compute capability >= 8.0 on vllm, but "
    "gpu.targets includes t4 (7.5); use weights: fp16 or int8",
]
T4_FP8 = [
    "matrix point mx-t4-fp8-vllm (gpu.targets=t4, quantization.weights=fp8, engine=vllm) "
    "dropped:",
    "  mx.yaml:7:23: gpu.targets: FlashAttention-2 needs compute capability >= 8.0 (Ampere or "
    "newer), but gpu.targets includes t4 (7.5); set flash_attn.build: none",
    "  mx.yaml:8:34: quantization.weights: fp8 on t4 (7.5) runs weight-only (W8A16 "
    "FP8-Marlin): memory savings, no FP8 speedup (FP8 compute needs compute capability >= "
    "8.9); expected on Ampere; use bf16 for full speed [warning]",
]
T4_FP8_TRT = [
    "matrix point mx-t4-fp8-trt (gpu.targets=t4, quantization.weights=fp8, engine=trt) "
    "dropped:",
    # no weights or KV-cache method of TensorRT-LLM runs on a T4: other hardware is the fix
    "  mx.yaml:4:13: quantization.kv_cache: auto needs compute capability >= 8.0 on "
    "tensorrt-llm, but gpu.targets includes t4 (7.5); target a100 instead of t4, or target "
    "a10 instead of t4",
    "  mx.yaml:7:23: gpu.targets: FlashAttention-2 needs compute capability >= 8.0 (Ampere or "
    "newer), but gpu.targets includes t4 (7.5); set flash_attn.build: none",
    "  mx.yaml:8:34: quantization.weights: fp8 needs compute capability >= 8.9 on "
    "tensorrt-llm, but gpu.targets includes t4 (7.5); target l4 instead of t4, or target "
    "h100 instead of t4",
]


def _mx(tmp_path: Path, text: str = MX) -> Path:
    (tmp_path / "mx.yaml").write_text(text)
    return tmp_path


def test_shipped_fleet_expands_to_exact_variants() -> None:
    result = run_cli("validate", "-q", str(PROFILES / "fleet.yaml"))
    assert result.rc == 0, result.err
    assert result.out == (f"{PROFILES / 'fleet.yaml'}: ok: 5 variants: fleet-a100-bf16, "
                          "fleet-h100-bf16, fleet-h100-fp8, fleet-l40s-bf16, fleet-l40s-fp8 "
                          "(1 excluded)\n")
    assert result.err == ""


def test_a_variant_equals_the_profile_with_the_same_values_set_by_hand(tmp_path: Path) -> None:
    """Expansion is the same as `--set` of the point's values (an independent route)."""
    out = tmp_path / "out"
    assert run_cli("render", "-q", str(PROFILES / "fleet.yaml"), "-o", str(out)).rc == 0
    by_hand = resolve_profile(PROFILES / "fleet.yaml", (
        "matrix=null", "name=fleet-l40s-fp8", "gpu.targets=[l40s]", "quantization.weights=fp8"))
    lock = json.loads((out / "fleet-l40s-fp8" / "dockergen.resolved.json").read_text())
    assert lock["profile_hash"] == by_hand.profile_hash
    assert lock["resolved"] == by_hand.record["resolved"]
    assert sorted(p.name for p in out.iterdir()) == [
        "docker-bake.hcl", "fleet-a100-bf16", "fleet-h100-bf16", "fleet-h100-fp8",
        "fleet-l40s-bf16", "fleet-l40s-fp8"]


def test_invalid_points_are_dropped_with_validate_messages(tmp_path: Path) -> None:
    cwd = _mx(tmp_path)
    result = run_cli("validate", "mx.yaml", cwd=cwd)
    assert result.rc == 0, result.err
    assert result.out == ("mx.yaml: ok: 3 variants: mx-h100-bf16-vllm, mx-h100-fp8-vllm, "
                          "mx-h100-fp8-trt (2 excluded, 3 dropped)\n")
    lines = result.err.splitlines()
    assert lines[:len(T4_BF16 + T4_FP8 + T4_FP8_TRT)] == T4_BF16 + T4_FP8 + T4_FP8_TRT
    # the same problems as validating that point written out by hand
    by_hand = run_cli("validate", "mx.yaml", "--set", "matrix=null", "--set",
                      "gpu.targets=[t4]", "--set", "quantization.weights=bf16", cwd=cwd)
    assert by_hand.rc == 2
    assert [line.split(": ", 1)[1] for line in by_hand.err.splitlines()[:2]] == [
        line.strip().split(": ", 1)[1] for line in T4_BF16[1:]]


def test_strict_makes_a_dropped_point_an_error(tmp_path: Path) -> None:
    cwd = _mx(tmp_path)
    result = run_cli("validate", "--strict", "-q", "mx.yaml", cwd=cwd)
    assert result.rc == 2
    assert result.out == ""
    shown = [line for line in T4_BF16 + T4_FP8 + T4_FP8_TRT  # -q: no warnings
             if not line.endswith("[warning]")]
    assert result.err.splitlines() == shown + ["dockergen: 6 problem(s); nothing was written"]
    render = run_cli("render", "--strict", "-q", "mx.yaml", "-o", "out", cwd=cwd)
    assert render.rc == 2 and not (cwd / "out").exists()


def test_render_writes_only_valid_points_and_one_group(tmp_path: Path) -> None:
    cwd = _mx(tmp_path)
    result = run_cli("render", "-q", "mx.yaml", "-o", "out", cwd=cwd)
    assert result.rc == 0, result.err
    assert sorted(p.name for p in (cwd / "out").iterdir()) == [
        "docker-bake.hcl", "mx-h100-bf16-vllm", "mx-h100-fp8-trt", "mx-h100-fp8-vllm"]
    bake = (cwd / "out" / "docker-bake.hcl").read_text()
    assert ('group "mx" {\n  targets = ["mx-h100-bf16-vllm", "mx-h100-fp8-trt", '
            '"mx-h100-fp8-vllm"]\n}') in bake
    trt = (cwd / "out" / "mx-h100-fp8-trt" / "Dockerfile").read_text()
    assert "tensorrt-llm==1.1.0" in trt and "ENTRYPOINT [\"trtllm-serve\"]" in trt
    stdout = run_cli("render", "mx.yaml", cwd=cwd)
    assert stdout.rc == 64
    assert "mx.yaml is a matrix of 3 variants (mx-h100-bf16-vllm, mx-h100-fp8-vllm, " \
           "mx-h100-fp8-trt); write them all with -o DIR" in stdout.err


def test_bad_matrices_are_reported_with_positions(tmp_path: Path) -> None:
    cwd = _mx(tmp_path, MX.replace("quantization.weights: [bf16, fp8]",
                                   "quantization.weight: [bf16, fp8]").replace(
        "{engine: trt, quantization.weights: bf16}", "{engine: trtllm}"))
    result = run_cli("validate", "mx.yaml", cwd=cwd)
    assert result.rc == 2
    assert result.err.splitlines() == [
        "mx.yaml:8:5: matrix.axes.quantization.weight: no profile field "
        "'quantization.weight' (did you mean 'quantization.weights'?); use a dotted profile "
        "field such as quantization.weights",
        "mx.yaml:11:16: matrix.exclude[0].engine: matches no value of the axis 'engine'; use "
        "an axis name and one of its values or value names",
        "dockergen: 2 problem(s); nothing was written"]
    cwd = _mx(tmp_path, MX.replace("[bf16, fp8]", "[bf16, BF16]"))
    result = run_cli("validate", "mx.yaml", cwd=cwd)
    assert result.err.splitlines()[0] == (
        "mx.yaml:8:34: matrix.axes.quantization.weights: two values are both named 'bf16'; "
        "write the axis as a mapping NAME: VALUE with distinct names")
    cwd = _mx(tmp_path, MX.replace("    gpu.targets:", "    name: [a, b]\n    gpu.targets:"))
    result = run_cli("validate", "mx.yaml", cwd=cwd)
    assert result.err.splitlines()[0] == (
        "mx.yaml:7:5: matrix.axes.name: the variant name is derived from the axes; use a "
        "dotted profile field such as quantization.weights")


def test_commands_that_take_one_image_refuse_a_matrix() -> None:
    for command in (("explain",), ("build", "--dry-run")):
        result = run_cli(*command, str(PROFILES / "fleet.yaml"),
                         env={"DOCKER_HOST": "tcp://127.0.0.1:9"})
        assert result.rc == 2, result.err
        assert result.err.splitlines()[0].endswith(
            "matrix: this profile is a matrix of variants; write them all with `dockergen "
            "render PROFILE -o DIR` (each variant's dockergen.resolved.json holds what it "
            "derived) and build with `docker buildx bake`; `dockergen validate PROFILE` "
            "lists the variants")
    # the fixes it names work (`--set matrix=null`, suggested before, left fleet.yaml
    # without a gpu:)
    assert run_cli("explain", str(PROFILES / "fleet.yaml"), "--set", "matrix=null").rc == 2
    listed = run_cli("validate", str(PROFILES / "fleet.yaml"))
    assert listed.rc == 0 and "5 variants: fleet-a100-bf16" in listed.out, listed.out


def test_a_matrix_of_too_many_points_is_refused_before_expanding(tmp_path: Path) -> None:
    """A 399 x 400 matrix ran validate for more than 10 minutes."""
    labels = ", ".join(f"v{i}: [h100]" for i in range(40))
    lens = ", ".join(str(1024 + i) for i in range(30))
    (tmp_path / "big.yaml").write_text(f"extends: h100-fp8\nname: big\nmatrix:\n  axes:\n"
                                       f"    gpu.targets: {{{labels}}}\n"
                                       f"    serving.max_model_len: [{lens}]\n")
    result = run_cli("validate", "big.yaml", cwd=tmp_path)
    assert result.rc == 2, result.err
    assert result.err.startswith("big.yaml:5:5: matrix.axes: 1200 points (the product of the "
                                 "axes); at most 1024; split the fleet")

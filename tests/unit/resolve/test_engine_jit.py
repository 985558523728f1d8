"""The engine's own start-up JIT: SGLang 0.5.23 compiles kernels with nvcc and c++ when the
server starts, so its image carries the compiler and a cache seeded for the profile's model
and GPUs; the smoke check proves a start finds them with the engine's own switch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dockergen.api import resolve_profile
from dockergen.build.smoke import _no_compilers_check
from dockergen.errors import ProfileError
from dockergen.outputs.dockerfile import render_dockerfile
from dockergen.parts import engine_jit
from tests.conftest import ROOT

SGLANG = ROOT / "profiles" / "h100-sglang-fp8.yaml"
VLLM = ROOT / "profiles" / "h100-fp8.yaml"


def _profile(tmp_path: Path, hf_config: str | None) -> Path:
    """The shipped SGLang profile with another serving.hf_config (None: unset)."""
    (tmp_path / "base.yaml").write_text((ROOT / "profiles" / "base.yaml").read_text())
    text = SGLANG.read_text()
    line = "  hf_config: llama-3-8b\n"
    assert line in text
    path = tmp_path / "p.yaml"
    path.write_text(text.replace(line, f"  hf_config: {hf_config}\n" if hf_config else ""))
    return path


def _kernels(r) -> dict[str, list[object]]:  # type: ignore[no-untyped-def]
    assert r.engine_jit is not None
    return {k["name"]: k["args"] for k in json.loads(r.engine_jit.kernels_json)}


def test_the_sglang_image_carries_the_compiler_and_a_cache_seeded_for_its_model() -> None:
    r = resolve_profile(SGLANG)
    jit = r.engine_jit
    assert jit is not None and jit.archs == ("9.0",)
    # Llama-3-8B: bf16 activations, head_dim 128 NeoX RoPE, online FP8 weights
    assert _kernels(r) == {"activation": ["torch.bfloat16"],
                           "fused_rope": [True, 128, "torch.bfloat16", "torch.bfloat16"],
                           "per_token_quant_fp8": ["torch.bfloat16"]}
    assert jit.toolchain[0] == "cuda-toolkit[nvcc,cccl,cudart]==13.0.2"  # no cuBLAS twice
    assert "g++" in r.runtime.apt
    assert r.runtime.env["CUDA_HOME"] == "/opt/cuda-nvcc/nvidia/cu13"
    assert r.runtime.env["SGLANG_JIT_CACHE_DIR"] == jit.cache_dir
    text = render_dockerfile(r)
    runtime = text[text.index("AS runtime"):]
    assert "COPY --from=jit-toolchain /opt/cuda-nvcc /opt/cuda-nvcc" in runtime
    assert f"chown -R 10001:0 {jit.cache_dir}" in runtime
    # the seed runs in the runtime stage itself: the cache key holds its compilers' output
    assert runtime.index("engine_jit.py seed") < runtime.index("USER 10001:10001")
    assert "FROM engine AS jit-toolchain" in text


def test_without_the_model_the_compiler_ships_and_nothing_is_seeded(tmp_path: Path) -> None:
    r = resolve_profile(_profile(tmp_path, None))
    assert r.engine_jit is not None and r.engine_jit.kernels == ()
    assert "g++" in r.runtime.apt
    why = {d.key: d.reason for d in r.derivations}["engine JIT kernels seeded"]
    assert "set serving.hf_config to seed them" in why
    text = render_dockerfile(r)
    assert "engine_jit.py seed" not in text and "COPY --from=jit-toolchain" in text


def test_kernels_follow_the_profile_and_the_model(tmp_path: Path) -> None:
    assert "per_token_quant_fp8" not in _kernels(resolve_profile(
        SGLANG, ("quantization.weights=bf16",)))
    # --dtype half on a bf16 checkpoint: SGLang's activations are float16
    assert _kernels(resolve_profile(SGLANG, ("quantization.weights=fp16",)))[
        "activation"] == ["torch.float16"]
    # head 96: SGLang runs its fallback RoPE kernel (no JIT); float16 checkpoint
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "hidden_size": 3072, "num_hidden_layers": 4,
        "num_attention_heads": 32, "num_key_value_heads": 8, "torch_dtype": "float16",
        "max_position_embeddings": 8192}))
    profile = _profile(tmp_path, "config.json")
    got = _kernels(resolve_profile(profile))
    assert got == {"activation": ["torch.float16"], "per_token_quant_fp8": ["torch.float16"]}
    # an architecture whose RoPE style dockergen has not read: not guessed
    config.write_text(config.read_text().replace("LlamaForCausalLM", "OtherForCausalLM")
                      .replace('"hidden_size": 3072', '"hidden_size": 4096'))
    r = resolve_profile(profile)
    assert "fused_rope" not in _kernels(r)
    why = {d.key: d.reason for d in r.derivations}["engine JIT kernels seeded"]
    assert "not seeded (dockergen does not know their arguments for this model): fused_rope" \
        in why


def test_the_seed_is_part_of_the_profile_hash(tmp_path: Path) -> None:
    assert (resolve_profile(SGLANG).profile_hash
            != resolve_profile(_profile(tmp_path, None)).profile_hash)


def test_a_model_config_that_cannot_be_read_is_an_error_at_its_field(tmp_path: Path) -> None:
    profile = _profile(tmp_path, "missing.json")
    with pytest.raises(ProfileError) as err:
        resolve_profile(profile)
    assert [p.field for p in err.value.problems] == ["serving.hf_config"]


def test_vllm_has_no_start_up_jit_of_its_own() -> None:
    r = resolve_profile(VLLM)
    assert r.engine_jit is None and "g++" not in r.runtime.apt
    assert "jit-toolchain" not in render_dockerfile(r)


def test_the_no_compilers_check_keeps_g_plus_plus_only_for_the_engine_jit() -> None:
    check = _no_compilers_check(resolve_profile(SGLANG))
    assert check is not None
    probe = check[1][-1]
    assert "g++" not in probe and "c++" not in probe and "nvcc" in probe and "clang" in probe
    vllm = _no_compilers_check(resolve_profile(VLLM))
    assert vllm is not None and "g++" in vllm[1][-1]


@pytest.mark.parametrize(("out", "ok", "said"), [
    ('{"9.0": {"activation": "cached", "fused_rope": "cached", "per_token_quant_fp8": '
     '"cached"}}', True, "3 kernel(s)"),
    ('{"9.0": {"activation": "cached", "fused_rope": "RuntimeError: JIT module '
     "'sgl_fused_rope' has no usable cached build\", \"per_token_quant_fp8\": \"cached\"}}",
     False, "9.0 fused_rope: RuntimeError"),
    ('{"9.0": {"activation": "cached"}}', False, "9.0 fused_rope: not tried"),
    # what the real SGLang image printed after the JSON line on a cache miss
    ('{"9.0": {"activation": "cached", "fused_rope": "RuntimeError: no usable cached '
     'build", "per_token_quant_fp8": "cached"}}\nCannot detect CUDA architecture.',
     False, "9.0 fused_rope: RuntimeError: no usable cached build"),
    ("Traceback (most recent call last):\n  ImportError: no sglang", False, "ImportError"),
])
def test_the_load_check_passes_only_when_every_kernel_is_cached(out: str, ok: bool,
                                                                said: str) -> None:
    jit = resolve_profile(SGLANG).engine_jit
    assert jit is not None
    check = engine_jit.load_check(jit)
    assert "SGLANG_CRASH_ON_JIT_COMPILE" in check.command
    got, detail = check.verify(0, out)
    assert got is ok and said in detail, detail


def test_an_unseeded_jit_cache_is_a_writable_mount_and_a_seeded_one_stays_the_images(
        tmp_path: Path) -> None:
    """On the read-only root of the deploy outputs the engine's first start compiles into
    its JIT cache where the image seeds nothing: that folder gets a mount; a seeded cache is
    only read, and a mount would hide it."""
    import yaml

    from tests.conftest import run_cli

    def mounts(profile: Path) -> tuple[list[str], list[str]]:
        compose = run_cli("deploy", str(profile), "--format", "compose")
        k8s = run_cli("deploy", str(profile), "--format", "k8s")
        assert compose.rc == 0 and k8s.rc == 0, compose.err + k8s.err
        service = next(iter(yaml.safe_load(compose.out)["services"].values()))
        pod = next(d for d in yaml.safe_load_all(k8s.out) if d and d["kind"] == "Deployment")
        container = pod["spec"]["template"]["spec"]["containers"][0]
        return ([t.split(":")[0] for t in service["tmpfs"]],
                [m["mountPath"] for m in container["volumeMounts"]])

    cache = engine_jit.CACHE_DIR
    compose, k8s = mounts(SGLANG)
    assert cache not in compose and cache not in k8s
    compose, k8s = mounts(_profile(tmp_path, None))
    assert cache in compose and cache in k8s

"""Plan agrees with each engine's start-up check of max_model_len against the model's own
limit, and its "largest max_model_len" is the largest that fits, not the one asked for.

The limits are worked out by hand from the engines' source (the real wheels):
vLLM 0.33.0 ``vllm/transformers_utils/model_arch_config_convertor.py``
``derive_max_model_len_and_key`` (the smallest of its length keys; ``model_max_length``
wins) and ``vllm/config/model.py`` ``_get_and_verify_max_len`` (x the rope ``factor`` except
for su/longrope/llama3/yarn/deepseek_yarn/deepseek_llama_scaling and Gemma 3; a larger
max_model_len is a ValueError unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN``);
SGLang 0.5.23 ``sglang/srt/utils/hf_transformers/common.py`` ``get_context_length`` (the
first of its keys, x the factor unless the rope parameters carry
``original_max_position_embeddings`` or are llama3) and ``srt/configs/model_config.py``
``_derive_context_length`` (a larger context length is a ValueError unless
``SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dockergen.errors import Location, ProfileError
from dockergen.outputs.plan import PlanInputs, check_fit, load_shape, make_plan, shape_from_config
from tests.conftest import PROFILES, run_cli
from tests.unit.outputs.test_plan import LLAMA3_8B

LOC = Location("p.yaml", 1, 1)


def _inputs(engine: str = "vllm", max_model_len: int | None = 8192,
            env: tuple[tuple[str, str], ...] = ()) -> PlanInputs:
    return PlanInputs(engine=engine, gpu_names=("h100",), gpu_mem_gib=80.0, weights="auto",
                      kv_cache="auto", tensor_parallel=1, max_model_len=max_model_len,
                      gpu_memory_utilization=0.9, max_num_batched_tokens=None, env=env)


def _limit(cfg: dict[str, object], engine: str) -> int:
    plan = make_plan(shape_from_config({**LLAMA3_8B, **cfg}, "m", "cfg"), _inputs(engine))
    return plan.model_max_len


@pytest.mark.parametrize(("cfg", "vllm", "sglang"), [
    # plain: max_position_embeddings
    ({}, 8192, 8192),
    # linear scaling multiplies in both (transformers moves rope_scaling to rope_parameters)
    ({"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 4.0}},
     16384, 16384),
    # llama3 and yarn: max_position_embeddings is already the scaled length in both
    ({"max_position_embeddings": 131072,
      "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, 131072, 131072),
    ({"max_position_embeddings": 32768, "rope_parameters": {"rope_type": "yarn", "factor": 4.0}},
     32768, 32768),
    # deepseek_yarn without original_max_position_embeddings: vLLM skips the factor,
    # SGLang applies it
    ({"max_position_embeddings": 4096,
      "rope_scaling": {"rope_type": "deepseek_yarn", "factor": 2}}, 4096, 8192),
    # Gemma 3's length is already scaled for vLLM, not for SGLang
    ({"model_type": "gemma3_text", "max_position_embeddings": 4096,
      "rope_scaling": {"rope_type": "linear", "factor": 8.0}}, 4096, 32768),
    # rope parameters per layer type: vLLM reads each set, SGLang's top level has no factor
    ({"max_position_embeddings": 4096, "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 2.0},
        "sliding_attention": {"rope_type": "default"}}}, 8192, 4096),
    # vLLM takes the smallest key; SGLang the first of its own list (n_positions is not in it)
    ({"max_position_embeddings": 4096, "n_positions": 2048}, 2048, 4096),
    ({"max_position_embeddings": 8192, "seq_length": 4096}, 4096, 4096),
])
def test_each_engine_derives_the_model_limit_as_its_source_does(
        cfg: dict[str, object], vllm: int, sglang: int) -> None:
    assert _limit(cfg, "vllm") == vllm
    assert _limit(cfg, "sglang") == sglang


def test_a_max_model_len_beyond_the_model_is_refused_as_the_engine_does() -> None:
    m = shape_from_config({**LLAMA3_8B, "max_position_embeddings": 4096,
                           "rope_scaling": {"type": "linear", "factor": 2.0}}, "m", "cfg")
    check_fit(make_plan(m, _inputs(max_model_len=8192)), LOC)  # 4096 x 2: accepted
    with pytest.raises(ProfileError) as err:
        check_fit(make_plan(m, _inputs(max_model_len=8193)), LOC)
    text = str(err.value)
    assert "serving.max_model_len" in text
    assert "8193 is more than the model's own limit 8192" in text
    assert "max_position_embeddings=4096 x rope factor 2" in text
    assert "vllm/config/model.py:2657" in text  # the engine source line it mirrors
    assert "set serving.max_model_len to 8192 or less" in text
    # the engine's own escape hatch is honoured as the engine parses it
    check_fit(make_plan(m, _inputs(max_model_len=8193,
                                   env=(("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "True"),))), LOC)
    with pytest.raises(ProfileError):
        check_fit(make_plan(m, _inputs(max_model_len=8193,
                                       env=(("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "yes"),))), LOC)
    check_fit(make_plan(m, _inputs("sglang", 8193, (
        ("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "yes"),))), LOC)


def test_largest_max_model_len_is_the_largest_that_fits_not_the_request() -> None:
    # memory allows far more than llama-3-8b's 8192 positions: the model's limit bounds it
    small = make_plan(load_shape("llama-3-8b"), _inputs(max_model_len=1024))
    assert small.fits and small.largest_max_model_len == 8192
    # llama-3.1-70b bf16 does not fit one H100 at all; fp8 weights leave room for 28112
    # tokens (test_plan's hand count), whatever max_model_len the profile asks for
    m = load_shape("llama-3.1-70b")
    for asked in (4096, 28112, 131072):
        plan = make_plan(m, PlanInputs(
            engine="vllm", gpu_names=("h100",), gpu_mem_gib=80.0, weights="fp8",
            kv_cache="fp8", tensor_parallel=1, max_model_len=asked,
            gpu_memory_utilization=0.9, max_num_batched_tokens=8192))
        assert plan.largest_max_model_len == 28112, asked


def test_plan_and_validate_refuse_the_length_with_file_line_and_fix(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA3_8B))  # 8192 positions
    profile = tmp_path / "long.yaml"
    profile.write_text("extends: h100-fp8\nname: long\nserving:\n  hf_config: config.json\n"
                       "  max_model_len: 16384\n  max_num_batched_tokens: 16384\n")
    for cmd in ("validate", "plan"):
        bad = run_cli(cmd, profile.name, cwd=tmp_path)
        assert bad.rc == 2, (cmd, bad.out, bad.err)
        assert "Traceback" not in bad.err
        assert ("long.yaml:5:18: serving.max_model_len: max_model_len 16384 is more than "
                "the model's own limit 8192") in bad.err, bad.err
        assert "set serving.max_model_len to 8192 or less" in bad.err
    assert run_cli("validate", profile.name, "--set", "serving.max_model_len=8192",
                   cwd=tmp_path).rc == 0
    # the engine's escape hatch in the profile's own environment is honoured
    ok = run_cli("validate", profile.name, "--set",
                 'serving.env.VLLM_ALLOW_LONG_MAX_MODEL_LEN="1"', cwd=tmp_path)
    assert ok.rc == 0, ok.err
    # the shipped profile planned with a built-in model keeps working
    assert run_cli("plan", str(PROFILES / "h100-fp8.yaml"), "--model-config",
                   "llama-3-8b").rc == 0


@pytest.mark.parametrize("rope", [
    "[4]", '{"rope_type": 7}', '{"type": "linear", "factor": "4"}',
    '{"type": "linear", "factor": -1}', '{"type": "linear", "factor": 1e400}'])
def test_bad_rope_parameters_are_clear_config_errors(tmp_path: Path, rope: str) -> None:
    cfg = json.dumps(LLAMA3_8B)[:-1] + f', "rope_scaling": {rope}}}'
    (tmp_path / "config.json").write_text(cfg)
    out = run_cli("plan", str(PROFILES / "h100-fp8.yaml"), "--model-config",
                  str(tmp_path / "config.json"))
    assert out.rc == 2, out.err
    assert "Traceback" not in out.err
    assert "rope_scaling" in out.err and "published config.json" in out.err


def test_the_config_reader_keeps_every_length_key_an_engine_reads() -> None:
    from dockergen.knowledge.models import LENGTH_KEYS
    from dockergen.parts.engines import sglang, vllm

    assert set(vllm.LENGTH_KEYS) | set(sglang.CONTEXT_LENGTH_KEYS) == set(LENGTH_KEYS)


@pytest.mark.parametrize(("cfg", "trtllm"), [
    ({}, 8192),
    # linear scaling multiplies; llama3, yarn, su and longrope are already scaled
    ({"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2.5}},
     10240),
    ({"max_position_embeddings": 131072,
      "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, 131072),
    ({"max_position_embeddings": 32768, "rope_parameters": {"rope_type": "yarn", "factor": 4.0}},
     32768),
    # deepseek_yarn is not in TensorRT-LLM's list: the factor applies (vLLM skips it)
    ({"max_position_embeddings": 4096,
      "rope_scaling": {"rope_type": "deepseek_yarn", "factor": 2}}, 8192),
    # only max_position_embeddings counts (seq_length is vLLM's and SGLang's)
    ({"max_position_embeddings": 8192, "seq_length": 4096}, 8192),
    # nested sets: the top-level dict has no type and no factor
    ({"max_position_embeddings": 4096, "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 2.0},
        "sliding_attention": {"rope_type": "default"}}}, 4096),
])
def test_tensorrt_llm_derives_the_model_limit_as_its_source_does(
        cfg: dict[str, object], trtllm: int) -> None:
    """TensorRT-LLM's PyTorch backend: DecoderModelForCausalLM.infer_max_seq_len."""
    assert _limit(cfg, "tensorrt-llm") == trtllm


def test_tensorrt_llm_lowers_a_longer_length_so_plan_refuses_it_naming_that() -> None:
    """TensorRT-LLM does not stop on a max_seq_len beyond the model: it serves the shorter
    one (PyTorchModelEngine._init_max_seq_len). Before, plan took any length for it."""
    m = shape_from_config({**LLAMA3_8B, "max_position_embeddings": 4096}, "m", "cfg")
    check_fit(make_plan(m, _inputs("tensorrt-llm", 4096)), LOC)
    with pytest.raises(ProfileError) as err:
        check_fit(make_plan(m, _inputs("tensorrt-llm", 8192)), LOC)
    text = str(err.value)
    assert "8192 is more than the model's own limit 4096" in text, text
    assert ("tensorrt-llm does not refuse it but starts with max_seq_len 4096 instead (a "
            "warning in its log), so the length the profile asks for is never served") in text
    assert "PyTorchModelEngine._init_max_seq_len" in text
    assert "set serving.max_model_len to 4096 or less" in text

"""`dockergen plan` and validate's capacity check: hand-checked numbers.

Every expected number is worked out by hand in the test from the config values, with the
per-token formula of vLLM's own source (vllm 0.33.0 wheel, vllm/v1/kv_cache_interface.py):
``AttentionSpec.page_size_bytes = num_heads x block_size x (head_size + head_size_v) x
dtype_size`` per layer; ``MLAAttentionSpec`` has one latent head of ``kv_lora_rank +
qk_rope_head_dim`` and ``head_size_v = 0``; ``SlidingWindowSpec.
max_admission_blocks_per_request`` = cdiv(min(window - 1 + batched, max_len), 16) + 1.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from dockergen.outputs.plan import (
    GIB,
    PlanError,
    PlanInputs,
    count_params,
    kv_bytes_per_token_layer,
    load_shape,
    make_plan,
    safetensors_bytes,
    shape_from_config,
)
from tests.conftest import PROFILES, Run, run_cli

LLAMA3_8B = {"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
             "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
             "max_position_embeddings": 8192, "tie_word_embeddings": False,
             "torch_dtype": "bfloat16"}
DEEPSEEK_V3 = {"num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
               "num_key_value_heads": 128, "intermediate_size": 18432,
               "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
               "first_k_dense_replace": 3, "q_lora_rank": 1536, "kv_lora_rank": 512,
               "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
               "vocab_size": 129280, "max_position_embeddings": 163840,
               "torch_dtype": "bfloat16"}
# Gemma-style: head_dim from the config (96, not hidden/heads = 64), every 6th layer global.
GEMMA_STYLE = {"num_hidden_layers": 12, "hidden_size": 512, "num_attention_heads": 8,
               "num_key_value_heads": 4, "head_dim": 96, "sliding_window": 512,
               "sliding_window_pattern": 6, "intermediate_size": 2048, "vocab_size": 1000,
               "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}


def _inputs(**kw: object) -> PlanInputs:
    base: dict[str, object] = dict(engine="vllm", gpu_names=("h100",), gpu_mem_gib=80.0,
                                   weights="auto", kv_cache="auto", tensor_parallel=1,
                                   max_model_len=8192, gpu_memory_utilization=0.9,
                                   max_num_batched_tokens=8192)
    base.update(kw)
    return PlanInputs(**base)  # type: ignore[arg-type]


def test_llama3_8b_gqa_per_token() -> None:
    m = shape_from_config(LLAMA3_8B, "llama", "test")
    assert m.attention == "gqa" and m.head_dim == 128  # 4096 / 32
    # 2 (K and V) x 32 layers x 8 kv heads x 128 head_dim x 2 bytes = 131072 = 128 KiB
    assert kv_bytes_per_token_layer(m, 2) * m.layers == 2 * 32 * 8 * 128 * 2 == 128 * 1024
    # fp8 KV cache: 1 byte -> 64 KiB
    assert kv_bytes_per_token_layer(m, 1) * m.layers == 64 * 1024
    # TP=2: each rank holds 4 of the 8 KV heads (ModelConfig.get_num_kv_heads)
    assert kv_bytes_per_token_layer(m, 2, tp=2) * m.layers == 64 * 1024
    # TP=16 > 8 KV heads: one replicated head per rank, max(1, 8 // 16)
    assert kv_bytes_per_token_layer(m, 2, tp=16) * m.layers == 2 * 32 * 1 * 128 * 2


def test_llama_parameter_counts_equal_the_model_cards() -> None:
    # embed + untied head: 2 x 128256 x 4096; per layer: q,o 4096^2 each, k,v 4096 x 1024
    # each, MLP 3 x 4096 x 14336, two norms of 4096; plus the final norm.
    per_layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    expected = 2 * 128256 * 4096 + 32 * per_layer + 4096
    assert expected == 8_030_261_248  # model card: 8.03B
    assert count_params(shape_from_config(LLAMA3_8B, "llama", "t")) == expected
    assert count_params(load_shape("llama-3.1-70b")) == 70_553_706_496  # card: 70.6B


def test_deepseek_v3_mla_per_token_has_no_factor_two() -> None:
    m = shape_from_config(DEEPSEEK_V3, "dsv3", "test")
    assert m.attention == "mla"
    # (kv_lora_rank 512 + qk_rope_head_dim 64) x 61 layers x 2 bytes = 70272
    assert kv_bytes_per_token_layer(m, 2) * m.layers == (512 + 64) * 61 * 2 == 70272
    assert kv_bytes_per_token_layer(m, 1) * m.layers == 35136  # fp8
    # the latent is replicated on every TP rank: same bytes per GPU at TP=8
    assert kv_bytes_per_token_layer(m, 2, tp=8) * m.layers == 70272
    # the shapes give the model card's 671B parameters (MTP module excluded)
    assert abs(count_params(m) - 671e9) / 671e9 < 0.001


# src: the models' published config.json on Hugging Face (mistralai/Mixtral-8x7B-v0.1,
# Qwen/Qwen3-30B-A3B, Qwen/Qwen2-57B-A14B), the fields the plan reads
MIXTRAL_8X7B = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000,
                "num_local_experts": 8, "num_experts_per_tok": 2,
                "tie_word_embeddings": False}
QWEN3_30B_A3B = {"hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32,
                 "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144,
                 "moe_intermediate_size": 768, "num_experts": 128, "vocab_size": 151936,
                 "decoder_sparse_step": 1, "mlp_only_layers": [],
                 "tie_word_embeddings": False}
QWEN2_57B_A14B = {"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28,
                  "num_key_value_heads": 4, "intermediate_size": 18944,
                  "moe_intermediate_size": 2560, "shared_expert_intermediate_size": 20480,
                  "num_experts": 64, "vocab_size": 151936, "decoder_sparse_step": 1,
                  "mlp_only_layers": [], "tie_word_embeddings": False}


def test_moe_experts_are_counted_for_every_config_family() -> None:
    """Mixtral's experts (no moe_intermediate_size) were counted 0 wide: 1.6B, not 46.7B;
    Qwen-MoE's num_experts was not read at all."""
    assert count_params(shape_from_config(MIXTRAL_8X7B, "mixtral", "t")) == 46_702_792_704
    qwen3 = count_params(shape_from_config(QWEN3_30B_A3B, "qwen3-moe", "t"))
    assert abs(qwen3 - 30_532_122_624) / 30_532_122_624 < 1e-6  # q/k norms not counted
    qwen2 = count_params(shape_from_config(QWEN2_57B_A14B, "qwen2-moe", "t"))
    assert abs(qwen2 - 57.4e9) / 57.4e9 < 0.002  # the card's 57.4B (q/k/v biases not counted)
    # every other layer dense (decoder_sparse_step 2: layers 0, 2, ...) and layer 1 listed
    half = count_params(shape_from_config({**QWEN3_30B_A3B, "decoder_sparse_step": 2,
                                           "mlp_only_layers": [1]}, "q", "t"))
    dense = 3 * 2048 * 6144
    moe = 3 * 2048 * 768 * 128 + 2048 * 128
    assert qwen3 - half == 25 * (moe - dense)


def test_gemma_style_sliding_window_only_global_layers_grow() -> None:
    m = shape_from_config(GEMMA_STYLE, "gemma-ish", "test")
    assert m.attention == "hybrid-sliding-window"
    assert m.head_dim == 96 and m.sliding_layers == 10  # layers 6 and 12 are global
    per_layer = 4 * (96 + 96) * 2  # 1536 bytes per token and layer
    plan = make_plan(m, _inputs(max_num_batched_tokens=1024, tensor_parallel=1))
    assert plan.kv_bytes_per_token == 12 * per_layer == 18432
    assert plan.kv_bytes_per_token_per_gpu == 2 * per_layer == 3072  # growing
    assert plan.sliding_bytes_per_token_per_gpu == 10 * per_layer == 15360  # bounded
    # one 8192-token request: 8192 x 3072 for the global layers, and for the sliding
    # layers (cdiv(min(512 - 1 + 1024, 8192), 16) + 1) = 97 blocks x 16 x 15360
    assert plan.bytes_per_request_per_gpu == 8192 * 3072 + 97 * 16 * 15360 == 49_004_544
    # the same model described with layer_types
    types = ["sliding_attention"] * 5 + ["full_attention"]
    m2 = shape_from_config({**GEMMA_STYLE, "sliding_window_pattern": None,
                            "layer_types": types * 2}, "gemma-ish", "test")
    assert m2.sliding_layers == 10
    # Qwen2-style: a window in the config but use_sliding_window false means none
    m3 = shape_from_config({**LLAMA3_8B, "sliding_window": 4096,
                            "use_sliding_window": False}, "q", "t")
    assert m3.sliding_layers == 0


def test_h100_fp8_llama3_8b_budget_tokens_and_concurrency() -> None:
    m = shape_from_config(LLAMA3_8B, "llama", "test")
    plan = make_plan(m, _inputs(weights="fp8", kv_cache="fp8"))
    weights = 8_030_261_248  # fp8: 1 byte per parameter
    budget = int(80 * GIB * 0.9) - weights - 2 * GIB  # vLLM: total x util - weights - overhead
    assert plan.weight_bytes_per_gpu == weights
    assert plan.kv_budget_bytes_per_gpu == budget == 67_131_666_432
    assert plan.tokens_per_gpu == budget // 65536 == 1_024_347
    assert plan.max_concurrency == round(budget / (8192 * 65536), 2) == 125.04
    assert plan.fits


def test_misfit_suggests_the_largest_len_and_the_smallest_tp() -> None:
    m = load_shape("llama-3.1-70b")
    plan = make_plan(m, _inputs(weights="fp8", kv_cache="fp8", max_model_len=131072))
    assert not plan.fits
    # budget = 72 GiB - 70553706496 - 2 GiB; 160 KiB per token (2x80x8x128x1)
    budget = int(80 * GIB * 0.9) - 70_553_706_496 - 2 * GIB
    assert plan.largest_max_model_len == budget // (160 * 1024) // 16 * 16 == 28112
    assert plan.smallest_tensor_parallel == 2
    assert make_plan(m, _inputs(weights="fp8", kv_cache="fp8", max_model_len=28112)).fits
    assert make_plan(m, _inputs(weights="fp8", kv_cache="fp8", max_model_len=131072,
                                tensor_parallel=2)).fits


def test_plan_cli_rejects_with_a_valid_fix() -> None:
    args = ("plan", str(PROFILES / "h100-fp8.yaml"), "--model-config", "llama-3.1-70b")
    bad = run_cli(*args, "--set", "serving.max_model_len=131072")
    assert bad.rc == 2, bad.err
    assert "Traceback" not in bad.err
    assert "serving.max_model_len: max_model_len 131072 does not fit" in bad.err
    assert ("set serving.max_model_len to 28112 or less or set "
            "serving.tensor_parallel_size to 2") in bad.err
    # the fixes themselves are valid
    assert run_cli(*args, "--set", "serving.max_model_len=28112").rc == 0
    fixed = run_cli(*args, "--set", "serving.max_model_len=131072",
                    "--set", "serving.tensor_parallel_size=2", "--json")
    assert fixed.rc == 0, fixed.err
    assert json.loads(fixed.out)["fits"] is True


def test_plan_table_and_json() -> None:
    table = run_cli("plan", str(PROFILES / "h100-fp8.yaml"), "--model-config", "llama-3-8b")
    assert table.rc == 0, table.err
    assert "64.00 KiB (fp8; 2 x 32 layers x 8 kv_heads x 128 head_dim x 1 B)" in table.out
    assert "125.04x" in table.out
    data = json.loads(run_cli("plan", str(PROFILES / "h100-fp8.yaml"), "--model-config",
                              "llama-3-8b", "--json").out)
    assert data["kv_bytes_per_token"] == 65536 and data["tokens_per_gpu"] == 1_024_347


def _safetensors(path: Path, tensors: dict[str, tuple[str, list[int], int]]) -> None:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset,
                                                                         offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)


def test_weights_exact_from_safetensors_headers(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(LLAMA3_8B))
    # BF16 [2, 3] = 12 bytes, F32 [4] = 16 bytes, in two shards; one more in shard 2
    _safetensors(model / "model-00001-of-00002.safetensors",
                 {"a": ("BF16", [2, 3], 12), "b": ("F32", [4], 16)})
    _safetensors(model / "model-00002-of-00002.safetensors", {"c": ("F8_E4M3", [5], 5)})
    assert safetensors_bytes(model) == 33
    out = run_cli("plan", str(PROFILES / "h100-fp8.yaml"), "--model-dir", str(model), "--json")
    assert out.rc == 0, out.err
    data = json.loads(out.out)
    assert data["weight_bytes_total"] == 33
    assert data["weight_bytes_source"].startswith("exact, from the safetensors headers")
    # a truncated shard is a clear error, not a traceback
    (model / "model-00002-of-00002.safetensors").write_bytes(b"\x05")
    broken = run_cli("plan", str(PROFILES / "h100-fp8.yaml"), "--model-dir", str(model))
    assert broken.rc == 2 and "not a safetensors file" in broken.err
    assert "Traceback" not in broken.err


def test_unreadable_config_is_a_clear_error(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text("{not json")
    with pytest.raises(PlanError, match="not a readable JSON config"):
        load_shape(str(cfg))
    with pytest.raises(PlanError, match="num_hidden_layers missing"):
        shape_from_config({"hidden_size": 1}, "x", "x.json")


def test_validate_runs_the_capacity_check_when_the_profile_names_its_model(
        tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA3_8B, "num_hidden_layers": 80,
                                                      "hidden_size": 8192,
                                                      "num_attention_heads": 64,
                                                      "intermediate_size": 28672,
                                                      # Llama 3.1's 128K positions: the
                                                      # length is the model's, memory not
                                                      "max_position_embeddings": 131072}))
    profile = tmp_path / "big.yaml"
    profile.write_text("extends: h100-fp8\nname: big\nserving:\n  hf_config: config.json\n"
                       "  max_model_len: 131072\n")
    # run beside the profile: the message names it as given, wherever the tests run from
    bad = run_cli("validate", profile.name, cwd=tmp_path)
    assert bad.rc == 2, bad.out + bad.err
    assert ("big.yaml:5:18: serving.max_model_len: max_model_len 131072 does not fit"
            in bad.err)
    assert "set serving.max_model_len to 28112 or less" in bad.err
    ok = run_cli("validate", str(profile), "--set", "serving.max_model_len=28112")
    assert ok.rc == 0, ok.err
    # without serving.hf_config validate does not plan (shipped profiles stay valid)
    assert run_cli("validate", str(PROFILES / "h100-fp8.yaml")).rc == 0


def test_plan_without_a_model_says_how_to_name_one() -> None:
    out = run_cli("plan", str(PROFILES / "h100-fp8.yaml"))
    assert out.rc == 2 and "Traceback" not in out.err
    assert "give --model-config" in out.err and "llama-3-8b" in out.err
    assert "serving.hf_config" in out.err


def test_validate_names_a_missing_hf_config_at_its_line(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text("extends: h100-fp8\nname: p\nserving:\n  hf_config: nope.json\n")
    out = run_cli("validate", profile.name, cwd=tmp_path)
    assert out.rc == 2 and "Traceback" not in out.err
    line = next(x for x in out.err.splitlines() if x.startswith("p.yaml:4:14: "))
    assert line.startswith("p.yaml:4:14: serving.hf_config: ")
    assert "nope.json: no such file" in line


def test_sglang_budget_is_the_static_fraction_minus_weights() -> None:
    m = shape_from_config(LLAMA3_8B, "llama", "test")
    plan = make_plan(m, _inputs(engine="sglang", weights="fp8", kv_cache="fp8",
                                gpu_memory_utilization=0.85))
    # mem_fraction_static covers weights + KV pool; activations live outside it
    assert plan.kv_budget_bytes_per_gpu == int(80 * GIB * 0.85) - 8_030_261_248
    unset = make_plan(m, _inputs(engine="sglang", weights="fp8", kv_cache="fp8",
                                 gpu_memory_utilization=None))
    # unset: the 2 GiB overhead estimate is what stays outside the static pool
    assert abs(unset.kv_budget_bytes_per_gpu - (78 * GIB - 8_030_261_248)) < 80 * GIB * 1e-4


# --- bad input: a clear error (file, key, value, fix) and its exit code, never a traceback ---

H100 = str(PROFILES / "h100-fp8.yaml")


def _refused(out: Run, rc: int, *parts: str) -> None:
    """The command failed with ``rc``, said every part, printed no plan and no traceback."""
    assert out.rc == rc, out.out + out.err
    assert "Traceback" not in out.err
    assert out.out == ""
    for part in parts:
        assert part in out.err, out.err


def test_plan_rejects_a_non_finite_overhead_as_usage() -> None:
    # click.FloatRange lets NaN through; int(NaN) crashed the plan with exit 1
    out = run_cli("plan", H100, "--model-config", "llama-3-8b", "--overhead-gib", "nan")
    _refused(out, 64, "--overhead-gib", "nan is not a number of GiB", "from 0 to 1024")
    assert run_cli("plan", H100, "--model-config", "llama-3-8b", "--overhead-gib", "2").rc == 0


def test_plan_rejects_an_empty_model_config_as_usage() -> None:
    # Path("") is ".": the message named the working directory instead of the option
    out = run_cli("plan", H100, "--model-config", "")
    _refused(out, 64, "--model-config is empty", "llama-3-8b")
    assert "'.'" not in out.err


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("num_attention_heads", 0, "num_attention_heads: expected a whole number >= 1, got 0; "
                               "set num_attention_heads to the model's own value"),
    ("num_hidden_layers", 0, "num_hidden_layers: expected a whole number >= 1, got 0"),
    ("num_key_value_heads", 0, "num_key_value_heads: expected a whole number >= 1, got 0"),
    ("head_dim", "x", 'head_dim: expected a whole number >= 1, got "x"'),
    ("q_lora_rank", "x", 'q_lora_rank: expected a whole number >= 0, got "x"'),
    ("sliding_window", "x", 'sliding_window: expected null (no window) or a whole number of '
                            'tokens >= 1, got "x"; set sliding_window to the model\'s window'),
    ("sliding_window", -1, "sliding_window: expected null (no window) or a whole number of "
                           "tokens >= 1, got -1"),
    ("hidden_size", 4, "hidden_size 4 is not divisible by num_attention_heads 32 and head_dim "
                       "is not given; set hidden_size to a multiple of 32 (e.g. 32), or "
                       "head_dim"),
    ("layer_types", ["sliding_attention"] * 3, "layer_types: 3 entries for num_hidden_layers "
                                               "32; give one entry per layer"),
    ("layer_types", ["sliding_attention"] * 32, "layer_types: 32 sliding_attention layers but "
                                                "no sliding_window; set sliding_window"),
], ids=["heads-0", "layers-0", "kv-heads-0", "head-dim-text", "q-lora-text", "window-text",
        "window-negative", "head-dim-0", "layer-types-count", "sliding-without-window"])
def test_config_numbers_are_checked_in_plan_and_validate(tmp_path: Path, key: str,
                                                         value: object, expected: str) -> None:
    # before: ZeroDivisionError / ValueError tracebacks (exit 1), or a plan of 0 layers or
    # 0 KV heads that "fits" (exit 0)
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({**LLAMA3_8B, key: value}))
    _refused(run_cli("plan", H100, "--model-config", str(cfg)), 2, f"{cfg}: {expected}")
    _refused(run_cli("validate", H100, "--set", f"serving.hf_config={cfg}"), 2,
             f"serving.hf_config: {cfg}: {expected}")


def test_config_nulls_and_a_zero_window_mean_unset() -> None:
    # null is "not set" in HF configs (head_dim, q_lora_rank, sliding_window): the defaults
    m = shape_from_config({**LLAMA3_8B, "head_dim": None, "num_key_value_heads": None,
                           "sliding_window": None, "q_lora_rank": None}, "x", "x.json")
    assert (m.head_dim, m.kv_heads, m.sliding_window, m.q_lora_rank) == (128, 32, 0, 0)
    assert shape_from_config({**LLAMA3_8B, "sliding_window": 0}, "x", "x").attention == "gqa"


def _header(path: Path, header: object) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)


@pytest.mark.parametrize(("header", "expected"), [
    ([1], "not a safetensors file: the header is a JSON list, not an object of tensors"),
    ({"w": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 1e400]}},
     "tensor 'w': data_offsets [0, Infinity]: expected [begin, end]"),
    ({"w": {"dtype": "BF16", "shape": [1], "data_offsets": [10, 0]}},
     "tensor 'w': data_offsets [10, 0]: expected [begin, end], whole numbers with "
     "0 <= begin <= end"),
    ({"w": {"dtype": "BF16", "shape": [1]}}, "tensor 'w': data_offsets null"),
    ({"w": [0, 2]}, "tensor 'w': expected {dtype, shape, data_offsets}, got [0, 2]"),
    ({"w": {"dtype": "BF16", "shape": [-1], "data_offsets": [0, 2]}},
     "tensor 'w': expected {dtype, shape, data_offsets}"),
    ("[" * 100_000, "not a safetensors file"),  # nesting past Python's recursion limit
], ids=["list", "float-offset", "end-before-begin", "no-offsets", "entry-not-object",
        "negative-dim", "deep-nesting"])
def test_safetensors_headers_are_checked(tmp_path: Path, header: object,
                                         expected: str) -> None:
    # before: AttributeError / OverflowError tracebacks, or "weights -10 B ... fits yes"
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(LLAMA3_8B))
    shard = model / "model.safetensors"
    if isinstance(header, str):
        shard.write_bytes(struct.pack("<Q", len(header)) + header.encode())
    else:
        _header(shard, header)
    _refused(run_cli("plan", H100, "--model-dir", str(model)), 2, f"{shard}: {expected}",
             "re-download the checkpoint")


def test_tensor_parallel_must_divide_the_attention_heads(tmp_path: Path) -> None:
    # vLLM: "Total number of attention heads (32) must be divisible by tensor parallel
    # size (3)."; the plan said "fits yes"
    bad = run_cli("plan", H100, "--model-config", "llama-3-8b",
                  "--set", "serving.tensor_parallel_size=3")
    _refused(bad, 2, "serving.tensor_parallel_size: 3 does not divide num_attention_heads 32",
             "set serving.tensor_parallel_size to 2 or 4 (divisors of 32)")
    # both fixes are valid
    for tp in ("2", "4"):
        ok = run_cli("plan", H100, "--model-config", "llama-3-8b",
                     "--set", f"serving.tensor_parallel_size={tp}")
        assert ok.rc == 0, ok.err
    # validate checks it where the profile names its model, at the field's line
    (tmp_path / "config.json").write_text(json.dumps(LLAMA3_8B))
    profile = tmp_path / "tp.yaml"
    profile.write_text("extends: h100-fp8\nname: tp\nserving:\n  hf_config: config.json\n"
                       "  tensor_parallel_size: 48\n")
    out = run_cli("validate", profile.name, cwd=tmp_path)
    assert out.rc == 2 and "Traceback" not in out.err
    assert out.err.startswith("tp.yaml:5:25: serving.tensor_parallel_size: 48 does not divide "
                              "num_attention_heads 32 of ")
    assert "set serving.tensor_parallel_size to 32 (a divisor of 32)" in out.err
    assert run_cli("validate", profile.name, "--set", "serving.tensor_parallel_size=32",
                   cwd=tmp_path).rc == 0


# --- huge and inconsistent numbers: bounded, cross-checked, named with a valid fix ---------

def _plan_bounded(*args: str, timeout: float = 60) -> Run:
    """``dockergen plan``, killed after ``timeout`` s (1e23 layers looped forever)."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    proc = subprocess.run([sys.executable, "-m", "dockergen", "plan", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          check=False)
    return Run(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.parametrize(("text", "expected"), [
    ('"num_hidden_layers": 100000000000000000000000',
     "num_hidden_layers: 100000000000000000000000 is more than 1024, the largest "
     "num_hidden_layers dockergen plans with; set num_hidden_layers to the model's own value "
     "(from 1 to 1024)"),
    ('"num_hidden_layers": 1e23', "num_hidden_layers: expected a whole number >= 1, got 1e+23"),
    ('"hidden_size": ' + "4" * 5000, "not a readable JSON config"),  # past int()'s digit limit
    ('"hidden_size": 4096' + "0" * 50,  # shown cut short
     "hidden_size: " + ("4096" + "0" * 50)[:37] + "... is more than 131072"),
    ('"vocab_size": 10000000000000', "vocab_size: 10000000000000 is more than 16777216"),
    ('"max_position_embeddings": 1000000000000000',
     "max_position_embeddings: 1000000000000000 is more than 268435456"),
    ('"n_routed_experts": 100000000000', "n_routed_experts: 100000000000 is more than 65536"),
    ('"num_attention_heads": 3', "num_key_value_heads 8 is more than num_attention_heads 3 "
                                 "(each KV head serves a group of query heads); set "
                                 "num_key_value_heads and num_attention_heads"),
    ('"num_attention_heads": 12', "num_attention_heads 12 is not divisible by "
                                  "num_key_value_heads 8"),
    ('"hidden_size": 4097', "hidden_size 4097 is not divisible by num_attention_heads 32 and "
                            "head_dim is not given; set hidden_size to a multiple of 32 (e.g. "
                            "4096), or head_dim to the model's value"),
], ids=["layers-1e23", "layers-float", "digits-5000", "hidden-1e30", "vocab", "positions",
        "experts", "heads-3-kv-8", "heads-not-multiple-of-kv", "hidden-4097"])
def test_huge_and_inconsistent_config_numbers_are_refused(tmp_path: Path, text: str,
                                                          expected: str) -> None:
    # before: 1e23 layers ran at 100% CPU until killed; 3 heads with 8 KV heads planned a
    # head size of 1365 that "fits"; hidden_size 4097 was floored to head_dim 128
    key = text.split('"')[1]
    body = json.dumps({k: v for k, v in LLAMA3_8B.items() if k != key})
    cfg = tmp_path / "config.json"
    cfg.write_text(body[:-1] + ", " + text + "}")
    _refused(_plan_bounded(H100, "--model-config", str(cfg)), 2, f"{cfg}: ", expected)
    _refused(run_cli("validate", H100, "--set", f"serving.hf_config={cfg}"), 2,
             f"serving.hf_config: {cfg}: ", expected)


def test_head_dim_given_needs_no_divisible_hidden_size() -> None:
    # Gemma-style configs give head_dim; hidden_size / heads is then not the head size
    m = shape_from_config({**LLAMA3_8B, "hidden_size": 4097, "head_dim": 128}, "x", "x")
    assert m.head_dim == 128
    # the suggested multiple is itself a valid config
    assert shape_from_config({**LLAMA3_8B, "hidden_size": 4096}, "x", "x").head_dim == 128


def _shard(path: Path, header: dict[str, object], data: int) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * data)


@pytest.mark.parametrize(("header", "data", "expected"), [
    ({"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 1_000_000_000_000_000]}}, 4,
     "tensor 'w': data_offsets end 1000000000000000 is past the end of the file, which holds "
     "4 bytes after its header"),
    ({"w": {"dtype": "BF16", "shape": [10**30, 10**30], "data_offsets": [0, 2]}}, 2,
     f"tensor 'w': shape {json.dumps([10**30, 10**30])[:37]}... of BF16 needs more than the "
     "file holds, but data_offsets [0, 2] span 2 bytes"),
    ({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}}, 16,
     "tensor 'w': shape [3] of F32 needs 12 bytes, but data_offsets [0, 16] span 16 bytes"),
    ({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
      "b": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}, 8,
     "tensor 'b': data_offsets begin at 0, but the tensors before it end at 4"),
    ({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
      "b": {"dtype": "U8", "shape": [2], "data_offsets": [6, 8]}}, 8,
     "tensor 'b': data_offsets begin at 6, but the tensors before it end at 4"),
    ({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}, 100,
     "the tensors end at byte 4 of the data, but the file holds 100 bytes after its header"),
    ({"a": {"dtype": "Q7", "shape": [4], "data_offsets": [0, 4]}}, 4,
     "tensor 'a': dtype 'Q7' is not a safetensors dtype"),
    ({"a": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}, 2,
     "tensor 'a': shape [3] of F4 needs 1.5 bytes, but data_offsets [0, 2] span 2 bytes"),
], ids=["end-past-file", "shape-1e30", "shape-vs-offsets", "overlap", "gap", "short-of-file",
        "unknown-dtype", "half-byte"])
def test_safetensors_offsets_agree_with_shapes_and_the_file(
        tmp_path: Path, header: dict[str, object], data: int, expected: str) -> None:
    # before: a 0.9 KB shard claiming [0, 1e15] planned "931322 GiB exact" and blamed
    # max_model_len; [1e30, 1e30] in 2 bytes was "2 B, fits"
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(LLAMA3_8B))
    shard = model / "model.safetensors"
    _shard(shard, header, data)
    out = _plan_bounded(H100, "--model-dir", str(model))
    _refused(out, 2, f"{shard}: {expected}", "the header is damaged: re-download the checkpoint")
    assert "max_model_len" not in out.err


def test_a_header_longer_than_its_file_is_refused(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(LLAMA3_8B))
    shard = model / "model.safetensors"
    shard.write_bytes(struct.pack("<Q", 5000) + b"{}")
    _refused(_plan_bounded(H100, "--model-dir", str(model)), 2,
             f"{shard}: not a safetensors file: header length 5000 is implausible for a file "
             "of 10 bytes")

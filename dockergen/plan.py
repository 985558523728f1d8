"""``dockergen plan``: does the model fit, and how many sequences fit?

From a Hugging Face ``config.json`` (a file, a model folder, or a built-in shape from
``data/models.yaml``) and the profile's GPUs, precision, tensor parallelism and
``max_model_len``, compute weight memory, KV-cache bytes per token for each attention kind,
the tokens that fit per GPU, and the maximum concurrency at ``max_model_len``.

The per-token formulas are vLLM's own (src: vllm 0.33.0 wheel,
vllm/v1/kv_cache_interface.py):
``AttentionSpec.page_size_bytes = num_heads x num_states x state_content_size_bytes`` with
``state_content_size_bytes = (head_size + head_size_v) x get_dtype_size(dtype)``, so per token
and layer: ``kv_heads x (head_dim + head_dim) x bytes`` (MHA/GQA: the factor 2 is K and V);
``MLAAttentionSpec`` sets ``head_size_v = 0`` with ``head_size = kv_lora_rank +
qk_rope_head_dim`` and one latent "head" (no factor 2); ``SlidingWindowSpec.
max_admission_blocks_per_request`` bounds a sliding layer to ``min(sliding_window - 1 +
max_num_batched_tokens, max_model_len)`` tokens (+1 block), while ``FullAttentionSpec.
max_memory_usage_bytes`` grows with ``max_model_len``.

Library code: raises :class:`PlanError` / :class:`ProfileError`, never prints.
May import: :mod:`dockergen.pipeline` (the resolution it plans, for its type),
:mod:`dockergen.components.serving` (each engine's KV-cache budget rule),
:mod:`dockergen.errors`, :mod:`dockergen.inputs` (the bounded reader).
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import yaml

from dockergen import inputs
from dockergen.errors import DockergenError, ExitCode, Location, Problem, ProfileError

if TYPE_CHECKING:
    from dockergen.pipeline import Resolution

GIB = 1 << 30
KIB = 1 << 10
DATA = Path(__file__).parent / "data" / "models.yaml"

# vLLM's KV block: 16 tokens (src: vllm/config/cache.py CacheConfig.block_size default on
# CUDA; the sliding-window bound adds one block).
BLOCK_SIZE = 16
# Memory besides weights and KV cache: CUDA graphs, activations of the profiling run,
# NCCL buffers, allocator slack. vLLM measures it with a profiling run at start-up
# (src: vllm/v1/worker/gpu_worker.py Worker.determine_available_memory: KV budget =
# requested_memory (total x gpu_memory_utilization) - weights - peak activation -
# non-torch memory - CUDA graph memory); without a GPU dockergen reserves this estimate
# (dockergen's assumption, adjustable with --overhead-gib).
DEFAULT_OVERHEAD_GIB = 2.0

# Bytes per element of the weight and KV-cache precisions (int4: 0.5, scales ignored).
WEIGHT_BYTES = {"fp32": 4.0, "float32": 4.0, "bf16": 2.0, "bfloat16": 2.0, "fp16": 2.0,
                "float16": 2.0, "fp8": 1.0, "int8": 1.0, "int4-awq": 0.5, "gptq": 0.5}
# Bits per element of each safetensors dtype (src: huggingface/safetensors
# safetensors/src/tensor.rs Dtype::bitsize; F4 and F6 are packed, so a tensor's bits must
# make whole bytes).
SAFETENSORS_DTYPE_BITS = {"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8,
                          "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "I16": 16, "U16": 16,
                          "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "C64": 64,
                          "F64": 64, "I64": 64, "U64": 64}


class PlanError(DockergenError):
    """A model config or folder cannot be read, or the model does not fit."""

    exit_code = ExitCode.INVALID_PROFILE


@dataclass(frozen=True)
class ModelShape:
    """The config.json fields the formulas read (text model only)."""

    name: str
    source: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    max_position: int
    tied: bool
    dtype: str
    kv_lora_rank: int = 0  # > 0: MLA
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    q_lora_rank: int = 0
    n_routed_experts: int = 0
    n_shared_experts: int = 0
    moe_intermediate: int = 0
    shared_intermediate: int = 0  # Qwen2-MoE's one shared expert (with a sigmoid gate)
    dense_layers: int = 0  # of an MoE model: layers with a dense MLP instead of experts
    sliding_window: int = 0
    sliding_layers: int = 0  # how many of the layers are sliding-window layers

    @property
    def attention(self) -> str:
        if self.kv_lora_rank:
            return "mla"
        if self.sliding_layers:
            return "hybrid-sliding-window"
        return "mha" if self.kv_heads == self.heads else "gqa"


# The largest value of each config.json count that dockergen plans with (documented in
# docs/deploy.md, "Running what was built"). Published models stay far below them (Llama 3.1
# 405B: 126 layers, hidden 16384, 128 heads; DeepSeek-V3: 256 experts; Llama 4 Scout:
# 10M positions); a count beyond them is a damaged or hand-made file, and the per-layer
# loops and products below must never run on it (1e23 layers ran at 100% CPU forever).
CONFIG_LIMITS = {"num_hidden_layers": 1024, "hidden_size": 131_072,
                 "num_attention_heads": 4096, "num_key_value_heads": 4096, "head_dim": 4096,
                 "intermediate_size": 1_048_576, "moe_intermediate_size": 1_048_576,
                 "shared_expert_intermediate_size": 1_048_576, "vocab_size": 16_777_216,
                 "max_position_embeddings": 1 << 28, "sliding_window": 1 << 28,
                 "n_routed_experts": 65_536, "num_local_experts": 65_536,
                 "num_experts": 65_536, "n_shared_experts": 65_536}
DEFAULT_LIMIT = 1 << 20  # every other count (ranks, head dims of MLA, steps, k-dense)


def _int(cfg: dict[str, Any], key: str, where: str, default: int | None = None,
         minimum: int = 1) -> int:
    """A whole number from ``minimum`` to the key's limit; absent or null: ``default``.

    null counts as absent where there is a default, as in transformers and vLLM (configs
    write ``"head_dim": null`` or ``"q_lora_rank": null`` for "not used"). The formulas
    divide by heads and multiply by layers, so a 0 where they need a count would print a
    plan of nothing that "fits" (or crash): counts the formulas need are >= 1.
    """
    value = cfg.get(key)
    if value is None and default is not None:
        return default
    limit = CONFIG_LIMITS.get(key, DEFAULT_LIMIT)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise PlanError(f"{where}: {key}: expected a whole number >= {minimum}, got "
                        f"{_shown(value)}; set {key} to the model's own value (a whole "
                        f"number >= {minimum}) from its published config.json")
    if value > limit:
        raise PlanError(f"{where}: {key}: {_shown(value)} is more than {limit}, the largest "
                        f"{key} dockergen plans with; set {key} to the model's own value "
                        f"(from {minimum} to {limit}) from its published config.json")
    return value


def _shown(value: object) -> str:
    """A config value as JSON, cut short: a hostile file may hold a 4000-digit number."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _sliding_window(cfg: dict[str, Any], where: str) -> int:
    """The window in tokens; 0 for none (absent, null or 0, the "no window" of HF configs)."""
    value = cfg.get("sliding_window")
    if value is None or (type(value) is int and value == 0):
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PlanError(f"{where}: sliding_window: expected null (no window) or a whole "
                        f"number of tokens >= 1, got {json.dumps(value)}; set sliding_window "
                        "to the model's window from its published config.json, or null for "
                        "none")
    return value


def shape_from_config(cfg: dict[str, Any], name: str, where: str) -> ModelShape:
    """Read a Hugging Face config.json dict (multimodal: its ``text_config``).

    Every number the formulas read is checked here (a :class:`PlanError` naming the file,
    the key, the value and the fix), so the arithmetic after it cannot fail or mislead.
    """
    if isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg, **cfg["text_config"]}
    for key in ("num_hidden_layers", "hidden_size", "num_attention_heads"):
        if key not in cfg:
            raise PlanError(f"{where}: {key} missing; give a Hugging Face config.json of a "
                            "decoder model (it has num_hidden_layers, hidden_size, "
                            "num_attention_heads)")
    layers = _int(cfg, "num_hidden_layers", where)
    hidden = _int(cfg, "hidden_size", where)
    heads = _int(cfg, "num_attention_heads", where)
    kv_heads = _int(cfg, "num_key_value_heads", where, heads)
    head_dim = _head_dim(cfg, where, hidden, heads, kv_heads)
    sliding = _sliding_window(cfg, where)
    sliding_layers = _sliding_layers(cfg, where, layers, sliding)
    # routed experts: DeepSeek n_routed_experts, Mixtral num_local_experts, Qwen3-MoE
    # num_experts (transformers' config classes of each)
    experts = (_int(cfg, "n_routed_experts", where, 0, minimum=0)
               or _int(cfg, "num_local_experts", where, 0, minimum=0)
               or _int(cfg, "num_experts", where, 0, minimum=0))
    intermediate = _int(cfg, "intermediate_size", where, 4 * hidden)
    dense_layers = _dense_layers(cfg, where, layers)
    return ModelShape(
        name=name, source=where, layers=layers, hidden=hidden, heads=heads,
        kv_heads=kv_heads, head_dim=head_dim,
        intermediate=intermediate,
        vocab=_int(cfg, "vocab_size", where, 32000),
        max_position=_int(cfg, "max_position_embeddings", where, 4096),
        tied=bool(cfg.get("tie_word_embeddings", False)),
        dtype=str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"),
        kv_lora_rank=_int(cfg, "kv_lora_rank", where, 0) if cfg.get("kv_lora_rank") else 0,
        qk_rope_head_dim=_int(cfg, "qk_rope_head_dim", where, 0, minimum=0),
        qk_nope_head_dim=_int(cfg, "qk_nope_head_dim", where, 0, minimum=0),
        v_head_dim=_int(cfg, "v_head_dim", where, 0, minimum=0),
        q_lora_rank=_int(cfg, "q_lora_rank", where, 0, minimum=0),
        n_routed_experts=experts,
        n_shared_experts=_int(cfg, "n_shared_experts", where, 0, minimum=0),
        # Mixtral's experts are intermediate_size wide (it has no moe_intermediate_size);
        # counting them as 0 wide put Mixtral-8x7B at 1.6B parameters instead of 46.7B
        moe_intermediate=(_int(cfg, "moe_intermediate_size", where, 0, minimum=0)
                          or (intermediate if experts else 0)),
        shared_intermediate=_int(cfg, "shared_expert_intermediate_size", where, 0, minimum=0),
        dense_layers=dense_layers if experts else layers,
        sliding_window=sliding if sliding_layers else 0,
        sliding_layers=sliding_layers,
    )


def _sliding_layers(cfg: dict[str, Any], where: str, layers: int, sliding: int) -> int:
    """How many of the layers attend through the sliding window (``sliding``: 0 for none)."""
    sliding_layers = 0
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        # one entry per layer (transformers checks this too); more entries than layers
        # would leave a negative count of global layers
        if len(layer_types) != layers:
            raise PlanError(f"{where}: layer_types: {len(layer_types)} entries for "
                            f"num_hidden_layers {layers}; give one entry per layer, as in "
                            "the model's published config.json")
        sliding_layers = sum(1 for t in layer_types if t == "sliding_attention")
    elif sliding and cfg.get("sliding_window_pattern"):
        # Gemma 3: every pattern-th layer is global, the others slide
        # (src: transformers Gemma3TextConfig: layer_types from sliding_window_pattern,
        # "sliding_attention" if (i + 1) % pattern else "full_attention").
        pattern = _int(cfg, "sliding_window_pattern", where)
        sliding_layers = sum(1 for i in range(layers) if (i + 1) % pattern)
    elif sliding and cfg.get("use_sliding_window", True) is not False:
        # A window on every layer (Mistral-7B-v0.1); Qwen2 configs carry a window with
        # use_sliding_window: false, which means none.
        sliding_layers = layers
    if sliding_layers and not sliding:
        raise PlanError(f"{where}: layer_types: {sliding_layers} sliding_attention layers "
                        "but no sliding_window; set sliding_window to the model's window "
                        "from its published config.json")
    return sliding_layers


def _dense_layers(cfg: dict[str, Any], where: str, layers: int) -> int:
    """How many layers of an MoE model have a dense MLP instead of experts."""
    # dense-MLP layers of an MoE model: DeepSeek's first k; Qwen2/3-MoE's mlp_only_layers and
    # the layers off its decoder_sparse_step (transformers Qwen3MoeDecoderLayer)
    step = _int(cfg, "decoder_sparse_step", where, 1)
    mlp_only = cfg.get("mlp_only_layers") or []
    if not isinstance(mlp_only, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in mlp_only):
        raise PlanError(f"{where}: mlp_only_layers: expected a list of layer numbers from 0 "
                        f"to {layers - 1}; copy it from the model's published config.json")
    return (_int(cfg, "first_k_dense_replace", where, 0, minimum=0)
            or sum(1 for i in range(layers) if i in mlp_only or (i + 1) % step))


def _head_dim(cfg: dict[str, Any], where: str, hidden: int, heads: int,
              kv_heads: int) -> int:
    """The head size, after checking that the head counts and sizes agree.

    Without ``head_dim`` the engines take ``hidden_size // num_attention_heads`` (src:
    vllm/config/model.py ModelConfig.get_head_size), so a hidden size that heads do not
    divide was floored silently (4097 / 32 -> 128). Each KV head serves a whole group of
    query heads (GQA: transformers repeat_kv; vLLM splits heads by KV heads), so the KV
    heads must divide the attention heads and cannot outnumber them.
    """
    if kv_heads > heads:
        raise PlanError(f"{where}: num_key_value_heads {kv_heads} is more than "
                        f"num_attention_heads {heads} (each KV head serves a group of query "
                        "heads); set num_key_value_heads and num_attention_heads to the "
                        "model's own values from its published config.json")
    if heads % kv_heads:
        raise PlanError(f"{where}: num_attention_heads {heads} is not divisible by "
                        f"num_key_value_heads {kv_heads} (each KV head serves a whole group "
                        "of query heads); set both to the model's own values from its "
                        "published config.json")
    given = _int(cfg, "head_dim", where, 0)
    if given:
        return given
    if hidden % heads:
        lower = hidden // heads * heads
        raise PlanError(f"{where}: hidden_size {hidden} is not divisible by "
                        f"num_attention_heads {heads} and head_dim is not given; set "
                        f"hidden_size to a multiple of {heads} (e.g. "
                        f"{lower or heads}), or head_dim to the model's value, from its "
                        "published config.json")
    return hidden // heads


def builtin_models() -> dict[str, dict[str, Any]]:
    """The built-in model table (name -> {src, verified, config})."""
    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def load_shape(model_config: str | None = None, model_dir: Path | None = None) -> ModelShape:
    """A model shape from a config.json path, a built-in name, or a model folder."""
    if model_dir is not None:
        path = model_dir / "config.json"
    elif model_config is None:
        raise PlanError("no model: give --model-config (a config.json or one of "
                        f"{', '.join(sorted(builtin_models()))}), --model-dir, or set "
                        "serving.hf_config in the profile")
    else:
        table = builtin_models()
        if model_config in table and not Path(model_config).is_file():
            entry = table[model_config]
            return shape_from_config(entry["config"], model_config,
                                     f"built-in {model_config} ({entry['src']})")
        path = Path(model_config)
    try:
        cfg = json.loads(inputs.read_bytes(path, "model-config"))
    except FileNotFoundError:
        raise PlanError(f"{path}: no such file; give a Hugging Face config.json or one of "
                        f"{', '.join(sorted(builtin_models()))}") from None
    except inputs.InputError as exc:  # a device, FIFO, link loop, huge file
        raise PlanError(str(exc)) from None
    except (OSError, ValueError, RecursionError) as exc:  # ValueError: a 5000-digit int
        raise PlanError(f"{path}: not a readable JSON config: {exc}; give the model's "
                        "config.json") from None
    if not isinstance(cfg, dict):
        raise PlanError(f"{path}: expected a JSON object; give the model's config.json")
    return shape_from_config(cfg, path.parent.name or path.name, str(path))


def safetensors_bytes(model_dir: Path) -> int:
    """Exact weight bytes from the safetensors headers of a model folder.

    Format (src: huggingface/safetensors README "Format"): 8-byte little-endian header
    length N, then N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, ...,
    "__metadata__": {...}}; a tensor occupies end - begin bytes. Only headers are read.
    """
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise PlanError(f"{model_dir}: no *.safetensors files; give the model folder "
                        "(with config.json and its safetensors shards) or use --model-config")
    return sum(_shard_bytes(f) for f in files)


def _shard_bytes(f: Path) -> int:
    """The tensor bytes of one shard, after checking its header against the file."""
    try:
        with inputs.open_input(f, "safetensors-header") as (fh, size):
            head = fh.read(8)
            if len(head) != 8:
                raise ValueError("shorter than the 8-byte header length")
            (n,) = struct.unpack("<Q", head)
            # the format's own bound (inputs.LIMITS), and what the file can hold
            if n > min(inputs.LIMITS["safetensors-header"][0] - 8, size - 8):
                raise ValueError(f"header length {n} is implausible for a file of {size} "
                                 "bytes")
            header = json.loads(fh.read(n))
    except inputs.InputError as exc:
        raise PlanError(str(exc)) from None
    except (OSError, ValueError, RecursionError) as exc:
        raise PlanError(f"{f}: not a safetensors file: {exc}; re-download the "
                        "checkpoint") from None
    return _header_bytes(f, header, size - 8 - n)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _header_bytes(f: Path, header: object, buffer: int) -> int:
    """The tensor bytes a parsed safetensors header declares, after checking it.

    A damaged or hand-made header must not reach the sum: ``end < begin`` would subtract
    weights and print a plan that fits, a float offset (``1e400``) would crash, and offsets
    past the file (``[0, 1e15]`` in a 1 KB shard) or shapes the offsets do not hold
    (``[1e30, 1e30]`` in 2 bytes) would plan a model that is not there. As the safetensors
    library itself checks (src: safetensors/src/tensor.rs Metadata::validate): each tensor's
    span is its shape x its dtype's size, the spans are contiguous from 0, and the last one
    ends where the file does (``buffer``: the bytes after the header).
    """
    if not isinstance(header, dict):
        raise PlanError(f"{f}: not a safetensors file: the header is a JSON "
                        f"{type(header).__name__}, not an object of tensors; re-download "
                        "the checkpoint")
    spans = []
    for name, info in header.items():
        if name != "__metadata__":
            spans.append((*_span(f, name, info, buffer), name))
    at = 0
    for begin, end, name in sorted(spans):
        if begin != at:
            _damaged(f, name, f"data_offsets begin at {begin}, but the tensors before it end "
                              f"at {at} (tensors are stored back to back from 0)")
        at = end
    if at != buffer:
        _damaged(f, None, f"the tensors end at byte {at} of the data, but the file holds "
                          f"{buffer} bytes after its header")
    return at


def _span(f: Path, name: str, info: object, buffer: int) -> tuple[int, int]:
    """(begin, end) of one tensor, checked against its dtype, shape and the file."""
    offsets = info.get("data_offsets") if isinstance(info, dict) else None
    if not (isinstance(info, dict) and isinstance(info.get("dtype"), str)
            and isinstance(info.get("shape"), list)
            and all(_is_count(d) for d in info["shape"])):
        _damaged(f, name, f"expected {{dtype, shape, data_offsets}}, got {json.dumps(info)[:200]}")
    if not (isinstance(offsets, list) and len(offsets) == 2
            and all(_is_count(o) for o in offsets) and offsets[0] <= offsets[1]):
        _damaged(f, name, f"data_offsets {json.dumps(offsets)[:200]}: expected [begin, end], "
                          "whole numbers with 0 <= begin <= end")
    begin, end = offsets
    if end > buffer:
        _damaged(f, name, f"data_offsets end {end} is past the end of the file, which holds "
                          f"{buffer} bytes after its header")
    bits = SAFETENSORS_DTYPE_BITS.get(info["dtype"])
    if bits is None:
        _damaged(f, name, f"dtype {info['dtype'][:40]!r} is not a safetensors dtype "
                          f"({', '.join(SAFETENSORS_DTYPE_BITS)})")
    elements = 1
    for dim in info["shape"]:
        elements *= dim
        if elements * bits > 8 * buffer:  # stop before a product of huge dimensions grows
            break
    if elements * bits != 8 * (end - begin):
        need = ("more than the file holds" if elements * bits > 8 * buffer
                else f"{elements * bits / 8:g} bytes")
        _damaged(f, name, f"shape {_shown(info['shape'])} of {info['dtype']} needs "
                          f"{need}, but data_offsets [{begin}, {end}] span {end - begin} bytes")
    return begin, end


def _damaged(f: Path, name: str | None, problem: str) -> NoReturn:
    tensor = f"tensor {name!r}: " if name is not None else ""
    raise PlanError(f"{f}: {tensor}{problem}; the header is damaged: re-download the "
                    "checkpoint")


def count_params(m: ModelShape) -> int:
    """Parameters of the text model from its shape (dense, GQA, MLA and MoE layers).

    Linear layers without bias, RMSNorm weights, untied LM head unless tied; the
    Llama counts equal the model cards exactly (tests/unit/outputs/test_plan.py).
    """
    embed = m.vocab * m.hidden * (1 if m.tied else 2)
    if m.kv_lora_rank:
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = (m.hidden * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * m.heads * qk
             if m.q_lora_rank else m.hidden * m.heads * qk)
        attn = (q + m.hidden * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
                + m.kv_lora_rank * m.heads * (m.qk_nope_head_dim + m.v_head_dim)
                + m.heads * m.v_head_dim * m.hidden)
    else:
        attn = (m.hidden * m.heads * m.head_dim * 2
                + m.hidden * m.kv_heads * m.head_dim * 2)
    dense_mlp = 3 * m.hidden * m.intermediate
    moe_mlp = 0
    if m.n_routed_experts:  # experts, shared experts, the router (and a shared-expert gate)
        moe_mlp = (3 * m.hidden * m.moe_intermediate * (m.n_routed_experts + m.n_shared_experts)
                   + m.hidden * m.n_routed_experts)
        if m.shared_intermediate:
            moe_mlp += 3 * m.hidden * m.shared_intermediate + m.hidden
    dense_layers = m.dense_layers
    norms = 2 * m.hidden
    per_layers = (m.layers * (attn + norms) + dense_layers * dense_mlp
                  + (m.layers - dense_layers) * moe_mlp)
    return embed + per_layers + m.hidden


def kv_bytes_per_token_layer(m: ModelShape, kv_bytes: int, tp: int = 1) -> int:
    """KV bytes per token and layer on one GPU (vLLM AttentionSpec.page_size_bytes / 16).

    MLA: one latent of kv_lora_rank + qk_rope_head_dim per token, no separate V, replicated
    on every tensor-parallel rank. MHA/GQA: K and V for the rank's KV heads,
    max(1, kv_heads // tp) (src: vllm/config/model.py ModelConfig.get_num_kv_heads).
    """
    if m.kv_lora_rank:
        return (m.kv_lora_rank + m.qk_rope_head_dim) * kv_bytes
    heads = max(1, m.kv_heads // tp)
    return heads * (m.head_dim + m.head_dim) * kv_bytes


@dataclass(frozen=True)
class PlanInputs:
    """What the plan needs from the profile (see :func:`inputs_from_profile`)."""

    engine: str
    gpu_names: tuple[str, ...]
    gpu_mem_gib: float  # the smallest of the targets
    weights: str  # quantization.weights
    kv_cache: str  # quantization.kv_cache
    tensor_parallel: int
    max_model_len: int | None
    gpu_memory_utilization: float | None
    max_num_batched_tokens: int | None


@dataclass
class Plan:
    """The capacity plan; every number in bytes or tokens (``as_dict`` for --json)."""

    model: str
    model_source: str
    attention: str
    engine: str
    gpu: str
    gpu_memory_bytes: int
    tensor_parallel: int
    weight_dtype: str
    weight_bytes_total: int
    weight_bytes_source: str
    weight_bytes_per_gpu: int
    kv_cache_dtype: str
    kv_bytes_per_token: int  # all layers, one replica (tp=1 view)
    kv_bytes_per_token_per_gpu: int  # growing (full-attention) layers on one GPU
    sliding_bytes_per_token_per_gpu: int  # bounded (sliding-window) layers on one GPU
    sliding_window: int
    gpu_memory_utilization: float
    overhead_bytes: int
    overhead_source: str
    kv_budget_bytes_per_gpu: int
    max_model_len: int
    bytes_per_request_per_gpu: int
    tokens_per_gpu: int
    max_concurrency: float
    fits: bool
    largest_max_model_len: int
    smallest_tensor_parallel: int | None
    formula: str
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _weight_dtype(m: ModelShape, weights: str) -> str:
    if weights in ("auto", ""):
        return m.dtype
    return weights


def _kv_dtype(m: ModelShape, weights: str, kv_cache: str) -> tuple[str, int]:
    # vLLM --kv-cache-dtype auto = the model dtype (src: vllm/utils/torch_utils.py
    # kv_cache_dtype_str_to_dtype); fp8 weights do not make the KV cache fp8.
    if kv_cache in ("fp8", "int8"):
        return kv_cache, 1
    dtype = m.dtype if weights in ("auto", "fp8", "int8", "int4-awq", "gptq") else weights
    return dtype, int(WEIGHT_BYTES.get(dtype, 2.0))


def _request_bytes(m: ModelShape, full_pt: int, slide_pt: int, length: int,
                   batched: int) -> int:
    """KV bytes one request of ``length`` tokens holds on one GPU (vLLM's admission bound)."""
    full = math.ceil(length / BLOCK_SIZE) * BLOCK_SIZE * full_pt
    if not slide_pt:
        return full
    held = min(m.sliding_window - 1 + batched, length)
    return full + (math.ceil(held / BLOCK_SIZE) + 1) * BLOCK_SIZE * slide_pt


def make_plan(m: ModelShape, inp: PlanInputs, weight_total: int | None = None,
              weight_source: str = "", overhead_gib: float = DEFAULT_OVERHEAD_GIB) -> Plan:
    """Compute the plan for one tensor-parallel size (the profile's)."""
    return _plan(m, inp, inp.tensor_parallel, weight_total, weight_source, overhead_gib,
                 search=True)


def _plan(m: ModelShape, inp: PlanInputs, tp: int, weight_total: int | None,
          weight_source: str, overhead_gib: float, search: bool) -> Plan:
    wdtype = _weight_dtype(m, inp.weights)
    if weight_total is None:
        weight_total, weight_source = _estimated_weights(m, wdtype)
    kv_name, kv_bytes = _kv_dtype(m, inp.weights, inp.kv_cache)
    per_layer_tp1 = kv_bytes_per_token_layer(m, kv_bytes, 1)
    per_layer = kv_bytes_per_token_layer(m, kv_bytes, tp)
    full_layers = m.layers - m.sliding_layers
    full_pt = per_layer * full_layers
    slide_pt = per_layer * m.sliding_layers
    mem = int(inp.gpu_mem_gib * GIB)
    overhead = int(overhead_gib * GIB)
    w_gpu = math.ceil(weight_total / tp)
    budget, util, budget_rule = _kv_budget(inp, mem, w_gpu, overhead)
    max_len = inp.max_model_len or m.max_position
    batched = inp.max_num_batched_tokens or max_len
    need = _request_bytes(m, full_pt, slide_pt, max_len, batched)
    fits = need <= budget and budget > 0
    largest = _largest_max_model_len(m, full_pt, slide_pt, max_len, batched, budget)
    tokens = budget // full_pt if full_pt else 0
    concurrency = round(budget / need, 2) if need else 0.0
    smallest_tp: int | None = tp if fits else None
    if search and not fits:
        smallest_tp = _smallest_fitting_tp(m, inp, tp, weight_total, weight_source,
                                           overhead_gib)
    notes = [f"KV budget: {budget_rule}"]
    if not m.kv_lora_rank and m.kv_heads < tp:
        notes.append(f"{m.kv_heads} KV heads < tensor_parallel_size {tp}: each rank keeps "
                     "one replicated KV head")
    return Plan(
        model=m.name, model_source=m.source, attention=m.attention, engine=inp.engine,
        gpu="/".join(inp.gpu_names), gpu_memory_bytes=mem, tensor_parallel=tp,
        weight_dtype=wdtype, weight_bytes_total=weight_total,
        weight_bytes_source=weight_source, weight_bytes_per_gpu=w_gpu,
        kv_cache_dtype=kv_name, kv_bytes_per_token=per_layer_tp1 * m.layers,
        kv_bytes_per_token_per_gpu=full_pt, sliding_bytes_per_token_per_gpu=slide_pt,
        sliding_window=m.sliding_window, gpu_memory_utilization=util,
        overhead_bytes=overhead,
        overhead_source=("dockergen estimate (CUDA graphs, activations, NCCL); vLLM measures "
                         "it at start-up: vllm/v1/worker/gpu_worker.py "
                         "determine_available_memory"),
        kv_budget_bytes_per_gpu=budget, max_model_len=max_len,
        bytes_per_request_per_gpu=need, tokens_per_gpu=int(tokens),
        max_concurrency=concurrency, fits=fits, largest_max_model_len=largest,
        smallest_tensor_parallel=smallest_tp, formula=_kv_formula(m, kv_bytes, full_layers),
        notes=notes)


def _estimated_weights(m: ModelShape, wdtype: str) -> tuple[int, str]:
    """(weight bytes, how they were counted) from the config shapes, without a checkpoint."""
    per = WEIGHT_BYTES.get(wdtype)
    if per is None:
        raise PlanError(f"{m.source}: torch_dtype {wdtype!r} unknown; set "
                        "quantization.weights (bf16, fp16, fp8, int8, int4-awq, gptq)")
    weight_total = int(count_params(m) * per)
    weight_source = (f"{count_params(m)} parameters (from the config shapes) x {per:g} "
                     f"bytes ({wdtype})")
    return weight_total, weight_source


def _kv_budget(inp: PlanInputs, mem: int, w_gpu: int, overhead: int) -> tuple[int, float, str]:
    """(KV-cache bytes per GPU, memory fraction used, the engine's rule) for one GPU: the
    serving engine's own rule (its ``kv_budget``, in its folder)."""
    from dockergen.components.serving import engine_for

    budget, util, budget_rule = engine_for(inp.engine).kv_budget(
        mem, w_gpu, overhead, inp.gpu_memory_utilization)
    return max(budget, 0), util, budget_rule


def _largest_max_model_len(m: ModelShape, full_pt: int, slide_pt: int, max_len: int,
                           batched: int, budget: int) -> int:
    """The largest max_model_len up to ``max_len`` whose request fits ``budget``."""
    # Largest max_model_len that fits (block-rounded), like vLLM's estimate_max_model_len.
    lo, hi = 0, max_len
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _request_bytes(m, full_pt, slide_pt, mid, min(batched, mid)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo // BLOCK_SIZE * BLOCK_SIZE if lo >= BLOCK_SIZE else lo


def _smallest_fitting_tp(m: ModelShape, inp: PlanInputs, tp: int, weight_total: int,
                         weight_source: str, overhead_gib: float) -> int | None:
    """The smallest tensor-parallel size above ``tp`` that divides the heads and fits."""
    for cand in (1, 2, 4, 8, 16, 32, 64):
        if cand <= tp or m.heads % cand:
            continue
        if _plan(m, inp, cand, weight_total, weight_source, overhead_gib,
                 search=False).fits:
            return cand
    return None


def _kv_formula(m: ModelShape, kv_bytes: int, full_layers: int) -> str:
    """The KV-bytes-per-token formula with the model's numbers, as the table shows it."""
    if m.kv_lora_rank:
        return (f"MLA: (kv_lora_rank {m.kv_lora_rank} + qk_rope_head_dim "
                f"{m.qk_rope_head_dim}) x {m.layers} layers x {kv_bytes} B, no factor 2; "
                "the latent is replicated on every TP rank")
    formula = (f"2 x {m.layers} layers x {m.kv_heads} kv_heads x {m.head_dim} head_dim "
               f"x {kv_bytes} B")
    if m.sliding_layers:
        formula += (f"; {m.sliding_layers} sliding-window layers hold at most "
                    f"sliding_window {m.sliding_window} - 1 + max_num_batched_tokens "
                    f"tokens, {full_layers} global layers grow with context")
    return formula


def misfit_message(plan: Plan) -> tuple[str, str]:
    """(problem, fix) for a plan that does not fit, worded like vLLM's start-up error."""
    problem = (f"max_model_len {plan.max_model_len} does not fit: one request needs "
               f"{plan.bytes_per_request_per_gpu / GIB:.2f} GiB KV cache per GPU, but "
               f"{plan.gpu} x tensor_parallel_size {plan.tensor_parallel} leaves "
               f"{plan.kv_budget_bytes_per_gpu / GIB:.2f} GiB after "
               f"{plan.weight_bytes_per_gpu / GIB:.2f} GiB weights and "
               f"{plan.overhead_bytes / GIB:.2f} GiB overhead (vLLM would stop at start-up: "
               "'To serve at least one request with the model's max seq len ...')")
    fixes = []
    if plan.largest_max_model_len > 0:
        fixes.append(f"set serving.max_model_len to {plan.largest_max_model_len} or less")
    if plan.smallest_tensor_parallel and plan.smallest_tensor_parallel != plan.tensor_parallel:
        fixes.append(f"set serving.tensor_parallel_size to {plan.smallest_tensor_parallel}")
    if not fixes:
        fixes.append("use GPUs with more memory, a smaller model or a quantized checkpoint")
    return problem, " or ".join(fixes)


def check_tensor_parallel(m: ModelShape, tp: int, location: Location) -> None:
    """Raise a :class:`ProfileError` at ``serving.tensor_parallel_size`` when ``tp`` does not
    divide the model's attention heads.

    Each rank holds heads / tp query heads, so the engines refuse such a size at start-up:
    vLLM "Total number of attention heads (32) must be divisible by tensor parallel size
    (3)." (src: vllm/config ModelConfig.verify_with_parallel_config), SGLang on GPUs an
    AssertionError "32 is not divisible by 3" (src: sglang srt/distributed/utils.py
    ensure_divisibility, from its attention layers). dockergen holds TensorRT-LLM to the same
    rule, as the smallest-TP search of :func:`make_plan` already does for every engine.
    """
    if m.heads % tp == 0:
        return
    divisors = [d for d in range(1, 65) if m.heads % d == 0]  # the profile allows 1..64
    lower = max(d for d in divisors if d < tp)  # 1 divides everything
    upper = min((d for d in divisors if d > tp), default=None)
    sizes = (f"{lower} or {upper} (divisors of {m.heads})" if upper
             else f"{lower} (a divisor of {m.heads})")
    raise ProfileError([Problem(
        location, "serving.tensor_parallel_size",
        f"{tp} does not divide num_attention_heads {m.heads} of {m.source}; vLLM and SGLang "
        f"refuse to start ('Total number of attention heads ({m.heads}) must be divisible by "
        f"tensor parallel size ({tp})')",
        f"set serving.tensor_parallel_size to {sizes}")])


def check_fit(plan: Plan, location: Location) -> None:
    """Raise a :class:`ProfileError` at ``serving.max_model_len`` when the plan does not fit."""
    if plan.fits:
        return
    problem, fix = misfit_message(plan)
    raise ProfileError([Problem(location, "serving.max_model_len", problem, fix)])


def _size(n: int) -> str:
    if n >= GIB:
        return f"{n / GIB:.2f} GiB"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.2f} MiB"
    if n >= KIB:
        return f"{n / KIB:.2f} KiB"
    return f"{n} B"


def format_table(plan: Plan) -> str:
    """The readable plan: one line per quantity, with the formula and sources."""
    rows = [
        ("model", f"{plan.model} ({plan.attention}; {plan.model_source})"),
        ("engine / GPU", f"{plan.engine} on {plan.gpu} ({_size(plan.gpu_memory_bytes)}) "
                         f"x TP {plan.tensor_parallel}"),
        ("weights", f"{_size(plan.weight_bytes_total)} total, "
                    f"{_size(plan.weight_bytes_per_gpu)} per GPU ({plan.weight_bytes_source})"),
        ("KV per token", f"{_size(plan.kv_bytes_per_token)} ({plan.kv_cache_dtype}; "
                         f"{plan.formula})"),
        ("KV per token/GPU", f"{_size(plan.kv_bytes_per_token_per_gpu)} growing"
         + (f" + {_size(plan.sliding_bytes_per_token_per_gpu)} bounded by the window"
            if plan.sliding_bytes_per_token_per_gpu else "")),
        ("overhead", f"{_size(plan.overhead_bytes)} ({plan.overhead_source})"),
        ("KV budget/GPU", f"{_size(plan.kv_budget_bytes_per_gpu)} "
                          f"(gpu_memory_utilization {plan.gpu_memory_utilization:g})"),
        ("tokens per GPU", f"{plan.tokens_per_gpu}"),
        ("max_model_len", f"{plan.max_model_len} ({_size(plan.bytes_per_request_per_gpu)} "
                          "per request per GPU)"),
        ("max concurrency", f"{plan.max_concurrency:.2f}x requests of max_model_len"),
        ("fits", "yes" if plan.fits else
         f"NO (largest max_model_len {plan.largest_max_model_len}, smallest TP "
         f"{plan.smallest_tensor_parallel or 'none up to 64'})"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
    lines += [f"{'note'.ljust(width)}  {n}" for n in plan.notes]
    return "\n".join(lines) + "\n"


# --- the profile side (one adapter; re-point here when the resolved model changes) ----------

@dataclass(frozen=True)
class ProfilePlanSource:
    """What ``plan``/``validate`` read from a profile, and where max_model_len is written."""

    inputs: PlanInputs
    model_config: str | None  # resolved path or built-in name from serving.hf_config
    max_model_len_at: Location
    tensor_parallel_at: Location
    hf_config_at: Location


def profile_source(res: Resolution) -> ProfilePlanSource:
    """Pick out the plan inputs of a resolved profile (the only place that reads it)."""
    resolved = res.resolved
    p = resolved.profile
    mems = []
    for target in resolved.targets:
        if target.mem_gib is None:
            raise PlanError(f"{res.at('gpu', 'targets')}: gpu.targets: {target.given} has "
                            "no known memory size; name the GPU model (e.g. h100, "
                            "a100-40gb) instead of a compute capability")
        mems.append(float(target.mem_gib))
    s = p.serving
    config = s.hf_config
    if config is not None and config not in builtin_models():
        config = str(res.path.parent / config)
    return ProfilePlanSource(
        inputs=PlanInputs(
            engine=p.engine.name, gpu_names=tuple(t.given for t in resolved.targets),
            gpu_mem_gib=min(mems), weights=p.quantization.weights,
            kv_cache=p.quantization.kv_cache, tensor_parallel=s.tensor_parallel_size,
            max_model_len=s.max_model_len, gpu_memory_utilization=s.gpu_memory_utilization,
            max_num_batched_tokens=s.max_num_batched_tokens),
        model_config=config,
        max_model_len_at=res.at("serving", "max_model_len"),  # or its nearest parent
        tensor_parallel_at=res.at("serving", "tensor_parallel_size"),
        hf_config_at=res.at("serving", "hf_config"))


def plan_of(res: Resolution, model_config: str | None = None, model_dir: Path | None = None,
            overhead_gib: float = DEFAULT_OVERHEAD_GIB) -> tuple[Plan, Location]:
    """The plan of a resolved profile (model from the options or ``serving.hf_config``),
    and where the profile sets max_model_len (for :func:`check_fit`)."""
    src = profile_source(res)
    if model_config is None and model_dir is None:
        model_config = src.model_config
    shape = load_shape(model_config, model_dir)
    check_tensor_parallel(shape, src.inputs.tensor_parallel, src.tensor_parallel_at)
    weights = None
    weight_source = ""
    if model_dir is not None:
        weights = safetensors_bytes(model_dir)
        weight_source = f"exact, from the safetensors headers in {model_dir}"
    return make_plan(shape, src.inputs, weights, weight_source, overhead_gib), src.max_model_len_at


def validate_capacity(res: Resolution) -> Plan | None:
    """``validate``'s check: when the profile names its model config, it must fit."""
    src = profile_source(res)
    if src.model_config is None:
        return None
    try:
        shape = load_shape(src.model_config)
        # a ProfileError of its own field: not caught below
        check_tensor_parallel(shape, src.inputs.tensor_parallel, src.tensor_parallel_at)
        plan = make_plan(shape, src.inputs)
    except PlanError as exc:  # a bad hf_config is a profile problem at that field
        raise ProfileError([Problem(src.hf_config_at, "serving.hf_config", str(exc))]
                           ) from None
    check_fit(plan, src.max_model_len_at)
    return plan

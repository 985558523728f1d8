"""A model's shape, read from a Hugging Face ``config.json`` (a file, a model folder, or a
built-in shape from ``data/models.yaml``); the counts the plan computes from it are in
:mod:`dockergen.outputs.plan.counts`.

Every count is bounded (:data:`CONFIG_LIMITS`): a config is read from outside.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dockergen.errors import DockergenError, ExitCode
from dockergen.files import inputs

GIB = 1 << 30
KIB = 1 << 10
DATA = Path(__file__).resolve().parents[1] / "data" / "models.yaml"


class PlanError(DockergenError, code=ExitCode.INVALID_PROFILE):
    """A model config or folder cannot be read, or the model does not fit."""


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
    # what the engines derive the model's longest context from (each engine's rule is in its
    # folder: ServingEngine.context_limit): the model_type, every length key the config sets,
    # and each RoPE parameter set as (rope_type, factor or None, has
    # original_max_position_embeddings), nested by layer type or not
    model_type: str = ""
    lengths: tuple[tuple[str, int], ...] = ()
    rope: tuple[tuple[str, float | None, bool], ...] = ()
    rope_nested: bool = False
    architectures: tuple[str, ...] = ()  # the model classes config.json names
    rope_is_neox_style: bool | None = None  # config.json's own, where it sets one

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
# The keys any engine reads the model's length from (the union of vLLM's LENGTH_KEYS and
# SGLang's CONTEXT_LENGTH_KEYS, each in its engine's folder; a test checks the union).
LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
               "model_max_length", "max_target_positions", "max_sequence_length",
               "max_seq_length", "seq_len")
CONFIG_LIMITS.update(dict.fromkeys(LENGTH_KEYS, 1 << 28))
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
                        f"{shown(value)}; set {key} to the model's own value (a whole "
                        f"number >= {minimum}) from its published config.json")
    if value > limit:
        raise PlanError(f"{where}: {key}: {shown(value)} is more than {limit}, the largest "
                        f"{key} dockergen plans with; set {key} to the model's own value "
                        f"(from {minimum} to {limit}) from its published config.json")
    return value


def shown(value: object) -> str:
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
        model_type=str(cfg.get("model_type") or ""),
        lengths=tuple((k, _int(cfg, k, where)) for k in LENGTH_KEYS if cfg.get(k) is not None),
        **_rope(cfg, where),
        architectures=tuple(a for a in cfg.get("architectures") or () if isinstance(a, str)
                            )[:16] if isinstance(cfg.get("architectures"), list) else (),
        rope_is_neox_style=(cfg["rope_is_neox_style"]
                            if isinstance(cfg.get("rope_is_neox_style"), bool) else None),
    )


# transformers (5.19.0, within the pins of vLLM 0.33.0 and SGLang 0.5.23) reads
# rope_scaling as rope_parameters (modeling_rope_utils.py:752-755
# convert_rope_params_to_dict), takes a legacy "type" as the rope_type, "default" without
# either, and adds original_max_position_embeddings to a llama3/yarn/longrope set (:800-820
# standardize_rope_params). A dict keyed only by layer types is nested, one set per type
# (vllm 0.33.0 vllm/transformers_utils/config.py:222-230 is_rope_parameters_nested: the
# keys within transformers' ALLOWED_LAYER_TYPES, configuration_utils.py:65-88, or
# DeepSeek-V4's main/compress).
_ORIGINAL_ADDED = ("llama3", "yarn", "longrope")
_LAYER_TYPES = frozenset((
    "full_attention", "sliding_attention", "chunked_attention", "window_attention",
    "indexed_attention", "compressed_sparse_attention", "heavily_compressed_attention",
    "minimax_m3_sparse", "conv", "moe", "hybrid", "hybrid_sliding", "linear_attention",
    "sparse", "dense", "main", "compress"))


def _rope(cfg: dict[str, Any], where: str) -> dict[str, Any]:
    """The config's RoPE parameter sets, as the engines see them after transformers."""
    key = "rope_scaling" if cfg.get("rope_scaling") else "rope_parameters"
    params = cfg.get(key) or {}
    fix = (f"set {key} to the model's own RoPE parameters (an object with rope_type and "
           "factor) from its published config.json")
    if not isinstance(params, dict):
        raise PlanError(f"{where}: {key}: expected an object, got {shown(params)}; {fix}")
    nested = bool(params) and set(params) <= _LAYER_TYPES
    sets = ([v for v in params.values() if isinstance(v, dict) and v] if nested
            else [params] if params else [])
    rope = []
    for one in sets:
        rope_type = one.get("rope_type", one.get("type", "default"))
        factor = one.get("factor")
        if not isinstance(rope_type, str):
            raise PlanError(f"{where}: {key}: rope_type {shown(rope_type)} is not a name; "
                            f"{fix}")
        if factor is not None and (isinstance(factor, bool) or not isinstance(
                factor, (int, float)) or not 0 < factor <= 1024):
            raise PlanError(f"{where}: {key}: factor {shown(factor)} is not a number from "
                            f"0 to 1024; {fix}")
        original = "original_max_position_embeddings" in one or (
            not nested and rope_type in _ORIGINAL_ADDED)
        rope.append((rope_type, None if factor is None else float(factor), original))
    return {"rope": tuple(rope), "rope_nested": nested}


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

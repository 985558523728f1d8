"""What the plan counts from a model's shape: parameters, KV-cache bytes per token and layer."""

from __future__ import annotations

from dockergen.knowledge.models import ModelShape


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

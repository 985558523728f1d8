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

The parts: :mod:`.shapes` (the model's shape from its config, and its counts),
:mod:`.weights` (exact weight bytes from safetensors headers), :mod:`.capacity` (the plan
and the fit checks), :mod:`.table` (the readable plan); here: the profile side, the one
reader of the resolution.

Library code: raises :class:`PlanError` / :class:`ProfileError`, never prints.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dockergen.errors import Location, Problem, ProfileError
from dockergen.knowledge.models import (
    GIB,
    ModelShape,
    PlanError,
    builtin_models,
    load_shape,
    shape_from_config,
)
from dockergen.outputs.plan.capacity import (
    DEFAULT_OVERHEAD_GIB,
    Plan,
    PlanInputs,
    check_fit,
    check_tensor_parallel,
    make_plan,
    misfit_message,
)
from dockergen.outputs.plan.counts import count_params, kv_bytes_per_token_layer
from dockergen.outputs.plan.table import format_table
from dockergen.outputs.plan.weights import safetensors_bytes

if TYPE_CHECKING:
    from dockergen.pipeline import Resolution

__all__ = ["DEFAULT_OVERHEAD_GIB", "GIB", "ModelShape", "Plan", "PlanError", "PlanInputs",
           "builtin_models", "check_fit", "check_tensor_parallel", "count_params",
           "format_table", "kv_bytes_per_token_layer", "load_shape", "make_plan",
           "misfit_message", "plan_of", "profile_source", "safetensors_bytes",
           "shape_from_config", "validate_capacity"]


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
    for target in resolved.gpus:
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
            engine=p.engine.name, gpu_names=tuple(t.given for t in resolved.gpus),
            gpu_mem_gib=min(mems), weights=p.quantization.weights,
            kv_cache=p.quantization.kv_cache, tensor_parallel=s.tensor_parallel_size,
            max_model_len=s.max_model_len, gpu_memory_utilization=s.gpu_memory_utilization,
            max_num_batched_tokens=s.max_num_batched_tokens,
            env=tuple(sorted(s.env.items()))),
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
